"""Idempotent Delta commits: the one place sinks write Delta tables.

Every write carries a transaction id that is stable across restarts
(``txnAppId``, from job/pipeline/sink/table names) and the epoch as its
version. The runtime reads each target's committed epoch once when a query
starts (``delta_log.inspect``) and never hands a sink an epoch at or below
it, so no write path looks the id up per epoch for exactly-once; the ids are
recorded so that the next start can read them.

- Appends: ``delta_log.append`` (Delta's writer + one commit with the ``txn``
  action) for path targets it may write; other tables go through
  :func:`append_with_writer` (Delta's DataFrameWriter with
  ``txnAppId``/``txnVersion``, which also skips a version it has seen).
- MERGE (:func:`upsert`) honours only the session settings
  ``spark.databricks.delta.write.txnAppId``/``txnVersion``; they are set and
  cleared around each MERGE under a lock (the settings are session-wide).

Conflicts that are safe to retry (another writer appended, or changed
metadata) are retried with backoff: the txn id makes a retry idempotent. Any
other conflict fails with the conflicting operation named.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from streaming_engine.errors import CommitError
from streaming_engine import schema as rows  # the envelope's names

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("streaming_engine.commit")
T = TypeVar("T")

# Safe to retry: the txn id makes the retried write idempotent, and the retry
# reads the new snapshot. ConcurrentTransactionException: another writer
# committed OUR transaction id meanwhile (a second driver of the same job: a
# paused process woken up, an old YARN attempt); the retry finds the epoch in
# the table and skips it (Delta's MERGE and writer do, delta_log._fence for the
# engine's appends), or writes it when the other driver committed another one.
# Not retried: ProtocolChangedException (the table was upgraded under us).
_RETRYABLE = (
    "ConcurrentTransactionException",
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentWriteException",
    "MetadataChangedException",
)
_TXN_APP = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_SESSION_TXN_LOCK = threading.Lock()


@dataclass(frozen=True)
class Target:
    """A Delta table: a directory (``is_path``) or a catalog table name."""

    name: str
    is_path: bool = True

    def exists(self, spark: "SparkSession") -> bool:
        from delta.tables import DeltaTable

        if self.is_path:
            return DeltaTable.isDeltaTable(spark, self.name)
        return spark.catalog.tableExists(self.name)

    def table(self, spark: "SparkSession"):
        from delta.tables import DeltaTable

        return DeltaTable.forPath(spark, self.name) if self.is_path else DeltaTable.forName(spark, self.name)

    def save(self, writer) -> None:
        if self.is_path:
            writer.save(self.name)
        else:
            writer.saveAsTable(self.name)


def _target(t: "Target | str") -> Target:
    return t if isinstance(t, Target) else Target(t)


@dataclass(frozen=True)
class DeltaCommit:
    version: int | None  # the table version this write created; None when skipped
    skipped: bool
    rows: int = 0  # rows written (appends) or changed (MERGE), from Delta's operation metrics


def last_commit(spark: "SparkSession", target: "Target | str") -> tuple[int | None, dict[str, str]]:
    """Latest version of the Delta table and its operation metrics.

    Read straight from ``_delta_log`` through Hadoop's FileSystem (no Spark job):
    from the last known version (cached per table, this process is its writer)
    or the last checkpoint, probe for the next commit files, then read the
    newest commit's ``commitInfo``.
    """
    t = _target(target)
    where = location(spark, t)
    if where is None:
        return None, {}
    jvm = spark._jvm  # type: ignore[attr-defined]
    log_dir = jvm.org.apache.hadoop.fs.Path(where.rstrip("/") + "/_delta_log")
    fs = log_dir.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if not fs.exists(log_dir):
        return None, {}
    version = _LAST_VERSION.get(where)
    if version is None:
        version = _last_checkpoint_version(jvm, fs, log_dir)
    while fs.exists(jvm.org.apache.hadoop.fs.Path(log_dir, f"{version + 1:020d}.json")):
        version += 1
    if version < 0:
        return None, {}
    _LAST_VERSION[where] = version
    return version, _commit_metrics(jvm, fs, log_dir, version)


_LAST_VERSION: dict[str, int] = {}


def location(spark: "SparkSession", t: "Target") -> str | None:
    if t.is_path:
        return t.name
    if not spark.catalog.tableExists(t.name):
        return None
    row = spark.sql(f"DESCRIBE DETAIL {t.name}").select("location").first()
    return row[0] if row else None


def new_columns(spark: "SparkSession", t: "Target", schema: "StructType") -> list:
    """The fields of ``schema`` the existing table ``t`` lacks (names compared
    as Delta compares them, ignoring case), in ``schema``'s order."""
    table = spark.read.format("delta").load(t.name) if t.is_path else spark.table(t.name)
    have = {f.name.lower() for f in table.schema.fields}
    return [f for f in schema.fields if f.name.lower() not in have]


