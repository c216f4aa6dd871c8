"""Command line, in the style of SeaTunnel's starter.

    streaming-engine [run|check|explain|status|history|stop|plugins] -c job.conf [-i key=value ...]
                     [--check] [-n NAME] [-m MASTER] [-e client] [--strict] [--restricted]
                     [--format text|json|dot|mermaid]
    streaming-engine serve [--host 127.0.0.1] [--port 8080] [--token-file F] [--tls-cert C --tls-key K]
                     [--allow-unrestricted] [-m MASTER]          (the REST API: streaming_engine/api)
    streaming-engine run --async -c job.conf [--server URL] [--token-file F]; streaming-engine list [--server URL]

Exit codes: 0 success, 1 the job (config or run) failed, 2 bad command line
(also ``-e cluster``: not supported yet). Bad input never shows a Python
traceback: problems are printed, each with file, plugin block and key.
Everything printed and logged is redacted (:mod:`streaming_engine.redact`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Sequence

from streaming_engine import logs, redact
from streaming_engine.errors import ConfigError, EngineError, Problem
from streaming_engine.plan.render import FORMATS, render
from streaming_engine.runtime.session import inside_spark_submit, required_extras

COMMANDS = ("run", "check", "explain", "status", "history", "stop", "plugins")
COMMANDS += ("serve", "list")  # the REST API's (streaming_engine/api/commands.py)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="streaming-engine",
        description="Run SeaTunnel-style job configs on Spark Structured Streaming with exactly-once Delta sinks.",
    )
    p.add_argument("command", nargs="?", choices=COMMANDS, default=None, help="default: run (check with --check)")
    p.add_argument("plugin", nargs="?", default=None, help="with 'plugins': show one plugin's options")
    p.add_argument("-c", "--config", help="job file (.conf HOCON, .yaml/.yml, .json)")
    p.add_argument("-i", "--variable", action="append", default=[], metavar="KEY=VALUE",
                   help="value for ${KEY} in the job file (repeatable; the environment is used too)")
    p.add_argument("--check", action="store_true", help="only validate the config (same as the 'check' command)")
    p.add_argument("-n", "--name", help="job name (overrides env.job.name)")
    p.add_argument("-m", "--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("-e", "--deploy-mode", default="client", choices=("client", "cluster"),
                   help="Spark deploy mode: client (default); cluster through ./spark-submit.sh only")
    p.add_argument("--strict", action="store_true", help="unknown options are errors, not warnings")
    p.add_argument("--restricted", action="store_true",
                   help="refuse plugins that run code or read local files (README, Security)")
    p.add_argument("--format", default="text", choices=FORMATS, help="output format of explain/check")
    p.add_argument("--log-format", default="text", choices=("text", "json"), help="structured log format")
    p.add_argument("--log-level", default="WARNING", help="log level (default WARNING)")
    p.add_argument("--job-id", help="with 'history': the state changes of one job (without -c: in the engine defaults' "
                                    "history table); with 'stop' and no -c: stop that job of a server (--server)")
    p.add_argument("-r", "--restore", metavar="JOB_ID",
                   help="with 'run': continue from the savepoint of that job id (a plan diff first refuses changes "
                        "that would corrupt the targets)")
    p.add_argument("-s", "--savepoint", action="store_true",
                   help="with 'stop': let every running epoch commit, start no new one, record a savepoint")
    p.add_argument("--timeout", type=float, default=600.0, help="with 'stop': seconds to wait for the job's end")
    p.add_argument("-q", "--quiet", action="store_true", help="with 'run': no progress display")
    p.add_argument("--api-port", type=int, default=None, metavar="PORT",
                   help="with 'run': serve this run's read-only REST endpoints (job-info, running/finished jobs, "
                        "overview, metrics) on PORT (0: any free port), behind the API token (--token-file, "
                        "--host, --tls-cert/--tls-key as for serve)")
    p.add_argument("--progress-interval", type=float, default=10.0, metavar="SECONDS",
                   help="with 'run' when not on a terminal: a progress line per pipeline at most this often")
    p.add_argument("--all", action="store_true", help="with 'history': every job of the history table, not only this one")
    _api_arguments(p)
    return p


def _api_arguments(p: argparse.ArgumentParser) -> None:
    from streaming_engine.api.commands import add_arguments

    add_arguments(p)


def _api_command(command: str, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """serve, list, run --async: streaming_engine/api/commands.py."""
    from streaming_engine.api import commands

    return commands.main(command, args, parser)


def main(argv: Sequence[str] | None = None) -> int:
    with redact.redacting_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_format, args.log_level)
    redact.install_log_filter(logging.getLogger("streaming_engine"))
    command = args.command or ("check" if args.check else "run")
    if args.deploy_mode != "client" and not inside_spark_submit():
        print(f"error: {EngineError('CLI.UNSUPPORTED_DEPLOY_MODE', {'mode': args.deploy_mode})}", file=sys.stderr)
        return 2
    try:
        if command == "plugins":
            return _plugins(args.plugin)
        if command in ("serve", "list") or (command == "run" and args.async_run):
            return _api_command(command, args, parser)
        if command == "stop" and args.job_id and not args.config:  # a job of a server, by its id
            from streaming_engine.api.commands import stop_by_id

            return stop_by_id(args)
        if command == "history" and args.job_id and not args.config:  # the engine defaults' history table
            return _history(None, args)
        if not args.config:
            parser.error("the following arguments are required: -c/--config")
        if args.plugin:
            parser.error(f"unexpected argument {args.plugin!r}")
        return _with_job(command, args)
    except ConfigError as e:
        _print_problems(e.problems, args.format)
        return 1
    except EngineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _with_job(command: str, args: argparse.Namespace) -> int:
    from streaming_engine.config.loader import parse_variables
    from streaming_engine.job import compile_file

    variables = parse_variables(args.variable)
    redact.remember(redact.secret_values(variables))
    job = compile_file(args.config, variables, strict=args.strict, job_name=args.name, restricted=args.restricted)
    _print_problems(job.dag.warnings, "text")
    if command == "check":
        if args.format == "json":
            print(json.dumps({"ok": True, "warnings": [w.to_dict() for w in job.dag.warnings]}, indent=2))
        else:
            n = len(job.plan.pipelines)
            print(f"OK: {args.config} is valid ({len(job.dag.vertices)} plugins, {n} pipeline{'s' if n != 1 else ''})")
        return 0
    if command == "explain":
        sys.stdout.write(render(job, args.format))
        return 0
    if command == "status":
        return _status(job, args)
    if command == "history":
        return _history(job, args)
    if command == "stop":
        return _stop(job, args)
    return _run(job, args)


def _status(job, args: argparse.Namespace) -> int:
    """The last committed epoch per pipeline, sink and table, from the commit ledger."""
    from streaming_engine.checkpoint import ledger
    from streaming_engine.plan.physical import slug
    from streaming_engine.runtime.session import build_spark_session

    path = ledger.ledger_path(job.dag.env.checkpoint_dir, slug(job.dag.job_name))
    spark = build_spark_session(f"{job.dag.job_name}-status", args.master, conf=job.dag.env.spark,
                                extras=required_extras(job.raw))
    rows = ledger.last_committed(spark, path)
    if args.format == "json":
        print(json.dumps({"job": job.dag.job_name, "ledger": path, "tables": rows}, indent=2, default=str))
        return 0
    if not rows:
        print(f"job {job.dag.job_name!r}: nothing committed yet (ledger {path})")
        return 0
    print(f"job {job.dag.job_name!r} (ledger {path}):")
    for r in rows:
        print(
            f"  {r['pipeline']:<16} {r['sink']:<24} {r['table']:<24} last epoch {r['last_epoch']:<5} "
            f"delta version {r['delta_version']}  rows {r['total_rows']}  -> {r['target']}"
        )
    return 0


def _run(job, args: argparse.Namespace) -> int:
    """Run attached, under a job master: its id first, its end state's exit code last."""
    from streaming_engine.control.master import JobMaster
    from streaming_engine.runtime.runner import print_result

    master = JobMaster(job, master=args.master)
    print(f"job {job.dag.job_name!r} id {master.job_id} (history: {master.history_path})", file=sys.stderr)
    spark, endpoints = None, None
    if args.api_port is not None:
        from streaming_engine.api.serve import DEFAULT_HOST, ReadOnlyEndpoints
        from streaming_engine.runtime.session import build_spark_session

        spark = build_spark_session(job.dag.job_name, args.master, conf=job.dag.env.spark,
                                    extras=required_extras(job.raw))
        endpoints = ReadOnlyEndpoints(job, master, spark, host=args.host or DEFAULT_HOST, port=args.api_port,
                                      token_file=args.token_file, tls_cert=args.tls_cert, tls_key=args.tls_key)
        print(f"read-only API of this run on {endpoints.url} (token file {endpoints.token_path})", file=sys.stderr)
    progress = None
    if not args.quiet:
        from streaming_engine.control.progress import Progress

        progress = Progress(master, interval=args.progress_interval)
        progress.start()
    result = None
    try:
        result = master.run(spark=spark, count_rows=True, restore=args.restore)
    finally:
        if progress is not None:
            progress.stop()
        if endpoints is not None:
            endpoints.close(result.error if result is not None else "the run ended with an error")
    if master.restored is not None:
        changes = master.restored.allowed or ["none"]
        print(f"restored from the savepoint of job {args.restore}; changes: " + "; ".join(changes), file=sys.stderr)
    print_result(job, result)
    if result.status == "SAVEPOINT_DONE":
        print(f"savepoint: {master.savepoint_path(master.job_id)} (continue with: run -c <job file> "
              f"--restore {master.job_id})")
    return result.exit_code


