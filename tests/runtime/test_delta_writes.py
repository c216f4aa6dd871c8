"""Delta appends as the engine writes them (``checkpoint/delta_log.append``:
Delta's own ``writeFiles`` plus one engine commit with the ``txn`` action),
compared with what Delta's DataFrameWriter writes for the same rows; fan-out;
tables the engine leaves to Delta's DataFrameWriter; MERGE with a sequence
column across epochs. Every job runs through the public interface."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming_engine.jvm import jvm_class

UTC = dt.timezone.utc

# -- helpers --------------------------------------------------------------------


def _log(table_dir: Path) -> list[list[dict]]:
    """The actions of every commit of a Delta table, one list per version, in order."""
    files = sorted((table_dir / "_delta_log").glob("*.json"), key=lambda p: int(p.stem))
    assert [int(f.stem) for f in files] == list(range(len(files))), "a gap in the Delta log"
    return [[json.loads(ln) for ln in f.read_text().splitlines() if ln.strip()] for f in files]


def _actions(table_dir: Path, kind: str) -> list[dict]:
    return [a[kind] for commit in _log(table_dir) for a in commit if kind in a]


def _data_files(table_dir: Path) -> set[str]:
    """Every Parquet file under the table directory (relative, partition dirs kept)."""
    return {
        p.relative_to(table_dir).as_posix()
        for p in table_dir.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(table_dir).parts[:-1])
    }


def _history(spark, path: Path) -> list[dict]:
    return [r.asDict(recursive=True) for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def delta_sink_log():
    """What the Delta sink logs (INFO and up), whatever the logging setup of the run."""
    logger = logging.getLogger("streaming_engine.sinks.delta")
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.records
    logger.removeHandler(handler)
    logger.setLevel(level)


def _two_table_batch(spark, tmp_path: Path, names: tuple[str, str], app: str):
    """An envelope batch of ids 0..5 (even ids in the first table, odd in the
    second) and the one-job write's slices of the two tables."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from streaming_engine.checkpoint import delta_log

    batch = spark.range(6).select(
        F.when(F.col("id") % 2 == 0, names[0]).otherwise(names[1]).alias("__table"), F.lit("+I").alias("__kind"),
        F.col("id").alias("__seq"), F.col("id").alias("c0"),
    ).repartition(1).sortWithinPartitions("__table")
    schema = StructType.fromDDL("id bigint")
    return batch, [delta_log.TableSlice(t, str(tmp_path / t), f"{app}.{t}", (3,), schema) for t in names]


def _write_parquet_inputs(directory: Path, n_files: int, rows_per_file: int) -> list[Path]:
    """Parquet files with disjoint id ranges and distinct, increasing modification
    times (the file source takes files in that order, one per epoch here)."""
    directory.mkdir(parents=True)
    out = []
    base = dt.datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
    for f in range(n_files):
        ids = list(range(f * rows_per_file, (f + 1) * rows_per_file))
        table = pa.table({
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([None if i % 7 == 0 else f"n{i}" for i in ids], pa.string()),
            "amount": pa.array([i * 1.25 for i in ids], pa.float64()),
            "ts": pa.array([base + dt.timedelta(minutes=i) for i in ids], pa.timestamp("us", tz="UTC")),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 40) for i in ids], pa.date32()),
        })
        path = directory / f"part-{f}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + f * 10, 1_700_000_000 + f * 10))
        out.append(path)
    return out


def _scan_files(spark, df) -> tuple[int, int]:
    """Run ``df`` with adaptive execution off and return the file scan's
    (files read, rows output) from its SQL metrics."""
    rows = df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    stack, found = [plan], []
    while stack:
        node = stack.pop()
        if "Scan" in node.nodeName() and node.metrics().contains("numFiles"):
            found.append(node)
        children = node.children()
        stack += [children.apply(i) for i in range(children.size())]
    assert len(found) == 1, [n.nodeName() for n in found]
    metrics = found[0].metrics()
    return int(metrics.apply("numFiles").value()), len(rows)


# -- 1 + 2: the engine's appends against Delta's own writer ----------------------------

FILES_JOB = """
env { job.name = same_rows }
source { LocalFile { plugin_output = src, path = "${work}/in", file_format_type = parquet,
                     max_files_per_trigger = 1 } }
sink { Delta { plugin_input = src, path = "${work}/engine" } }
"""


