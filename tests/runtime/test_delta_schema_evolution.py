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
