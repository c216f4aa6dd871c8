"""Sql: transform rows with a SQL query (SeaTunnel Sql transform; Spark SQL at run time).

``query = "select a, b as c, f(x) as y from <input> where ..."``. At plan time the
query is read by :mod:`transforms._sql_parse`: the output schema is derived from
the SELECT list (``*`` expands; column references keep their type; CAST, literals,
arithmetic and common functions are typed; other expressions are typed string),
referenced columns must exist, and per-row-incompatible SQL (JOIN, GROUP BY,
aggregates, ORDER BY, LIMIT, ...) is rejected.

SeaTunnel requires the FROM table to be the input dataset's name. Plan-time
datasets carry no name, so any FROM name is accepted here and recorded
(:attr:`Sql.query_table`, shown in :meth:`describe`); the runtime registers the
input under that name. With several input tables the query applies to each.
The primary key is kept when all its columns pass through unchanged.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, PrivateAttr, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import TableSchema
from transforms._common import MultiTableTransformOptions, duplicate_column
from transforms._sql_parse import ParsedQuery, output_columns, parse_query


class SqlOptions(MultiTableTransformOptions):
    query: str = Field(min_length=1, description="SELECT ... FROM <input dataset name> [WHERE ...], one row in, at most one out.")

    _parsed: ParsedQuery | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _parse(self) -> "SqlOptions":
        self._parsed = parse_query(self.query)
        return self

    @property
    def parsed(self) -> ParsedQuery:
        if self._parsed is None:
            self._parsed = parse_query(self.query)
        return self._parsed


@register
class Sql(Transform):
    name: ClassVar[str] = "Sql"
    Options = SqlOptions
    description = "Selects, computes and filters fields with a SQL query."
    execution = "expression"
    chainable = True
    max_inputs = 1

    options: SqlOptions

    @property
    def query_table(self) -> str:
        """The table name the query selects FROM (should be the input dataset's name)."""
        return self.options.parsed.table

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, SqlOptions)
        columns, refs = output_columns(table, options.parsed)
        seen: set[str] = set()
        for c in columns:
            if c.name in seen:
                raise duplicate_column(table, c.name)
            seen.add(c.name)
        passed = {r for r in refs if r is not None}
        pk = table.primary_key if table.primary_key and set(table.primary_key) <= passed else ()
        return TableSchema(table.table_id, tuple(columns), pk)

    def describe(self) -> str:
        return f"Sql (from {self.query_table})"
