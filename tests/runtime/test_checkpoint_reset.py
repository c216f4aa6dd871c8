"""A checkpoint that is lost, reset or moved while its targets keep their data.

When a query starts, every exactly-once sink reports per table the newest
epoch its target holds (Delta: the sink's txn id in the log; LocalFile: its
``_published`` markers). A target ahead of the checkpoint stops the run with
``CHECKPOINT.BEHIND_TARGETS`` before anything is written; ``env {
checkpoint.behind_targets = skip }`` deliberately treats the epochs each table
holds as written. Also: an epoch Spark replays (its commit-log entry missing)
publishes nothing twice, and the ledger says it was skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

JOB = """
env {{ job.name = reset{env} }}
source {{ LocalFile {{ plugin_output = src, path = "${{work}}/in", file_format_type = parquet, max_files_per_trigger = 1,
                      schema = {{ table = "in.items", fields {{ id = bigint, name = string }} }} }} }}
sink {{
  Delta {{ plugin_input = src, path = "${{work}}/append" }}
  LocalFile {{ plugin_input = src, path = "${{work}}/files", file_format_type = parquet }}
  Delta {{ plugin_input = src, path = "${{work}}/upsert", save_mode = upsert, primary_key = [id] }}
}}
"""
FAIL, SKIP = JOB.format(env=""), JOB.format(env=", checkpoint.behind_targets = skip")


def _add_input(directory: Path, index: int, rows: int = 50) -> None:
    """One Parquet file of ids [index*rows, (index+1)*rows), appearing atomically,
    with a modification time after every earlier file (the source's order)."""
    directory.mkdir(parents=True, exist_ok=True)
    ids = list(range(index * rows, (index + 1) * rows))
    tmp = directory / f".f{index}.tmp"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}), tmp)
    os.utime(tmp, (1_700_000_000 + index * 10,) * 2)
    os.replace(tmp, directory / f"f{index}.parquet")


def _pipeline_checkpoint(work: Path, job: str) -> Path:
    [cp] = [p for p in (work / "checkpoints" / job).iterdir() if not p.name.startswith("_")]
    return cp


def _data_files(directory: Path) -> list[str]:
    return sorted(
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() and not any(part.startswith(("_", ".")) for part in p.relative_to(directory).parts)
    )


def _delta_versions(table: Path) -> list[int]:
    return sorted(int(p.stem) for p in (table / "_delta_log").glob("*.json"))


def _markers(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in (directory / "_published").iterdir()}


def _state(spark, work: Path) -> dict:
    """Everything a rerun must not change: rows, files, Delta versions, markers."""
    ids = lambda df: sorted(r.id for r in df.select("id").collect())  # noqa: E731
    return {
        "append": ids(spark.read.format("delta").load(str(work / "append"))),
        "upsert": ids(spark.read.format("delta").load(str(work / "upsert"))),
        "files": ids(spark.read.parquet(str(work / "files"))),
        "file_names": _data_files(work / "files"),
        "markers": _markers(work / "files"),
        "append_versions": _delta_versions(work / "append"),
        "upsert_versions": _delta_versions(work / "upsert"),
    }


def _ledger(spark, work: Path, job: str) -> list[tuple]:
    df = spark.read.format("delta").load(str(work / "checkpoints" / job / "_ledger"))
    return sorted((r.epoch, r.sink, r.table, r.rows, r.replayed) for r in df.collect())


def _commits(ran) -> list[tuple]:
    return sorted(
        (e.epoch, c.sink, c.skipped) for e in ran.events if type(e).__name__ == "EpochCommitted" for c in e.commits
    )


