"""One epoch's upserts and deletes into many Delta tables in ONE Spark job.

What ``delta_txn.upsert`` does with one MERGE per table (plus one into the
tombstone table), for every table of a multi-table batch at once
(``jvm/MultiTableMerge.java``):

1. Per table, a transaction on the state this driver read recently
   (``delta_log._start_recent``), fenced by the sink's transaction id as an
   append is (``delta_log._fence``: an epoch the table holds is skipped), and
   the table's live files from this driver's list of them, brought up to the
   transaction's version from the log's commits (no Spark job; the first
   time per table and driver, from the table's state). The tombstone table
   likewise (its own txn id ``<app_id>.tombstones``).
2. ONE Spark job over the shuffled batch (each table's rows in one
   partition): per table the last change per key, the tombstone merge, the
   table's files that may hold the keys (min/max statistics of the key), of
   those the ones that do hold one rewritten (copy on write) with Delta's
   Parquet format and statistics, the other changes inserted.
3. Per table ONE commit: the removes of the rewritten files, the adds, the
   ``txn`` action, as a ``MERGE`` with its operation metrics (the tombstone
   table's commit first, as ``delta_txn.upsert`` does). The transaction read
   the whole table: any concurrent change of it fails the commit by Delta's
   own conflict check; that table is then written on its own, by Delta's
   MERGE with its conflict retries (the caller's fallback), and its files
   written here stay uncommitted (invisible; VACUUM removes them).

A PARTIAL kind (``partial``: REPLICA IDENTITY DEFAULT's unchanged TOASTed
values) keeps the rewritten row's values of its columns; inserted, it fails
the job naming the key, as ``delta_txn.upsert``'s MERGE does.

Same results as ``delta_txn.upsert`` on every table it takes; tables it does
not take are returned with the reason and MERGEd one by one: SCD type 2, partitioned tables, tables with
deletion vectors on (Delta's MERGE then marks rows deleted), CHECK constraints, properties outside
``delta_log``'s allow-list, another schema, floating-point keys.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from streaming_engine.checkpoint import delta_log
from streaming_engine.checkpoint.delta_txn import conflict_kind, tombstones_location
from streaming_engine.jvm import jvm_class

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

MERGE_CLASS = "io.streamingengine.spark.MultiTableMerge"
DELETED_AT = "__deleted_at"


@dataclass(frozen=True)
class MergeSlice:
    """One table of an envelope batch for :func:`merge_tables`."""

    table_id: str
    location: str
    app_id: str
    ordinals: tuple[int, ...]  # the batch columns holding the target's columns, in the target's order
    schema: "StructType"  # the target's columns (with the source order column, when the sink adds it)
    keys: tuple[str, ...]
    sequence: str | None  # the target column ordering versions of a key (tombstones are kept with one)
    retention_ms: int  # how long a tombstone is kept
    source_order: bool = False  # the sequence is the source's order (__seq): truncates clear only older rows
    partial: bool = False  # kinds may be PARTIAL (schema.partial_kind): those columns keep the table's values


@dataclass(frozen=True)
class Merged:
    version: int | None  # None: skipped, the table holds the epoch already
    rows: int  # rows inserted, updated and deleted
    seconds: float | None = None

    @property
    def skipped(self) -> bool:
        return self.version is None


def available(spark: "SparkSession") -> bool:
    return jvm_class(spark._jvm, MERGE_CLASS) is not None  # type: ignore[attr-defined]


def forget(spark: "SparkSession") -> None:
    """Drop this driver's file lists (a run ended)."""
    helper = jvm_class(spark._jvm, MERGE_CLASS)  # type: ignore[attr-defined]
    if helper is not None:
        helper.forget()


def key_refusal(spark: "SparkSession", schema: "StructType", keys: Sequence[str]) -> str | None:
    """Why the key's columns cannot be compared by their bytes (floating point: -0.0, NaN)."""
    helper = jvm_class(spark._jvm, MERGE_CLASS)  # type: ignore[attr-defined]
    for k in keys:
        field = schema[k]
        jtype = spark._jsparkSession.parseDataType(field.dataType.json())  # type: ignore[attr-defined]
        if not helper.keyTypeSupported(jtype):
            return f"its key column {k} is {field.dataType.simpleString()}"
    return None


def _deletion_vectors_on(txn: Any) -> bool:
    configuration = json.loads(txn.metadata().json())["metaData"].get("configuration") or {}
    return str(configuration.get("delta.enableDeletionVectors", "false")).lower() == "true"


def _tomb_schema(t: MergeSlice) -> "StructType":
    from pyspark.sql.types import StructField, StructType, TimestampType

    assert t.sequence is not None
    return StructType([*(t.schema[k] for k in t.keys), t.schema[t.sequence], StructField(DELETED_AT, TimestampType())])


