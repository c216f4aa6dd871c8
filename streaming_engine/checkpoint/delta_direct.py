"""Direct Delta appends: the engine writes the data files, Delta's own
transaction commits them.

The DataFrameWriter costs one Spark job per table, and with a ``txnAppId`` a
full state reconstruction of the table per commit (Delta 4.4's ``txnVersion``:
about 0.8 s per table per epoch here). For tables on a file system the Python
workers can write (the ``file`` scheme), this module does the same two-phase
append with less:

1. **write** (:func:`write_files`): ONE Spark job writes the Parquet files of
   every table of the epoch into the tables' directories (a ``mapInArrow`` over
   the union of the per-table frames, in a common column layout). Until a
   commit names them, these files are invisible to readers, as with Delta's own
   writer (a failed epoch leaves files for ``VACUUM``).
2. **commit** (:func:`commit_files`): per table, one Delta transaction through
   Delta's JVM API (``OptimisticTransaction.commit``) with the ``add`` actions
   and the ``txn`` action (``appId`` = the sink's stable transaction id,
   ``version`` = the epoch), exactly what the DataFrameWriter's
   ``txnAppId``/``txnVersion`` options record. Delta's conflict detection,
   protocol checks and log format are its own.

Only an epoch that Spark replays after a crash can already be in the table, so
only then is the ``txn`` looked up (``check_txn``) and the epoch skipped if it
is there; other epochs skip the expensive lookup.

A table qualifies (:func:`plain`) when it does not exist yet, or its metadata
is what this module creates: the same columns and types, no partitions, no
constraints, generated, identity or default columns, no column mapping or row
tracking. Anything else goes through the DataFrameWriter, which enforces all
of it.
"""

from __future__ import annotations

import json
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from streaming_engine.runtime.session import jvm_class, jvm_constant

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType
    from streaming_engine.runtime.rows import Split

# table properties that change nothing about how appended files must look
_SAFE_PROPERTIES = {
    "delta.appendOnly",
    "delta.checkpointInterval",
    "delta.logRetentionDuration",
    "delta.deletedFileRetentionDuration",
    "delta.enableChangeDataFeed",
    "delta.enableDeletionVectors",
    "delta.checkpoint.writeStatsAsJson",
    "delta.checkpoint.writeStatsAsStruct",
}
# writer features whose data-level rules Delta's writer (not its commit) enforces
_WRITER_ENFORCED = {
    "invariants", "checkConstraints", "generatedColumns", "identityColumns", "allowColumnDefaults",
    "columnMapping", "rowTracking", "clustering", "icebergCompatV1", "icebergCompatV2", "icebergCompatV3",
    "variantType", "variantType-preview",
}
_DEFAULTS = "spark.databricks.delta.properties.defaults."
# Snappy, as Spark writes. A column's dictionary stops at 64 KiB (pyarrow's
# default 1 MiB): a high-cardinality column gives up on it early (building it
# cost half of the write, 1M rows: 0.45 s vs 0.25 s) while a low-cardinality
# one stays dictionary-encoded.
PARQUET_OPTIONS = {"compression": "snappy", "dictionary_pagesize_limit": 64 * 1024}
_FILE_COLUMNS = "table string, name string, size bigint, rows bigint, modified bigint"


@dataclass(frozen=True)
class DataFile:
    name: str  # relative to the table directory
    size: int
    rows: int
    modified_ms: int


# ---------------------------------------------------------------------------
# where and whether


def local_directory(spark: "SparkSession", location: str) -> str | None:
    """The local path of a table location on the ``file`` scheme, else None."""
    import os
    import re

    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", location)
    if scheme and scheme.group(1).lower() != "file":
        return None  # s3a:, hdfs:, abfss: ...: not a local directory
    path = location[len("file:"):] if location.startswith("file:") else None
    if path is None and location.startswith("/") and _default_scheme(spark) == "file":
        path = location
    if path is not None and path.startswith("/") and not path.startswith("//"):
        return os.path.normpath(path)  # absolute: what Hadoop's Path would make of it, without py4j
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if fs.getScheme() != "file":
        return None
    return str(fs.makeQualified(path).toUri().getPath())


def _default_scheme(spark: "SparkSession") -> str:
    """The scheme of the session's default file system (``fs.defaultFS``)."""
    found = _DEFAULT_SCHEME.get(spark)
    if found is None:
        default = spark._jsc.hadoopConfiguration().get("fs.defaultFS") or "file:///"  # type: ignore[attr-defined]
        found = _DEFAULT_SCHEME[spark] = default.split(":", 1)[0].lower()
    return found


