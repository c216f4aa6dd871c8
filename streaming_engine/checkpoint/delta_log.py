"""Delta's transaction log through Delta's own JVM API: the one way the engine
appends to a Delta table, on every file system and every Spark master.

:func:`append` is what Delta's DataFrameWriter does, minus one lookup:

1. ``OptimisticTransaction.writeFiles``: Delta's writer. The executors write
   the Parquet files under their final names in the table directory (no
   staging, no rename), with the per-file statistics of the first
   ``delta.dataSkippingNumIndexedCols`` columns, the table's CHECK constraints
   and NOT NULL invariants enforced, and the Spark session's Parquet settings.
   Uncommitted files (a crash before step 2) are ordinary files no commit
   names: readers never see them and ``VACUUM`` removes them.
2. ONE ``commit`` of the ``add`` actions plus a ``txn`` action (``appId`` = the
   sink's stable transaction id, ``version`` = the epoch), as the operation
   ``WRITE (Append)`` with its ``operationMetrics``: exactly what the
   DataFrameWriter's ``txnAppId``/``txnVersion`` options record.

The DataFrameWriter with those options first looks the app id up, which makes
Delta rebuild the table's state (about 2 s per epoch here, growing with the
log). :func:`append` reads it from the version's checksum file instead
(:func:`_txn`) and fences the commit as Delta's writer does (:func:`_fence`):
an epoch the app id already holds is skipped, and a commit of the same app id
by another writer after the transaction's snapshot fails Delta's own conflict
check (``ConcurrentTransactionException``). So a second live driver of the
job (a paused process waking up, an old YARN attempt) can neither land an
epoch twice nor land one another driver skipped. The runtime also reads each
target's committed epoch when a query starts (:func:`inspect`) and does not
write an epoch at or below it (``runtime/pipeline.py``).

A table the engine appends to itself is new, or :func:`compatible`: the data's
schema, and only writer features in :data:`ALLOWED_FEATURES`, whose rules
``writeFiles`` and ``commit`` enforce. Anything else (another schema,
generated, identity or default columns, column mapping, row tracking, features
added to Delta later) is written by Delta's DataFrameWriter
(``delta_txn.append_with_writer``), which knows them.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from streaming_engine.checkpoint.delta_txn import conflict_kind
from streaming_engine.jvm import jvm_class, jvm_constant

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger("streaming_engine.commit")

# Writer features whose rules Delta's writeFiles + commit enforce for a plain
# append of the table's own columns (an allow-list: a feature Delta adds later
# is not in it, so such tables go through Delta's DataFrameWriter).
ALLOWED_FEATURES = frozenset({
    "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "deletionVectors", "timestampNtz",
    "v2Checkpoint", "vacuumProtocolCheck", "domainMetadata", "inCommitTimestamp",
})
# What the legacy writer versions (no feature list) imply.
_LEGACY_FEATURES = {
    1: set(), 2: {"appendOnly", "invariants"}, 3: {"appendOnly", "invariants", "checkConstraints"},
    4: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"},
}


@dataclass(frozen=True)
class Appended:
    version: int | None  # None: skipped, the table holds the epoch already (:func:`_fence`)
    rows: int
    seconds: float | None = None  # append_tables: from the start of the write to this table's commit

    @property
    def skipped(self) -> bool:
        return self.version is None


SKIPPED = Appended(None, 0)


class Incompatible(Exception):
    """The table is not one :func:`append` may write (the reason is the message)."""


@dataclass(frozen=True)
class TableState:
    epoch: int  # the newest epoch the app id committed (-1: none, or no table)
    incompatible: str | None  # why :func:`append` must not write the table (None: it may)


def inspect(
    spark: "SparkSession", location: str, app_id: str, schema: "StructType", partition_by: Sequence[str] = (),
    read_since_ms: int | None = None,
) -> TableState:
    """What a starting query needs to know of a table, from ONE snapshot (the
    transactions come from the log's checksum file when it carries them, else
    from rebuilding the state: :func:`_txn`): call it when a query starts, not per epoch.
    ``read_since_ms``: a state this driver read from the log at or after that
    time (epoch ms; e.g. when the query started opening its sinks) is fresh
    enough: a table whose log object was just created (which lists the log)
    is not listed a second time."""
    since = _none(spark) if read_since_ms is None else _since(spark, read_since_ms)
    snapshot = _delta_log(spark, location).update(False, since, _none(spark))
    if snapshot.version() < 0:
        return TableState(-1, None)
    return TableState(_txn(snapshot, app_id), _incompatibility(snapshot, schema, partition_by))


def txn_version(spark: "SparkSession", location: str, app_id: str) -> int:
    """The newest version ``app_id`` recorded in the table (-1: none, or no table)."""
    snapshot = _delta_log(spark, location).update(False, _none(spark), _none(spark))
    return _txn(snapshot, app_id) if snapshot.version() >= 0 else -1


def table_version(spark: "SparkSession", location: str) -> int:
    """The table's newest version (-1: no table)."""
    return int(_delta_log(spark, location).update(False, _none(spark), _none(spark)).version())


