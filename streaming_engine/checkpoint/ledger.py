"""The commit ledger: a Delta table per job recording every committed epoch.

One row per (pipeline, epoch, sink, table): the target, the Delta version the
epoch created (null when the table held the epoch already) and the rows.
The ledger rows of an epoch are written in ONE Delta append after all sinks of
the pipeline committed it, so "the epoch is in the ledger" means "every sink
has it".

The append carries the pipeline's transaction id (``<job>/<pipeline>/ledger``,
version = the epoch), fenced as every engine append (``delta_log._fence``): a
second driver of the job (a paused process woken up) cannot record an epoch
twice. Spark re-runs an epoch right after a restart
(``resume.Progress.replay``): for that epoch :func:`record` skips what the
fence finds, and on a ledger written before it carried transaction ids it
first looks whether the epoch's rows are there.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from streaming_engine.checkpoint import delta_log, delta_txn
from streaming_engine.redact import redact_text
from streaming_engine.checkpoint.record import CommitRecord

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

# A Delta checkpoint is a Spark job (about 1 s here) run inside the commit
# that reaches the interval: at Delta's default of 10 the ledger's own
# checkpoint stalled every tenth epoch of every pipeline. Readers of the ledger
# replay at most this many small commit files instead.
LEDGER_PROPERTIES = {"delta.checkpointInterval": "100"}

LEDGER_DDL = (
    "job string, pipeline string, epoch bigint, sink string, `table` string, target string, "
    "delta_version bigint, rows bigint, replayed boolean, committed_at timestamp"
)


def ledger_path(checkpoint_root: str, job: str) -> str:
    return f"{checkpoint_root.rstrip('/')}/{job}/_ledger"


def record(
    spark: "SparkSession",
    path: str,
    job: str,
    pipeline: str,
    epoch: int,
    commits: Sequence[CommitRecord],
    replay: bool = False,
    before_commit: Callable[[], None] | None = None,
) -> bool:
    """Append the epoch's rows in ONE commit; False when ``replay`` and they are
    there already. ``committed_at`` is the commit's instant (UTC).
    ``before_commit`` runs between the file write and the commit (fault injection)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    if replay and _has_epoch(spark, path, pipeline, epoch):
        return False
    now = datetime.now(timezone.utc)
    now = now.replace(microsecond=now.microsecond // 1000 * 1000)  # whole milliseconds, as Delta's statistics
    data = [
        (job, pipeline, epoch, c.sink, c.table, redact_text(c.target), c.version, c.rows, c.skipped, now)
        for c in commits
    ]
    schema = _ledger_struct()
    table = pa.Table.from_pylist(
        [dict(zip(schema.names, row)) for row in data], schema=to_arrow_schema(schema, timezone="UTC")
    )
    # a query start creates the table (create); where it is still missing, the
    # first append creates it: of two first appends racing to create it one
    # fails (ProtocolChangedException) and is tried again on the other's table
    recent = delta_log.recent_first()
    done = delta_txn.with_retries(
        f"append to the ledger {path}",
        lambda: delta_log.append_small(spark, path, table, schema, before_commit=before_commit,
                                       properties=LEDGER_PROPERTIES, recent=recent(),
                                       app_id=ledger_app_id(job, pipeline), epoch=epoch),
        also=("ProtocolChangedException",),
    )
    return not done.skipped


def ledger_app_id(job: str, pipeline: str) -> str:
    """The transaction id of a pipeline's ledger appends."""
    return f"{job}/{pipeline}/ledger"


def create(spark: "SparkSession", path: str) -> bool:
    """Create the ledger, empty, where there is none (at query start, while
    Spark starts the query: the first epoch then appends to it rather than
    creating it, ~0.1 s less on its path on S3); False when it is there."""
    return delta_txn.with_retries(
        f"create the ledger {path}",
        lambda: delta_log.create(spark, path, _ledger_struct(), LEDGER_PROPERTIES),
        also=("ProtocolChangedException",),
    )


def _ledger_struct():
    from pyspark.sql.types import StructType

    global _STRUCT
    if _STRUCT is None:
        _STRUCT = StructType.fromDDL(LEDGER_DDL)
    return _STRUCT


_STRUCT = None


def _has_epoch(spark: "SparkSession", path: str, pipeline: str, epoch: int) -> bool:
    from pyspark.sql import functions as F

    if delta_log.table_version(spark, path) < 0:
        return False  # no epoch recorded yet: the first append creates the ledger
    found = (
        spark.read.format("delta").load(path)
        .where((F.col("pipeline") == pipeline) & (F.col("epoch") == epoch))
        .limit(1)
        .collect()
    )
    return bool(found)


class Summary:
    """:func:`last_committed`'s rows for the epochs a run committed, folded in
    as they commit (:meth:`add`): one row per (pipeline, sink, table), however
    many epochs a run of weeks commits. A run's summary without a query over
    the ledger."""

    def __init__(self) -> None:
        self._acc: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(self, pipeline: str, epoch: int, commits: Sequence[CommitRecord]) -> None:
        for c in commits:
            row = self._acc.setdefault(
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

    def rows(self) -> list[dict[str, Any]]:
        return [dict(self._acc[k]) for k in sorted(self._acc)]


def summarize(epochs: Iterable[tuple[str, int, Sequence[CommitRecord]]]) -> list[dict[str, Any]]:
    """:class:`Summary` of some epochs ((pipeline, epoch, commits))."""
    summary = Summary()
    for pipeline, epoch, commits in epochs:
        summary.add(pipeline, epoch, commits)
    return summary.rows()


ROLLUP_DDL = (
    "pipeline string, sink string, `table` string, last_epoch bigint, target string, delta_version bigint, "
    "total_rows bigint, epochs bigint, up_to_epoch bigint"
)


def rollup_path(path: str) -> str:
    """The ledger's rollup table: one row per (pipeline, sink, table) holding
    what the epochs folded out of the ledger added up to."""
    return f"{path.rstrip('/')}_rollup"


def last_committed(spark: "SparkSession", path: str) -> list[dict[str, Any]]:
    """The last committed epoch per (pipeline, sink, table), with totals: the
    ledger's rows of the epochs a pipeline has not rolled up yet, plus its
    rollup rows (``up_to_epoch``: the ledger rows below it are counted there,
    also in the moment between the rollup's commit and their delete)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return []
    spark.read.format("delta").load(path).createOrReplaceTempView("__ledger")
    rolled = DeltaTable.isDeltaTable(spark, rollup_path(path))
    if rolled:
        spark.read.format("delta").load(rollup_path(path)).createOrReplaceTempView("__ledger_rollup")
    live = (
        "SELECT l.pipeline, l.sink, l.`table`, l.epoch AS last_epoch, l.target, l.delta_version, l.rows AS total_rows, "
        "1 AS epochs FROM __ledger l"
        + (" LEFT JOIN (SELECT pipeline, max(up_to_epoch) AS up_to FROM __ledger_rollup GROUP BY pipeline) c "
           "ON l.pipeline = c.pipeline WHERE l.epoch >= coalesce(c.up_to, 0)" if rolled else "")
    )
    folded = (" UNION ALL SELECT pipeline, sink, `table`, last_epoch, target, delta_version, total_rows, epochs "
              "FROM __ledger_rollup") if rolled else ""
    rows = spark.sql(
        f"""
        SELECT pipeline, sink, `table`, max(last_epoch) AS last_epoch, max_by(target, last_epoch) AS target,
               max(delta_version) AS delta_version, sum(total_rows) AS total_rows, sum(epochs) AS epochs
        FROM ({live}{folded}) GROUP BY pipeline, sink, `table` ORDER BY pipeline, sink, `table`
        """
    ).collect()
    return [r.asDict() for r in rows]


def roll_up(spark: "SparkSession", path: str, pipeline: str, before_epoch: int) -> int:
    """Fold the pipeline's ledger rows of the epochs below ``before_epoch`` into
    its rollup rows (one commit of the rollup table), then delete them from the
    ledger (one commit). A crash between the two commits leaves rows the
    rollup counts already: :func:`last_committed` ignores them (below
    ``up_to_epoch``) and the next rollup deletes them. Returns the ledger rows
    folded. What stays in the ledger (the newest epochs) is what a replay's
    check and the fence need; the txn ids of the ledger's appends are in its
    log, not in its rows."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    rpath = rollup_path(path)
    prior: dict[tuple[str, str], dict[str, Any]] = {}
    if DeltaTable.isDeltaTable(spark, rpath):
        for r in spark.read.format("delta").load(rpath).where(F.col("pipeline") == pipeline).collect():
            prior[(r["sink"], r["table"])] = r.asDict()
    since = max((r["up_to_epoch"] for r in prior.values()), default=0)
    ledger = DeltaTable.forPath(spark, path)
    folded = 0
    if before_epoch > since:
        new = (
            spark.read.format("delta").load(path)
            .where((F.col("pipeline") == pipeline) & (F.col("epoch") >= since) & (F.col("epoch") < before_epoch))
            .groupBy("sink", "table")
            .agg(F.max("epoch").alias("last_epoch"), F.max_by("target", "epoch").alias("target"),
                 F.max("delta_version").alias("delta_version"), F.sum("rows").alias("total_rows"),
                 F.count(F.lit(1)).alias("epochs"))
            .collect()
        )
        for r in new:
            folded += r["epochs"]
            old = prior.get((r["sink"], r["table"]))
            take_new = old is None or r["last_epoch"] >= old["last_epoch"]
            prior[(r["sink"], r["table"])] = {
                "pipeline": pipeline, "sink": r["sink"], "table": r["table"],
                "last_epoch": r["last_epoch"] if take_new else old["last_epoch"],
                "target": r["target"] if take_new else old["target"],
                "delta_version": max(v for v in (r["delta_version"], old and old["delta_version"], -1) if v is not None),
                "total_rows": (r["total_rows"] or 0) + (old["total_rows"] if old else 0),
                "epochs": r["epochs"] + (old["epochs"] if old else 0),
            }
        for row in prior.values():
            row["up_to_epoch"] = before_epoch
            if row["delta_version"] == -1:
                row["delta_version"] = None
        from pyspark.sql.types import StructType

        df = spark.createDataFrame(list(prior.values()), StructType.fromDDL(ROLLUP_DDL)).coalesce(1)
        quoted = pipeline.replace("'", "''")
        delta_txn.with_retries(
            f"roll up the ledger {path}",
            lambda: df.write.format("delta").mode("overwrite").option("replaceWhere", f"pipeline = '{quoted}'")
            .save(rpath) if DeltaTable.isDeltaTable(spark, rpath) else df.write.format("delta").save(rpath),
            also=("ProtocolChangedException",),
        )
    delta_txn.with_retries(
        f"delete the rolled-up epochs from the ledger {path}",
        lambda: ledger.delete((F.col("pipeline") == pipeline) & (F.col("epoch") < max(before_epoch, since))),
    )
    return folded