_DEFAULT_SCHEME: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def nullable(schema: "StructType") -> "StructType":
    """Delta's schema for a new table: every field nullable, at every depth."""
    from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

    def conv(t: DataType) -> DataType:
        if isinstance(t, StructType):
            return StructType([StructField(f.name, conv(f.dataType), True) for f in t.fields])
        if isinstance(t, ArrayType):
            return ArrayType(conv(t.elementType), True)
        if isinstance(t, MapType):
            return MapType(conv(t.keyType), conv(t.valueType), True)
        return t

    out = conv(schema)
    assert isinstance(out, StructType)
    return out


def _creates_plain_tables(spark: "SparkSession") -> bool:
    """No session default table properties: a table we create has none either."""
    found = _PLAIN_DEFAULTS.get(spark)
    if found is None:
        # the keys as ONE string: pyspark's conf.getAll costs a round trip per setting
        keys = spark._jsparkSession.conf().getAll().keys().mkString("\n")  # type: ignore[attr-defined]
        found = _PLAIN_DEFAULTS[spark] = not any(k.startswith(_DEFAULTS) for k in keys.split("\n"))
    return found


_PLAIN_DEFAULTS: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def _metadata(snapshot_or_txn: Any) -> dict:
    return json.loads(snapshot_or_txn.metadata().json())["metaData"]


def _protocol_features(snapshot_or_txn: Any) -> set[str]:
    proto = json.loads(snapshot_or_txn.protocol().json())["protocol"]
    return set(proto.get("writerFeatures") or ())


def plain(md: dict, features: set[str], schema: "StructType") -> bool:
    """Does an existing table's metadata take files of ``schema`` as they are?"""
    if md.get("partitionColumns"):
        return False
    if any(k not in _SAFE_PROPERTIES for k in (md.get("configuration") or {})):
        return False
    if features & _WRITER_ENFORCED:
        return False
    return json.loads(md["schemaString"]) == json.loads(nullable(schema).json())


def qualifies(spark: "SparkSession", location: str) -> bool:
    """May :func:`commit_files` be tried for this location? (A local file system,
    and tables we create get no session default properties.) Whether an existing
    table is :func:`plain` is checked by the commit itself, on the snapshot it
    commits against; a table that is not makes it raise :class:`NotPlain`."""
    return local_directory(spark, location) is not None and _creates_plain_tables(spark)


# ---------------------------------------------------------------------------
# phase 1: write the files of every table in one Spark job


def write_files(
    spark: "SparkSession", frames: dict[str, "DataFrame"], directories: dict[str, str], epoch: int
) -> dict[str, list[DataFile]]:
    """Write each frame (data columns only) as Parquet files into its directory, in ONE job.

    ONE table is written by Spark's own Parquet writer (no Python worker: 1M
    rows took 1.1 s instead of 2.0 s). Several are brought into one column
    layout (slots: per data type, as many columns as the widest table has of
    it) and unioned, and pyarrow writes them; each task writes one file per
    table it meets.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from streaming_engine.runtime.rows import assign_slots

    if len(frames) == 1:
        [(key, frame)] = frames.items()
        return {key: _write_native(frame, directories[key], epoch)}
    keys = list(frames)
    fields = {key: frames[key].schema.fields for key in keys}
    # slots keyed by the Spark type's text (the types themselves are not hashable)
    slot_types, slot_of = assign_slots({key: [f.dataType.simpleString() for f in fields[key]] for key in keys})
    spark_type = {f.dataType.simpleString(): f.dataType for key in keys for f in fields[key]}
    slots = [(f"_{i}", spark_type[t]) for i, t in enumerate(slot_types)]
    layout: dict[str, tuple[str, list[str], list[str], Any]] = {}
    frames_in_layout = []
    for key in keys:
        mine = {slots[i][0]: f.name for i, f in zip(slot_of[key], fields[key])}
        arrow = to_arrow_schema(nullable(frames[key].schema), timezone="UTC")
        layout[key] = (directories[key], list(mine), list(mine.values()), arrow)
        frames_in_layout.append(
            frames[key].select(
                F.lit(key).alias("__key"),
                *[
                    (F.col("`" + mine[s].replace("`", "``") + "`") if s in mine else F.lit(None).cast(t)).alias(s)
                    for s, t in slots
                ],
            )
        )
    union = frames_in_layout[0]
    for df in frames_in_layout[1:]:
        union = union.union(df)
    if len(frames_in_layout) > 1:
        # the per-table frames read disjoint parts of one batch: a few tasks,
        # not one per table and batch partition
        union = union.coalesce(max(1, spark.sparkContext.defaultParallelism))
    return _write(union, layout, epoch)


def write_split_files(
    spark: "SparkSession", splits: dict[str, tuple[str, "Split"]], epoch: int
) -> dict[str, list[DataFile]]:
    """Like :func:`write_files`, for tables that are unchanged splits of ONE
    multi-table batch (``rows.split_of``; table id -> (directory, split)): one
    pass over the batch in its slot layout, no per-table filter and union."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from streaming_engine.runtime.rows import TABLE, table_struct

    envelopes = {id(sp.envelope): sp.envelope for _, sp in splits.values()}
    assert len(envelopes) == 1, "splits of one batch"
    envelope = next(iter(envelopes.values()))
    used = {slot for _, sp in splits.values() for slot in sp.slots}
    slots = [c for c in envelope.columns if c in used]
    layout = {
        tid: (directory, list(sp.slots), list(sp.table.names),
              to_arrow_schema(nullable(table_struct(sp.table, meta=False)), timezone="UTC"))
        for tid, (directory, sp) in splits.items()
    }
    df = envelope.where(F.col(TABLE).isin(list(splits))).select(TABLE, *slots)
    # each task writes a file per table it meets: a few tasks, however many
    # partitions the batch has (a no-op when it has no more)
    return _write(df.coalesce(max(1, spark.sparkContext.defaultParallelism)), layout, epoch)


