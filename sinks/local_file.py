"""LocalFile sink: write files to a local (or mounted) directory (SeaTunnel LocalFile sink).

``path`` may use the placeholders of :mod:`sinks._placeholders`; a multi-table
input needs ``${table_name}`` (or ``${table_full_name}``) so tables do not share
a directory. Files are written to a staging directory and published atomically
when the epoch commits (``commit_protocol = "staged-publish"``; SeaTunnel's
``is_enable_transaction = true``, the only value accepted).

Run time, per epoch and table (directory ``<path>``, epoch ``E``, and a short
tag ``T`` of the sink's stable transaction id, so sinks of other jobs can share
a directory):

1. When the query starts, :meth:`LocalFile.open` reports the newest epoch
   with a marker ``<path>/_published/T-E.json`` per table; the runtime never
   hands the sink an epoch at or below it (a replay after a crash is skipped;
   a checkpoint behind the markers stops the run). A query starting from an
   empty checkpoint applies ``schema_save_mode`` and ``data_save_mode`` first.
2. Spark writes the epoch's rows to ``<path>/_staging/T-E.D/``, where ``D``
   is this driver's own id (two live drivers of the job, a paused one woken
   up beside its successor, never stage into one directory).
3. Claim: the marker ``<path>/_published/T-E.json``, listing every staged
   file with its final name (see "File names"; Hive partition directories are
   kept or renamed by partition_dir_expression), is created only if it does
   not exist (a complete file hard-linked to its name, fsynced): the one
   commit point of the epoch. A driver that finds it exists (another driver
   published the epoch) removes its own staging and skips the epoch: no epoch
   lands twice, whichever driver is first.
4. Publish: each staged file the marker lists is renamed (atomically, on the
   same file system) to its final name, the files and their directories
   fsynced, the staging directory removed. A crash after the claim is
   finished by the next commit of the epoch or the next query start
   (:func:`_recover`), which also removes staging of epochs that have a
   marker naming another directory.

Markers stay for the newest :data:`KEEP_MARKERS` epochs of a table: once the
older ones span that many epochs they are folded into ``<path>/_published/T-folded.json``
(the newest folded epoch; written before they are removed), which counts as
their markers: a driver claiming an epoch at or below it skips it, also one
that created the epoch's marker anew after the fold removed it (it looks
again after its claim). So ``_published`` holds at most twice that many
files whatever the job's age, and :meth:`LocalFile.open` lists no more.

Readers never see a partly written file; ``_staging`` and ``_published`` start
with "_" so Spark (and the LocalFile source) ignore them. An epoch with no rows
publishes no file, unless ``create_empty_file_when_no_data = true``: then one
empty file (a csv header, a parquet/orc footer) per epoch with no rows for the
table, and one at the end of a BATCH run that read nothing. Row kinds are not
written (as SeaTunnel's file sinks do): every row, whatever its kind, becomes a line.

Formats (``file_format_type``): csv (default), text, json, parquet, orc, xml;
excel, binary and the CDC envelopes canal_json / debezium_json / maxwell_json
are refused with the reason.

Options mapping:

- csv: ``field_delimiter`` (default ",") -> ``sep``; ``row_delimiter`` (default
  "\\n") -> ``lineSep``; ``enable_header_write`` -> ``header``;
  ``csv_string_quote_mode``: MINIMAL (default) quotes values holding the
  delimiter, a quote or a line break (and empty strings), ALL (``quoteAll``)
  quotes every field, numbers and nulls too; NONE is refused. Quotes in values
  are doubled (RFC 4180) and leading/trailing spaces kept.
- text: every written column as text (null: empty), joined by
  ``field_delimiter`` (default ``\\001``), one line per row ended by
  ``row_delimiter``; UTF-8 only and no header line (Spark's text writer).
- json: one object per line (nulls written), ``row_delimiter`` -> ``lineSep``.
- xml (Spark's xml writer): ``xml_root_tag`` (default RECORDS) -> ``rootTag``,
  ``xml_row_tag`` (default RECORD) -> ``rowTag``, ``xml_use_attr_format``
  (required for xml, as in SeaTunnel): true writes the fields as attributes of
  the row element, false as child elements; null fields are left out.
- parquet: ``parquet_avro_write_timestamp_as_int96`` (default false: INT64
  microseconds; true: INT96) -> ``spark.sql.parquet.outputTimestampType``.
- ``encoding`` (csv, json, xml); ``compress_codec``: csv/text/json/xml none,
  lzo (lzop, SeaTunnel's codec), gzip, bzip2, deflate, lz4, snappy; parquet
  none, snappy, gzip, lz4, zstd (lzo and brotli refused: no codec ships with
  Spark); orc none, snappy, zlib, lzo, lz4, zstd.
- ``batch_size`` (default 1 000 000) -> ``maxRecordsPerFile``: at most that many
  rows per file; ``single_file_mode = true``: one file per epoch (per table and
  partition directory; the epoch's rows are written by one task), batch_size
  not applied.
- ``have_partition`` / ``partition_by``: Hive-style directories
  (``partition_dir_expression``, default ``${k0}=${v0}/${k1}=${v1}/...``, may
  lay them out otherwise, see :mod:`sinks._local_file_names`);
  ``is_partition_field_write_in_file = true`` keeps the partition columns in
  the files too (default false: only in the directory names).
- ``sink_columns``: written columns, in this order.
- ``schema_save_mode`` (when a query starts from an empty checkpoint):
  CREATE_SCHEMA_WHEN_NOT_EXIST (default: the directory is created),
  RECREATE_SCHEMA (deleted and created again), ERROR_WHEN_SCHEMA_NOT_EXIST
  (the run stops when it does not exist), IGNORE (created with the first
  file). ``data_save_mode``: APPEND_DATA (default), DROP_DATA (everything in
  the directory is deleted), ERROR_WHEN_DATA_EXISTS (the run stops when the
  directory holds a file).
- Not offered, refused at plan time with the reason: ``tmp_path`` (staging
  stays in ``<path>/_staging``, on the target's file system, for the atomic
  rename), excel's ``max_rows_in_memory`` / ``sheet_max_rows`` /
  ``sheet_name``, ``parquet_avro_write_fixed_as_int96``,
  ``merge_update_event`` (false accepted), ``is_enable_transaction`` (true accepted).

File names: ``part-E-NNNNN-T<ext>`` (``ext`` as Spark wrote it, e.g. ``.csv.gz``,
``.snappy.parquet``), or with ``custom_filename = true`` the rendered
``file_name_expression`` (default ``${transactionId}``; the transaction id is
``T_<T>_<E>``) then ``_<n>`` (the file's number in its directory, left out in
single_file_mode) then ``ext``; ``filename_extension`` replaces ``ext``.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sinks._local_file_names import (
    check_file_name_expression, check_partition_dir_expression, hive_dir, render_file_name, render_partition_dir,
)
from sinks._paths import local_path
from sources._schema_options import file_format, one_of, spark_charset
from sinks._placeholders import check_distinct_targets, check_template, render
from streaming_engine.errors import CommitError, EngineError, SchemaError
from streaming_engine.runtime import faults
from streaming_engine.plugins.base import Sink, SinkOptions, missing_column, refused
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema

log = logging.getLogger("streaming_engine.commit")
# this driver's staging directories: two drivers of a job (a paused one woken up beside its successor)
# never stage an epoch into the same directory; the epoch's marker, created once, says whose files count
_DRIVER = uuid.uuid4().hex
KEEP_MARKERS = 1000  # markers of a table's newest epochs kept; older ones are folded (see the module's doc)

FORMATS = ("csv", "text", "json", "parquet", "orc", "xml")
EXCEL = "excel files: no Spark data source for Excel ships with Spark; write csv (or parquet) instead"
_REFUSED_FORMATS = {
    "excel": EXCEL,
    "binary": "binary (whole files, byte for byte) is not offered: the engine moves rows, not files; copy the files "
              "with a file tool",
    "canal_json": "CDC envelopes are not written to files; write json (every row, whatever its kind) or use the "
                  "Kafka sink's format = debezium_json",
}  # fmt: skip
_REFUSED_FORMATS["debezium_json"] = _REFUSED_FORMATS["maxwell_json"] = _REFUSED_FORMATS["canal_json"]
_LINE_CODECS = {"none", "lzo", "gzip", "bzip2", "deflate", "lz4", "snappy"}
_CODECS = {
    "parquet": {"none", "snappy", "gzip", "lz4", "zstd"},
    "orc": {"none", "snappy", "zlib", "lzo", "lz4", "zstd"},
    "json": _LINE_CODECS, "csv": _LINE_CODECS, "text": _LINE_CODECS, "xml": _LINE_CODECS,
}  # fmt: skip
_NO_CODEC = {
    ("parquet", "lzo"): "parquet's LZO codec is hadoop-lzo's (GPL), which does not ship with Spark; use snappy, "
                        "zstd, gzip or lz4",
    ("parquet", "brotli"): "no Brotli codec ships with Spark; use zstd, gzip, snappy or lz4",
}  # fmt: skip
LZOP_CODEC = "io.airlift.compress.lzo.LzopCodec"  # lzop files, as SeaTunnel writes them (aircompressor ships with Spark)
SCHEMA_SAVE_MODES = ("CREATE_SCHEMA_WHEN_NOT_EXIST", "RECREATE_SCHEMA", "ERROR_WHEN_SCHEMA_NOT_EXIST", "IGNORE")
DATA_SAVE_MODES = ("APPEND_DATA", "DROP_DATA", "ERROR_WHEN_DATA_EXISTS")
_FORMAT_ONLY = {  # option -> the formats it applies to
    "field_delimiter": ("csv", "text"), "row_delimiter": ("csv", "text", "json"),
    "enable_header_write": ("csv", "text"), "csv_string_quote_mode": ("csv",),
    "xml_root_tag": ("xml",), "xml_row_tag": ("xml",), "xml_use_attr_format": ("xml",),
    "parquet_avro_write_timestamp_as_int96": ("parquet",),
}  # fmt: skip


def _list(v: Any) -> Any:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


class LocalFileSinkOptions(SinkOptions):
    path: str = Field(min_length=1, description="Output directory; placeholders like ${table_name} allowed.")
    file_format_type: str = Field("csv", description="File format: csv (default), text, json, parquet, orc or xml.")
    field_delimiter: str | None = Field(
        None, min_length=1, description='csv and text: column separator (default "," for csv, "\\001" for text).'
    )
    row_delimiter: str = Field("\n", min_length=1, description='csv, text and json: line separator (default "\\n").')
    enable_header_write: bool = Field(False, description="csv only: write a header line with the column names.")
    csv_string_quote_mode: Literal["MINIMAL", "ALL", "NONE"] = Field(
        "MINIMAL", description="csv: MINIMAL (default) quotes what needs it, ALL quotes every field; NONE is refused."
    )
    sink_columns: list[str] | None = Field(None, description="Write only these columns, in this order.")
    have_partition: bool = Field(False, description="Write Hive-style partition directories (needs partition_by).")
    partition_by: list[str] | None = Field(None, description="Partition columns (with have_partition = true).")
    partition_dir_expression: str | None = Field(
        None, min_length=1,
        description="Partition directory layout with ${k0}, ${v0}, ...; default ${k0}=${v0}/${k1}=${v1}/...",
    )  # fmt: skip
    is_partition_field_write_in_file: bool = Field(
        False, description="Also write the partition columns into the files (default false: only in directory names)."
    )
    compress_codec: str = Field(
        "none", description="Compression: none, snappy, gzip, lz4, zstd (parquet, orc), zlib (orc), lzo, bzip2, deflate (text formats)."
    )
    encoding: str = Field("UTF-8", description="Character set of csv, json and xml files (text: UTF-8).")
    custom_filename: bool = Field(False, description="Name files by file_name_expression.")
    file_name_expression: str = Field(
        "${transactionId}", min_length=1,
        description="With custom_filename: the file name, with ${transactionId}, ${now}, ${uuid}.",
    )  # fmt: skip
    filename_time_format: str = Field(
        "yyyy.MM.dd", min_length=1, description="With custom_filename: the pattern of ${now} (Java DateTimeFormatter)."
    )
    filename_extension: str | None = Field(
        None, min_length=1, description='Extension of the files instead of the format\'s, e.g. ".dat".'
    )
    batch_size: int = Field(1_000_000, ge=1, description="At most this many rows per file (default 1000000).")
    single_file_mode: bool = Field(False, description="One file per epoch (and partition directory); batch_size not applied.")
    create_empty_file_when_no_data: bool = Field(
        False, description="Publish an empty file for an epoch (or a BATCH run) that wrote no row."
    )
    xml_root_tag: str = Field("RECORDS", min_length=1, description="xml: the root element's tag (default RECORDS).")
    xml_row_tag: str = Field("RECORD", min_length=1, description="xml: the row elements' tag (default RECORD).")
    xml_use_attr_format: bool | None = Field(
        None, description="xml (required): true writes fields as attributes, false as child elements."
    )
    parquet_avro_write_timestamp_as_int96: bool = Field(
        False, description="parquet: write timestamps as INT96 (default false: INT64 microseconds)."
    )
    schema_save_mode: str = Field(
        "CREATE_SCHEMA_WHEN_NOT_EXIST",
        description="On a fresh start: CREATE_SCHEMA_WHEN_NOT_EXIST, RECREATE_SCHEMA, ERROR_WHEN_SCHEMA_NOT_EXIST or IGNORE.",
    )
    data_save_mode: str = Field(
        "APPEND_DATA", description="On a fresh start: APPEND_DATA, DROP_DATA or ERROR_WHEN_DATA_EXISTS."
    )
    is_enable_transaction: refused(
        "files are always staged and published atomically per micro-batch (exactly once); writing in place "
        "(false) is not offered", accepts=(True,),
    ) = Field(None, description="Only true (the default) is supported.")
    tmp_path: refused(
        "files are staged in <path>/_staging, on the target's own file system, so the publishing rename is "
        "atomic; a separate staging directory is not offered (remove tmp_path)"
    ) = Field(None, description="Not supported: staging is <path>/_staging.")
    max_rows_in_memory: refused(EXCEL) = Field(None, description="excel files: not supported.")
    sheet_max_rows: refused(EXCEL) = Field(None, description="excel files: not supported.")
    sheet_name: refused(EXCEL) = Field(None, description="excel files: not supported.")
    parquet_avro_write_fixed_as_int96: refused(
        "Spark's parquet writer writes INT96 only from timestamps, not from 12-byte binary columns; use "
        "parquet_avro_write_timestamp_as_int96 = true for timestamps"
    ) = Field(None, description="Not supported.")
    merge_update_event: refused(
        "applies to the CDC envelopes canal_json, debezium_json and maxwell_json, which this sink does not write",
        accepts=(False,),
    ) = Field(None, description="Only false (the default) is supported.")

    _lists = field_validator("sink_columns", "partition_by", mode="before")(lambda cls, v: _list(v))

    @field_validator("file_format_type", "compress_codec", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("csv_string_quote_mode", "schema_save_mode", "data_save_mode", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v

    @field_validator("file_format_type")
    @classmethod
    def _format(cls, v: str) -> str:
        return file_format(v, FORMATS, _REFUSED_FORMATS)

    @field_validator("csv_string_quote_mode")
    @classmethod
    def _quote_mode(cls, v: str) -> str:
        if v == "NONE":
            raise ValueError(
                "csv_string_quote_mode NONE is not supported by this engine: Spark's csv writer always quotes a "
                "value holding the delimiter; use MINIMAL, or file_format_type = text for unquoted lines"
            )
        return v

    @field_validator("schema_save_mode")
    @classmethod
    def _schema_mode(cls, v: str) -> str:
        return one_of("schema_save_mode", v, SCHEMA_SAVE_MODES)

    @field_validator("data_save_mode")
    @classmethod
    def _data_mode(cls, v: str) -> str:
        return one_of("data_save_mode", v, DATA_SAVE_MODES)

    @field_validator("encoding")
    @classmethod
    def _encoding(cls, v: str) -> str:
        return spark_charset(v)

    @field_validator("filename_extension")
    @classmethod
    def _extension(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if "/" in v or "\\" in v:
            raise ValueError("filename_extension is the end of a file name; it cannot hold a path separator")
        return v if v.startswith(".") else "." + v

    @model_validator(mode="after")
    def _check(self) -> "LocalFileSinkOptions":
        check_template("path", self.path)
        fmt = self.file_format_type
        for key, formats in _FORMAT_ONLY.items():
            if fmt not in formats and key in self.model_fields_set:
                raise ValueError(f"{key} only applies to file_format_type = {' or '.join(formats)}")
        if (fmt, self.compress_codec) in _NO_CODEC:
            raise ValueError(f"compress_codec {self.compress_codec} is not available for {fmt}: {_NO_CODEC[(fmt, self.compress_codec)]}")
        if self.compress_codec not in _CODECS[fmt]:
            raise ValueError(f"compress_codec {self.compress_codec!r} is not available for {fmt}; use one of {', '.join(sorted(_CODECS[fmt]))}")
        if fmt == "text":
            if self.enable_header_write:
                raise ValueError("enable_header_write: text files get no header line (Spark's text writer writes "
                                 "none); use file_format_type = csv with field_delimiter for a header")  # fmt: skip
            if self.encoding.lower() != "utf-8":
                raise ValueError(f"encoding {self.encoding}: text files are written as UTF-8 (Spark's text writer "
                                 "has no character set); use file_format_type = csv with field_delimiter")  # fmt: skip
        if fmt == "xml" and self.xml_use_attr_format is None:
            raise ValueError("file_format_type = xml needs xml_use_attr_format: true writes the fields as attributes "
                             "of the row element, false as child elements")  # fmt: skip
        if self.have_partition and not self.partition_by:
            raise ValueError("have_partition = true needs partition_by = [columns]")
        if self.partition_by and not self.have_partition:
            raise ValueError("partition_by is only used with have_partition = true; set it")
        for key, needs in (("partition_dir_expression", "have_partition"), ("is_partition_field_write_in_file", "have_partition"),
                           ("file_name_expression", "custom_filename"), ("filename_time_format", "custom_filename")):
            if key in self.model_fields_set and not getattr(self, needs):
                raise ValueError(f"{key} is only used with {needs} = true; set it")
        if self.partition_dir_expression is not None:
            check_partition_dir_expression(self.partition_dir_expression, len(self.partition_by or ()))
        if self.custom_filename:
            check_file_name_expression(self.file_name_expression, self.filename_time_format)
            if self.single_file_mode and self.partition_dir_expression is not None:
                unused = [f"${{v{i}}}" for i in range(len(self.partition_by or ()))
                          if f"${{v{i}}}" not in self.partition_dir_expression]  # fmt: skip
                if unused:
                    raise ValueError(
                        f"single_file_mode with custom_filename names one file per directory, but "
                        f"partition_dir_expression leaves out {', '.join(unused)}: files of several partitions "
                        "would share a directory and a name"
                    )
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
    seatunnel_page = "connector-v2/sink/LocalFile.md"
    seatunnel_defaults = {
        "field_delimiter": "unset: \\001 for text, ',' for csv, as the page says",
        "partition_dir_expression": "unset: ${k0}=${v0}/${k1}=${v1}/... (Hive's directories), the page's template",
    }
    Options = LocalFileSinkOptions
    description = "Writes csv, text, json, parquet, orc or xml files, published atomically per micro-batch."
    commit_protocol = "staged-publish"

    def reads_metadata(self) -> frozenset[str]:
        return frozenset()  # every row becomes a line, whatever its kind, in the batch's order

    options: LocalFileSinkOptions

    def check_input(self, dataset: Dataset) -> None:
        o = self.options
        targets = []
        for table in dataset.tables:
            for col in (o.sink_columns or []) + (o.partition_by or []):
                if col not in table.names:
                    raise missing_column(table, col)
            data_cols = [table.column(c) for c in self._data_columns(table)]
            if not data_cols:
                raise _incompatible(table, "every written column is a partition column; keep at least one data column")
            fmt = o.file_format_type
            if fmt in ("csv", "text") or (fmt == "xml" and o.xml_use_attr_format):
                where = "an xml attribute" if fmt == "xml" else f"{fmt}"
                for c in data_cols:
                    if c.type.startswith(("array<", "map<", "struct<")):
                        raise _incompatible(table, f"{where} cannot store column {c.name!r} of type {c.type}; use json or parquet")
            targets.append((table.table_id, render(o.path, table)))
        check_distinct_targets(targets, "path")

    def _data_columns(self, table: TableSchema) -> list[str]:
        """The columns written into the files, in order."""
        o = self.options
        columns = list(o.sink_columns or table.names)
        if o.have_partition and not o.is_partition_field_write_in_file:
            columns = [c for c in columns if c not in (o.partition_by or ())]
        return columns

    def targets(self, dataset: Dataset) -> list[str]:
        o = self.options
        return [f"{t.table_id} -> {render(o.path, t)} ({o.file_format_type})" for t in dataset.tables]

    def describe(self) -> str:
        return f"LocalFile ({self.options.file_format_type})"

    # -- run time ------------------------------------------------------------
    def scans_input_once(self) -> bool:
        return True  # one write with an observed row count per table

    def target_for(self, table: TableSchema) -> str:
        return render(self.options.path, table)

    def open(self, ctx: Any, dataset: Dataset) -> dict[str, int]:
        """Per table, the newest epoch published by this sink (its markers),
        after finishing what a crash left (:func:`_recover`). A query starting
        from an empty checkpoint (``ctx.batch_id`` -1) applies the save modes first."""
        out = {}
        for table in dataset.tables:
            tag = _tag(ctx.txn_app_id(table.table_id))
            root = _local_path(self.target_for(table))
            if ctx.batch_id < 0:
                self._save_modes(root)
            _recover(root, tag)
            out[table.table_id] = max(_epochs(os.path.join(root, "_published"), tag, ".json"), default=_folded(root, tag))
        return out

    def _save_modes(self, root: str) -> None:
        """SeaTunnel's save modes, when the job starts (not when a query resumes)."""
        o = self.options
        if o.schema_save_mode == "RECREATE_SCHEMA":
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(root, exist_ok=True)
        elif o.schema_save_mode == "CREATE_SCHEMA_WHEN_NOT_EXIST":
            os.makedirs(root, exist_ok=True)
        elif o.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not os.path.isdir(root):
            raise EngineError("RUNTIME.FAILED", {"detail": f"LocalFile: directory {root} does not exist "
                                                           "(schema_save_mode = ERROR_WHEN_SCHEMA_NOT_EXIST)"})  # fmt: skip
        if o.data_save_mode == "DROP_DATA" and os.path.isdir(root):
            for entry in os.listdir(root):
                full = os.path.join(root, entry)
                if os.path.isdir(full) and not os.path.islink(full):
                    shutil.rmtree(full)
                else:
                    os.remove(full)
        elif o.data_save_mode == "ERROR_WHEN_DATA_EXISTS":
            found = next((os.path.join(r, f) for r, _, fs in os.walk(root) for f in fs if not f.startswith(".")), None)
            if found is not None:
                raise EngineError("RUNTIME.FAILED", {"detail": f"LocalFile: directory {root} holds data ({found}) "
                                                               "(data_save_mode = ERROR_WHEN_DATA_EXISTS)"})  # fmt: skip

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        out = []
        for table in dataset.tables:
            df = frames.get(table.table_id)
            if df is None:
                continue
            out.append(self._commit_table(ctx, df, table))
        return out

    def finish(self, ctx: Any, dataset: Dataset) -> None:
        """A BATCH run that committed no epoch: with create_empty_file_when_no_data,
        one empty file per table (SeaTunnel: a job that read nothing still writes one)."""
        o = self.options
        if not o.create_empty_file_when_no_data or ctx.batch_id >= 0:
            return
        for table in dataset.tables:
            root = _local_path(self.target_for(table))
            tag = _tag(ctx.txn_app_id(table.table_id))
            staging = os.path.join(root, "_staging", f"{tag}-empty")
            shutil.rmtree(staging, ignore_errors=True)
            self._stage_empty(ctx.spark, table, staging)
            stamp = datetime.now().strftime("%Y%m%d%H%M%S%f")
            for src, dst in self._final_names(staging, f"empty-{stamp}", tag, f"T_{tag}_empty_{stamp}"):
                os.makedirs(os.path.dirname(os.path.join(root, dst)), exist_ok=True)
                os.replace(os.path.join(staging, src), os.path.join(root, dst))
                _fsync(os.path.join(root, dst))
            _fsync(root)
            shutil.rmtree(staging, ignore_errors=True)

    def _commit_table(self, ctx: Any, df: Any, table: TableSchema) -> Any:
        from streaming_engine.runtime.context import CommitRecord

        o = self.options
        target = self.target_for(table)
        root = _local_path(target)
        tag = _tag(ctx.txn_app_id(table.table_id))
        name = f"{tag}-{ctx.batch_id:012d}"
        marker = os.path.join(root, "_published", f"{name}.json")
        if ctx.batch_id <= _folded(root, tag):  # published long ago (a driver that far behind is a zombie)
            return CommitRecord(ctx.sink_uid, table.table_id, target, 0, skipped=True)
        if os.path.exists(marker):  # published already (another driver of the job, or an attempt before a crash)
            claim = _read_json(marker)
            _publish(root, claim)  # what its publisher may not have moved yet
            return CommitRecord(ctx.sink_uid, table.table_id, target, int(claim["rows"]), skipped=True)
        staging = os.path.join(root, "_staging", f"{name}.{_DRIVER}")
        shutil.rmtree(staging, ignore_errors=True)  # this driver's own, from an attempt of the epoch that failed
        rows = self._stage(df, table, staging)
        if rows == 0 and o.create_empty_file_when_no_data and not _staged_files(staging):
            self._stage_empty(df.sparkSession, table, staging)
        keep = rows or o.create_empty_file_when_no_data
        staged = self._final_names(staging, f"{ctx.batch_id:06d}", tag, f"T_{tag}_{ctx.batch_id:06d}") if keep else []
        faults.maybe_crash("sink_files_written", ctx.batch_id, ctx.sink_uid)
        claim = {"epoch": ctx.batch_id, "rows": rows, "files": [d for _, d in staged], "sink": ctx.sink_uid,
                 "staging": os.path.basename(staging), "staged": staged}
        if not _create_once(marker, claim):  # another driver published the epoch first: its files count
            _drop_staging(staging)
            log.warning("LocalFile: epoch published by another driver of the job: skipped",
                        extra={"table": table.table_id, "epoch": ctx.batch_id, "path": root})
            return CommitRecord(ctx.sink_uid, table.table_id, target, int(_read_json(marker)["rows"]), skipped=True)
        if ctx.batch_id <= _folded(root, tag):  # its marker was folded after this driver looked: made anew, undone
            os.remove(marker)
            _drop_staging(staging)
            return CommitRecord(ctx.sink_uid, table.table_id, target, 0, skipped=True)
        _publish(root, claim)
        _fold(root, tag, ctx.batch_id)
        return CommitRecord(ctx.sink_uid, table.table_id, target, int(rows))

    # -- staging -------------------------------------------------------------
    def _partition_columns(self) -> list[str]:
        """What Spark partitions by: the partition columns, or copies of them
        (``__pN``) when they are written into the files too."""
        o = self.options
        if not o.have_partition:
            return []
        if o.is_partition_field_write_in_file:
            return [f"__p{i}" for i in range(len(o.partition_by or ()))]
        return list(o.partition_by or ())

    def _stage(self, df: Any, table: TableSchema, staging: str) -> int:
        """Write the rows to ``staging`` with Spark; the number of rows written."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        o = self.options
        obs = Observation()
        data = self._frame(df, table).observe(obs, F.count(F.lit(1)).alias("rows"))
        if o.single_file_mode:
            data = data.coalesce(1)
        w = self._writer(data)
        if not o.single_file_mode:
            w = w.option("maxRecordsPerFile", str(o.batch_size))
        partitions = self._partition_columns()
        if partitions:
            w = w.partitionBy(*partitions)
        w.save(staging)
        return int((obs.get or {}).get("rows") or 0)

    def _stage_empty(self, spark: Any, table: TableSchema, staging: str) -> None:
        """One empty file (a header, a footer) at the top of ``staging``."""
        from streaming_engine.runtime import rows as envelope

        empty = spark.createDataFrame([], envelope.table_struct(table))
        frame = self._frame(empty, table)
        frame = frame.select(*[c for c in frame.columns if c not in self._partition_columns()])
        self._writer(frame.coalesce(1)).save(staging)

    def _frame(self, df: Any, table: TableSchema) -> Any:
        """The columns Spark writes: the file's columns (one ``value`` line for
        text, ``_``-prefixed attributes for xml) then the partition columns."""
        from pyspark.sql import functions as F

        o = self.options
        written = self._data_columns(table)
        cols = [F.col(_q(c)) for c in written]
        if o.file_format_type == "text":
            text = [F.coalesce(F.col(_q(c)).cast("string"), F.lit("")) for c in written]
            cols = [F.concat_ws(o.field_delimiter or "\u0001", *text).alias("value")]
        elif o.file_format_type == "xml" and o.xml_use_attr_format:
            cols = [F.col(_q(c)).alias(f"_{c}") for c in written]
        partitions = list(o.partition_by or ()) if o.have_partition else []
        if o.is_partition_field_write_in_file:
            cols += [F.col(_q(p)).alias(f"__p{i}") for i, p in enumerate(partitions)]
        else:
            cols += [F.col(_q(p)) for p in partitions]
        return df.select(*cols)

    def _writer(self, data: Any) -> Any:
        o = self.options
        fmt = o.file_format_type
        codec = LZOP_CODEC if o.compress_codec == "lzo" and fmt not in ("orc", "parquet") else o.compress_codec
        w = data.write.format(fmt).mode("overwrite").option("compression", codec)
        if fmt == "csv":
            w = w.option("sep", o.field_delimiter or ",").option("header", str(o.enable_header_write).lower())
            w = w.option("encoding", o.encoding).option("lineSep", o.row_delimiter).option("escape", '"')
            w = w.option("ignoreLeadingWhiteSpace", "false").option("ignoreTrailingWhiteSpace", "false")
            w = w.option("quoteAll", str(o.csv_string_quote_mode == "ALL").lower())
        elif fmt == "text":
            w = w.option("lineSep", o.row_delimiter)
        elif fmt == "json":
            w = w.option("encoding", o.encoding).option("ignoreNullFields", "false").option("lineSep", o.row_delimiter)
        elif fmt == "xml":
            w = w.option("rootTag", o.xml_root_tag).option("rowTag", o.xml_row_tag).option("encoding", o.encoding)
        elif fmt == "parquet":
            kind = "INT96" if o.parquet_avro_write_timestamp_as_int96 else "TIMESTAMP_MICROS"
            w = w.option("spark.sql.parquet.outputTimestampType", kind)
        return w

    # -- file names ----------------------------------------------------------
    def _final_names(self, staging: str, epoch: str, tag: str, transaction: str) -> list[list[str]]:
        """(staged path, final path) of every data file Spark wrote, relative, in a deterministic order."""
        o = self.options
        now = datetime.now()
        out: list[list[str]] = []
        numbers: dict[str, int] = {}
        for i, src in enumerate(_staged_files(staging)):
            base = os.path.basename(src)
            m = _SPARK_PART.match(base)
            ext = o.filename_extension or (m.group("ext") if m else base[base.find(".") :] if "." in base else "")
            directory = self._partition_dir(os.path.dirname(src))
            if o.custom_filename:
                n = numbers[directory] = numbers.get(directory, -1) + 1
                stem = render_file_name(o.file_name_expression, o.filename_time_format, transaction, now, uuid.uuid4().hex)
                name = (stem if o.single_file_mode else f"{stem}_{n}") + ext
            else:
                name = f"part-{epoch}-{i:05d}-{tag}{ext}"
            out.append([src, os.path.join(directory, name) if directory else name])
        finals = [d for _, d in out]
        if len(set(finals)) != len(finals):
            raise CommitError("RUNTIME.FAILED", {"detail": f"LocalFile: two files of epoch {epoch} would get the same "
                                                           f"name ({sorted(finals)}); check file_name_expression"})  # fmt: skip
        return out

    def _partition_dir(self, staged: str) -> str:
        """The final directory of a staged Spark partition directory (``k=v/...``)."""
        o = self.options
        if staged in ("", "."):
            return ""
        if o.partition_dir_expression is None and not o.is_partition_field_write_in_file:
            return staged  # Spark's Hive layout is SeaTunnel's default
        values = [part.partition("=")[2] for part in staged.split(os.sep)]
        keys = list(o.partition_by or ())
        if o.partition_dir_expression is None:
            return hive_dir(keys, values)
        try:
            return render_partition_dir(o.partition_dir_expression, keys, values)
        except ValueError as e:
            raise CommitError("RUNTIME.FAILED", {"detail": f"LocalFile: {e}"}) from None


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _staged_files(staging: str) -> list[str]:
    """The data files Spark wrote under ``staging`` (relative, sorted): not its
    bookkeeping ("_SUCCESS", ".crc", "_MANIFEST.json"); partition directories
    (``k=v``, also ``__p0=v``) are walked."""
    staged = []
    for root, dirs, files in os.walk(staging):
        dirs[:] = sorted(d for d in dirs if "=" in d or not d.startswith((".", "_")))
        rel = os.path.relpath(root, staging)
        for f in sorted(files):
            if not f.startswith((".", "_")):
                staged.append(os.path.normpath(os.path.join(rel, f)))
    return sorted(staged)


def _incompatible(table: TableSchema, detail: str) -> SchemaError:
    return SchemaError("SCHEMA.INCOMPATIBLE", {"table": table.table_id, "detail": detail})


_SPARK_PART = re.compile(r"^part-\d+-[0-9a-fA-F-]{36}(?:_\d+)?[-.]c\d+(?P<ext>.*)$")


def _read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _create_once(path: str, data: dict[str, Any]) -> bool:
    """Create ``path`` holding ``data`` unless it exists, atomically (a complete temporary file hard-linked
    to its name: of two drivers, one creates it); False when it existed."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as e:  # a mount without hard links: no atomic create-once, so no exactly-once claim
        raise CommitError("RUNTIME.FAILED", {"detail": (
            f"LocalFile: cannot claim {path}: the file system of {os.path.dirname(path)} refused a hard link "
            f"({e.strerror}); the sink publishes an epoch exactly once only where hard links work (a local disk, "
            "NFS, HDFS mounts do); write to such a directory")}) from None
    finally:
        os.remove(tmp)
    _fsync(os.path.dirname(path))
    return True


