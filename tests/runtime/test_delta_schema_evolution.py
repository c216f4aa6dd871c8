"""The Delta sink meets an existing table that lacks columns of its input
(e.g. a CDC source's table gained a column): ``schema_evolution = add_columns``
(the default) adds them at the query's start and the rows written before read
null in them; ``none`` fails the pipeline naming them, the table untouched."""

from __future__ import annotations

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
