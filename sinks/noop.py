"""Noop: consume rows and drop them (our sink, for benchmarks). Accepts any input.

At run time every table's frame is fully computed (Spark's ``noop`` data
source: every column of every row is produced, nothing is stored) and its rows
are counted in the same pass (an ``Observation``), so the commit records and
metrics show the throughput without a sink's cost. Nothing is written, so a
replayed epoch is harmless.
"""

from __future__ import annotations

from typing import Any, ClassVar

from streaming_engine.plugins.base import Sink, SinkOptions
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset


class NoopOptions(SinkOptions):
    pass


@register
class Noop(Sink):
    name: ClassVar[str] = "Noop"
    Options = NoopOptions
    description = "Consumes and discards rows; measures the pipeline without a sink's cost."
    commit_protocol = "none"

    def reads_metadata(self) -> frozenset[str]:
        return frozenset()

    def targets(self, dataset: Dataset) -> list[str]:
        return [f"{t.table_id} -> noop" for t in dataset.tables]

    def scans_input_once(self) -> bool:
        return True  # one write with an observed row count per table

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from streaming_engine.runtime.context import CommitRecord

        out = []
        for table in dataset.tables:
            df = frames.get(table.table_id)
            if df is None:
                continue
            obs = Observation()
            df.observe(obs, F.count(F.lit(1)).alias("rows")).write.format("noop").mode("overwrite").save()
            rows = int((obs.get or {}).get("rows") or 0)
            out.append(CommitRecord(ctx.sink_uid, table.table_id, "noop", rows))
        return out
