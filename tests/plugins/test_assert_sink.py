"""Assert sink: rule options (SeaTunnel doc examples) and plan-time checks."""

import pytest
from pydantic import ValidationError

from sinks.assert_sink import Assert, AssertOptions
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import SINKS
from streaming_engine.schema import Column, Dataset, TableSchema

T = TableSchema("fake", (Column("id", "bigint"), Column("name", "string"), Column("age", "int")), ("id",))

SIMPLE = {
    "row_rules": [{"rule_type": "MAX_ROW", "rule_value": 10}, {"rule_type": "MIN_ROW", "rule_value": 5}],
    "field_rules": [
        {"field_name": "name", "field_type": "string", "field_value": [
            {"rule_type": "NOT_NULL"}, {"rule_type": "MIN_LENGTH", "rule_value": 5}, {"rule_type": "MAX_LENGTH", "rule_value": 10}]},
        {"field_name": "age", "field_type": "int", "field_value": [
            {"rule_type": "NOT_NULL", "equals_to": 23}, {"rule_type": "MIN", "rule_value": 32767}, {"rule_type": "MAX", "rule_value": 2147483647}]},
    ],
    "catalog_table_rule": {
        "primary_key_rule": {"primary_key_name": "primary key", "primary_key_columns": ["id"]},
        "constraint_key_rule": [{"constraint_key_name": "unique_name", "constraint_key_type": "UNIQUE_KEY",
                                 "constraint_key_columns": [{"constraint_key_column_name": "id", "constraint_key_sort_type": "ASC"}]}],
        "column_rule": [{"name": "id", "type": "bigint"}, {"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
    },
}  # fmt: skip


def make(rules, **extra):
    return Assert(AssertOptions.model_validate({"rules": rules, **extra}))


def test_traits():
    assert SINKS.find("assert") is Assert and Assert.commit_protocol == "none"


def test_doc_simple_example_passes_plan_checks():
    sink = make(SIMPLE)
    sink.check_input(Dataset((T,)))
    assert sink.targets(Dataset((T,))) == ["fake -> assert"]


def test_doc_complex_example_rules_parse():
    rules = {"row_rules": [{"rule_type": "MAX_ROW", "rule_value": 1}, {"rule_type": "MIN_ROW", "rule_value": 1}],
             "field_rules": [
                 {"field_name": "c_null", "field_type": "null", "field_value": [{"rule_type": "NULL"}]},
                 {"field_name": "c_map_nest", "field_type": "map<string, {c_int = int, c_string = string}>",
                  "field_value": [{"rule_type": "NOT_NULL", "equals_to": {"k1": [123, "BBB-BB"]}}]},
                 {"field_name": "c_row", "field_type": {"c_int": "int", "c_map": "map<string, string>"},
                  "field_value": [{"rule_type": "NOT_NULL", "equals_to": [1, {"k0": "v0"}]}]},
             ]}  # fmt: skip
    sink = make(rules, source_table_name="fake")
    assert sink.options.rules.field_rules[1].spark_type() == "map<string,struct<c_int: int, c_string: string>>"
    assert sink.options.rules.field_rules[2].field_value[0].equals_to == [1, {"k0": "v0"}]


def test_doc_multiple_tables_example():
    def cfg(path, n, fields):
        return {"table_path": path, "row_rules": [{"rule_type": "MAX_ROW", "rule_value": n}, {"rule_type": "MIN_ROW", "rule_value": n}],
                "field_rules": [{"field_name": f, "field_type": t, "field_value": [{"rule_type": "NOT_NULL"}]} for f, t in fields]}  # fmt: skip

    sink = make({"tables_configs": [cfg("test.table1", 16, [("c_int", "int"), ("c_bigint", "bigint")]),
                                    cfg("test.table2", 17, [("c_string", "string"), ("c_tinyint", "tinyint")])]})  # fmt: skip
    t1 = TableSchema("test.table1", (Column("c_int", "int"), Column("c_bigint", "bigint")))
    t2 = TableSchema("test.table2", (Column("c_string", "string"), Column("c_tinyint", "tinyint")))
    sink.check_input(Dataset((t1, t2)))
    with pytest.raises(SchemaError) as e:
        sink.check_input(Dataset((t2.renamed("test.table1"), t1.renamed("test.table2"))))
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert (e.value.params["column"], e.value.params["table"]) == ("c_int", "test.table1")


def test_missing_field_names_column_and_table():
    with pytest.raises(SchemaError) as e:
        make({"field_rules": [{"field_name": "agee", "field_value": [{"rule_type": "NOT_NULL"}]}]}).check_input(Dataset((T,)))
    assert (e.value.condition, e.value.params["column"], e.value.params["table"]) == ("SCHEMA.MISSING_COLUMN", "agee", "fake")


def test_column_rule_and_primary_key_rule():
    with pytest.raises(SchemaError) as e:
        make({"catalog_table_rule": {"column_rule": [{"name": "email"}]}}).check_input(Dataset((T,)))
    assert e.value.params["column"] == "email"
    with pytest.raises(SchemaError, match=r"primary_key_rule expects key \(name\) but the table's key is \(id\)"):
        make({"catalog_table_rule": {"primary_key_rule": {"primary_key_columns": ["name"]}}}).check_input(Dataset((T,)))


def test_expected_tables_must_be_present():
    sink = make({"table-names": ["fake", "other"]})
    with pytest.raises(SchemaError) as e:
        sink.check_input(Dataset((T,)))
    assert e.value.condition == "SCHEMA.INCOMPATIBLE" and e.value.params["table"] == "other"
    with pytest.raises(SchemaError, match="expect it"):
        make({"tables_configs": [{"table_path": "nope", "row_rules": [{"rule_type": "MIN_ROW", "rule_value": 1}]}]}).check_input(Dataset((T,)))


def test_top_level_rules_skip_tables_with_their_own_config():
    other = TableSchema("other", (Column("x", "int"),))
    sink = make({"field_rules": [{"field_name": "name", "field_value": [{"rule_type": "NOT_NULL"}]}],
                 "tables_configs": [{"table_path": "other", "field_rules": [{"field_name": "x", "field_value": [{"rule_type": "NOT_NULL"}]}]}]})  # fmt: skip
    sink.check_input(Dataset((T, other)))
    assert sink.rules_for("other").field_rules[0].field_name == "x"
    assert sink.rules_for("fake").field_rules[0].field_name == "name"


@pytest.mark.parametrize(
    "rules, message",
    [
        ({}, "rules is empty"),
        ({"row_rules": [{"rule_type": "MIN_ROW"}]}, "rule_value"),
        ({"row_rules": [{"rule_type": "AVG_ROW", "rule_value": 1}]}, "rule_type"),
        ({"row_rules": [{"rule_type": "MIN_ROW", "rule_value": 5}, {"rule_type": "MAX_ROW", "rule_value": 1}]}, "MIN_ROW 5 is greater than MAX_ROW 1"),
        ({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "MIN"}]}]}, "rule_type MIN needs rule_value"),
        ({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "NOT_NULL", "rule_value": 1}]}]}, "rule_value does not apply to rule_type NOT_NULL"),
        ({"field_rules": [{"field_name": "a", "field_value": [{}]}]}, "needs rule_type and/or equals_to"),
        ({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "NULL", "equals_to": 1}]}]}, "rule_type NULL cannot have equals_to"),
        ({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "MIN_LENGTH", "rule_value": 1.5}]}]}, "whole number"),
        ({"field_rules": [{"field_name": "a", "field_value": [{"rule_type": "MIN", "rule_value": 9}, {"rule_type": "MAX", "rule_value": 1}]}]}, "MIN 9.0 is greater than MAX 1.0"),
        ({"field_rules": [{"field_name": "a", "field_type": "intt"}]}, "unknown type 'intt'"),
        ({"tables_configs": [{"table_path": "t"}, {"table_path": "t"}]}, "two entries for table_path 't'"),
        ({"tables_configs": [{"row_rules": []}]}, "table_path"),
    ],
)
def test_bad_rules(rules, message):
    with pytest.raises(ValidationError, match=message):
        AssertOptions.model_validate({"rules": rules})


def test_rules_required():
    with pytest.raises(ValidationError, match="rules"):
        AssertOptions.model_validate({})