def retyped_columns(spark: "SparkSession", t: "Target", schema: "StructType") -> list[tuple[Any, str]]:
    """(field of ``schema``, the table's type of it) for each top-level column the existing table ``t`` holds
    as another type (names compared as Delta compares them, ignoring case)."""
    table = spark.read.format("delta").load(t.name) if t.is_path else spark.table(t.name)
    have = {f.name.lower(): f.dataType.simpleString() for f in table.schema.fields}
    return [(f, have[f.name.lower()]) for f in schema.fields
            if f.name.lower() in have and have[f.name.lower()] != f.dataType.simpleString()]


def widen_columns(spark: "SparkSession", t: "Target", fields: list) -> None:
    """Change the type of ``fields`` in table ``t`` to theirs, each a widening Delta allows
    (``schema.widens``): Delta's type widening (the table feature ``typeWidening``, enabled here; files
    written before keep their type and are read as the new one). Metadata-only commits; idempotent across a
    crash (a restart finds the new types)."""
    name = f"delta.`{t.name.replace('`', '``')}`" if t.is_path else t.name
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    for f in fields:
        spark.sql(f"ALTER TABLE {name} ALTER COLUMN `{f.name.replace('`', '``')}` TYPE {f.dataType.simpleString()}")


def column_names(spark: "SparkSession", t: "Target") -> list[str]:
    """The existing table ``t``'s top-level column names, in its order."""
    table = spark.read.format("delta").load(t.name) if t.is_path else spark.table(t.name)
    return [f.name for f in table.schema.fields]


def rename_and_drop_columns(spark: "SparkSession", t: "Target", renames: list[tuple[str, str]],
                            drops: list[str]) -> None:
    """Rename (old, new) and drop columns of table ``t``: Delta allows both only under column mapping
    (``delta.columnMapping.mode = name``, enabled here first: a protocol upgrade that cannot be undone, after
    which readers need Delta 1.2 or later). Metadata-only commits (the data files keep the values under their
    physical names); each statement is idempotent across a crash, as a restart finds the table renamed."""
    quoted = lambda n: f"`{n.replace('`', '``')}`"  # noqa: E731
    name = f"delta.`{t.name.replace('`', '``')}`" if t.is_path else t.name
    mode = spark.sql(f"SHOW TBLPROPERTIES {name} ('delta.columnMapping.mode')").collect()
    if not mode or mode[0][1] != "name":
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    for old, new in renames:
        spark.sql(f"ALTER TABLE {name} RENAME COLUMN {quoted(old)} TO {quoted(new)}")
    if drops:
        spark.sql(f"ALTER TABLE {name} DROP COLUMNS ({', '.join(quoted(d) for d in drops)})")


