"""SCD type 2 apply: an epoch's changes become history rows of a Delta table.

The table keeps every version of a row: its data columns plus ``__START_AT``
and ``__END_AT`` (Databricks' names), both taken from the sequence (a
``sequence_column`` of the data, or the source's position stored in
``source_order_column``). The current version of a key has ``__END_AT`` null;
a delete closes it; a later insert opens a new one.

Per key, the epoch's changes are walked in sequence order from the key's
current version: a change starts a new version when there is no open one or
when a tracked column differs from the open version (``tracked``: the columns
whose changes make history, e.g. Databricks' ``track_history_column_list``);
a change of untracked columns only updates the open version in place; a delete
ends it. ONE MERGE per epoch (txn id ``app_id``, version ``epoch``: a replay
skips it) closes or updates the key's current row and inserts the new
versions.

A TRUNCATE (``truncates``) ends every current version at its position.

Order: a change no newer than the key's current version is ignored, and
deleted keys keep a tombstone (``delta_txn.apply_tombstones``), so replays and
late copies of old changes make no history. History is written in arrival
order: a change older than the current version but newer than an earlier one
is not back-filled between them. Two changes of one key with the same
sequence value are one change (the last the source sent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from streaming_engine.checkpoint import delta_txn
from streaming_engine.errors import CommitError
from streaming_engine.runtime import rows

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

START_AT, END_AT = "__START_AT", "__END_AT"


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def apply(
    spark: "SparkSession",
    frame: "DataFrame",
    target: "delta_txn.Target | str",
    keys: Sequence[str],
    data_columns: Sequence[str],
    tracked: Sequence[str],
    app_id: str,
    epoch: int,
    sequence_column: str,
    tombstone_retention_ms: int,
    truncates: bool = False,
) -> delta_txn.DeltaCommit:
    """``truncates`` (the sequence is the source order, ``__seq``): a TRUNCATE
    ends every current version at its position, the epoch's changes before it
    are dropped, and changes after it start new versions; its position is
    kept like the upsert's (``delta_txn.truncate_mark``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    seq = F.col(_q(sequence_column))
    by_key = Window.partitionBy(*[_q(k) for k in keys])
    truncate_at = None
    if truncates:
        frame, truncate_at = delta_txn.split_truncate(frame)
    changes = (
        frame.where(F.col(rows.KIND) != rows.UPDATE_BEFORE)
        .withColumn("__rn", F.row_number().over(Window.partitionBy(*[_q(k) for k in keys], seq)
                                                 .orderBy(F.col(rows.SEQ).desc())))
        .where("__rn = 1")
        .drop("__rn")
    )
    target = delta_txn._target(target)
    if not target.exists(spark):
        seq_type = dict(frame.dtypes)[sequence_column]
        empty = frame.select(*[_q(c) for c in data_columns], seq.cast(seq_type).alias(START_AT),
                             seq.cast(seq_type).alias(END_AT)).limit(0)
        target.save(empty.write.format("delta").mode("append"))
    table = target.table(spark).toDF()
    if START_AT not in table.columns or END_AT not in table.columns:
        raise CommitError("RUNTIME.FAILED", {"detail": (
            f"{target.name} is not an SCD type 2 table (no {START_AT}/{END_AT} columns); point the sink at a new "
            "table or use stored_as_scd_type = 1")})
    if truncates:
        changes = delta_txn.truncate_mark(spark, target, changes, keys, sequence_column, app_id, truncate_at)
    before, _ = delta_txn.last_commit(spark, target)
    kept = changes = changes.persist()
    try:
        latest = (changes.withColumn("__rn", F.row_number().over(by_key.orderBy(seq.desc(), F.col(rows.SEQ).desc())))
                  .where("__rn = 1").drop("__rn"))
        changes = delta_txn.apply_tombstones(spark, latest, target, keys, sequence_column, app_id, epoch,
                                             tombstone_retention_ms, changes=changes)
        # after a truncate no version is open: every change starts one, and the current rows end at it
        current = table if truncate_at is None else table.where(F.lit(False))
        source = _merge_source(changes, current, keys, data_columns, tracked, sequence_column)
        on = " AND ".join(["s.__close", f"t.{_q(END_AT)} IS NULL", *[f"t.{_q(k)} <=> s.{_q(k)}" for k in keys]])
        update = {_q(END_AT): f"s.{_q(END_AT)}",
                  **{_q(c): f"CASE WHEN s.__in_place THEN s.{_q(c)} ELSE t.{_q(c)} END"
                     for c in data_columns if c not in keys}}
        insert = {_q(c): f"s.{_q(c)}" for c in (*data_columns, START_AT, END_AT)}

        def merge(session: "SparkSession") -> None:
            builder = (
                target.table(session).alias("t").merge(source.alias("s"), on)
                .whenMatchedUpdate(set=update)
                .whenNotMatchedInsert(condition="NOT s.__close", values=insert)
            )
            if truncate_at is not None:
                builder = builder.whenNotMatchedBySourceUpdate(
                    condition=f"t.{_q(END_AT)} IS NULL AND t.{_q(START_AT)} < {truncate_at}",
                    set={_q(END_AT): f"CAST({truncate_at} AS {dict(table.dtypes)[START_AT]})"},
                )
            builder.execute()

        delta_txn.with_retries(f"merge into {target.name}", lambda: delta_txn.as_txn(spark, app_id, epoch, merge))
    finally:
        kept.unpersist()
    return delta_txn._outcome(spark, target, before)


