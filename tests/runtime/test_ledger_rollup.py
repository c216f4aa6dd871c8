"""The commit ledger stays small on a job of any age: every ``ledger.keep.epochs``
epochs a pipeline folds its rows older than the newest that many into one row
per sink and table of the rollup table, and ``status`` adds both up to the same
figures as before; a rollup that crashed between its two commits counts nothing
twice, and the next one finishes it."""

from __future__ import annotations

import pytest

from streaming_engine.checkpoint import ledger
from streaming_engine.job import compile_text
from streaming_engine.runtime.events import EventBus, TableMaintained
from streaming_engine.runtime.runner import execute

pytestmark = [pytest.mark.spark]

JOB = """
env { job.name = rolled, job.mode = BATCH, checkpoint.dir = "${work}/ck", job.retry.times = 0,
      ledger.keep.epochs = %d }
source { FakeSource { plugin_output = src, table-names = [a, b], row.num = 21, rows.per.batch = 3,
                      schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}" } }
"""


def _job(work, keep: int):
    return compile_text(JOB % keep, variables={"work": str(work)}, file="rolled.conf")


def _run(spark, work, keep: int):
    job = _job(work, keep)
    seen: list[TableMaintained] = []
    bus = EventBus()
    bus.subscribe(lambda e: seen.append(e) if isinstance(e, TableMaintained) and e.task == "rollup" else None)
    result = execute(job, spark=spark, bus=bus)
    assert result.status == "FINISHED", result.error
    return seen


def _status(spark, work):
    return {(r["sink"], r["table"]): (r["last_epoch"], r["total_rows"], r["epochs"], r["delta_version"])
            for r in ledger.last_committed(spark, str(work / "ck" / "rolled" / "_ledger"))}


def test_the_ledger_keeps_its_newest_epochs_and_status_adds_up_the_rest(spark, tmp_path):
    plain, rolled = tmp_path / "plain", tmp_path / "rolled"
    assert _run(spark, plain, keep=0) == []  # 0: every row kept
    seen = _run(spark, rolled, keep=2)
    # 7 epochs (21 rows per table, 3 per epoch): rollups after epochs 3 and 5 (4 and 6 done), the newest 2 kept
    assert len(seen) == 2, seen
    path = str(rolled / "ck" / "rolled" / "_ledger")
    epochs = sorted({r["epoch"] for r in spark.read.format("delta").load(path).collect()})
    assert epochs == [4, 5, 6], epochs
    folded = spark.read.format("delta").load(ledger.rollup_path(path)).collect()
    assert {(r["table"], r["epochs"], r["total_rows"], r["up_to_epoch"]) for r in folded} == {
        ("a", 4, 12, 4), ("b", 4, 12, 4)}
    # status: the same figures as a ledger that kept every row
    want = _status(spark, plain)
    assert want and all(v[:3] == (6, 21, 7) for v in want.values()), want
    assert _status(spark, rolled) == want


def test_a_rollup_that_died_before_its_delete_counts_nothing_twice(spark, tmp_path, monkeypatch):
    _run(spark, tmp_path, keep=0)
    path = str(tmp_path / "ck" / "rolled" / "_ledger")
    want = _status(spark, tmp_path)
    [pipeline] = [p.key for p in _job(tmp_path, 0).plan.pipelines]
    from delta.tables import DeltaTable

    def crash(self, *a, **k):
        raise RuntimeError("the driver died here")

    with monkeypatch.context() as m:
        m.setattr(DeltaTable, "delete", crash)
        with pytest.raises(RuntimeError):
            ledger.roll_up(spark, path, pipeline, 5)
    assert DeltaTable.isDeltaTable(spark, ledger.rollup_path(path))  # the rollup committed, the delete did not
    assert len({r["epoch"] for r in spark.read.format("delta").load(path).collect()}) == 7
    assert _status(spark, tmp_path) == want
    assert ledger.roll_up(spark, path, pipeline, 5) == 0  # nothing new to fold; the leftovers go
    assert sorted({r["epoch"] for r in spark.read.format("delta").load(path).collect()}) == [5, 6]
    assert _status(spark, tmp_path) == want