def add_columns(spark: "SparkSession", t: "Target", fields: list) -> None:
    """Add ``fields`` (nullable) to the end of table ``t``'s schema: Delta's
    ALTER TABLE ADD COLUMNS, a commit of metadata only (rows written before
    read null in them). Idempotent across a crash: a restart finds them there."""
    name = f"delta.`{t.name.replace('`', '``')}`" if t.is_path else t.name
    columns = ", ".join(f"`{f.name.replace('`', '``')}` {f.dataType.simpleString()}" for f in fields)
    spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({columns})")


def _last_checkpoint_version(jvm, fs, log_dir) -> int:
    import json

    path = jvm.org.apache.hadoop.fs.Path(log_dir, "_last_checkpoint")
    if not fs.exists(path):
        return -1
    stream = fs.open(path)
    try:
        text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    try:
        return int(json.loads(text.splitlines()[0])["version"])
    except (ValueError, KeyError, IndexError):
        return -1


def _commit_metrics(jvm, fs, log_dir, version: int) -> dict[str, str]:
    import json

    stream = fs.open(jvm.org.apache.hadoop.fs.Path(log_dir, f"{version:020d}.json"))
    try:
        text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    for line in text.splitlines():
        if '"commitInfo"' in line:
            info = json.loads(line)["commitInfo"]
            return {k: str(v) for k, v in (info.get("operationMetrics") or {}).items()}
    return {}


def _rows(metrics: dict[str, str]) -> int:
    if "numOutputRows" in metrics and "numTargetRowsInserted" not in metrics:
        return int(metrics["numOutputRows"])
    keys = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    return sum(int(metrics.get(k, 0)) for k in keys)


def _outcome(spark: "SparkSession", target: Target, before: int | None) -> DeltaCommit:
    after, metrics = last_commit(spark, target)
    if after == before:
        return DeltaCommit(None, True, 0)
    return DeltaCommit(after, False, _rows(metrics))


def as_txn(spark: "SparkSession", app_id: str, epoch: int, fn: "Callable[[SparkSession], T]") -> T:
    """Run ``fn(session)`` (a MERGE built on ``session``: Delta takes its txn
    id from that session's settings) as version ``epoch`` of ``app_id``: Delta
    skips it when the table records that version already.

    Each txn id has a session of its own (a clone of ``spark``: the same
    settings, cache and SparkContext), so MERGEs of different tables run
    concurrently, each seeing only its own txn settings."""
    session, lock = _txn_session(spark, app_id)
    with lock:
        session.conf.set(_TXN_APP, app_id)
        session.conf.set(_TXN_VERSION, str(epoch))
        try:
            return fn(session)
        finally:
            session.conf.unset(_TXN_APP)
            session.conf.unset(_TXN_VERSION)


_TXN_SESSIONS: "dict[tuple[int, str], tuple[SparkSession, SparkSession, threading.Lock]]" = {}


def _txn_session(spark: "SparkSession", app_id: str) -> "tuple[SparkSession, threading.Lock]":
    from pyspark.sql import SparkSession

    with _SESSION_TXN_LOCK:
        found = _TXN_SESSIONS.get((id(spark), app_id))
        if found is None or found[0] is not spark:
            clone = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())  # type: ignore[attr-defined]
            found = _TXN_SESSIONS[(id(spark), app_id)] = (spark, clone, threading.Lock())
        return found[1], found[2]


def forget_sessions(spark: "SparkSession") -> None:
    """Drop the txn sessions cloned from ``spark`` (its run ended): the
    registry would keep them, and ``spark``, for the life of the driver."""
    with _SESSION_TXN_LOCK:
        for key in [k for k, found in _TXN_SESSIONS.items() if found[0] is spark]:
            del _TXN_SESSIONS[key]


