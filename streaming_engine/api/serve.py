"""``streaming-engine serve``: the long-lived driver behind the REST API.

One Spark session for the server's life (SeaTunnel's session mode: the jobs
share one Spark application, each pipeline on a session of its own as in any
run), the app (:mod:`.app`) under uvicorn, and on SIGTERM/SIGINT an orderly
end: the HTTP server stops accepting, every running job is stopped (its end
recorded in the history table), then Spark stops.

Secure by default: a bearer token on every endpoint (:mod:`.auth`), bound to
127.0.0.1 unless ``--host`` says otherwise, TLS with ``--tls-cert/--tls-key``,
bodies limited to ``--max-body`` bytes, submitted jobs compiled in restricted
mode unless ``--allow-unrestricted``.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import sys
from pathlib import Path
from types import SimpleNamespace

from streaming_engine import redact
from streaming_engine.api import auth
from streaming_engine.errors import EngineError

log = logging.getLogger("streaming_engine.api")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket (so the real port is known before serving, and a
    port in use is said at once)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise EngineError("API.BIND", {"host": host, "port": port, "detail": str(e)}) from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise EngineError("API.BIND", {"host": host, "port": port, "detail": e.strerror or str(e)}) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _defaults():
    """The engine defaults' env (checkpoint root, history table, spark.* settings) and its raw form."""
    from streaming_engine.config.models import engine_defaults, parse_env

    raw = engine_defaults()
    env, problems = parse_env({}, None, strict=False)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        from streaming_engine.errors import ConfigError

        raise ConfigError(errors)
    return env, raw


def _heard(signum: int, frame: object) -> None:
    log.info("signal heard: stopping", extra={"signal": signal.Signals(signum).name})


class _NoColor(logging.Filter):
    """uvicorn adds a colored copy of its message to every record: not for log files."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.__dict__.pop("color_message", None)
        return True


def _secure_socket(host: str, port: int, token_file: str | None, tls_cert: str | None,
                   checkpoint_dir: str) -> "tuple[str, Path, socket.socket, str]":
    """The token (read, or generated into a 0600 file), the listening socket, the scheme."""
    token_path = Path(token_file) if token_file else auth.default_token_file(checkpoint_dir)
    token, created = auth.load_or_create(token_path)
    redact.remember([token])  # should it ever reach a log line or an error, it is masked there
    if created:
        print(f"API token generated: {token_path} (mode 0600; clients send it as 'Authorization: Bearer <token>')",
              file=sys.stderr)
    if not _loopback(host) and not tls_cert:
        log.warning("serving on a non-loopback address without TLS: the token and job configs cross the network "
                    "in clear text; use --tls-cert/--tls-key (or a TLS-terminating proxy)", extra={"host": host})
    return token, token_path, _bind(host, port), "https" if tls_cert else "http"


def _server(app, tls_cert: str | None, tls_key: str | None):
    import uvicorn

    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # through the engine's (redacting) handlers
        lg = logging.getLogger(name)
        lg.handlers = list(logging.getLogger("streaming_engine").handlers)
        lg.setLevel(logging.getLogger("streaming_engine").level)
        lg.propagate = False
        lg.filters = [_NoColor()]
    config = uvicorn.Config(app, log_config=None, access_log=True, lifespan="off", server_header=False,
                            proxy_headers=False, ssl_certfile=tls_cert, ssl_keyfile=tls_key,
                            timeout_graceful_shutdown=10, h11_max_incomplete_event_size=64 * 1024)
    return uvicorn.Server(config)


def _check_tls(tls_cert: str | None, tls_key: str | None) -> None:
    if bool(tls_cert) != bool(tls_key):
        raise EngineError("API.TLS", {"detail": "give both --tls-cert and --tls-key"})
    for name, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if path and not Path(path).is_file():
            raise EngineError("API.TLS", {"detail": f"{name} {path} is not a file"})


class ReadOnlyEndpoints:
    """The read-only endpoints of ONE attached run (``run --api-port``): job-info,
    running/finished jobs, overview, metrics, on a thread of the run's driver,
    behind the same token, TLS and limits as ``serve``; submit and stop answer 405."""

    def __init__(self, job, master, spark, *, host: str = DEFAULT_HOST, port: int = 0, token_file: str | None = None,
                 tls_cert: str | None = None, tls_key: str | None = None):
        import threading

        from streaming_engine.api.app import create_app
        from streaming_engine.api.jobs import JobService
        from streaming_engine.metrics.prometheus import PrometheusMetrics

        _check_tls(tls_cert, tls_key)
        env = job.dag.env
        token, token_path, sock, scheme = _secure_socket(host, port, token_file, tls_cert, env.checkpoint_dir)
        metrics = PrometheusMetrics()
        self.service = JobService(spark, master.spark_master, master.history_path, metrics=metrics)
        self.job = self.service.attach(job, master)
        self.server = _server(create_app(self.service, token, metrics=metrics, read_only=True), tls_cert, tls_key)
        bound = sock.getsockname()
        self.url = f"{scheme}://{f'[{bound[0]}]' if ':' in bound[0] else bound[0]}:{bound[1]}"
        self.token_path = token_path
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, name="api", daemon=True)
        self._thread.start()

    def close(self, error: str | None) -> None:
        from streaming_engine.api.jobs import JobService

        JobService.ended(self.job, error)
        self.server.should_exit = True
        self._thread.join(timeout=15)


def serve(*, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, token_file: str | None = None,
          tls_cert: str | None = None, tls_key: str | None = None, allow_unrestricted: bool = False,
          master: str = "local[2]", max_body: int | None = None) -> int:
    from streaming_engine.api.app import MAX_BODY, create_app
    from streaming_engine.api.jobs import JobService
    from streaming_engine.control import history
    from streaming_engine.metrics.prometheus import PrometheusMetrics
    from streaming_engine.runtime.session import build_spark_session, required_extras

    max_body = MAX_BODY if max_body is None else max_body
    if max_body < 1:
        raise EngineError("CLI.USAGE", {"detail": "--max-body must be at least 1 byte"})
    _check_tls(tls_cert, tls_key)

    env, raw_env = _defaults()
    redact.remember(redact.secret_values(raw_env))
    token, token_path, sock, scheme = _secure_socket(host, port, token_file, tls_cert, env.checkpoint_dir)
    extras = tuple(required_extras(SimpleNamespace(env=raw_env, blocks=[])))
    spark = build_spark_session("streaming-engine-server", master, conf=env.spark, extras=extras)
    history_path = history.history_path(env.checkpoint_dir, env.history_path)
    metrics = PrometheusMetrics()  # the server's registry: every job it runs attaches (served at /metrics)
    service = JobService(spark, master, history_path, restricted=not allow_unrestricted, metrics=metrics,
                         extras=extras)
    app = create_app(service, token, max_body, metrics)

    server = _server(app, tls_cert, tls_key)
    # uvicorn hands SIGTERM/SIGINT back to the handlers it found once it stopped serving, and raises
    # them again: with Python's defaults (or pyspark's SIGINT handler) the process would end right
    # there, before the running jobs are stopped and their ends recorded
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _heard)
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    print(f"streaming-engine API serving on {scheme}://{shown}:{bound[1]} (master {master}, history {history_path}, "
          f"token file {token_path}, {'unrestricted' if allow_unrestricted else 'restricted'} jobs)", file=sys.stderr)
    sys.stderr.flush()
    try:
        server.run(sockets=[sock])
    finally:
        print("streaming-engine API stopping: stopping the running jobs", file=sys.stderr)
        service.shutdown()
        spark.stop()
    return 0
