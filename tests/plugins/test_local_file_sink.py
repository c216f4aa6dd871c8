"""LocalFile sink."""

from datetime import datetime

import pytest
from pydantic import ValidationError

from sinks._local_file_names import format_time, render_partition_dir, time_pattern
from sinks.local_file import LocalFile, LocalFileSinkOptions
from streaming_engine import compat
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import SINKS
from streaming_engine.schema import Column, Dataset, TableSchema
from tests.unit.helpers import compile_ok, problems_of

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
        ({"path": "/o", "file_format_type": "avro"}, "file_format_type 'avro' is not a file format"),
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


# -- SeaTunnel's options -------------------------------------------------------------------------------

def test_seatunnel_defaults():
    o = make(path="/out").options
    assert (o.row_delimiter, o.batch_size, o.single_file_mode, o.create_empty_file_when_no_data) == ("\n", 1_000_000, False, False)
    assert (o.custom_filename, o.file_name_expression, o.filename_time_format) == (False, "${transactionId}", "yyyy.MM.dd")
    assert (o.csv_string_quote_mode, o.xml_root_tag, o.xml_row_tag, o.xml_use_attr_format) == ("MINIMAL", "RECORDS", "RECORD", None)
    assert (o.schema_save_mode, o.data_save_mode) == ("CREATE_SCHEMA_WHEN_NOT_EXIST", "APPEND_DATA")
    assert (o.partition_dir_expression, o.is_partition_field_write_in_file, o.filename_extension) == (None, False, None)
    assert o.parquet_avro_write_timestamp_as_int96 is False
    assert [r.name for r in compat.status_of(LocalFile) if r.status == "missing"] == []


def _job(options: str) -> str:
    return (
        "env { job.mode = BATCH }\n"
        "source { FakeSource { plugin_output = src, row.num = 1, schema { fields { id = int } } } }\n"
        f'sink {{ LocalFile {{ plugin_input = src, path = "/tmp/out", {options} }} }}\n'
    )


REFUSED = {r.name: r.reason for r in compat.status_of(LocalFile) if r.status == "refused"}


def test_the_refused_options_are_these():
    assert set(REFUSED) == {
        "tmp_path", "is_enable_transaction", "max_rows_in_memory", "sheet_max_rows", "sheet_name",
        "parquet_avro_write_fixed_as_int96", "merge_update_event",
    }  # fmt: skip


@pytest.mark.parametrize("option", sorted(REFUSED))
def test_a_refused_option_is_a_config_error_with_its_reason(option):
    [p] = [p for p in problems_of(_job(f'{option} = "x"')) if p.condition == "CONFIG.INVALID_OPTION"]
    assert p.location.key == option and p.location.plugin == "LocalFile"
    assert REFUSED[option] in str(p) and "not supported by this engine" in str(p)


@pytest.mark.parametrize("setting", ["is_enable_transaction = true", "merge_update_event = false"])
def test_a_refused_option_at_what_the_engine_does_is_accepted(setting):
    job = compile_ok(_job(setting))
    assert not [w for w in job.dag.warnings if setting.split()[0] in str(w)]


@pytest.mark.parametrize(
    "options, message",
    [
        ("file_format_type = excel", "no Spark data source for Excel"),
        ("file_format_type = binary", "the engine moves rows, not files"),
        ("file_format_type = debezium_json", "CDC envelopes are not written to files"),
        ("csv_string_quote_mode = NONE", "Spark's csv writer always quotes a value holding the delimiter"),
        ("file_format_type = parquet, compress_codec = lzo", "hadoop-lzo's (GPL), which does not ship with Spark"),
        ("file_format_type = parquet, compress_codec = brotli", "no Brotli codec ships with Spark"),
        ("file_format_type = text, enable_header_write = true", "text files get no header line"),
        ("file_format_type = text, encoding = UTF-16", "text files are written as UTF-8"),
        ("file_format_type = csv, encoding = GBK", "Spark reads and writes files only in"),
    ],
)
def test_values_spark_cannot_honour_are_refused_with_the_reason(options, message):
    problems = [str(p) for p in problems_of(_job(options)) if p.condition == "CONFIG.INVALID_OPTION"]
    assert len(problems) == 1 and message in problems[0], problems


