"""FieldRename: rename every field by rules (SeaTunnel FieldRename transform).

Options ``convert_case`` (UPPER/LOWER), ``prefix``, ``suffix`` and
``replacements_with_regex``; see :mod:`transforms._rename` for the order. The
primary key follows the renamed columns; two columns ending with the same name
is SCHEMA.DUPLICATE_COLUMN.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import TableSchema
from transforms._common import invalid, renamed_columns
from transforms._rename import RenameOptions


class FieldRenameOptions(RenameOptions):
    pass


@register
class FieldRename(Transform):
    name: ClassVar[str] = "FieldRename"
    seatunnel_page = "transform-v2/field-rename.md"
    Options = FieldRenameOptions
    description = "Renames fields by case conversion, prefix, suffix and regex replacements."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, RenameOptions)
        renames = {c.name: options.convert(c.name) for c in table.columns}
        for old, new in renames.items():
            if not new:
                raise invalid(f"FieldRename turns column {old!r} of table {table.table_id!r} into an empty name")
        columns = [replace(c, name=renames[c.name]) for c in table.columns]
        return renamed_columns(table, columns, renames)

    def columns(self, ctx, cols, table, options):
        out = self.transform_table(table, options)
        return {new: cols[old] for old, new in zip(table.names, out.names)}
