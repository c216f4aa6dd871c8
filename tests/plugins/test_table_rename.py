"""TableRename: renames the table-name part of table ids."""

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


def test_doc_uppercase_example_keeps_database():
    opts = {"convert_case": "UPPER", "prefix": "CDC_", "suffix": "_TABLE",
            "replacements_with_regex": [{"replace_from": "user", "replace_to": "U"}]}  # fmt: skip
    out = run(opts, "source.user_shop", "source.user_order")
    assert out.table_ids == ("source.CDC_U_SHOP_TABLE", "source.CDC_U_ORDER_TABLE")
    assert out.tables[0].primary_key == ("id",) and out.tables[0].names == ("id",)


def test_doc_lowercase_example():
    opts = {"convert_case": "LOWER", "prefix": "cdc_", "suffix": "_table",
            "replacements_with_regex": [{"replace_from": "USER", "replace_to": "u"}]}  # fmt: skip
    assert run(opts, "SOURCE.USER_SHOP").table_ids == ("SOURCE.cdc_u_shop_table",)


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
