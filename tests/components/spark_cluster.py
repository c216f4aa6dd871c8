"""A real Spark standalone cluster: one master and N workers, started from
pyspark's own ``bin/spark-class`` (the wheel has no sbin scripts).

Each worker is a separate JVM with its own work directory, cores and memory;
executors it launches run there, so a job's Python code and files reach them
only the way they would on a real cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path

from tests.components import ComponentError, Server, free_ports, log_tail, stop_process, wait_until


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandaloneCluster(Server):
    """``with SparkStandaloneCluster(dir, workers=2) as c: c.url`` (spark://127.0.0.1:port)."""

    def __init__(self, workdir: str | Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.workdir = Path(workdir)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.master_proc: subprocess.Popen | None = None
        self.worker_procs: list[subprocess.Popen] = []
        self.port, self.web_port = free_ports(2)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _bound_ports(self) -> bool:
        """The ports the master really bound, read from its log. A port picked
        free may be taken by another process before the master binds it; Spark
        then retries the next port, and asking the picked one would ask a
        stranger (CI once read another Spark UI's HTML page there)."""
        try:
            text = (self.workdir / "master.log").read_text(errors="replace")
        except OSError:
            return False
        rpc = re.search(r"Starting Spark master at spark://[^:\s]+:(\d+)", text)
        ui = re.search(r"Successfully started service 'MasterUI' on port (\d+)", text)
        if not (rpc and ui):
            return False
        self.port, self.web_port = int(rpc.group(1)), int(ui.group(1))
        return True

    def worker_dir(self, i: int) -> Path:
        return self.workdir / f"worker-{i}"

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        home = _spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_DAEMON_MEMORY": "256m", "SPARK_NO_DAEMONIZE": "1",
               # no REST submission server: it binds the fixed port 6066, which two clusters would share
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        log = (self.workdir / f"{name}.log").open("wb")
        return subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=self.workdir, start_new_session=True)

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=5) as r:
            return json.load(r)

    def _alive(self) -> int:
        try:
            return int(self.state().get("aliveworkers", 0))
        except (OSError, ValueError):  # not up yet, or not the master's JSON
            return -1

    def start(self) -> "SparkStandaloneCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.master_proc = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                                  "--port", str(self.port), "--webui-port", str(self.web_port)])
        if not wait_until(lambda: self._bound_ports() and self._alive() >= 0, timeout=60, interval=0.5):
            raise ComponentError(f"the Spark master did not start:\n{log_tail(self.workdir / 'master.log')}")
        for i in range(self.workers):
            ui = free_ports(1)[0]
            self.worker_dir(i).mkdir(exist_ok=True)
            self.worker_procs.append(self._spawn(f"worker-{i}", [
                "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores",
                str(self.cores), "--memory", self.memory, "--webui-port", str(ui), "--work-dir",
                str(self.worker_dir(i))]))
        if not wait_until(lambda: self._alive() >= self.workers, timeout=90, interval=0.5):
            raise ComponentError(f"{self._alive()} of {self.workers} workers registered:\n"
                                 f"{log_tail(self.workdir / 'worker-0.log')}")
        return self

    def stop(self) -> None:
        for p in self.worker_procs:
            stop_process(p, timeout=10)
        stop_process(self.master_proc, timeout=10)

