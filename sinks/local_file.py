"""LocalFile sink: write files to a local (or mounted) directory (SeaTunnel LocalFile sink).

``path`` may use the placeholders of :mod:`sinks._placeholders`; a multi-table
input needs ``${table_name}`` (or ``${table_full_name}``) so tables do not share
a directory. Files are written to a staging directory and published atomically
when the epoch commits (``commit_protocol = "staged-publish"``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sinks._placeholders import check_distinct_targets, check_template, render
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import Sink, SinkOptions, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema

_CODECS = {
    "parquet": {"none", "snappy", "gzip", "lz4", "zstd", "lzo"},
    "json": {"none", "gzip", "bzip2", "deflate", "lz4", "snappy"},
    "csv": {"none", "gzip", "bzip2", "deflate", "lz4", "snappy"},
}


def _list(v: Any) -> Any:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


class LocalFileSinkOptions(SinkOptions):
    path: str = Field(min_length=1, description="Output directory; placeholders like ${table_name} allowed.")
    file_format_type: Literal["parquet", "json", "csv"] = Field("csv", description="File format: csv (default), json or parquet.")
    field_delimiter: str | None = Field(None, min_length=1, description='csv only: column separator (default ",").')
    enable_header_write: bool = Field(False, description="csv only: write a header line with the column names.")
    sink_columns: list[str] | None = Field(None, description="Write only these columns, in this order.")
    have_partition: bool = Field(False, description="Write Hive-style partition directories (needs partition_by).")
    partition_by: list[str] | None = Field(None, description="Partition columns (with have_partition = true).")
    compress_codec: str = Field("none", description="Compression: none, snappy, gzip, lz4, zstd (parquet), bzip2, deflate (text formats).")
    encoding: str = Field("UTF-8", description="Character set of csv and json files.")

    _lists = field_validator("sink_columns", "partition_by", mode="before")(lambda cls, v: _list(v))

    @field_validator("file_format_type", "compress_codec", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> "LocalFileSinkOptions":
        check_template("path", self.path)
        fmt = self.file_format_type
        if fmt != "csv":
            for key in ("field_delimiter", "enable_header_write"):
                if key in self.model_fields_set:
                    raise ValueError(f"{key} only applies to file_format_type = csv")
        if self.compress_codec not in _CODECS[fmt]:
            raise ValueError(f"compress_codec {self.compress_codec!r} is not available for {fmt}; use one of {', '.join(sorted(_CODECS[fmt]))}")
        if self.have_partition and not self.partition_by:
            raise ValueError("have_partition = true needs partition_by = [columns]")
        if self.partition_by and not self.have_partition:
            raise ValueError("partition_by is only used with have_partition = true; set it")
        for key in ("sink_columns", "partition_by"):
            values = getattr(self, key)
            if values is not None:
                if not values:
                    raise ValueError(f"{key} is empty; list columns or remove the option")
                if len(set(values)) != len(values):
                    raise ValueError(f"{key} lists a column twice")
        return self


@register
class LocalFile(Sink):
    name: ClassVar[str] = "LocalFile"
    Options = LocalFileSinkOptions
    description = "Writes csv, json or parquet files, published atomically per micro-batch."
    commit_protocol = "staged-publish"

    options: LocalFileSinkOptions

    def check_input(self, dataset: Dataset) -> None:
        o = self.options
        targets = []
        for table in dataset.tables:
            for col in (o.sink_columns or []) + (o.partition_by or []):
                if col not in table.names:
                    raise missing_column(table, col)
            written = [table.column(c) for c in (o.sink_columns or table.names)]
            data_cols = [c for c in written if c.name not in (o.partition_by or ())]
            if not data_cols:
                raise _incompatible(table, "every written column is a partition column; keep at least one data column")
            if o.file_format_type == "csv":
                for c in data_cols:
                    if c.type.startswith(("array<", "map<", "struct<")):
                        raise _incompatible(table, f"csv cannot store column {c.name!r} of type {c.type}; use json or parquet")
            targets.append((table.table_id, render(o.path, table)))
        check_distinct_targets(targets, "path")

    def targets(self, dataset: Dataset) -> list[str]:
        o = self.options
        return [f"{t.table_id} -> {render(o.path, t)} ({o.file_format_type})" for t in dataset.tables]

    def describe(self) -> str:
        return f"LocalFile ({self.options.file_format_type})"


def _incompatible(table: TableSchema, detail: str) -> SchemaError:
    return SchemaError("SCHEMA.INCOMPATIBLE", {"table": table.table_id, "detail": detail})
