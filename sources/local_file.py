"""LocalFile source: files on the local (or mounted) file system, as SeaTunnel's LocalFile source.

Output schema (one table, named ``schema.table`` > ``plugin_output`` > "default";
``tables_configs`` makes several):

- json, csv, xml: the declared ``schema`` (required: there is no plan-time inference).
- text: without ``schema`` one column ``content string`` per line (SeaTunnel's
  default); with ``schema`` each line is split by ``field_delimiter`` into its fields.
- parquet, orc: the declared ``schema`` if given, else the schema in the footer of
  the first file under ``path`` (read at plan time with pyarrow). A ``schema``
  with only ``table = "db.t"`` names the table and keeps the footer's columns.
- excel and binary files are refused with the reason (no Spark data source).

``read_columns`` projects the schema to the listed columns, in that order.
``parse_partition_from_path`` (default true): the Hive-style ``key=value``
directories between ``path`` and the first file found at plan time add one
``string`` column each, after the columns (SeaTunnel's rule: do not declare
them in ``schema``; a declared one keeps its declared type); each file's value is
parsed from its own path (null where the path has no such folder). Files are
listed at any depth under ``path``, as SeaTunnel does (Spark alone would read
``key=value`` folders only). ``false``: no partition columns.

Run time (:meth:`LocalFile.read`): Spark's file stream source over ``path`` (a
directory, or one file) with the plan-time schema: every micro-batch takes the
files that appeared since the last one (at most ``max_files_per_trigger``),
and the file list of each batch is kept in the query's checkpoint, so a
restarted query re-reads exactly the same files for a replayed batch and never
reads a file twice. BATCH jobs read what is there (available-now trigger);
STREAMING jobs keep picking up new files. Files must appear atomically (write
elsewhere, then rename into ``path``); a file changed after it was read is not
read again. Files and directories whose names start with "_" or "." are ignored.
``tables_configs = [{path = ..., file_format_type = ..., schema {table = ...}}, ...]``:
one table per item (each item takes every option above; items need distinct
``schema.table``), all read by one query as a multi-table source.

Row envelope: ``__kind`` is always ``+I``; ``__seq`` orders rows by file, then
position: ``unix_millis(file modification time) * 1_000_000 + position``, where
the position is the row index in the file for parquet and, for text files that
skip header lines, the line's position in its file split; for json, csv, xml,
orc and other text files it is 0 (rows of one file share a ``__seq``: Spark's
readers expose no row position there). It is the same on every replay as long
as the files are not touched.

Options mapping: csv values are read as RFC 4180 (quotes inside quoted values doubled, as
SeaTunnel's csv reader and the LocalFile sink write them); ``field_delimiter`` -> ``sep`` (csv, default ",") or the split
separator (text with a schema, default ``\\001``: fields are split positionally
and converted to the declared types, ``date_format`` / ``datetime_format``
applied); ``row_delimiter`` -> ``lineSep``; ``skip_header_row_number = 1`` ->
``header`` (csv); for text, the first N lines of every file are dropped (a
Python pass over the lines); ``null_format`` -> ``nullValue`` (csv) or an
exact-match null (text); ``date_format`` / ``datetime_format`` (unset: Spark's
parser, which reads SeaTunnel's defaults ``yyyy-MM-dd`` / ``yyyy-MM-dd
HH:mm:ss`` and ISO-8601 forms); ``time_format`` (``HH:mm:ss`` or
``HH:mm:ss.SSS``): ``time`` columns of csv, text and xml files are parsed with
it and carried as text in that form (unparsable: null; json times are kept as
written, as SeaTunnel's json reader ignores it); ``encoding`` (json, csv, xml;
text files must be UTF-8: another encoding is refused, Spark's text reader
decodes UTF-8 only); ``file_filter_pattern`` -> a Java regex that
must match a file's whole name, or, when the pattern starts with ``path``, its
whole path from ``path`` on (SeaTunnel's rule; rows of other files are dropped:
those files are still listed, and count against ``max_files_per_trigger``); ``filename_extension`` -> only files
whose names end with it (a leading "." is added when missing) are read
(``pathGlobFilter``); ``xml_row_tag`` -> ``rowTag`` and ``xml_use_attr_format``
(both required for xml, as in SeaTunnel): true reads each field from the row
element's attribute of that name, false from its child element of that name.
``compress_codec``: ``none`` (files ending ``.gz``, ``.bz2``, ``.deflate``,
``.lz4`` or ``.snappy`` are still decompressed by Spark, by extension) or
``lzo``: lzop files (the codec SeaTunnel uses; aircompressor's, shipped with
Spark), read by extension, so only files ending ``.lzo`` are read; parquet
and orc name their codec in the file, the option changes nothing there.
``archive_compress_codec``: ``none`` or ``gz`` (only files ending ``.gz`` are
read, decompressed by Spark); ``zip``, ``tar`` and ``tar_gz`` are refused
(Spark decompresses streams, it does not unpack archives).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any, ClassVar, Iterator, Literal
from urllib.parse import urlparse

from pydantic import AliasChoices, Field, field_validator, model_validator

from sources._parquet_schema import arrow_to_ddl, partition_columns, read_parquet_table
from sources._schema_options import SchemaBlock, check_table_path, file_format, spark_charset, table_id
from streaming_engine.errors import EngineError, SchemaError
from streaming_engine.plugins.base import Source, SourceOptions, missing_column, refused
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms._common import check_java_regex

FORMATS = ("json", "csv", "text", "parquet", "orc", "xml")
EXCEL = "excel files: no Spark data source for Excel ships with Spark; save the sheets as csv and read those"
_REFUSED_FORMATS = {
    "excel": EXCEL,
    "binary": "binary (whole files, byte for byte) is not offered: the engine moves rows, not files; copy the files "
              "with a file tool",
}  # fmt: skip
_LINE_FORMATS = ("json", "csv", "text", "xml")  # read by Spark's text readers: compressed by extension
_FOOTER_FORMATS = ("parquet", "orc")
LZOP_CODEC = "io.airlift.compress.lzo.LzopCodec"  # aircompressor's Hadoop codec, on Spark's class path
_ARCHIVES = {
    "zip": "ZIP", "tar": "TAR", "tar_gz": "TAR_GZ",
}  # fmt: skip
# options that describe one table: with tables_configs they go in each item
_WIRING = {"tables_configs", "plugin_output", "parallelism"}


class LocalFileSourceOptions(SourceOptions):
    path: str | None = Field(None, min_length=1, description="File or directory to read (required; in each tables_configs item).")
    file_format_type: str | None = Field(
        None, description="File format: json, csv, text, parquet, orc or xml (required; in each tables_configs item)."
    )
    schema_: SchemaBlock | None = Field(
        None, alias="schema",
        description="Schema of the rows; required for json, csv and xml, optional for text, parquet and orc.",
    )  # fmt: skip
    read_columns: list[str] | None = Field(None, description="Read only these columns (projection), in this order.")
    field_delimiter: str | None = Field(
        None,
        validation_alias=AliasChoices("field_delimiter", "delimiter"),
        description='Column separator for csv (default ",") and text with a schema (default "\\u0001").',
    )
    parse_partition_from_path: bool = Field(
        True, description="Add the key=value directories of the file's path as string columns (default true)."
    )
    row_delimiter: str | None = Field(None, description="Line separator for text and csv (default: any newline).")
    skip_header_row_number: int = Field(0, ge=0, description="Lines to skip at the start of each csv/text file.")
    encoding: str = Field("UTF-8", description="Character set of json, csv and xml files (text: UTF-8).")
    null_format: str | None = Field(None, description="The string that stands for null in csv and text files.")
    date_format: str | None = Field(None, description='Date pattern, e.g. "yyyy-MM-dd" (default: Spark\'s parser, which reads yyyy-MM-dd).')
    datetime_format: str | None = Field(
        None, description='Timestamp pattern, e.g. "yyyy-MM-dd HH:mm:ss" (default: Spark\'s parser, which reads it).'
    )
    time_format: Literal["HH:mm:ss", "HH:mm:ss.SSS"] = Field(
        "HH:mm:ss", description="Pattern of time columns in csv, text and xml files: HH:mm:ss (default) or HH:mm:ss.SSS."
    )
    xml_row_tag: str | None = Field(None, min_length=1, description="xml: the tag of the row elements (required for xml).")
    xml_use_attr_format: bool | None = Field(
        None, description="xml: true reads fields from the row element's attributes, false from its child elements (required for xml)."
    )
    file_filter_pattern: str | None = Field(None, description="Regex a file's whole name must match (its path from `path` on, when the pattern starts with `path`); other files are not read.")
    filename_extension: str | None = Field(
        None, min_length=1, description='Read only files whose names end with this extension, e.g. "csv" or ".txt".'
    )
    compress_codec: Literal["none", "lzo"] = Field(
        "none", description="none (Spark still decompresses .gz/.bz2/... by extension) or lzo (lzop files ending .lzo)."
    )
    archive_compress_codec: str = Field(
        "none", description="none, or gz (files ending .gz, decompressed); zip, tar and tar_gz are refused."
    )
    sheet_name: refused(EXCEL) = Field(None, description="excel files: not supported.")
    excel_engine: refused(EXCEL) = Field(None, description="excel files: not supported.")
    max_files_per_trigger: int | None = Field(
        None, ge=1, description="Streaming: at most this many new files per micro-batch (not a SeaTunnel option)."
    )
    tables_configs: list["LocalFileSourceOptions"] | None = Field(
        None, description="Several tables: one item per table, each with path, file_format_type, schema {table = ...}, ..."
    )

    @field_validator("file_format_type", "compress_codec", "archive_compress_codec", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("file_format_type")
    @classmethod
    def _format(cls, v: str | None) -> str | None:
        return file_format(v, FORMATS, _REFUSED_FORMATS)

    @field_validator("archive_compress_codec")
    @classmethod
    def _archive(cls, v: str) -> str:
        if v in ("none", "gz"):
            return v
        if v in _ARCHIVES:
            raise ValueError(
                f"archive_compress_codec {_ARCHIVES[v]} is not supported by this engine: Spark decompresses files "
                "(gz, bzip2, ...), it does not unpack archives; extract the files into path"
            )
        raise ValueError(f"archive_compress_codec {v!r}: use NONE or GZ (ZIP, TAR and TAR_GZ are not supported)")

    @field_validator("schema_", mode="wrap")
    @classmethod
    def _table_only(cls, v: Any, handler: Any) -> Any:
        """``schema { table = "db.t" }`` without columns (SeaTunnel's multi-table
        examples for parquet): names the table, the columns come from the files."""
        if isinstance(v, dict) and "table" in v and set(v) <= {"table", "comment"}:
            name = check_table_path(str(v["table"]))
            return SchemaBlock.model_construct(
                fields=None, columns=None, primaryKey=None, constraintKeys=None, table=name, comment=v.get("comment")
            )
        return handler(v)

    @field_validator("file_filter_pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return v if v is None else check_java_regex("file_filter_pattern", v)

    @field_validator("encoding")
    @classmethod
    def _encoding(cls, v: str) -> str:
        return spark_charset(v)

    @field_validator("filename_extension")
    @classmethod
    def _extension(cls, v: str | None) -> str | None:
        if v is not None and ("/" in v or "\\" in v):
            raise ValueError("filename_extension is the end of a file name; it cannot hold a path separator")
        return v

    @model_validator(mode="after")
    def _check(self) -> "LocalFileSourceOptions":
        if self.tables_configs is not None:
            return self._check_tables()
        if self.path is None:
            raise ValueError("path is required: the file or directory to read")
        fmt = self.file_format_type
        if fmt is None:
            raise ValueError(f"file_format_type is required: one of {', '.join(FORMATS)}")
        declared = self.declares_columns
        if fmt in ("json", "csv", "xml") and not declared:
            raise ValueError(f"file_format_type = {fmt} needs a schema: add schema {{ fields {{ name = type, ... }} }}")
        if fmt not in ("csv", "text"):
            for key in ("field_delimiter", "row_delimiter", "null_format"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} only applies to csv and text files, not {fmt}")
            if self.skip_header_row_number:
                raise ValueError(f"skip_header_row_number only applies to csv and text files, not {fmt}")
        if fmt == "text" and self.encoding.lower() != "utf-8":
            raise ValueError(f"encoding {self.encoding}: Spark's text reader decodes UTF-8 only (other bytes would be "
                             "misread); convert the files, or read them as csv with field_delimiter and encoding")
        if fmt == "csv" and self.skip_header_row_number > 1:
            raise ValueError("csv files can skip at most one header line (skip_header_row_number = 1)")
        if fmt == "xml":
            if self.xml_row_tag is None or self.xml_use_attr_format is None:
                raise ValueError("file_format_type = xml needs xml_row_tag (the row elements' tag) and "
                                 "xml_use_attr_format (true: fields are attributes, false: child elements)")  # fmt: skip
        else:
            for key in ("xml_row_tag", "xml_use_attr_format"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} only applies to file_format_type = xml")
        if self.archive_compress_codec == "gz" and fmt in _FOOTER_FORMATS:
            raise ValueError(f"archive_compress_codec GZ applies to text, csv, json and xml files, not {fmt}")
        self.suffix  # raises on contradicting file name endings
        if self.read_columns is not None:
            if not self.read_columns:
                raise ValueError("read_columns is empty; list the columns to read or remove the option")
            if len(set(self.read_columns)) != len(self.read_columns):
                raise ValueError("read_columns lists a column twice")
            if declared:
                names = {c.name for c in self.schema_.column_list()}  # type: ignore[union-attr]
                unknown = [c for c in self.read_columns if c not in names]
                if unknown:
                    raise ValueError(f"read_columns {unknown} are not in the schema; columns: {', '.join(sorted(names))}")
        return self

    def _check_tables(self) -> "LocalFileSourceOptions":
        fields = type(self).model_fields
        beside = sorted(fields[k].alias or k for k in self.model_fields_set - _WIRING)
        if beside:
            raise ValueError(f"with tables_configs, set {', '.join(beside)} in each tables_configs item, not next to it")
        if not self.tables_configs:
            raise ValueError("tables_configs is empty; list one item per table or remove the option")
        seen: dict[str, int] = {}
        for i, item in enumerate(self.tables_configs):
            inner = sorted(fields[k].alias or k for k in item.model_fields_set & _WIRING)
            if inner:
                raise ValueError(f"tables_configs[{i}]: {', '.join(inner)} belongs next to tables_configs, not in an item")
            tid = table_id(item.schema_, None)
            if tid in seen:
                raise ValueError(
                    f"tables_configs[{seen[tid]}] and [{i}] are both table {tid!r}; give each item its own "
                    'schema { table = "db.table" }'
                )
            seen[tid] = i
        return self

    @property
    def declares_columns(self) -> bool:
        return self.schema_ is not None and (self.schema_.fields is not None or self.schema_.columns is not None)

    @property
    def suffix(self) -> str | None:
        """What every file name read must end with (filename_extension, .lzo, .gz), or None."""
        fmt = self.file_format_type
        needed = []
        if self.filename_extension:
            ext = self.filename_extension
            needed.append(("filename_extension", ext if ext.startswith(".") else "." + ext))
        if self.compress_codec == "lzo" and fmt in _LINE_FORMATS:
            needed.append(("compress_codec lzo", ".lzo"))
        if self.archive_compress_codec == "gz":
            needed.append(("archive_compress_codec GZ", ".gz"))
        if not needed:
            return None
        longest = max((s for _, s in needed), key=len)
        for what, s in needed:
            if not longest.endswith(s):
                raise ValueError(
                    f"no file name can end with both {longest!r} and {s!r} ({what}); "
                    + ", ".join(f"{w} reads files ending {x!r}" for w, x in needed)
                )
        return longest

    def items(self) -> list["LocalFileSourceOptions"]:
        """The options of each table: the tables_configs items, or these options."""
        return list(self.tables_configs) if self.tables_configs is not None else [self]


LocalFileSourceOptions.model_rebuild()


@register
class LocalFile(Source):
    name: ClassVar[str] = "LocalFile"
    seatunnel_page = "connector-v2/source/LocalFile.md"
    seatunnel_defaults = {
        "delimiter/field_delimiter": "unset: \\001 for text, ',' for csv (the page's default is text's)",
        "date_format": "unset: Spark's date parser, which reads the page's yyyy-MM-dd",
        "datetime_format": "unset: Spark's timestamp parser, which reads the page's yyyy-MM-dd HH:mm:ss "
                           "(and ISO 8601 besides)",
        "tables_configs": "none (the page's Default column holds a description)",
    }
    Options = LocalFileSourceOptions
    description = "Reads json, csv, text, xml, parquet or orc files from a local directory (SeaTunnel LocalFile)."
    boundedness = "both"
    restore_tunable = frozenset({"max_files_per_trigger"})

    options: LocalFileSourceOptions

    def capabilities(self) -> dict[str, str]:
        paths = ", ".join(repr(o.path) for o in self.options.items())
        return {"reads_local_files": f"it reads the files under path {paths}"}

    def output(self) -> Dataset:
        return Dataset(tuple(t for t, _, _ in self._tables()))

    def _tables(self) -> list[tuple[TableSchema, TableSchema, int]]:
        """Per item, :func:`_table`: worked out once (the footer and the
        partition directories are read at plan time; the run reads the same)."""
        found = getattr(self, "_planned", None)
        if found is None:
            o = self.options
            ids = [table_id(o.schema_, o.plugin_output)] if o.tables_configs is None else [
                table_id(item.schema_, None) for item in o.tables_configs
            ]
            found = self._planned = [_table(item, tid) for item, tid in zip(o.items(), ids)]
        return found

    def describe(self) -> str:
        return "LocalFile (" + "; ".join(f"{o.file_format_type} files under {o.path}" for o in self.options.items()) + ")"

    # -- run time ------------------------------------------------------------
    def read(self, ctx: Any) -> Any:
        from pyspark.sql import functions as F

        from streaming_engine.runtime import rows as envelope

        planned = {t.table_id: (o, full, n) for o, (t, full, n) in zip(self.options.items(), self._tables())}
        tables = ctx.dataset.tables
        frames = [_read_table(ctx, planned[t.table_id][0], t, *planned[t.table_id][1:]) for t in tables]
        if len(frames) == 1:
            return frames[0]
        lay = envelope.layout(ctx.dataset)
        out = None
        for frame, table in zip(frames, tables):
            mine = dict(zip(lay.columns[table.table_id], table.names))
            slots = [
                (F.col(_q(mine[slot])) if slot in mine else F.lit(None)).cast(ddl).alias(slot) for slot, ddl in lay.slots
            ]
            framed = frame.select(*[F.col(m) for m in envelope.META], *slots)
            out = framed if out is None else out.unionByName(framed)
        return out


def _table(o: LocalFileSourceOptions, tid: str) -> tuple[TableSchema, TableSchema, int]:
    """(the output table, the table Spark reads before read_columns: the file's
    columns then the partition columns, and how many of its columns come from
    the file's content)."""
    fmt = o.file_format_type
    if o.declares_columns:
        data = o.schema_.to_table(tid)  # type: ignore[union-attr]
    elif fmt == "text":
        data = TableSchema(tid, (Column("content", "string"),))
    else:  # parquet or orc without declared columns: the footer of the first file
        data = _footer_table(o, tid)
    partitions = [k for k in _partition_keys(o) if k not in data.names] if o.parse_partition_from_path else []
    full = replace(data, columns=data.columns + tuple(Column(k, "string") for k in partitions))
    table = full
    if o.read_columns:
        by_name = {c.name: c for c in full.columns}
        for name in o.read_columns:
            if name not in by_name:
                raise missing_column(full, name)
        kept = tuple(by_name[n] for n in [*o.read_columns, *[k for k in partitions if k not in o.read_columns]])
        pk = full.primary_key if set(full.primary_key) <= set(o.read_columns) else ()
        table = replace(full, columns=kept, primary_key=pk)
    return table, full, len(data.columns)


def _footer_table(o: LocalFileSourceOptions, tid: str) -> TableSchema:
    fmt = o.file_format_type
    first = _first_file(o.path or "", o.file_filter_pattern, o.suffix)
    if first is None:
        raise SchemaError(
            "SCHEMA.INVALID",
            {"detail": f"no {fmt} file under {o.path!r} to read the schema from; declare `schema` in the LocalFile source"},
        )
    if fmt == "parquet":
        return read_parquet_table(tid, first)  # a file: its footer's columns, no partitions
    import pyarrow.orc as po

    try:
        arrow_schema = po.ORCFile(first).schema
    except Exception as e:  # corrupt or not ORC
        raise SchemaError("SCHEMA.INVALID", {"detail": f"cannot read the ORC schema of {first!r}: {e}"}) from None
    return TableSchema(tid, tuple(Column(f.name, arrow_to_ddl(f.type), f.nullable) for f in arrow_schema))


def _partition_keys(o: LocalFileSourceOptions) -> list[str]:
    """The key=value directories between ``path`` and the first file under it."""
    path = o.path or ""
    if not os.path.isdir(path):
        return []
    first = _first_file(path, o.file_filter_pattern, o.suffix)
    return [c.name for c in partition_columns(path, first)] if first else []


def _filtered_part(file_path: str, base: str, pattern: str) -> str:
    """What ``file_filter_pattern`` must match in full (SeaTunnel's
    AbstractReadStrategy.filterFileByPattern): the path from ``base`` on when
    the pattern starts with ``base``, else the file name."""
    if base and pattern.startswith(base):
        return file_path[max(file_path.find(base), 0):]
    return os.path.basename(file_path)


def _decoded_path() -> Any:
    """The file's path from ``_metadata`` (a URI, %XX-encoded; a '+' is literal), decoded."""
    from pyspark.sql import functions as F

    return _decoded(F.parse_url(F.col("_metadata.file_path"), F.lit("PATH")))


def _decoded(c: Any) -> Any:
    from pyspark.sql import functions as F

    return F.url_decode(F.replace(c, F.lit("+"), F.lit("%2B")))


def _base(path: str) -> str:
    """The path part of the source's ``path`` option (as it appears in a file's path)."""
    return urlparse(path).path if "://" in path or path.startswith("file:") else path


def _file_filter(base: str, pattern: str) -> Any:
    """:func:`_filtered_part` as a Spark condition over ``_metadata``."""
    from pyspark.sql import functions as F

    if base and pattern.startswith(base):
        path = _decoded_path()
        part = F.substring(path, F.greatest(F.instr(path, _base(base)), F.lit(1)), 1 << 30)
    else:
        part = _decoded(F.col("_metadata.file_name"))
    return part.rlike(f"^(?:{pattern})\\z")


def _partition_values(base: str, keys: list[str]) -> dict[str, Any]:
    """The ``key=value`` directories under ``base`` in each file's path, as
    string columns (null where a file's path has no such directory)."""
    from pyspark.sql import functions as F

    path = _decoded_path()
    root = _base(base) if "://" in base or base.startswith("file:") else os.path.abspath(base)  # as Spark lists it
    under = F.substring(path, F.instr(path, root) + len(root), 1 << 30)
    out = {}
    for key in keys:
        rx = f"(?:^|/){re.escape(key)}=([^/]*)/"
        out[key] = F.when(under.rlike(rx), F.regexp_extract(under, rx, 1))
    return out


def _first_file(path: str, pattern: str | None, suffix: str | None) -> str | None:
    """``path`` if it is a file, else the first data file under it (sorted, recursive),
    skipping what the source skips (hidden and bookkeeping files, other names)."""
    if os.path.isfile(path):
        return path
    try:
        rx = re.compile(pattern) if pattern else None
    except re.error:  # Java-only syntax: Python cannot apply it, so do not filter here
        rx = None
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for f in sorted(files):
            if f.startswith((".", "_")) or f.endswith(".crc") or (suffix and not f.endswith(suffix)):
                continue
            if rx is not None and not rx.fullmatch(_filtered_part(os.path.join(root, f), path, pattern or "")):
                continue
            return os.path.join(root, f)
    return None


def _read_table(ctx: Any, o: LocalFileSourceOptions, table: TableSchema, full: TableSchema, n_data: int) -> Any:
    """One table's streaming frame in the single-table envelope; ``full`` and
    ``n_data``: what the plan read (see :func:`_table`)."""
    from pyspark.sql import functions as F

    from streaming_engine.runtime import rows as envelope

    data, partitions = full.columns[:n_data], full.columns[n_data:]
    data_names = {c.name for c in data}
    fmt = o.file_format_type or ""
    path = o.path or ""
    if "://" not in path and not path.startswith("file:") and not os.path.exists(path):
        raise EngineError("RUNTIME.FAILED", {"detail": f"LocalFile source: path {path!r} does not exist"})
    directory, glob = _directory_and_filter(path, o.suffix)
    # every file under the directory, at any depth (SeaTunnel lists recursively; Spark
    # would read key=value folders only); partition values are parsed from the paths
    r = ctx.spark.readStream.option("recursiveFileLookup", "true")
    if glob is not None:
        r = r.option("pathGlobFilter", glob)
    if o.max_files_per_trigger:
        r = r.option("maxFilesPerTrigger", str(o.max_files_per_trigger))
    if o.row_delimiter is not None:
        r = r.option("lineSep", o.row_delimiter)
    if o.compress_codec == "lzo" and fmt in _LINE_FORMATS:
        r = r.option("io.compression.codecs", LZOP_CODEC)
    if fmt in ("json", "csv", "xml"):
        r = r.option("encoding", o.encoding).option("mode", "PERMISSIVE")
        if o.date_format:
            r = r.option("dateFormat", o.date_format)
        if o.datetime_format:
            r = r.option("timestampFormat", o.datetime_format).option("timestampNTZFormat", o.datetime_format)
    if fmt == "csv":
        r = r.option("sep", o.field_delimiter or ",").option("header", str(o.skip_header_row_number == 1).lower())
        r = r.option("escape", '"')  # quotes inside quoted values are doubled (RFC 4180, SeaTunnel's csv)
        if o.null_format is not None:
            r = r.option("nullValue", o.null_format)
    # Spark reads what the schema it is given names; partition columns are filled from the paths
    if fmt == "text":
        read_as: tuple[Column, ...] = (Column("value", "string"),)
    elif fmt == "xml" and o.xml_use_attr_format:
        read_as = tuple(replace(c, name=f"_{c.name}") for c in data)  # attributePrefix "_"
        r = r.option("rowTag", o.xml_row_tag)
    elif fmt == "xml":
        read_as = data
        r = r.option("rowTag", o.xml_row_tag).option("excludeAttribute", "true")
    else:
        read_as = data
    struct = envelope.table_struct(TableSchema(table.table_id, tuple(read_as)), meta=False)
    df = r.format(fmt).schema(struct).load(directory)
    keep = [c.name for c in partitions]
    from_path = [*keep, *(k for k in (_partition_keys(o) if o.parse_partition_from_path else []) if k in data_names)]
    if from_path:
        df = df.withColumns(_partition_values(path, from_path))

    if o.file_filter_pattern:
        df = df.where(_file_filter(o.path or "", o.file_filter_pattern))
    mtime = F.unix_millis(F.col("_metadata.file_modification_time"))
    position = F.col("_metadata.row_index") if fmt == "parquet" else F.lit(0).cast("bigint")
    if fmt == "text":
        if o.skip_header_row_number:
            df = _skip_lines(df, o.skip_header_row_number, from_path)
            mtime, position = F.col("__mtime"), F.col("__pos")
        values = _text_columns(o, data)
    elif fmt == "xml" and o.xml_use_attr_format:
        values = {c.name: F.col(_q(f"_{c.name}")) for c in data}
    else:
        values = {c.name: F.col(_q(c.name)) for c in data}
    for name in from_path:  # partition columns (a declared one: the path's value in its declared type)
        values[name] = F.col(_q(name))
    if fmt in ("csv", "xml"):
        for name in _time_columns(o) & set(values):
            values[name] = _time(values[name], o.time_format)
    # the order of the files and of the rows in them, unless nothing reads it
    # (a streaming scan reads what its metadata columns need, used or not)
    seq = F.lit(None) if envelope.SEQ in ctx.unread_metadata else mtime * F.lit(1_000_000) + position
    return df.select(
        F.lit(table.table_id).alias(envelope.TABLE),
        F.lit(envelope.INSERT).alias(envelope.KIND),
        seq.cast("bigint").alias(envelope.SEQ),
        *[values[c.name].cast(c.type).alias(c.name) for c in table.columns],
    )


def _text_columns(o: LocalFileSourceOptions, data: tuple[Column, ...]) -> dict[str, Any]:
    """Columns of a text file's line (``value``): one ``content`` column, or the fields split by the delimiter."""
    from pyspark.sql import functions as F

    line = F.col("value")
    if not o.declares_columns:
        return {data[0].name: line}
    parts = F.split(line, re.escape(o.field_delimiter or "\u0001"), -1)
    times = _time_columns(o)
    out = {}
    for i, c in enumerate(data):
        raw = F.get(parts, i)
        if o.null_format is not None:
            raw = F.when(raw == F.lit(o.null_format), F.lit(None)).otherwise(raw)
        if c.type == "date" and o.date_format:
            value = F.try_to_timestamp(raw, F.lit(o.date_format)).cast("date")
        elif c.type.startswith("timestamp") and o.datetime_format:
            value = F.try_to_timestamp(raw, F.lit(o.datetime_format))
        elif c.name in times:
            value = _time(raw, o.time_format)
        elif c.type == "string":
            value = raw
        else:
            value = raw.try_cast(c.type)
        out[c.name] = value
    return out


def _time_columns(o: LocalFileSourceOptions) -> set[str]:
    """Declared columns of SeaTunnel type ``time`` (carried as text)."""
    s = o.schema_
    if s is None:
        return set()
    if s.fields is not None:
        return {str(n) for n, t in s.fields.items() if isinstance(t, str) and t.strip().lower() == "time"}
    return {c.name for c in s.columns or () if isinstance(c.type, str) and c.type.strip().lower() == "time"}


def _time(raw: Any, fmt: str) -> Any:
    """A time of day written as ``fmt``, as text in that form; null when it does not parse."""
    from pyspark.sql import functions as F

    return F.date_format(F.try_to_timestamp(raw.cast("string"), F.lit(fmt)), fmt)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


_GLOB_SPECIAL = re.compile(r"([\\\[\]{}*?])")


def _directory_and_filter(path: str, suffix: str | None) -> tuple[str, str | None]:
    """The directory Spark streams and its file-name glob. A single file is read
    as its directory filtered to that file's name (to nothing when ``suffix``
    excludes it: no file name holds a "/")."""
    if os.path.isfile(path):
        directory, name = os.path.split(os.path.abspath(path))
        glob = _GLOB_SPECIAL.sub(r"\\\1", name)
        return directory, glob if suffix is None or name.endswith(suffix) else glob + "/"
    return path, None if suffix is None else "*" + _GLOB_SPECIAL.sub(r"\\\1", suffix)


def _skip_lines(df: Any, skip: int, keep: list[str]) -> Any:
    """Drop the first ``skip`` lines of every text file; adds ``__pos``, the line's position in its file split.

    Lines reach a Python worker in file order, one split (``file_block_start``)
    after another; a split that starts a file (block start 0) loses its first
    ``skip`` lines. Positions are ``block start + line number in the split``:
    strictly increasing along a file and the same on every replay. ``keep``:
    (string) partition columns passed through.
    """
    from pyspark.sql import functions as F

    framed = df.select(
        "value",
        F.col("_metadata.file_path").alias("__path"),
        F.col("_metadata.file_block_start").alias("__block"),
        F.unix_millis(F.col("_metadata.file_modification_time")).alias("__mtime"),
        *[F.col(_q(k)) for k in keep],
    )
    extra = "".join(f", {_q(k)} string" for k in keep)
    return framed.mapInArrow(_LineSkipper(skip, keep), "value string, __mtime bigint, __pos bigint" + extra)


class _LineSkipper:
    """mapInArrow function (picklable): count lines per file split, drop a file's first lines."""

    def __init__(self, skip: int, keep: list[str] | None = None):
        self.skip = skip
        self.keep = list(keep or ())

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
                [batch.column("value"), batch.column("__mtime"), pa.array(pos), *[batch.column(k) for k in self.keep]],
                names=["value", "__mtime", "__pos", *self.keep],
            )
            yield out.filter(pa.array(keep))
