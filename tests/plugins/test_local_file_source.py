"""LocalFile source: options and plan-time schemas (declared, text default, parquet footer)."""

import pytest
from pydantic import ValidationError

from sources.local_file import LocalFile, LocalFileSourceOptions
from streaming_engine import compat
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import SOURCES
from tests.unit.helpers import compile_ok, problems_of


def make(**options):
    return LocalFile(LocalFileSourceOptions.model_validate(options))


FIELDS = {"fields": {"id": "bigint", "name": "string", "age": "int"}}


def test_registered():
    assert SOURCES.find("LocalFile") is LocalFile


def test_json_with_schema():
    src = make(path="/data/in", file_format_type="json", schema=FIELDS, plugin_output="people")
    (table,) = src.output().tables
    assert table.table_id == "people"
    assert table.names == ("id", "name", "age")
    assert "json files under /data/in" in src.describe()


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_json_and_csv_need_a_schema(fmt):
    with pytest.raises(ValidationError, match=f"file_format_type = {fmt} needs a schema"):
        make(path="/x", file_format_type=fmt)


def test_format_is_case_insensitive_and_restricted():
    assert make(path="/x", file_format_type="TEXT").options.file_format_type == "text"
    with pytest.raises(ValidationError, match="file_format_type 'avro' is not a file format"):
        make(path="/x", file_format_type="avro")


def test_path_is_required():
    with pytest.raises(ValidationError, match="path"):
        make(file_format_type="text")


def test_text_without_schema_is_one_content_column():
    (table,) = make(path="/x", file_format_type="text").output().tables
    assert [(c.name, c.type) for c in table.columns] == [("content", "string")]


def test_delimiter_options():
    o = make(path="/x", file_format_type="csv", schema=FIELDS, delimiter=";", skip_header_row_number=1).options
    assert o.field_delimiter == ";"
    with pytest.raises(ValidationError, match="field_delimiter only applies to csv and text files, not json"):
        make(path="/x", file_format_type="json", schema=FIELDS, field_delimiter=",")
    with pytest.raises(ValidationError, match="at most one header line"):
        make(path="/x", file_format_type="csv", schema=FIELDS, skip_header_row_number=2)


def test_read_columns_projects_and_must_exist():
    (table,) = make(path="/x", file_format_type="json", schema=FIELDS, read_columns=["age", "id"]).output().tables
    assert table.names == ("age", "id")
    with pytest.raises(ValidationError, match=r"read_columns \['nme'\] are not in the schema"):
        make(path="/x", file_format_type="json", schema=FIELDS, read_columns=["nme"])


def test_file_filter_pattern_must_compile():
    with pytest.raises(ValidationError, match="file_filter_pattern .* is not a valid regular expression"):
        make(path="/x", file_format_type="text", file_filter_pattern="(")


def test_parquet_schema_is_read_from_the_footer(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    part = tmp_path / "dt=2024" / "region=eu"
    part.mkdir(parents=True)
    (tmp_path / "_SUCCESS").write_text("")
    table = pa.table({
        "id": pa.array([1], pa.int64()),
        "price": pa.array([1], pa.decimal128(10, 2)),
        "tags": pa.array([["a"]], pa.list_(pa.string())),
        "ts": pa.array([0], pa.timestamp("us", tz="UTC")),
    })  # fmt: skip
    pq.write_table(table, part / "part-0.parquet")
    (out,) = make(path=str(tmp_path), file_format_type="parquet").output().tables
    assert [(c.name, c.type) for c in out.columns] == [
        ("id", "bigint"), ("price", "decimal(10,2)"), ("tags", "array<string>"), ("ts", "timestamp"),
        ("dt", "string"), ("region", "string"),
    ]  # fmt: skip


def test_parquet_read_columns_missing_names_the_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "f.parquet")
    with pytest.raises(SchemaError) as e:
        make(path=str(tmp_path), file_format_type="parquet", read_columns=["b"]).output()
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert e.value.params["column"] == "b" and e.value.params["table"] == "default"


def test_parquet_without_files_asks_for_a_schema(tmp_path):
    with pytest.raises(SchemaError, match="declare `schema`"):
        make(path=str(tmp_path), file_format_type="parquet").output()


def test_parquet_with_declared_schema_does_not_touch_the_disk():
    (table,) = make(path="/does/not/exist", file_format_type="parquet", schema=FIELDS).output().tables
    assert table.names == ("id", "name", "age")


# -- SeaTunnel's options -------------------------------------------------------------------------------

def test_seatunnel_defaults():
    o = make(path="/x", file_format_type="text").options
    assert (o.parse_partition_from_path, o.time_format, o.compress_codec, o.archive_compress_codec) == (True, "HH:mm:ss", "none", "none")
    assert (o.encoding, o.skip_header_row_number, o.filename_extension, o.xml_row_tag, o.xml_use_attr_format) == ("UTF-8", 0, None, None, None)
    assert [r.name for r in compat.status_of(LocalFile) if r.status == "missing"] == []


def test_partition_directories_of_the_first_file_are_string_columns(tmp_path):
    (tmp_path / "dt=2024" / "region=eu").mkdir(parents=True)
    (tmp_path / "dt=2024" / "region=eu" / "a.json").write_text('{"id": 1}\n')
    (table,) = make(path=str(tmp_path), file_format_type="json", schema=FIELDS, read_columns=["age"]).output().tables
    assert [(c.name, c.type) for c in table.columns] == [("age", "int"), ("dt", "string"), ("region", "string")]
    (flat,) = make(path=str(tmp_path), file_format_type="json", schema=FIELDS, parse_partition_from_path=False).output().tables
    assert flat.names == ("id", "name", "age")
    declared = {"fields": {"id": "bigint", "dt": "int"}}  # a declared partition column keeps its type
    (typed,) = make(path=str(tmp_path), file_format_type="json", schema=declared).output().tables
    assert [(c.name, c.type) for c in typed.columns] == [("id", "bigint"), ("dt", "int"), ("region", "string")]


