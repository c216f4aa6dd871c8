"""A small plan-time reader for the Sql transform's query (no Spark).

The query runs as Spark SQL at run time; here we only need enough to derive the
output schema and catch obvious mistakes early:

- :func:`parse_query` checks the statement shape ``SELECT items FROM table
  [[AS] alias] [WHERE condition]`` and rejects what a row-by-row transform cannot
  do (JOIN, GROUP BY, aggregates, window functions, ORDER BY, LIMIT, UNION,
  DISTINCT, subqueries), as SeaTunnel's Sql transform does.
- :func:`output_columns` types each select item against the input table:
  ``*`` / ``t.*`` / ``struct_col.*`` expand; column references (also
  ``table.col`` and ``row.field.field`` into structs and maps) keep their type
  and nullability; ``CAST(x AS t)`` and ``x::t`` give t; literals, arithmetic,
  comparisons, CASE and a table of common functions are typed as Spark types
  them; anything else (unknown functions, UDFs) is typed ``string``.
  Identifiers in column positions must exist (case-insensitively, as in Spark),
  else SCHEMA.MISSING_COLUMN. Unaliased expressions are named by their text;
  Spark's generated names differ slightly, so alias computed columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import missing_column
from streaming_engine.schema import Column, TableSchema, is_numeric, normalize_type

# -- tokens ------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<str>'(?:[^'\\]|\\.|'')*')
  | (?P<dq>"(?:[^"\\]|\\.|"")*")
  | (?P<qid>`(?:[^`]|``)*`)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?:BD|bd|[LlSsYyDdFf])?(?![A-Za-z_]))
  | (?P<id>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<op><=>|::|->|=>|\|\||<=|>=|<>|!=|==|[-+*/%=<>(),.;\[\]~&|^!:])
    """,
    re.X | re.S,
)


@dataclass(frozen=True)
class Tok:
    kind: str  # id, qid, num, str, dq, op
    text: str
    pos: int

    @property
    def up(self) -> str:
        return self.text.upper() if self.kind == "id" else ""

    @property
    def name(self) -> str:
        """Identifier value (backquotes removed)."""
        if self.kind == "qid":
            return self.text[1:-1].replace("``", "`")
        if self.kind == "dq":
            return self.text[1:-1].replace('""', '"')
        return self.text

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.text in ops

    def is_kw(self, *words: str) -> bool:
        return self.up in words


def tokenize(sql: str) -> list[Tok]:
    toks, pos = [], 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if not m:
            ch = sql[pos]
            if ch in "'\"`":
                raise ValueError(f"unterminated quote {ch} at position {pos} of the query")
            raise ValueError(f"unexpected character {ch!r} at position {pos} of the query")
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(Tok(kind, m.group(), pos))
        pos = m.end()
    return toks


# -- statement shape ---------------------------------------------------------

_CLAUSE_WORDS = {"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "INTERSECT", "EXCEPT", "JOIN", "INNER",
                 "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "LATERAL", "WINDOW", "CLUSTER", "DISTRIBUTE", "SORT",
                 "OFFSET", "TABLESAMPLE", "PIVOT", "UNPIVOT", "QUALIFY", "ON", "USING"}  # fmt: skip