def test_engine_appends_match_deltas_writer_contents_stats_encoding_history_and_skipping(spark, run_job_text, tmp_path):
    inputs = _write_parquet_inputs(tmp_path / "in", n_files=3, rows_per_file=100)
    ran = run_job_text(FILES_JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    engine, writer = tmp_path / "engine", tmp_path / "writer"
    # Delta's own writer, the same rows in the same three appends
    for f in inputs:
        spark.read.parquet(str(f)).write.format("delta").mode("append").save(str(writer))

    # contents: equal, with the same schema
    e_df, w_df = spark.read.format("delta").load(str(engine)), spark.read.format("delta").load(str(writer))
    assert e_df.schema == w_df.schema
    assert e_df.schema.simpleString() == "struct<id:bigint,name:string,amount:double,ts:timestamp,day:date>"
    got = sorted(tuple(r) for r in e_df.collect())
    assert got == sorted(tuple(r) for r in w_df.collect())
    assert len(got) == 300 and len({r[0] for r in got}) == 300

    # one engine commit per epoch, each with its txn action
    e_log = _log(engine)
    adds = {name: _actions(d, "add") for name, d in (("engine", engine), ("writer", writer))}
    txns = _actions(engine, "txn")
    assert [t["version"] for t in txns] == [0, 1, 2]
    assert len({t["appId"] for t in txns}) == 1 and txns[0]["appId"].startswith("same_rows.")
    assert len(e_log) == 3  # the first commit also created the table
    assert _data_files(engine) == {a["path"] for a in adds["engine"]}  # no file the log does not name

    # per-file statistics: present for every file and for the same columns, with the same values
    def stats(a: dict) -> dict:
        assert a.get("stats"), f"file {a['path']} has no statistics"
        return json.loads(a["stats"])

    for name in ("engine", "writer"):
        for a in adds[name]:
            s = stats(a)
            assert {"numRecords", "minValues", "maxValues", "nullCount"} <= set(s), (name, s)
            assert set(s["minValues"]) == set(s["maxValues"]) == {"id", "name", "amount", "ts", "day"}, (name, s)
            assert set(s["nullCount"]) == {"id", "name", "amount", "ts", "day"}, (name, s)
    e_stats = sorted((stats(a) for a in adds["engine"]), key=lambda s: s["minValues"]["id"])
    w_stats = sorted((stats(a) for a in adds["writer"]), key=lambda s: s["minValues"]["id"])
    assert sum(s["numRecords"] for s in e_stats) == 300
    assert e_stats == w_stats

    # the same physical encoding: compare the Parquet footers column by column
    def footer(table_dir: Path, a: dict) -> list[tuple]:
        schema = pq.read_metadata(table_dir / a["path"]).schema
        return [(schema.column(i).name, schema.column(i).physical_type, str(schema.column(i).logical_type))
                for i in range(len(schema))]

    e_footer, w_footer = footer(engine, adds["engine"][0]), footer(writer, adds["writer"][0])
    assert e_footer == w_footer
    assert pq.read_schema(engine / adds["engine"][0]["path"]).field("ts").type == \
        pq.read_schema(writer / adds["writer"][0]["path"]).field("ts").type

    # the history: WRITE (Append) with Delta's operation metrics
    for name, path in (("engine", engine), ("writer", writer)):
        hist = _history(spark, path)
        assert [h["operation"] for h in hist] == ["WRITE"] * 3, name
        assert all(h["operationParameters"]["mode"] == "Append" for h in hist), name
        assert all({"numOutputRows", "numFiles"} <= set(h["operationMetrics"] or {}) for h in hist), (name, hist)
        assert sum(int(h["operationMetrics"]["numOutputRows"]) for h in hist) == 300, name
        assert sum(int(h["operationMetrics"]["numFiles"]) for h in hist) == len(adds[name]), name

    # data skipping: a selective read opens only the file whose id range holds the value
    reader = spark.newSession()
    reader.conf.set("spark.sql.adaptive.enabled", "false")
    for name, path in (("engine", engine), ("writer", writer)):
        total = len(adds[name])
        assert total >= 3
        read, n = _scan_files(reader, reader.read.format("delta").load(str(path)).where("id = 150"))
        assert n == 1, name
        assert read == 1 < total, (name, read, total)
        read, n = _scan_files(reader, reader.read.format("delta").load(str(path)).where("id >= 150"))
        assert n == 150 and read == 2, (name, read)


# -- 3: multi-table fan-out to one sink ---------------------------------------------------

FANOUT = """
env { job.name = fan }
source { FakeSource { plugin_output = src, seed = 5, tables_configs = [
  { schema = { table = "db.a", fields { id = bigint, v = double, s = string } }, row.num = 120, rows.per.batch = 60 },
  { schema = { table = "db.b", fields { id = bigint, ts = timestamp, amount = "decimal(12,2)" } }, row.num = 90, rows.per.batch = 60 },
  { schema = { table = "db.c", fields { code = string, id = bigint } }, row.num = 30, rows.per.batch = 60 } ] } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}" } }
"""


def test_fan_out_commits_every_table_with_the_sinks_txn_id_and_leaves_nothing_else(spark, run_job_text, tmp_path):
    from streaming_engine.job import compile_text
    from streaming_engine.plan.physical import txn_app_id

    ran = run_job_text(FANOUT)
    assert ran.result.status == "FINISHED", ran.result.error
    job = compile_text(FANOUT, variables={"work": str(tmp_path)})
    [pipeline] = job.plan.pipelines
    sink_uid = job.dag.vertex("Delta#2").uid
    # db.c has all its rows in epoch 0; an epoch without rows for a table costs it nothing: no commit
    want = {"a": (120, [0, 1]), "b": (90, [0, 1]), "c": (30, [0])}
    unreferenced = {}
    for name, (rows, epochs) in want.items():
        table = tmp_path / "out" / name
        assert ran.delta(spark, f"out/{name}").count() == rows
        app_id = txn_app_id(job.dag, pipeline.key, sink_uid, f"db.{name}")
        commits = _log(table)
        # every commit of the table is one epoch of this sink: its txn action names the sink's id and the epoch
        txns = []
        for commit in commits:
            [txn] = [a["txn"] for a in commit if "txn" in a]
            assert txn["appId"] == app_id
            txns.append(txn["version"])
            assert [a["commitInfo"]["operation"] for a in commit if "commitInfo" in a] == ["WRITE"]
        assert txns == epochs, (name, txns)
        with_rows = [t for t, c in zip(txns, commits) if any("add" in a for a in c)]
        assert with_rows == epochs
        adds = _actions(table, "add")
        assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == rows
        # nothing but the log and the committed files: no staging folder, no unreferenced file
        assert sorted(p.name for p in table.iterdir() if p.is_dir()) == ["_delta_log"]
        assert not list(table.rglob("_staging*"))
        assert {a["path"] for a in adds} <= _data_files(table)
        assert not _actions(table, "remove")
        extra = _data_files(table) - {a["path"] for a in adds}
        if extra:
            unreferenced[name] = {f: pq.read_metadata(table / f).num_rows for f in sorted(extra)}
    # the run's summary agrees
    assert {r["table"]: r["total_rows"] for r in ran.result.committed} == {"db.a": 120, "db.b": 90, "db.c": 30}
    # every Parquet file in a table directory is one the log references (db.c, without rows in epoch 1, was
    # not written then: not even the empty file Spark's writer makes for an empty append)
    assert not unreferenced, unreferenced


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_a_table_without_rows_in_an_epoch_is_not_written_then_and_an_empty_one_is_still_created(
        spark, run_job_text, tmp_path, mode):
    """A table without changes in an epoch costs its sink nothing (no transaction, no commit), on the one-job
    append and the one-job MERGE alike; a table without any row still gets its (empty) target in epoch 0."""
    text = FANOUT.replace("row.num = 30, rows.per.batch = 60 }", "row.num = 0, rows.per.batch = 60 },\n"
                          '  { schema = { table = "db.d", fields { id = bigint } }, row.num = 45, rows.per.batch = 60 }')
    if mode == "upsert":
        text = text.replace('path = "${work}/out/${table_name}"', 'path = "${work}/out/${table_name}", '
                            "save_mode = upsert, primary_key = [id]")
    ran = run_job_text(text)
    assert ran.result.status == "FINISHED", ran.result.error
    want = {"a": (120, [0, 1]), "b": (90, [0, 1]), "c": (0, [0]), "d": (45, [0])}
    for name, (rows, epochs) in want.items():
        table = tmp_path / "out" / name
        assert ran.delta(spark, f"out/{name}").count() == rows, name
        commits = _log(table)
        assert [t["version"] for c in commits for t in (a["txn"] for a in c if "txn" in a)] == epochs, name
        operations = {a["commitInfo"]["operation"] for c in commits for a in c if "commitInfo" in a}
        assert operations == ({"WRITE"} if mode == "append" else {"MERGE"}), (name, operations)
    # what each epoch committed (the ledger's rows): nothing for a table that epoch did not change
    assert sorted((c.table, e.epoch) for e in ran.events if type(e).__name__ == "EpochCommitted" for c in e.commits) == [
        ("db.a", 0), ("db.a", 1), ("db.b", 0), ("db.b", 1), ("db.c", 0), ("db.d", 0)]


# the fan-out with a transform between the source and the sink: the sink gets
# the per-table frames the chain made, in one envelope (pipeline._frames_envelope)
RENAMED = FANOUT.replace("plugin_input = src,", "plugin_input = renamed,").replace(
    "sink {", 'transform { TableRename { plugin_input = src, plugin_output = renamed, prefix = "r_" } }\nsink {')


@pytest.mark.parametrize("job", [FANOUT, RENAMED], ids=["source", "transform"])
def test_a_fan_out_written_in_one_spark_job_equals_one_write_per_table(spark, run_job_text, tmp_path, monkeypatch, job):
    """The one-job multi-table write (delta_log.append_tables) against Delta's
    own DataFrameWriter, table by table, for the same epochs: the same rows,
    per-file statistics, commits, txn actions and operation metrics; also for
    the frames of a transform (every table a transform makes is given to the
    sink, rows or not: db.c's second epoch commits its txn action only)."""
    from streaming_engine.checkpoint import delta_log
    from sinks.delta import WRITER_ENV

    names = ("a", "b", "c") if job is FANOUT else ("r_a", "r_b", "r_c")
    calls = []
    original = delta_log.append_tables
    monkeypatch.setattr(delta_log, "append_tables", lambda *a, **k: calls.append(len(a[2])) or original(*a, **k))
    helper = jvm_class(spark._jvm, delta_log.MULTI_TABLE_CLASS)
    closed_before = helper.filesClosedInBackground()
    one_job = run_job_text(job, variables={"work": str(tmp_path / "one")})
    assert one_job.result.status == "FINISHED", one_job.result.error
    # both epochs; db.c has no rows in epoch 1: not written (no commit) then, when read from the source itself
    assert calls == ([3, 2] if job is FANOUT else [3, 3]), calls
    # every file was closed (footer, upload) on a task's closer thread while the
    # task wrote on (local mode: the tasks run in this JVM): Parquet's memory
    # pool had room, and the check that reads it still works on this Parquet
    files = sum(len(_actions(tmp_path / "one" / "out" / n, "add")) for n in names)
    assert files > 0 and helper.filesClosedInBackground() - closed_before == files
    monkeypatch.setenv(WRITER_ENV, "dataframe")
    per_table = run_job_text(job.replace("job.name = fan", "job.name = fan2"), variables={"work": str(tmp_path / "per")})
    assert per_table.result.status == "FINISHED", per_table.result.error
    assert len(calls) == 2  # not used for the DataFrameWriter run

    for name in names:
        one, per = tmp_path / "one" / "out" / name, tmp_path / "per" / "out" / name
        got = spark.read.format("delta").load(str(one))
        want = spark.read.format("delta").load(str(per))
        assert got.schema == want.schema
        assert sorted(map(tuple, got.collect())) == sorted(map(tuple, want.collect()))
        stats = {d: sorted((json.loads(a["stats"]) for a in _actions(d, "add")), key=json.dumps) for d in (one, per)}
        assert stats[one] == stats[per], name
        assert all({"numRecords", "minValues", "maxValues", "nullCount"} <= set(s) for s in stats[one])
        # the same physical encoding as Delta's writer (Parquet column types, logical types)
        def footer(d: Path) -> set[tuple]:
            out = set()
            for a in _actions(d, "add"):
                schema = pq.read_metadata(d / a["path"]).schema
                out.add(tuple((schema.column(i).name, schema.column(i).physical_type, str(schema.column(i).logical_type))
                              for i in range(len(schema))))
            return out

        assert footer(one) == footer(per), name
        # every file the one-job write made is committed (no empty file for an epoch without rows)
        assert _data_files(one) == {a["path"] for a in _actions(one, "add")}
        for d in (one, per):
            hist = _history(spark, d)
            assert {h["operation"] for h in hist} == {"WRITE"}
        rows_by_version = {h["version"]: int(h["operationMetrics"].get("numOutputRows", 0)) for h in _history(spark, one)}
        assert sum(rows_by_version.values()) == got.count()
        assert [t["version"] for t in _actions(one, "txn")] == [t["version"] for t in _actions(per, "txn")]


# -- 4: tables the engine leaves to Delta's DataFrameWriter --------------------------------------

CHECKED = """
env { job.name = checked }
source { FakeSource { plugin_output = src, table-names = [t0], rows.per.batch = 2,
  schema = { fields { id = bigint, v = double } },
  rows = [ { kind = INSERT, fields = [1, 1.5] }, { kind = INSERT, fields = [2, 2.5] },
           { kind = INSERT, fields = [3, 3.5] }, { kind = INSERT, fields = [-7, 7.5] } ] } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}" } }
"""


def test_a_check_constraint_fails_the_epoch_that_violates_it_and_commits_none_of_it(spark, run_job_text, tmp_path):
    target = tmp_path / "out" / "t0"
    spark.sql(f"CREATE TABLE delta.`{target}` (id bigint, v double) USING delta")
    spark.sql(f"ALTER TABLE delta.`{target}` ADD CONSTRAINT positive CHECK (id > 0)")
    ran = run_job_text(CHECKED)
    assert ran.result.status == "FAILED"
    error = str(ran.result.error)
    assert "positive" in error and "CHECK" in error.upper() and "id > 0" in error, error
    # epoch 0 (ids 1, 2) committed; of epoch 1 neither the good row 3 nor the bad row
    assert sorted(r["id"] for r in ran.rows(spark, "out/t0")) == [1, 2]
    assert [t["version"] for t in _actions(target, "txn")] == [0]
    referenced = {a["path"] for a in _actions(target, "add")}
    # a file the failed write may have left is not part of the table (VACUUM removes it)
    assert referenced <= _data_files(target)


TABLES = """
env { job.name = existing }
source { FakeSource { plugin_output = src, table-names = [wide, part, rowtrack, colmap, fresh, prefixed, checked], rows.per.batch = 3,
  schema = { fields { id = bigint, v = double, p = string } },
  rows = [ { kind = INSERT, fields = [1, 1.5, "a"] }, { kind = INSERT, fields = [2, 2.5, "b"] },
           { kind = INSERT, fields = [3, 3.5, "a"] }, { kind = INSERT, fields = [4, null, "b"] },
           { kind = INSERT, fields = [5, 5.5, null] } ] } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}" } }
"""


def test_existing_tables_with_other_columns_partitions_or_features_get_their_rows(spark, run_job_text, tmp_path, delta_sink_log):
    out = tmp_path / "out"
    spark.sql(f"CREATE TABLE delta.`{out / 'wide'}` (id bigint, v double, p string, note string) USING delta")
    spark.sql(f"CREATE TABLE delta.`{out / 'part'}` (id bigint, v double, p string) USING delta PARTITIONED BY (p)")
    spark.sql(f"CREATE TABLE delta.`{out / 'rowtrack'}` (id bigint, v double, p string) USING delta "
              "TBLPROPERTIES (delta.enableRowTracking = true)")
    spark.sql(f"CREATE TABLE delta.`{out / 'colmap'}` (id bigint, v double, p string) USING delta "
              "TBLPROPERTIES (delta.columnMapping.mode = 'name', delta.minReaderVersion = 2, delta.minWriterVersion = 5)")
    # tables the engine commits itself, but the one-job fan-out leaves to a write of their own
    spark.sql(f"CREATE TABLE delta.`{out / 'prefixed'}` (id bigint, v double, p string) USING delta "
              "TBLPROPERTIES (delta.randomizeFilePrefixes = true)")
    spark.sql(f"CREATE TABLE delta.`{out / 'checked'}` (id bigint, v double, p string) USING delta")
    spark.sql(f"ALTER TABLE delta.`{out / 'checked'}` ADD CONSTRAINT positive CHECK (id > 0)")
    ran = run_job_text(TABLES)
    assert ran.result.status == "FINISHED", ran.result.error
    rows = [(1, 1.5, "a"), (2, 2.5, "b"), (3, 3.5, "a"), (4, None, "b"), (5, 5.5, None)]
    for name in ("wide", "part", "rowtrack", "colmap", "fresh", "prefixed", "checked"):
        got = sorted(tuple(r[c] for c in ("id", "v", "p")) for r in ran.rows(spark, f"out/{name}"))
        assert got == rows, name
        # two epochs (3 + 2 rows), each committed once with the sink's txn id
        assert [t["version"] for t in _actions(out / name, "txn")] == [0, 1], name
    assert [r["note"] for r in ran.rows(spark, "out/wide")] == [None] * 5
    # the partitioned table keeps its layout: every file in its partition directory
    adds = _actions(out / "part", "add")
    assert {a["partitionValues"]["p"] for a in adds} == {"a", "b", None}
    assert all(a["path"].startswith("p=") for a in adds)
    # the row-tracking table got row ids (Delta's writer assigns them)
    tracked = spark.read.format("delta").load(str(out / "rowtrack")).select("id", "_metadata.row_id").collect()
    assert len({r.row_id for r in tracked}) == 5
    # column mapping: the files store physical column names, readers see the logical ones
    colmap_file = out / "colmap" / _actions(out / "colmap", "add")[0]["path"]
    assert "id" not in pq.read_schema(colmap_file).names

    # decided once per table when the query started, with the reason, never per epoch
    decided = {}
    for r in delta_sink_log:
        if r.getMessage().startswith("Delta table written by Delta's DataFrameWriter"):
            decided.setdefault(Path(r.target).name, []).append(r.reason)
    assert sorted(decided) == ["colmap", "rowtrack", "wide"], decided
    assert all(len(v) == 1 for v in decided.values()), decided
    assert "schema" in decided["wide"][0]
    assert "rowTracking" in decided["rowtrack"][0]
    assert "columnMapping" in decided["colmap"][0] or "writer version 5" in decided["colmap"][0]
    # the one-job fan-out takes only tables whose every property it honours; the others keep Delta's behaviour
    on_their_own = {}
    for r in delta_sink_log:
        if r.getMessage() == "Delta table written on its own":
            on_their_own.setdefault(r.table, set()).add(r.reason)
    assert sorted(on_their_own) == ["checked", "part", "prefixed"], on_their_own
    assert "randomizeFilePrefixes" in " ".join(on_their_own["prefixed"])
    assert "CHECK" in " ".join(on_their_own["checked"]) and "partitioned" in " ".join(on_their_own["part"])
    assert all("/" in a["path"] for a in _actions(out / "prefixed", "add"))  # Delta's random file prefixes


# -- 6: MERGE with a sequence column across epochs ----------------------------------------

SEQUENCED = """
env { job.name = sequenced }
source { FakeSource { plugin_output = src, rows.per.batch = 2,
  schema = { table = "db.kv", fields { id = bigint, val = string, seq = bigint }, primaryKey { name = pk, columnNames = [id] } },
  rows = [
    { kind = INSERT, fields = [1, "new", 10] },       { kind = INSERT, fields = [2, "two", 20] },
    { kind = UPDATE_AFTER, fields = [1, "old", 5] },  { kind = DELETE, fields = [2, "two", 15] },
    { kind = UPDATE_AFTER, fields = [1, "newer", 11] }, { kind = INSERT, fields = [3, "three", 1] },
    { kind = DELETE, fields = [3, "three", 2] },      { kind = UPDATE_AFTER, fields = [2, "two-b", 21] } ] } }
sink { Delta { plugin_input = src, path = "${work}/kv", save_mode = upsert, sequence_column = seq } }
"""


def test_an_older_change_in_a_later_epoch_never_overwrites_a_newer_row(spark, run_job_text, tmp_path):
    ran = run_job_text(SEQUENCED)
    assert ran.result.status == "FINISHED", ran.result.error
    table = tmp_path / "kv"
    # four epochs of two changes each, one MERGE per epoch with the sink's txn id
    by_epoch = {}
    for version, commit in enumerate(_log(table)):
        for a in commit:
            if "txn" in a:
                by_epoch[a["txn"]["version"]] = version
    assert sorted(by_epoch) == [0, 1, 2, 3]

    def state(epoch: int) -> dict:
        df = spark.read.format("delta").option("versionAsOf", by_epoch[epoch]).load(str(table))
        return {r.id: (r.val, r.seq) for r in df.collect()}

    assert state(0) == {1: ("new", 10), 2: ("two", 20)}
    # epoch 1: key 1 "old" (seq 5 < 10) and the delete of key 2 (seq 15 < 20) are older than the rows: ignored
    assert state(1) == {1: ("new", 10), 2: ("two", 20)}
    # epoch 2: newer changes apply (seq 11 > 10), new keys are inserted
    assert state(2) == {1: ("newer", 11), 2: ("two", 20), 3: ("three", 1)}
    # epoch 3: a newer delete removes the row, a newer update replaces it
    assert state(3) == {1: ("newer", 11), 2: ("two-b", 21)}
    assert {r["id"]: r["val"] for r in ran.rows(spark, "kv")} == {1: "newer", 2: "two-b"}


# -- metadata nothing reads is not computed (plan.physical.unread_metadata) --------

PRUNE_JOB = """
env { job.name = prune }
source { LocalFile { plugin_output = src, path = "${work}/in", file_format_type = parquet,
                     schema = { fields { id = bigint, name = string }, primaryKey { name = pk, columnNames = [id] } } } }
sink { Delta { plugin_input = src, path = "${work}/out" %s } }
"""


@pytest.mark.parametrize("mode, computed", [("", False), (", save_mode = upsert", True)])
def test_the_source_computes_row_positions_only_when_a_block_reads_the_sequence(spark, tmp_path, mode, computed):
    """A file source's sequence (file time and row position) costs a column the
    reader must produce; batches reach foreachBatch planned already, so the
    pruning must happen in the streaming query's own plan."""
    from streaming_engine.job import compile_text
    from streaming_engine.runtime.events import EventBus
    from streaming_engine.runtime.pipeline import PipelineRunner

    _write_parquet_inputs(tmp_path / "in", n_files=1, rows_per_file=5)
    job = compile_text(PRUNE_JOB.replace("${work}", str(tmp_path)) % mode)
    runner = PipelineRunner(spark.newSession(), job.dag, job.plan.pipelines[0], EventBus(), str(tmp_path / "ledger"))
    df = runner._source_frame()
    # the optimizer the micro-batch runs (a streaming frame cannot be planned outside its query)
    plan = df._jdf.sparkSession().sessionState().optimizer().execute(df._jdf.queryExecution().analyzed()).toString()
    assert ("row_index" in plan) is computed, plan
    assert ("file_modification_time" in plan) is computed, plan


def test_a_one_job_table_whose_commit_meets_a_concurrent_change_is_handed_back_uncommitted(spark, tmp_path):
    """delta_log.append_tables: another writer creates one of the new tables
    between the write and the commits; that table's commit conflicts, its files
    stay uncommitted and it is returned as refused (the sink then writes it on
    its own, with the per-table retries); the other table commits."""

    from streaming_engine.checkpoint import delta_log

    batch, slices = _two_table_batch(spark, tmp_path, ("t0", "t1"), "app")

    def other_writer() -> None:
        spark.range(1).write.format("delta").save(str(tmp_path / "t1"))

    written, refused = delta_log.append_tables(spark, batch, slices, 0, before_commit=other_writer)
    assert set(written) == {"t0"} and written["t0"].rows == 3
    assert set(refused) == {"t1"} and "concurrent change" in refused["t1"], refused
    assert sorted(r.id for r in spark.read.format("delta").load(str(tmp_path / "t0")).collect()) == [0, 2, 4]
    # t1 holds only the other writer's row; the one-job files are not part of it
    assert [r.id for r in spark.read.format("delta").load(str(tmp_path / "t1")).collect()] == [0]
    assert not _actions(tmp_path / "t1", "txn")


def test_a_one_job_write_starts_from_the_recent_state_and_lands_after_another_writers_commit(
    spark, tmp_path, monkeypatch
):
    """delta_log.append_tables starts each table's transaction on the state this
    driver read recently (no listing of the log per table and epoch); a commit
    another writer made since (written into the log directly, as another
    process would) is found by the commit's conflict check: a blind append
    lands after it, a metadata change refuses the table."""
    import time


    from streaming_engine.checkpoint import delta_log

    batch, slices = _two_table_batch(spark, tmp_path, ("t0", "t1"), "app")
    t0, t1 = tmp_path / "t0", tmp_path / "t1"
    written, refused = delta_log.append_tables(spark, batch, slices, 0)
    assert set(written) == {"t0", "t1"} and not refused

    def other_process_appends(version: int, value: int) -> None:
        name = f"other-{value}.parquet"
        pq.write_table(pa.table({"id": pa.array([value], pa.int64())}), t0 / name)
        now = int(time.time() * 1000)
        add = {"path": name, "partitionValues": {}, "size": (t0 / name).stat().st_size, "modificationTime": now,
               "dataChange": True}
        info = {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"}, "isBlindAppend": True}
        (t0 / "_delta_log" / f"{version:020d}.json").write_text(f"{json.dumps({'commitInfo': info})}\n"
                                                                f"{json.dumps({'add': add})}\n")

    other_process_appends(1, 100)
    metadata = _actions(t1, "metaData")[0]
    columns = json.loads(metadata["schemaString"])
    columns["fields"].append({"name": "extra", "type": "string", "nullable": True, "metadata": {}})
    info = {"timestamp": int(time.time() * 1000), "operation": "ADD COLUMNS", "operationParameters": {}}
    (t1 / "_delta_log" / f"{1:020d}.json").write_text(
        f"{json.dumps({'commitInfo': info})}\n{json.dumps({'metaData': {**metadata, 'schemaString': json.dumps(columns)}})}\n")

    # the state the first write left is recent: a transaction starts from it, the log is not listed
    assert delta_log._start_recent(spark, str(t0)).readVersion() == 0
    written, refused = delta_log.append_tables(spark, batch, slices, 1)
    assert set(written) == {"t0"} and written["t0"].version == 2  # after the other process's version 1
    assert set(refused) == {"t1"} and "MetadataChangedException" in refused["t1"], refused
    assert sorted(r.id for r in spark.read.format("delta").load(str(t0)).collect()) == [0, 0, 2, 2, 4, 4, 100]
    assert [a["version"] for a in _actions(t0, "txn")] == [0, 1]
    assert [a["version"] for a in _actions(t1, "txn")] == [0]  # the refused table's files stay uncommitted

    # a state older than RECENT_STATE_MS is read again from the log
    other_process_appends(3, 101)
    assert delta_log._start_recent(spark, str(t0)).readVersion() == 2
    monkeypatch.setattr(delta_log, "RECENT_STATE_MS", -60_000)
    assert delta_log._start_recent(spark, str(t0)).readVersion() == 3


def test_inspect_reads_the_log_again_unless_this_driver_read_it_since_the_given_time(spark, tmp_path):
    """delta_log.inspect at a query start: a table state this driver read
    before the query started (a cached log object) is read again, so a txn
    another process committed since is seen; one read at or after
    ``read_since_ms`` (the log object the inspection itself created) is not."""
    import time

    from pyspark.sql.types import StructType

    from streaming_engine.checkpoint import delta_log

    table = tmp_path / "t"
    spark.range(3).write.format("delta").option("txnAppId", "app").option("txnVersion", 0).save(str(table))
    schema = StructType.fromDDL("id bigint")
    assert delta_log.inspect(spark, str(table), "app", schema).epoch == 0  # the state is now cached
    now = int(time.time() * 1000)
    info = {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"}}
    (table / "_delta_log" / f"{1:020d}.json").write_text(
        f"{json.dumps({'commitInfo': info})}\n{json.dumps({'txn': {'appId': 'app', 'version': 5, 'lastUpdated': now}})}\n")
    time.sleep(0.01)
    # read before "now": the cached state would do only for a caller that accepts it
    assert delta_log.inspect(spark, str(table), "app", schema, read_since_ms=0).epoch == 0
    assert delta_log.inspect(spark, str(table), "app", schema, read_since_ms=int(time.time() * 1000)).epoch == 5
    assert delta_log.inspect(spark, str(table), "app", schema).epoch == 5


def test_inspect_reads_the_epochs_from_the_checksum_file_without_a_spark_job(spark, tmp_path):
    """A starting query reads each target's committed epoch: from the
    version's checksum file, which lists the table's transactions, not by
    rebuilding the table's state (Delta's Snapshot.transactions: three Spark
    jobs per table in a new process, every restart); without the checksum
    files, from the state, with the same answer."""
    from pyspark.sql.types import StructType

    from streaming_engine.checkpoint import delta_log

    table = tmp_path / "t"
    for app, version in (("a", 0), ("b", 7), ("a", 1), ("a", 3)):
        spark.range(2).write.format("delta").mode("append").option("txnAppId", app).option("txnVersion", version).save(str(table))
    schema = StructType.fromDDL("id bigint")
    tracker = spark.sparkContext.statusTracker()

    def newest_job() -> int:
        # job ids grow; the tracker keeps only the last spark.ui.retainedJobs
        # jobs, so a count of what it holds can shrink in a long session
        return max(tracker.getJobIdsForGroup(), default=-1)

    def fresh_inspect(app: str) -> tuple[int, int]:
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # as in a new process
        before = newest_job()
        epoch = delta_log.inspect(spark, str(table), app, schema).epoch
        return epoch, newest_job() - before

    assert list((table / "_delta_log").glob("*.crc"))
    assert [fresh_inspect(app) for app in ("a", "b", "c")] == [(3, 0), (7, 0), (-1, 0)]
    for crc in (table / "_delta_log").glob("*.crc"):
        crc.unlink()
    answers = [fresh_inspect(app) for app in ("a", "b", "c")]
    assert [epoch for epoch, _ in answers] == [3, 7, -1]
    assert all(jobs > 0 for _, jobs in answers), answers  # the state was rebuilt: the other way


# -- 7: tombstones: a late, older change cannot bring a deleted row back ---------------

TOMBSTONED = """
env {{ job.name = tomb }}
source {{ FakeSource {{ plugin_output = src, rows.per.batch = 2,
  schema = {{ table = "db.kv", fields {{ id = bigint, val = string, seq = bigint }}, primaryKey {{ name = pk, columnNames = [id] }} }},
  rows = [
    {{ kind = INSERT, fields = [1, "one", 10] }},      {{ kind = INSERT, fields = [2, "two", 10] }},
    {{ kind = DELETE, fields = [1, "one", 20] }},      {{ kind = DELETE, fields = [2, "two", 20] }},
    {{ kind = UPDATE_AFTER, fields = [1, "late", 15] }}, {{ kind = INSERT, fields = [2, "again", 30] }},
    {{ kind = INSERT, fields = [1, "late-insert", 19] }}, {{ kind = UPDATE_AFTER, fields = [2, "newer", 31] }} ] }} }}
sink {{ Delta {{ plugin_input = src, path = "${{work}}/kv", save_mode = upsert, {order} }} }}
"""


@pytest.mark.parametrize("order", ["sequence_column = seq", "source_order_column = src_seq"])
def test_a_late_older_change_does_not_bring_a_deleted_row_back(spark, run_job_text, tmp_path, order):
    ran = run_job_text(TOMBSTONED.format(order=order))
    assert ran.result.status == "FINISHED", ran.result.error
    got = {r["id"]: r for r in ran.rows(spark, "kv")}
    if order.startswith("sequence"):
        # epoch 2: key 1's update (seq 15) is older than its delete (seq 20): ignored; key 2 comes back at seq 30
        assert {k: r["val"] for k, r in got.items()} == {2: "newer"}
    else:
        # the source's own order (__seq: the fixed rows' position) instead of the data's seq column:
        # every change is newer than the one before it, so the late changes apply
        assert {k: r["val"] for k, r in got.items()} == {1: "late-insert", 2: "newer"}
        assert all(r["src_seq"] is not None for r in got.values())
    tombs = spark.read.format("delta").load(str(tmp_path / "kv" / "_cdc_tombstones"))
    if order.startswith("sequence"):
        assert {r.id: r.seq for r in tombs.collect()} == {1: 20}  # key 2's tombstone went with its newer insert
    # the tombstones are invisible to readers of the table
    assert "_cdc_tombstones" not in {f.split("/")[0] for f in spark.read.format("delta").load(str(tmp_path / "kv")).inputFiles()}


# -- 8: a source's TRUNCATE clears the table's older rows ------------------------------


@pytest.mark.parametrize("source_order", [True, False])
def test_a_truncate_clears_older_rows_keeps_later_changes_and_replays_once(spark, tmp_path, source_order):
    """delta_txn.upsert with TRUNCATE control rows (what the Kafka source's
    truncate_events = apply emits): the epoch's changes before the truncate and
    every older row of the table go, the changes after it stay; a replayed
    epoch commits nothing; with the source order stored, a change older than
    the truncate arriving in a later epoch is dropped too."""
    from streaming_engine.checkpoint import delta_txn
    from streaming_engine.runtime import rows

    path = str(tmp_path / "t")

    def epoch(n: int, changes: list[tuple[str, int | None, str | None, int]]) -> None:
        df = spark.createDataFrame([("db.t", k, s, i, v) for k, i, v, s in changes],
                                   f"{rows.TABLE} string, {rows.KIND} string, {rows.SEQ} bigint, id int, v string")
        columns, sequence = ["id", "v"], None
        if source_order:
            df, columns, sequence = df.withColumn("_lsn", df[rows.SEQ]), ["id", "v", "_lsn"], "_lsn"
        delta_txn.upsert(spark, df, path, ["id"], columns, "app", n, sequence, tombstones=sequence is not None,
                         truncates=True, source_order=source_order)

    def table() -> dict:
        return {r.id: r.v for r in spark.read.format("delta").load(path).collect()}

    epoch(0, [("+I", 1, "a", 10), ("+I", 2, "b", 20), ("+I", 3, "c", 30)])
    assert table() == {1: "a", 2: "b", 3: "c"}
    one = [("+U", 1, "a2", 40), (rows.TRUNCATE, None, None, 50), ("+I", 4, "d", 60), ("+U", 2, "b2", 70)]
    epoch(1, one)
    assert table() == {2: "b2", 4: "d"}  # 1's update came before the truncate: gone with the rest
    versions = len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect())
    epoch(1, one)  # a replay after a crash
    assert table() == {2: "b2", 4: "d"}
    assert len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()) == versions
    epoch(2, [("+I", 5, "late", 45), ("+U", 4, "d2", 80)])  # 5 is older than the truncate at 50
    if source_order:
        assert table() == {2: "b2", 4: "d2"}
        tombs = str(tmp_path / "t" / "_cdc_tombstones")
        assert [r.txn["version"] for r in spark.read.json(f"{tombs}/_delta_log/*.json").where("txn.appId = 'app.truncated'").collect()] == [50]
    else:  # without a stored order, a later epoch's change is the newer one (documented)
        assert table() == {2: "b2", 4: "d2", 5: "late"}


@pytest.mark.parametrize("sequence", [None, "_lsn"])
def test_a_partial_upsert_keeps_the_tables_values_of_its_unchanged_columns_and_an_insert_of_one_fails(
        spark, tmp_path, sequence):
    """delta_txn.upsert with ``by_key`` (what Postgres-CDC under REPLICA IDENTITY DEFAULT emits): a PARTIAL
    kind (``+U~2``) keeps the table's value of the column at that position and sets the others; a delete
    carrying its key alone deletes; an insert leaving a column unchanged (no row of its key to keep it
    from) fails the MERGE naming the table, the column and the key, and commits nothing."""
    from streaming_engine.checkpoint import delta_txn
    from streaming_engine.runtime import rows
    from streaming_engine.schema import partial_kind

    path = str(tmp_path / "t")

    def epoch(n: int, changes: list[tuple]) -> None:
        df = spark.createDataFrame([("db.t", k, s, i, v, d) for k, i, v, d, s in changes],
                                   f"{rows.TABLE} string, {rows.KIND} string, {rows.SEQ} bigint, id int, v int, "
                                   "doc string")
        columns = ["id", "v", "doc"]
        if sequence:
            df, columns = df.withColumn(sequence, df[rows.SEQ]), [*columns, sequence]
        delta_txn.upsert(spark, df, path, ["id"], columns, "app", n, sequence, tombstones=sequence is not None,
                         by_key=True)

    def table() -> dict:
        return {r.id: (r.v, r.doc) for r in spark.read.format("delta").load(path).collect()}

    epoch(0, [("+I", 1, 1, "one", 10), ("+I", 2, 2, "two", 11), ("+I", 3, 3, "three", 12)])
    epoch(1, [(partial_kind("+U", [2]), 1, 10, None, 20), ("-D", 2, None, None, 21),
              (partial_kind("+U", [1, 2]), 3, None, None, 22)])
    assert table() == {1: (10, "one"), 3: (3, "three")}
    versions = len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect())
    with pytest.raises(Exception) as e:
        epoch(2, [("+U", 1, 11, "uno", 30), (partial_kind("+I", [2]), 7, 7, None, 31)])
    assert "column doc unchanged" in str(e.value) and '{"id":7}' in str(e.value), str(e.value)[:2000]
    assert table() == {1: (10, "one"), 3: (3, "three")}  # nothing of the failed epoch
    assert len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()) == versions


