"""Exactly once on an object store: the fan-out crash test's kills with the
job's checkpoint, tables and ledger on s3a (a real S3-compatible server,
s3proxy). SIGKILL between the sink's files and their commit, and between two
tables' commits of the same epoch; each run resumes what the one before left,
a last run finishes the job, and every table holds each row once, in its own
table (every column compared), each epoch committed once. s3proxy keeps the
objects as files, so the test reads the Delta logs and the ledger from them."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.components.s3proxy import S3Proxy
from tests.recovery.test_fanout_crash import ROWS, TABLES, _run, _txn_versions, kill_inside_epoch_1

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.soak]

JOB = """
env { job.name = s3_crash, job.mode = BATCH, checkpoint.dir = "s3a://lake/ck", job.retry.times = 0,
      commit.parallelism = 1, commit.log.parallelism = 1, %s }
source { FakeSource { plugin_output = src, tables_configs = [ %s ] } }
sink { Delta { plugin_input = src, path = "s3a://lake/out/${table_name}" } }
"""


def _job(s3: S3Proxy) -> str:
    settings = ", ".join(f'{k} = "{v}"' for k, v in s3.hadoop_conf().items())
    tables = ", ".join(
        f'{{ schema = {{ table = "{t}", fields {{ id = bigint, v = double }} }}, rows.per.batch = 2, rows = [ '
        + ", ".join(f"{{ kind = INSERT, fields = [{i}, {v}] }}" for i, v in ROWS[t]) + " ] }"
        for t in TABLES)
    return JOB % (settings, tables)


def _ledger_epochs(lake: Path) -> Counter:
    """(table, epoch) -> committed ledger rows, from the ledger's objects."""
    ledger = lake / "ck" / "s3_crash" / "_ledger"
    out: Counter = Counter()
    for f in sorted((ledger / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                for r in pq.read_table(ledger / a["add"]["path"], columns=["table", "epoch"]).to_pylist():
                    out[(r["table"], r["epoch"])] += 1
    return out


def test_kills_between_files_and_commit_and_between_tables_on_s3_leave_every_table_exactly_once(
        spark, tmp_path, request):
    with S3Proxy(tmp_path / "s3") as s3:
        s3.bucket("lake")
        lake = s3.data / "lake"
        (tmp_path / "job.conf").write_text(_job(s3))

        committed = kill_inside_epoch_1(tmp_path, lake / "out")

        done = _run(tmp_path, None)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        for t in TABLES:
            got = sorted((r.id, r.v) for r in spark.read.format("delta").load(str(lake / "out" / t)).collect())
            assert got == ROWS[t], (t, got)  # every column of every row, each row once, in its own table
            assert _txn_versions(lake / "out" / t) == [0, 1, 2], t
        ledger = _ledger_epochs(lake)
        assert ledger == Counter({(t, e): 1 for t in TABLES for e in (0, 1, 2)}), ledger
    request.node.user_properties.append((
        "ran", f"{len(TABLES)} Delta tables, checkpoint and ledger on s3a (s3proxy): kills at sink_files_written@1 "
               f"and sink_table_committed@1 (tables {committed} had committed epoch 1), then a run to the end"))
