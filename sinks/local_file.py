"""LocalFile sink: write files to a local (or mounted) directory (SeaTunnel LocalFile sink).

``path`` may use the placeholders of :mod:`sinks._placeholders`; a multi-table
input needs ``${table_name}`` (or ``${table_full_name}``) so tables do not share
a directory. Files are written to a staging directory and published atomically
when the epoch commits (``commit_protocol = "staged-publish"``).

Run time, per epoch and table (directory ``<path>``, epoch ``E``, and a short
tag ``T`` of the sink's stable transaction id, so sinks of other jobs can share
a directory):

1. When the query starts, :meth:`LocalFile.open` reports the newest epoch
   with a marker ``<path>/_published/T-E.json`` per table; the runtime never
   hands the sink an epoch at or below it (a replay after a crash is skipped;
   a checkpoint behind the markers stops the run).
2. Spark writes the epoch's rows to ``<path>/_staging/T-E/``. A
   staging directory without its ``_MANIFEST.json`` is a half-written one from
   a crash: it is deleted and written again. The manifest, written last and
   atomically, lists every staged file with its final name
   ``part-E-NNNNN-T<ext>`` (``ext`` as Spark wrote it, e.g. ``.csv.gz``,
   ``.snappy.parquet``; Hive partition directories are kept).
3. Publish: each staged file is renamed (atomically, on the same file system)
   to its final name; a file whose final name exists was moved by an earlier
   attempt. The files and their directories are fsynced, then the marker is
   written (atomically, fsynced) and the staging directory removed. A crash
   during step 3 is completed by the replay.

Readers never see a partly written file; ``_staging`` and ``_published`` start
with "_" so Spark (and the LocalFile source) ignore them. An epoch with no rows
publishes no file. Row kinds are not written (as SeaTunnel's file sinks do):
every row, whatever its kind, becomes a line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sinks._paths import local_path
from sinks._placeholders import check_distinct_targets, check_template, render
from streaming_engine.errors import CommitError, SchemaError
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
    seatunnel_page = "connector-v2/sink/LocalFile.md"
    Options = LocalFileSinkOptions
    description = "Writes csv, json or parquet files, published atomically per micro-batch."
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

    # -- run time ------------------------------------------------------------
    def scans_input_once(self) -> bool:
        return True  # one write with an observed row count per table

    def target_for(self, table: TableSchema) -> str:
        return render(self.options.path, table)

    def open(self, ctx: Any, dataset: Dataset) -> dict[str, int]:
        """Per table, the newest epoch published by this sink (its markers).
        Staging left by a crash for an epoch at or below it is removed (that
        epoch is published, or will never be written again)."""
        out = {}
        for table in dataset.tables:
            tag = _tag(ctx.txn_app_id(table.table_id))
            root = _local_path(self.target_for(table))
            mark = max(_epochs(os.path.join(root, "_published"), tag, ".json"), default=-1)
            for epoch in _epochs(os.path.join(root, "_staging"), tag, ""):
                if epoch <= mark:
                    shutil.rmtree(os.path.join(root, "_staging", f"{tag}-{epoch:012d}"), ignore_errors=True)
            out[table.table_id] = mark
        return out

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        out = []
        for table in dataset.tables:
            df = frames.get(table.table_id)
            if df is None:
                continue
            out.append(self._commit_table(ctx, df, table))
        return out

    def _commit_table(self, ctx: Any, df: Any, table: TableSchema) -> Any:
        from streaming_engine.runtime.context import CommitRecord

        target = self.target_for(table)
        root = _local_path(target)
        tag = _tag(ctx.txn_app_id(table.table_id))
        name = f"{tag}-{ctx.batch_id:012d}"
        marker = os.path.join(root, "_published", f"{name}.json")
        staging = os.path.join(root, "_staging", name)
        manifest = os.path.join(staging, "_MANIFEST.json")
        if not os.path.exists(manifest):
            shutil.rmtree(staging, ignore_errors=True)  # none, or half-written by a crashed attempt
            rows = self._stage(df, table, staging)
            files = _final_names(staging, ctx.batch_id, tag) if rows else []
            _write_json(manifest, {"epoch": ctx.batch_id, "rows": rows, "files": files})
        with open(manifest, encoding="utf-8") as f:
            staged = json.load(f)
        directories = set()
        for src, dst in staged["files"]:
            src_path, dst_path = os.path.join(staging, src), os.path.join(root, dst)
            if os.path.exists(src_path):
                os.makedirs(os.path.dirname(dst_path), exist_ok=True)
                os.replace(src_path, dst_path)
            elif not os.path.exists(dst_path):
                raise CommitError(
                    "RUNTIME.FAILED",
                    {"detail": f"LocalFile: staged file {src_path} of epoch {ctx.batch_id} disappeared before it was published"},
                )
            _fsync(dst_path)
            directories.add(os.path.dirname(dst_path))
        for d in sorted(directories):
            _fsync(d)  # the renames themselves: durable before the marker says "published"
        published = {"epoch": ctx.batch_id, "rows": staged["rows"], "files": [d for _, d in staged["files"]], "sink": ctx.sink_uid}
        _write_json(marker, published)
        shutil.rmtree(staging, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(staging))  # only when no other epoch is staged
        except OSError:
            pass
        return CommitRecord(ctx.sink_uid, table.table_id, target, int(staged["rows"]))

    def _stage(self, df: Any, table: TableSchema, staging: str) -> int:
        """Write the rows to ``staging`` with Spark; the number of rows written."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        o = self.options
        columns = list(o.sink_columns or table.names)
        partitions = list(o.partition_by or ()) if o.have_partition else []
        columns += [c for c in partitions if c not in columns]
        obs = Observation()
        data = df.select(*[F.col("`" + c.replace("`", "``") + "`") for c in columns]).observe(obs, F.count(F.lit(1)).alias("rows"))
        w = data.write.format(o.file_format_type).mode("overwrite").option("compression", o.compress_codec)
        if o.file_format_type == "csv":
            w = w.option("sep", o.field_delimiter or ",").option("header", str(o.enable_header_write).lower())
            w = w.option("encoding", o.encoding)
        elif o.file_format_type == "json":
            w = w.option("encoding", o.encoding).option("ignoreNullFields", "false")
        if partitions:
            w = w.partitionBy(*partitions)
        w.save(staging)
        return int((obs.get or {}).get("rows") or 0)