def file_count(spark: "SparkSession", location: str) -> int | None:
    """The number of files of the table's state this driver read last (the
    one its last commit left, or a fresh listing when it never read the
    table): from the version's checksum file, else from the state. None when
    there is no table."""
    log_ = _delta_log(spark, location)
    snapshot = log_.unsafeVolatileSnapshot()
    if snapshot.version() < 0:
        snapshot = log_.update(False, _none(spark), _none(spark))
        if snapshot.version() < 0:
            return None
    crc = snapshot.checksumOpt()
    return int(crc.get().numFiles()) if crc.isDefined() else int(snapshot.numOfFiles())


def last_vacuum_ms(spark: "SparkSession", location: str) -> int:
    """When the table was last vacuumed (epoch ms: the time of Delta's
    ``_delta_log/_last_vacuum_info``), else when it was created (its first
    commit file); 0 when neither is there (its log was cleaned up long ago)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    root = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/_delta_log")
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    for name in ("_last_vacuum_info", f"{0:020d}.json"):
        path = jvm.org.apache.hadoop.fs.Path(root, name)
        if fs.exists(path):
            return int(fs.getFileStatus(path).getModificationTime())
    return 0


def log_retention_ms(spark: "SparkSession", location: str) -> int | None:
    """How long the table keeps its log (``delta.logRetentionDuration``, 30
    days unless the table says otherwise), from the state this driver read
    last; None when there is no table or its expired log is never cleaned
    (``delta.enableExpiredLogCleanup = false``)."""
    log_ = _delta_log(spark, location)
    snapshot = log_.unsafeVolatileSnapshot()
    if snapshot.version() < 0 or not log_.enableExpiredLogCleanup(snapshot.metadata()):
        return None
    return int(log_.deltaRetentionMillis(snapshot.metadata()))


def clean_expired_log(spark: "SparkSession", location: str) -> int:
    """Delta's own cleanup of the table's expired log (``cleanUpExpiredLogs``:
    commit, checksum and checkpoint files older than the table's
    ``delta.logRetentionDuration`` and older than its newest checkpoint
    before that age, so every version still in the retention stays
    readable), with the age cut at the minute. Delta itself runs it after a
    checkpoint with the age cut at midnight (UTC): a retention of an hour
    kept up to a day of commits. Returns the number of log files removed."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    log_ = _delta_log(spark, location)
    root = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/_delta_log")
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    before = len(fs.listStatus(root))
    minute = jvm_constant(jvm, "truncate-minute", lambda: getattr(
        getattr(jvm.org.apache.spark.sql.delta, "TruncationGranularity$"), "MODULE$").MINUTE())
    log_.cleanUpExpiredLogs(log_.update(False, _none(spark), _none(spark)), _none(spark), _none(spark), minute)
    return before - len(fs.listStatus(root))


