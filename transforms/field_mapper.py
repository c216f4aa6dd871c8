"""FieldMapper: select, reorder and rename fields (SeaTunnel FieldMapper transform).

``field_mapper { source = target, ... }``: the output has exactly the listed
fields, in the listed order, under their target names.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions, renamed_columns


class FieldMapperOptions(MultiTableTransformOptions):
    field_mapper: dict[str, str] = Field(
        description="Input field = output field; unlisted fields are dropped, output follows this order."
    )

    @model_validator(mode="after")
    def _check(self) -> "FieldMapperOptions":
        if not self.field_mapper:
            raise ValueError("field_mapper is empty; map at least one field: field_mapper { source = target }")
        targets = list(self.field_mapper.values())
        for t in targets:
            if not t:
                raise ValueError("field_mapper has an empty target name")
            if targets.count(t) > 1:
                raise ValueError(f"field_mapper maps two fields to {t!r}; target names must be unique")
        return self


@register
class FieldMapper(Transform):
    name: ClassVar[str] = "FieldMapper"
    seatunnel_page = "transform-v2/field-mapper.md"
    Options = FieldMapperOptions
    description = "Keeps the mapped fields, in mapping order, renamed to their targets."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, FieldMapperOptions)
        by_name = {c.name: c for c in table.columns}
        columns = []
        for src, dest in options.field_mapper.items():
            if src not in by_name:
                raise missing_column(table, src)
            columns.append(Column(dest, by_name[src].type, by_name[src].nullable))
        return renamed_columns(table, columns, dict(options.field_mapper))

    def columns(self, ctx, cols, table, options):
        assert isinstance(options, FieldMapperOptions)
        self.transform_table(table, options)
        return {dest: cols[src] for src, dest in options.field_mapper.items()}
