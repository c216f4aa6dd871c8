"""RowKindExtractor: turn change rows into append-only rows carrying their kind
(SeaTunnel RowKindExtractor transform).

Appends a non-null string column ``custom_field_name`` (default "row_kind") holding
the kind: ``transform_type`` SHORT gives +I, -U, +U, -D; FULL gives INSERT,
UPDATE_BEFORE, UPDATE_AFTER, DELETE. Every output row is an INSERT.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import KIND, Column, TableSchema
from transforms._common import MultiTableTransformOptions, append_columns, upper
from transforms._runtime import col


class RowKindExtractorOptions(MultiTableTransformOptions):
    custom_field_name: str = Field("row_kind", min_length=1, description="Name of the added row-kind column.")
    transform_type: Literal["SHORT", "FULL"] = Field(
        "SHORT", description="Value format: SHORT (+I, -U, +U, -D) or FULL (INSERT, UPDATE_BEFORE, ...)."
    )

    _upper = field_validator("transform_type", mode="before")(lambda cls, v: upper(v))


@register
class RowKindExtractor(Transform):
    name: ClassVar[str] = "RowKindExtractor"
    seatunnel_page = "transform-v2/rowkind-extractor.md"
    Options = RowKindExtractorOptions
    description = "Adds the row kind as a column and makes every row an INSERT."
    execution = "expression"

    def reads_metadata(self) -> frozenset[str]:
        return frozenset({KIND})
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, RowKindExtractorOptions)
        return append_columns(table, [Column(options.custom_field_name, "string", nullable=False)])

    def apply(self, ctx, df, table, options):
        """The kind as a column (``+I`` ... or INSERT ...); every output row becomes an INSERT."""
        from pyspark.sql import functions as F

        from streaming_engine.runtime import rows

        assert isinstance(options, RowKindExtractorOptions)
        self.transform_table(table, options)
        kind = F.col(rows.KIND)
        if options.transform_type == "FULL":
            value = None
            for short, full in rows.NAME_OF_KIND.items():
                value = (F.when if value is None else value.when)(kind == short, F.lit(full))
        else:
            value = kind
        return df.select(
            col(rows.TABLE), F.lit(rows.INSERT).alias(rows.KIND), col(rows.SEQ),
            *[col(c) for c in table.names], value.alias(options.custom_field_name),
        )  # fmt: skip
