"""LocalFile sink."""

import pytest
from pydantic import ValidationError

from sinks.local_file import LocalFile, LocalFileSinkOptions
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import SINKS
from streaming_engine.schema import Column, Dataset, TableSchema

T = TableSchema("db.orders", (Column("id", "bigint"), Column("day", "date"), Column("tags", "array<string>")))
U = TableSchema("db.users", (Column("id", "bigint"), Column("day", "date")))


def make(**options):
    return LocalFile(LocalFileSinkOptions.model_validate(options))


def test_traits_and_defaults():
    assert SINKS.find("LocalFile") is LocalFile and LocalFile.commit_protocol == "staged-publish"
    o = make(path="/out").options
    assert (o.file_format_type, o.compress_codec, o.enable_header_write) == ("csv", "none", False)


def test_targets_per_table():
    sink = make(path="/out/${table_name}", file_format_type="PARQUET", compress_codec="snappy")
    ds = Dataset((T, U))
    sink.check_input(ds)
    assert sink.targets(ds) == ["db.orders -> /out/orders (parquet)", "db.users -> /out/users (parquet)"]


def test_multi_table_needs_a_table_placeholder():
    with pytest.raises(SchemaError, match="put \\$\\{table_name\\}"):
        make(path="/out", file_format_type="json").check_input(Dataset((T, U)))


def test_csv_cannot_hold_nested_columns():
    with pytest.raises(SchemaError) as e:
        make(path="/out").check_input(Dataset((T,)))
    assert e.value.condition == "SCHEMA.INCOMPATIBLE" and "tags" in e.value.params["detail"]
    make(path="/out", sink_columns=["id", "day"]).check_input(Dataset((T,)))  # projected away: fine


def test_sink_columns_and_partitions_must_exist():
    with pytest.raises(SchemaError) as e:
        make(path="/out", file_format_type="parquet", sink_columns=["id", "nope"]).check_input(Dataset((T,)))
    assert (e.value.condition, e.value.params["column"], e.value.params["table"]) == ("SCHEMA.MISSING_COLUMN", "nope", "db.orders")
    with pytest.raises(SchemaError) as e:
        make(path="/out", file_format_type="parquet", have_partition=True, partition_by=["dt"]).check_input(Dataset((T,)))
    assert e.value.params["column"] == "dt"
    with pytest.raises(SchemaError, match="every written column is a partition column"):
        make(path="/out", file_format_type="parquet", have_partition=True, partition_by=["id"], sink_columns=["id"]).check_input(Dataset((T,)))


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "path"),
        ({"path": "/o", "file_format_type": "orc"}, "file_format_type"),
        ({"path": "/o", "file_format_type": "json", "field_delimiter": ";"}, "field_delimiter only applies to file_format_type = csv"),
        ({"path": "/o", "compress_codec": "zstd"}, "compress_codec 'zstd' is not available for csv"),
        ({"path": "/o", "partition_by": ["day"]}, "only used with have_partition = true"),
        ({"path": "/o", "have_partition": True}, "have_partition = true needs partition_by"),
        ({"path": "/o", "sink_columns": ["a", "a"]}, "sink_columns lists a column twice"),
        ({"path": "/o/${db}"}, "unknown placeholder"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        LocalFileSinkOptions.model_validate(options)
