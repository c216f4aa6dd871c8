"""Two live drivers of one job cannot land an epoch twice or lose one.

Driver A runs the job and freezes (SIGSTOP, as a long GC pause or a suspended
VM would) after the one-job write of epoch 1 wrote its files and before any
commit. Its lease lapses, so driver B starts, replays epoch 1 and finishes the
job. Then A wakes up (SIGCONT) and goes on committing epoch 1 where it
stopped: its commits meet the fence (``delta_log._fence``: Delta's own
transaction-id conflict check, and the epoch found in the table) and land
nothing. Every target (the one-job write of two tables, a single-table append
and an upsert) then equals the oracle, with each epoch's txn in exactly one
commit, and the ledger records each epoch once. A one-job MERGE of the same
two tables (after the append in the epoch) is fenced when A's transactions of
epoch 1 start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.merge_paths import merge_paths

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
TTL = 4
IDS = list(range(1, 7))
JOB = """
env { job.name = two_drivers, job.mode = BATCH, checkpoint.dir = "${work}/ck", job.retry.times = 0,
      job.lease.seconds = %d }
source {
  FakeSource { plugin_output = multi, table-names = [t0, t1], rows.per.batch = 2,
    schema = { fields { id = bigint, v = double } }, rows = [ %s ] }
  FakeSource { plugin_output = single, rows.per.batch = 2,
    schema = { table = "db.kv", fields { id = bigint, v = string }, primaryKey { name = pk, columnNames = [id] } },
    rows = [ { kind = INSERT, fields = [1, "a"] }, { kind = INSERT, fields = [2, "b"] },
             { kind = UPDATE_AFTER, fields = [1, "a2"] }, { kind = INSERT, fields = [3, "c"] },
             { kind = DELETE, fields = [2, "b"] }, { kind = UPDATE_AFTER, fields = [3, "c2"] } ] }
}
sink {
  Delta { plugin_input = multi, path = "${work}/multi/${table_name}" }
  Delta { plugin_input = multi, path = "${work}/merged/${table_name}", save_mode = upsert, primary_key = [id] }
  Delta { plugin_input = single, path = "${work}/append" }
  Delta { plugin_input = single, path = "${work}/upsert", save_mode = upsert }
}
""" % (TTL, ", ".join(f"{{ kind = INSERT, fields = [{i}, {i}.5] }}" for i in IDS))


def _driver(work: Path, pause: str | None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("STREAMING_ENGINE_FAULT", None)
    if pause:
        env.update(STREAMING_ENGINE_FAULT=pause, STREAMING_ENGINE_FAULT_ACTION="pause")
    return subprocess.Popen(
        [sys.executable, "-m", "streaming_engine", "run", "-c", str(work / "job.conf"), "-i", f"work={work}",
         "--log-level", "INFO", "--log-format", "json", "-q"],
        cwd=ROOT, env=env, stdout=open(work / f"{'a' if pause else 'b'}.log", "w"), stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "T"


def _txn_versions(table: Path) -> list[int]:
    out = []
    for f in sorted((table / "_delta_log").glob("*.json"), key=lambda p: int(p.stem)):
        out += [json.loads(ln)["txn"]["version"] for ln in f.read_text().splitlines() if '"txn"' in ln]
    return out


def test_a_frozen_driver_that_wakes_up_beside_its_successor_lands_nothing_twice(spark, tmp_path):
    (tmp_path / "job.conf").write_text(JOB)
    a = _driver(tmp_path, "sink_files_written@1:delta.multi")
    try:
        deadline = time.monotonic() + 300
        while not _stopped(a.pid):
            assert a.poll() is None, (tmp_path / "a.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "driver A never reached the files of epoch 1"
            time.sleep(0.2)
        # A's files of epoch 1 are on disk, uncommitted
        assert [0] == _txn_versions(tmp_path / "multi" / "t0")
        time.sleep(TTL + 1)  # A's lease is not renewed: it lapses
        b = _driver(tmp_path, None)
        assert b.wait(timeout=300) == 0, (tmp_path / "b.log").read_text()[-3000:]
    finally:
        a.send_signal(signal.SIGCONT)
    a.wait(timeout=300)
    said_a = (tmp_path / "a.log").read_text()
    # A went on with its commits of epoch 1 and met the fence (not only the lease)
    assert "epoch already in the table: skipped" in said_a, said_a[-4000:]

    read = lambda p: spark.read.format("delta").load(str(p)).collect()  # noqa: E731
    for t in ("t0", "t1"):
        assert sorted((r.id, r.v) for r in read(tmp_path / "multi" / t)) == [(i, i + 0.5) for i in IDS], t
        assert _txn_versions(tmp_path / "multi" / t) == [0, 1, 2], t
        # the one-job MERGE of the same tables (A wakes before its epoch-1 transactions: fenced at their start)
        assert sorted((r.id, r.v) for r in read(tmp_path / "merged" / t)) == [(i, i + 0.5) for i in IDS], t
        assert _txn_versions(tmp_path / "merged" / t) == [0, 1, 2], t
        assert merge_paths(tmp_path / "merged" / t) == {"one job": 3}, t
    assert sorted(r.id for r in read(tmp_path / "append")) == [1, 1, 2, 2, 3, 3]  # the change log of db.kv
    assert _txn_versions(tmp_path / "append") == [0, 1, 2]
    assert sorted((r.id, r.v) for r in read(tmp_path / "upsert")) == [(1, "a2"), (3, "c2")]
    assert _txn_versions(tmp_path / "upsert") == [0, 1, 2]
    ledger = spark.read.format("delta").load(str(tmp_path / "ck" / "two_drivers" / "_ledger")).collect()
    counts = Counter((r.pipeline, r.epoch, r.sink, r.table) for r in ledger)
    assert counts and set(counts.values()) == {1}, counts
    assert sorted({r.epoch for r in ledger}) == [0, 1, 2]
