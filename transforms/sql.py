"""Sql: transform rows with a SQL query (SeaTunnel Sql transform; Spark SQL at run time).

``query = "select a, b as c, f(x) as y from <input> where ..."``. At plan time the
query is read by :mod:`transforms._sql_parse`: the output schema is derived from
the SELECT list (``*`` expands; column references keep their type; CAST, literals,
arithmetic and common functions are typed; other expressions are typed string),
referenced columns must exist, and per-row-incompatible SQL (JOIN, GROUP BY,
aggregates, ORDER BY, LIMIT, ...) is rejected.

SeaTunnel requires the FROM table to be the input dataset's name. Plan-time
datasets carry no name, so any FROM name is accepted here and recorded
(:attr:`Sql.query_table`, shown in :meth:`describe`). At run time the query runs
as Spark SQL over each table's frame, registered as a temporary view and read
under the FROM name (so ``fake.id`` still resolves); WHERE drops rows, row kinds
and table ids pass through, and the result is cast to the plan-time schema.
With several input tables the query applies to each.
The primary key is kept when all its columns pass through unchanged.
"""

from __future__ import annotations

import re
import uuid
from typing import ClassVar

from pydantic import Field, PrivateAttr, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform
from streaming_engine.plugins.registry import register
from streaming_engine.schema import TableSchema
from transforms._common import MultiTableTransformOptions, duplicate_column
from streaming_engine.runtime import rows
from transforms._runtime import TERMINAL, col, project
from transforms._sql_parse import ParsedQuery, Tok, output_columns, parse_query, tokenize


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
    seatunnel_page = "transform-v2/sql.md"
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

    def capabilities(self) -> dict[str, str]:
        """Spark SQL can call Java (reflection functions), run a command
        (TRANSFORM ... USING) and read any file (a subquery over
        ``text.`/etc/passwd```); plain expressions over the input do none."""
        out: dict[str, str] = {}
        for options in self.all_options():
            toks = tokenize(options.query)  # type: ignore[attr-defined]
            calls = sorted({t.text.lower() for i, t in enumerate(toks[:-1])
                            if t.kind == "id" and toks[i + 1].is_op("(") and t.text.lower() in REFLECTION
                            and not (i and toks[i - 1].is_op("."))})
            if calls:
                out["runs_code"] = f"its query calls Java methods through {', '.join(calls)}() (option query)"
            if any(t.is_kw("USING") for t in toks):
                out["runs_code"] = "its query runs a command (TRANSFORM ... USING) (option query)"
            if sum(t.is_kw("SELECT") for t in toks) > 1:
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
        text = runtime_query(options.query, options.parsed, table, view)
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


REFLECTION = frozenset({"java_method", "reflect", "try_reflect"})


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def runtime_query(sql: str, parsed: ParsedQuery, table: TableSchema, view: str) -> str:
    """``sql`` rewritten to read ``view``, with the metadata columns selected first."""
    toks = list(tokenize(sql))
    while toks and toks[-1].is_op(";"):
        toks.pop()
    depth, from_at = 0, None
    for i, t in enumerate(toks):
        depth += t.is_op("(", "[") - t.is_op(")", "]")
        if depth == 0 and t.is_kw("FROM"):
            from_at = i
            break
    assert from_at is not None and toks[0].is_kw("SELECT")  # parse_query checked the shape
    head = toks[1:from_at]
    keyword = "SELECT"
    if head and head[0].is_kw("ALL"):
        head = head[1:]
    qualifiers = {parsed.table.lower(), parsed.table.split(".")[-1].lower()}
    if parsed.alias:
        qualifiers.add(parsed.alias.lower())
    columns = {c.lower() for c in table.names}
    data = ", ".join(_quote(c) for c in table.names)
    items: list[str] = []
    part: list[Tok] = []
    depth = 0
    for t in [*head, None]:
        if t is not None:
            depth += t.is_op("(", "[") - t.is_op(")", "]")
        if t is None or (depth == 0 and t.is_op(",")):
            if part:
                star = len(part) == 1 and part[0].is_op("*")
                qualified_star = (
                    len(part) == 3 and part[2].is_op("*") and part[1].is_op(".")
                    and part[0].kind in ("id", "qid") and part[0].name.lower() in qualifiers
                    and part[0].name.lower() not in columns
                )  # fmt: skip
                if star or qualified_star:
                    items.append(data)
                else:
                    items.append(sql[part[0].pos : part[-1].pos + len(part[-1].text)])
            part = []
        else:
            part.append(t)
    # FROM <name parts> [[AS] alias] ...
    i = from_at + 1
    name_start = toks[i].pos
    name_end = name_start
    while i < len(toks) and toks[i].kind in ("id", "qid", "dq"):
        name_end = toks[i].pos + len(toks[i].text)
        i += 1
        if i < len(toks) and toks[i].is_op("."):
            i += 1
            continue
        break
    rest = sql[name_end : toks[-1].pos + len(toks[-1].text)]
    alias = "" if parsed.alias else f" AS {_quote(parsed.table.split('.')[-1])}"
    meta = ", ".join(_quote(c) for c in rows.META)
    return f"{keyword} {meta}, {', '.join(items)} FROM {view}{alias}{rest}"
