"""Consecutive projection transforms become ONE select per table; a
non-projection transform in between splits the composition."""

from streaming_engine.job import compile_text
from streaming_engine.runtime.chain import run_chain

JOB = """
env {{ job.name = compose }}
source {{ FakeSource {{ plugin_output = src, row.num = 5, schema = {{ fields {{ id = bigint, v = double, s = string }} }} }} }}
transform {{
  Copy {{ fields {{ s2 = s }} }}
  FieldRename {{ replacements_with_regex = [ {{ replace_from = "^v$", replace_to = "value" }} ] }}
  Replace {{ replace_field = s2, pattern = "a", replacement = "b" }}
  {middle}
  Filter {{ include_fields = [id, value, s2] }}
}}
sink {{ Noop {{ }} }}
"""


def _projects(df) -> int:
    """Project nodes the chain added above the input (analyzed logical plan)."""
    return str(df._jdf.queryExecution().analyzed().toString()).count("Project [")


def _run(spark, middle: str):
    job = compile_text(JOB.format(middle=middle))
    members = [v for v in job.dag.vertices if v.kind == "transform"]
    src = spark.createDataFrame(
        [("src", "+I", i, i, i * 0.5, f"a{i}") for i in range(3)],
        "__table string, __kind string, __seq bigint, id bigint, v double, s string",
    )
    return src, run_chain(spark, job.dag, members, {"src": src}, 0)["src"]


def test_projections_compose_into_one_select(spark):
    src, out = _run(spark, "")
    assert _projects(out) - _projects(src) == 1
    assert out.columns == ["__table", "__kind", "__seq", "id", "value", "s2"]
    assert [tuple(r) for r in out.orderBy("id").select("id", "value", "s2").collect()] == [
        (0, 0.0, "b0"), (1, 0.5, "b1"), (2, 1.0, "b2")
    ]


def test_a_non_projection_in_between_splits_the_select(spark):
    src, out = _run(spark, 'Sql { query = "select id, value, s, s2 from src where id > 0" }')
    assert _projects(out) - _projects(src) >= 2  # before Sql, Sql itself, after it
    assert [tuple(r) for r in out.orderBy("id").select("id", "value", "s2").collect()] == [
        (1, 0.5, "b1"), (2, 1.0, "b2")
    ]
