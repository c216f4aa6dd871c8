"""FieldMapper: keep, reorder and rename."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.field_mapper import FieldMapper, FieldMapperOptions


def table(tid="fake"):
    cols = (Column("id", "bigint", False), Column("name", "string"), Column("age", "int"), Column("card", "int"))
    return TableSchema(tid, cols, ("id",))


def run(mapping, *tables, **extra):
    opts = FieldMapperOptions.model_validate({"field_mapper": mapping, **extra})
    return FieldMapper(opts).output([Dataset(tables or (table(),))])


def test_registered():
    assert TRANSFORMS.find("fieldmapper") is FieldMapper


def test_doc_example():
    (out,) = run({"id": "id", "card": "card", "name": "new_name"}, source_table_name="fake").tables
    assert [(c.name, c.type) for c in out.columns] == [("id", "bigint"), ("card", "int"), ("new_name", "string")]
    assert out.column("id").nullable is False


def test_primary_key_follows_rename_or_is_dropped():
    assert run({"id": "key", "name": "name"}).tables[0].primary_key == ("key",)
    assert run({"name": "name"}).tables[0].primary_key == ()


def test_bad_options():
    with pytest.raises(ValidationError, match="field_mapper is empty"):
        FieldMapperOptions.model_validate({"field_mapper": {}})
    with pytest.raises(ValidationError, match="maps two fields to 'x'"):
        FieldMapperOptions.model_validate({"field_mapper": {"a": "x", "b": "x"}})
    with pytest.raises(ValidationError, match="field_mapper"):
        FieldMapperOptions.model_validate({})


def test_missing_column():
    with pytest.raises(SchemaError) as e:
        run({"nope": "x"}, table("db.t"))
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert (e.value.params["column"], e.value.params["table"]) == ("nope", "db.t")


def test_multi_table_per_table_mapping():
    out = run({"id": "id"}, table("db.a"), table("db.b"),
              table_transform=[{"table_path": "db.b", "field_mapper": {"name": "n"}}])  # fmt: skip
    assert [t.names for t in out.tables] == [("id",), ("n",)]