def _incompatible(table: TableSchema, detail: str) -> SchemaError:
    return SchemaError("SCHEMA.INCOMPATIBLE", {"table": table.table_id, "detail": detail})


_SPARK_PART = re.compile(r"^part-\d+-[0-9a-fA-F-]{36}(?:_\d+)?[-.]c\d+(?P<ext>.*)$")


def _final_names(staging: str, epoch: int, tag: str) -> list[list[str]]:
    """(staged path, final path) of every data file Spark wrote, relative, in a deterministic order."""
    staged = []
    for root, dirs, files in os.walk(staging):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        rel = os.path.relpath(root, staging)
        for f in sorted(files):
            if not f.startswith((".", "_")):
                staged.append(os.path.normpath(os.path.join(rel, f)))
    out = []
    for i, src in enumerate(sorted(staged)):
        base = os.path.basename(src)
        m = _SPARK_PART.match(base)
        ext = m.group("ext") if m else base[base.find(".") :] if "." in base else ""
        out.append([src, os.path.join(os.path.dirname(src), f"part-{epoch:06d}-{i:05d}-{tag}{ext}")])
    return out


def _epochs(directory: str, tag: str, suffix: str) -> list[int]:
    """The epochs of ``<tag>-<epoch><suffix>`` entries in ``directory``."""
    pattern = re.compile(re.escape(tag) + r"-(\d{12})" + re.escape(suffix))
    found = os.listdir(directory) if os.path.isdir(directory) else []
    return [int(m.group(1)) for m in map(pattern.fullmatch, found) if m]


def _tag(app_id: str) -> str:
    return hashlib.sha1(app_id.encode()).hexdigest()[:10]


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed over it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync(os.path.dirname(path))


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