def _txn(snapshot: Any, app_id: str) -> int:
    """The newest version ``app_id`` recorded in ``snapshot``: from the
    version's checksum file when it lists the table's transactions (Delta
    writes them there on every commit, ``setTransactionsInCrc.writeOnCommit``),
    else from the table's state. Delta 4.4's own ``Snapshot.transactions``
    always rebuilds the state: three Spark jobs per table the first time a
    process looks (about a second each here, so every restart of a job paid
    it per table)."""
    crc = snapshot.checksumOpt()
    listed = crc.get().setTransactions() if crc.isDefined() else None
    if listed is not None and listed.isDefined():
        versions = [-1]
        it = listed.get().iterator()
        while it.hasNext():
            txn = it.next()
            if txn.appId() == app_id:
                versions.append(int(txn.version()))
        return max(versions)
    found = snapshot.transactions().get(app_id)
    return int(found.get()) if found.isDefined() else -1


def _fence(txn: Any, app_id: str, epoch: int) -> bool:
    """Whether the table holds epoch ``epoch`` of ``app_id`` already (or a
    later one) in the transaction's snapshot; either way the transaction now
    depends on ``app_id`` as Delta's writer makes it (``txnVersion``): a
    commit of the same app id by another writer after the snapshot fails
    this transaction's commit with ``ConcurrentTransactionException``. Reads
    the version's checksum file, not the table's state (:func:`_txn`)."""
    txn.readTxn().addOne(app_id)
    if txn.readVersion() < 0:
        return False
    held = _txn(txn.snapshot(), app_id)
    if held >= epoch:
        log.warning("epoch already in the table: skipped (another driver of this job committed it)",
                    extra={"app_id": app_id, "epoch": epoch, "table_epoch": held, "version": int(txn.readVersion())})
        return True
    return False


def _incompatibility(snapshot_or_txn: Any, schema: "StructType", partition_by: Sequence[str]) -> str | None:
    md = json.loads(snapshot_or_txn.metadata().json())["metaData"]
    proto = json.loads(snapshot_or_txn.protocol().json())["protocol"]
    features = proto.get("writerFeatures")
    if features is None:
        version = int(proto.get("minWriterVersion", 2))
        if version not in _LEGACY_FEATURES:
            return f"writer version {version} (column mapping or identity columns)"
        features = set(_LEGACY_FEATURES[version])
        if "delta.generationExpression" not in md["schemaString"]:
            features.discard("generatedColumns")
    extra = sorted(set(features) - ALLOWED_FEATURES)
    if extra:
        return f"table features {', '.join(extra)}"
    if json.loads(md["schemaString"]) != json.loads(nullable(schema).json()):
        return "its schema differs from the data's"
    if partition_by and list(md.get("partitionColumns") or []) != list(partition_by):
        return f"it is partitioned by {md.get('partitionColumns') or 'nothing'}, not {list(partition_by)}"
    return None