def _merge_source(
    changes: "DataFrame", table: "DataFrame", keys: Sequence[str], data_columns: Sequence[str],
    tracked: Sequence[str], sequence_column: str,
) -> "DataFrame":
    """The MERGE's source: per key one ``__close`` row for its current version
    (its new ``__END_AT``, and with ``__in_place`` the values of untracked
    changes) and one row per new version."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    seq = F.col(_q(sequence_column))
    current = table.where(F.col(_q(END_AT)).isNull()).select(
        *[F.col(_q(k)).alias(f"__k{i}") for i, k in enumerate(keys)],
        F.col(_q(START_AT)).alias("__cur_start"),
        *[F.col(_q(c)).alias(f"__cur{i}") for i, c in enumerate(tracked)],
    )
    on = None
    for i, k in enumerate(keys):
        cond = F.col(_q(k)).eqNullSafe(F.col(f"__k{i}"))
        on = cond if on is None else on & cond
    c = changes.join(current, on, "left").drop(*[f"__k{i}" for i in range(len(keys))])
    c = c.where(F.col("__cur_start").isNull() | (seq > F.col("__cur_start")))  # no newer than the current version

    in_order = Window.partitionBy(*[_q(k) for k in keys]).orderBy(seq)
    kind = F.col(rows.KIND)
    prev_kind = F.lag(kind).over(in_order)
    first = prev_kind.isNull()
    open_before = F.when(first, F.col("__cur_start").isNotNull()).otherwise(prev_kind != rows.DELETE)
    same = F.lit(True)
    for i, name in enumerate(tracked):
        before = F.when(first, F.col(f"__cur{i}")).otherwise(F.lag(F.col(_q(name))).over(in_order))
        same = same & F.col(_q(name)).eqNullSafe(before)
    boundary = (kind == rows.DELETE) | ~open_before | ~same
    c = c.withColumn("__g", F.sum(boundary.cast("int")).over(in_order.rowsBetween(Window.unboundedPreceding, 0)))

    data = F.struct(*[F.col(_q(n)).alias(n) for n in data_columns])
    groups = c.groupBy(*[_q(k) for k in keys], "__g").agg(
        F.min(seq).alias("__start"),
        F.max_by(data, seq).alias("__last"),
        F.min_by(kind, seq).alias("__kind"),
        F.first("__cur_start", ignorenulls=True).alias("__cur_start"),
    )
    groups = groups.withColumn("__next", F.lead("__start").over(
        Window.partitionBy(*[_q(k) for k in keys]).orderBy("__g")))
    values = [F.col(f"__last.{_q(n)}").alias(n) for n in data_columns if n not in keys]
    versions = groups.where((F.col("__g") >= 1) & (F.col("__kind") != rows.DELETE)).select(
        *[_q(k) for k in keys], *values,
        F.col("__start").alias(START_AT), F.col("__next").alias(END_AT),
        F.lit(False).alias("__close"), F.lit(False).alias("__in_place"),
    )
    # the key's current version: ended by the first new boundary, updated in place by group 0
    closes = (
        groups.where(F.col("__cur_start").isNotNull() & (F.col("__g") <= 1))
        .groupBy(*[_q(k) for k in keys])
        .agg(
            F.max(F.when(F.col("__g") == 1, F.col("__start"))).alias(END_AT),
            F.max(F.when(F.col("__g") == 0, F.col("__last"))).alias("__last"),
        )
        .select(
            *[_q(k) for k in keys], *values,
            F.lit(None).cast(dict(changes.dtypes)[sequence_column]).alias(START_AT), F.col(END_AT),
            F.lit(True).alias("__close"), F.col("__last").isNotNull().alias("__in_place"),
        )
    )
    return versions.unionByName(closes)