def _publish(root: str, claim: dict[str, Any]) -> None:
    """Move an epoch's staged files to their final names as its marker (the claim) lists them, then
    remove its staging directory. Idempotent: a file already moved is skipped, so a crash at any
    point is finished by the next commit or query start."""
    if "staging" not in claim:
        return  # a marker of the earlier protocol: written after its moves
    staging = os.path.join(root, "_staging", claim["staging"])
    if not os.path.isdir(staging):
        return  # published
    directories = set()
    for src, dst in claim["staged"]:
        src_path, dst_path = os.path.join(staging, src), os.path.join(root, dst)
        if os.path.exists(src_path):
            os.makedirs(os.path.dirname(dst_path), exist_ok=True)
            os.replace(src_path, dst_path)
        elif not os.path.exists(dst_path):
            raise CommitError("RUNTIME.FAILED", {"detail": f"LocalFile: staged file {src_path} of epoch "
                                                           f"{claim['epoch']} disappeared before it was published"})
        _fsync(dst_path)
        directories.add(os.path.dirname(dst_path))
    for d in sorted(directories):
        _fsync(d)  # the renames: durable before the staging directory goes
    _drop_staging(staging)


def _drop_staging(staging: str) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    try:
        os.rmdir(os.path.dirname(staging))  # only when no other epoch is staged
    except OSError:
        pass