def append(
    spark: "SparkSession",
    location: str,
    df: "DataFrame",
    app_id: str | None,
    epoch: int,
    partition_by: Sequence[str] = (),
    before_commit: Any = None,
    recent: bool = False,
) -> Appended:
    """Write ``df`` (the table's columns) with Delta's writer and commit it as
    epoch ``epoch`` of ``app_id`` in one transaction; a new table is created
    by the same commit. Raises :class:`Incompatible` (nothing written) when
    the table is not one this function may write. ``before_commit`` (a
    callable) runs between the write and the commit (fault injection).
    ``recent``: start on the state this driver read recently (:func:`_start`).
    Returns :data:`SKIPPED` (nothing written) when the table holds the epoch;
    a commit of the same app id meanwhile raises ``ConcurrentTransactionException``
    (:func:`_fence`: retry, and the retry skips)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    txn = _start(spark, location, recent)
    if app_id is not None and _fence(txn, app_id, epoch):
        return SKIPPED
    if txn.readVersion() < 0:
        txn.updateMetadataForNewTable(_action(jvm, {"metaData": _new_metadata(df.schema, partition_by)}))
    else:
        reason = _incompatibility(txn, df.schema, partition_by)
        if reason is not None:
            raise Incompatible(reason)
    files = txn.writeFiles(df._jdf)
    rows = 0
    it = files.iterator()
    while it.hasNext():
        stats = it.next().stats()
        rows += int(json.loads(stats)["numRecords"]) if stats else 0
    if before_commit is not None:
        before_commit()
    actions = files
    if app_id is not None:
        txn_action = _action(jvm, {"txn": {"appId": app_id, "version": epoch, "lastUpdated": int(time.time() * 1000)}})
        actions = files.toList().appended(txn_action)
    version = txn.commit(actions.toSeq(), _write_operation(jvm))
    return Appended(int(version), rows)


MULTI_TABLE_CLASS = "io.streamingengine.spark.MultiTableWrite"


@dataclass(frozen=True)
class TableSlice:
    """One table of an envelope batch for :func:`append_tables`."""
    table_id: str
    location: str
    app_id: str
    ordinals: tuple[int, ...]  # the batch columns holding the table's columns, in the table's order
    schema: "StructType"  # the table's columns (a new table is created with it)


# Table properties a one-job write honours as Delta's writer does (the
# statistics settings are read by Delta's own tracker; the rest do not touch
# how files are written). Any other property (file name prefixes, Parquet
# format versions, auto-optimize, properties Delta adds later) sends the table
# through Delta's writer: an allow-list, as ALLOWED_FEATURES.
_ONE_JOB_PROPERTIES = frozenset({
    "delta.appendOnly", "delta.enableChangeDataFeed", "delta.enableDeletionVectors", "delta.checkpointInterval",
    "delta.checkpointPolicy", "delta.logRetentionDuration", "delta.deletedFileRetentionDuration",
    "delta.dataSkippingNumIndexedCols", "delta.dataSkippingStatsColumns", "delta.enableInCommitTimestamps",
    "delta.isolationLevel", "delta.minReaderVersion", "delta.minWriterVersion",
})
# Session settings under which Delta's writer lays files out or compacts them
# differently: no one-job write while one is on.
_ONE_JOB_SESSION_OFF = ("spark.databricks.delta.optimizeWrite.enabled", "spark.databricks.delta.autoCompact.enabled")


def one_job_available(spark: "SparkSession") -> bool:
    """Whether :func:`append_tables` can run: the engine's JVM classes are on
    the class path and no session setting changes how Delta's writer lays out
    files (optimized writes, auto compaction)."""
    if jvm_class(spark._jvm, MULTI_TABLE_CLASS) is None:  # type: ignore[attr-defined]
        return False
    return not any(str(spark.conf.get(k, "false")).strip().lower() not in ("false", "") for k in _ONE_JOB_SESSION_OFF)


def append_tables(
    spark: "SparkSession",
    batch: "DataFrame",
    tables: Sequence[TableSlice],
    epoch: int,
    parallelism: int = 4,
    before_commit: Any = None,
    after_commit: Any = None,
) -> tuple[dict[str, Appended], dict[str, str]]:
    """:func:`append` for many tables of one envelope batch: ONE Spark job
    writes every table's files (``MultiTableWrite.java``: Delta's Parquet
    format and settings, Delta's own per-file statistics, final names in each
    table's directory, any Hadoop file system), then each table commits its
    files with its txn action in its own transaction (``parallelism`` at a
    time). Tables this path does not write (partitioned, CHECK constraints,
    or not :func:`append`-compatible) are returned with the reason, nothing
    written for them: the caller writes them one by one. Rows of tables not
    in ``tables`` are ignored. A table whose commit meets a concurrent change
    (a Delta conflict) is returned as refused too, its files left uncommitted.
    ``before_commit`` runs once between the write
    and the commits, ``after_commit`` after each table's commit (fault injection).
    A table that holds the epoch already is returned as :data:`SKIPPED`
    (nothing written); each commit is fenced as :func:`append`'s."""
    from streaming_engine.runtime.parallel import map_concurrently

    began = time.monotonic()
    jvm = spark._jvm  # type: ignore[attr-defined]
    none = _none(spark)

    def start(t: TableSlice) -> tuple[Any, str | None]:
        txn = _start_recent(spark, t.location)
        if _fence(txn, t.app_id, epoch):
            return None, None
        if txn.readVersion() < 0:
            txn.updateMetadataForNewTable(_action(jvm, {"metaData": _new_metadata(t.schema, ())}))
            return txn, None
        return txn, _incompatibility(txn, t.schema, ()) or _one_job_refusal(txn)

    started, refused, skipped = [], {}, {}
    for t, (txn, reason) in zip(tables, map_concurrently(start, tables, parallelism)):
        if txn is None:
            skipped[t.table_id] = SKIPPED
        elif reason is None:
            started.append((t, txn))
        else:
            refused[t.table_id] = reason
    if not started:
        return skipped, refused
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    n = len(started)
    txns = gateway.new_array(jvm.org.apache.spark.sql.delta.OptimisticTransaction, n)
    for i, (_, txn) in enumerate(started):
        txns[i] = txn
    spec = json.dumps([[t.table_id, list(t.ordinals)] for t, _ in started])
    lines = jvm_class(jvm, MULTI_TABLE_CLASS).write(batch._jdf, spec, txns)  # ONE Spark job
    files: dict[int, list[dict]] = {i: [] for i in range(n)}
    for line in lines:
        index, name, size, mtime, stats = line.split("\t", 4)
        add = {"path": name, "partitionValues": {}, "size": int(size), "modificationTime": int(mtime), "dataChange": True}
        if stats:
            add["stats"] = stats
        files[int(index)].append(add)
    if before_commit is not None:
        before_commit()

    helper = jvm_class(jvm, MULTI_TABLE_CLASS)
    operation = _write_operation(jvm)

    def commit(i: int) -> Appended | str:
        t, txn = started[i]
        adds = files[i]
        rows = sum(int(json.loads(a["stats"])["numRecords"]) for a in adds if "stats" in a)
        actions = [json.dumps({"add": a}) for a in adds]
        actions.append(json.dumps({"txn": {"appId": t.app_id, "version": epoch, "lastUpdated": int(time.time() * 1000)}}))
        try:
            version = helper.commit(
                spark._jsparkSession, txn, "\n".join(actions), len(adds), rows, sum(a["size"] for a in adds),  # type: ignore[attr-defined]
                operation,
            )
        except Exception as e:
            kind = conflict_kind(e)
            if kind is None:
                raise
            # another writer committed meanwhile: this table's files stay
            # uncommitted (invisible, VACUUM removes them); the caller writes
            # the table again on its own, with the per-table conflict retries
            return f"its commit met a concurrent change ({kind})"
        seconds = time.monotonic() - began
        if after_commit is not None:
            after_commit()
        return Appended(int(version), rows, seconds)

    done = map_concurrently(commit, list(range(n)), parallelism)
    for (t, _), result in zip(started, done):
        if isinstance(result, str):
            refused[t.table_id] = result
    return {**skipped, **{t.table_id: a for (t, _), a in zip(started, done) if isinstance(a, Appended)}}, refused


