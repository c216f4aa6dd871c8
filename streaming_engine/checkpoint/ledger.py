"""The commit ledger: a Delta table per job recording every committed epoch.

One row per (pipeline, epoch, sink, table): the target, the Delta version the
epoch created (null when a replay found it already committed) and the rows.
The ledger row of an epoch is written after all sinks of the pipeline
committed it, itself idempotently (txnAppId ``<job>.<pipeline>.ledger``), so
"the epoch is in the ledger" means "every sink has it".
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

from streaming_engine.checkpoint import delta_txn
from streaming_engine.runtime.context import CommitRecord

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

LEDGER_DDL = (
    "job string, pipeline string, epoch bigint, sink string, `table` string, target string, "
    "delta_version bigint, rows bigint, replayed boolean, committed_at timestamp"
)


def ledger_path(checkpoint_root: str, job: str) -> str:
    return f"{checkpoint_root.rstrip('/')}/{job}/_ledger"


def ensure(spark: "SparkSession", path: str) -> None:
    """Create the (empty) ledger before any pipeline starts: pipelines of one
    job append to it concurrently, and two first writes racing to create a
    Delta table conflict (ProtocolChangedException)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        spark.createDataFrame([], LEDGER_DDL).write.format("delta").mode("append").save(path)


def record(
    spark: "SparkSession", path: str, job: str, pipeline: str, epoch: int, commits: Sequence[CommitRecord]
) -> None:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    data = [
        (job, pipeline, epoch, c.sink, c.table, c.target, c.version, c.rows, c.skipped, now) for c in commits
    ]
    df = spark.createDataFrame(data, LEDGER_DDL)
    delta_txn.append(spark, df, path, f"{job}.{pipeline}.ledger", epoch)


def last_committed(spark: "SparkSession", path: str) -> list[dict[str, Any]]:
    """The last committed epoch per (pipeline, sink, table), with totals."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return []
    spark.read.format("delta").load(path).createOrReplaceTempView("__ledger")
    rows = spark.sql(
        """
        SELECT pipeline, sink, `table`, max(epoch) AS last_epoch, max_by(target, epoch) AS target,
               max(delta_version) AS delta_version, sum(rows) AS total_rows, count(*) AS epochs
        FROM __ledger GROUP BY pipeline, sink, `table` ORDER BY pipeline, sink, `table`
        """
    ).collect()
    return [r.asDict() for r in rows]
