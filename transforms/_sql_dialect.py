"""The Sql transform's SQL dialect (sqlglot), plan-time errors with positions, and Spark SQL templates.

Queries are read as SeaTunnel writes them and generated as Spark SQL:

- strings are standard SQL (``'it''s'``; a backslash is an ordinary character, so
  ``REGEXP_SUBSTR(s, '\\d{4}')`` means the regex ``\\d{4}``, as in SeaTunnel), and come out
  escaped for Spark;
- every function call is parsed as a plain call (sqlglot's own function models are off), so
  :mod:`transforms._sql_functions` decides what each SeaTunnel function means in Spark, and other
  Spark functions reach Spark exactly as written; only syntax that is not a plain call keeps its
  node (CAST/CONVERT(x AS t), EXTRACT(f FROM x), TRIM(BOTH c FROM x), SUBSTRING(x FROM a FOR b),
  POSITION(a IN b), OVERLAY);
- SeaTunnel's type names LONG, BYTE, BYTES and DATETIME are types (bigint, tinyint, binary,
  timestamp).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

_SYNTAX = {"CAST", "TRY_CAST", "EXTRACT", "SUBSTRING", "SUBSTR", "POSITION", "OVERLAY"}


def _parse_trim(self):  # type: ignore[no-untyped-def]
    """TRIM(BOTH|LEADING|TRAILING c FROM s) / TRIM(c FROM s) keep sqlglot's node; the function form
    TRIM(s[, c]) is a plain call (SeaTunnel's TRIM, whose second argument is the character)."""
    depth, i = 0, self._index
    while i < len(self._tokens):
        tok = self._tokens[i]
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (tok.token_type == TokenType.FROM or (i == self._index and tok.text.upper() in self.TRIM_TYPES)):
            return self._parse_trim_syntax()
        i += 1
    return self.expression(exp.Anonymous(this="TRIM", expressions=self._parse_csv(self._parse_lambda)))


class SeaTunnelSQL(Spark):
    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = ["'"]
        NUMERIC_ESCAPES: dict = {}
        KEYWORDS = {
            **Spark.Tokenizer.KEYWORDS,
            "BYTES": TokenType.VARBINARY,
            "BYTE": TokenType.TINYINT,
            "LONG": TokenType.BIGINT,
            "DATETIME": TokenType.TIMESTAMP,
        }

    class Parser(Spark.Parser):
        FUNCTIONS: dict = {}
        FUNCTION_PARSERS = {
            **{k: v for k, v in Spark.Parser.FUNCTION_PARSERS.items() if k in _SYNTAX},
            "CONVERT": lambda self: self._parse_cast(True),  # CONVERT(x AS type), as on sql-functions.md
            "TRIM": _parse_trim,
        }
        _parse_trim_syntax = Spark.Parser._parse_trim


class SqlError(ValueError):
    """A plan-time problem with the query; the message names what and where."""


def position(text: str, node: exp.Expr | None) -> str:
    """``line L, column C`` in ``text`` of the earliest token of ``node`` whose position is known."""
    starts = [n._meta["start"] for n in (node.dfs() if node is not None else ())
              if getattr(n, "_meta", None) and "start" in n._meta]  # _meta: read without creating it  # fmt: skip
    return offset_position(text, min(starts, default=None))


def offset_position(text: str, start: int | None) -> str:
    if start is None:
        return "position unknown"
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return f"line {line}, column {col}"


def tokenize(text: str) -> list:
    return SeaTunnelSQL().tokenize(text)


def parse(text: str) -> list[exp.Expr | None]:
    return sqlglot.parse(text, dialect=SeaTunnelSQL)


def to_spark(node: exp.Expr) -> str:
    return node.sql(dialect="spark")


@dataclass(frozen=True)
class Typed:
    """A compiled expression: its Spark AST and plan-time type (``void`` for a bare NULL)."""

    node: exp.Expr
    type: str
    nullable: bool = True
    ref: str | None = None  # the input column, when the expression is exactly that column
    name: str | None = None  # output name of a column reference (its last part, as written)


@functools.lru_cache(maxsize=None)
def _template(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, dialect=SeaTunnelSQL)


_ATOMIC = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Func, exp.Paren, exp.Case, exp.Bracket, exp.Dot, exp.Var,
           exp.Identifier, exp.HexString)  # fmt: skip


def atomic(node: exp.Expr) -> exp.Expr:
    """``node``, in parentheses when it is an operator expression (so it can be an operand)."""
    return node if isinstance(node, _ATOMIC) else exp.Paren(this=node)


def T(text: str, *args: exp.Expr | Typed) -> exp.Expr:
    """Spark SQL ``text`` with ``_0``, ``_1``, ... replaced by copies of ``args`` (parenthesized)."""
    nodes = [a.node if isinstance(a, Typed) else a for a in args]

    def fill(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and not n.table and n.name[:1] == "_" and n.name[1:].isdigit():
            return atomic(nodes[int(n.name[1:])].copy())
        return n

    return _template(text).transform(fill)


def lit(value: object) -> exp.Expr:
    if value is None:
        return exp.Null()
    return exp.convert(value)
