"""The one-job MERGE of a multi-table batch (``checkpoint/delta_merge.py``,
``jvm/MultiTableMerge.java``) against Delta's own MERGE per table
(``STREAMING_ENGINE_DELTA_MERGE=per_table``): the same rows in every table and
tombstone table, epoch after epoch, through the public interface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sinks.delta import MERGE_ENV
from streaming_engine.checkpoint import delta_merge

TABLES = 3


def _job(order: str, epochs: int = 4, transform: str = "") -> str:
    cdc = ", ".join(
        f'{{ schema = {{ table = "db.t{i}", fields {{ id = bigint, name = string, seq = bigint, score = double }}, '
        f"primaryKey {{ name = pk{i}, columnNames = [id] }} }}, row.num = {epochs * 40}, rows.per.batch = 40, "
        f"cdc = {{ key_column = id, keys = 30, update_ratio = 0.4, delete_ratio = 0.2 }} }}"
        for i in range(TABLES))
    return f"""
env {{ job.name = merge, job.mode = BATCH }}
source {{ FakeSource {{ plugin_output = cdc, seed = 5, tables_configs = [ {cdc} ] }} }}
{transform}
sink {{ Delta {{ plugin_input = {"copied" if transform else "cdc"}, path = "${{work}}/out/${{table_name}}", save_mode = upsert {order} }} }}
"""


def _state(spark, root: Path) -> dict:
    out = {}
    for t in sorted(root.iterdir()):
        out[t.name] = sorted(tuple(r) for r in spark.read.format("delta").load(str(t)).collect())
        tombs = t / "_cdc_tombstones"
        if tombs.is_dir():
            out[t.name + "/tombstones"] = sorted(
                tuple(r)[:-1] for r in spark.read.format("delta").load(str(tombs)).collect())
    return out


# a transform between the source and the sink: the sink gets the chain's per-table frames in one envelope
COPY = "transform { Copy { plugin_input = cdc, plugin_output = copied, fields { name2 = name } } }"


@pytest.mark.parametrize("order,transform", [("", ""), (", sequence_column = seq", ""),
                                             (", source_order_column = _pos", ""), ("", COPY)],
                         ids=["key", "sequence", "source_order", "transform"])
def test_the_one_job_merge_equals_a_delta_merge_per_table(spark, run_job_text, tmp_path, monkeypatch, order, transform):
    calls = []
    real = delta_merge.merge_tables

    def spy(*a, **kw):
        out = real(*a, **kw)
        calls.append(out)
        return out

    monkeypatch.setattr(delta_merge, "merge_tables", spy)
    ran = run_job_text(_job(order, transform=transform))
    assert ran.result.status == "FINISHED", ran.result.error
    assert calls and all(not refused and len(done) == TABLES for done, refused in calls), calls
    one_job = _state(spark, tmp_path / "out")

    monkeypatch.setenv(MERGE_ENV, "per_table")
    other = tmp_path / "per_table"
    other.mkdir()
    ran2 = run_job_text(_job(order, transform=transform).replace("${work}/out", f"{other}/out").replace("job.name = merge", "job.name = m2"))
    assert ran2.result.status == "FINISHED", ran2.result.error
    per_table = _state(spark, other / "out")
    assert one_job == per_table
    assert sum(len(v) for k, v in one_job.items() if "/" not in k) > 0
    if transform:  # the transform's column reached every table
        assert all(spark.read.format("delta").load(str(tmp_path / "out" / t)).columns[-1] == "name2"
                   for t in ("t0", "t1", "t2"))


@pytest.mark.parametrize("source_order", [True, False])
def test_truncates_late_changes_and_replays_equal_delta_merge_per_table(spark, tmp_path, source_order):
    """``merge_tables`` on a two-table envelope against ``delta_txn.upsert`` per
    table, epoch by epoch: a truncate in the middle of an epoch (the changes
    before it gone, the rows it clears deleted), a later epoch's change older
    than the truncate (dropped with a source order: the tombstone table keeps
    the truncate's position), a replayed epoch (nothing committed again), and
    a table without a truncate beside one with it."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    from streaming_engine.checkpoint import delta_txn
    from streaming_engine.runtime import rows

    data = StructType([StructField("id", IntegerType()), StructField("v", StringType())])
    schema = StructType([*data.fields, StructField("_lsn", LongType())]) if source_order else data
    ordinals = (3, 4, 2) if source_order else (3, 4)
    one_job, per_table = tmp_path / "one", tmp_path / "per"

    def epoch(n: int, changes: dict[str, list[tuple[str, int | None, str | None, int]]]) -> dict:
        rows_ = [(t, k, s, i, v) for t, cs in changes.items() for k, i, v, s in cs]
        df = spark.createDataFrame(rows_, f"{rows.TABLE} string, {rows.KIND} string, {rows.SEQ} bigint, id int, v string")
        batch = df.repartition(2, rows.TABLE).sortWithinPartitions(rows.TABLE).persist()
        slices = [delta_merge.MergeSlice(t, str(one_job / t), f"app.{t}", ordinals, schema, ("id",),
                                         "_lsn" if source_order else None, 7 * 86_400_000, source_order)
                  for t in changes]
        done, refused = delta_merge.merge_tables(spark, batch, slices, n)
        assert not refused and set(done) == set(changes), (done, refused)
        for t in changes:
            frame = batch.where(f"{rows.TABLE} = '{t}'")
            columns, sequence = ["id", "v"], None
            if source_order:
                frame, columns, sequence = frame.withColumn("_lsn", frame[rows.SEQ]), ["id", "v", "_lsn"], "_lsn"
            delta_txn.upsert(spark, frame, str(per_table / t), ["id"], columns, f"app.{t}", n, sequence,
                             tombstones=sequence is not None, truncates=True, source_order=source_order)
        batch.unpersist()
        return done

    def state(root: Path) -> dict:
        out = {}
        for t in ("a", "b"):
            out[t] = sorted(tuple(r) for r in spark.read.format("delta").load(str(root / t)).collect())
            tombs = root / t / "_cdc_tombstones"
            if (tombs / "_delta_log").is_dir():
                out[t + "/tombstones"] = sorted(tuple(r)[:-1] for r in spark.read.format("delta").load(str(tombs)).collect())
                out[t + "/mark"] = delta_merge.delta_log.txn_version(spark, str(tombs), f"app.{t}.truncated")
        return out

    epoch(0, {"a": [("+I", 1, "a", 10), ("+I", 2, "b", 20), ("+I", 3, "c", 30)],
              "b": [("+I", 1, "x", 11), ("+I", 2, "y", 21)]})
    assert state(one_job) == state(per_table)
    one = {"a": [("+U", 1, "a2", 40), (rows.TRUNCATE, None, None, 50), ("+I", 4, "d", 60), ("+U", 2, "b2", 70)],
           "b": [("-D", 1, "x", 41), ("+U", 2, "y2", 51)]}
    epoch(1, one)
    assert state(one_job) == state(per_table)
    assert {r[0]: r[1] for r in state(one_job)["a"]} == {2: "b2", 4: "d"}
    versions = {t: delta_merge.delta_log.table_version(spark, str(one_job / t)) for t in ("a", "b")}
    replayed = epoch(1, one)  # a replay after a crash: the fence skips every table
    assert all(m.skipped for m in replayed.values())
    assert {t: delta_merge.delta_log.table_version(spark, str(one_job / t)) for t in ("a", "b")} == versions
    epoch(2, {"a": [("+I", 5, "late", 45), ("+U", 4, "d2", 80)], "b": [("+I", 1, "x-again", 12)]})
    got = state(one_job)
    assert got == state(per_table)
    if source_order:
        assert {r[0]: r[1] for r in got["a"]} == {2: "b2", 4: "d2"} and got["a/mark"] == 50
        assert {r[0]: r[1] for r in got["b"]} == {2: "y2"}  # 1's insert (12) is older than its delete (41)
    else:
        assert {r[0]: r[1] for r in got["a"]} == {2: "b2", 4: "d2", 5: "late"}


def test_an_optimize_between_the_files_and_the_commits_sends_that_table_to_delta_merge_with_the_same_rows(
        spark, run_job_text, tmp_path, monkeypatch):
    """OPTIMIZE (the maintenance work, or another writer) commits to one table after the one job wrote its
    files and before its commit: Delta's conflict check fails that table's commit, the epoch MERGEs it on
    its own, the other tables commit as one job; the rows equal Delta's MERGE per table."""
    from streaming_engine.runtime import faults
    from tests.merge_paths import merge_paths

    optimized = []
    real = faults.maybe_crash

    def optimize_then(point: str, epoch: int, sink: str | None = None) -> None:
        if point == "sink_files_written" and epoch == 2 and not optimized:
            target = tmp_path / "out" / "t0"
            optimized.append(spark.sql(f"OPTIMIZE delta.`{target}` ZORDER BY (name)").collect())  # rewrites even one file
        return real(point, epoch, sink)

    monkeypatch.setattr(faults, "maybe_crash", optimize_then)
    order = ", sequence_column = seq"
    ran = run_job_text(_job(order))
    assert ran.result.status == "FINISHED", ran.result.error
    assert optimized and optimized[0][0]["metrics"]["numFilesRemoved"] > 0, optimized  # it did rewrite files
    paths = {t: merge_paths(tmp_path / "out" / t) for t in ("t0", "t1", "t2")}
    assert paths["t0"] == {"one job": 3, "delta": 1}, paths  # epoch 2 of t0: refused by the conflict, MERGEd alone
    assert paths["t1"] == paths["t2"] == {"one job": 4}, paths
    one_job = _state(spark, tmp_path / "out")

    monkeypatch.setattr(faults, "maybe_crash", real)
    monkeypatch.setenv(MERGE_ENV, "per_table")
    other = tmp_path / "per_table"
    other.mkdir()
    ran2 = run_job_text(_job(order).replace("${work}/out", f"{other}/out").replace("job.name = merge", "job.name = m2"))
    assert ran2.result.status == "FINISHED", ran2.result.error
    assert one_job == _state(spark, other / "out")
