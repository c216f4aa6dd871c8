"""TableMerge: merge shards into one table id."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.table_merge import TableMerge, TableMergeOptions

USER = (Column("id", "bigint", False), Column("name", "string"))


def make(**options):
    return TableMerge(TableMergeOptions.model_validate(options))


def test_traits():
    assert TRANSFORMS.find("TableMerge") is TableMerge
    assert TableMerge.execution == "table"
    assert TableMerge.max_inputs > 1


def test_doc_example_merges_matching_shards_and_passes_others():
    ds = Dataset((
        TableSchema("source.user_1", USER, ("id",)),
        TableSchema("source.user_2", USER, ("id",)),
        TableSchema("source.shop", (Column("sid", "int"),)),
    ))  # fmt: skip
    out = make(table_match_regex="source.user_.*", database="user_db", table="user_all").output([ds])
    assert out.table_ids == ("user_db.user_all", "source.shop")
    merged = out.tables[0]
    assert merged.names == ("id", "name") and merged.primary_key == ("id",)


def test_keeps_own_database_when_not_set_and_merges_several_inputs():
    a = Dataset((TableSchema("db.u1", USER),))
    b = Dataset((TableSchema("db.u2", (Column("id", "bigint", True), Column("name", "string"))),))
    (merged,) = make(table="users").output([a, b]).tables
    assert merged.table_id == "db.users"
    assert merged.column("id").nullable is True  # nullable in one input


def test_schema_part():
    (merged,) = make(database="d", schema="s", table="t").output([Dataset((TableSchema("x", USER),))]).tables
    assert merged.table_id == "d.s.t"


def test_different_columns_cannot_merge():
    ds = Dataset((TableSchema("db.u1", USER), TableSchema("db.u2", (Column("id", "int"), Column("name", "string")))))
    with pytest.raises(SchemaError, match=r"cannot merge 'db.u1' and 'db.u2'.*`id bigint` in 'db.u1' but `id int` in 'db.u2'"):
        make(table="u").output([ds])
    extra = Dataset((TableSchema("db.u1", USER), TableSchema("db.u2", USER + (Column("x", "int"),))))
    with pytest.raises(SchemaError, match="'db.u2' has the extra column 'x'"):
        make(table="u").output([extra])


def test_different_keys_drop_the_key():
    ds = Dataset((TableSchema("db.u1", USER, ("id",)), TableSchema("db.u2", USER)))
    assert make(table="u").output([ds]).tables[0].primary_key == ()


def test_merged_name_clashing_with_passthrough_table():
    ds = Dataset((TableSchema("db.u", USER), TableSchema("db.u1", USER)))
    with pytest.raises(SchemaError, match="clashes with an unmerged input table"):
        make(table="u", table_match_regex="db\\.u1").output([ds])


def test_options():
    with pytest.raises(ValidationError, match="table"):
        TableMergeOptions.model_validate({"database": "x"})
    with pytest.raises(ValidationError, match="table must be a plain name"):
        TableMergeOptions.model_validate({"table": "db.t"})
