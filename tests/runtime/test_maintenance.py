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
# A VACUUM is due at every epoch (vacuum_interval 1 ms), so which task runs when depends on the epoch count only,
# not on how fast the machine is (with 3 s, CI's run vacuumed t0 once only, before any compaction, as its log shows):
# t0's and t1's first VACUUM (before any compaction), the compactions, a log cleanup, then t0's VACUUM again
# (PATIENCE) after its compaction replaced files: those it deletes.
JOB = """
env { job.name = maint, job.mode = BATCH, maintenance.compact.min_files = %d,
      maintenance.vacuum.interval.seconds = 0 }
source { FakeSource { plugin_output = src, table-names = [t0, t1], rows.per.batch = 1,
  schema = { fields { id = bigint, v = double } }, rows = [ %s ] } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}", compact_min_files = %d, vacuum_interval = "1ms" } }
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
    assert {"compact", "vacuum"} <= {e.task for e in done} <= {"compact", "vacuum", "log"}
    assert all(e.files_after >= 1 for e in done if e.task == "compact")


def test_the_expired_log_goes_within_the_tables_retention_not_at_midnight(spark, run_job_text, tmp_path):
    """A table that keeps an hour of log (``delta.logRetentionDuration``) loses the commits older than that at
    the job's next look, not at the next midnight (Delta's own cleanup cuts the age at the day); versions from
    its newest checkpoint before that age stay readable; a table with Delta's default (30 days) keeps them."""
    import os

    for t, props in (("short", "'delta.logRetentionDuration' = 'interval 1 hours', "
                               "'delta.deletedFileRetentionDuration' = 'interval 1 hours', "), ("long", "")):
        spark.sql(f"CREATE TABLE delta.`{tmp_path}/out/{t}` (id BIGINT, v DOUBLE) USING delta "
                  f"TBLPROPERTIES ({props}'delta.checkpointInterval' = '3')")
    job = """
env { job.name = %s, job.mode = BATCH, maintenance.compact.min_files = 0, maintenance.vacuum.interval.seconds = 86400 }
source { FakeSource { plugin_output = src, table-names = [short, long], rows.per.batch = 1,
  schema = { fields { id = bigint, v = double } }, rows = [ %s ] } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}", compact_min_files = 0, vacuum_interval = "1d" } }
"""
    rows = ", ".join(f"{{ kind = INSERT, fields = [{i}, {i}.5] }}" for i in range(EPOCHS))
    first = run_job_text(job % ("logs1", rows))
    assert first.result.status == "FINISHED", first.result.error
    versions = lambda t: sorted(int(f.name.split(".")[0]) for f in (tmp_path / "out" / t / "_delta_log").glob("*.json"))  # noqa: E731
    assert versions("short") == versions("long") == list(range(EPOCHS + 1))
    # what the first run wrote is 70 minutes older now (in the same order): past the hour of `short`, and before
    # Delta's own cutoff (the hour cut at midnight) except in the ten minutes after 01:00 UTC
    for t in ("short", "long"):
        for f in (tmp_path / "out" / t / "_delta_log").iterdir():
            if f.is_file():
                aged = f.stat().st_mtime - 70 * 60
                os.utime(f, (aged, aged))

    second = run_job_text(job % ("logs2", rows))
    assert second.result.status == "FINISHED", second.result.error
    cleaned = [e for e in second.events if isinstance(e, TableMaintained) and e.task == "log"]
    assert {e.table.rstrip("/").rsplit("/", 1)[-1] for e in cleaned} >= {"short", "long"}, cleaned
    # short: the commits before its newest checkpoint older than an hour (version 9) are gone, checksums too
    log = tmp_path / "out" / "short" / "_delta_log"
    assert versions("short") == list(range(9, 2 * EPOCHS + 1)), versions("short")
    assert not list(log.glob(f"{0:020d}.*")) and (log / f"{9:020d}.checkpoint.parquet").exists()
    assert versions("long") == list(range(2 * EPOCHS + 1))  # Delta's 30 days
    for t in ("short", "long"):  # every row, and time travel within the retention
        df = spark.read.format("delta").load(str(tmp_path / "out" / t))
        assert sorted((r.id, r.v) for r in df.collect()) == sorted([(i, i + 0.5) for i in range(EPOCHS)] * 2)
        assert spark.read.format("delta").option("versionAsOf", 11).load(str(tmp_path / "out" / t)).count() == 11
    # the long one still has every version's commit (its files are younger than its 7 days)
    assert spark.read.format("delta").option("versionAsOf", 2).load(str(tmp_path / "out" / "long")).count() == 2


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


