"""Replace: replace substrings of a string field (SeaTunnel Replace transform).

``pattern`` is a literal (``is_regex = false``, every occurrence is replaced) or
a regex (``is_regex = true``; ``replace_first = true`` replaces only the first
match). Compiles to Spark's regexp_replace / replace. The schema is unchanged;
``replace_field`` must be a string column.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import TableSchema
from transforms._common import MultiTableTransformOptions, check_java_regex, invalid


class ReplaceOptions(MultiTableTransformOptions):
    replace_field: str = Field(min_length=1, description="The string field whose value is rewritten.")
    pattern: str = Field(min_length=1, description="The text (or regex with is_regex = true) to replace.")
    replacement: str = Field(description="The text to put in its place.")
    is_regex: bool = Field(False, description="Treat pattern as a regular expression.")
    replace_first: bool = Field(False, description="Replace only the first match; only with is_regex = true.")

    @model_validator(mode="after")
    def _check(self) -> "ReplaceOptions":
        if self.replace_first and not self.is_regex:
            raise ValueError("replace_first only applies when is_regex = true; set is_regex = true or drop replace_first")
        if self.is_regex:
            check_java_regex("pattern", self.pattern)
        return self


@register
class Replace(Transform):
    name: ClassVar[str] = "Replace"
    Options = ReplaceOptions
    description = "Replaces a literal or regex pattern in a string field."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, ReplaceOptions)
        if options.replace_field not in table.names:
            raise missing_column(table, options.replace_field)
        col = table.column(options.replace_field)
        if col.type != "string":
            raise invalid(
                f"Replace needs a string field, but {col.name!r} of table {table.table_id!r} is {col.type}; "
                "cast it first (e.g. with the Sql transform)"
            )
        return table