def _write_native(df: "DataFrame", directory: str, epoch: int) -> list[DataFile]:
    """Spark's Parquet writer into a staging folder inside the table directory
    (a ``_`` folder: Delta and Spark readers skip it), then each file renamed
    into the table directory under the direct path's name. Record counts come
    from the files' footers."""
    import os
    import shutil

    import pyarrow.parquet as pq

    staging = os.path.join(directory, f"_staging-e{epoch:06d}-{uuid.uuid4()}")
    out = []
    try:
        df.write.mode("errorifexists").option("compression", "snappy").parquet(staging)
        for written in sorted(os.listdir(staging)):
            if not written.endswith(".parquet"):
                continue  # _SUCCESS, Hadoop's .crc files
            source = os.path.join(staging, written)
            rows = pq.read_metadata(source).num_rows
            name = f"part-e{epoch:06d}-{uuid.uuid4()}-c000.snappy.parquet"
            path = os.path.join(directory, name)
            os.rename(source, path)
            st = os.stat(path)
            out.append(DataFile(name, st.st_size, rows, int(st.st_mtime * 1000)))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _write(df: "DataFrame", layout: dict, epoch: int) -> dict[str, list[DataFile]]:
    """Run the writer over ``df`` (key column first, then slots) and collect the files."""
    prefix = f"part-e{epoch:06d}"
    rows = df.mapInArrow(_writer(layout, prefix), _FILE_COLUMNS).collect()
    out: dict[str, list[DataFile]] = {k: [] for k in layout}
    for r in rows:
        out[r["table"]].append(DataFile(r["name"], int(r["size"]), int(r["rows"]), int(r["modified"])))
    return out


def _writer(layout: dict, prefix: str):
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import os

        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        open_files: dict[str, tuple[Any, str, str, list[int]]] = {}
        for batch in batches:
            if batch.num_rows == 0:
                continue
            key_col = batch.column(0)
            found = pc.unique(key_col).to_pylist()
            for key in found:
                part = batch if len(found) == 1 else batch.filter(pc.equal(key_col, key))
                directory, slot_names, names, schema = layout[key]
                data = pa.RecordBatch.from_arrays([part.column(s) for s in slot_names], names=names).cast(schema)
                if key not in open_files:
                    os.makedirs(directory, exist_ok=True)
                    name = f"{prefix}-{uuid.uuid4()}-c000.snappy.parquet"
                    path = os.path.join(directory, name)
                    open_files[key] = (pq.ParquetWriter(path, schema, **PARQUET_OPTIONS), path, name, [0])
                writer, _, _, count = open_files[key]
                writer.write_batch(data)
                count[0] += data.num_rows
        for key, (writer, path, name, count) in open_files.items():
            writer.close()
            st = os.stat(path)
            yield pa.RecordBatch.from_pydict(
                {"table": [key], "name": [name], "size": [st.st_size], "rows": [count[0]], "modified": [int(st.st_mtime * 1000)]},
                schema=pa.schema([("table", pa.string()), ("name", pa.string()), ("size", pa.int64()), ("rows", pa.int64()), ("modified", pa.int64())]),
            )

    return run


def remove(directory: str, files: list[DataFile]) -> None:
    """Delete written files no commit will name (best effort: VACUUM cleans up the rest)."""
    import os

    for f in files:
        try:
            os.remove(os.path.join(directory, f.name))
        except OSError:
            pass