def test_orc_schema_is_read_from_the_footer_and_filename_extension_picks_the_file(tmp_path):
    pa = pytest.importorskip("pyarrow")
    po = pytest.importorskip("pyarrow.orc")
    (tmp_path / "a.txt").write_text("not orc")
    po.write_table(pa.table({"n": pa.array([1], pa.int32()), "s": ["x"]}), str(tmp_path / "b.orc"))
    (out,) = make(path=str(tmp_path), file_format_type="orc", filename_extension="orc").output().tables
    assert [(c.name, c.type) for c in out.columns] == [("n", "int"), ("s", "string")]


def test_tables_configs_makes_one_table_per_item(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "p.parquet")
    src = make(tables_configs=[
        {"path": str(tmp_path), "file_format_type": "parquet", "schema": {"table": "db.p"}},
        {"path": "/in/j", "file_format_type": "json", "schema": {"table": "db.j", **FIELDS}},
    ])  # fmt: skip
    assert [(t.table_id, t.names) for t in src.output().tables] == [("db.p", ("a",)), ("db.j", ("id", "name", "age"))]
    assert "parquet files under" in src.describe() and "json files under /in/j" in src.describe()


def _job(options: str) -> str:
    return (
        "env { job.mode = BATCH }\n"
        f'source {{ LocalFile {{ plugin_output = src, path = "/nonexistent/in", {options} }} }}\n'
        "sink { Console { plugin_input = src } }\n"
    )


REFUSED = {r.name: r.reason for r in compat.status_of(LocalFile) if r.status == "refused"}


def test_the_refused_options_are_these():
    assert set(REFUSED) == {"sheet_name", "excel_engine"}


@pytest.mark.parametrize("option", sorted(REFUSED))
def test_a_refused_option_is_a_config_error_with_its_reason(option):
    problems = problems_of(_job(f'file_format_type = text, {option} = "x"'))
    [p] = [p for p in problems if p.condition == "CONFIG.INVALID_OPTION"]
    assert p.location.key == option and p.location.plugin == "LocalFile"
    assert REFUSED[option] in str(p) and "not supported by this engine" in str(p)


@pytest.mark.parametrize(
    "options, message",
    [
        ("file_format_type = excel", "no Spark data source for Excel"),
        ("file_format_type = binary", "the engine moves rows, not files"),
        ("file_format_type = text, archive_compress_codec = ZIP", "it does not unpack archives"),
        ("file_format_type = text, archive_compress_codec = TAR_GZ", "it does not unpack archives"),
        ("file_format_type = text, compress_codec = zstd", "compress_codec"),
    ],
)
def test_values_spark_cannot_honour_are_refused_with_the_reason(options, message):
    problems = [str(p) for p in problems_of(_job(options)) if p.condition == "CONFIG.INVALID_OPTION"]
    assert len(problems) == 1 and message in problems[0], problems


def test_compressed_and_partitioned_options_compile():
    job = compile_ok(_job("file_format_type = text, compress_codec = LZO, archive_compress_codec = none, "
                          "parse_partition_from_path = false, filename_extension = lzo"))  # fmt: skip
    [src] = [v for v in job.dag.vertices if v.plugin.name == "LocalFile"]
    assert src.plugin.options.suffix == ".lzo"


X = {"path": "/x"}


@pytest.mark.parametrize(
    "options, message",
    [
        ({**X, "file_format_type": "xml", "schema": FIELDS}, "xml needs xml_row_tag .* and xml_use_attr_format"),
        ({**X, "file_format_type": "xml", "xml_row_tag": "r", "xml_use_attr_format": True}, "xml needs a schema"),
        ({**X, "file_format_type": "json", "schema": FIELDS, "xml_row_tag": "r"}, "xml_row_tag only applies to file_format_type = xml"),
        ({**X, "file_format_type": "text", "time_format": "HH-mm"}, "time_format"),
        ({**X, "file_format_type": "parquet", "archive_compress_codec": "gz"}, "GZ applies to text, csv, json and xml files"),
        ({**X, "file_format_type": "text", "compress_codec": "lzo", "archive_compress_codec": "gz"},
         "no file name can end with both '.lzo' and '.gz'"),
        ({**X, "file_format_type": "text", "filename_extension": "a/b"}, "cannot hold a path separator"),
        ({**X, "file_format_type": "text", "schema": {"table": "a b"}}, "must look like table"),
        ({**X, "file_format_type": "text", "tables_configs": [{**X, "file_format_type": "text"}]},
         "with tables_configs, set file_format_type, path in each tables_configs item"),
        ({"tables_configs": [{**X, "file_format_type": "text", "plugin_output": "x"}]},
         r"tables_configs\[0\]: plugin_output belongs next to tables_configs"),
        ({"tables_configs": [{**X, "file_format_type": "text"}] * 2}, "are both table 'default'"),
        ({"tables_configs": []}, "tables_configs is empty"),
        ({"tables_configs": [{"file_format_type": "text"}]}, "path is required"),
    ],
)
def test_bad_seatunnel_options(options, message):
    with pytest.raises(ValidationError, match=message):
        LocalFileSourceOptions.model_validate(options)
