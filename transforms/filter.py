"""Filter: keep or drop fields (SeaTunnel Filter transform; a projection, not a row filter).

Set exactly one of ``include_fields`` (kept, in the listed order), ``exclude_fields``
(dropped) or the legacy ``fields`` (same as include_fields). Every listed field must
exist. The primary key survives only when all its columns are kept.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import TableSchema
from transforms._common import MultiTableTransformOptions, as_list, invalid, no_duplicates


class FilterOptions(MultiTableTransformOptions):
    include_fields: list[str] | None = Field(None, description="Fields to keep, in this order; all others are dropped.")
    exclude_fields: list[str] | None = Field(None, description="Fields to drop; all others are kept.")
    fields: list[str] | None = Field(None, description="Legacy spelling of include_fields.")

    _lists = field_validator("include_fields", "exclude_fields", "fields", mode="before")(
        lambda cls, v: as_list(v)
    )

    @model_validator(mode="after")
    def _check(self) -> "FilterOptions":
        given = [k for k in ("include_fields", "exclude_fields", "fields") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "set exactly one of include_fields or exclude_fields"
                + (f" (got {' and '.join(given)})" if given else "")
            )
        key = given[0]
        values: list[Any] = getattr(self, key)
        if key != "exclude_fields" and not values:
            raise ValueError(f"{key} is empty: a table needs at least one field")
        no_duplicates(key, values)
        return self

    def kept(self) -> list[str] | None:
        return self.include_fields if self.include_fields is not None else self.fields


@register
class Filter(Transform):
    name: ClassVar[str] = "Filter"
    seatunnel_page = "transform-v2/filter.md"
    Options = FilterOptions
    description = "Keeps (include_fields) or drops (exclude_fields) fields."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, FilterOptions)
        names = set(table.names)
        kept = options.kept()
        listed = kept if kept is not None else options.exclude_fields or []
        for field in listed:
            if field not in names:
                raise missing_column(table, field)
        if kept is not None:
            by_name = {c.name: c for c in table.columns}
            columns = [by_name[n] for n in kept]
        else:
            dropped = set(listed)
            columns = [c for c in table.columns if c.name not in dropped]
            if not columns:
                raise invalid(f"exclude_fields would remove every column of table {table.table_id!r}")
        return table.with_columns(columns)

    def columns(self, ctx, cols, table, options):
        out = self.transform_table(table, options)
        return {c: cols[c] for c in out.names}
