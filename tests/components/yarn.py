"""A real YARN: Hadoop's mini cluster (a ResourceManager, NodeManagers and a
JobHistoryServer in one JVM, ``org.apache.hadoop.mapreduce.MiniHadoopClusterManager``
from the Hadoop version pyspark ships), started from ``.components/yarn``.

Containers are real processes the NodeManager launches (``launch_container.sh``),
as the user running the tests; the default file system is the local one, so
Spark's staging directory, the job's files and Delta tables are local paths.
``conf_dir`` holds ``yarn-site.xml`` and ``core-site.xml`` (the cluster's whole
configuration, as the mini cluster wrote it): point ``HADOOP_CONF_DIR`` and
``YARN_CONF_DIR`` at it (``env()``) and ``spark-submit --master yarn`` finds the
ResourceManager. Every port is picked free and set (the mini cluster's fixed-port
mode keeps Hadoop's defaults, 8030/8031/8088..., for the ones it is not given).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

from tests.components import (
    JVM_TEST_FLAGS, ComponentError, Server, ensure_component, free_ports, java, log_tail, stop_process, wait_until,
)


class MiniYarnCluster(Server):
    """``with MiniYarnCluster(dir, nodemanagers=1, memory_mb=6144) as y: y.env()``."""

    def __init__(self, workdir: str | Path, nodemanagers: int = 1, memory_mb: int = 6144, vcores: int = 8):
        self.workdir = Path(workdir)
        self.nodemanagers = nodemanagers
        self.memory_mb = memory_mb
        self.vcores = vcores
        self.proc: subprocess.Popen | None = None
        (self.rm_port, self.scheduler_port, self.tracker_port, self.admin_port, self.web_port,
         self.jhs_port, self.jhs_web_port, self.jhs_admin_port) = free_ports(8)

    @property
    def conf_dir(self) -> Path:
        return self.workdir / "conf"

    @property
    def log_path(self) -> Path:
        return self.workdir / "yarn.log"

    def env(self) -> dict[str, str]:
        """What spark-submit needs to find this cluster."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def spark_archive(self) -> str:
        """``spark.yarn.archive`` for this cluster's jobs: Spark's jars in one
        uncompressed zip, built once per cluster, as a YARN user keeps it on the
        cluster's file system. Without it every submission zips the ~450 MB of
        jars again (deflate: ~12 CPU-s here) and each application unzips them."""
        import zipfile

        import pyspark

        archive = self.workdir / "spark-libs.zip"
        if not archive.exists():
            jars = Path(pyspark.__file__).parent / "jars"
            partial = archive.with_suffix(".partial")
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as z:
                for jar in sorted(jars.glob("*.jar")):
                    z.write(jar, jar.name)
            partial.replace(archive)
        return archive.resolve().as_uri()

    def _settings(self) -> dict[str, str]:
        at = "127.0.0.1:{}".format
        return {
            "yarn.resourcemanager.scheduler.address": at(self.scheduler_port),
            "yarn.resourcemanager.resource-tracker.address": at(self.tracker_port),
            "yarn.resourcemanager.admin.address": at(self.admin_port),
            "yarn.resourcemanager.webapp.address": at(self.web_port),
            "mapreduce.jobhistory.webapp.address": at(self.jhs_web_port),
            "mapreduce.jobhistory.admin.address": at(self.jhs_admin_port),
            "yarn.nodemanager.resource.memory-mb": str(self.memory_mb),
            "yarn.nodemanager.resource.cpu-vcores": str(self.vcores),
            "yarn.scheduler.minimum-allocation-mb": "256",
            "yarn.scheduler.maximum-allocation-mb": str(self.memory_mb),
            # the machine's memory is shared with the test's own JVMs: no per-container memory policing
            "yarn.nodemanager.vmem-check-enabled": "false",
            "yarn.nodemanager.pmem-check-enabled": "false",
            # a nearly full disk must not mark the only node unhealthy
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99.9",
            # as on a real cluster, a finished application's container logs are aggregated (here into a
            # folder of the local file system) for `yarn logs`; the NodeManager keeps its local copies too
            # two queues, as a shared cluster has them (jobs go to `default` unless they name one)
            "yarn.scheduler.capacity.root.queues": "default,etl",
            "yarn.scheduler.capacity.root.default.capacity": "50",
            "yarn.scheduler.capacity.root.etl.capacity": "50",
            "yarn.log-aggregation-enable": "true",
            "yarn.nodemanager.remote-app-log-dir": str(self.workdir.resolve() / "app-logs"),
            "yarn.nodemanager.delete.debug-delay-sec": "3600",
        }

    def start(self) -> "MiniYarnCluster":
        home = ensure_component("yarn")
        self.workdir.mkdir(parents=True, exist_ok=True)
        written = self.workdir / "cluster.xml"
        written.unlink(missing_ok=True)
        cmd = [java(), "-Xmx768m", *JVM_TEST_FLAGS, "-cp", f"{home / 'libs' / '*'}",
               "org.apache.hadoop.mapreduce.MiniHadoopClusterManager", "-nodfs",
               "-nodemanagers", str(self.nodemanagers), "-rmport", str(self.rm_port), "-jhsport", str(self.jhs_port),
               "-writeConfig", str(written)]
        for k, v in self._settings().items():
            cmd += ["-D", f"{k}={v}"]
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.workdir, start_new_session=True)
        finally:
            log.close()
        def complete() -> bool:  # the manager creates the file, then writes it: a look in between finds it empty
            try:
                return written.read_text().rstrip().endswith("</configuration>")
            except OSError:
                return False

        if not wait_until(lambda: complete() and self._nodes() >= self.nodemanagers or self.proc.poll() is not None,
                          timeout=120, interval=0.5) or self.proc.poll() is not None:
            raise ComponentError(f"YARN did not start ({self._nodes()} NodeManagers):\n{log_tail(self.log_path)}")
        self.conf_dir.mkdir(exist_ok=True)
        for name in ("yarn-site.xml", "core-site.xml"):
            shutil.copyfile(written, self.conf_dir / name)
        return self

    def rest(self, path: str) -> dict:
        """The ResourceManager's REST API (``/ws/v1/cluster/...``)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/ws/v1/cluster/{path}", timeout=5) as r:
            return json.load(r)

    def _nodes(self) -> int:
        try:
            return int(self.rest("metrics")["clusterMetrics"]["activeNodes"])
        except (OSError, ValueError, KeyError):
            return -1

    def applications(self) -> list[dict]:
        """Every application the ResourceManager knows (id, name, state, finalStatus, diagnostics, ...)."""
        return (self.rest("apps").get("apps") or {}).get("app") or []

    def logs(self, *args: str) -> subprocess.CompletedProcess:
        """``yarn logs ARGS`` (Hadoop's LogsCLI, what the yarn command runs) against this cluster."""
        home = ensure_component("yarn")
        return subprocess.run([java(), *JVM_TEST_FLAGS, "-cp", f"{self.conf_dir}:{home / 'libs' / '*'}",
                               "org.apache.hadoop.yarn.client.cli.LogsCLI", *args],
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    def container_log(self, container_id: str, name: str = "stderr") -> Path:
        """A container's log file (``stdout``/``stderr``) in the NodeManager's log folder (no aggregation)."""
        found = [p for p in self.workdir.rglob(f"{container_id}/{name}") if p.is_file()]
        if len(found) != 1:
            raise ComponentError(f"{len(found)} {name} logs of {container_id} under {self.workdir}: {found}")
        return found[0]

    def stop(self) -> None:
        """The cluster, then any container process it left behind (a container runs in a session of its
        own; its working directory is under ``workdir``)."""
        stop_process(self.proc, timeout=20)
        root = str(self.workdir.resolve())
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(root):
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                continue