# How old the state of a table a one-job write starts from may be (the state
# this driver read when the query started or left with its last commit).
RECENT_STATE_MS = 120_000


def _start(spark: "SparkSession", location: str, recent: bool) -> Any:
    """A transaction on the table's state: the one this driver read recently
    (``recent``: :func:`_start_recent`), else a fresh listing of its log."""
    if recent:
        return _start_recent(spark, location)
    return _delta_log(spark, location).startTransaction(_none(spark), _none(spark))


def recent_first() -> "Callable[[], bool]":
    """``recent`` for the attempts of a retried append: True for the first
    (no listing: the state the query start or this driver's last commit
    read), False for every retry (a conflict says the table changed since
    that state: a table another writer created meanwhile, a new schema)."""
    calls = itertools.count()
    return lambda: next(calls) == 0


def _start_recent(spark: "SparkSession", location: str) -> Any:
    """A transaction on the table's state this driver read in the last
    :data:`RECENT_STATE_MS` (the query start's :func:`inspect`, or the state
    its last commit left), else on a fresh listing of the log: Delta's own
    bounded staleness (``update(checkIfUpdatedSinceTs=...)``). A commit of
    another writer since is found by the commit's conflict check, as for any
    transaction that lost a race: a blind append lands after it, a conflict
    is refused. On S3 it saves a listing (one to four requests) per table and
    epoch; a many-table epoch pays nothing else per table before the write."""
    log_ = _delta_log(spark, location)
    snapshot = log_.update(False, _since(spark, int(time.time() * 1000) - RECENT_STATE_MS), _none(spark))
    return log_.startTransaction(_none(spark), jvm_class(spark._jvm, "scala.Some")(snapshot))  # type: ignore[attr-defined]