_UNSUPPORTED_CLAUSES = {
    "JOIN": "JOIN", "INNER": "JOIN", "LEFT": "JOIN", "RIGHT": "JOIN", "FULL": "JOIN", "CROSS": "JOIN",
    "NATURAL": "JOIN", "LATERAL": "LATERAL VIEW", "GROUP": "GROUP BY", "HAVING": "HAVING", "ORDER": "ORDER BY",
    "SORT": "SORT BY", "CLUSTER": "CLUSTER BY", "DISTRIBUTE": "DISTRIBUTE BY", "LIMIT": "LIMIT",
    "OFFSET": "OFFSET", "UNION": "UNION", "INTERSECT": "INTERSECT", "EXCEPT": "EXCEPT", "WINDOW": "WINDOW",
    "TABLESAMPLE": "TABLESAMPLE", "PIVOT": "PIVOT", "UNPIVOT": "UNPIVOT", "QUALIFY": "QUALIFY",
}  # fmt: skip
AGGREGATES = {"count", "sum", "avg", "mean", "min", "max", "collect_list", "collect_set", "array_agg", "first",
              "last", "first_value", "last_value", "any_value", "approx_count_distinct", "count_if", "stddev",
              "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp", "percentile", "percentile_approx",
              "median", "mode", "bool_and", "bool_or", "every", "some", "any", "max_by", "min_by", "string_agg",
              "listagg", "sum_distinct", "row_number", "rank", "dense_rank", "ntile", "lag", "lead"}  # fmt: skip
_WHY = "the Sql transform maps each row on its own (like SeaTunnel's), so"


@dataclass(frozen=True)
class SelectItem:
    tokens: tuple[Tok, ...]
    alias: str | None
    text: str


@dataclass(frozen=True)
class ParsedQuery:
    items: tuple[SelectItem, ...]
    table: str  # the FROM name as written (dotted parts joined)
    alias: str | None
    where: tuple[Tok, ...]


def parse_query(sql: str) -> ParsedQuery:
    """Check the statement shape; ValueError says what to change."""
    toks = tokenize(sql)
    while toks and toks[-1].is_op(";"):
        toks.pop()
    if not toks or not toks[0].is_kw("SELECT"):
        raise ValueError("query must be a single SELECT statement: select <columns> from <table> [where ...]")
    if any(t.is_op(";") for t in toks):
        raise ValueError("query must be a single statement; remove the extra ';'")
    for i, t in enumerate(toks):
        if t.kind == "id" and t.text.lower() in AGGREGATES and i + 1 < len(toks) and toks[i + 1].is_op("("):
            if not (i > 0 and toks[i - 1].is_op(".")):
                raise ValueError(f"aggregate/window function {t.text}() is not supported: {_WHY} use a plain expression")
        if t.is_kw("OVER") and i + 1 < len(toks) and (toks[i + 1].is_op("(") or toks[i + 1].kind == "id"):
            raise ValueError(f"window functions (OVER) are not supported: {_WHY} rows cannot see each other")
    depth, from_at = 0, None
    for i, t in enumerate(toks):
        depth += t.is_op("(", "[") - t.is_op(")", "]")
        if depth < 0:
            raise ValueError(f"unbalanced ')' at position {t.pos} of the query")
        if depth == 0 and t.is_kw("FROM") and from_at is None:
            from_at = i
    if depth != 0:
        raise ValueError("unbalanced parentheses in the query")
    if from_at is None:
        raise ValueError("query needs FROM <table>: select ... from <input dataset name>")
    head = toks[1:from_at]
    if head and head[0].is_kw("DISTINCT"):
        raise ValueError(f"SELECT DISTINCT is not supported: {_WHY} duplicates cannot be removed")
    if head and head[0].is_kw("ALL"):
        head = head[1:]
    items = tuple(_select_item(sql, part) for part in _split_commas(head))
    if not items:
        raise ValueError("the SELECT list is empty; name the columns to output (or *)")

    rest = toks[from_at + 1 :]
    if not rest:
        raise ValueError("query needs a table name after FROM")
    if rest[0].is_op("("):
        raise ValueError(f"subqueries in FROM are not supported: {_WHY} select from the input dataset directly")
    name_parts, i = [], 0
    while i < len(rest) and rest[i].kind in ("id", "qid", "dq"):
        name_parts.append(rest[i].name)
        i += 1
        if i < len(rest) and rest[i].is_op("."):
            i += 1
            continue
        break
    if not name_parts:
        raise ValueError(f"expected a table name after FROM, got {rest[0].text!r}")
    alias = None
    if i < len(rest) and rest[i].is_kw("AS"):
        i += 1
        if i >= len(rest) or rest[i].kind not in ("id", "qid"):
            raise ValueError("expected a table alias after AS")
    if i < len(rest) and rest[i].kind in ("id", "qid") and rest[i].up not in _CLAUSE_WORDS:
        alias = rest[i].name
        i += 1
    where: tuple[Tok, ...] = ()
    tail = rest[i:]
    depth = 0
    for j, t in enumerate(tail):
        depth += t.is_op("(") - t.is_op(")")
        is_call = j + 1 < len(tail) and tail[j + 1].is_op("(")  # left(s, 1) is a function, not a join
        if depth == 0 and ((t.up in _UNSUPPORTED_CLAUSES and not is_call) or t.is_op(",")):
            what = "a second table (implicit JOIN)" if t.is_op(",") else _UNSUPPORTED_CLAUSES[t.up]
            raise ValueError(f"{what} is not supported: {_WHY} no joins, aggregation, sorting or limits")
        if t.is_kw("SELECT"):
            raise ValueError(f"subqueries are not supported: {_WHY} use plain expressions")
    if tail:
        if not tail[0].is_kw("WHERE"):
            raise ValueError(f"unexpected {tail[0].text!r} after the table name; only WHERE may follow")
        where = tuple(tail[1:])
        if not where:
            raise ValueError("WHERE needs a condition")
    return ParsedQuery(items, ".".join(name_parts), alias, where)


