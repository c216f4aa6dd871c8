"""FilterRowKind: keep or drop rows by row kind (SeaTunnel FilterRowKind transform).

Set exactly one of ``include_kinds`` / ``exclude_kinds`` (INSERT, UPDATE_BEFORE,
UPDATE_AFTER, DELETE). The schema is unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import KIND, TableSchema
from transforms._common import MultiTableTransformOptions, as_list, no_duplicates

RowKind = Literal["INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"]
ROW_KINDS: tuple[str, ...] = ("INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE")


class FilterRowKindOptions(MultiTableTransformOptions):
    include_kinds: list[RowKind] | None = Field(None, description="Row kinds to keep (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE).")
    exclude_kinds: list[RowKind] | None = Field(None, description="Row kinds to drop.")

    @field_validator("include_kinds", "exclude_kinds", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        v = as_list(v)
        return [x.strip().upper() if isinstance(x, str) else x for x in v] if isinstance(v, list) else v

    @model_validator(mode="after")
    def _check(self) -> "FilterRowKindOptions":
        if (self.include_kinds is None) == (self.exclude_kinds is None):
            raise ValueError("set exactly one of include_kinds or exclude_kinds")
        key = "include_kinds" if self.include_kinds is not None else "exclude_kinds"
        kinds = getattr(self, key)
        if not kinds:
            raise ValueError(f"{key} is empty; list at least one of {', '.join(ROW_KINDS)}")
        no_duplicates(key, kinds)
        return self

    def kept_kinds(self) -> tuple[str, ...]:
        if self.include_kinds is not None:
            return tuple(k for k in ROW_KINDS if k in self.include_kinds)
        return tuple(k for k in ROW_KINDS if k not in (self.exclude_kinds or ()))


@register
class FilterRowKind(Transform):
    name: ClassVar[str] = "FilterRowKind"
    seatunnel_page = "transform-v2/filter-rowkind.md"
    Options = FilterRowKindOptions
    description = "Keeps or drops rows by their row kind."
    execution = "expression"

    def reads_metadata(self) -> frozenset[str]:
        return frozenset({KIND})
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        return table

    def apply(self, ctx, df, table, options):
        from pyspark.sql import functions as F

        from streaming_engine.runtime import rows

        assert isinstance(options, FilterRowKindOptions)
        kept = [rows.KIND_OF_NAME[k] for k in options.kept_kinds()]
        return df.where(F.col(rows.KIND).isin(kept))