# -- 9: SCD type 2: every version of a row, with validity from the sequence --------------

SCD2 = """
env { job.name = scd2 }
source { FakeSource { plugin_output = src, rows.per.batch = 2,
  schema = { table = "db.people", fields { id = bigint, name = string, city = string, seq = bigint },
             primaryKey { name = pk, columnNames = [id] } },
  rows = [
    { kind = INSERT, fields = [1, "Ann", "Oslo", 10] },          { kind = INSERT, fields = [2, "Bob", "Rome", 10] },
    { kind = UPDATE_AFTER, fields = [1, "Ann", "Bergen", 20] },  { kind = UPDATE_AFTER, fields = [1, "Anne", "Bergen", 25] },
    { kind = UPDATE_AFTER, fields = [2, "Bobby", "Rome", 30] },  { kind = DELETE, fields = [1, "Anne", "Bergen", 40] },
    { kind = UPDATE_AFTER, fields = [1, "late", "X", 15] },      { kind = INSERT, fields = [1, "Ann", "Paris", 50] },
    { kind = UPDATE_AFTER, fields = [2, "B", "Milan", 60] },     { kind = UPDATE_AFTER, fields = [2, "B", "Milan", 60] },
    { kind = UPDATE_AFTER, fields = [2, "B", "Milan", 60] },     { kind = UPDATE_AFTER, fields = [2, "B2", "Turin", 5] } ] } }
sink { Delta { plugin_input = src, path = "${work}/people", save_mode = upsert, sequence_column = seq,
               stored_as_scd_type = 2, track_history_except_column_list = [name] } }
"""


