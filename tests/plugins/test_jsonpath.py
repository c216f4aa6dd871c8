"""JsonPath: columns extracted from JSON fields."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.jsonpath import JsonPath, JsonPathOptions

T = TableSchema("fake", (Column("data", "string"), Column("col", "struct<name: string, age: int>"), Column("n", "int")))


def run(options, table=T):
    return JsonPath(JsonPathOptions.model_validate(options)).output([Dataset((table,))]).tables[0]


def test_traits():
    assert TRANSFORMS.find("jsonpath") is JsonPath
    assert JsonPath.execution == "python"


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


def test_doc_row_example_and_error_handling():
    opts = {"row_error_handle_way": "skip", "columns": [
        {"src_field": "col", "path": "$[0]", "dest_field": "name", "dest_type": "string", "column_error_handle_way": "SKIP_ROW"},
        {"src_field": "col", "path": "$[1]", "dest_field": "age", "dest_type": "int"},
    ]}  # fmt: skip
    result = run(opts)
    assert result.names[-2:] == ("name", "age")
    assert JsonPathOptions.model_validate(opts).row_error_handle_way == "SKIP"


@pytest.mark.parametrize(
    "columns, message",
    [
        ([], "columns is empty"),
        ([{"src_field": "data", "path": "data.x", "dest_field": "x"}], 'must start with "\\$"'),
        ([{"src_field": "data", "path": "$.x", "dest_field": "x", "dest_type": "strin"}], "unknown type 'strin'"),
        ([{"src_field": "data", "path": "$.x"}], "dest_field"),
        ([{"src_field": "data", "path": "$.x", "dest_field": "x"}] * 2, "dest_field 'x'; dest fields must be unique"),
        ([{"src_field": "data", "path": "$.x", "dest_field": "x", "column_error_handle_way": "IGNORE"}], "column_error_handle_way"),
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
