"""Sql: transform rows with a SQL query (SeaTunnel Sql transform, compiled to Spark SQL).

``query = "select a, b as c, f(x) as y from <input> where ..."``. At plan time the query is
read with sqlglot (:mod:`transforms._sql_compile`): per-row-incompatible SQL (JOIN, GROUP BY,
aggregates, ORDER BY, LIMIT, ...) and unknown functions are rejected with their position, the
output schema is derived from the SELECT list (``*`` expands; column references keep their type;
CAST, literals, arithmetic, CASE and SeaTunnel's functions have SeaTunnel's result types),
referenced columns must exist, and every SeaTunnel function (``sql-functions.md``,
:data:`transforms._sql_functions.FUNCTIONS`) is rewritten into native Spark expressions with
SeaTunnel's meaning (no Python at run time). Other Spark built-in functions pass through.

SeaTunnel requires the FROM table to be the input dataset's name. Plan-time datasets carry no
name, so any FROM name is accepted here and recorded (:attr:`Sql.query_table`, shown in
:meth:`describe`). At run time the compiled query runs as Spark SQL over each table's frame,
registered as a temporary view and read under the FROM name (so ``fake.id`` still resolves);
WHERE drops rows, row kinds and table ids pass through, and the result is cast to the plan-time
schema. With several input tables the query applies to each.
The primary key is kept when all its columns pass through unchanged.
"""

from __future__ import annotations

import re
import uuid
from typing import ClassVar

from pydantic import Field, PrivateAttr, model_validator
from sqlglot import exp
from sqlglot.tokens import TokenType

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.runtime import rows
from streaming_engine.schema import TableSchema
from transforms._common import MultiTableTransformOptions, duplicate_column
from transforms._runtime import TERMINAL, col, project
from transforms._sql_compile import CompiledQuery, ParsedQuery, compile_query, parse_query, spark_query
from transforms._sql_dialect import SqlError, tokenize


class SqlOptions(MultiTableTransformOptions):
    query: str = Field(min_length=1, description="SELECT ... FROM <input dataset name> [WHERE ...], one row in, at most one out.")

    _parsed: ParsedQuery | None = PrivateAttr(None)
    _compiled: dict = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _parse(self) -> "SqlOptions":
        self._parsed = parse_query(self.query)
        return self

    @property
    def parsed(self) -> ParsedQuery:
        if self._parsed is None:
            self._parsed = parse_query(self.query)
        return self._parsed

    def compiled(self, table: TableSchema) -> CompiledQuery:
        """The query compiled for ``table`` (cached per table schema)."""
        if table not in self._compiled:
            try:
                self._compiled[table] = compile_query(self.parsed, table)
            except SqlError as e:
                raise SchemaError("SCHEMA.INVALID", {"detail": f"{e} (table {table.table_id})"}) from None
        return self._compiled[table]


@register
class Sql(Transform):
    name: ClassVar[str] = "Sql"
    seatunnel_page = "transform-v2/sql.md"

    @classmethod
    def seatunnel_notes(cls) -> list[str]:
        """The functions of sql-functions.md: each compiles to Spark SQL (no Python)."""
        from transforms._sql_functions import FUNCTIONS

        done = [f for f in FUNCTIONS.values() if f.supported]
        lines = [f"Functions of `transform-v2/sql-functions.md`: {len(done)} of {len(FUNCTIONS)} supported, each compiled "
                 "to a Spark SQL expression (Catalyst, no Python pass); where this engine chooses (the page is silent "
                 "or differs from SeaTunnel's code), the note says what.", "",
                 "| function | signature | status | note |", "|---|---|---|---|"]
        for key, f in FUNCTIONS.items():
            status = "supported" if f.supported else f"refused: {f.reason}"
            note = _cell(f.note or "-")
            lines.append(f"| `{key}` | `{_cell(f.signature)}` | {status} | {note} |")
        return lines + [""]
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
        compiled = options.compiled(table)
        columns, refs = compiled.columns, compiled.refs
        seen: set[str] = set()
        for c in columns:
            if c.name in seen:
                raise duplicate_column(table, c.name)
            seen.add(c.name)
        passed = {r for r in refs if r is not None}
        pk = table.primary_key if table.primary_key and set(table.primary_key) <= passed else ()
        return TableSchema(table.table_id, tuple(columns), pk)

    def capabilities(self) -> dict[str, str]:
        """Spark SQL can call Java (reflection functions), run a command
        (TRANSFORM ... USING) and read any file (a subquery over
        ``text.`/etc/passwd```); plain expressions over the input do none."""
        out: dict[str, str] = {}
        for options in self.all_options():
            select = options.parsed.select  # type: ignore[attr-defined]
            calls = sorted({f.name.lower() for f in select.find_all(exp.Anonymous) if f.name.lower() in REFLECTION})
            if calls:
                out["runs_code"] = f"its query calls Java methods through {', '.join(calls)}() (option query)"
            toks = tokenize(options.query)  # type: ignore[attr-defined]
            if any(t.token_type == TokenType.USING for t in toks):
                out["runs_code"] = "its query runs a command (TRANSFORM ... USING) (option query)"
            if sum(t.token_type == TokenType.SELECT for t in toks) > 1:
                out["reads_local_files"] = "its query has a subquery, which can read any table or file (option query)"
        return out

    def describe(self) -> str:
        return f"Sql (from {self.query_table})"

    def apply(self, ctx, df, table, options):
        """Run the query with Spark SQL over this table's frame.

        The frame is registered as a temporary view under a unique name and the
        query is rewritten to read it (``FROM <view> AS <the FROM name>``, so
        qualified references keep working) and to select the metadata columns
        first; ``*`` expands to the table's columns only. The result is renamed
        and cast to the plan-time schema, column by column, by position.
        """
        from pyspark.sql.types import _parse_datatype_string

        from streaming_engine.errors import RuntimeFailure

        assert isinstance(options, SqlOptions)
        out = self.transform_table(table, options)
        view = f"__sql_{re.sub(r'[^A-Za-z0-9_]', '_', ctx.vertex_id)}_{uuid.uuid4().hex[:12]}"
        text = spark_query(options.compiled(table), view)
        session = df.sparkSession
        df.createOrReplaceTempView(view)
        try:
            result = session.sql(text)
        finally:
            session.catalog.dropTempView(view)
        names = [*rows.META, *out.names]
        if len(result.columns) != len(names):
            raise RuntimeFailure(
                "RUNTIME.FAILED",
                {"detail": f"{TERMINAL} {ctx.vertex_id} on table {table.table_id}: the query returns "
                           f"{len(result.columns) - len(rows.META)} columns but its plan-time schema has "
                           f"{len(out.columns)} ({', '.join(out.names)})"},
            )  # fmt: skip
        renamed = result.toDF(*names)
        return project(renamed, [col(c.name).cast(_parse_datatype_string(c.type)).alias(c.name) for c in out.columns])


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


REFLECTION = frozenset({"java_method", "reflect", "try_reflect"})