def _split_commas(toks: list[Tok]) -> list[list[Tok]]:
    parts: list[list[Tok]] = [[]]
    depth = 0
    for t in toks:
        depth += t.is_op("(", "[") - t.is_op(")", "]")
        if depth == 0 and t.is_op(","):
            parts.append([])
        else:
            parts[-1].append(t)
    if parts == [[]]:
        return []
    for p in parts:
        if not p:
            raise ValueError("empty item in the SELECT list (two commas in a row, or a trailing comma)")
    return parts


_NOT_ALIAS = {"END", "NULL", "TRUE", "FALSE", "DAY", "DAYS", "HOUR", "HOURS", "MINUTE", "MINUTES", "SECOND",
              "SECONDS", "MONTH", "MONTHS", "YEAR", "YEARS", "WEEK", "WEEKS", "MILLISECOND", "MILLISECONDS",
              "MICROSECOND", "MICROSECONDS", "CURRENT_DATE", "CURRENT_TIMESTAMP", "CURRENT_TIME"}  # fmt: skip


_OPERATOR_WORDS = {"AS", "CASE", "WHEN", "THEN", "ELSE", "NOT", "AND", "OR", "IS", "INTERVAL", "DISTINCT", "LIKE",
                   "ILIKE", "RLIKE", "REGEXP", "IN", "BETWEEN", "DIV", "ESCAPE", "FROM", "ALL", "SELECT"}  # fmt: skip


def _select_item(sql: str, toks: list[Tok]) -> SelectItem:
    alias = None
    expr = toks
    if len(toks) >= 3 and toks[-2].is_kw("AS") and toks[-1].kind in ("id", "qid", "dq"):
        alias, expr = toks[-1].name, toks[:-2]
    elif (
        len(toks) >= 2
        and toks[-1].kind in ("id", "qid")
        and toks[-1].up not in _NOT_ALIAS
        and (toks[-2].kind in ("id", "qid", "num", "str", "dq") or toks[-2].is_op(")", "]"))
        and toks[-2].up not in _OPERATOR_WORDS
    ):
        alias, expr = toks[-1].name, toks[:-1]
    if not expr:
        raise ValueError("a SELECT item has an alias but no expression")
    text = " ".join(sql[expr[0].pos : expr[-1].pos + len(expr[-1].text)].split())
    return SelectItem(tuple(expr), alias, text)


# -- typing ------------------------------------------------------------------


