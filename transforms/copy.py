"""Copy: copy fields to new fields (SeaTunnel Copy transform).

``fields { new_name = source_name, ... }`` appends one column per entry with the
source column's type; the legacy single-field form is ``src_field`` + ``dest_field``.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions, append_columns


class CopyOptions(MultiTableTransformOptions):
    fields: dict[str, str] | None = Field(None, description="New field name = source field name, one entry per copy.")
    src_field: str | None = Field(None, description="Field to copy (single-copy form; use with dest_field).")
    dest_field: str | None = Field(None, description="Name of the copy of src_field.")

    @model_validator(mode="after")
    def _check(self) -> "CopyOptions":
        single = self.src_field is not None or self.dest_field is not None
        if self.fields is not None and single:
            raise ValueError("set either fields { new = source } or src_field/dest_field, not both")
        if self.fields is None and not single:
            raise ValueError("fields is required: fields { new_name = source_name }")
        if single and (self.src_field is None or self.dest_field is None):
            raise ValueError("src_field and dest_field must be set together")
        if self.fields is not None and not self.fields:
            raise ValueError("fields is empty; add at least one new_name = source_name entry")
        return self

    def pairs(self) -> list[tuple[str, str]]:
        """(new name, source name) per copy."""
        if self.fields is not None:
            return list(self.fields.items())
        return [(self.dest_field, self.src_field)]  # type: ignore[list-item]


@register
class Copy(Transform):
    name: ClassVar[str] = "Copy"
    seatunnel_page = "transform-v2/copy.md"
    Options = CopyOptions
    description = "Copies fields to new fields."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, CopyOptions)
        by_name = {c.name: c for c in table.columns}
        new = []
        for dest, src in options.pairs():
            if src not in by_name:
                raise missing_column(table, src)
            new.append(Column(dest, by_name[src].type, by_name[src].nullable))
        return append_columns(table, new)

    def columns(self, ctx, cols, table, options):
        assert isinstance(options, CopyOptions)
        self.transform_table(table, options)  # same checks as at plan time
        return {**cols, **{dest: cols[src] for dest, src in options.pairs()}}