_STAGED = re.compile(r"(?P<epoch>\d{12})(?:\.(?P<attempt>[0-9a-f]{32}))?")


def _recover(root: str, tag: str) -> None:
    """What a crashed or overtaken driver left in ``_staging``: an epoch whose marker names this
    directory is published (a crash between the claim and the moves); any other directory of an epoch
    that has a marker lost the race or is left from a crash, and is removed. A directory of an epoch
    without a marker may be a live driver's staging: kept (removed once that epoch is published).
    A directory of the earlier protocol (no attempt suffix, a manifest of its moves) is claimed and
    published the same way."""
    directory = os.path.join(root, "_staging")
    if not os.path.isdir(directory):
        return
    for entry in sorted(os.listdir(directory)):
        if not entry.startswith(f"{tag}-"):
            continue
        m = _STAGED.fullmatch(entry[len(tag) + 1:])
        if m is None:
            continue
        epoch = int(m.group("epoch"))
        if epoch <= _folded(root, tag):  # published long ago: a zombie's leftover
            _drop_staging(os.path.join(directory, entry))
            continue
        marker = os.path.join(root, "_published", f"{tag}-{epoch:012d}.json")
        manifest = os.path.join(directory, entry, "_MANIFEST.json")
        if m.group("attempt") is None and not os.path.exists(marker) and os.path.exists(manifest):
            staged = _read_json(manifest)
            _create_once(marker, {"epoch": epoch, "rows": staged["rows"], "files": [d for _, d in staged["files"]],
                                  "staging": entry, "staged": staged["files"]})
        if os.path.exists(marker) and _read_json(marker).get("staging") == entry:
            _publish(root, _read_json(marker))
        elif os.path.exists(marker):
            _drop_staging(os.path.join(directory, entry))