def with_retries(
    what: str, fn: Callable[[], T], attempts: int = 5, backoff_s: float = 0.2, also: tuple[str, ...] = ()
) -> T:
    """Run ``fn``; retry Delta conflicts that are safe to retry (and the kinds
    in ``also``, safe for what ``fn`` does), with backoff."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as e:  # Delta raises py4j-wrapped JVM exceptions
            kind = conflict_kind(e)
            if kind is None:
                raise
            if (kind in _RETRYABLE or kind in also) and attempt < attempts:
                delay = backoff_s * (2 ** (attempt - 1))
                log.warning("retrying Delta conflict", extra={"what": what, "conflict": kind, "attempt": attempt})
                time.sleep(delay)
                continue
            raise CommitError(
                "RUNTIME.FAILED",
                {"detail": f"{what}: Delta write conflict {kind}{_conflicting_operation(e)}"},
            ) from e
    raise AssertionError("unreachable")


def conflict_kind(e: Exception) -> str | None:
    text = f"{type(e).__name__}: {e}"
    m = re.search(r"(Concurrent\w+Exception|MetadataChangedException|ProtocolChangedException)", text)
    return m.group(1) if m else None


def _conflicting_operation(e: Exception) -> str:
    m = re.search(r'"?operation"?\s*[:=]\s*"?([A-Z][A-Z ]+)"?', str(e))
    return f" (conflicting operation: {m.group(1).strip()})" if m else ""


def append_with_writer(
    spark: "SparkSession",
    df: "DataFrame",
    target: "Target | str",
    app_id: str,
    epoch: int,
    partition_by: Sequence[str] = (),
) -> DeltaCommit:
    """Append ``df`` (data columns only) as epoch ``epoch`` of ``app_id``
    through Delta's DataFrameWriter with ``txnAppId``/``txnVersion``: for
    tables ``delta_log.append`` does not write itself (catalog tables not
    created yet, other schemas, features outside its allow-list). Delta looks
    the app id up (a state rebuild) and skips an epoch it has."""
    target = _target(target)
    before, _ = last_commit(spark, target)

    def write() -> None:
        w = (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", str(epoch))
        )
        if partition_by:
            w = w.partitionBy(*partition_by)
        target.save(w)

    with_retries(f"append to {target.name}", write)
    return _outcome(spark, target, before)


def upsert(
    spark: "SparkSession",
    frame: "DataFrame",
    target: "Target | str",
    keys: Sequence[str],
    data_columns: Sequence[str],
    app_id: str,
    epoch: int,
    sequence_column: str | None = None,
    tombstones: bool = False,
    tombstone_retention_ms: int = 7 * 86_400_000,
    truncates: bool = False,
    source_order: bool = False,
    by_key: bool = False,
) -> DeltaCommit:
    """Apply row kinds by primary key with one MERGE, as epoch ``epoch`` of ``app_id``.

    Within the batch only the last change per key counts (by ``sequence_column``,
    else the source order ``__seq``); ``-U`` rows (update-before images) are
    dropped; ``-D`` deletes; ``+I``/``+U`` insert or update. With a
    ``sequence_column``, a change also never overwrites or deletes a row of
    the table that is newer: it applies only when its sequence is greater than
    the row's (or the row has none), so an older change arriving in a later
    epoch is ignored. Without one, the source's order is the epochs' order: a
    later epoch's change is the newer one.

    ``tombstones`` (with a ``sequence_column``): keep a Delta table of deleted
    keys and the sequence of their delete (``<table>/_cdc_tombstones``: a
    hidden folder, which readers and VACUUM of the table leave alone), kept for
    ``tombstone_retention_ms`` after the delete was applied, so an insert or
    update older than the delete that arrives later cannot bring the row back.
    It is merged FIRST (its own txn id ``<app_id>.tombstones``, so a replay
    skips what it applied): the main MERGE's epoch is the one :meth:`open`
    reports, and whenever it is recorded the tombstones of that epoch are too.
    A replay re-reads tombstones that may hold the epoch's own deletes: those
    only ever filter inserts and updates, never deletes.

    ``truncates``: the frame may hold TRUNCATE control rows; the newest one's
    ``__seq`` T clears the table: the epoch's changes before T are dropped and
    the MERGE deletes every row of the table no change of the epoch touches
    (``whenNotMatchedBySourceDelete``). With ``source_order`` (the sequence
    column holds ``__seq``: ``source_order_column``) it deletes only rows older
    than T, and T is kept as the tombstone table's truncate mark (txn id
    ``<app_id>.truncated``, version T: recorded once, so a replay skips it): a
    change older than the newest truncate that arrives in a later epoch is
    dropped too. With a ``sequence_column`` of the data, a sequence cannot be
    compared with a truncate's position: the sink refuses that combination.

    ``by_key``: a change's kind may be PARTIAL (``schema.partial_kind``: the
    columns at its positions in ``data_columns`` are unchanged): an update keeps
    the row's values of those columns; an insert of such a change (no row of
    its key) fails the MERGE naming the key and the column, since their values
    are nowhere (the source did not send them).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    clear = None  # the MERGE's not-matched-by-source delete condition: a truncate in this epoch
    truncate_at = None
    if truncates:
        frame, truncate_at = split_truncate(frame)
        clear = None if truncate_at is None else "true"

    order = [F.col(sequence_column).desc()] if sequence_column else []
    order.append(F.col(rows.SEQ).desc())
    latest = (
        frame.where(F.col(rows.KIND) != rows.UPDATE_BEFORE)
        .withColumn("__rn", F.row_number().over(Window.partitionBy(*keys).orderBy(*order)))
        .where("__rn = 1")
        .drop("__rn")
    )
    target = _target(target)
    if not target.exists(spark):
        # create the (empty) table first so MERGE has a target; idempotent
        target.save(frame.select(*[f"`{c}`" for c in data_columns]).limit(0).write.format("delta").mode("append"))
    if truncates and source_order and sequence_column:
        latest = truncate_mark(spark, target, latest, keys, sequence_column, app_id, truncate_at)
        if truncate_at is not None:
            seq = "`" + sequence_column.replace("`", "``") + "`"
            clear = f"t.{seq} IS NULL OR t.{seq} < {int(truncate_at)}"
    before, _ = last_commit(spark, target)
    cond = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
    values = {f"`{c}`": f"s.`{c}`" for c in data_columns}
    inserted = values
    if by_key:
        values, inserted = _partial_values(target.name, keys, data_columns)
    is_delete = f"s.{rows.KIND} = '{rows.DELETE}'"
    newer = "true"
    if sequence_column:
        seq = "`" + sequence_column.replace("`", "``") + "`"
        newer = f"(t.{seq} IS NULL OR s.{seq} > t.{seq})"
    kept = None
    if sequence_column and tombstones:
        latest = kept = latest.persist()  # read by both MERGEs
        latest = apply_tombstones(spark, latest, target, keys, sequence_column, app_id, epoch, tombstone_retention_ms)

    def merge(session: "SparkSession") -> None:
        builder = (
            target.table(session)
            .alias("t")
            .merge(latest.alias("s"), cond)
            .whenMatchedDelete(condition=f"{is_delete} AND {newer}")
            .whenMatchedUpdate(condition=f"NOT {is_delete} AND {newer}", set=values)
            .whenNotMatchedInsert(condition=f"NOT {is_delete}", values=inserted)
        )
        if clear is not None:
            builder = builder.whenNotMatchedBySourceDelete(condition=clear)
        builder.execute()

    try:
        with_retries(f"merge into {target.name}", lambda: as_txn(spark, app_id, epoch, merge))
    finally:
        if kept is not None:
            kept.unpersist()
    return _outcome(spark, target, before)


