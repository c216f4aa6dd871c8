"""Copy: options, output schema, multi-table rules (table_match_regex / table_transform)."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.copy import Copy, CopyOptions


def table(tid="fake", pk=()):
    return TableSchema(tid, (Column("id", "bigint", False), Column("name", "string"), Column("age", "int")), pk)


def make(**options):
    return Copy(CopyOptions.model_validate(options))


def test_plugin_traits():
    assert TRANSFORMS.find("copy") is Copy
    assert (Copy.execution, Copy.chainable, Copy.max_inputs) == ("expression", True, 1)


def test_doc_example_appends_copies_with_source_types():
    t = make(plugin_input="fake", plugin_output="fake1", fields={"name1": "name", "name2": "name", "age1": "age"})
    (out,) = t.output([Dataset((table(),))]).tables
    assert [(c.name, c.type) for c in out.columns][3:] == [("name1", "string"), ("name2", "string"), ("age1", "int")]
    assert out.names[:3] == ("id", "name", "age")


def test_copy_keeps_nullability_and_primary_key():
    (out,) = make(fields={"id2": "id"}).output([Dataset((table(pk=("id",)),))]).tables
    assert out.column("id2").nullable is False
    assert out.primary_key == ("id",)


def test_legacy_src_dest_form():
    (out,) = make(src_field="name", dest_field="name1").output([Dataset((table(),))]).tables
    assert out.names[-1] == "name1"


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "fields is required"),
        ({"fields": {}}, "fields is empty"),
        ({"src_field": "a"}, "src_field and dest_field must be set together"),
        ({"fields": {"a": "b"}, "src_field": "a", "dest_field": "c"}, "either fields"),
        ({"fields": {"a": "b"}, "unknown": 1}, "unknown"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        CopyOptions.model_validate(options)


def test_missing_source_column_names_column_and_table():
    with pytest.raises(SchemaError) as e:
        make(fields={"x": "nmae"}).output([Dataset((table("db.users"),))])
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert e.value.params["column"] == "nmae" and e.value.params["table"] == "db.users"


def test_copy_onto_existing_column_is_a_duplicate():
    with pytest.raises(SchemaError) as e:
        make(fields={"age": "name"}).output([Dataset((table(),))])
    assert e.value.condition == "SCHEMA.DUPLICATE_COLUMN" and e.value.params["column"] == "age"


def test_doc_multi_table_example():
    """transform-multi-table.md: regex for test.a*, table_transform for test.xyz / test.xyzxyz, test.www unchanged."""
    tables = [table(f"test.{n}") for n in ("abc", "abcd", "xyz", "xyzxyz", "www")]
    t = make(
        plugin_input="fake",
        plugin_output="fake1",
        table_match_regex="test.a.*",
        src_field="name",
        dest_field="name1",
        table_transform=[
            {"table_path": "test.xyz", "src_field": "name", "dest_field": "name2"},
            {"table_path": "test.xyzxyz", "src_field": "name", "dest_field": "name3"},
        ],
    )
    out = t.output([Dataset(tuple(tables))])
    extra = {tb.table_id: tb.names[3:] for tb in out.tables}
    assert extra == {
        "test.abc": ("name1",),
        "test.abcd": ("name1",),
        "test.xyz": ("name2",),
        "test.xyzxyz": ("name3",),
        "test.www": (),
    }


def test_table_transform_entries_are_validated_up_front():
    with pytest.raises(ValidationError, match=r"table_transform\[1\] \(table_path 'test.xyz'\).*src_field and dest_field"):
        CopyOptions.model_validate(
            {"fields": {"a": "name"}, "table_transform": [{"table_path": "test.xyz", "src_field": "name"}]}
        )
    with pytest.raises(ValidationError, match=r"table_transform\[1\] needs table_path"):
        CopyOptions.model_validate({"fields": {"a": "name"}, "table_transform": [{"fields": {"b": "name"}}]})
    with pytest.raises(ValidationError, match="table_path 't' twice"):
        CopyOptions.model_validate(
            {"fields": {"a": "x"}, "table_transform": [{"table_path": "t", "fields": {"b": "x"}}] * 2}
        )


def test_missing_column_in_one_of_several_tables_names_that_table():
    other = TableSchema("db.other", (Column("id", "bigint"),))
    with pytest.raises(SchemaError) as e:
        make(fields={"n": "name"}).output([Dataset((table("db.users"), other))])
    assert e.value.params["table"] == "db.other"


def test_invalid_table_match_regex():
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        CopyOptions.model_validate({"fields": {"a": "b"}, "table_match_regex": "("})
