"""FieldRename: case, prefix, suffix, regex replacements; multi-table rules."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.field_rename import FieldRename, FieldRenameOptions


def table(tid="source.user_shop", names=("id", "name", "create_time"), pk=("id",)):
    return TableSchema(tid, tuple(Column(n, "string") for n in names), pk)


def run(options, *tables):
    return FieldRename(FieldRenameOptions.model_validate(options)).output([Dataset(tables or (table(),))])


def test_registered():
    assert TRANSFORMS.find("FieldRename") is FieldRename
    assert FieldRename.execution == "expression"


def test_doc_uppercase_example():
    opts = {
        "plugin_input": "customers_mysql_cdc",
        "plugin_output": "trans_result",
        "convert_case": "UPPER",
        "prefix": "F_",
        "suffix": "_S",
        "replacements_with_regex": [{"replace_from": "create_time", "replace_to": "SOURCE_CREATE_TIME"}],
    }
    (out,) = run(opts).tables
    assert out.names == ("F_ID_S", "F_NAME_S", "F_SOURCE_CREATE_TIME_S")
    assert out.primary_key == ("F_ID_S",)


def test_doc_lowercase_example():
    opts = {"convert_case": "LOWER", "prefix": "f_", "suffix": "_s",
            "replacements_with_regex": [{"replace_from": "CREATE_TIME", "replace_to": "source_create_time"}]}  # fmt: skip
    (out,) = run(opts, table(names=("ID", "CREATE_TIME"), pk=())).tables
    assert out.names == ("f_id_s", "f_source_create_time_s")


def test_replace_to_is_literal_and_exact_match():
    """SeaTunnel puts replace_to in as it is written: "$1" is not a group reference."""
    opts = {"replacements_with_regex": [{"replace_from": "^c_(.*)$", "replace_to": " col_$1 "},
                                        {"replace_from": "id", "replace_to": "key", "is_regex": False}]}  # fmt: skip
    (out,) = run(opts, table(names=("id", "c_name", "idx"), pk=())).tables
    assert out.names == ("key", "col_$1", "idx")


def test_the_last_matching_rule_wins_over_the_original_name():
    """SeaTunnel's FieldRenameTransformTest: rules f1 -> t1 and f1 -> t2 give t2 (they are not chained)."""
    opts = {"replacements_with_regex": [{"replace_from": "f1", "replace_to": "t1"}, {"replace_from": "f1", "replace_to": "t2"},
                                        {"replace_from": "t1", "replace_to": "never"}]}  # fmt: skip
    (out,) = run(opts, table(names=("f1", "f2", "f3"), pk=("f1",))).tables
    assert out.names == ("t2", "f2", "f3") and out.primary_key == ("t2",)


def test_replace_to_keeps_its_case_after_convert_case():
    """The matched range is found in the original name, the case converted, then replace_to put in as written."""
    opts = {"convert_case": "UPPER", "replacements_with_regex": [{"replace_from": "time", "replace_to": "ts"}],
            "prefix": " p_ ", "suffix": "  "}  # fmt: skip
    (out,) = run(opts, table(names=("id", "create_time", "time_time"), pk=())).tables
    assert out.names == ("p_ID", "p_CREATE_ts", "p_ts_ts")


def test_convert_case_is_case_insensitive_and_restricted():
    assert FieldRenameOptions.model_validate({"convert_case": "upper"}).convert_case == "UPPER"
    with pytest.raises(ValidationError, match="convert_case"):
        FieldRenameOptions.model_validate({"convert_case": "TITLE"})


def test_needs_some_rule():
    with pytest.raises(ValidationError, match="at least one of convert_case, prefix, suffix"):
        FieldRenameOptions.model_validate({})


def test_bad_regex_and_replacement():
    with pytest.raises(ValidationError, match="is not a valid regex"):
        FieldRenameOptions.model_validate({"replacements_with_regex": [{"replace_from": "(", "replace_to": "x"}]})
    assert FieldRenameOptions.model_validate({"replacements_with_regex": [{"replace_from": "a", "replace_to": "$x"}]})


def test_rename_collision_is_a_duplicate_column():
    with pytest.raises(SchemaError) as e:
        run({"convert_case": "LOWER"}, table("db.t", names=("Name", "NAME"), pk=()))
    assert e.value.condition == "SCHEMA.DUPLICATE_COLUMN"
    assert (e.value.params["column"], e.value.params["table"]) == ("name", "db.t")


def test_multi_table_regex_and_table_transform():
    tables = [table("db.abc"), table("db.xyz"), table("db.www")]
    opts = {"table_match_regex": "db\\.a.*", "prefix": "a_",
            "table_transform": [{"table_path": "db.xyz", "suffix": "_x"}]}  # fmt: skip
    out = run(opts, *tables)
    assert [t.names[0] for t in out.tables] == ["a_id", "id_x", "id"]


def test_only_table_transform_needs_no_outer_rule():
    opts = {"table_match_regex": "none", "table_transform": [{"table_path": "db.xyz", "prefix": "p_"}]}
    out = run(opts, table("db.xyz"), table("db.other"))
    assert [t.names[0] for t in out.tables] == ["p_id", "id"]
