"""TableRename: rename tables by rules (SeaTunnel TableRename transform).

Same options as FieldRename, with SeaTunnel's TableRenameTransform rules: the
table part of each table path is renamed (replacements, case, prefix, suffix: see
:mod:`transforms._rename`) and ``convert_case`` also applies to the database and
schema parts: "source.user_shop" with convert_case = UPPER becomes
"SOURCE.USER_SHOP". Only table ids change, so execution is "table".
Two tables ending up with the same id is an error (use TableMerge to merge them).
"""

from __future__ import annotations

from typing import ClassVar

from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema
from transforms._common import invalid
from transforms._rename import RenameOptions
from transforms._runtime import with_metadata


class TableRenameOptions(RenameOptions):
    pass


@register
class TableRename(Transform):
    name: ClassVar[str] = "TableRename"
    seatunnel_page = "transform-v2/table-rename.md"
    Options = TableRenameOptions
    description = "Renames tables by case conversion, prefix, suffix and regex replacements."
    execution = "table"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, RenameOptions)
        new_name = options.convert(table.table_name)
        if not new_name or "." in new_name:
            raise invalid(f"TableRename turns table {table.table_id!r} into the invalid name {new_name!r}")
        parts = [options.convert_case_of(p) for p in table.table_id.split(".")[:-1]]
        return table.renamed(".".join(parts + [new_name]))

    def output(self, inputs: list[Dataset]) -> Dataset:
        result = super().output(inputs)
        originals = [t.table_id for d in inputs for t in d.tables]
        seen: dict[str, str] = {}
        for before, after in zip(originals, result.table_ids):
            if after in seen:
                raise invalid(
                    f"tables {seen[after]!r} and {before!r} would both be named {after!r}; "
                    "narrow table_match_regex or use TableMerge to merge them"
                )
            seen[after] = before
        return result

    def apply_frames(self, ctx, frames):
        """Each matched table under its new id; ``__table`` carries the new id."""
        out = {}
        tables = {t.table_id: t for d in ctx.inputs for t in d.tables}
        for table_id, df in frames.items():
            opts = self.options_for(table_id)
            new_id = table_id if opts is None else self.transform_table(tables[table_id], opts).table_id
            if new_id in out:
                raise invalid(f"tables would both be named {new_id!r}; narrow table_match_regex or use TableMerge")
            out[new_id] = df if new_id == table_id else with_metadata(df, table=new_id)
        return out