def _partial_values(name: str, keys: Sequence[str], data_columns: Sequence[str]) -> tuple[dict, dict]:
    """A MERGE's update and insert values for PARTIAL kinds: an unchanged column keeps the target's value; an
    insert that leaves one unchanged raises naming the key (there is no row to keep it from)."""
    def text(s: str) -> str:
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def q(c: str) -> str:
        return "`" + c.replace("`", "``") + "`"

    key_json = f"to_json(named_struct({', '.join(f'{text(k)}, s.{q(k)}' for k in keys)}))"
    update, insert = {}, {}
    for i, c in enumerate(data_columns):
        if c in keys:
            update[q(c)] = insert[q(c)] = f"s.{q(c)}"
            continue
        unchanged = rows.unchanged_sql(f"s.{rows.KIND}", i)
        update[q(c)] = f"CASE WHEN {unchanged} THEN t.{q(c)} ELSE s.{q(c)} END"
        message = text(
            f"{name}: an upsert leaves column {c} unchanged (a TOASTed value PostgreSQL did not send under "
            "REPLICA IDENTITY DEFAULT) and the table has no row of its key to keep the value from (an UPDATE "
            "that changed the primary key, or a row missing from the table); set REPLICA IDENTITY FULL on the "
            "source table and read it again into a new table (a new checkpoint) - key ")
        insert[q(c)] = f"CASE WHEN {unchanged} THEN raise_error(concat({message}, {key_json})) ELSE s.{q(c)} END"
    return update, insert