class _Unsupported(Exception):
    """The expression is outside what this reader understands: type it as string."""


@dataclass(frozen=True)
class _T:
    type: str
    nullable: bool = True
    ref: str | None = None  # input column name, when the expression is exactly that column
    name: str | None = None  # output name of a column reference (last part, as written)


_STRING = _T("string")
_BOOL = _T("boolean")
_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4, "float": 6, "double": 7}

_FN_TYPES: dict[str, str] = {}
for _t, _names in {
    "string": "concat concat_ws upper ucase lower lcase trim ltrim rtrim btrim lpad rpad substring substr left right "
    "replace regexp_replace regexp_extract regexp_substr repeat reverse initcap translate soundex space char chr "
    "hex to_char date_format format_string printf uuid md5 sha sha1 sha2 base64 to_json from_unixtime dayname "
    "monthname formatdatetime rawtohex insert overlay split_part string get_json_object json_extract typeof "
    "format_number current_user user version current_time",
    "int": "length char_length character_length octet_length bit_length ascii locate instr position year month day "
    "dayofmonth day_of_month dayofweek day_of_week dayofyear day_of_year hour minute second week weekofyear "
    "quarter size cardinality datediff array_size extract hash weekday",
    "bigint": "unix_timestamp unix_seconds unix_millis unix_micros xxhash64 bigint",
    "double": "pi rand random randn e sqrt exp ln log log10 log2 pow power sin cos tan asin acos atan atan2 sinh "
    "cosh tanh cot radians degrees sign signum cbrt double months_between",
    "boolean": "regexp_like rlike regexp is_date isnull isnotnull startswith endswith contains array_contains "
    "boolean",
    "timestamp": "current_timestamp now to_timestamp parsedatetime timestampadd dateadd date_trunc "
    "from_utc_timestamp to_utc_timestamp timestamp_seconds timestamp_millis timestamp_micros make_timestamp "
    "timestamp",
    "date": "current_date curdate to_date date_add date_sub add_months last_day next_day make_date date",
    "binary": "unhex binary unbase64 encode",
    "float": "float",
}.items():
    for _n in _names.split():
        _FN_TYPES[_n] = _t
_FN_TYPES["int"] = _FN_TYPES["integer"] = "int"
_SAME_AS_FIRST = set("abs negative positive round bround trunc ceil ceiling floor mod pmod".split())
_FIRST_NON_NULL = set("coalesce ifnull nvl nullif greatest least".split())


