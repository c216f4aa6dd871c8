"""Rate: Spark's built-in ``rate`` source, an endless stream for load tests.

Output: one table (named ``plugin_output``, else "default") with Spark's fixed
columns ``timestamp timestamp`` and ``value bigint``.
"""

from __future__ import annotations

import re
from typing import ClassVar

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

    options: RateOptions

    def output(self) -> Dataset:
        tid = self.options.plugin_output or "default"
        return Dataset((TableSchema(tid, (Column("timestamp", "timestamp"), Column("value", "bigint"))),))

    def describe(self) -> str:
        return f"Rate ({self.options.rowsPerSecond} rows/s)"