def _folded(root: str, tag: str) -> int:
    """The newest epoch whose marker was folded (-1: none)."""
    path = os.path.join(root, "_published", f"{tag}-folded.json")
    return int(_read_json(path)["epoch"]) if os.path.exists(path) else -1


def _fold(root: str, tag: str, epoch: int) -> None:
    """Once the markers older than the newest :data:`KEEP_MARKERS` epochs span that many epochs again,
    fold them (those at or below ``epoch - KEEP_MARKERS``): the folded epoch is written first
    (atomically, never lower than before), then the markers it covers are removed. (By distance, not
    at multiples of KEEP_MARKERS: a table without rows in those epochs has no commit there.)"""
    upto = epoch - KEEP_MARKERS
    if upto < _folded(root, tag) + KEEP_MARKERS:
        return
    directory = os.path.join(root, "_published")
    path = os.path.join(directory, f"{tag}-folded.json")
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"epoch": upto}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync(directory)
    for e in _epochs(directory, tag, ".json"):
        if e <= upto:
            os.remove(os.path.join(directory, f"{tag}-{e:012d}.json"))


def _epochs(directory: str, tag: str, suffix: str) -> list[int]:
    """The epochs of ``<tag>-<epoch><suffix>`` entries in ``directory``."""
    pattern = re.compile(re.escape(tag) + r"-(\d{12})" + re.escape(suffix))
    found = os.listdir(directory) if os.path.isdir(directory) else []
    return [int(m.group(1)) for m in map(pattern.fullmatch, found) if m]


def _tag(app_id: str) -> str:
    return hashlib.sha1(app_id.encode()).hexdigest()[:10]


def _fsync(path: str) -> None:
    """Flush a file, or a directory's entries (renames), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _local_path(location: str) -> str:
    path = local_path(location)
    if path is None:
        raise CommitError("RUNTIME.FAILED", {"detail": f"LocalFile writes local paths only, got {location!r}"})
    return path