def test_scd_type_2_keeps_every_version_with_validity_from_the_sequence(spark, run_job_text, tmp_path):
    """Six epochs of two changes: a city change opens a version, a name change
    (untracked) updates the open one in place, a delete ends it, a new insert
    opens another; a late change older than the key's delete, a duplicate and a
    replayed copy make no history."""
    ran = run_job_text(SCD2)
    assert ran.result.status == "FINISHED", ran.result.error
    got = sorted((r["id"], r["name"], r["city"], r["__START_AT"], r["__END_AT"]) for r in ran.rows(spark, "people"))
    assert got == sorted([
        (1, "Ann", "Oslo", 10, 20),
        (1, "Anne", "Bergen", 20, 40),  # 25 renamed it in place; the delete at 40 ended it
        (1, "Ann", "Paris", 50, None),  # the update at 15 is older than the delete: ignored
        (2, "Bobby", "Rome", 10, 60),  # renamed in place at 30: still the version from 10
        (2, "B", "Milan", 60, None),  # once, although sent three times; the change at 5 is older
    ])
    # one MERGE per epoch with the sink's txn id
    txns = [a["txn"]["version"] for commit in _log(tmp_path / "people") for a in commit if "txn" in a]
    assert txns == sorted(set(txns)) and len(txns) == 6
    from streaming_engine.job import compile_text
    from streaming_engine.plan.render import render

    text = render(compile_text(SCD2.replace("${work}", str(tmp_path))))
    assert "SCD type 2: __START_AT/__END_AT from seq, history of city" in text, text