@pytest.mark.parametrize(
    "options, message",
    [
        ({"file_format_type": "xml"}, "file_format_type = xml needs xml_use_attr_format"),
        ({"xml_row_tag": "R"}, "xml_row_tag only applies to file_format_type = xml"),
        ({"file_format_type": "parquet", "row_delimiter": "|"}, "row_delimiter only applies to file_format_type = csv or text or json"),
        ({"file_name_expression": "x"}, "file_name_expression is only used with custom_filename = true"),
        ({"custom_filename": True, "file_name_expression": "a_${today}"}, r"unknown placeholder \$\{today\}"),
        ({"custom_filename": True, "file_name_expression": "a/b"}, "cannot hold a path separator"),
        ({"custom_filename": True, "file_name_expression": "_x"}, "readers .* skip such files"),
        ({"custom_filename": True, "filename_time_format": "yyyy-QQ"}, "letter 'Q' is not supported"),
        ({"have_partition": True, "partition_by": ["d"], "partition_dir_expression": "${k1}=${v1}"},
         r"names partition 1, but partition_by lists 1"),
        ({"have_partition": True, "partition_by": ["d"], "partition_dir_expression": "_${v0}"}, "skipped by readers"),
        ({"partition_dir_expression": "${v0}"}, "only used with have_partition = true"),
        ({"have_partition": True, "partition_by": ["d", "e"], "partition_dir_expression": "${v0}", "custom_filename": True,
          "single_file_mode": True}, r"leaves out \$\{v1\}"),
        ({"schema_save_mode": "DROP"}, "schema_save_mode 'DROP': use one of"),
        ({"data_save_mode": "drop"}, "data_save_mode 'DROP': use one of"),
        ({"batch_size": 0}, "batch_size"),
        ({"encoding": "no-such-charset"}, "not a known character set"),
    ],
)
def test_bad_seatunnel_options(options, message):
    with pytest.raises(ValidationError, match=message):
        LocalFileSinkOptions.model_validate({"path": "/o", **options})


def test_xml_attributes_and_text_cannot_hold_nested_columns():
    for options in ({"file_format_type": "text"}, {"file_format_type": "xml", "xml_use_attr_format": True}):
        with pytest.raises(SchemaError, match="cannot store column 'tags'"):
            make(path="/out", **options).check_input(Dataset((T,)))
    make(path="/out", file_format_type="xml", xml_use_attr_format=False).check_input(Dataset((T,)))  # child elements


def test_partition_columns_in_the_file_count_as_data():
    sink = make(path="/out", file_format_type="parquet", have_partition=True, partition_by=["id"], sink_columns=["id"],
                is_partition_field_write_in_file=True)  # fmt: skip
    sink.check_input(Dataset((T,)))  # with the flag the partition column is a data column too


def test_filename_time_format_is_a_java_pattern():
    when = datetime(2024, 3, 5, 7, 8, 9, 123456)
    assert format_time(time_pattern("yyyy.MM.dd"), when) == "2024.03.05"
    assert format_time(time_pattern("yyyyMMddHHmmss"), when) == "20240305070809"
    assert format_time(time_pattern("yy-M-d h:mm a 'at' SSS EEE"), when) == "24-3-5 7:08 AM at 123 Tue"


def test_partition_dir_expression_renders_names_and_values():
    assert render_partition_dir("${k0}=${v0}/", ["day"], ["d1"]) == "day=d1"
    assert render_partition_dir("y/${v1}/${v0}", ["a", "b"], ["1", "__HIVE_DEFAULT_PARTITION__"]) == "y/null/1"
