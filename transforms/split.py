"""Split: split a field into several string fields (SeaTunnel Split transform).

``separator`` is a regular expression (as Java's String.split and Spark's split);
the pieces go into the ``output_fields`` appended as nullable strings (missing
pieces are null). The split field is kept.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions, append_columns, as_list, check_java_regex, no_duplicates
from transforms._runtime import col, project


class SplitOptions(MultiTableTransformOptions):
    separator: str = Field(min_length=1, description="Separator (a regular expression) between the pieces.")
    split_field: str = Field(min_length=1, description="The field to split.")
    output_fields: list[str] = Field(description="Names of the new fields, one per piece.")

    _list = field_validator("output_fields", mode="before")(lambda cls, v: as_list(v))

    @model_validator(mode="after")
    def _check(self) -> "SplitOptions":
        if not self.output_fields:
            raise ValueError("output_fields is empty; name at least one output field")
        no_duplicates("output_fields", self.output_fields)
        check_java_regex("separator", self.separator)
        return self


@register
class Split(Transform):
    name: ClassVar[str] = "Split"
    seatunnel_page = "transform-v2/split.md"
    Options = SplitOptions
    description = "Splits a field by a separator into new string fields."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, SplitOptions)
        if options.split_field not in table.names:
            raise missing_column(table, options.split_field)
        return append_columns(table, [Column(n, "string") for n in options.output_fields])

    def apply(self, ctx, df, table, options):
        """Java's ``value.toString().split(separator, n)`` with n = the number of output
        fields (the last piece keeps the rest); missing pieces and null values give null."""
        from pyspark.sql import functions as F

        assert isinstance(options, SplitOptions)
        self.transform_table(table, options)
        n = len(options.output_fields)
        pieces = F.split(col(options.split_field).cast("string"), F.lit(options.separator), F.lit(n))
        new = [F.get(pieces, i).alias(name) for i, name in enumerate(options.output_fields)]
        return project(df, [col(c) for c in table.names] + new)
