"""A real Prometheus server (the Debian package ``prometheus``) scraping given targets.

``PrometheusServer.start()`` installs the package when its binary is missing
(``ensure_prometheus``: apt-get, non-interactive, as root; a clear error where
that cannot work), writes a configuration that scrapes ``targets`` every
``scrape_interval``, starts the server on a free 127.0.0.1 port and returns
once ``/-/ready`` answers. ``query(expr)`` runs an instant query over the
HTTP API (``GET /api/v1/query``); ``wait_for_scrape(after)`` waits for a
scrape of every target that started after a given time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tests.components import ComponentError, ensure_debian_package, free_port, log_tail, run_as, stop_process

PACKAGE = "prometheus"
USER = "prometheus"  # the Debian package's system user


def ensure_prometheus() -> str:
    """The ``prometheus`` binary (``STREAMING_ENGINE_PROMETHEUS``, else on
    PATH), installing the Debian package first when it is missing."""
    return ensure_debian_package(PACKAGE, _binary, "set STREAMING_ENGINE_PROMETHEUS=/path/to/prometheus")


def _binary() -> str | None:
    configured = os.environ.get("STREAMING_ENGINE_PROMETHEUS")
    if configured:
        if not Path(configured).is_file():
            raise ComponentError(f"STREAMING_ENGINE_PROMETHEUS={configured}: no such file")
        return configured
    return shutil.which("prometheus")


class PrometheusServer:
    """Prometheus on a free 127.0.0.1 port scraping ``targets`` ("host:port"
    of /metrics endpoints) every ``scrape_interval``; its log is
    ``workdir/prometheus.log``.

    As root the server runs as the package's ``prometheus`` user (the
    subprocess switches user itself, so ``pid`` is the server's own and
    ``stop()`` signals it), with its configuration and TSDB in a fresh folder
    that user owns (under the system temp dir: pytest's temp dirs are private
    to root), removed by ``stop()``. The scrape keeps the targets' own ``job``
    label (``honor_labels``: the engine's metrics are labelled by job name).
    ``stop()``: SIGTERM, SIGKILL after ``stop_timeout``.
    """

    host = "127.0.0.1"
    scrape_job = "streaming_engine"

    def __init__(
        self,
        workdir: str | Path,
        targets: list[str],
        *,
        scrape_interval: str = "1s",
        start_timeout: float = 30.0,
        stop_timeout: float = 20.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.root: Path | None = None
        self.log_path = self.workdir / "prometheus.log"

    @property
    def url(self) -> str:
        if self.port is None:
            raise ComponentError("Prometheus not started")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _run_as(self) -> dict:
        return run_as(USER, str(self.root), f" (the Debian package {PACKAGE} creates it)")

    def config_text(self) -> str:
        return "\n".join([
            "global:",
            f"  scrape_interval: {self.scrape_interval}",
            f"  scrape_timeout: {self.scrape_interval}",
            f"  evaluation_interval: {self.scrape_interval}",
            "scrape_configs:",
            f"  - job_name: {self.scrape_job}",
            "    honor_labels: true",
            "    static_configs:",
            f"      - targets: {json.dumps(self.targets)}",
            "",
        ])

    def start(self) -> "PrometheusServer":
        if self.proc is not None:
            raise ComponentError("Prometheus already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        binary = ensure_prometheus()
        self.root = Path(tempfile.mkdtemp(prefix="streaming-engine-prometheus-"))
        try:
            run_as = self._run_as()
            config = self.root / "prometheus.yml"
            config.write_text(self.config_text(), encoding="utf-8")
            (self.root / "data").mkdir()
            if run_as:
                for path in (self.root, config, self.root / "data"):
                    os.chown(path, run_as["user"], run_as["group"])
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [binary, f"--config.file={config}", f"--storage.tsdb.path={self.root / 'data'}",
                     f"--web.listen-address={self.host}:{self.port}"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, **run_as,
                )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                raise ComponentError(
                    f"Prometheus exited with code {self.proc.returncode} while starting:\n{log_tail(self.log_path)}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"Prometheus on port {self.port} not ready within {self.start_timeout:.0f} s:\n"
                    f"{log_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc, timeout=self.stop_timeout, first_signal=signal.SIGTERM)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> "PrometheusServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- HTTP API ------------------------------------------------------------
    def api(self, path: str, **params: str) -> dict:
        """``GET /api/v1/<path>?params``: the response's ``data``; a clear error
        with Prometheus' own message when it answers ``status: error``."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:  # 400/422: a bad query; the body says why
            body = json.load(e)
        if body.get("status") != "success":
            raise ComponentError(f"Prometheus {path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """An instant query: ``[{"metric": {labels}, "value": [ts, "text"]}, ...]``."""
        data = self.api("query", query=expr)
        if data["resultType"] != "vector":
            raise ComponentError(f"{expr}: a {data['resultType']}, not an instant vector")
        return data["result"]

    def wait_for_scrape(self, after: float, timeout: float = 30.0) -> None:
        """Until every target has been scraped successfully by a scrape that
        started after ``after`` (a ``time.time()``)."""
        # timestamp() of a plain selector is the sample's own time: when the scrape started
        selector = f'up{{job="{self.scrape_job}"}}'
        deadline = time.monotonic() + timeout
        while True:
            scraped = {s["metric"].get("instance"): float(s["value"][1]) for s in self.query(f"timestamp({selector})")}
            if set(scraped) >= set(self.targets) and min(scraped.values()) > after:
                up = {s["metric"].get("instance"): s["value"][1] for s in self.query(selector)}
                if all(up.get(t) == "1" for t in self.targets):
                    return
            if time.monotonic() > deadline:
                targets = [(t.get("scrapeUrl"), t.get("health"), t.get("lastError"))
                           for t in self.api("targets")["activeTargets"]]
                raise ComponentError(f"no successful scrape of {self.targets} after {after:.3f} within "
                                     f"{timeout:.0f} s (last: {scraped}; targets: {targets})")
            time.sleep(0.2)
