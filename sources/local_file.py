"""LocalFile source: files on the local (or mounted) file system, as SeaTunnel's LocalFile source.

Output schema (one table, named ``schema.table`` > ``plugin_output`` > "default"):

- json, csv: the declared ``schema`` (required: there is no plan-time inference).
- text: without ``schema`` one column ``content string`` per line (SeaTunnel's
  default); with ``schema`` each line is split by ``field_delimiter`` into its fields.
- parquet: the declared ``schema`` if given, else the schema in the footer of the
  first Parquet file under ``path`` (read at plan time with pyarrow).

``read_columns`` projects the schema to the listed columns, in that order.

Run time (:meth:`LocalFile.read`): Spark's file stream source over ``path`` (a
directory, or one file) with the plan-time schema: every micro-batch takes the
files that appeared since the last one (at most ``max_files_per_trigger``),
and the file list of each batch is kept in the query's checkpoint, so a
restarted query re-reads exactly the same files for a replayed batch and never
reads a file twice. BATCH jobs read what is there (available-now trigger);
STREAMING jobs keep picking up new files. Files must appear atomically (write
elsewhere, then rename into ``path``); a file changed after it was read is not
read again. Files and directories whose names start with "_" or "." are ignored.

Row envelope: ``__kind`` is always ``+I``; ``__seq`` orders rows by file, then
position: ``unix_millis(file modification time) * 1_000_000 + position``, where
the position is the row index in the file for parquet and, for text files that
skip header lines, the line's position in its file split; for json, csv and
other text files it is 0 (rows of one file share a ``__seq``: Spark's line
readers expose no row position). It is the same on every replay as long as the
files are not touched.

Options mapping: ``field_delimiter`` -> ``sep`` (csv) or the split separator
(text with a schema: fields are split positionally and converted to the
declared types, ``date_format`` / ``datetime_format`` applied); ``row_delimiter``
-> ``lineSep``; ``skip_header_row_number = 1`` -> ``header`` (csv); for text,
the first N lines of every file are dropped (a Python pass over the lines);
``null_format`` -> ``nullValue`` (csv) or an exact-match null (text);
``encoding`` (json, csv; text files are read as UTF-8); ``file_filter_pattern``
-> a regex over file names (rows of other files are dropped: those files are
still listed, and count against ``max_files_per_trigger``).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any, ClassVar, Iterator, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from sources._parquet_schema import read_parquet_table
from sources._schema_options import SchemaBlock, table_id
from streaming_engine.errors import EngineError
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
    seatunnel_page = "connector-v2/source/LocalFile.md"
    Options = LocalFileSourceOptions
    description = "Reads json, csv, text or parquet files from a local directory (SeaTunnel LocalFile)."
    boundedness = "both"

    options: LocalFileSourceOptions

    def capabilities(self) -> dict[str, str]:
        return {"reads_local_files": f"it reads the files under path {self.options.path!r}"}

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

    # -- run time ------------------------------------------------------------
    def read(self, ctx: Any) -> Any:
        from pyspark.sql import functions as F

        from streaming_engine.runtime import rows as envelope

        o = self.options
        table = ctx.dataset.tables[0]
        full = o.schema_.to_table(table.table_id) if o.schema_ is not None else table  # before read_columns
        fmt = o.file_format_type
        if "://" not in o.path and not o.path.startswith("file:") and not os.path.exists(o.path):
            raise EngineError("RUNTIME.FAILED", {"detail": f"LocalFile source: path {o.path!r} does not exist"})
        directory, glob = _directory_and_filter(o.path)
        r = ctx.spark.readStream
        if glob is not None:
            r = r.option("pathGlobFilter", glob)
        if o.max_files_per_trigger:
            r = r.option("maxFilesPerTrigger", str(o.max_files_per_trigger))
        if o.row_delimiter is not None:
            r = r.option("lineSep", o.row_delimiter)
        if fmt in ("json", "csv"):
            r = r.option("encoding", o.encoding).option("mode", "PERMISSIVE")
            if o.date_format:
                r = r.option("dateFormat", o.date_format)
            if o.datetime_format:
                r = r.option("timestampFormat", o.datetime_format).option("timestampNTZFormat", o.datetime_format)
        if fmt == "csv":
            r = r.option("sep", o.field_delimiter or ",").option("header", str(o.skip_header_row_number == 1).lower())
            if o.null_format is not None:
                r = r.option("nullValue", o.null_format)
        if fmt == "text":
            df = r.format("text").load(directory)
        else:
            df = r.format(fmt).schema(envelope.table_struct(full, meta=False)).load(directory)

        if o.file_filter_pattern:
            df = df.where(F.col("_metadata.file_name").rlike(o.file_filter_pattern))
        mtime = F.unix_millis(F.col("_metadata.file_modification_time"))
        position = F.col("_metadata.row_index") if fmt == "parquet" else F.lit(0).cast("bigint")
        if fmt == "text":
            if o.skip_header_row_number:
                df = _skip_lines(df, o.skip_header_row_number)
                mtime, position = F.col("__mtime"), F.col("__pos")
            values = self._text_columns(full)
        else:
            values = {c.name: F.col(_q(c.name)) for c in full.columns}
        # the order of the files and of the rows in them, unless nothing reads it
        # (a streaming scan reads what its metadata columns need, used or not)
        seq = (F.lit(None) if envelope.SEQ in ctx.unread_metadata else mtime * F.lit(1_000_000) + position)
        return df.select(
            F.lit(table.table_id).alias(envelope.TABLE),
            F.lit(envelope.INSERT).alias(envelope.KIND),
            seq.cast("bigint").alias(envelope.SEQ),
            *[values[c.name].cast(c.type).alias(c.name) for c in table.columns],
        )

    def _text_columns(self, full: TableSchema) -> dict[str, Any]:
        """Columns of a text file's line (``value``): one ``content`` column, or the fields split by the delimiter."""
        from pyspark.sql import functions as F

        o = self.options
        line = F.col("value")
        if o.schema_ is None:
            return {full.columns[0].name: line}
        parts = F.split(line, re.escape(o.field_delimiter or "\u0001"), -1)
        out = {}
        for i, c in enumerate(full.columns):
            raw = F.get(parts, i)
            if o.null_format is not None:
                raw = F.when(raw == F.lit(o.null_format), F.lit(None)).otherwise(raw)
            if c.type == "date" and o.date_format:
                value = F.try_to_timestamp(raw, F.lit(o.date_format)).cast("date")
            elif c.type.startswith("timestamp") and o.datetime_format:
                value = F.try_to_timestamp(raw, F.lit(o.datetime_format))
            elif c.type == "string":
                value = raw
            else:
                value = raw.try_cast(c.type)
            out[c.name] = value
        return out


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _directory_and_filter(path: str) -> tuple[str, str | None]:
    """Spark streams directories: a single file is read as its directory filtered to that file's name."""
    if os.path.isfile(path):
        directory, name = os.path.split(os.path.abspath(path))
        return directory, re.sub(r"([\\\[\]{}*?])", r"\\\1", name)
    return path, None