# -- 10: MERGEs of different tables run at the same time ------------------------------------

FOUR_TABLES = """
env {{ job.name = par, commit.parallelism = 4 }}
source {{ FakeSource {{ plugin_output = src, tables_configs = [ {tables} ] }} }}
sink {{ Delta {{ plugin_input = src, path = "${{work}}/wh/${{table_name}}", save_mode = upsert }} }}
"""


def test_merges_of_different_tables_overlap_in_time(spark, run_job_text, monkeypatch):
    """Each MERGE runs in its own session (txn settings per session), so the
    sink commits tables concurrently: the first two MERGEs of an epoch wait
    for each other inside the real MERGE call; were they serialised, the first
    would wait alone and the barrier would break. (The per-table path: a
    multi-table batch's upserts otherwise go through the one-job MERGE.)"""
    import threading
    import time

    from sinks.delta import MERGE_ENV
    from streaming_engine.checkpoint import delta_txn

    monkeypatch.setenv(MERGE_ENV, "per_table")

    barrier = threading.Barrier(2, timeout=60)
    spans: list[tuple[str, float, float]] = []
    broken: list[str] = []
    real = delta_txn.as_txn

    def observed(spark_, app_id, epoch, fn):
        def timed(session):
            start = time.monotonic()
            if epoch == 0 and len(spans) + len(broken) < 2:
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    broken.append(app_id)
            try:
                return fn(session)
            finally:
                spans.append((app_id, start, time.monotonic()))
        return real(spark_, app_id, epoch, timed)

    monkeypatch.setattr(delta_txn, "as_txn", observed)
    tables = ", ".join(
        f'{{ row.num = 300, schema = {{ table = "db.t{i}", fields {{ id = int, v = string }}, '
        f'primaryKey {{ name = pk, columnNames = [id] }} }} }}'
        for i in range(4)
    )
    ran = run_job_text(FOUR_TABLES.format(tables=tables))
    assert ran.result.status == "FINISHED", ran.result.error
    assert not broken, f"MERGEs ran one at a time: {broken}"
    first = sorted(spans, key=lambda s: s[1])[:2]
    assert first[0][0] != first[1][0] and first[1][1] < first[0][2], spans  # two tables, the second began before the first ended
    for i in range(4):
        assert len(ran.rows(spark, f"wh/t{i}")) > 0


