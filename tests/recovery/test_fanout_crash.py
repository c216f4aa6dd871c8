"""SIGKILL inside the one-job fan-out (``delta_log.append_tables``): a
multi-table batch written to four Delta tables in one Spark job, killed after
the files are written and before any commit, after some tables committed, and
after the sink committed every table, one run after the other; a last run
finishes the job, and each table holds every row exactly once, each epoch
committed once.

The rows are the test's own (FakeSource ``rows`` per table), six per table with
values of their own, two per epoch: every column of every table is compared,
so a row written into the wrong table fails too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.soak]

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("t0", "t1", "t2", "t3")
IDS = list(range(1, 7))
# each table its own values: a row written into another table's files fails the comparison
ROWS = {t: [(i, 100.0 * k + i + 0.5) for i in IDS] for k, t in enumerate(TABLES)}
JOB = """
env { job.name = fan_crash, job.mode = BATCH, checkpoint.dir = "${work}/ck", job.retry.times = 0,
      commit.parallelism = 1, commit.log.parallelism = 1 }  # one table at a time, written or committed
source { FakeSource { plugin_output = src, tables_configs = [ %s ] } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}" } }
""" % ", ".join(
    f'{{ schema = {{ table = "{t}", fields {{ id = bigint, v = double }} }}, rows.per.batch = 2, rows = [ '
    + ", ".join(f"{{ kind = INSERT, fields = [{i}, {v}] }}" for i, v in ROWS[t]) + " ] }"
    for t in TABLES)


def _run(work: Path, fault: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("STREAMING_ENGINE_FAULT", None)
    if fault:
        env["STREAMING_ENGINE_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "streaming_engine", "run", "-c", str(work / "job.conf"), "-i", f"work={work}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, start_new_session=True,
    )


def _committed_files(table: Path) -> set[str]:
    out = set()
    for f in (table / "_delta_log").glob("*.json"):
        for line in f.read_text().splitlines():
            if '"add"' in line:
                out.add(json.loads(line)["add"]["path"])
    return out


def _txn_versions(table: Path) -> list[int]:
    out = []
    for f in sorted((table / "_delta_log").glob("*.json"), key=lambda p: int(p.stem)):
        for line in f.read_text().splitlines():
            if '"txn"' in line:
                out.append(json.loads(line)["txn"]["version"])
    return out


def kill_inside_epoch_1(work: Path, out: Path) -> list[str]:
    """Two kills in a row, the second resuming what the first left: after the
    files of epoch 1 are written (no commit yet), then after the first table
    committed the replayed epoch 1 (between two tables' commits). ``out``: where
    the tables' files can be read. The tables that had committed epoch 1."""
    killed = _run(work, "sink_files_written@1")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
    # one job wrote every table's epoch-1 file before any commit (one write per
    # table would have died after the first table's files): each table has a
    # file its log does not name, and none committed epoch 1
    for t in TABLES:
        table = out / t
        assert _txn_versions(table) == [0], t
        assert {p.name for p in table.glob("*.parquet")} - _committed_files(table), t

    killed = _run(work, "sink_table_committed@1")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
    # the kill came after one table committed the replayed epoch 1, before the others did
    committed = [t for t in TABLES if 1 in _txn_versions(out / t)]
    assert 1 <= len(committed) < len(TABLES), committed
    return committed


def test_kills_inside_the_one_job_fan_out_leave_every_table_exactly_once(spark, tmp_path):
    """Three kills in a row, each run resuming what the one before left: after
    the files of epoch 1 are written (no commit yet), after the first table
    committed the replayed epoch 1, and after every table committed epoch 2
    (before the ledger); a fourth run finishes the job."""
    (tmp_path / "job.conf").write_text(JOB)
    kill_inside_epoch_1(tmp_path, tmp_path / "out")

    killed = _run(tmp_path, "after_sink@2")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
    assert all(_txn_versions(tmp_path / "out" / t) == [0, 1, 2] for t in TABLES)

    done = _run(tmp_path, None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for t in TABLES:
        table = tmp_path / "out" / t
        got = sorted((r.id, r.v) for r in spark.read.format("delta").load(str(table)).collect())
        assert got == ROWS[t], (t, got)  # every column of every row, each row once, in its own table
        # every epoch committed once, in order, by this sink's txn id
        assert _txn_versions(table) == [0, 1, 2], t