def _since(spark: "SparkSession", ms: int) -> Any:
    """``Some(ms)`` for ``DeltaLog.update(checkIfUpdatedSinceTs=...)``: py4j
    sends an int below 2**31 as an Integer, which Delta cannot unbox as a Long
    (any real update time is later than 2**31 ms, January 1970)."""
    return jvm_class(spark._jvm, "scala.Some")(max(int(ms), 2**31))  # type: ignore[attr-defined]


def _one_job_refusal(txn: Any) -> str | None:
    """Why :func:`append_tables` must not write a table :func:`append` may write."""
    md = json.loads(txn.metadata().json())["metaData"]
    if md.get("partitionColumns"):
        return "it is partitioned"
    configuration = md.get("configuration") or {}
    if any(k.startswith("delta.constraints.") for k in configuration):
        return "it has CHECK constraints (Delta's writer enforces them)"
    other = sorted(k for k in configuration if k not in _ONE_JOB_PROPERTIES and not k.startswith("delta.feature."))
    if other:
        return f"table properties {', '.join(other)} (Delta's writer honours them)"
    return None


def append_small(
    spark: "SparkSession", location: str, table: Any, schema: "StructType", before_commit: Any = None,
    properties: "dict[str, str] | None" = None, recent: bool = False, app_id: str | None = None, epoch: int = -1,
) -> Appended:
    """Append a small pyarrow ``table`` (the ledger's rows of an epoch) without
    a Spark job: the driver writes ONE Parquet file through Hadoop's FileSystem
    (any scheme) and commits it with its statistics (numRecords, nullCount;
    min/max of numeric and timestamp columns: timestamps must be whole
    milliseconds, as Delta's statistics are) and operationMetrics. No txn
    action unless ``app_id`` is given: then the commit is epoch ``epoch`` of
    ``app_id``, fenced as :func:`append`'s (:data:`SKIPPED` when the table
    holds it). ``properties``: the table properties of a table this append
    creates; ``recent``: as :func:`append`'s."""
    import io

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    jvm = spark._jvm  # type: ignore[attr-defined]
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    data = buf.getvalue()
    root = jvm.org.apache.hadoop.fs.Path(location)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    out = create_new(fs, jvm.org.apache.hadoop.fs.Path(root, name))
    try:
        out.write(bytearray(data))
    finally:
        out.close()
    stats: dict[str, Any] = {"numRecords": table.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for field, column in zip(table.schema, table.columns):
        stats["nullCount"][field.name] = column.null_count
        if table.num_rows > column.null_count and (pa_numeric(field.type) or pa_timestamp(field.type)):
            low, high = pc.min_max(column).values()
            stats["minValues"][field.name], stats["maxValues"][field.name] = _stat(low.as_py()), _stat(high.as_py())
    txn = _start(spark, location, recent)
    if app_id is not None and _fence(txn, app_id, epoch):
        return SKIPPED  # (its file stays uncommitted: invisible, VACUUM removes it)
    if txn.readVersion() < 0:
        txn.updateMetadataForNewTable(_action(jvm, {"metaData": _new_metadata(schema, (), properties)}))
    elif (reason := _incompatibility(txn, schema, ())) is not None:
        raise Incompatible(reason)
    add = {"add": {"path": name, "partitionValues": {}, "size": len(data), "modificationTime": int(time.time() * 1000),
                   "dataChange": True, "stats": json.dumps(stats)}}
    actions = [add]
    if app_id is not None:
        actions.append({"txn": {"appId": app_id, "version": epoch, "lastUpdated": int(time.time() * 1000)}})
    if before_commit is not None:
        before_commit()
    helper = jvm_class(jvm, MULTI_TABLE_CLASS)
    if helper is not None:  # the same commit in one py4j call (an epoch's ledger append: ~25 round trips fewer)
        version = helper.commit(
            spark._jsparkSession, txn, "\n".join(json.dumps(a) for a in actions), 1, table.num_rows, len(data),  # type: ignore[attr-defined]
            _write_operation(jvm),
        )
    else:
        _register_metrics(spark, txn, {"numFiles": 1, "numOutputRows": table.num_rows, "numOutputBytes": len(data)})
        version = txn.commit(_seq(jvm, [_action(jvm, a) for a in actions]), _write_operation(jvm))
    return Appended(int(version), table.num_rows)


def create_new(fs: Any, path: Any) -> Any:
    """An output stream for a file of a name nobody else writes (a random
    one): on S3A without the probes for an existing file or a directory
    there (a HEAD and a LIST; the builder's ``fs.s3a.create.performance``,
    an option other file systems ignore)."""
    return fs.createFile(path).overwrite(False).recursive().opt("fs.s3a.create.performance", "true").build()


def create(spark: "SparkSession", location: str, schema: "StructType", properties: "dict[str, str] | None" = None) -> bool:
    """Create an empty table (``CREATE TABLE`` in its history) where there is
    none; False when one is there already. Two creating at once: one commits,
    the other's commit raises (the caller tries again, and finds the table)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    none = _none(spark)
    txn = _delta_log(spark, location).startTransaction(none, none)
    if txn.readVersion() >= 0:
        return False
    txn.updateMetadataForNewTable(_action(jvm, {"metaData": _new_metadata(schema, (), properties)}))
    ops = getattr(getattr(jvm.org.apache.spark.sql.delta.DeltaOperations, "CreateTable$"), "MODULE$")
    defaults = [getattr(ops, f"apply$default${i}")() for i in (3, 4)]
    txn.commit(_seq(jvm, []), ops.apply(txn.metadata(), False, *defaults))
    return True


def pa_numeric(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t)


def pa_timestamp(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_timestamp(t)


def _stat(value: Any) -> Any:
    """A statistic as Delta writes it (timestamps: ISO, milliseconds, UTC)."""
    from datetime import datetime, timezone

    if isinstance(value, datetime):
        utc = value.astimezone(timezone.utc) if value.tzinfo else value
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    return value


def _register_metrics(spark: "SparkSession", txn: Any, values: dict[str, int]) -> None:
    """The commit's ``operationMetrics`` (what Delta's writer registers for a WRITE)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    metrics = jvm_class(jvm, "org.apache.spark.sql.execution.metric.SQLMetrics")
    found = jvm_class(jvm, "java.util.HashMap")()
    for key, value in values.items():
        metric = metrics.createMetric(spark.sparkContext._jsc.sc(), key)  # type: ignore[attr-defined]
        metric.add(value)
        found.put(key, metric)
    immutable = getattr(getattr(jvm.scala.collection.immutable, "Map$"), "MODULE$")
    pairs = jvm_class(jvm, "scala.jdk.javaapi.CollectionConverters").asScala(found).toSeq()
    txn.registerSQLMetrics(spark._jsparkSession, immutable.apply(pairs))  # type: ignore[attr-defined]


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


def _new_metadata(schema: "StructType", partition_by: Sequence[str], properties: "dict[str, str] | None" = None) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": nullable(schema).json(),
        "partitionColumns": list(partition_by),
        "configuration": dict(properties or {}),
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