def test_vacuum_and_the_log_get_their_turns_when_a_compaction_is_due_at_every_epoch(spark, tmp_path):
    """A pipeline of more tables than ``compact_min_files`` has a compaction due
    at every epoch; one task an epoch, compaction first, but a task due for
    PATIENCE epochs in a row goes first, so its tables are still vacuumed and
    their expired log cleaned (before, only compactions ran)."""
    from streaming_engine.checkpoint.maintenance import PATIENCE, Maintenance, Policy

    tables = [str(tmp_path / f"t{i}") for i in range(3)]
    ran: list[tuple[str, str]] = []
    m = Maintenance(spark, on_done=lambda kind, location, seconds, detail: ran.append((kind, location)))
    for t in tables:
        spark.range(1).write.format("delta").save(t)
        m.add(t, Policy(compact_min_files=1, vacuum_interval_ms=1))
    kinds = []
    for epoch in range(3 * (PATIENCE + 1)):
        for t in tables:  # every epoch adds a file to every table: each is due for compaction
            spark.range(epoch, epoch + 1).write.format("delta").mode("append").save(t)
        kinds.append(m.after_epoch())
    assert kinds[:PATIENCE] == ["compact"] * PATIENCE, kinds  # first the most pressing kind
    assert kinds.count("vacuum") >= 2 and kinds.count("log") >= 2, kinds  # then the others, in turn
    assert kinds.count("compact") >= 2 * len(kinds) // 3 and kinds.count(None) == 0, kinds
    assert {loc for kind, loc in ran if kind == "compact"} == set(tables), ran  # the most overdue table first


def test_a_full_vacuum_lists_the_table_in_a_few_tasks_not_sparks_ten_thousand(spark, tmp_path):
    """A FULL VACUUM (the log no longer holds the commits since the last one, so LITE refuses) lists the
    table and repartitions the listing into ``spark.sql.sources.parallelPartitionDiscovery.parallelism``
    partitions: at Spark's default, stages of 10,000 tasks that stalled the pipeline 24-29 s per VACUUM in
    the bench soak. The engine's VACUUM lists with 4x the cores; the job's setting is left as it was."""
    import os
    import time

    from streaming_engine.checkpoint.maintenance import LISTING, SPARK_LISTING, Maintenance, Policy

    table = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT) USING delta "
              "TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 1 hours')")
    for i in range(3):
        spark.range(i, i + 1).write.format("delta").mode("append").save(table)
    from delta.tables import DeltaTable

    DeltaTable.forPath(spark, table).optimize().executeCompaction()
    jvm = spark._jvm
    jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table).checkpoint()
    log = tmp_path / "t" / "_delta_log"
    for f in log.glob("0000000000000000000[0-3].*"):  # the commits before the checkpoint: LITE refuses
        f.unlink()
    old = time.time() - 3 * 3600
    for f in (tmp_path / "t").glob("*.parquet"):  # the replaced files are past the table's retention
        os.utime(f, (old, old))
    for f in log.iterdir():  # and so are the commits (Delta dates them by their files, in version order)
        stamp = old + int(f.name.split(".")[0]) if f.name[0].isdigit() else old
        os.utime(f, (stamp, stamp))
    done: list[tuple[str, dict]] = []
    m = Maintenance(spark, on_done=lambda kind, location, seconds, detail: done.append((kind, detail)))
    m.add(table, Policy(compact_min_files=0, vacuum_interval_ms=1))
    sc = spark.sparkContext
    sc.setJobGroup("full-vacuum-test", "the engine's VACUUM")
    try:
        for _ in range(3):
            if m.after_epoch() == "vacuum":
                break
    finally:  # the shared session's thread goes on without the group (later tests' jobs)
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)
    assert done and done[-1] == ("vacuum", {"mode": "full"}), done
    tracker = sc.statusTracker()
    stages = [s for j in tracker.getJobIdsForGroup("full-vacuum-test") for s in tracker.getJobInfo(j).stageIds]
    tasks = [tracker.getStageInfo(s).numTasks for s in stages if tracker.getStageInfo(s) is not None]
    assert tasks and max(tasks) <= max(8, 4 * sc.defaultParallelism), tasks
    assert spark.conf.get(LISTING) == SPARK_LISTING  # the session's setting, as before
    assert sorted(r.id for r in spark.read.format("delta").load(table).collect()) == [0, 1, 2]
