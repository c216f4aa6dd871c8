"""Split: split a field into new string fields."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.split import Split, SplitOptions

T = TableSchema("fake", (Column("name", "string"), Column("age", "int"), Column("card", "int")))


def run(options, table=T):
    return Split(SplitOptions.model_validate(options)).output([Dataset((table,))]).tables[0]


def test_doc_example():
    out = run({"source_table_name": "fake", "result_table_name": "fake1", "separator": " ",
               "split_field": "name", "output_fields": ["first_name", "second_name"]})  # fmt: skip
    assert [(c.name, c.type) for c in out.columns] == [
        ("name", "string"), ("age", "int"), ("card", "int"), ("first_name", "string"), ("second_name", "string"),
    ]  # fmt: skip
    assert TRANSFORMS.find("split") is Split


@pytest.mark.parametrize(
    "options, message",
    [
        ({"split_field": "name", "output_fields": ["a"]}, "separator"),
        ({"separator": " ", "split_field": "name", "output_fields": []}, "output_fields is empty"),
        ({"separator": " ", "split_field": "name", "output_fields": ["a", "a"]}, "output_fields lists 'a' twice"),
        ({"separator": "(", "split_field": "name", "output_fields": ["a"]}, "separator '\\(' is not a valid regular expression"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        SplitOptions.model_validate(options)


def test_missing_field_and_clash():
    with pytest.raises(SchemaError) as e:
        run({"separator": " ", "split_field": "nam", "output_fields": ["a"]})
    assert e.value.condition == "SCHEMA.MISSING_COLUMN" and e.value.params["column"] == "nam"
    with pytest.raises(SchemaError) as e:
        run({"separator": " ", "split_field": "name", "output_fields": ["card"]})
    assert e.value.condition == "SCHEMA.DUPLICATE_COLUMN" and e.value.params["column"] == "card"