def write_local_file(directory: str, table: Any, epoch: int) -> DataFile:
    """Driver-side: one pyarrow Table as one Parquet file (small metadata tables)."""
    import os

    import pyarrow.parquet as pq

    os.makedirs(directory, exist_ok=True)
    name = f"part-e{epoch:06d}-{uuid.uuid4()}-c000.snappy.parquet"
    path = os.path.join(directory, name)
    pq.write_table(table, path, **PARQUET_OPTIONS)
    st = os.stat(path)
    return DataFile(name, st.st_size, table.num_rows, int(st.st_mtime * 1000))


# ---------------------------------------------------------------------------
# phase 2: one Delta transaction per table


@dataclass(frozen=True)
class Committed:
    version: int | None  # None: skipped (the epoch was in the table already)
    rows: int


class NotPlain(Exception):
    """The table changed under us into one the direct path must not write."""


def commit_files(
    spark: "SparkSession",
    location: str,
    schema: "StructType",
    files: list[DataFile],
    app_id: str | None,
    epoch: int,
    check_txn: bool,
) -> Committed:
    """Commit ``files`` (already in ``location``) as one append of epoch ``epoch``.

    ``check_txn``: look the app id up first and skip the epoch if the table has
    it (a replayed epoch). Raises :class:`NotPlain` if the table's metadata no
    longer qualifies (the caller falls back to Delta's writer).
    """
    jvm = spark._jvm  # type: ignore[attr-defined]
    none = _none(spark)
    txn = _delta_log(spark, location).startTransaction(none, none)
    if txn.readVersion() < 0:
        txn.updateMetadataForNewTable(_action(jvm, {"metaData": _new_metadata(schema)}))
    elif not plain(_metadata(txn), _protocol_features(txn), schema):
        raise NotPlain(location)
    elif check_txn and app_id is not None and txn.txnVersion(app_id) >= epoch:
        return Committed(None, 0)
    now = int(time.time() * 1000)
    actions = [
        {"add": {"path": f.name, "partitionValues": {}, "size": f.size, "modificationTime": f.modified_ms,
                 "dataChange": True, "stats": json.dumps({"numRecords": f.rows})}}
        for f in files
    ]
    if app_id is not None:
        actions.append({"txn": {"appId": app_id, "version": epoch, "lastUpdated": now}})
    version = txn.commit(_seq(jvm, [_action(jvm, a) for a in actions]), _write_operation(jvm))
    return Committed(int(version), sum(f.rows for f in files))


def create_table(spark: "SparkSession", location: str, schema: "StructType") -> bool:
    """Create an empty plain table (metadata only, version 0); False when a
    table is there already (or another writer created it meanwhile)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    none = _none(spark)
    log = _delta_log(spark, location)
    txn = log.startTransaction(none, none)
    if txn.readVersion() >= 0:
        return False
    txn.updateMetadataForNewTable(_action(jvm, {"metaData": _new_metadata(schema)}))
    try:
        txn.commit(_seq(jvm, []), _write_operation(jvm))
    except Exception:
        if log.update(False, none, none).version() >= 0:
            return False  # a concurrent create won
        raise
    return True


def _new_metadata(schema: "StructType") -> dict:
    return {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": nullable(schema).json(),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": int(time.time() * 1000),
    }


def _delta_log(spark: "SparkSession", location: str) -> Any:
    delta_log = jvm_class(spark._jvm, "org.apache.spark.sql.delta.DeltaLog")  # type: ignore[attr-defined]
    return delta_log.forTable(spark._jsparkSession, location)  # type: ignore[attr-defined]


def _none(spark: "SparkSession") -> Any:
    jvm = spark._jvm  # type: ignore[attr-defined]
    return jvm_constant(jvm, "none", lambda: getattr(getattr(jvm.scala, "None$"), "MODULE$"))


def _action(jvm: Any, action: dict) -> Any:
    return jvm_class(jvm, "org.apache.spark.sql.delta.actions.Action").fromJson(json.dumps(action))


def _seq(jvm: Any, items: list) -> Any:
    java = jvm_class(jvm, "java.util.ArrayList")()
    for x in items:
        java.add(x)
    return jvm_class(jvm, "scala.jdk.javaapi.CollectionConverters").asScala(java).toList()


def _write_operation(jvm: Any) -> Any:
    """``DeltaOperations.Write(SaveMode.Append)``: the history shows WRITE, mode Append."""
    def make() -> Any:
        write = getattr(getattr(jvm.org.apache.spark.sql.delta.DeltaOperations, "Write$"), "MODULE$")
        defaults = [getattr(write, f"apply$default${i}")() for i in range(2, 10)]
        return write.apply(jvm.org.apache.spark.sql.SaveMode.Append, *defaults)

    return jvm_constant(jvm, "write-append", make)