def test_a_truncate_ends_every_current_scd2_version_and_later_changes_open_new_ones(spark, tmp_path):
    from streaming_engine.checkpoint import delta_scd2
    from streaming_engine.runtime import rows

    path = str(tmp_path / "h")

    def epoch(n: int, changes: list) -> None:
        df = spark.createDataFrame([("db.t", k, s, i, v) for k, i, v, s in changes],
                                   f"{rows.TABLE} string, {rows.KIND} string, {rows.SEQ} bigint, id int, v string")
        df = df.withColumn("_lsn", df[rows.SEQ])
        delta_scd2.apply(spark, df, path, ["id"], ["id", "v", "_lsn"], ["v"], "app", n, "_lsn", 86_400_000,
                         truncates=True)

    def history() -> list:
        return sorted((r["id"], r["v"], r["__START_AT"], r["__END_AT"]) for r in spark.read.format("delta").load(path).collect())

    epoch(0, [("+I", 1, "a", 10), ("+I", 2, "b", 20), ("+I", 3, "c", 30)])
    one = [("+U", 1, "a2", 40), (rows.TRUNCATE, None, None, 50), ("+I", 2, "b2", 60)]
    epoch(1, one)
    expected = [(1, "a", 10, 50), (2, "b", 20, 50), (2, "b2", 60, None), (3, "c", 30, 50)]
    assert history() == expected  # 1's update came before the truncate: no version of it
    epoch(1, one)  # a replay
    assert history() == expected
    epoch(2, [("+U", 3, "late", 45), ("+I", 1, "new", 70)])  # 45 is older than the truncate
    assert history() == sorted([*expected, (1, "new", 70, None)])


