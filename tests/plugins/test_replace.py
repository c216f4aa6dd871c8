"""Replace: literal / regex replacement in a string field."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.replace import Replace, ReplaceOptions

T = TableSchema("fake", (Column("name", "string"), Column("age", "int")))


def run(options, table=T):
    return Replace(ReplaceOptions.model_validate(options)).output([Dataset((table,))])


def test_doc_example_keeps_schema():
    opts = {"source_table_name": "fake", "result_table_name": "fake1", "replace_field": "name",
            "pattern": " ", "replacement": "_", "is_regex": True}  # fmt: skip
    assert run(opts).tables == (T,)
    assert TRANSFORMS.find("Replace") is Replace and Replace.execution == "expression"


def test_defaults():
    o = ReplaceOptions.model_validate({"replace_field": "name", "pattern": "a", "replacement": ""})
    assert (o.is_regex, o.replace_first) == (False, False)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"pattern": "a", "replacement": "b"}, "replace_field"),
        ({"replace_field": "name", "replacement": "b"}, "pattern"),
        ({"replace_field": "name", "pattern": "a"}, "replacement"),
        ({"replace_field": "name", "pattern": "a", "replacement": "b", "replace_first": True}, "replace_first only applies when is_regex = true"),
        ({"replace_field": "name", "pattern": "[", "replacement": "b", "is_regex": True}, "not a valid regular expression"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        ReplaceOptions.model_validate(options)


def test_missing_and_non_string_field():
    with pytest.raises(SchemaError) as e:
        run({"replace_field": "nme", "pattern": "a", "replacement": "b"})
    assert e.value.condition == "SCHEMA.MISSING_COLUMN" and e.value.params["column"] == "nme"
    with pytest.raises(SchemaError, match="Replace needs a string field, but 'age' of table 'fake' is int"):
        run({"replace_field": "age", "pattern": "1", "replacement": "2"})


def test_multi_table_regex():
    other = TableSchema("db.other", (Column("x", "int"),))
    out = run({"replace_field": "name", "pattern": "a", "replacement": "b", "table_match_regex": "fake"}, T)
    assert out.tables == (T,)
    # the non-matching table lacks the field but is not touched
    ds = Dataset((T, other))
    opts = ReplaceOptions.model_validate({"replace_field": "name", "pattern": "a", "replacement": "b", "table_match_regex": "fake"})
    assert Replace(opts).output([ds]) == ds


def test_java_only_regex_syntax_is_left_to_spark():
    # Spark evaluates the pattern with Java's regex engine; \p{L} is Java syntax Python lacks
    o = ReplaceOptions.model_validate({"replace_field": "name", "pattern": "\\p{L}+", "replacement": "x", "is_regex": True})
    assert o.pattern == "\\p{L}+"