def _stop(job, args: argparse.Namespace) -> int:
    """Ask the running instance of the job (any host: through its lease) to
    stop, with --savepoint to drain and record a savepoint; wait for its end."""
    import os
    import socket
    import time

    from streaming_engine.control import history
    from streaming_engine.control.lease import Lease
    from streaming_engine.control.master import JobMaster
    from streaming_engine.runtime.session import build_spark_session

    env = job.dag.env
    master = JobMaster(job)  # only for where its lease and history are
    spark = build_spark_session(f"{job.dag.job_name}-stop", args.master, conf=env.spark, extras=required_extras(job.raw))
    lease = Lease(spark, master.lease_path, job.dag.job_name, "-", env.job_lease_seconds)
    holder = lease.request_stop(args.savepoint, f"{socket.gethostname()}:{os.getpid()}")
    print(f"asked job {holder.job_id} ({holder.host}:{holder.pid}) to stop"
          f"{' with a savepoint' if args.savepoint else ''}", file=sys.stderr)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        now = lease.current()
        if now is None or now.generation != holder.generation or not now.live(time.time()):
            break
        time.sleep(0.5)
    else:
        print(f"error: job {holder.job_id} has not ended within {args.timeout:g} s; it was asked to stop", file=sys.stderr)
        return 1
    for _ in range(20):  # its end state is written just before it releases the lease
        rows = history.jobs(spark, master.history_path, job_id=holder.job_id)
        if rows and rows[0]["finished"]:
            break
        time.sleep(0.5)
    state = rows[0]["state"] if rows else "UNKNOWABLE"
    print(f"job {holder.job_id} {state}" + (f": {rows[0]['error']}" if rows and rows[0]["error"] else ""))
    if state == "SAVEPOINT_DONE":
        print(f"continue with: streaming-engine run -c <job file> --restore {holder.job_id}")
    return 0 if state in ("SAVEPOINT_DONE", "CANCELED", "FINISHED") else 1