def merge_tables(
    spark: "SparkSession",
    batch: "DataFrame",
    tables: Sequence[MergeSlice],
    epoch: int,
    parallelism: int = 4,
    before_commit: Callable[[], None] | None = None,
    after_commit: Callable[[], None] | None = None,
) -> tuple[dict[str, Merged], dict[str, str]]:
    """Apply epoch ``epoch`` of ``batch`` (the shuffled envelope) to every
    table of ``tables`` in one Spark job, then commit each table. Returns
    (what each table it took committed or skipped, why it did not take the others)."""
    from streaming_engine.runtime.parallel import map_concurrently
    from streaming_engine.schema import KIND, SEQ

    began = time.monotonic()
    jvm = spark._jvm  # type: ignore[attr-defined]
    helper = jvm_class(jvm, MERGE_CLASS)

    def start(t: MergeSlice) -> Any:
        txn = delta_log._start_recent(spark, t.location)
        if delta_log._fence(txn, t.app_id, epoch):
            return None
        if txn.readVersion() < 0:
            txn.updateMetadataForNewTable(delta_log._action(jvm, {"metaData": delta_log._new_metadata(t.schema, ())}))
            files = helper.liveFiles(txn)
        else:
            reason = delta_log._incompatibility(txn, t.schema, ()) or delta_log._one_job_refusal(txn)
            if reason is None and _deletion_vectors_on(txn):
                reason = "deletion vectors are on (Delta's MERGE marks rows deleted instead of rewriting files)"
            if reason is not None:
                return reason
            files = helper.liveFiles(txn)
            if helper.hasDeletionVectors(files):
                return "its files have deletion vectors (Delta's MERGE reads them)"
        tomb = None
        if t.sequence is not None:
            where = tombstones_location(t.location)
            ttxn = delta_log._start_recent(spark, where)
            write = not delta_log._fence(ttxn, f"{t.app_id}.tombstones", epoch)
            if ttxn.readVersion() < 0:
                ttxn.updateMetadataForNewTable(
                    delta_log._action(jvm, {"metaData": delta_log._new_metadata(_tomb_schema(t), ())}))
                tfiles = helper.liveFiles(ttxn)
            else:
                reason = delta_log._incompatibility(ttxn, _tomb_schema(t), ()) or delta_log._one_job_refusal(ttxn)
                if reason is not None:
                    return f"its tombstone table: {reason}"
                tfiles = helper.liveFiles(ttxn)
                if helper.hasDeletionVectors(tfiles):
                    return "its tombstone table's files have deletion vectors"
            # the newest truncate an earlier epoch recorded (source order): older changes are gone
            mark = delta_log._txn(ttxn.snapshot(), f"{t.app_id}.truncated") if ttxn.readVersion() >= 0 else -1
            tomb = (ttxn, tfiles, write, mark)
        return txn, files, tomb

    started, refused, skipped = [], {}, {}
    for t, got in zip(tables, map_concurrently(start, tables, parallelism)):
        if got is None:
            skipped[t.table_id] = Merged(None, 0)
        elif isinstance(got, str):
            refused[t.table_id] = got
        else:
            started.append((t, *got))
    if not started:
        return skipped, refused

    txns: list[Any] = []
    files: list[Any] = []
    spec_tables = []
    for t, txn, tfiles, tomb in started:
        entry = {
            "id": t.table_id, "txn": len(txns), "ordinals": list(t.ordinals),
            "key": [t.schema.names.index(k) for k in t.keys],
            "seq": t.schema.names.index(t.sequence) if t.sequence else -1,
            "tomb": -1, "tombWrite": False, "retention": t.retention_ms,
            "sourceOrder": t.source_order, "mark": -1, "partial": t.partial, "location": t.location,
        }
        txns.append(txn)
        files.append(tfiles)
        if tomb is not None:
            entry["tomb"], entry["tombWrite"] = len(txns), tomb[2]
            entry["mark"] = tomb[3] if t.source_order else -1
            txns.append(tomb[0])
            files.append(tomb[1])
        spec_tables.append(entry)
    cols = batch.columns
    spec = json.dumps({"kind": cols.index(KIND), "order": cols.index(SEQ), "now": int(time.time() * 1000),
                       "tables": spec_tables})
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    jtxns = gateway.new_array(jvm.org.apache.spark.sql.delta.OptimisticTransaction, len(txns))
    jfiles = gateway.new_array(jvm.org.apache.spark.sql.delta.actions.AddFile, len(txns), 0)
    for i, (txn, fs) in enumerate(zip(txns, files)):
        jtxns[i] = txn
        jfiles[i] = fs
    lines = helper.merge(batch._jdf, spec, jtxns, jfiles)  # ONE Spark job
    adds: dict[int, list[dict]] = {i: [] for i in range(len(txns))}
    removes: dict[int, list[str]] = {i: [] for i in range(len(txns))}
    counts: dict[int, list[int]] = {}
    truncated: dict[int, int] = {}  # main table txn -> the epoch's newest truncate's source position
    for line in lines:
        kind, index, rest = line.split("\t", 2)
        i = int(index)
        if kind == "A":
            name, size, mtime, stats = rest.split("\t", 3)
            add = {"path": name, "partitionValues": {}, "size": int(size), "modificationTime": int(mtime),
                   "dataChange": True}
            if stats:
                add["stats"] = stats
            adds[i].append(add)
        elif kind == "R":
            removes[i].append(rest)
        elif kind == "T":
            truncated[i] = int(rest)
        else:
            if i in counts:  # each table's changes must be in ONE task (the runtime's shuffle by table)
                raise RuntimeError(f"table {txns[i].deltaLog().dataPath()}: its changes were split between tasks; "
                                   "nothing was committed")
            counts[i] = [int(x) for x in rest.split("\t")]
    if before_commit is not None:
        before_commit()

    def commit_one(i: int, app_id: str, seq: str | None, extra: Sequence[dict] = ()) -> int:
        source, inserted, updated, deleted, copied, cleared = counts.get(i, [0, 0, 0, 0, 0, 0])
        metrics = {
            "numSourceRows": source, "operationNumSourceRows": source, "numTargetRowsInserted": inserted,
            "numTargetRowsUpdated": updated, "numTargetRowsMatchedUpdated": updated,
            "numTargetRowsNotMatchedBySourceUpdated": 0, "numTargetRowsDeleted": deleted + cleared,
            "numTargetRowsMatchedDeleted": deleted, "numTargetRowsNotMatchedBySourceDeleted": cleared,
            "numTargetRowsCopied": copied, "numOutputRows": inserted + updated + copied,
            "numTargetFilesAdded": len(adds[i]), "numTargetBytesAdded": sum(a["size"] for a in adds[i]),
            "numTargetChangeFilesAdded": 0, "numTargetDeletionVectorsAdded": 0,
            "numTargetDeletionVectorsRemoved": 0, "numTargetDeletionVectorsUpdated": 0,
            "executionTimeMs": int((time.monotonic() - began) * 1000),
        }
        actions = [json.dumps({"add": a}) for a in adds[i]]
        actions.append(json.dumps({"txn": {"appId": app_id, "version": epoch, "lastUpdated": int(time.time() * 1000)}}))
        actions.extend(json.dumps(a) for a in extra)
        newer = f" AND (t.{seq} IS NULL OR s.{seq} > t.{seq})" if seq else ""
        return int(helper.commit(
            spark._jsparkSession, txns[i], "\n".join(actions), "\n".join(removes[i]), json.dumps(metrics),  # type: ignore[attr-defined]
            f"s.__kind = '-D'{newer}", f"s.__kind != '-D'{newer}", "s.__kind != '-D'",
        ))

    def commit(k: int) -> Merged | str:
        t, _, _, tomb = started[k]
        entry = spec_tables[k]
        i = entry["txn"]
        try:
            d = entry["tomb"]
            # a truncate's position is kept as the tombstone table's `<app>.truncated` version (source order):
            # later epochs drop changes no newer than it
            mark = ([{"txn": {"appId": f"{t.app_id}.truncated", "version": truncated[i],
                              "lastUpdated": int(time.time() * 1000)}}] if t.source_order and i in truncated else [])
            if tomb is not None and tomb[2] and (adds[d] or removes[d] or mark):
                commit_one(d, f"{t.app_id}.tombstones", t.sequence, mark)
            version = commit_one(i, t.app_id, t.sequence)
        except Exception as e:
            kind = conflict_kind(e)
            if kind is None:
                raise
            return f"its commit met a concurrent change ({kind})"
        _, inserted, updated, deleted, _, cleared = counts.get(i, [0, 0, 0, 0, 0, 0])
        if after_commit is not None:
            after_commit()
        return Merged(version, inserted + updated + deleted + cleared, time.monotonic() - began)

    done = map_concurrently(commit, list(range(len(started))), parallelism)
    out: dict[str, Merged] = dict(skipped)
    for (t, *_), result in zip(started, done):
        if isinstance(result, str):
            refused[t.table_id] = result
        else:
            out[t.table_id] = result
    return out, refused