class _Typer:
    def __init__(self, table: TableSchema, query: ParsedQuery):
        self.table = table
        self.query = query
        qualifiers = {query.table, query.table.split(".")[-1]}
        if query.alias:
            qualifiers.add(query.alias)
        self.qualifiers = {q.lower() for q in qualifiers}
        self.toks: list[Tok] = []
        self.i = 0

    # -- entry points ---------------------------------------------------------
    def item_columns(self, item: SelectItem) -> list[tuple[Column, str | None]]:
        """Output columns of one select item, each with the input column it passes through (or None)."""
        toks = list(item.tokens)
        if len(toks) == 1 and toks[0].is_op("*"):
            return [(c, c.name) for c in self.table.columns]
        if len(toks) >= 3 and toks[-1].is_op("*") and toks[-2].is_op("."):
            chain = [t.name for t in toks[:-2] if not t.is_op(".")]
            if len(chain) == 1 and chain[0].lower() in self.qualifiers and self._find(chain[0]) is None:
                return [(c, c.name) for c in self.table.columns]
            t = self._resolve(chain)
            fields = struct_fields(t.type)
            if fields is None:
                raise SchemaError("SCHEMA.INVALID", {"detail": f"{'.'.join(chain)}.* needs a struct column, got {t.type}"})
            return [(Column(n, ft), None) for n, ft in fields]
        try:
            t = self.typed(toks)
        except _Unsupported:
            t = _STRING
        name = item.alias or t.name or item.text
        ref = t.ref if t.ref is not None and name == self._find(t.ref).name else None  # type: ignore[union-attr]
        return [(Column(name, t.type, t.nullable), ref)]

    def check_where(self) -> None:
        if self.query.where:
            try:
                self.typed(list(self.query.where))
            except _Unsupported:
                pass

    def typed(self, toks: list[Tok]) -> _T:
        self.toks, self.i = toks, 0
        t = self._or()
        if self.i != len(self.toks):
            raise _Unsupported
        return t

    # -- token helpers --------------------------------------------------------
    def _peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def _next(self) -> Tok:
        t = self._peek()
        if t is None:
            raise _Unsupported
        self.i += 1
        return t

    def _accept_op(self, *ops: str) -> Tok | None:
        t = self._peek()
        if t is not None and t.is_op(*ops):
            self.i += 1
            return t
        return None

    def _accept_kw(self, *words: str) -> Tok | None:
        t = self._peek()
        if t is not None and t.is_kw(*words):
            self.i += 1
            return t
        return None

    def _at_dot_name(self) -> bool:
        """Next tokens are ``.`` and a name (a struct field or a qualified column)."""
        dot, name = self._peek(), self._peek(1)
        return dot is not None and dot.is_op(".") and name is not None and name.kind in ("id", "qid")

    def _expect_op(self, op: str) -> None:
        if not self._accept_op(op):
            raise _Unsupported

    # -- grammar --------------------------------------------------------------
    def _or(self) -> _T:
        left = self._and()
        while self._accept_kw("OR"):
            self._and()
            left = _BOOL
        return left

    def _and(self) -> _T:
        left = self._not()
        while self._accept_kw("AND"):
            self._not()
            left = _BOOL
        return left

    def _not(self) -> _T:
        if self._accept_kw("NOT") or self._accept_op("!"):
            self._not()
            return _BOOL
        return self._predicate()

    def _predicate(self) -> _T:
        left = self._additive()
        while True:
            if self._accept_op("=", "==", "<>", "!=", "<", ">", "<=", ">=", "<=>"):
                self._additive()
                left = _BOOL
                continue
            if self._accept_kw("IS"):
                self._accept_kw("NOT")
                if self._accept_kw("DISTINCT"):
                    if not self._accept_kw("FROM"):
                        raise _Unsupported
                    self._additive()
                elif not self._accept_kw("NULL", "TRUE", "FALSE", "UNKNOWN"):
                    raise _Unsupported
                left = _BOOL
                continue
            negated = self._peek() is not None and self._peek().is_kw("NOT")  # type: ignore[union-attr]
            if negated:
                self.i += 1
            if self._accept_kw("LIKE", "ILIKE", "RLIKE", "REGEXP"):
                self._additive()
                if self._accept_kw("ESCAPE"):
                    self._next()
                left = _BOOL
                continue
            if self._accept_kw("IN"):
                self._expect_op("(")
                if self._peek() is not None and self._peek().is_kw("SELECT"):  # type: ignore[union-attr]
                    raise _Unsupported
                self._or()
                while self._accept_op(","):
                    self._or()
                self._expect_op(")")
                left = _BOOL
                continue
            if self._accept_kw("BETWEEN"):
                self._additive()
                if not self._accept_kw("AND"):
                    raise _Unsupported
                self._additive()
                left = _BOOL
                continue
            if negated:
                raise _Unsupported
            return left

    def _additive(self) -> _T:
        left = self._multiplicative()
        while True:
            op = self._accept_op("+", "-", "||")
            if not op:
                return left
            left = _arith(op.text, left, self._multiplicative())

    def _multiplicative(self) -> _T:
        left = self._unary()
        while True:
            op = self._accept_op("*", "/", "%") or self._accept_kw("DIV")
            if not op:
                return left
            left = _arith(op.text.upper(), left, self._unary())

    def _unary(self) -> _T:
        if self._accept_op("-", "+", "~"):
            t = self._unary()
            return _T(t.type, t.nullable)
        return self._postfix()

    def _postfix(self) -> _T:
        t = self._primary()
        while True:
            if self._accept_op("["):
                self._or()
                self._expect_op("]")
                t = _T(element_type(t.type) or "string")
            elif self._accept_op("::"):
                t = _T(self._type_name(stop_at_close=False))
            elif self._at_dot_name():
                self.i += 1
                field = self._next().name
                ft = member_type(t.type, field)
                if ft is None:
                    raise _Unsupported
                t = _T(ft)
            else:
                return t

    def _primary(self) -> _T:
        tok = self._next()
        if tok.kind == "num":
            return _T(number_type(tok.text), nullable=False)
        if tok.kind in ("str", "dq"):
            return _T("string", nullable=False)
        if tok.is_op("("):
            if self._peek() is not None and self._peek().is_kw("SELECT"):  # type: ignore[union-attr]
                raise _Unsupported
            t = self._or()
            self._expect_op(")")
            return _T(t.type, t.nullable)
        if tok.kind == "id":
            up = tok.up
            nxt = self._peek()
            is_call = nxt is not None and nxt.is_op("(")
            if up == "NULL":
                return _STRING
            if up in ("TRUE", "FALSE"):
                return _T("boolean", nullable=False)
            if up in ("CAST", "TRY_CAST") and is_call:
                self.i += 1
                self._or()
                if not self._accept_kw("AS"):
                    raise _Unsupported
                return _T(self._type_name(stop_at_close=True))
            if up == "CASE":
                return self._case()
            if up == "INTERVAL":
                raise _Unsupported
            if up in ("CURRENT_DATE", "CURRENT_TIMESTAMP", "CURRENT_TIME", "CURRENT_USER") and not is_call:
                return _T(_FN_TYPES[tok.text.lower()], nullable=False)
            if is_call:
                return self._call(tok.text.lower())
        if tok.kind in ("id", "qid"):
            chain = [tok.name]
            while self._at_dot_name():
                self.i += 1
                chain.append(self._next().name)
            return self._resolve(chain)
        raise _Unsupported

    def _case(self) -> _T:
        results: list[_T] = []
        if not (self._peek() is not None and self._peek().is_kw("WHEN")):  # type: ignore[union-attr]
            self._or()
        while self._accept_kw("WHEN"):
            self._or()
            if not self._accept_kw("THEN"):
                raise _Unsupported
            results.append(self._or())
        if self._accept_kw("ELSE"):
            results.append(self._or())
        if not self._accept_kw("END") or not results:
            raise _Unsupported
        for r in results:
            if r is not _STRING:  # the first branch that is not a bare NULL decides
                return _T(r.type)
        return _STRING

    def _call(self, fn: str) -> _T:
        self._expect_op("(")
        start = self.i
        end = self._matching_close(start)
        args: list[_T] | None = []
        body = self.toks[start:end]
        if any(t.is_op("->", "=>") for t in body):
            args = None  # lambdas and named arguments: not typed
        elif body and not (len(body) == 1 and body[0].is_op("*")):
            saved = self.toks
            try:
                self.toks, self.i = body, 0
                self._accept_kw("DISTINCT", "ALL")
                args = [self._or()]
                while self._accept_op(","):
                    args.append(self._or())
                if self.i != len(body):
                    raise _Unsupported
            except _Unsupported:
                args = None
            finally:
                self.toks = saved
        self.i = end + 1
        if fn in _FN_TYPES:
            return _T(_FN_TYPES[fn])
        if args:
            if fn in _SAME_AS_FIRST:
                t = args[0].type
                if fn in ("ceil", "ceiling", "floor") and t in ("float", "double"):
                    return _T("bigint")
                if fn in ("round", "bround") and not is_numeric(t):
                    return _T("double")
                return _T(t)
            if fn in _FIRST_NON_NULL:
                return _T(next((a.type for a in args if a is not _STRING), args[0].type))
            if fn == "if" and len(args) == 3:
                return _T(args[1].type if args[1] is not _STRING else args[2].type)
            if fn == "nvl2" and len(args) == 3:
                return _T(args[1].type)
            if fn == "array":
                return _T(f"array<{args[0].type}>")
            if fn in ("element_at", "get") and len(args) == 2:
                return _T(element_type(args[0].type) or "string")
        return _STRING

    def _matching_close(self, start: int) -> int:
        depth = 1
        for j in range(start, len(self.toks)):
            depth += self.toks[j].is_op("(") - self.toks[j].is_op(")")
            if depth == 0:
                return j
        raise _Unsupported

    def _type_name(self, stop_at_close: bool) -> str:
        """Read a type after CAST(... AS or ``::``; consume the closing ')' of CAST."""
        start = self.i
        depth = 0
        while self.i < len(self.toks):
            t = self.toks[self.i]
            if t.is_op("(", "<"):
                depth += 1
            elif t.is_op(")", ">"):
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and not stop_at_close and (t.kind == "op" or (t.kind == "id" and self.i > start)):
                break
            self.i += 1
        text = ""
        for j in range(start, self.i):
            t = self.toks[j]
            spaced = j > start and t.kind == "id" and self.toks[j - 1].kind == "id"
            text += (" " if spaced else "") + t.text
        if stop_at_close:
            self._expect_op(")")
        return spark_cast_type(text)

    # -- columns --------------------------------------------------------------
    def _find(self, name: str) -> Column | None:
        for c in self.table.columns:
            if c.name == name:
                return c
        for c in self.table.columns:
            if c.name.lower() == name.lower():
                return c
        return None

    def _resolve(self, chain: list[str]) -> _T:
        if len(chain) > 1 and self._find(chain[0]) is None and chain[0].lower() in self.qualifiers:
            chain = chain[1:]
        col = self._find(chain[0])
        if col is None:
            if len(chain) == 1 and chain[0].upper() in _KEYWORDS:
                raise _Unsupported
            raise missing_column(self.table, chain[0])
        t = col.type
        for j, part in enumerate(chain[1:], 1):
            ft = member_type(t, part)
            if ft is None:
                raise missing_column(self.table, ".".join([col.name, *chain[1 : j + 1]]))
            t = ft
        if len(chain) == 1:
            return _T(t, col.nullable, ref=col.name, name=chain[0])
        return _T(t, True, name=chain[-1])