def _history(job, args: argparse.Namespace) -> int:
    """The jobs in the history table (this job's, or --all), or one job's state changes (--job-id)."""
    from streaming_engine.control import history
    from streaming_engine.runtime.session import build_spark_session

    if job is not None:
        env, name, extras = job.dag.env, job.dag.job_name, required_extras(job.raw)
    else:  # by job id alone: the history table of the engine defaults' checkpoint root
        from streaming_engine.config.models import parse_env

        env, name, extras = parse_env({}, None, strict=False)[0], "history", ()
    path = history.history_path(env.checkpoint_dir, env.history_path)
    spark = build_spark_session(f"{name}-history", args.master, conf=env.spark, extras=extras)
    if args.job_id:
        rows = history.transitions(spark, path, args.job_id)
        if not rows:
            print(f"error: no job with id {args.job_id} in {path}", file=sys.stderr)
            return 1
    else:
        rows = history.jobs(spark, path, name=None if args.all or job is None else job.dag.job_name)
    if args.format == "json":
        print(json.dumps({"history": path, "rows": rows}, indent=2, default=str))
        return 0
    if not rows:
        print(f"no job recorded in {path}")
        return 0
    if args.job_id:
        for r in rows:
            cause = f"  ({r['cause']})" if r["cause"] else ""
            print(f"{r['at']}  {r['entity']:<16} {r['previous'] or '-':>15} -> {r['state']:<15}{cause}")
        return 0
    for r in rows:
        end = f"ended {r['finished']}" if r["finished"] else "no end recorded"
        error = f"\n    error: {r['error']}" if r["error"] and r["state"] != "FINISHED" else ""
        print(f"{r['job_id']}  {r['job_name']:<20} {r['state']:<15} created {r['created']}  {end}{error}")
    return 0


def _print_problems(problems: Sequence[Problem], fmt: str) -> None:
    if not problems:
        return
    if fmt == "json":
        print(json.dumps({"ok": False, "problems": [p.to_dict() for p in problems]}, indent=2), file=sys.stderr)
        return
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        print(f"{len(errors)} error{'s' if len(errors) != 1 else ''} in the job config:", file=sys.stderr)
    for p in problems:
        print(f"  {p}", file=sys.stderr)


def _plugins(name: str | None) -> int:
    from streaming_engine.plugins.registry import REGISTRIES

    if name is None:
        for kind, reg in REGISTRIES.items():
            print(f"{kind}s: {', '.join(reg.names())}")
        return 0
    found = [(kind, cls) for kind, reg in REGISTRIES.items() if (cls := reg.find(name)) is not None]
    for i, (kind, cls) in enumerate(found):  # every kind of that name (Delta, Kafka, LocalFile: a source and a sink)
        print(f"{'' if i == 0 else chr(10)}{cls.name} ({kind}){': ' + cls.description if cls.description else ''}")
        for fname, f in cls.Options.model_fields.items():
            key = f.alias or fname
            req = "required" if f.is_required() else f"default {f.default!r}"
            print(f"  {key:<28} {req:<24} {f.description or ''}")
    if not found:
        print(f"error: no plugin named {name!r}", file=sys.stderr)
        return 1
    return 0