TOMBSTONES = "_cdc_tombstones"


def apply_tombstones(
    spark: "SparkSession", latest: "DataFrame", target: Target, keys: Sequence[str], sequence_column: str,
    app_id: str, epoch: int, retention_ms: int, changes: "DataFrame | None" = None,
) -> "DataFrame":
    """Merge the deletes of ``latest`` (the epoch's last change per key) into
    the tombstone table (txn ``<app_id>.tombstones``), then return ``changes``
    (default: ``latest``) without the inserts and updates no newer than their
    key's delete; deletes always pass."""
    from pyspark.sql import functions as F

    from streaming_engine.checkpoint import delta_log

    dead_keys = _tombstones_at(spark, target)
    # the tombstones as they were BEFORE this epoch: its own inserts remove
    # tombstones its older changes must still meet
    version = delta_log.table_version(spark, dead_keys)
    _merge_tombstones(spark, latest, dead_keys, keys, sequence_column, f"{app_id}.tombstones", epoch, retention_ms)
    changes = latest if changes is None else changes
    if version < 0:
        return changes
    dead = spark.read.format("delta").option("versionAsOf", version).load(dead_keys)
    seq = "`" + sequence_column.replace("`", "``") + "`"
    on = " AND ".join(f"s.`{k}` <=> d.`{k}`" for k in keys)
    return changes.alias("s").join(
        F.broadcast(dead).alias("d"),
        F.expr(f"{on} AND s.{rows.KIND} != '{rows.DELETE}' AND s.{seq} <= d.{seq}"), "left_anti",
    )


def _tombstones_at(spark: "SparkSession", target: Target) -> str:
    where = location(spark, target)
    if where is None:
        raise CommitError("RUNTIME.FAILED", {"detail": f"{target.name} has no location for its tombstone table"})
    return tombstones_location(where)


def tombstones_location(table_location: str) -> str:
    """Where the tombstone table of the table at ``table_location`` is."""
    return table_location.rstrip("/") + "/" + TOMBSTONES


def split_truncate(frame: "DataFrame") -> "tuple[DataFrame, int | None]":
    """The changes after the epoch's newest TRUNCATE control row, and its
    ``__seq`` (None: no truncate in the epoch; a Spark job over the frame)."""
    from pyspark.sql import functions as F

    at = frame.where(F.col(rows.KIND) == rows.TRUNCATE).agg(F.max(rows.SEQ)).first()[0]
    frame = frame.where(F.col(rows.KIND) != rows.TRUNCATE)
    return (frame, None) if at is None else (frame.where(F.col(rows.SEQ) > F.lit(at)), int(at))