def test_a_reset_checkpoint_stops_the_run_and_skip_keeps_exactly_the_rows_the_targets_hold(spark, run_job_text, tmp_path):
    for i in range(3):
        _add_input(tmp_path / "in", i)
    first = run_job_text(FAIL)
    assert first.result.status == "FINISHED", first.result.error
    before = _state(spark, tmp_path)
    original = list(range(150))
    assert before["append"] == before["upsert"] == before["files"] == original
    sinks = sorted({s for _, s, _ in _commits(first)})
    assert len(sinks) == 3 and {e for e, _, _ in _commits(first)} == {0, 1, 2}  # one file per epoch

    # the checkpoint is lost (the ledger is kept); the same input is there
    checkpoint = _pipeline_checkpoint(tmp_path, "reset")
    shutil.rmtree(checkpoint)
    failed = run_job_text(FAIL)
    assert failed.result.status == "FAILED"
    error = str(failed.result.error)
    assert "CHECKPOINT.BEHIND_TARGETS" in error, error
    assert str(checkpoint) in error and "epochs up to -1" in error, error
    for target in ("append", "files", "upsert"):  # every target, with the epoch it holds
        assert re.search(rf"\({re.escape(str(tmp_path / target))}\) holds epoch 2", error), error
    assert "in.items" in error and "checkpoint.behind_targets = skip" in error, error
    assert not _commits(failed)  # stopped before the first epoch
    assert _state(spark, tmp_path) == before

    # deliberately skip what the targets hold: the same input replays the same epochs
    skipped = run_job_text(SKIP)
    assert skipped.result.status == "FINISHED", skipped.result.error
    assert _commits(skipped) == [(e, s, True) for e in range(3) for s in sinks]
    assert _state(spark, tmp_path) == before

    # reset again, and new input arrives after the reset: with skip, the old
    # files replay epochs 0-2 (skipped), the new file is epoch 3 and lands once
    shutil.rmtree(_pipeline_checkpoint(tmp_path, "reset"))
    _add_input(tmp_path / "in", 3)
    more = run_job_text(SKIP)
    assert more.result.status == "FINISHED", more.result.error
    assert _commits(more) == sorted([(e, s, True) for e in range(3) for s in sinks] + [(3, s, False) for s in sinks])
    after = _state(spark, tmp_path)
    assert after["append"] == after["upsert"] == after["files"] == list(range(200))
    assert after["markers"].items() >= before["markers"].items() and len(after["markers"]) == 4


SINGLE = """
env { job.name = lossy, checkpoint.behind_targets = skip }
source { LocalFile { plugin_output = src, path = "${work}/in", file_format_type = parquet,
                     schema = { table = "in.items", fields { id = bigint, name = string } } } }
sink { Delta { plugin_input = src, path = "${work}/append" } }
"""


def test_skip_drops_new_rows_that_arrive_in_an_epoch_the_target_holds(spark, run_job_text, tmp_path):
    """What the error message warns of: ``skip`` is right only when the source
    replays the same rows in the same epochs. Without max_files_per_trigger the
    reset query reads old and new files in ONE epoch 0, which the table holds:
    the new rows are skipped with it (documented behaviour, not a wish)."""
    _add_input(tmp_path / "in", 0)
    first = run_job_text(SINGLE)
    assert first.result.status == "FINISHED", first.result.error
    shutil.rmtree(_pipeline_checkpoint(tmp_path, "lossy"))
    _add_input(tmp_path / "in", 1)
    again = run_job_text(SINGLE)
    assert again.result.status == "FINISHED", again.result.error
    assert [(e.epoch, [c.skipped for c in e.commits]) for e in again.events if type(e).__name__ == "EpochCommitted"] == [
        (0, [True])
    ]
    assert sorted(r.id for r in first.delta(spark, "append").collect()) == list(range(50))


FILES = """
env { job.name = replayed }
source { LocalFile { plugin_output = src, path = "${work}/in", file_format_type = parquet, max_files_per_trigger = 1,
                     schema = { table = "in.items", fields { id = bigint, name = string } } } }
sink { LocalFile { plugin_input = src, path = "${work}/files", file_format_type = json } }
"""


def test_a_replayed_epoch_publishes_nothing_twice_and_the_ledger_records_it_as_skipped(spark, run_job_text, tmp_path):
    for i in range(2):
        _add_input(tmp_path / "in", i)
    first = run_job_text(FILES)
    assert first.result.status == "FINISHED", first.result.error
    out = tmp_path / "files"
    files, markers = _data_files(out), _markers(out)
    assert len(markers) == 2 and files and all(f.endswith(".json") for f in files)
    assert sorted(json.loads(m)["epoch"] for m in markers.values()) == [0, 1]
    # every published file is named by its marker, and the staging area is gone
    assert sorted(f for m in markers.values() for f in json.loads(m)["files"]) == files
    assert not (out / "_staging").exists()
    ledger = _ledger(spark, tmp_path, "replayed")
    assert [(e, rows, replayed) for e, _, _, rows, replayed in ledger] == [(0, 50, False), (1, 50, False)]

    # a crash after the epoch was published and in the ledger, before Spark's commit log
    commits = _pipeline_checkpoint(tmp_path, "replayed") / "commits"
    for f in (commits / "1", commits / ".1.crc"):
        f.unlink(missing_ok=True)
    again = run_job_text(FILES)
    assert again.result.status == "FINISHED", again.result.error
    assert [(e, skipped) for e, _, skipped in _commits(again)] == [(1, True)]  # only the replayed epoch, skipped
    assert (commits / "1").exists()
    assert _data_files(out) == files and _markers(out) == markers
    assert sorted(r.id for r in spark.read.json(str(out)).collect()) == list(range(100))
    assert _ledger(spark, tmp_path, "replayed") == ledger  # it had the epoch: nothing added

    # a crash after the epoch was published but before the ledger recorded it
    ledger_log = tmp_path / "checkpoints" / "replayed" / "_ledger" / "_delta_log"
    last = max(int(p.stem) for p in ledger_log.glob("*.json"))
    for f in (ledger_log / f"{last:020d}.json", ledger_log / f".{last:020d}.json.crc", ledger_log / f"{last:020d}.crc"):
        f.unlink(missing_ok=True)
    for f in (commits / "1", commits / ".1.crc"):
        f.unlink(missing_ok=True)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # a new driver process: no cached table state
    third = run_job_text(FILES)
    assert third.result.status == "FINISHED", third.result.error
    assert _data_files(out) == files and _markers(out) == markers
    assert sorted(r.id for r in spark.read.json(str(out)).collect()) == list(range(100))
    # the replay is in the ledger now, as skipped (the sink held it: no rows written again)
    assert [(e, rows, replayed) for e, _, _, rows, replayed in _ledger(spark, tmp_path, "replayed")] == [
        (0, 50, False), (1, 0, True)
    ]


