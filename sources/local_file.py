"""LocalFile source: files on the local (or mounted) file system, as SeaTunnel's LocalFile source.

Output schema (one table, named ``schema.table`` > ``plugin_output`` > "default"):

- json, csv: the declared ``schema`` (required: there is no plan-time inference).
- text: without ``schema`` one column ``content string`` per line (SeaTunnel's
  default); with ``schema`` each line is split by ``field_delimiter`` into its fields.
- parquet: the declared ``schema`` if given, else the schema in the footer of the
  first Parquet file under ``path`` (read at plan time with pyarrow).

``read_columns`` projects the schema to the listed columns, in that order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from sources._parquet_schema import read_parquet_table
from sources._schema_options import SchemaBlock, table_id
from streaming_engine.plugins.base import Source, SourceOptions, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms._common import check_java_regex


class LocalFileSourceOptions(SourceOptions):
    path: str = Field(min_length=1, description="File or directory to read.")
    file_format_type: Literal["json", "csv", "text", "parquet"] = Field(
        description="File format: json, csv, text or parquet."
    )
    schema_: SchemaBlock | None = Field(
        None, alias="schema", description="Schema of the rows; required for json and csv, optional for text and parquet."
    )
    read_columns: list[str] | None = Field(None, description="Read only these columns (projection), in this order.")
    field_delimiter: str | None = Field(
        None,
        validation_alias=AliasChoices("field_delimiter", "delimiter"),
        description='Column separator for csv (default ",") and text with a schema (default "\\u0001").',
    )
    row_delimiter: str | None = Field(None, description="Line separator for text and csv (default: any newline).")
    skip_header_row_number: int = Field(0, ge=0, description="Lines to skip at the start of each csv/text file.")
    encoding: str = Field("UTF-8", description="Character set of json, csv and text files.")
    null_format: str | None = Field(None, description="The string that stands for null in csv and text files.")
    date_format: str | None = Field(None, description='Date pattern, e.g. "yyyy-MM-dd".')
    datetime_format: str | None = Field(None, description='Timestamp pattern, e.g. "yyyy-MM-dd HH:mm:ss".')
    file_filter_pattern: str | None = Field(None, description="Regex over file names; only matching files are read.")
    max_files_per_trigger: int | None = Field(
        None, ge=1, description="Streaming: at most this many new files per micro-batch (not a SeaTunnel option)."
    )

    @field_validator("file_format_type", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v

    @field_validator("file_filter_pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return v if v is None else check_java_regex("file_filter_pattern", v)

    @model_validator(mode="after")
    def _check(self) -> "LocalFileSourceOptions":
        fmt = self.file_format_type
        if fmt in ("json", "csv") and self.schema_ is None:
            raise ValueError(f"file_format_type = {fmt} needs a schema: add schema {{ fields {{ name = type, ... }} }}")
        if fmt in ("json", "parquet"):
            for key in ("field_delimiter", "row_delimiter", "null_format"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} only applies to csv and text files, not {fmt}")
            if self.skip_header_row_number:
                raise ValueError(f"skip_header_row_number only applies to csv and text files, not {fmt}")
        if fmt == "csv" and self.skip_header_row_number > 1:
            raise ValueError("csv files can skip at most one header line (skip_header_row_number = 1)")
        if self.read_columns is not None:
            if not self.read_columns:
                raise ValueError("read_columns is empty; list the columns to read or remove the option")
            if len(set(self.read_columns)) != len(self.read_columns):
                raise ValueError("read_columns lists a column twice")
            if self.schema_ is not None:
                names = {c.name for c in self.schema_.column_list()}
                unknown = [c for c in self.read_columns if c not in names]
                if unknown:
                    raise ValueError(f"read_columns {unknown} are not in the schema; columns: {', '.join(sorted(names))}")
        return self


@register
class LocalFile(Source):
    name: ClassVar[str] = "LocalFile"
    Options = LocalFileSourceOptions
    description = "Reads json, csv, text or parquet files from a local directory (SeaTunnel LocalFile)."
    boundedness = "both"

    options: LocalFileSourceOptions

    def output(self) -> Dataset:
        o = self.options
        tid = table_id(o.schema_, o.plugin_output)
        if o.schema_ is not None:
            table = o.schema_.to_table(tid)
        elif o.file_format_type == "text":
            table = TableSchema(tid, (Column("content", "string"),))
        else:  # parquet without a declared schema
            table = read_parquet_table(tid, o.path, o.file_filter_pattern)
        if o.read_columns:
            by_name = {c.name: c for c in table.columns}
            for name in o.read_columns:
                if name not in by_name:
                    raise missing_column(table, name)
            kept = tuple(by_name[n] for n in o.read_columns)
            pk = table.primary_key if set(table.primary_key) <= set(o.read_columns) else ()
            table = replace(table, columns=kept, primary_key=pk)
        return Dataset((table,))

    def describe(self) -> str:
        return f"LocalFile ({self.options.file_format_type} files under {self.options.path})"
