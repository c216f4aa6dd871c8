"""Run one transform chain over a batch's per-table frames.

The chain runs exactly the segments the physical plan shows
(``plan.physical.segments``): a Catalyst run applies each transform's Spark
column expressions, composing consecutive projections into ONE select; a Python run composes the transforms' Arrow functions and
runs them in ONE ``mapInArrow`` pass per table, never one pass per transform.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable, Iterator

from streaming_engine.dag.logical import LogicalDag, LogicalVertex
from streaming_engine.plan.physical import segments
from streaming_engine.runtime import rows
from streaming_engine.runtime.context import TransformContext
from streaming_engine.schema import TableSchema

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

Frames = Mapping[str, "DataFrame"]


def transform_context(spark: "SparkSession", dag: LogicalDag, v: LogicalVertex, batch_id: int) -> TransformContext:
    producers = {u.output: u for u in dag.vertices if u.output}
    return TransformContext(
        spark=spark,
        vertex_id=v.id,
        input_names=v.inputs,
        inputs=tuple(producers[name].schema for name in v.inputs),
        output=v.schema,
        batch_id=batch_id,
    )


def run_chain(spark: "SparkSession", dag: LogicalDag, members: list[LogicalVertex], frames: Frames, batch_id: int) -> Frames:
    for kind, group in segments(members):
        if kind == "catalyst":
            frames = _catalyst(spark, dag, group, frames, batch_id)
        else:
            frames = _fused_python(spark, dag, group, frames, batch_id)
    return frames


def _catalyst(spark: "SparkSession", dag: LogicalDag, group: list[LogicalVertex], frames: Frames, batch_id: int) -> Frames:
    """Apply a Catalyst run; consecutive projections (``Transform.columns``)
    become ONE select per table (their column expressions composed), the
    others apply their own DataFrame operations in between."""
    pending: dict[str, dict] = {}  # table id -> output columns over frames[table id]
    for m in group:
        plugin = m.plugin
        ctx = transform_context(spark, dag, m, batch_id)
        if not plugin.is_projection():  # type: ignore[attr-defined]
            frames = plugin.apply_frames(ctx, _select_pending(frames, pending))  # type: ignore[attr-defined]
            pending = {}
            continue
        inputs = {t.table_id: t for d in ctx.inputs for t in d.tables}
        for table_id in frames:
            opts = plugin.options_for(table_id)  # type: ignore[attr-defined]
            if opts is None:
                continue
            table = inputs[table_id]
            cols = pending.get(table_id) or {n: rows.column(n) for n in table.names}
            pending[table_id] = plugin.columns(ctx, cols, table, opts)  # type: ignore[attr-defined]
    return _select_pending(frames, pending)


def _select_pending(frames: Frames, pending: dict[str, dict]) -> Frames:
    return {t: rows.select_columns(df, pending[t]) if t in pending else df for t, df in frames.items()}


def _fused_python(spark: "SparkSession", dag: LogicalDag, group: list[LogicalVertex], frames: Frames, batch_id: int) -> Frames:
    ctxs = [transform_context(spark, dag, m, batch_id) for m in group]
    first_inputs = {t.table_id: t for d in ctxs[0].inputs for t in d.tables}
    out: Frames = {}
    for table_id, df in frames.items():
        schema: TableSchema = first_inputs[table_id]
        fns: list[Callable[["pa.RecordBatch"], "pa.RecordBatch"]] = []
        for m, ctx in zip(group, ctxs):
            opts = m.plugin.options_for(table_id)  # type: ignore[attr-defined]
            if opts is None:
                continue
            fns.append(m.plugin.arrow_function(ctx, schema, opts))  # type: ignore[attr-defined]
            schema = m.plugin.transform_table(schema, opts)  # type: ignore[attr-defined]
        out[table_id] = df if not fns else df.mapInArrow(_compose(fns), rows.table_struct(schema))
    return out


def _compose(fns: list[Callable[["pa.RecordBatch"], "pa.RecordBatch"]]):
    """One iterator function for mapInArrow applying every function in order."""

    def run(batches: Iterator["pa.RecordBatch"]) -> Iterator["pa.RecordBatch"]:
        for batch in batches:
            for fn in fns:
                batch = fn(batch)
                if batch is None or batch.num_rows == 0:
                    break
            else:
                yield batch

    return run
