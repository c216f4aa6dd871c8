"""JsonPath: columns extracted from JSON fields (plan time: options, schema, paths, the physical plan)."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import ConfigError, SchemaError
from streaming_engine.job import compile_text
from streaming_engine.plan.render import render
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms._jsonpath import UnsupportedJsonPath, compile_path
from transforms._jsonpath_catalyst import spark_member
from transforms.jsonpath import JsonPath, JsonPathOptions

T = TableSchema("fake", (Column("data", "string"), Column("col", "struct<name: string, age: int>"), Column("n", "int")))


def run(options, table=T):
    return JsonPath(JsonPathOptions.model_validate(options)).output([Dataset((table,))]).tables[0]


def test_traits():
    assert TRANSFORMS.find("jsonpath") is JsonPath
    # Spark column expressions: the planner puts it in a Catalyst segment (it was a Python pass)
    assert JsonPath.execution == "expression"
    assert JsonPath(JsonPathOptions.model_validate({"columns": [{"src_field": "data", "path": "$.a", "dest_field": "a"}]})).reads_metadata() == frozenset()


def test_doc_read_json_example_types():
    columns = [
        {"src_field": "data", "path": "$.data.c_string", "dest_field": "c1_string"},
        {"src_field": "data", "path": "$.data.c_boolean", "dest_field": "c1_boolean", "dest_type": "boolean"},
        {"src_field": "data", "path": "$.data.c_integer", "dest_field": "c1_integer", "dest_type": "int"},
        {"src_field": "data", "path": "$.data.c_decimal", "dest_field": "c1_decimal", "dest_type": "decimal(4,2)"},
        {"src_field": "data", "path": "$.data.c_date", "dest_field": "c1_date", "dest_type": "date"},
        {"src_field": "data", "path": "$.data.c_datetime", "dest_field": "c1_datetime", "dest_type": "time"},
        {"src_field": "data", "path": "$.data.c_array", "dest_field": "c1_array", "dest_type": "array<string>"},
    ]
    result = run({"source_table_name": "fake", "result_table_name": "fake1", "columns": columns})
    assert [(c.name, c.type) for c in result.columns[3:]] == [
        ("c1_string", "string"), ("c1_boolean", "boolean"), ("c1_integer", "int"), ("c1_decimal", "decimal(4,2)"),
        ("c1_date", "date"), ("c1_datetime", "string"), ("c1_array", "array<string>"),
    ]  # fmt: skip
    # "time" is carried as a string, checked as HH:mm:ss[.fraction] at run time
    assert [c.time for c in JsonPathOptions.model_validate({"columns": columns}).columns] == [False] * 5 + [True, False]


def test_doc_row_example_and_error_handling():
    opts = {"row_error_handle_way": "skip", "columns": [
        {"src_field": "col", "path": "$[0]", "dest_field": "name", "dest_type": "string", "column_error_handle_way": "SKIP_ROW"},
        {"src_field": "col", "path": "$[1]", "dest_field": "age", "dest_type": "int"},
    ]}  # fmt: skip
    result = run(opts)
    assert result.names[-2:] == ("name", "age")
    assert JsonPathOptions.model_validate(opts).row_error_handle_way == "SKIP"


def test_what_a_bad_value_does():
    """column_error_handle_way first, else row_error_handle_way (the page's "Configure error data handle way")."""
    def ways(row, column):
        opts = JsonPathOptions.model_validate({"row_error_handle_way": row, "columns": [
            {"src_field": "data", "path": "$.f1", "dest_field": "f1", **({"column_error_handle_way": column} if column else {})},
        ]})  # fmt: skip
        return opts.disposition(opts.columns[0])

    assert [ways("FAIL", c) for c in (None, "SKIP", "SKIP_ROW", "FAIL")] == ["fail", "null", "drop", "fail"]
    assert [ways("SKIP", c) for c in (None, "SKIP", "SKIP_ROW", "FAIL")] == ["drop", "null", "drop", "fail"]


@pytest.mark.parametrize(
    "columns, message",
    [
        ([], "columns is empty"),
        ([{"src_field": "data", "path": "data.x", "dest_field": "x"}], 'must start with "\\$"'),
        ([{"src_field": "data", "path": "$.x", "dest_field": "x", "dest_type": "strin"}], "unknown type 'strin'"),
        ([{"src_field": "data", "path": "$.x"}], "dest_field"),
        ([{"src_field": "data", "path": "$.x", "dest_field": "x"}] * 2, "dest_field 'x'; dest fields must be unique"),
        ([{"src_field": "data", "path": "$.x", "dest_field": "x", "column_error_handle_way": "IGNORE"}], "column_error_handle_way"),
        ([{"src_field": "data", "path": "$.a[", "dest_field": "x"}], "invalid JSONPath"),
    ],
)
def test_bad_options(columns, message):
    with pytest.raises(ValidationError, match=message):
        JsonPathOptions.model_validate({"columns": columns})


def test_schema_errors():
    with pytest.raises(SchemaError) as e:
        run({"columns": [{"src_field": "dta", "path": "$.x", "dest_field": "x"}]})
    assert e.value.condition == "SCHEMA.MISSING_COLUMN" and e.value.params["column"] == "dta"
    with pytest.raises(SchemaError, match="'n' of table 'fake' is int"):
        run({"columns": [{"src_field": "n", "path": "$.x", "dest_field": "x"}]})
    with pytest.raises(SchemaError) as e:
        run({"columns": [{"src_field": "data", "path": "$.x", "dest_field": "n"}]})
    assert e.value.condition == "SCHEMA.DUPLICATE_COLUMN"


# -- paths: what runs natively, what is refused at plan time -----------------------


@pytest.mark.parametrize(
    "path, steps",
    [
        ("$", ()),
        ("$.data.c_string", ("data", "c_string")),
        ("$['a.b'][0]", ("a.b", 0)),
        ('$["x"][-1].y', ("x", -1, "y")),
        ("$[1]", (1,)),
        ("$.a b", None),  # Jayway: blanks need ['a b']
    ],
)
def test_definite_paths(path, steps):
    if steps is None:
        with pytest.raises(ValueError, match="invalid JSONPath"):
            compile_path(path)
    else:
        assert compile_path(path).steps == steps


@pytest.mark.parametrize(
    "path, feature",
    [
        ("$..name", "a deep scan (..)"),
        ("$.store..price", "a deep scan (..)"),
        ("$.items[*].id", "a wildcard (* / [*])"),
        ("$.*", "a wildcard (* / [*])"),
        ("$.items[1:3]", "an array slice ([start:end])"),
        ("$.items[-2:]", "an array slice ([start:end])"),
        ("$['a','b']", "a union of members ['a', 'b']"),
        ("$.items[0,2]", "a union of indexes [0, 2]"),
        ("$.items[?(@.price > 10)].name", "a filter ([?(...)])"),
        ("$.items.length()", "the function length()"),
    ],
)
def test_path_features_refused_at_plan_time(path, feature):
    with pytest.raises(UnsupportedJsonPath) as e:
        compile_path(path)
    assert str(e.value).startswith(f"path {path!r} uses {feature}: not evaluated by this engine (definite paths only")
    with pytest.raises(ValidationError, match="not evaluated by this engine"):
        JsonPathOptions.model_validate({"columns": [{"src_field": "data", "path": path, "dest_field": "x"}]})


def test_member_names_spark_cannot_express_are_refused():
    assert spark_member("name") == ".name"
    assert spark_member("a.b") == "['a.b']"
    assert spark_member("it's") == ".it's"
    assert [spark_member(n) for n in ("", " a", "*", "it's.x")] == [None] * 4
    with pytest.raises(ValidationError, match="the member name '' cannot be written in Spark's JSON path syntax"):
        JsonPathOptions.model_validate({"columns": [{"src_field": "data", "path": "$['']", "dest_field": "x"}]})


JOB = """
env { job.name = jsonpath_plan }
source {
  FakeSource { plugin_output = fake, schema = { table = "shop.events", fields { id = int, data = string } } }
}
transform {
  Copy { plugin_input = fake, plugin_output = copied, fields { raw = data } }
  JsonPath {
    plugin_input = copied, plugin_output = extracted
    columns = [
      { src_field = data, path = "$.user.name", dest_field = name },
      { src_field = data, path = "$.user.age", dest_field = age, dest_type = int }
    ]
  }
  Replace { plugin_input = extracted, plugin_output = out, replace_field = name, pattern = "a", replacement = "b" }
}
sink { Noop { plugin_input = out } }
"""


def test_explain_shows_a_catalyst_segment_not_a_python_pass():
    job = compile_text(JOB)
    [chain] = [s for s in job.physical.pipelines[0].stages if s.kind == "transform-chain"]
    # Copy, JsonPath and Replace are ONE Catalyst segment: no Python, no mapInArrow
    assert [(s["segment"], s["members"]) for s in chain.detail["segments"]] == [("catalyst", ["Copy#2", "JsonPath#3", "Replace#4"])]
    text = render(job, "text")
    assert "1 segment(s), 0 Python pass(es)" in text
    assert "- Spark column expressions (Catalyst, no Python): Copy#2 Copy, JsonPath#3 JsonPath, Replace#4 Replace" in text
    assert "mapInArrow" not in text


def test_a_refused_path_is_a_config_error_naming_block_and_path():
    with pytest.raises(ConfigError) as e:
        compile_text(JOB.replace("$.user.age", "$.user..age"))
    [problem] = e.value.problems
    assert (problem.location.plugin, problem.location.key, problem.location.line) == ("JsonPath", "columns[1].path", 8)
    # shown in full (messages past 200 characters are clipped)
    assert problem.params["detail"] == (
        "path '$.user..age' uses a deep scan (..): not evaluated by this engine (definite paths only: "
        "$.a, ['a'], [0], [-1]); extract the enclosing object or array and process it downstream"
    )
