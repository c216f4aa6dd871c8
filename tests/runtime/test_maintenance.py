"""Table maintenance while the job runs (``checkpoint/maintenance.py``):
between epochs the pipeline compacts its tables and the job's ledger (Delta's
OPTIMIZE) once enough files were added, and VACUUMs them with each table's
own retention; the rows stay exactly the epochs' rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming_engine.runtime.events import TableMaintained

pytestmark = [pytest.mark.spark]

EPOCHS = 10
MIN_FILES = 3
JOB = """
env { job.name = maint, job.mode = BATCH, maintenance.compact.min_files = %d,
      maintenance.vacuum.interval.seconds = 0 }
source { FakeSource { plugin_output = src, table-names = [t0, t1], rows.per.batch = 1,
  schema = { fields { id = bigint, v = double } }, rows = [ %s ] } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}", compact_min_files = %d, vacuum_interval = "3s" } }
""" % (MIN_FILES, ", ".join(f"{{ kind = INSERT, fields = [{i % 3}, {i}.5] }}" for i in range(EPOCHS)), MIN_FILES)


def _committed(table: Path) -> tuple[set[str], set[str], list[str]]:
    """The data files of the table's current state, every file ever added, and
    the operation of every commit."""
    live: set[str] = set()
    added: set[str] = set()
    ops = []
    for f in sorted((table / "_delta_log").glob("*.json"), key=lambda p: int(p.stem)):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                live.add(a["add"]["path"])
                added.add(a["add"]["path"])
            elif "remove" in a:
                live.discard(a["remove"]["path"])
            elif "commitInfo" in a:
                ops.append(a["commitInfo"]["operation"])
    return live, added, ops


def test_tables_and_the_ledger_are_compacted_and_vacuumed_between_epochs(spark, run_job_text, tmp_path):
    # t0 exists before the job, with a short retention: VACUUM removes what compaction replaced
    spark.sql(f"CREATE TABLE delta.`{tmp_path}/out/t0` (id BIGINT, v DOUBLE) USING delta "
              "TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 1 seconds')")
    from streaming_engine.checkpoint import delta_log

    created_ms = delta_log.last_vacuum_ms(spark, str(tmp_path / "out" / "t0"))  # never vacuumed: its creation
    assert created_ms > 0
    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error

    expected = sorted((i % 3, i + 0.5) for i in range(EPOCHS))
    for t in ("t0", "t1"):
        table = tmp_path / "out" / t
        assert sorted((r.id, r.v) for r in spark.read.format("delta").load(str(table)).collect()) == expected, t
        live, _, ops = _committed(table)
        # one file per epoch without maintenance; compacted, the table keeps at most MIN_FILES + 1
        assert ops.count("OPTIMIZE") >= 2, ops
        assert len(live) <= MIN_FILES + 1, (t, len(live), ops)
        assert all((table / f).exists() for f in live), t
    # the short retention let VACUUM delete files compaction replaced; t1 keeps them (Delta's 7 days)
    on_disk = lambda t: {p.name for p in (tmp_path / "out" / t).glob("*.parquet")}  # noqa: E731
    live0, added0, ops0 = _committed(tmp_path / "out" / "t0")
    assert "VACUUM END" in ops0, ops0
    # the next run (a restart, a redeploy) knows when it was last vacuumed: not postponed by restarts
    assert delta_log.last_vacuum_ms(spark, str(tmp_path / "out" / "t0")) > created_ms
    assert live0 <= on_disk("t0") < added0, (len(live0), len(on_disk("t0")), len(added0))
    _, added1, ops1 = _committed(tmp_path / "out" / "t1")
    assert "VACUUM END" in ops1 and on_disk("t1") == added1
    # the job's ledger is compacted too, and still has every epoch of every table once
    ledger = tmp_path / "checkpoints" / "maint" / "_ledger"
    _, _, ops = _committed(ledger)
    assert "OPTIMIZE" in ops, ops
    rows = spark.read.format("delta").load(str(ledger)).where("sink like 'delta%'").collect()
    assert sorted((r.sink, r.table, r.epoch) for r in rows) == sorted(
        (s, t, e) for s in {r.sink for r in rows} for t in ("t0", "t1") for e in range(EPOCHS))
    done = [e for e in ran.events if isinstance(e, TableMaintained)]
    assert {e.task for e in done} == {"compact", "vacuum"}
    assert all(e.files_after >= 1 for e in done if e.task == "compact")


def test_a_maintenance_error_is_a_warning_never_the_jobs(spark, caplog):
    """The epoch is committed when maintenance runs: a table it cannot even
    look at (here a file system nobody provides) is logged, not raised."""
    from streaming_engine.checkpoint.maintenance import Maintenance, Policy

    m = Maintenance(spark)
    m.add("nosuchfs://bucket/table", Policy(compact_min_files=1, vacuum_interval_ms=1))
    with caplog.at_level("WARNING", logger="streaming_engine.maintenance"):
        assert m.after_epoch() is None and m.after_epoch() is None
    failed = [r for r in caplog.records if r.getMessage().startswith("table maintenance failed")]
    assert len(failed) == 2 and all(r.table == "nosuchfs://bucket/table" for r in failed), failed
