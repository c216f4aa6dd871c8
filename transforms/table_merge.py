"""TableMerge: merge sharded tables into one (SeaTunnel TableMerge transform).

Every table selected by ``table_match_regex`` (default: all) gets the id
``database.schema.table`` built from the options, where an unset ``database`` /
``schema`` keeps that part of the table's own path. Tables that end up with the
same id are merged: they must have the same columns (names and types, in the
same order); a column is nullable if it is in any of them, and the primary key
is kept when all of them declare the same key. Tables not selected pass through.
It may read several datasets (their tables are pooled). Only table ids change,
so execution is "table".
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from pydantic import Field, model_validator

from streaming_engine.plugins.base import Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms._common import UNLIMITED_INPUTS, MultiTableTransformOptions, invalid
from transforms._runtime import with_metadata


class TableMergeOptions(MultiTableTransformOptions):
    database: str | None = Field(None, description="Database of the merged table (default: keep the tables' own).")
    schema_: str | None = Field(None, alias="schema", description="Schema of the merged table (default: keep the tables' own).")
    table: str = Field(min_length=1, description="Name of the merged table.")

    @model_validator(mode="after")
    def _check(self) -> "TableMergeOptions":
        for key, value in (("database", self.database), ("schema", self.schema_), ("table", self.table)):
            if value is not None and ("." in value or not value.strip()):
                raise ValueError(f"{key} must be a plain name without dots; set database, schema and table separately")
        return self

    def target(self, table_id: str) -> str:
        parts = table_id.split(".")
        db = self.database or (parts[0] if len(parts) > 1 else None)
        schema = self.schema_ or (parts[1] if len(parts) > 2 else None)
        return ".".join(p for p in (db, schema, self.table) if p)


@register
class TableMerge(Transform):
    name: ClassVar[str] = "TableMerge"
    seatunnel_page = "transform-v2/table-merge.md"
    Options = TableMergeOptions
    description = "Merges tables with the same columns (e.g. shards) into one table."
    execution = "table"
    chainable = True
    max_inputs = UNLIMITED_INPUTS

    def output(self, inputs: list[Dataset]) -> Dataset:
        groups: dict[str, list[TableSchema]] = {}
        passed: set[str] = set()
        for dataset in inputs:
            for table in dataset.tables:
                opts = self.options_for(table.table_id)
                if opts is None:
                    tid = table.table_id
                    if tid in groups:
                        raise invalid(f"table {tid!r} appears twice in the input; give the inputs distinct table names")
                    passed.add(tid)
                    groups[tid] = [table]
                else:
                    assert isinstance(opts, TableMergeOptions)
                    tid = opts.target(table.table_id)
                    if tid in passed:
                        raise invalid(f"merged table {tid!r} clashes with an unmerged input table of the same name")
                    groups.setdefault(tid, []).append(table)
        return Dataset(tuple(_merge(tid, tables) for tid, tables in groups.items()))

    def describe(self) -> str:
        return f"TableMerge (into table {self.options.table})"

    def apply_frames(self, ctx, frames):
        """Union the frames of the tables merged into one id; ``__table`` is that id."""
        groups: dict[str, list] = {}
        for table_id, df in frames.items():
            opts = self.options_for(table_id)
            target = table_id if opts is None else opts.target(table_id)  # type: ignore[attr-defined]
            groups.setdefault(target, []).append((table_id, df))
        out = {}
        for target, members in groups.items():
            if len(members) == 1 and members[0][0] == target:
                out[target] = members[0][1]
                continue
            merged = None
            for _, df in members:
                framed = with_metadata(df, table=target)
                merged = framed if merged is None else merged.unionByName(framed)
            out[target] = merged
        return out


def _merge(table_id: str, tables: list[TableSchema]) -> TableSchema:
    first = tables[0]
    for other in tables[1:]:
        a = [(c.name, c.type) for c in first.columns]
        b = [(c.name, c.type) for c in other.columns]
        if a != b:
            raise invalid(
                f"cannot merge {first.table_id!r} and {other.table_id!r} into {table_id!r}: "
                + _first_difference(first.table_id, a, other.table_id, b)
            )
    columns = tuple(
        Column(c.name, c.type, any(t.columns[i].nullable for t in tables)) for i, c in enumerate(first.columns)
    )
    pk = first.primary_key if all(t.primary_key == first.primary_key for t in tables) else ()
    return replace(first, table_id=table_id, columns=columns, primary_key=pk)


def _first_difference(name_a: str, a: list[tuple[str, str]], name_b: str, b: list[tuple[str, str]]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"column {i + 1} is `{x[0]} {x[1]}` in {name_a!r} but `{y[0]} {y[1]}` in {name_b!r}"
    if len(a) > len(b):
        return f"{name_a!r} has the extra column {a[len(b)][0]!r}"
    return f"{name_b!r} has the extra column {b[len(a)][0]!r}"
