"""Filter (field projection): include_fields / exclude_fields / legacy fields."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.filter import Filter, FilterOptions


def table(tid="fake", pk=()):
    return TableSchema(tid, (Column("name", "string"), Column("age", "int"), Column("card", "int")), pk)


def run(options, *tables):
    return Filter(FilterOptions.model_validate(options)).output([Dataset(tables or (table(),))])


def test_plugin_traits():
    assert TRANSFORMS.find("Filter") is Filter
    assert (Filter.execution, Filter.max_inputs) == ("expression", 1)


def test_doc_include_example():
    (out,) = run({"source_table_name": "fake", "result_table_name": "fake1", "include_fields": ["name", "card"]}).tables
    assert out.names == ("name", "card")


def test_include_order_follows_the_list():
    (out,) = run({"include_fields": ["card", "name"]}).tables
    assert out.names == ("card", "name")


def test_doc_exclude_example():
    (out,) = run({"exclude_fields": ["age"]}).tables
    assert out.names == ("name", "card")


def test_legacy_fields_and_comma_string():
    assert run({"fields": ["name"]}).tables[0].names == ("name",)
    assert run({"include_fields": "name, age"}).tables[0].names == ("name", "age")


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "exactly one of include_fields or exclude_fields"),
        ({"include_fields": ["a"], "exclude_fields": ["b"]}, r"got include_fields and exclude_fields"),
        ({"include_fields": ["a"], "fields": ["b"]}, "exactly one"),
        ({"include_fields": []}, "include_fields is empty"),
        ({"include_fields": ["a", "a"]}, "include_fields lists 'a' twice"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        FilterOptions.model_validate(options)


@pytest.mark.parametrize("key", ["include_fields", "exclude_fields"])
def test_missing_field_names_column_and_table(key):
    with pytest.raises(SchemaError) as e:
        run({key: ["agee"]}, table("db.t"))
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert (e.value.params["column"], e.value.params["table"]) == ("agee", "db.t")


def test_excluding_everything_is_invalid():
    with pytest.raises(SchemaError, match="remove every column"):
        run({"exclude_fields": ["name", "age", "card"]})


def test_primary_key_kept_only_when_all_key_columns_stay():
    keyed = table(pk=("name",))
    assert run({"include_fields": ["name", "age"]}, keyed).tables[0].primary_key == ("name",)
    assert run({"exclude_fields": ["name"]}, keyed).tables[0].primary_key == ()


def test_multi_table_with_regex():
    out = run({"include_fields": ["name"], "table_match_regex": "db\\.a.*"}, table("db.a1"), table("db.b1"))
    assert [t.names for t in out.tables] == [("name",), ("name", "age", "card")]
