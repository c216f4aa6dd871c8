"""spark-submit.sh runs a job end to end (local mode) and reports failures with a non-zero exit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.jvm import C1_ONLY_OPTS

ROOT = Path(__file__).resolve().parents[2]

JOB = """
env {{ job.name = submitted, checkpoint.dir = "{work}/ck", job.retry.times = 0,
      spark.driver.extraJavaOptions = "{jvm}" }}
source {{
  FakeSource {{
    plugin_output = src
    rows = [
      {{ kind = INSERT, fields = [1, "a"] }},
      {{ kind = INSERT, fields = [2, "b"] }},
      {{ kind = UPDATE_AFTER, fields = [1, "a2"] }}
    ]
    schema = {{ fields {{ id = bigint, name = string }}, primaryKey {{ name = pk, columnNames = [id] }} }}
  }}
}}
sink {{ Delta {{ plugin_input = src, path = "{work}/out", save_mode = upsert }} }}
"""


@pytest.mark.spark
def test_spark_submit_runs_a_job_to_completion(spark, tmp_path):
    conf = tmp_path / "job.conf"
    conf.write_text(JOB.format(work=tmp_path, jvm=C1_ONLY_OPTS))
    proc = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "run", "-c", str(conf), "-m", "local[1]"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "SPARK_PRINT_LAUNCH_COMMAND": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job 'submitted' FINISHED" in proc.stdout
    # the engine's local file system is on the driver JVM's class path and configured
    launch = next(ln for ln in proc.stderr.splitlines() if ln.startswith("Spark Command:"))
    assert "streaming-engine-jvm.jar" in launch
    assert "spark.hadoop.fs.file.impl=io.streamingengine.hadoop.NioLocalFileSystem" in launch
    rows = {r["id"]: r["name"] for r in spark.read.format("delta").load(str(tmp_path / "out")).collect()}
    assert rows == {1: "a2", 2: "b"}


def test_spark_submit_refuses_what_spark_cannot_do_with_the_reason(tmp_path):
    conf = tmp_path / "job.conf"
    conf.write_text(JOB.format(work=tmp_path, jvm=C1_ONLY_OPTS))
    proc = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "run", "-c", str(conf), "-m", "spark://127.0.0.1:7077", "-e", "cluster"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "no cluster deploy mode for Python applications on a standalone cluster" in proc.stderr
    assert "-e client" in proc.stderr


def test_spark_submit_prints_the_yarn_cluster_command_it_would_run(tmp_path):
    conf = tmp_path / "job.conf"
    conf.write_text(JOB.format(work=tmp_path, jvm=C1_ONLY_OPTS))
    proc = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "run", "-c", str(conf), "-m", "yarn", "-e", "cluster", "--queue", "etl",
         "--dry-run"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    command = proc.stdout.splitlines()[-1].split()
    assert command[0].endswith("bin/spark-submit")
    assert command[command.index("--files") + 1] == str(conf)
    assert command[command.index("--queue") + 1] == "etl"
    assert command[-7:] == ["-c", "job.conf", "run", "-m", "yarn", "-e", "cluster"]


def test_the_engine_cli_sends_cluster_deploy_mode_to_spark_submit(tmp_path):
    from streaming_engine.cli import main

    assert main(["run", "-c", str(tmp_path / "x.conf"), "-e", "cluster"]) == 2
