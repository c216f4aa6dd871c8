"""Canary secrets planted in every kind of option never show up anywhere while the job still runs.

One small BATCH job through the CLI (in process, on the shared SparkSession):
a LocalFile sink whose path carries URI user-info, and a TestSecrets sink
(tests/unit/plugins_for_tests.py) with a URI endpoint, a ``password`` fed by
an ``-i`` variable, a SecretStr option with an innocent name and a token in a
nested map; the plugin even logs its bare password. explain (every format),
check, run and status are captured: stdout, stderr (logs included), the
Prometheus registry, the commit ledger's rows, and every file the job leaves
(Spark's checkpoint, the Delta logs with their commitInfo, the ledger's and the
job history's Parquet values, savepoints and leases), except the job file itself.
"""

from __future__ import annotations

import logging

import pytest

from streaming_engine.cli import main
from streaming_engine.plugins.registry import SINKS
from tests.unit.plugins_for_tests import TSecrets

CANARIES = {
    "uri": "CanaryUriPw-7f3a",
    "endpoint": "CanaryEndpointPw-7f3a",
    "password": "CanaryPassword-7f3a",
    "dsn": "CanaryDsn-7f3a",
    "nested": "CanaryNested-7f3a",
    "variable": "CanaryVariable-7f3a",
}

JOB = """
env {{ job.name = canaries, checkpoint.dir = "{work}/ck", job.retry.times = 0, metrics.enabled = true, metrics.port = 0 }}
source {{ FakeSource {{ plugin_output = src, row.num = 7, schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{
  LocalFile {{ plugin_input = src, path = "file://writer:{uri}@{work}/files/${{table_name}}", file_format_type = csv }}
  TestSecrets {{
    plugin_input = src
    endpoint = "s3a://AKIDCANARY:{endpoint}@bucket/out"
    password = "${{db_password}}"
    dsn = "{dsn}"
    config {{ client {{ auth {{ token = "{nested}" }}, bootstrap = "localhost:9092" }} }}
  }}
}}
"""


@pytest.fixture
def secrets_sink():
    SINKS.register(TSecrets)
    yield
    SINKS.unregister(TSecrets.name)


def test_no_canary_leaves_the_engine(spark, tmp_path, capsys, secrets_sink):
    from prometheus_client import generate_latest

    from streaming_engine.metrics.prometheus import PrometheusMetrics

    conf = tmp_path / "job.conf"
    conf.write_text(JOB.format(work=tmp_path, **CANARIES))
    common = ["-c", str(conf), "-i", f"db_password={CANARIES['password']}",
              "-i", f"api_token={CANARIES['variable']}", "-m", "local[1]", "--log-level", "INFO"]
    try:
        for fmt in ("text", "json", "dot", "mermaid"):
            assert main(["explain", *common, "--format", fmt]) == 0
        assert main(["check", *common]) == 0
        assert main(["run", *common]) == 0
        assert main(["status", *common]) == 0
        assert main(["status", *common, "--format", "json"]) == 0
    finally:
        logging.getLogger("streaming_engine").handlers.clear()  # they write to this test's captured streams
    out = capsys.readouterr()

    # the job ran: rows in the files, the ledger, the summary and the plugin's own log line
    files = list((tmp_path / "files" / "src").glob("part-*.csv"))
    assert sum(len(f.read_text().splitlines()) for f in files) == 7
    ledger = [r.asDict() for r in spark.read.format("delta").load(str(tmp_path / "ck/canaries/_ledger")).collect()]
    assert {r["sink"] for r in ledger} == {"localfile.src", "testsecrets.src"} and sum(r["rows"] for r in ledger) == 14
    assert "job 'canaries' FINISHED" in out.out and "TestSecrets writing to" in out.err
    assert "file://******@" in out.out  # the targets are shown, redacted
    metrics = generate_latest(PrometheusMetrics._shared.registry).decode()
    assert 'job="canaries"' in metrics

    seen = {"stdout": out.out, "stderr": out.err, "ledger": repr(ledger), "metrics": metrics,
            **_files_left(tmp_path, skip={conf})}
    assert any("_delta_log" in k for k in seen) and any("/ck/" in k for k in seen)  # the scan saw them
    leaks = [(name, where) for name, canary in CANARIES.items() for where, text in seen.items() if canary in text]
    assert leaks == []
    assert "AKIDCANARY" not in out.out + out.err + repr(ledger)


def _files_left(root, skip) -> dict[str, str]:
    """Every file under ``root`` as text: Parquet files by their values (their
    pages are compressed), the others as bytes decoded leniently."""
    import pyarrow.parquet as pq

    out = {}
    for f in sorted(root.rglob("*")):
        if not f.is_file() or f in skip:
            continue
        if f.suffix == ".parquet":
            out[str(f)] = repr(pq.read_table(f).to_pylist())
        else:
            out[str(f)] = f.read_bytes().decode("utf-8", errors="replace")
    return out


JVM_JOB = """
env {{ job.name = jvm_canaries, job.mode = BATCH, checkpoint.dir = "{work}/ck", job.retry.times = 0,
      spark.hadoop.fs.s3a.secret.key = "{s3_secret}", spark.eventLog.enabled = true,
      spark.eventLog.dir = "{work}/events", spark.log.level = INFO }}
source {{ FakeSource {{ plugin_output = src, row.num = 7, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{
  LocalFile {{ plugin_input = src, path = "file://writer:{uri}@{work}/files/${{table_name}}", file_format_type = csv }}
  Delta {{ plugin_input = src, path = "{work}/delta" }}
}}
"""


def test_no_canary_in_what_the_jvm_prints_or_its_event_log(tmp_path):
    """The CLI in a process of its own with the JVM's log at INFO (Spark logs
    its plans, paths and settings there): what the process prints (the JVM's
    log4j output included) and every file the job leaves (Spark's event log,
    checkpoint, Delta logs) hold neither the password in a path's user-info
    nor an S3 secret key set as a Spark setting."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    canaries = {"uri": "CanaryJvmUriPw-5c1d", "s3_secret": "CanaryJvmS3Secret-5c1d"}
    (tmp_path / "events").mkdir()
    conf = tmp_path / "job.conf"
    conf.write_text(JVM_JOB.format(work=tmp_path, **canaries))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "streaming_engine", "run", "-c", str(conf), "--log-level", "DEBUG"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    printed = proc.stdout + proc.stderr
    # the JVM's INFO log (spark.log.level = INFO: from the SparkContext's start) was captured
    assert " INFO SparkContext: " in printed and " INFO DAGScheduler: " in printed, printed[-2000:]
    files = sum(len(f.read_text().splitlines()) for f in (tmp_path / "files" / "src").glob("part-*.csv"))
    assert files == 7
    left = _files_left(tmp_path, skip={conf})
    assert any("/events/" in k for k in left) and any("_delta_log" in k for k in left), sorted(left)
    leaks = [(name, where) for name, canary in canaries.items()
             for where, text in {"printed": printed, **left}.items() if canary in text]
    assert leaks == [], leaks
