"""The API's CLI commands: ``serve``, ``list`` and ``run --async``.

Kept out of ``cli.py`` (which only adds these arguments and dispatches), and
light to import: the server's modules (FastAPI, uvicorn, Spark) load only
for ``serve``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from streaming_engine.errors import EngineError, Location, Problem

COMMANDS = ("serve", "list")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("REST API (serve, list, run --async)")
    g.add_argument("--async", dest="async_run", action="store_true",
                   help="with 'run': submit the job to a running 'streaming-engine serve', print its job id and return")
    g.add_argument("--server", metavar="URL",
                   help="with 'run --async' and 'list': the server (default $STREAMING_ENGINE_SERVER, "
                        "else http://127.0.0.1:8080)")
    g.add_argument("--token-file", metavar="FILE",
                   help="the API token file (mode 0600; default <checkpoint.dir>/_api/token of the engine defaults); "
                        "'serve' creates it on first start")
    g.add_argument("--tls-ca", metavar="FILE", help="with 'run --async' and 'list': CA certificate(s) to trust for https")
    g.add_argument("--host", default=None, help="with 'serve': address to bind (default 127.0.0.1)")
    g.add_argument("--port", type=int, default=None, help="with 'serve': port (default 8080; 0: any free port)")
    g.add_argument("--tls-cert", metavar="FILE", help="with 'serve': serve https with this certificate (PEM)")
    g.add_argument("--tls-key", metavar="FILE", help="with 'serve': the certificate's private key (PEM)")
    g.add_argument("--allow-unrestricted", action="store_true",
                   help="with 'serve': let submitted jobs use plugins that run code or read local files "
                        "(default: refused, as with --restricted)")
    g.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                   help="with 'serve': largest request body accepted (default 1048576)")


def main(command: str, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if command == "serve":
        return _serve(args, parser)
    if command == "list":
        return _list(args)
    return _run_async(args, parser)


def _serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from streaming_engine.api.serve import DEFAULT_HOST, DEFAULT_PORT, serve

    if args.config:
        parser.error("'serve' takes no job file: submit jobs with 'run --async -c job.conf' or POST /submit-job")
    return serve(host=args.host or DEFAULT_HOST, port=DEFAULT_PORT if args.port is None else args.port,
                 token_file=args.token_file, tls_cert=args.tls_cert, tls_key=args.tls_key,
                 allow_unrestricted=args.allow_unrestricted, master=args.master, max_body=args.max_body)


def _token_path(args: argparse.Namespace) -> Path:
    from streaming_engine.api import auth
    from streaming_engine.config.models import parse_env

    if args.token_file:
        return Path(args.token_file)
    env, _ = parse_env({}, None, strict=False)
    return auth.default_token_file(env.checkpoint_dir)


def _client(args: argparse.Namespace):
    """A client with the token; without a token file, first whether a server answers at all."""
    from streaming_engine.api import auth
    from streaming_engine.api.client import Client, server_url

    url = server_url(args.server)
    path = _token_path(args)
    try:
        token = auth.read(path)
    except EngineError:
        Client(url, "-", args.tls_ca).request("GET", "/overview")  # API.NO_SERVER when nothing listens
        raise
    return Client(url, token, args.tls_ca)


def _no_server_hint(e: EngineError) -> None:
    print(f"error: {e}", file=sys.stderr)
    if e.condition == "API.NO_SERVER":
        print("  start one with: streaming-engine serve [--port 8080] [-m MASTER]   (it prints the URL it serves on)\n"
              "  or point --server (or $STREAMING_ENGINE_SERVER) at a running one", file=sys.stderr)


def _run_async(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if not args.config:
        parser.error("the following arguments are required: -c/--config")
    if args.variable:
        parser.error("run --async sends the job file as written: the server substitutes no -i variable (nor any "
                     "from its environment); write the values into the file, or run the job attached")
    path = Path(args.config)
    if not path.is_file():
        print(f"error: {EngineError('CONFIG.FILE_NOT_FOUND', {'path': str(path)})}", file=sys.stderr)
        return 1
    fmt = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(path.suffix.lower(), "hocon")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        print(f"error: {path} is not UTF-8 (invalid byte at offset {e.start})", file=sys.stderr)
        return 1
    try:
        client = _client(args)
        answer = client.submit(text, fmt, args.name, getattr(args, "restore", None))
    except EngineError as e:
        _no_server_hint(e)
        return 1
    body = answer.body if isinstance(answer.body, dict) else {}
    if answer.status == 200:
        job_id = body.get("jobId")
        print(job_id)
        print(f"job {body.get('jobName')!r} submitted to {client.server}: id {job_id} "
              f"(follow it: streaming-engine list, or GET {client.server}/job-info/{job_id})", file=sys.stderr)
        for w in body.get("warnings") or []:
            print(f"  {_problem(w, str(path))}", file=sys.stderr)
        return 0
    problems = body.get("problems") or []
    if problems:
        errors = [p for p in problems if p.get("severity") == "error"]
        print(f"{len(errors)} error{'s' if len(errors) != 1 else ''} in the job config (refused by {client.server}):",
              file=sys.stderr)
        for p in problems:
            print(f"  {_problem(p, str(path))}", file=sys.stderr)
        return 1
    print(f"error: {client.server} answered {answer.status}: {body.get('message', answer.body)}", file=sys.stderr)
    return 1


def stop_by_id(args: argparse.Namespace) -> int:
    """``stop --job-id ID [--savepoint]`` without a job file: the job runs in a server (``--server``)."""
    try:
        client = _client(args)
        answer = client.request("POST", "/stop-job", json.dumps({"jobId": args.job_id,
                                                                 "isStopWithSavePoint": bool(args.savepoint)}).encode(),
                                "application/json")
    except EngineError as e:
        _no_server_hint(e)
        return 1
    body = answer.body if isinstance(answer.body, dict) else {}
    if answer.status != 200:
        print(f"error: {client.server} answered {answer.status}: {body.get('message', answer.body)}", file=sys.stderr)
        return 1
    print(f"asked job {args.job_id} on {client.server} to stop{' with a savepoint' if args.savepoint else ''}; "
          f"follow it: streaming-engine list, or GET {client.server}/job-info/{args.job_id}", file=sys.stderr)
    return 0


def _problem(d: dict, file: str) -> Problem:
    loc = {k: v for k, v in (d.get("location") or {}).items() if k in Location.__dataclass_fields__}
    loc["file"] = file
    return Problem(d.get("condition", "CONFIG.INVALID_OPTION"), d.get("params") or {}, Location(**loc),
                   d.get("severity", "error"))


def _list(args: argparse.Namespace) -> int:
    try:
        client = _client(args)
        running = client.request("GET", "/running-jobs")
        finished = client.request("GET", "/finished-jobs") if running.status == 200 else running
    except EngineError as e:
        _no_server_hint(e)
        return 1
    for answer in (running, finished):
        if answer.status != 200:
            message = answer.body.get("message") if isinstance(answer.body, dict) else answer.body
            print(f"error: {client.server} answered {answer.status}: {message}", file=sys.stderr)
            return 1
    if args.format == "json":
        print(json.dumps({"server": client.server, "running": running.body, "finished": finished.body}, indent=2))
        return 0
    print(f"running jobs on {client.server}:" if running.body else f"no job running on {client.server}")
    for j in running.body:
        epochs = sum(int(p.get("epochs") or 0) for p in (j.get("pipelines") or {}).values())
        print(f"  {j['jobId']}  {j['jobName']:<24} {j['jobStatus']:<15} created {j.get('createTime')}  "
              f"epochs {epochs}  rows {j.get('metrics', {}).get('SinkWriteCount', '0')}")
    print("finished jobs:" if finished.body else "no finished job recorded")
    for j in finished.body:
        error = f"\n      error: {j['errorMsg']}" if j.get("errorMsg") else ""
        print(f"  {j['jobId']}  {j['jobName']:<24} {j['jobStatus']:<15} created {j.get('createTime')}  "
              f"ended {j.get('finishedTime')}{error}")
    return 0