# Words that may appear where a column could (function keywords, date units): not reported as missing.
_KEYWORDS = {"BOTH", "LEADING", "TRAILING", "FROM", "FOR", "YEAR", "YEARS", "QUARTER", "MONTH", "MONTHS", "WEEK",
             "WEEKS", "DAY", "DAYS", "DAYOFWEEK", "DOW", "DOY", "HOUR", "HOURS", "MINUTE", "MINUTES", "SECOND",
             "SECONDS", "MILLISECOND", "MILLISECONDS", "MICROSECOND", "MICROSECONDS", "EPOCH", "SQL_TSI_DAY",
             "SQL_TSI_HOUR", "SQL_TSI_MINUTE", "SQL_TSI_SECOND", "SQL_TSI_MONTH", "SQL_TSI_YEAR", "DATE",
             "TIMESTAMP", "TIME", "INTERVAL", "DISTINCT", "ALL", "ASC", "DESC"}  # fmt: skip


def _arith(op: str, a: _T, b: _T) -> _T:
    if op == "||":
        return _STRING
    if op == "DIV":
        return _T("bigint")
    ta, tb = a.type, b.type
    if op in ("+", "-") and ta in ("date", "timestamp", "timestamp_ntz") and tb in _RANK:
        return _T(ta)
    if not (is_numeric(ta) or ta == "string") or not (is_numeric(tb) or tb == "string"):
        return _STRING
    if "string" in (ta, tb) or "double" in (ta, tb):
        return _T("double")
    decimals = [t for t in (ta, tb) if t.startswith("decimal")]
    if op == "/":
        return _T("decimal(38,6)" if decimals and "float" not in (ta, tb) else "double")
    if "float" in (ta, tb):
        return _T("float")
    if decimals:
        return _T(decimals[0] if len(decimals) == 1 else "decimal(38,18)")
    return _T(ta if _RANK[ta] >= _RANK[tb] else tb)


