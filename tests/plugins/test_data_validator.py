"""DataValidator: rule options, field checks, ROUTE_TO_TABLE error table."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.data_validator import ERROR_TABLE_COLUMNS, DataValidator, DataValidatorOptions

T = TableSchema("db.users", (Column("name", "string"), Column("age", "int"), Column("email", "string"), Column("tags", "array<string>")))
EMAIL = "^[\\w-\\.]+@([\\w-]+\\.)+[\\w-]{2,4}$"


def make(**options):
    return DataValidator(DataValidatorOptions.model_validate(options))


def test_traits():
    assert TRANSFORMS.find("DataValidator") is DataValidator
    assert DataValidator.execution == "expression"


def test_doc_example_1_fail_mode_flat_rules():
    v = make(plugin_input="source_table", plugin_output="validated_table", row_error_handle_way="FAIL", field_rules=[
        {"field_name": "name", "rule_type": "NOT_NULL"},
        {"field_name": "age", "rule_type": "RANGE", "min_value": 0, "max_value": 150},
        {"field_name": "email", "rule_type": "REGEX", "pattern": EMAIL},
    ])  # fmt: skip
    assert [fr.rules[0].rule_type for fr in v.options.field_rules] == ["NOT_NULL", "RANGE", "REGEX"]
    assert v.output([Dataset((T,))]).tables == (T,)


def test_doc_example_3_route_to_table_adds_error_table():
    v = make(**{"row_error_handle_way": "ROUTE_TO_TABLE", "row_error_handle_way.error_table": "error_data",
                "field_rules": [{"field_name": "name", "rule_type": "NOT_NULL"}]})  # fmt: skip
    out = v.output([Dataset((T,))])
    assert out.table_ids == ("db.users", "error_data")
    assert out.tables[1].columns == ERROR_TABLE_COLUMNS
    assert out.tables[1].names == ("source_table_id", "source_table_path", "original_data", "validation_errors", "create_time")


def test_doc_example_4_nested_rules_and_5_udf():
    v = make(field_rules=[
        {"field_name": "name", "rules": [
            {"rule_type": "NOT_NULL", "custom_message": "Name is required"},
            {"rule_type": "LENGTH", "min_length": 2, "max_length": 50},
        ]},
        {"field_name": "email", "rule_type": "UDF", "function_name": "email"},
    ])  # fmt: skip
    assert len(v.options.field_rules[0].rules) == 2
    assert v.options.field_rules[1].rules[0].function_name == "EMAIL"
    assert v.output([Dataset((T,))]).tables == (T,)


@pytest.mark.parametrize(
    "rule, message",
    [
        ({"rule_type": "RANGE"}, "RANGE needs min_value and/or max_value"),
        ({"rule_type": "RANGE", "min_value": 5, "max_value": 1}, "min_value 5.0 is greater than max_value 1.0"),
        ({"rule_type": "LENGTH"}, "LENGTH needs min_length, max_length or exact_length"),
        ({"rule_type": "LENGTH", "exact_length": 3, "max_length": 4}, "use exact_length or min_length/max_length"),
        ({"rule_type": "REGEX"}, "REGEX needs a pattern"),
        ({"rule_type": "REGEX", "pattern": "("}, "not a valid regular expression"),
        ({"rule_type": "UDF", "function_name": "PHONE"}, "unknown UDF 'PHONE'; available: EMAIL"),
        ({"rule_type": "NOT_NULL", "min_length": 3}, "min_length does not apply to rule_type NOT_NULL"),
        ({"rule_type": "SOMETHING"}, "rule_type"),
    ],
)
def test_bad_rules(rule, message):
    with pytest.raises(ValidationError, match=message):
        DataValidatorOptions.model_validate({"field_rules": [{"field_name": "x", **rule}]})


def test_error_table_option_rules():
    rules = [{"field_name": "x", "rule_type": "NOT_NULL"}]
    with pytest.raises(ValidationError, match="ROUTE_TO_TABLE needs row_error_handle_way.error_table"):
        DataValidatorOptions.model_validate({"row_error_handle_way": "ROUTE_TO_TABLE", "field_rules": rules})
    with pytest.raises(ValidationError, match="error_table only applies with row_error_handle_way = ROUTE_TO_TABLE"):
        DataValidatorOptions.model_validate({"row_error_handle_way.error_table": "e", "field_rules": rules})
    with pytest.raises(ValidationError, match="field_rules is empty"):
        DataValidatorOptions.model_validate({"field_rules": []})


def test_missing_field_and_wrong_type():
    with pytest.raises(SchemaError) as e:
        make(field_rules=[{"field_name": "agee", "rule_type": "NOT_NULL"}]).output([Dataset((T,))])
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert (e.value.params["column"], e.value.params["table"]) == ("agee", "db.users")
    with pytest.raises(SchemaError, match="rule RANGE cannot check field 'name' of table 'db.users', which is string"):
        make(field_rules=[{"field_name": "name", "rule_type": "RANGE", "min_value": 1}]).output([Dataset((T,))])
    # LENGTH also applies to arrays
    make(field_rules=[{"field_name": "tags", "rule_type": "LENGTH", "max_length": 3}]).output([Dataset((T,))])


def test_error_table_clashing_with_input_table():
    v = make(**{"row_error_handle_way": "ROUTE_TO_TABLE", "row_error_handle_way.error_table": "db.users",
                "field_rules": [{"field_name": "name", "rule_type": "NOT_NULL"}]})  # fmt: skip
    with pytest.raises(SchemaError, match="error_table 'db.users' is also the name of an input table"):
        v.output([Dataset((T,))])