def _skip_lines(df: Any, skip: int) -> Any:
    """Drop the first ``skip`` lines of every text file; adds ``__pos``, the line's position in its file split.

    Lines reach a Python worker in file order, one split (``file_block_start``)
    after another; a split that starts a file (block start 0) loses its first
    ``skip`` lines. Positions are ``block start + line number in the split``:
    strictly increasing along a file and the same on every replay.
    """
    from pyspark.sql import functions as F

    framed = df.select(
        "value",
        F.col("_metadata.file_path").alias("__path"),
        F.col("_metadata.file_block_start").alias("__block"),
        F.unix_millis(F.col("_metadata.file_modification_time")).alias("__mtime"),
    )
    return framed.mapInArrow(_LineSkipper(skip), "value string, __mtime bigint, __pos bigint")


class _LineSkipper:
    """mapInArrow function (picklable): count lines per file split, drop a file's first lines."""

    def __init__(self, skip: int):
        self.skip = skip

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        seen: dict[tuple[str, int], int] = {}
        for batch in batches:
            n_rows = batch.num_rows
            if n_rows == 0:
                continue
            paths = batch.column("__path").to_pylist()
            blocks = batch.column("__block").to_numpy(zero_copy_only=False)
            pos = np.empty(n_rows, dtype=np.int64)
            keep = np.ones(n_rows, dtype=bool)
            start = 0
            while start < n_rows:  # runs of one (file, split)
                path, block = paths[start], int(blocks[start])
                end = start
                while end < n_rows and paths[end] == path and blocks[end] == block:
                    end += 1
                first = seen.get((path, block), 0)
                numbers = np.arange(first, first + end - start, dtype=np.int64)
                pos[start:end] = block + numbers
                if block == 0:
                    keep[start:end] = numbers >= self.skip
                seen[(path, block)] = first + end - start
                start = end
            out = pa.RecordBatch.from_arrays(
                [batch.column("value"), batch.column("__mtime"), pa.array(pos)], names=["value", "__mtime", "__pos"]
            )
            yield out.filter(pa.array(keep))