def number_type(text: str) -> str:
    """Spark's type of a numeric literal."""
    up = text.upper()
    if up.endswith("BD"):
        digits = up[:-2]
        int_part, _, frac = digits.partition(".")
        s = len(frac)
        return f"decimal({max(len(int_part.lstrip('0')) + s, s, 1)},{s})"
    suffix = {"L": "bigint", "S": "smallint", "Y": "tinyint", "D": "double", "F": "float"}.get(up[-1])
    if suffix:
        return suffix
    if "E" in up:
        return "double"
    if "." in up:
        int_part, _, frac = up.partition(".")
        s = len(frac)
        p = max(len(int_part.lstrip("0")) + s, 1)
        return f"decimal({p},{s})" if p <= 38 else "double"
    v = int(up)
    if v < 2**31:
        return "int"
    if v < 2**63:
        return "bigint"
    return "decimal(38,0)" if len(up) <= 38 else "double"


_CAST_ALIASES = [(re.compile(r"^(var)?char\s*\(\s*\d+\s*\)$", re.I), "string"), (re.compile(r"^real$", re.I), "float"),
                 (re.compile(r"^timestamp_ltz$", re.I), "timestamp")]  # fmt: skip


def spark_cast_type(text: str) -> str:
    """A Spark SQL type name as in CAST(x AS <type>) -> normalized DDL (``string`` if not understood)."""
    t = " ".join(text.split())
    for pattern, repl in _CAST_ALIASES:
        if pattern.match(t):
            return repl
    t = re.sub(r"^(numeric|dec)\b", "decimal", t, flags=re.I)
    try:
        return normalize_type(t)
    except SchemaError:
        return "string"


