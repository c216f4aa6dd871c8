"""A real PostgreSQL 15 server (the Debian package) with ``wal_level=logical``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.components import ComponentError, ensure_debian_package, free_port, log_tail, run_as, stop_process

PG_BIN = Path(os.environ.get("STREAMING_ENGINE_PG_BIN", "/usr/lib/postgresql/15/bin"))


class PostgresServer:
    """A PostgreSQL server on a free 127.0.0.1 port; its log is ``workdir/postgres.log``.

    PostgreSQL refuses to run as root, so when the tests run as root the server runs
    as the ``postgres`` user (the subprocess switches user itself, so ``stop()``
    signals the postmaster's own pid). Its data directory is a fresh folder that
    user owns (``data_dir``; under the system temp dir, because pytest's temp dirs
    are private to root), removed by ``stop()`` unless ``keep_data``. Trust
    authentication, superuser ``postgres``, database ``postgres``.

    ``settings`` adds or overrides server settings (``-c name=value``).
    ``stop()``: SIGINT (fast shutdown), SIGQUIT after ``stop_timeout``, then SIGKILL.
    """

    user = "postgres"
    dbname = "postgres"
    host = "127.0.0.1"

    def __init__(
        self,
        workdir: str | Path,
        *,
        settings: dict[str, str] | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 20.0,
        keep_data: bool = False,
    ) -> None:
        self.workdir = Path(workdir)
        self.settings = dict(settings or {})
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.keep_data = keep_data
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.root: Path | None = None
        self.log_path = self.workdir / "postgres.log"

    @property
    def data_dir(self) -> Path:
        if self.root is None:
            raise ComponentError("PostgreSQL not started")
        return self.root / "data"

    @property
    def dsn(self) -> str:
        if self.port is None:
            raise ComponentError("PostgreSQL not started")
        return f"host={self.host} port={self.port} user={self.user} dbname={self.dbname}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _run_as(self) -> dict:
        """Popen arguments that run the child as the postgres user when we are root."""
        return run_as("postgres")

    def start(self) -> "PostgresServer":
        if self.proc is not None:
            raise ComponentError("PostgreSQL already started")
        ensure_debian_package(
            "postgresql-15", lambda: str(PG_BIN) if all((PG_BIN / t).is_file() for t in ("initdb", "postgres")) else None,
            "set STREAMING_ENGINE_PG_BIN to a PostgreSQL 15 bin folder")
        self.workdir.mkdir(parents=True, exist_ok=True)
        run_as = self._run_as()
        self.root = Path(tempfile.mkdtemp(prefix="streaming-engine-pg-"))
        if run_as:
            os.chown(self.root, run_as["user"], run_as["group"])
        try:
            with open(self.log_path, "ab") as log:
                init = subprocess.run(
                    [str(PG_BIN / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                     "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    cwd=self.root, timeout=120, **run_as,
                )
                if init.returncode != 0:
                    raise ComponentError(f"initdb failed (exit {init.returncode}):\n{log_tail(self.log_path)}")
                self.port = free_port()
                settings = {
                    "port": str(self.port),
                    "listen_addresses": self.host,
                    "unix_socket_directories": str(self.root),
                    "wal_level": "logical",
                    "max_replication_slots": "10",
                    "max_wal_senders": "10",
                    "fsync": "off",
                    "synchronous_commit": "off",
                    "full_page_writes": "off",
                    "shared_buffers": "32MB",
                    **self.settings,
                }
                args = [str(PG_BIN / "postgres"), "-D", str(self.data_dir)]
                for k, v in settings.items():
                    args += ["-c", f"{k}={v}"]
                self.proc = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, **run_as
                )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import psycopg2

        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                raise ComponentError(
                    f"PostgreSQL exited with code {self.proc.returncode} while starting:\n{log_tail(self.log_path)}"
                )
            ready = subprocess.run(
                [str(PG_BIN / "pg_isready"), "-q", "-h", self.host, "-p", str(self.port), "-t", "1"],
                stdin=subprocess.DEVNULL, capture_output=True,
            )
            if ready.returncode == 0:
                try:
                    psycopg2.connect(self.dsn, connect_timeout=2).close()
                    return
                except psycopg2.OperationalError:
                    pass
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"PostgreSQL on port {self.port} not ready within {self.start_timeout:.0f} s:\n"
                    f"{log_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            # SIGINT = fast shutdown (disconnects clients, including walsenders)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                stop_process(proc, first_signal=signal.SIGQUIT, timeout=5)
        if self.root is not None and not self.keep_data:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers -------------------------------------------------------------
    def connect(self, **kwargs):
        """A new psycopg2 connection (autocommit) to the server's ``postgres`` database."""
        import psycopg2

        conn = psycopg2.connect(self.dsn, **kwargs)
        conn.autocommit = True
        return conn

    def execute(self, sql: str, params=None) -> list[tuple] | None:
        """Run one statement (its own transaction); the rows when it returns any."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description is not None else None
        finally:
            conn.close()

    def replication_slots(self) -> list[str]:
        return [r[0] for r in self.execute("SELECT slot_name FROM pg_replication_slots ORDER BY 1")]
