"""The commit ledger: a Delta table per job recording every committed epoch.

One row per (pipeline, epoch, sink, table): the target, the Delta version the
epoch created (null when a replay found it already committed) and the rows.
The ledger rows of an epoch are written in ONE Delta append after all sinks of
the pipeline committed it, so "the epoch is in the ledger" means "every sink
has it".

Exactly once without Delta's ``txnAppId``: a Delta append that carries a txn
id makes Delta reconstruct the table's whole state to look the id up (about a
second per append here, growing with the log), and the ledger is appended every
epoch. A pipeline is the only writer of its rows, and Spark re-runs an epoch
only right after a restart (the one batch in its offset log without a commit
entry: ``replayed_epoch``). So a plain append is exact for every other epoch,
and for that one epoch :func:`record` first looks whether its rows are there
(written before the crash, Spark's commit log not yet).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from streaming_engine.checkpoint import delta_direct, delta_txn
from streaming_engine.redact import redact_text
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
    import os

    from delta.tables import DeltaTable

    directory = delta_direct.local_directory(spark, path) if delta_direct.qualifies(spark, path) else None
    if directory is not None:
        if not os.path.isdir(os.path.join(directory, "_delta_log")):
            delta_direct.create_table(spark, path, _ledger_struct())
        return
    if not DeltaTable.isDeltaTable(spark, path):
        spark.createDataFrame([], LEDGER_DDL).write.format("delta").mode("append").save(path)


def record(
    spark: "SparkSession",
    path: str,
    job: str,
    pipeline: str,
    epoch: int,
    commits: Sequence[CommitRecord],
    replay: bool = False,
) -> bool:
    """Append the epoch's rows; False when ``replay`` and they are there already."""
    from delta.tables import DeltaTable

    if replay and DeltaTable.isDeltaTable(spark, path) and _has_epoch(spark, path, pipeline, epoch):
        return False
    now = datetime.now(timezone.utc)
    data = [
        (job, pipeline, epoch, c.sink, c.table, redact_text(c.target), c.version, c.rows, c.skipped, now) for c in commits
    ]
    if delta_direct.qualifies(spark, path) and _append_direct(spark, path, epoch, data):
        return True
    df = spark.createDataFrame([(*row[:-1], now.replace(tzinfo=None)) for row in data], LEDGER_DDL)
    delta_txn.with_retries(f"append to the ledger {path}", lambda: df.write.format("delta").mode("append").save(path))
    return True


def _append_direct(spark: "SparkSession", path: str, epoch: int, data: list[tuple]) -> bool:
    """The epoch's rows as one Parquet file written here and one Delta commit
    (no Spark job: a Spark append of a few rows costs about half a second).
    False when the ledger table is not plain (the caller appends through Spark)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = _ledger_struct()
    arrow = to_arrow_schema(schema, timezone="UTC")
    table = pa.Table.from_pylist([dict(zip(arrow.names, row)) for row in data], schema=arrow)
    directory = delta_direct.local_directory(spark, path)
    assert directory is not None
    file = delta_direct.write_local_file(directory, table, epoch)
    try:
        delta_txn.with_retries(
            f"append to the ledger {path}",
            lambda: delta_direct.commit_files(spark, path, schema, [file], None, epoch, check_txn=False),
        )
    except delta_direct.NotPlain:
        delta_direct.remove(directory, [file])
        return False
    return True


def _ledger_struct():
    from pyspark.sql.types import StructType

    global _STRUCT
    if _STRUCT is None:
        _STRUCT = StructType.fromDDL(LEDGER_DDL)
    return _STRUCT


_STRUCT = None


def _has_epoch(spark: "SparkSession", path: str, pipeline: str, epoch: int) -> bool:
    from pyspark.sql import functions as F

    found = (
        spark.read.format("delta").load(path)
        .where((F.col("pipeline") == pipeline) & (F.col("epoch") == epoch))
        .limit(1)
        .collect()
    )
    return bool(found)


def replayed_epoch(spark: "SparkSession", checkpoint: str) -> int | None:
    """The batch a (re)started query will run again first: the newest batch in
    the checkpoint's offset log that has no commit-log entry (None: none)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    root = jvm.org.apache.hadoop.fs.Path(checkpoint)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]

    def newest(name: str) -> int:
        d = jvm.org.apache.hadoop.fs.Path(root, name)
        if not fs.exists(d):
            return -1
        ids = [int(st.getPath().getName()) for st in fs.listStatus(d) if st.getPath().getName().isdigit()]
        return max(ids, default=-1)

    offsets = newest("offsets")
    return offsets if offsets > newest("commits") else None


def summarize(epochs: Iterable[tuple[str, int, Sequence[CommitRecord]]]) -> list[dict[str, Any]]:
    """:func:`last_committed`'s rows for some epochs held in memory
    ((pipeline, epoch, commits) as the runner saw them): a run's summary
    without a query over the ledger."""
    acc: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pipeline, epoch, commits in epochs:
        for c in commits:
            row = acc.setdefault(
                (pipeline, c.sink, c.table),
                {"pipeline": pipeline, "sink": c.sink, "table": c.table, "last_epoch": -1, "target": redact_text(c.target),
                 "delta_version": None, "total_rows": 0, "epochs": 0},
            )
            if epoch >= row["last_epoch"]:
                row["last_epoch"], row["target"] = epoch, redact_text(c.target)
            if c.version is not None:
                row["delta_version"] = max(row["delta_version"] or 0, c.version)
            row["total_rows"] += c.rows
            row["epochs"] += 1
    return [acc[k] for k in sorted(acc)]


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
