"""Small plugins used by the planner tests (registered under Test* names)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

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


def register_all() -> None:
    for reg, cls in ((SOURCES, TSource), (TRANSFORMS, TMap), (TRANSFORMS, TPy), (TRANSFORMS, TOpaque),
                     (TRANSFORMS, TJoin), (TRANSFORMS, TMerge), (SINKS, TSink)):
        reg.register(cls)
