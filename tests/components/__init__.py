"""Real servers for the CDC tests, started as subprocesses on free 127.0.0.1 ports.

* ``KafkaBroker`` (``tests.components.kafka``): Apache Kafka 4.4, KRaft, one node;
* ``PostgresServer`` (``tests.components.postgres``): the Debian PostgreSQL 15,
  ``wal_level=logical``;
* ``DebeziumPostgresToKafka`` (``tests.components.debezium``): the Debezium embedded
  engine (``java/DebeziumToKafka.java``) capturing PostgreSQL tables into Kafka;
* ``PrometheusServer`` (``tests.components.prometheus``): the Debian Prometheus,
  installed with apt-get when missing, scraping the engine's metrics endpoint.

Their jars are fetched by ``scripts/fetch_components.py`` (into the git-ignored
``.components/``); every class calls ``ensure()`` itself. Pytest fixtures are in
``tests.components.fixtures``.

This module holds what the three share: free ports, stopping a process by its pid,
the tail of a log.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.jvm import C1_ONLY

PROJECT_ROOT = Path(__file__).resolve().parents[2]

__all__ = ["KafkaBroker", "PostgresServer", "DebeziumPostgresToKafka", "PrometheusServer", "ComponentError"]


class ComponentError(RuntimeError):
    """A server did not start (or stop) as expected; the message has its log's tail."""


def __getattr__(name: str):  # lazy re-exports: `from tests.components import KafkaBroker`
    if name == "KafkaBroker":
        from tests.components.kafka import KafkaBroker

        return KafkaBroker
    if name == "PostgresServer":
        from tests.components.postgres import PostgresServer

        return PostgresServer
    if name == "DebeziumPostgresToKafka":
        from tests.components.debezium import DebeziumPostgresToKafka

        return DebeziumPostgresToKafka
    if name == "PrometheusServer":
        from tests.components.prometheus import PrometheusServer

        return PrometheusServer
    raise AttributeError(name)


class Server:
    """``start()``/``stop()`` as a context manager: a start that fails half-way stops what it started."""

    def __enter__(self):
        try:
            return self.start()  # type: ignore[attr-defined]
        except BaseException:
            self.stop()  # type: ignore[attr-defined]
            raise

    def __exit__(self, *exc) -> None:
        self.stop()  # type: ignore[attr-defined]


def ensure_component(name: str) -> Path:
    """``scripts/fetch_components.py``'s ``ensure(name)``: the component's folder."""
    path = PROJECT_ROOT / "scripts" / "fetch_components.py"
    spec = importlib.util.spec_from_file_location("_fetch_components", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return module.ensure(name)
    except module.FetchError as exc:
        raise ComponentError(str(exc)) from None


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ComponentError("java not found: install a Java 17+ runtime or set JAVA_HOME")
    return found


# Short-lived test JVMs on 2 cores: C1 only, serial GC.
JVM_TEST_FLAGS = [*C1_ONLY, "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


def ensure_debian_package(package: str, find, hint: str) -> str:
    """What ``find()`` finds (a binary's path), installing the Debian
    ``package`` first when it finds nothing: apt-get as root, non-interactive,
    ``apt-get update`` once when the install fails on old or missing package
    lists. One install at a time per machine (pytest-xdist workers share it: a
    file lock), waiting for apt's own lock when another apt-get runs. ``hint``:
    what a user can do instead (an environment variable naming the binary)."""
    import fcntl
    import tempfile

    found = find()
    if found is not None:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise ComponentError(f"{package} is not installed and cannot be installed here (needs apt-get as root): "
                             f"`sudo apt-get install -y --no-install-recommends {package}`, or {hint}")
    tmp = Path(tempfile.gettempdir())
    log_path = tmp / f"streaming-engine-install-{package}.log"
    with open(tmp / f"streaming-engine-install-{package}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find()  # another worker installed it meanwhile
        if found is not None:
            return found
        install = ["apt-get", "install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300", package]
        if _apt(install, log_path) != 0:  # no package lists yet, or old ones: update once, then again
            if _apt(["apt-get", "update", "-o", "DPkg::Lock::Timeout=300"], log_path) != 0:
                raise ComponentError(f"apt-get update failed; cannot install {package}:\n{log_tail(log_path)}")
            if _apt(install, log_path) != 0:
                raise ComponentError(f"apt-get install {package} failed:\n{log_tail(log_path)}")
    found = find()
    if found is None:
        raise ComponentError(f"apt-get installed {package} but its program is still missing:\n{log_tail(log_path)}")
    return found


def _apt(args: list[str], log_path: Path) -> int:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", NEEDRESTART_MODE="a")
    with open(log_path, "ab") as log:
        log.write(f"\n$ {' '.join(args)}\n".encode())
        log.flush()
        return subprocess.run(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                              timeout=900).returncode


def run_as(user: str, home: str | None = None, why: str = "") -> dict:
    """Popen arguments that run a server as ``user`` when we are root (servers
    such as PostgreSQL refuse root); {} when we are not root."""
    import pwd

    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise ComponentError(f"running as root but there is no {user!r} user to run the server{why}") from None
    env = dict(os.environ, HOME=home or pw.pw_dir, USER=user, LOGNAME=user)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "env": env}


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """n distinct free ports (all sockets held open while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def stop_process(
    proc: subprocess.Popen | None,
    *,
    timeout: float = 20.0,
    first_signal: int = signal.SIGTERM,
    kill_timeout: float = 10.0,
) -> int | None:
    """Stop ``proc`` by its own pid: ``first_signal``, then SIGKILL after ``timeout``.

    Returns the exit code (None if the process was never started)."""
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            proc.send_signal(first_signal)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=kill_timeout)
    return proc.returncode


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
