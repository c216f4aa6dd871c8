"""TableRename: renames table ids as SeaTunnel's TableRenameTransform does."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.table_rename import TableRename, TableRenameOptions


def table(tid):
    return TableSchema(tid, (Column("id", "bigint"),), ("id",))


def run(options, *ids):
    return TableRename(TableRenameOptions.model_validate(options)).output([Dataset(tuple(table(i) for i in ids))])


def test_traits():
    assert TRANSFORMS.find("tablerename") is TableRename
    assert TableRename.execution == "table"


def test_doc_uppercase_example_converts_the_database_too():
    opts = {"convert_case": "UPPER", "prefix": "CDC_", "suffix": "_TABLE",
            "replacements_with_regex": [{"replace_from": "user", "replace_to": "U"}]}  # fmt: skip
    out = run(opts, "source.user_shop", "source.user_order")
    assert out.table_ids == ("SOURCE.CDC_U_SHOP_TABLE", "SOURCE.CDC_U_ORDER_TABLE")
    assert out.tables[0].primary_key == ("id",) and out.tables[0].names == ("id",)


def test_doc_lowercase_example():
    opts = {"convert_case": "LOWER", "prefix": "cdc_", "suffix": "_table",
            "replacements_with_regex": [{"replace_from": "USER", "replace_to": "u"}]}  # fmt: skip
    assert run(opts, "SOURCE.USER_SHOP").table_ids == ("source.cdc_u_shop_table",)


def test_seatunnels_own_cases():
    """SeaTunnel's TableRenameTransformTest on Database-x.Schema-x.Table-x."""
    tid = "Database-x.Schema-x.Table-x"
    assert run({"convert_case": "LOWER"}, tid).table_ids == ("database-x.schema-x.table-x",)
    assert run({"convert_case": "UPPER"}, tid).table_ids == ("DATABASE-X.SCHEMA-X.TABLE-X",)
    assert run({"prefix": "user-", "suffix": "-table"}, tid).table_ids == ("Database-x.Schema-x.user-Table-x-table",)
    rules = [{"replace_from": "Table", "replace_to": "t1"}, {"replace_from": "Table", "replace_to": "t2"}]
    assert run({"replacements_with_regex": rules}, tid).table_ids == ("Database-x.Schema-x.t2-x",)
    # replacements, prefix and suffix touch the table part only; the case, every part
    opts = {"convert_case": "UPPER", "prefix": "p_", "replacements_with_regex": [{"replace_from": "x", "replace_to": "y"}]}
    assert run(opts, "x.x.x").table_ids == ("X.X.p_y",)


def test_regex_selects_tables():
    assert run({"prefix": "x_", "table_match_regex": "db\\.a"}, "db.a", "db.b").table_ids == ("db.x_a", "db.b")


def test_two_tables_renamed_to_the_same_id():
    with pytest.raises(SchemaError, match="would both be named 'db.t'.*TableMerge"):
        run({"replacements_with_regex": [{"replace_from": "_[0-9]+$", "replace_to": ""}]}, "db.t_1", "db.t_2")


def test_rename_to_a_name_with_a_dot_is_invalid():
    with pytest.raises(SchemaError, match="invalid name"):
        run({"suffix": ".x"}, "db.t")


def test_needs_a_rule():
    with pytest.raises(ValidationError, match="at least one of"):
        TableRenameOptions.model_validate({"plugin_input": "x"})