# -- nested types --------------------------------------------------------------


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def struct_fields(t: str) -> list[tuple[str, str]] | None:
    if not (t.startswith("struct<") and t.endswith(">")):
        return None
    fields = []
    for part in _split_top(t[7:-1]):
        if part.startswith("`"):
            end = part.index("`", 1)
            name, rest = part[1:end], part[end + 1 :]
        else:
            name, _, rest = part.partition(":")
            rest = ":" + rest
        fields.append((name.strip(), rest.lstrip().removeprefix(":").strip()))
    return fields


def element_type(t: str) -> str | None:
    if t.startswith("array<") and t.endswith(">"):
        return t[6:-1]
    if t.startswith("map<") and t.endswith(">"):
        parts = _split_top(t[4:-1])
        return parts[1] if len(parts) == 2 else None
    return None


def member_type(t: str, field: str) -> str | None:
    """Type of ``value.field`` for a struct (field, case-insensitively) or a map (value type)."""
    fields = struct_fields(t)
    if fields is not None:
        for n, ft in fields:
            if n == field:
                return ft
        for n, ft in fields:
            if n.lower() == field.lower():
                return ft
        return None
    if t.startswith("map<"):
        return element_type(t)
    return None


def output_columns(table: TableSchema, query: ParsedQuery) -> tuple[list[Column], list[str | None]]:
    """Output columns for ``table`` and, per column, the input column it passes through unchanged."""
    typer = _Typer(table, query)
    columns: list[Column] = []
    refs: list[str | None] = []
    for item in query.items:
        for col, ref in typer.item_columns(item):
            columns.append(col)
            refs.append(ref)
    typer.check_where()
    return columns, refs
