"""The engine's image without a Docker daemon (none runs here): the Dockerfile
and the shell scripts pass their linters (hadolint, shellcheck; both from the
test extras' wheels), and the image's entry point is run as a script, the way
Spark's Kubernetes backend starts it in a driver and in an executor pod, with
the real KubernetesExecutorBackend of pyspark's jars on the executor side.
Each linter is first shown to fail a file with a known fault."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streaming_engine import submit

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
SHELL_SCRIPTS = [ROOT / "docker" / "entrypoint.sh", ROOT / "spark-submit.sh", ROOT / ".ci" / "run",
                 *sorted((ROOT / "scripts").glob("*.sh"))]
ARGV_PRINTER = f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n"


def _lint(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *args], capture_output=True, text=True, timeout=120)


def test_the_dockerfile_passes_hadolint(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN cd /tmp && pip install pyspark\n")
    refused = _lint("hadolint", str(bad))
    assert refused.returncode != 0 and "DL3007" in refused.stdout and "DL3003" in refused.stdout, refused.stdout
    linted = _lint("hadolint", str(ROOT / "docker" / "Dockerfile"))
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_shell_scripts_pass_shellcheck(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nfor f in $(ls $1); do echo $f; done\n")
    refused = _lint("shellcheck", str(bad))
    assert refused.returncode != 0 and "SC2086" in refused.stdout, refused.stdout
    linted = _lint("shellcheck", *map(str, SHELL_SCRIPTS))
    assert linted.returncode == 0, linted.stdout + linted.stderr


def _entrypoint(args: list[str], env: dict[str, str], path: Path | None = None) -> subprocess.CompletedProcess:
    base = {"PATH": f"{path}:/usr/bin:/bin" if path else "/usr/bin:/bin", "HOME": str(ROOT)}
    return subprocess.run(["bash", str(ENTRYPOINT), *args], env={**base, **env}, capture_output=True, text=True,
                          timeout=120)


def _printer(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text(ARGV_PRINTER)
    exe.chmod(0o755)
    return folder


EXECUTOR_ENV = {
    "SPARK_EXECUTOR_MEMORY": "384m", "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@127.0.0.1:7078",
    "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "2", "SPARK_APPLICATION_ID": "spark-0123",
    "SPARK_EXECUTOR_POD_IP": "127.0.0.1", "SPARK_EXECUTOR_POD_NAME": "nightly-exec-3",
    "SPARK_RESOURCE_PROFILE_ID": "0",
}


def test_an_executor_pod_starts_the_backend_with_the_jvm_options_in_spark_s_order(tmp_path):
    """Spark hands an executor its JVM options as SPARK_JAVA_OPT_<n>: they keep the order of n (10 after 9,
    not after 1), an option holding '=' or a space stays one argument."""
    opts = {f"SPARK_JAVA_OPT_{n}": f"-Dopt.{n}=v{n}" for n in range(12)}
    opts["SPARK_JAVA_OPT_4"] = "-Dspark.app.name=nightly orders=eu"
    spark_home = tmp_path / "spark"
    proc = _entrypoint(["executor"], {**EXECUTOR_ENV, **opts, "SPARK_HOME": str(spark_home),
                                      "STREAMING_ENGINE_JARS_DIR": f"{submit.IMAGE_HOME}/.jars"},
                       path=_printer(tmp_path / "bin", "java"))
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout)
    assert argv[:12] == [opts[f"SPARK_JAVA_OPT_{n}"] for n in range(12)]
    assert argv[12:16] == ["-Xms384m", "-Xmx384m", "-cp", f":{spark_home}/jars/*:{submit.IMAGE_HOME}/.jars/*"]
    assert argv[16] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    assert dict(zip(argv[17::2], argv[18::2])) == {
        "--driver-url": EXECUTOR_ENV["SPARK_DRIVER_URL"], "--executor-id": "3", "--cores": "2",
        "--app-id": "spark-0123", "--hostname": "127.0.0.1", "--resourceProfileId": "0",
        "--podName": "nightly-exec-3"}


@pytest.mark.timeout(180)
def test_the_real_executor_backend_accepts_what_the_entry_point_passes(tmp_path):
    """With pyspark's own jars and a real JVM: KubernetesExecutorBackend parses every argument (an unknown
    one prints its usage and exits) and goes on to call the driver it was given, which is not there."""
    import pyspark

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    java = Path(os.environ.get("JAVA_HOME", "/usr")) / "bin"
    env = {**EXECUTOR_ENV, "SPARK_DRIVER_URL": f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
           "SPARK_HOME": str(Path(pyspark.__file__).parent), "STREAMING_ENGINE_JARS_DIR": str(ROOT / ".jars"),
           "SPARK_JAVA_OPT_0": "-XX:TieredStopAtLevel=1", "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = _entrypoint(["executor"], env, path=java)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Usage:" not in out and "Unrecognized options" not in out, out[-3000:]
    assert "KubernetesExecutorBackend: Started daemon" in out, out[-3000:]
    assert f"Failed to connect to /127.0.0.1:{port}" in out, out[-3000:]


def test_a_driver_pod_runs_spark_submit_in_client_mode_bound_to_the_pod_address(tmp_path):
    spark_home = tmp_path / "spark"
    _printer(spark_home / "bin", "spark-submit")
    args = ["--properties-file", "/opt/spark/conf/spark.properties", "--class", "org.apache.spark.deploy.PythonRunner",
            f"local://{submit.IMAGE_HOME}/streaming_engine/spark_entry.py", "run", "-c", "/etc/jobs/a job.conf"]
    proc = _entrypoint(["driver", *args], {"SPARK_HOME": str(spark_home), "SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        "--conf", "spark.driver.bindAddress=10.1.2.3", "--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP=10.1.2.3",
        "--deploy-mode", "client", *args]


def test_anything_else_runs_as_given():
    proc = _entrypoint(["printf", "%s|", "a b", "c"], {})
    assert (proc.returncode, proc.stdout) == (0, "a b|c|")
    missing = _entrypoint(["executor"], {})  # Spark always sets these; without them: a clear failure, no JVM
    assert missing.returncode != 0 and "SPARK_EXECUTOR_MEMORY" in missing.stderr