# -- 11: a fan-out's log operations run commit.log.parallelism at a time ---------------------

FAN_OUT_PARALLEL = """
env { job.name = logpar, job.mode = BATCH, commit.parallelism = 1, commit.log.parallelism = 3 }
source { FakeSource { plugin_output = src, table-names = [t0, t1, t2, t3], row.num = 4,
  schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = src, path = "${work}/out/${table_name}" } }
"""


def test_a_fan_outs_log_operations_run_commit_log_parallelism_at_a_time(spark, run_job_text, monkeypatch):
    """The state reads at query start and the one-job write's transaction
    starts and commits take env.commit.log.parallelism; commit.parallelism
    (per-table Spark jobs) does not bound them."""
    from streaming_engine.runtime import parallel

    seen: dict[str, set[int]] = {}
    original = parallel.map_concurrently

    def spy(fn, items, max_workers):
        seen.setdefault(fn.__name__, set()).add(max_workers)
        return original(fn, items, max_workers)

    monkeypatch.setattr(parallel, "map_concurrently", spy)
    ran = run_job_text(FAN_OUT_PARALLEL)
    assert ran.result.status == "FINISHED", ran.result.error
    assert seen.get("inspect") == {3} and seen.get("start") == {3} and seen.get("commit") == {3}, seen
    assert [len(ran.rows(spark, f"out/t{i}")) for i in range(4)] == [4, 4, 4, 4]



