"""Small plugins used by the planner tests (registered under Test* names)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, ClassVar

from pydantic import Field, SecretStr

from streaming_engine.plugins.base import (
    Sink,
    SinkOptions,
    Source,
    SourceOptions,
    Transform,
    TransformOptions,
    missing_column,
)
from streaming_engine.plugins.registry import SINKS, SOURCES, TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from sinks.noop import Noop, NoopOptions


class TSourceOptions(SourceOptions):
    tables: list[str] = Field(default_factory=lambda: ["t"], description="table ids to produce")
    row_num: int = Field(5, alias="row.num", description="rows")


class TSource(Source):
    name = "TestSource"
    Options = TSourceOptions

    def output(self) -> Dataset:
        cols = (Column("id", "bigint"), Column("name", "string"))
        return Dataset(tuple(TableSchema(t, cols, ("id",)) for t in self.options.tables))


class TMapOptions(TransformOptions):
    column: str = Field("name", description="column that must exist")


class TMap(Transform):
    name = "TestMap"
    Options = TMapOptions
    execution: ClassVar[str] = "expression"

    def transform_table(self, table, options):
        if options.column not in table.names:
            raise missing_column(table, options.column)
        return table


class TPy(TMap):
    name = "TestPy"
    execution: ClassVar[str] = "python"


class TOpaque(TMap):
    name = "TestOpaque"
    chainable: ClassVar[bool] = False


class TJoin(TMap):
    name = "TestJoin"
    max_inputs: ClassVar[int] = 2


class TMergeOptions(TransformOptions):
    pass


class TMerge(Transform):
    name = "TestMerge"
    Options = TMergeOptions
    execution: ClassVar[str] = "table"

    def output(self, inputs):
        first = inputs[0].tables[0]
        return Dataset((first.renamed("merged"),))


class TSinkOptions(SinkOptions):
    require: str | None = Field(None, description="column the sink requires")
    single_pass: bool = Field(False, description="write() scans its input once (Sink.scans_input_once)")


class TSink(Sink):
    name = "TestSink"
    Options = TSinkOptions
    commit_protocol: ClassVar[str] = "delta-txn"

    def scans_input_once(self):
        return self.options.single_pass

    def check_input(self, dataset):
        for t in dataset.tables:
            if self.options.require and self.options.require not in t.names:
                raise missing_column(t, self.options.require)

    def targets(self, dataset):
        return [f"{t} -> /tmp/{t}" for t in dataset.table_ids]


class TSecretsOptions(NoopOptions):
    endpoint: str | None = Field(None, description="a URI, may carry user-info")
    password: str | None = Field(None, description="secret by its name")
    dsn: SecretStr | None = Field(None, description="secret by its type (the name says nothing)")
    config: dict[str, Any] | None = Field(None, description="nested client settings, like kafka.config")


class TSecrets(Noop):
    """A runnable Noop whose options hold secrets of every kind; it reports its
    endpoint as the target and logs the bare password (a careless plugin), so
    tests see whether the engine's edges redact them."""

    name = "TestSecrets"
    Options = TSecretsOptions

    def targets(self, dataset):
        return [f"{t} -> {self.options.endpoint}" for t in dataset.table_ids]

    def describe(self) -> str:
        return f"TestSecrets ({self.options.endpoint})"

    def write(self, ctx, frames, dataset):
        logging.getLogger("streaming_engine.tests").warning(
            "TestSecrets writing to %s with %s", self.options.endpoint, self.options.password
        )
        return [dataclasses.replace(c, target=self.options.endpoint or c.target) for c in super().write(ctx, frames, dataset)]


def register_all() -> None:
    for reg, cls in ((SOURCES, TSource), (TRANSFORMS, TMap), (TRANSFORMS, TPy), (TRANSFORMS, TOpaque),
                     (TRANSFORMS, TJoin), (TRANSFORMS, TMerge), (SINKS, TSink), (SINKS, TSecrets)):
        reg.register(cls)