def truncate_mark(
    spark: "SparkSession", target: Target, changes: "DataFrame", keys: Sequence[str], sequence_column: str,
    app_id: str, truncate_at: int | None,
) -> "DataFrame":
    """Record ``truncate_at`` (if any) as the tombstone table's truncate mark,
    then return ``changes`` without those no newer than the newest mark: a
    change older than a truncate is gone, in any epoch."""
    from pyspark.sql import functions as F

    from streaming_engine.checkpoint import delta_log

    mark_at = _tombstones_at(spark, target)
    if truncate_at is not None:
        _record_truncate(spark, changes, mark_at, keys, sequence_column, f"{app_id}.truncated", truncate_at)
    mark = delta_log.txn_version(spark, mark_at, f"{app_id}.truncated") if _is_delta(spark, mark_at) else -1
    return changes.where(F.col(rows.SEQ) > F.lit(mark)) if mark >= 0 else changes


def _record_truncate(
    spark: "SparkSession", frame: "DataFrame", location: str, keys: Sequence[str], sequence_column: str,
    app_id: str, at: int,
) -> None:
    """Keep ``at`` (a truncate's source position) as the tombstone table's
    ``app_id`` txn version: an empty append, skipped by Delta when the table
    already records ``at`` or a newer truncate."""
    from pyspark.sql import functions as F

    empty = frame.select(*[F.col(f"`{k}`") for k in keys], F.col(f"`{sequence_column}`"),
                         F.current_timestamp().alias("__deleted_at")).limit(0)
    with_retries(
        f"record a truncate in {location}",
        lambda: empty.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", at)
        .save(location),
    )


def _is_delta(spark: "SparkSession", location: str) -> bool:
    """A Delta table at exactly ``location`` (``DeltaTable.isDeltaTable`` looks
    for the table a path is inside of: the tombstones sit inside the table)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    log = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/_delta_log")
    return bool(log.getFileSystem(spark._jsc.hadoopConfiguration()).exists(log))  # type: ignore[attr-defined]


def _merge_tombstones(
    spark: "SparkSession", latest: "DataFrame", location: str, keys: Sequence[str], sequence_column: str,
    app_id: str, epoch: int, retention_ms: int,
) -> None:
    """Deletes of this epoch become tombstones (key, sequence, deleted at);
    newer inserts/updates remove them; tombstones past retention go."""
    from pyspark.sql import functions as F

    seq = "`" + sequence_column.replace("`", "``") + "`"
    is_delete = f"s.{rows.KIND} = '{rows.DELETE}'"
    changes = latest.select(*[F.col(f"`{k}`") for k in keys], F.col(seq), F.col(rows.KIND))
    if not _is_delta(spark, location):
        deletes = changes.where(F.col(rows.KIND) == rows.DELETE)
        if deletes.isEmpty():
            return  # nothing to remember, nothing to forget
        empty = deletes.select(*[F.col(f"`{k}`") for k in keys], F.col(seq), F.current_timestamp().alias("__deleted_at"))
        empty.limit(0).write.format("delta").mode("append").save(location)
    from delta.tables import DeltaTable

    on = " AND ".join(f"d.`{k}` <=> s.`{k}`" for k in keys)
    cutoff = f"d.__deleted_at < current_timestamp() - make_dt_interval(0, 0, 0, {retention_ms / 1000.0})"
    values = {**{f"`{k}`": f"s.`{k}`" for k in keys}, seq: f"s.{seq}", "__deleted_at": "current_timestamp()"}

    def merge(session: "SparkSession") -> None:
        (
            DeltaTable.forPath(session, location).alias("d")
            .merge(changes.alias("s"), on)
            .whenMatchedUpdate(condition=f"{is_delete} AND s.{seq} > d.{seq}", set=values)
            .whenMatchedDelete(condition=f"NOT ({is_delete}) AND s.{seq} > d.{seq}")
            .whenNotMatchedInsert(condition=is_delete, values=values)
            .whenNotMatchedBySourceDelete(condition=cutoff)
        ).execute()

    with_retries(f"merge into the tombstones at {location}", lambda: as_txn(spark, app_id, epoch, merge))