def test_an_append_on_the_state_read_at_query_start_lands_after_a_table_another_process_created(
    spark, run_job_text, tmp_path, monkeypatch
):
    """A single-table append starts its transaction on the state the query
    start read (no listing of the log per epoch). Here another process creates
    the target table after that read, as the epoch begins (its commit written
    into the log directly, as another process would): the engine's commit of a
    new table conflicts, is tried again on a fresh listing of the log, and
    lands after the other process's commit with its txn action; nothing is
    lost or written twice. (Had the first attempt listed the log, it would
    have found the table and not conflicted: the logged retry says it did not.)"""
    import time

    from streaming_engine.runtime import faults

    _write_parquet_inputs(tmp_path / "in", n_files=1, rows_per_file=5)
    target = tmp_path / "engine"
    created: list[int] = []
    real = faults.maybe_crash

    def other_process_creates_the_table(point: str, epoch: int, sink: str | None = None) -> None:
        if point == "before_sink" and not created:
            created.append(epoch)
            source = next((tmp_path / "in").glob("*.parquet"))
            schema = spark.read.parquet(str(source)).schema
            name = "other-0.parquet"
            (target / "_delta_log").mkdir(parents=True, exist_ok=True)
            pq.write_table(pq.read_table(source).slice(0, 1), target / name)
            now = int(time.time() * 1000)
            meta = {"id": "other", "format": {"provider": "parquet", "options": {}}, "schemaString": schema.json(),
                    "partitionColumns": [], "configuration": {}, "createdTime": now}
            add = {"path": name, "partitionValues": {}, "size": (target / name).stat().st_size,
                   "modificationTime": now, "dataChange": True}
            (target / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in (
                {"commitInfo": {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"}}},
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": meta}, {"add": add},
            )) + "\n")
        real(point, epoch, sink)

    monkeypatch.setattr(faults, "maybe_crash", other_process_creates_the_table)
    commit_log = logging.getLogger("streaming_engine.commit")
    retries = _Records()
    commit_log.addHandler(retries)
    try:
        ran = run_job_text(FILES_JOB)
    finally:
        commit_log.removeHandler(retries)
    assert ran.result.status == "FINISHED", ran.result.error
    assert created == [0]
    # the first attempt started on the state read at query start ("no table") and met the
    # other process's table; the retry listed the log
    assert [(r.getMessage(), getattr(r, "conflict", None)) for r in retries.records] == [
        ("retrying Delta conflict", "ProtocolChangedException")
    ]
    commits = _log(target)
    assert len(commits) == 2  # the other process's creation, then the engine's epoch 0 after it
    assert [a["txn"]["version"] for a in commits[1] if "txn" in a] == [0]
    ids = sorted(r.id for r in spark.read.format("delta").load(str(target)).collect())
    expected = sorted(r.id for r in spark.read.parquet(str(tmp_path / "in")).collect())
    assert ids == sorted([expected[0], *expected])  # the other process's row and every row of the epoch, once


def test_a_second_driver_of_the_job_can_neither_land_an_epoch_twice_nor_behind_the_table(spark, tmp_path):
    """The fence of the engine's appends (delta_log._fence): another driver of
    the same job (same txn ids) that commits the epoch between this driver's
    snapshot and its commit makes this commit fail Delta's own conflict check,
    and the retry skips the epoch; an epoch (or an older one) the table holds
    already is skipped before anything is written; the same for the one-job
    write of many tables and for the ledger."""
    from pyspark.sql import functions as F

    from streaming_engine.checkpoint import delta_log, delta_txn, ledger
    from streaming_engine.checkpoint.record import CommitRecord

    loc = str(tmp_path / "t")
    rows = lambda lo, hi: spark.range(lo, hi).select(F.col("id"))  # noqa: E731
    assert not delta_log.append(spark, loc, rows(0, 3), "job.app", 0).skipped
    calls = []

    def other_driver_commits_epoch_1() -> None:
        if not calls:
            calls.append(1)
            assert not delta_log.append(spark, loc, rows(3, 6), "job.app", 1).skipped

    done = delta_txn.with_retries("append", lambda: delta_log.append(
        spark, loc, rows(3, 6), "job.app", 1, before_commit=other_driver_commits_epoch_1, recent=not calls))
    assert done.skipped and calls == [1]
    assert delta_log.append(spark, loc, rows(3, 6), "job.app", 1).skipped  # the epoch is there
    assert delta_log.append(spark, loc, rows(0, 3), "job.app", 0).skipped  # a driver behind the table
    assert sorted(r.id for r in spark.read.format("delta").load(loc).collect()) == list(range(6))
    assert [a["version"] for a in _actions(tmp_path / "t", "txn")] == [0, 1]
    # without the fence the first commit lands beside the other driver's: Delta saw the conflict
    assert not delta_log.append(spark, loc, rows(6, 7), "job.app", 2).skipped

    # the one-job write of several tables
    batch, slices = _two_table_batch(spark, tmp_path, ("m0", "m1"), "job")
    written, refused = delta_log.append_tables(spark, batch, slices, 0)
    assert set(written) == {"m0", "m1"} and not refused

    def other_driver_writes_epoch_1() -> None:
        got, no = delta_log.append_tables(spark, batch, slices, 1)
        assert {t for t, a in got.items() if not a.skipped} == {"m0", "m1"} and not no

    written, refused = delta_log.append_tables(spark, batch, slices, 1, before_commit=other_driver_writes_epoch_1)
    assert not written and set(refused) == {"m0", "m1"}
    assert all("ConcurrentTransactionException" in r for r in refused.values()), refused
    written, refused = delta_log.append_tables(spark, batch, slices, 1)  # what the sink then does per table
    assert set(written) == {"m0", "m1"} and all(a.skipped for a in written.values()) and not refused
    for t, ids in (("m0", [0, 0, 2, 2, 4, 4]), ("m1", [1, 1, 3, 3, 5, 5])):
        assert sorted(r.id for r in spark.read.format("delta").load(str(tmp_path / t)).collect()) == ids
        assert [a["version"] for a in _actions(tmp_path / t, "txn")] == [0, 1]

    # the ledger: an epoch recorded by one driver is not recorded again by another
    path = str(tmp_path / "_ledger")
    commits = [CommitRecord("sink", "t", loc, 3, 1, False)]
    assert ledger.record(spark, path, "job", "p0", 0, commits)
    assert not ledger.record(spark, path, "job", "p0", 0, commits)
    assert ledger.record(spark, path, "job", "p1", 0, commits)  # another pipeline's epoch 0
    got = spark.read.format("delta").load(path).groupBy("pipeline", "epoch").count().collect()
    assert sorted((r.pipeline, r.epoch, r["count"]) for r in got) == [("p0", 0, 1), ("p1", 0, 1)]
