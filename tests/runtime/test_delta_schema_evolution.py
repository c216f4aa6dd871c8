"""The Delta sink meets an existing table that lacks columns of its input
(e.g. a CDC source's table gained a column): ``schema_evolution = add_columns``
(the default) adds them at the query's start and the rows written before read
null in them; ``none`` fails the pipeline naming them, the table untouched."""

from __future__ import annotations

import pytest

JOB = """
env {{ job.name = evolve_{mode}, job.mode = BATCH }}
source {{ FakeSource {{ plugin_output = rows, seed = 3, row.num = 20,
  schema = {{ fields {{ id = bigint, name = string, score = double }} }} }} }}
sink {{ Delta {{ plugin_input = rows, path = "${{work}}/{mode}", schema_evolution = {mode} }} }}
"""


def test_new_input_columns_are_added_to_the_table_or_refused_by_name(spark, run_job_text, tmp_path):
    for mode in ("add_columns", "none"):
        path = str(tmp_path / mode)
        spark.createDataFrame([(1, "before")], "id bigint, name string").write.format("delta").save(path)
        ran = run_job_text(JOB.format(mode=mode))
        table = spark.read.format("delta").load(path)
        if mode == "add_columns":
            assert ran.result.status == "FINISHED", ran.result.error
            assert table.columns == ["id", "name", "score"]
            rows = table.collect()
            assert len(rows) == 21 and [r["score"] for r in rows if r["name"] == "before"] == [None]
            assert sum(1 for r in rows if r["score"] is not None) == 20
        else:
            assert ran.result.status == "FAILED"
            assert "[SCHEMA.INCOMPATIBLE]" in ran.result.error and "lacks the input's columns score double" in ran.result.error
            assert "schema_evolution = add_columns" in ran.result.error
            assert table.columns == ["id", "name"] and table.count() == 1


def test_a_narrower_column_of_the_table_is_widened_or_refused_by_name(spark, run_job_text, tmp_path):
    """The table holds ``id`` as int and ``score`` as float, the input bigint and double (e.g. widened in
    the CDC source): add_columns widens them in place (Delta's type widening), the rows written before keep
    their values; none fails naming them, the table untouched. upsert (MERGE) and append alike."""
    for mode, save in (("add_columns", "append"), ("add_columns", "upsert"), ("none", "append")):
        path = str(tmp_path / mode)
        spark.createDataFrame([(1, "before", 0.5)], "id int, name string, score float").write.format("delta") \
            .mode("overwrite").option("overwriteSchema", "true").save(path)
        job = JOB.format(mode=mode).replace("evolve_", f"widen_{save}_")
        if save == "upsert":
            job = job.replace("schema_evolution", "save_mode = upsert, primary_keys = [id], schema_evolution") \
                     .replace("fields {", "primaryKey { name = pk, columnNames = [id] }, fields {")
        ran = run_job_text(job)
        table = spark.read.format("delta").load(path)
        if mode == "add_columns":
            assert ran.result.status == "FINISHED", ran.result.error
            assert dict(table.dtypes) == {"id": "bigint", "name": "string", "score": "double"}
            rows = table.collect()
            assert [r["score"] for r in rows if r["name"] == "before"] == [0.5] and len(rows) >= 20, (save, rows[:3])
        else:
            assert ran.result.status == "FAILED"
            assert "holds narrower types of id to bigint, score to double" in ran.result.error, ran.result.error
            assert dict(table.dtypes) == {"id": "int", "name": "string", "score": "float"} and table.count() == 1


def test_a_source_under_evolve_renames_and_drops_columns_of_the_table_by_column_mapping(spark, tmp_path):
    """The Delta sink opening a table whose source (under evolve) renamed ``old`` to ``new`` and dropped
    ``gone``: the table gets column mapping, the column renamed with its values, the dropped one gone, and
    an upsert's tombstone table renames a renamed key column too. A change Delta refuses (a CHECK constraint
    names the column) fails under evolve naming it; under try_evolve the table is left as lenient leaves it."""
    from types import SimpleNamespace

    from sinks.delta import Delta, DeltaSinkOptions
    from streaming_engine.errors import SchemaError
    from streaming_engine.schema import Column, TableSchema

    def table(behavior: str) -> TableSchema:
        return TableSchema("db.s.t", (Column("key", "int", False, 1, ("id",)), Column("new", "string", True, 2, ("old",))),
                           ("key",), evolution=behavior, dropped=("gone",))

    def sink(path) -> Delta:
        return Delta(DeltaSinkOptions.model_validate({"path": str(path), "save_mode": "upsert",
                                                  "source_order_column": "__pos"}))

    ctx = SimpleNamespace(spark=spark)
    path = tmp_path / "t"
    spark.createDataFrame([(1, "o1", "g1"), (2, "o2", "g2")], "id int, old string, gone string").write.format("delta").save(str(path))
    spark.createDataFrame([(9, 5)], "id int, __pos bigint").write.format("delta").save(str(path / "_cdc_tombstones"))
    s = sink(path)
    s._follow_source(ctx, table("evolve"), s._target(table("evolve")), str(path))
    got = spark.read.format("delta").load(str(path))
    assert got.columns == ["key", "new"] and sorted(tuple(r) for r in got.collect()) == [(1, "o1"), (2, "o2")]
    props = dict(spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect())
    assert props["delta.columnMapping.mode"] == "name"
    assert spark.read.format("delta").load(str(path / "_cdc_tombstones")).columns == ["key", "__pos"]
    s._follow_source(ctx, table("evolve"), s._target(table("evolve")), str(path))  # again (a restart): no change
    assert spark.read.format("delta").load(str(path)).columns == ["key", "new"]

    for behavior in ("evolve", "try_evolve"):
        path = tmp_path / behavior
        spark.createDataFrame([(1, "o1", "g1")], "key int, old string, gone string").write.format("delta").save(str(path))
        spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT known CHECK (old IS NULL OR old <> 'x')")
        s = sink(path)
        t = table(behavior)
        if behavior == "evolve":
            with pytest.raises(SchemaError, match=r"could not follow the source \(old renamed to new; dropped gone\)"):
                s._follow_source(ctx, t, s._target(t), str(path))
        else:
            s._follow_source(ctx, t, s._target(t), str(path))
        assert spark.read.format("delta").load(str(path)).columns == ["key", "old", "gone"], behavior
