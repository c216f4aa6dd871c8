"""Rate: Spark's built-in ``rate`` source, an endless stream for load tests.

Output: one table (named ``plugin_output``, else "default") with Spark's fixed
columns ``timestamp timestamp`` and ``value bigint``.

Run time (:meth:`Rate.read`): ``spark.readStream.format("rate")`` with
``rowsPerSecond``, ``rampUpTime`` and ``numPartitions`` (default: the plugin's
``parallelism`` if set, else Spark's default parallelism). Rows are ``+I`` and
``__seq`` is ``value``: the rate source derives values and timestamps from the
batch's offsets, so a replayed batch produces the same rows. The source never
ends; in a BATCH job (available-now trigger) it produces what was due at start,
usually nothing.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import AliasChoices, Field, field_validator

from streaming_engine.plugins.base import Source, SourceOptions
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, Dataset, TableSchema

_DURATION = re.compile(r"^\d+\s*(us|ms|s|m|min|h|d)?$", re.I)


class RateOptions(SourceOptions):
    rowsPerSecond: int = Field(
        1, ge=1, validation_alias=AliasChoices("rowsPerSecond", "rows_per_second"),
        description="Rows generated per second (alias rows_per_second).",
    )  # fmt: skip
    rampUpTime: str = Field(
        "0s", validation_alias=AliasChoices("rampUpTime", "ramp_up_time"),
        description='Time to ramp up to rowsPerSecond, e.g. "5s" or "1m" (alias ramp_up_time).',
    )  # fmt: skip
    numPartitions: int | None = Field(
        None, ge=1, validation_alias=AliasChoices("numPartitions", "num_partitions"),
        description="Partitions of the generated rows; default: Spark's default parallelism (alias num_partitions).",
    )  # fmt: skip

    @field_validator("rampUpTime", mode="before")
    @classmethod
    def _duration(cls, v: object) -> object:
        if isinstance(v, int):
            v = f"{v}s"
        if isinstance(v, str) and not _DURATION.match(v.strip()):
            raise ValueError(f'rampUpTime {v!r} is not a duration; write e.g. "10s", "500ms" or "2m"')
        return v.strip() if isinstance(v, str) else v


@register
class Rate(Source):
    name: ClassVar[str] = "Rate"
    Options = RateOptions
    description = "Spark's rate source: (timestamp, value) rows at a fixed rate, for benchmarks."
    boundedness = "unbounded"
    restore_tunable = frozenset({"rowsPerSecond", "rampUpTime"})

    options: RateOptions

    def output(self) -> Dataset:
        tid = self.options.plugin_output or "default"
        return Dataset((TableSchema(tid, (Column("timestamp", "timestamp"), Column("value", "bigint"))),))

    def describe(self) -> str:
        return f"Rate ({self.options.rowsPerSecond} rows/s)"

    # -- run time ------------------------------------------------------------
    def read(self, ctx: Any) -> Any:
        from pyspark.sql import functions as F

        from streaming_engine.runtime import rows as envelope

        o = self.options
        r = (
            ctx.spark.readStream.format("rate")
            .option("rowsPerSecond", str(o.rowsPerSecond))
            .option("rampUpTime", o.rampUpTime.replace(" ", ""))
        )
        partitions = o.numPartitions or o.parallelism
        if partitions:
            r = r.option("numPartitions", str(partitions))
        table = ctx.dataset.tables[0]
        return r.load().select(
            F.lit(table.table_id).alias(envelope.TABLE),
            F.lit(envelope.INSERT).alias(envelope.KIND),
            F.col("value").alias(envelope.SEQ),
            F.col("timestamp"),
            F.col("value"),
        )
