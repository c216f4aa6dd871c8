"""Delta source: path/table, required schema, streaming options."""

import pytest
from pydantic import ValidationError

from sources.delta import Delta, DeltaSourceOptions
from streaming_engine.plugins.registry import SOURCES

SCHEMA = {"fields": {"id": "bigint", "amount": "decimal(10,2)"}, "primaryKey": {"name": "pk", "columnNames": ["id"]}}


def make(**options):
    return Delta(DeltaSourceOptions.model_validate(options))


def test_registered():
    assert SOURCES.find("delta") is Delta


def test_table_source_uses_table_name_as_id_and_keeps_the_key():
    (table,) = make(table="db1.orders", schema=SCHEMA).output().tables
    assert table.table_id == "db1.orders"
    assert table.primary_key == ("id",)
    assert table.column("amount").type == "decimal(10,2)"


def test_table_id_precedence():
    assert make(path="/wh/o", schema=SCHEMA).output().table_ids == ("default",)
    assert make(path="/wh/o", schema=SCHEMA, plugin_output="o").output().table_ids == ("o",)
    assert make(table="db.t", schema={**SCHEMA, "table": "x.y"}).output().table_ids == ("x.y",)


def test_path_xor_table():
    with pytest.raises(ValidationError, match="exactly one of path"):
        make(schema=SCHEMA)
    with pytest.raises(ValidationError, match="exactly one of path"):
        make(path="/a", table="b", schema=SCHEMA)


def test_schema_is_required():
    with pytest.raises(ValidationError, match="schema"):
        make(path="/a")


def test_starting_position_options():
    assert make(path="/a", schema=SCHEMA, starting_version="latest").options.starting_version == "latest"
    assert make(path="/a", schema=SCHEMA, starting_version=3).options.starting_version == 3
    with pytest.raises(ValidationError, match="starting_version or starting_timestamp, not both"):
        make(path="/a", schema=SCHEMA, starting_version=1, starting_timestamp="2024-01-01")
    with pytest.raises(ValidationError, match="starting_version must be >= 0"):
        make(path="/a", schema=SCHEMA, starting_version=-1)


def test_change_feed_excludes_skip_change_commits():
    with pytest.raises(ValidationError, match="read_change_feed and skip_change_commits"):
        make(path="/a", schema=SCHEMA, read_change_feed=True, skip_change_commits=True)
    assert "change data feed" in make(path="/a", schema=SCHEMA, read_change_feed=True).describe()


def test_bad_table_name():
    with pytest.raises(ValidationError, match="must look like table"):
        make(table="a..b", schema=SCHEMA)