OVERLAP = """
env { job.name = overlap, job.mode = BATCH }
source { FakeSource { plugin_output = src, row.num = 40, rows.per.batch = 20, table-names = ["a.t1", "a.t2"],
                      schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}" } }
"""


def test_the_targets_are_read_while_the_query_starts_and_no_epoch_commits_before(spark, run_job_text, tmp_path,
                                                                                 monkeypatch):
    """The read of every target's committed epoch (a request-bound step: a
    hundred tables on an object store take a second) runs while Spark starts
    the query; the first epoch waits for it. An error in that read is the
    job's error, as when it ran first: nothing is committed."""
    import threading
    import time

    from pyspark.sql.streaming import DataStreamWriter

    from sinks.delta import Delta
    from streaming_engine.errors import RuntimeFailure

    seen: dict[str, list] = {"opened": [], "query_started": [], "written": [], "asked_while_reading": []}
    real_open, real_write, real_start = Delta.open, Delta.write, DataStreamWriter.start
    asked = threading.Event()

    def slow_open(self, ctx, dataset):
        # the read waits until Spark is asked to start the query: it does when
        # the read runs beside the start, and times out when it runs first
        seen["asked_while_reading"].append(asked.wait(timeout=60))
        try:
            return real_open(self, ctx, dataset)
        finally:
            seen["opened"].append(time.monotonic())

    def write(self, ctx, frames, dataset):
        seen["written"].append(time.monotonic())
        return real_write(self, ctx, frames, dataset)

    def start(self, *args, **kwargs):
        seen["query_started"].append(time.monotonic())
        asked.set()
        return real_start(self, *args, **kwargs)

    monkeypatch.setattr(Delta, "open", slow_open)
    monkeypatch.setattr(Delta, "write", write)
    monkeypatch.setattr(DataStreamWriter, "start", start)
    ran = run_job_text(OVERLAP)
    assert ran.result.status == "FINISHED", ran.result.error
    [opened], [query_started] = seen["opened"], seen["query_started"]
    assert seen["asked_while_reading"] == [True]  # Spark was asked to start the query while the targets were read
    assert query_started < opened
    assert len(seen["written"]) == 2 and min(seen["written"]) > opened  # no epoch wrote before the read was done
    assert ran.delta(spark, "out/t1").count() == 40 and ran.delta(spark, "out/t2").count() == 40
    # the job's ledger is created (empty) once the targets are read, beside the
    # first epoch, which then appends to it
    ledger_path = tmp_path / "checkpoints" / "overlap" / "_ledger"
    history = spark.sql(f"DESCRIBE HISTORY delta.`{ledger_path}`").orderBy("version").collect()
    assert [(h.version, h.operation) for h in history] == [(0, "CREATE TABLE"), (1, "WRITE"), (2, "WRITE")]
    ledger = _ledger(spark, tmp_path, "overlap")
    assert sorted({e for e, *_ in ledger}) == [0, 1] and sum(rows for *_, rows, _ in ledger) == 80

    def broken_open(self, ctx, dataset):
        time.sleep(1.0)
        raise RuntimeFailure("RUNTIME.FAILED", {"detail": "target unreadable (test)"})

    monkeypatch.setattr(Delta, "open", broken_open)
    seen["written"].clear()
    failed = run_job_text(OVERLAP.replace("job.name = overlap", "job.name = overlap2").replace("/out/", "/out2/"))
    assert failed.result.status == "FAILED" and "target unreadable (test)" in str(failed.result.error)
    assert not seen["written"] and not any(type(e).__name__ == "EpochCommitted" for e in failed.events)
    assert not (tmp_path / "out2").exists()
    assert not (tmp_path / "checkpoints" / "overlap2" / "_ledger").exists()  # no ledger either
