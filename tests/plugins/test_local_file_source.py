"""LocalFile source: options and plan-time schemas (declared, text default, parquet footer)."""

import pytest
from pydantic import ValidationError

from sources.local_file import LocalFile, LocalFileSourceOptions
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import SOURCES


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
    with pytest.raises(ValidationError, match="file_format_type"):
        make(path="/x", file_format_type="orc")


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
        ("dt", "int"), ("region", "string"),
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
