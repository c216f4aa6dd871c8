"""The job-history Delta table: every state change of every job, with its cause.

One table per checkpoint root (``<checkpoint.dir>/_history``, or
``env.history.path``), shared by every job under it, so the history of a job
outlives its driver and one table lists them all. One row per transition of
the job or one of its pipelines: job id and name, the entity ("job" or a
pipeline key), the old and new state, when, why; the job's CREATED row
carries the config's hash and the three plans as JSON, its end row the final
metrics and the error. Everything written is redacted.

Rows are appended by one writer thread per run (a run's transitions must not
wait on the store), in ONE small Delta append per batch of transitions (the
ledger's driver-side append: no Spark job); :meth:`HistoryWriter.close`
flushes what is queued.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from streaming_engine.checkpoint import delta_log, delta_txn
from streaming_engine.redact import redact_text

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger("streaming_engine.control")

HISTORY_DDL = (
    "job_id string, seq bigint, job_name string, entity string, previous string, state string, at timestamp, "
    "cause string, config_hash string, detail string"
)
PROPERTIES = {"delta.checkpointInterval": "100"}
TERMINAL = ("FAILED", "SAVEPOINT_DONE", "CANCELED", "FINISHED", "UNKNOWABLE")


def history_path(checkpoint_dir: str, configured: str | None = None) -> str:
    return configured or f"{checkpoint_dir.rstrip('/')}/_history"


def _struct():
    from pyspark.sql.types import StructType

    return StructType.fromDDL(HISTORY_DDL)


def _instant(t: float) -> datetime:
    at = datetime.fromtimestamp(t, timezone.utc)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)  # whole milliseconds, as Delta's statistics


def row(job_id: str, seq: int, job_name: str, entity: str, previous: str | None, state: str, at: float,
        cause: str | None = None, config_hash: str | None = None, detail: Any = None) -> dict[str, Any]:
    return {
        "job_id": job_id, "seq": seq, "job_name": redact_text(job_name), "entity": redact_text(entity), "previous": previous,
        "state": state, "at": _instant(at), "cause": redact_text(cause) if cause else None, "config_hash": config_hash,
        "detail": redact_text(json.dumps(detail, sort_keys=True, default=str)) if detail is not None else None,
    }


def append(spark: "SparkSession", path: str, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = _struct()
    table = pa.Table.from_pylist(rows, schema=to_arrow_schema(schema, timezone="UTC"))
    recent = delta_log.recent_first()
    delta_txn.with_retries(
        f"append to the job history {path}",
        lambda: delta_log.append_small(spark, path, table, schema, properties=PROPERTIES, recent=recent()),
        also=("ProtocolChangedException",),
    )


class HistoryWriter:
    """Appends a run's transitions in order on a thread of its own."""

    def __init__(self, spark: "SparkSession", path: str):
        self.spark, self.path = spark, path
        self._queue: "queue.Queue[dict[str, Any] | None]" = queue.Queue()
        self.failed: str | None = None
        self._thread = threading.Thread(target=self._run, name="job-history", daemon=True)
        self._thread.start()

    def add(self, r: dict[str, Any]) -> None:
        self._queue.put(r)

    def _run(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while True:  # everything queued meanwhile goes into the same append
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            done = None in batch
            rows = [r for r in batch if r is not None]
            if not rows:
                continue
            try:
                append(self.spark, self.path, rows)
            except Exception as e:  # noqa: BLE001 - the job's data matters more than its history
                self.failed = redact_text(str(e).splitlines()[0] if str(e) else repr(e))[:500]
                log.error("job history not written", extra={"history": self.path, "error": self.failed})

    def close(self, timeout: float = 60.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)


# -- reading -------------------------------------------------------------------
def _frame(spark: "SparkSession", path: str):
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return spark.read.format("delta").load(path)


def jobs(spark: "SparkSession", path: str, name: str | None = None, job_id: str | None = None,
         limit: int = 100) -> list[dict[str, Any]]:
    """One summary per job, newest first: id, name, state (its newest job-level
    state), created, finished (its end state's time), error (the end's cause)."""
    df = _frame(spark, path)
    if df is None:
        return []
    df.where("entity = 'job'").createOrReplaceTempView("__history")
    where = []
    if name is not None:
        where.append(f"job_name = {_sql_str(name)}")
    if job_id is not None:
        where.append(f"job_id = {_sql_str(job_id)}")
    # the first end state a job recorded is its end (an UNKNOWABLE recorded later by
    # another run, for a driver that died after recording its end, does not count)
    end = "state IN (" + ", ".join(f"'{s}'" for s in TERMINAL) + ")"
    rows = spark.sql(
        f"""
        SELECT job_id, max_by(job_name, struct(at, seq)) AS job_name,
               coalesce(min_by(CASE WHEN {end} THEN state END, CASE WHEN {end} THEN struct(at, seq) END),
                        max_by(state, struct(at, seq))) AS state,
               min(at) AS created, min(CASE WHEN {end} THEN at END) AS finished,
               min_by(CASE WHEN {end} THEN cause END, CASE WHEN {end} THEN struct(at, seq) END) AS error,
               max(config_hash) AS config_hash,
               min_by(CASE WHEN {end} THEN detail END, CASE WHEN {end} THEN struct(at, seq) END) AS metrics
        FROM __history {'WHERE ' + ' AND '.join(where) if where else ''}
        GROUP BY job_id ORDER BY created DESC LIMIT {int(limit)}
        """
    ).collect()
    return [r.asDict() for r in rows]


def transitions(spark: "SparkSession", path: str, job_id: str) -> list[dict[str, Any]]:
    """Every recorded transition of one job (the job's and its pipelines'), in order."""
    df = _frame(spark, path)
    if df is None:
        return []
    rows = df.where(f"job_id = {_sql_str(job_id)}").orderBy("at", "seq").collect()
    return [r.asDict() for r in rows]


def _sql_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
