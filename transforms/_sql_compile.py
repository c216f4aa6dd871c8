"""The Sql transform's query, read with sqlglot: shape checks, output schema and Spark SQL (no Spark needed).

- :func:`parse_query` reads ``SELECT items FROM table [[AS] alias] [WHERE condition]`` and rejects,
  with the position in the query, what a row-by-row transform cannot do (JOIN, GROUP BY, aggregate
  and window functions, ORDER BY, LIMIT, UNION, DISTINCT, subqueries in FROM/WHERE, generators) and
  functions that are neither SeaTunnel's (:data:`transforms._sql_functions.FUNCTIONS`, checked
  for their number of arguments) nor Spark built-ins (:mod:`transforms._sql_spark`).
- :func:`compile_query` types every output column against an input table (``*`` / ``t.*`` /
  ``struct_col.*`` expand; column references, also ``row.field.field`` into structs and maps, keep
  their type; CAST, literals, arithmetic, CASE and every SeaTunnel function have SeaTunnel's result
  type; other Spark functions a known type or ``string``), checks that referenced columns exist, and
  rewrites the SeaTunnel functions into Spark SQL (:func:`spark_query` gives the statement).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from streaming_engine.plugins.base import missing_column
from streaming_engine.schema import META, Column, TableSchema
from transforms._sql_dialect import SqlError, T, Typed, atomic, offset_position, parse, position, to_spark, tokenize
from transforms._sql_functions import EXTRACT_FIELDS, FUNCTIONS, Call, cast, extract, text
from transforms._sql_spark import GENERATORS, PER_GROUP, SCALAR
from transforms._sql_types import (
    FLOATING, INTEGRAL, VOID, arith, cast_type, element_type, is_number, member_type, number_type, struct_fields, widen,
)  # fmt: skip

_WHY = "the Sql transform maps each row on its own (like SeaTunnel's), so"

# SELECT clauses and FROM decorations a per-row transform cannot have: (name, the keywords where it starts)
_CLAUSES = {
    "distinct": ("SELECT DISTINCT", ("DISTINCT",)), "group": ("GROUP BY", ("GROUP",)), "having": ("HAVING", ("HAVING",)),
    "order": ("ORDER BY", ("ORDER",)), "sort": ("SORT BY", ("SORT",)), "cluster": ("CLUSTER BY", ("CLUSTER",)),
    "distribute": ("DISTRIBUTE BY", ("DISTRIBUTE",)), "limit": ("LIMIT", ("LIMIT",)), "offset": ("OFFSET", ("OFFSET",)),
    "windows": ("WINDOW", ("WINDOW",)), "qualify": ("QUALIFY", ("QUALIFY",)), "laterals": ("LATERAL VIEW", ("LATERAL",)),
    "with_": ("WITH", ("WITH",)), "into": ("INTO", ("INTO",)), "sample": ("TABLESAMPLE", ("TABLESAMPLE",)),
    "pivots": ("PIVOT", ("PIVOT", "UNPIVOT")),
}  # fmt: skip
_JOIN_WORDS = ("JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "SEMI", "ANTI", "OUTER")
_SELECT_ARGS = {"expressions", "from_", "where", "kind", "hint"}
_TABLE_ARGS = {"this", "db", "catalog", "alias"}
# bare words Spark reads as datetime units (timestampadd(DAY, ...)), not columns
_UNITS = {"YEAR", "YEARS", "QUARTER", "QUARTERS", "MONTH", "MONTHS", "WEEK", "WEEKS", "DAY", "DAYS", "DAYOFYEAR",
          "HOUR", "HOURS", "MINUTE", "MINUTES", "SECOND", "SECONDS", "MILLISECOND", "MILLISECONDS", "MICROSECOND",
          "MICROSECONDS", "NANOSECOND", "NANOSECONDS"}  # fmt: skip
_SPARK_EXTRACT_FIELDS = {"YEARS", "Y", "YR", "YRS", "YEAROFWEEK", "QUARTER", "QTR", "MON", "MONS", "MONTHS", "WEEK",
                         "W", "WEEKS", "D", "DAYS", "DAYOFWEEK_ISO", "DOW_ISO", "DOW", "DOY", "H", "HOURS", "HR",
                         "HRS", "M", "MIN", "MINS", "MINUTES"}  # fmt: skip


@dataclass(frozen=True)
class ParsedQuery:
    text: str
    select: exp.Select
    table: str  # the FROM name as written (dotted parts joined)
    alias: str | None
    item_texts: tuple[str, ...]  # each SELECT item as written, without its alias


def _at(text: str, start: int | None) -> str:
    return f"at {offset_position(text, start)} of the query"


def parse_query(text: str) -> ParsedQuery:
    """Read and check the statement; ValueError (SqlError) says what to change and where."""
    try:
        toks = tokenize(text)
    except TokenError as e:
        raise SqlError(f"unterminated quote or unreadable text in the query: {str(e).splitlines()[0]}") from None
    while toks and toks[-1].token_type == TokenType.SEMICOLON:
        toks.pop()
    if not toks or toks[0].token_type != TokenType.SELECT:
        raise SqlError("query must be a single SELECT statement: select <columns> from <table> [where ...]")
    depth = 0
    for tok in toks:
        depth += (tok.token_type == TokenType.L_PAREN) - (tok.token_type == TokenType.R_PAREN)
        if depth < 0:
            raise SqlError(f"unbalanced ')' {_at(text, tok.start)}")
        if tok.token_type == TokenType.SEMICOLON:
            raise SqlError(f"query must be a single statement; remove the ';' {_at(text, tok.start)}")
    if depth:
        raise SqlError("unbalanced parentheses in the query")
    from_at = _top_level(toks, TokenType.FROM)
    _check_items(text, toks, from_at)
    try:
        statements = [s for s in parse(text) if s is not None]
    except ParseError as e:
        err = e.errors[0] if e.errors else {}
        near = err.get("highlight") or ""
        raise SqlError(f"cannot read the query: {err.get('description', e)} at line {err.get('line')}, "
                       f"column {err.get('col')} (near {near!r})") from None  # fmt: skip
    (select,) = statements
    if isinstance(select, exp.SetOperation):
        raise SqlError(f"{type(select).__name__.upper()} is not supported: {_WHY} one query over one input")
    if not isinstance(select, exp.Select):
        raise SqlError("query must be a single SELECT statement: select <columns> from <table> [where ...]")
    table, alias = _check_shape(text, toks, select, from_at)
    _check_calls(text, select)
    return ParsedQuery(text, select, table, alias, _item_texts(text, toks, select, from_at))


def _top_level(toks: list, kind: TokenType) -> int | None:
    depth = 0
    for i, tok in enumerate(toks):
        depth += (tok.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET)) - (
            tok.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET)
        )
        if depth == 0 and tok.token_type == kind:
            return i
    return None


def _item_parts(toks: list, from_at: int | None) -> list[list]:
    """The SELECT list's tokens, split at top-level commas."""
    head = toks[1 : from_at if from_at is not None else len(toks)]
    if head and head[0].token_type in (TokenType.DISTINCT, TokenType.ALL):
        head = head[1:]
    parts: list[list] = [[]]
    depth = 0
    for tok in head:
        depth += (tok.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET)) - (
            tok.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET)
        )
        if depth == 0 and tok.token_type == TokenType.COMMA:
            parts.append([])
        else:
            parts[-1].append(tok)
    return [] if parts == [[]] else parts


def _check_items(text: str, toks: list, from_at: int | None) -> None:
    parts = _item_parts(toks, from_at)
    if not parts:
        raise SqlError("the SELECT list is empty; name the columns to output (or *)")
    if any(not p for p in parts):
        raise SqlError("empty item in the SELECT list (two commas in a row, or a trailing comma)")


def _item_texts(text: str, toks: list, select: exp.Select, from_at: int | None) -> tuple[str, ...]:
    parts = _item_parts(toks, from_at)
    if len(parts) != len(select.expressions):  # unusual syntax: name items by their SQL
        return tuple(e.unalias().sql(dialect="spark") for e in select.expressions)
    out = []
    for part, item in zip(parts, select.expressions):
        if isinstance(item, exp.Alias) and len(part) > 1:
            part = part[:-1]
            if len(part) > 1 and part[-1].token_type == TokenType.ALIAS:
                part = part[:-1]
        out.append(" ".join(text[part[0].start : part[-1].end + 1].split()))
    return tuple(out)


def _keyword_at(toks: list, from_at: int | None, words: tuple[str, ...]) -> int | None:
    for tok in toks[from_at or 0 :]:
        if tok.text.strip() and (tok.text.upper().split()[0] in words or tok.token_type.name in words):
            return tok.start
    return None


def _check_shape(text: str, toks: list, select: exp.Select, from_at: int | None) -> tuple[str, str | None]:
    from_ = select.args.get("from_")
    if from_ is None:
        raise SqlError("query needs FROM <table>: select ... from <input dataset name>")
    source = from_.this
    if not isinstance(source, exp.Table) or isinstance(source.this, (exp.Query, exp.Subquery)):
        raise SqlError(f"subqueries in FROM are not supported: {_WHY} select from the input dataset directly "
                       f"{_at(text, toks[from_at + 1].start if from_at is not None else None)}")  # fmt: skip
    for key, value in select.args.items():
        if not value or key in _SELECT_ARGS:
            continue
        if key == "joins":
            comma = _top_level(toks[from_at:], TokenType.COMMA) if from_at is not None else None
            if comma is not None:
                raise SqlError(f"a second table (implicit JOIN) is not supported: {_WHY} no joins "
                               f"{_at(text, toks[from_at + comma].start)}")  # fmt: skip
            raise SqlError(f"JOIN is not supported: {_WHY} no joins, aggregation, sorting or limits "
                           f"{_at(text, _keyword_at(toks, from_at, _JOIN_WORDS))}")  # fmt: skip
        what, words = _CLAUSES.get(key, (key.upper().rstrip("_"), (key.upper(),)))
        raise SqlError(f"{what} is not supported: {_WHY} no joins, aggregation, sorting or limits "
                       f"{_at(text, _keyword_at(toks, 0 if key == 'distinct' else from_at, words))}")  # fmt: skip
    for key, value in source.args.items():
        if value and key not in _TABLE_ARGS:
            what, words = _CLAUSES.get(key, ("JOIN", _JOIN_WORDS) if key in ("joins", "laterals") else (key.upper(), ()))
            raise SqlError(f"{what} is not supported: {_WHY} select from the input dataset directly "
                           f"{_at(text, _keyword_at(toks, from_at, words))}")  # fmt: skip
    where = select.args.get("where")
    if where is not None:
        sub = where.find(exp.Query)
        if sub is not None:
            raise SqlError(f"subqueries are not supported: {_WHY} use plain expressions "
                           f"(at {position(text, sub)} of the query)")  # fmt: skip
    alias = source.alias or None
    return ".".join(p.name for p in source.parts), alias


def _walk(node: exp.Expr):
    """``node`` and its descendants, not descending into subqueries (they run as Spark SQL)."""
    yield node
    for child in node.iter_expressions():
        if not isinstance(child, (exp.Query, exp.Subquery)):
            yield from _walk(child)


def _check_calls(text: str, select: exp.Select) -> None:
    for node in _walk(select):
        where = f"(at {position(text, node)} of the query)"
        if isinstance(node, exp.Window):
            raise SqlError(f"window functions (OVER) are not supported: {_WHY} rows cannot see each other {where}")
        if isinstance(node, exp.QueryTransform):
            raise SqlError(f"TRANSFORM ... USING is not supported: {_WHY} use plain expressions {where}")
        if not isinstance(node, exp.Anonymous):
            continue
        name = node.name
        fn = FUNCTIONS.get(name.upper())
        if fn is not None:
            if not fn.supported:
                raise SqlError(f"function {name}() is not supported: {fn.reason} {where}")
            n = len(node.expressions)
            if n < fn.min_args or (fn.max_args is not None and n > fn.max_args):
                count = (f"{fn.min_args}" if fn.min_args == fn.max_args else
                         f"{fn.min_args} or more" if fn.max_args is None else f"{fn.min_args} to {fn.max_args}")  # fmt: skip
                raise SqlError(f"{name}() takes {count} argument(s) ({fn.signature}), got {n} {where}")
        elif name.lower() in PER_GROUP:
            raise SqlError(f"aggregate/window function {name}() is not supported: {_WHY} use a plain expression {where}")
        elif name.lower() in GENERATORS:
            raise SqlError(f"generator function {name}() is not supported: {_WHY} one row in gives at most one out "
                           f"{where}")  # fmt: skip
        elif name.lower() not in SCALAR:
            raise SqlError(f"function {name}() is not supported: it is neither a SeaTunnel SQL function "
                           f"(sql-functions.md) nor a Spark built-in {where}")  # fmt: skip


# -- compile ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompiledQuery:
    columns: tuple[Column, ...]
    refs: tuple[str | None, ...]  # per column, the input column it passes through unchanged
    items: tuple[str, ...]  # Spark SQL of each SELECT item
    where: str | None  # Spark SQL of the condition
    alias: str  # the name the input is read under


def compile_query(parsed: ParsedQuery, table: TableSchema) -> CompiledQuery:
    """Output schema and Spark SQL of ``parsed`` over ``table``."""
    select = parsed.select.copy()
    c = _Compiler(parsed, table)
    columns: list[Column] = []
    refs: list[str | None] = []
    items: list[str] = []
    for item, item_text in zip(select.expressions, parsed.item_texts):
        for column, ref, sql in c.item(item, item_text):
            columns.append(column)
            refs.append(ref)
            if sql:  # a struct's .* is one item for several columns
                items.append(sql)
    where = select.args.get("where")
    condition = to_spark(c.compile(where.this).node) if where is not None else None
    alias = parsed.alias or parsed.table.split(".")[-1]
    return CompiledQuery(tuple(columns), tuple(refs), tuple(items), condition, alias)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def spark_query(compiled: CompiledQuery, view: str) -> str:
    """The statement over ``view``: metadata columns first, then the items."""
    meta = ", ".join(_quote(c) for c in META)
    where = f" WHERE {compiled.where}" if compiled.where else ""
    return f"SELECT {meta}, {', '.join(compiled.items)} FROM {view} AS {_quote(compiled.alias)}{where}"


_SPARK_TYPES: dict[str, str] = {}
for _t, _names in {
    "string": "btrim initcap regexp_extract regexp_substr reverse translate format_string printf md5 sha sha1 sha2 "
    "base64 to_json date_format from_utc_timestamp format_number current_user user version typeof string "
    "split_part get_json_object concat_ws overlay elt hex",
    "int": "character_length size cardinality array_size hash dayofmonth dayofweek dayofyear day weekday weekofyear "
    "int datediff",
    "bigint": "unix_timestamp unix_seconds unix_millis unix_micros xxhash64 bigint timestampdiff",
    "double": "rand random randn e cbrt double months_between atan2 degrees signum",
    "boolean": "regexp_like rlike regexp startswith endswith contains array_contains isnull isnotnull isnan boolean",
    "timestamp": "to_timestamp timestampadd timestamp_seconds timestamp_millis timestamp_micros make_timestamp "
    "timestamp to_utc_timestamp",
    "date": "to_date date_add date_sub add_months last_day next_day make_date date curdate",
    "binary": "unhex binary unbase64 encode",
    "float": "float",
}.items():
    for _n in _names.split():
        _SPARK_TYPES[_n] = _t


class _Compiler:
    def __init__(self, parsed: ParsedQuery, table: TableSchema):
        self.text = parsed.text
        self.table = table
        qualifiers = {parsed.table, parsed.table.split(".")[-1], *([parsed.alias] if parsed.alias else [])}
        self.qualifiers = {q.lower() for q in qualifiers}
        self.bound: set[str] = set()  # lambda variables

    def error(self, message: str, node: exp.Expr) -> SqlError:
        return SqlError(f"{message} (at {position(self.text, node)} of the query)")

    # -- SELECT items ------------------------------------------------------------------------------
    def item(self, item: exp.Expr, item_text: str) -> list[tuple[Column, str | None, str]]:
        if isinstance(item, exp.Star):
            return self._all()
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            chain = [p.name for p in item.parts[:-1]]
            if len(chain) == 1 and chain[0].lower() in self.qualifiers and self._find(chain[0]) is None:
                return self._all()
            t = self._resolve(chain, item)
            fields = struct_fields(t.type)
            if fields is None:
                raise self.error(f"{'.'.join(chain)}.* needs a struct column, got {t.type}", item)
            star = to_spark(item)
            return [(Column(n, ft), None, star if i == 0 else "") for i, (n, ft) in enumerate(fields)]
        alias = item.alias if isinstance(item, exp.Alias) else None
        t = self.compile(item.this if isinstance(item, exp.Alias) else item)
        if t.type == "unit":
            raise missing_column(self.table, t.node.name)
        name = alias or t.name or item_text
        found = self._find(t.ref) if t.ref is not None else None
        ref = t.ref if found is not None and name == found.name else None
        type_ = "string" if t.type in (VOID, "unit", "interval") else t.type
        return [(Column(name, type_, t.nullable), ref, to_spark(exp.alias_(t.node, name, quoted=True)))]

    def _all(self) -> list[tuple[Column, str | None, str]]:
        return [(c, c.name, _quote(c.name)) for c in self.table.columns]

    # -- expressions --------------------------------------------------------------------------------
    def compile(self, node: exp.Expr) -> Typed:
        t = self._compile(node)
        return t if t.node.parent is None or t.node is node else Typed(t.node.copy(), t.type, t.nullable, t.ref, t.name)

    def _compile(self, node: exp.Expr) -> Typed:  # noqa: C901 -- one dispatch over node kinds
        if isinstance(node, exp.Literal):
            return Typed(node, "string" if node.is_string else number_type(node.this), False)
        if isinstance(node, exp.Null):
            return Typed(node, VOID)
        if isinstance(node, exp.Boolean):
            return Typed(node, "boolean", False)
        if isinstance(node, exp.HexString):
            return Typed(node, "binary", False)
        if isinstance(node, (exp.Column, exp.Dot)) and not isinstance(node.this, exp.Star):
            chain = self._path(node)
            if chain is not None:
                return self._column(chain, node)
        if isinstance(node, exp.Dot):
            base = self._sub(node, "this")
            return Typed(node, member_type(base.type, node.expression.name) or "string")
        if isinstance(node, exp.Paren):
            inner = self._sub(node, "this")
            return Typed(node, inner.type, inner.nullable)
        if isinstance(node, exp.Bracket):
            base = self._sub(node, "this")
            for index in list(node.expressions):
                t = self.compile(index)
                if t.node is not index:
                    index.replace(t.node)
            return Typed(node, element_type(base.type) or "string")
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self._cast(node)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            self._sub(node, "this")
            branches = ["true", *(["false"] if node.args.get("false") is not None else [])]
            return Typed(node, widen([self._sub(node, key).type for key in branches]))
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
            return self._arith(node)
        if isinstance(node, exp.IntDiv):
            self._children(node)
            return Typed(node, "bigint")
        if isinstance(node, (exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot, exp.BitwiseLeftShift,
                             exp.BitwiseRightShift)):  # fmt: skip
            types = [t.type for t in self._children(node)]
            return Typed(node, widen(types[:1] if "Shift" in type(node).__name__ else types).replace(VOID, "int"))
        if isinstance(node, exp.DPipe):  # || : concatenation, NULL if any part is NULL (unlike CONCAT)
            a, b = self.compile(node.this), self.compile(node.expression)
            return Typed(T("concat(_0, _1)", text(a), text(b)), "string")
        if isinstance(node, exp.Neg):
            a = self._sub(node, "this")
            return Typed(node, a.type, a.nullable)
        if isinstance(node, exp.Anonymous):
            return self._call(node)
        if isinstance(node, exp.Substring):
            args = [node.this, node.args.get("start"), node.args.get("length")]
            return self._seatunnel("SUBSTRING", node, [a for a in args if a is not None])
        if isinstance(node, exp.StrPosition):
            args = [node.args.get("substr"), node.this, node.args.get("position")]
            name = "LOCATE" if args[2] is not None else "POSITION"  # POSITION(a IN b[, start])
            return self._seatunnel(name, node, [a for a in args if a is not None])
        if isinstance(node, exp.Extract):
            return self._extract(node)
        if isinstance(node, (exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime)):
            name = {exp.CurrentDate: "CURRENT_DATE", exp.CurrentTimestamp: "CURRENT_TIMESTAMP"}.get(type(node), "CURRENT_TIME")
            return self._seatunnel(name, node, [])
        if isinstance(node, exp.Lambda):
            saved = set(self.bound)
            self.bound |= {p.name.lower() for p in node.expressions}
            self._sub(node, "this")
            self.bound = saved
            return Typed(node, "string")
        if isinstance(node, (exp.Query, exp.Subquery)):
            return Typed(node, "string")  # a scalar subquery runs as Spark SQL, typed string
        if isinstance(node, exp.Interval):
            self._children(node)
            return Typed(node, "interval")
        if isinstance(node, (exp.Predicate, exp.Connector, exp.Not)):
            self._children(node)
            return Typed(node, "boolean")
        if isinstance(node, exp.Trim):
            self._children(node)
            return Typed(node, "string")
        self._children(node)
        return Typed(node, "string")

    def _sub(self, node: exp.Expr, key: str) -> Typed:
        """Compile ``node.args[key]`` in place."""
        child = node.args[key]
        t = self.compile(child)
        if t.node is not child:
            node.set(key, t.node)
        return t

    def _children(self, node: exp.Expr) -> list[Typed]:
        out = []
        for child in list(node.iter_expressions()):
            if isinstance(child, exp.Identifier) or (isinstance(node, exp.Lambda) and child in node.expressions):
                continue
            t = self.compile(child)
            if t.node is not child:
                child.replace(t.node)
            out.append(t)
        return out

    # -- columns -------------------------------------------------------------------------------------
    @staticmethod
    def _path(node: exp.Expr) -> list[str] | None:
        if isinstance(node, exp.Column):
            return [p.name for p in node.parts]
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
            base = _Compiler._path(node.this)
            return None if base is None else [*base, node.expression.name]
        return None

    def _find(self, name: str) -> Column | None:
        for c in self.table.columns:
            if c.name == name:
                return c
        for c in self.table.columns:
            if c.name.lower() == name.lower():
                return c
        return None

    def _column(self, chain: list[str], node: exp.Expr) -> Typed:
        if len(chain) == 1 and self._find(chain[0]) is None:
            word = chain[0].upper()
            if chain[0].lower() in self.bound:
                return Typed(node, "string")
            if word in ("CURRENT_TIME", "CURRENT_DATE", "CURRENT_TIMESTAMP"):
                return self._seatunnel(word, node, [])
            if word in _UNITS:
                return Typed(exp.Var(this=chain[0]), "unit")
        return self._resolve(chain, node)

    def _resolve(self, chain: list[str], node: exp.Expr) -> Typed:
        if len(chain) > 1 and self._find(chain[0]) is None and chain[0].lower() in self.qualifiers:
            chain = chain[1:]
        col = self._find(chain[0])
        if col is None:
            raise missing_column(self.table, chain[0])
        t = col.type
        for j, part in enumerate(chain[1:], 1):
            if t.startswith("map<") and j < len(chain) - 1:  # sql.md: "can't query the nesting map"
                raise self.error(f"{'.'.join(chain)}: a map's value can only end the path (a map in a map cannot be "
                                 f"read with dots)", node)  # fmt: skip
            ft = member_type(t, part)
            if ft is None:
                raise missing_column(self.table, ".".join([col.name, *chain[1 : j + 1]]))
            t = ft
        if len(chain) == 1:
            return Typed(node, t, col.nullable, ref=col.name, name=chain[0])
        return Typed(node, t, True, name=chain[-1])

    # -- operators and syntax -------------------------------------------------------------------------
    def _arith(self, node: exp.Expr) -> Typed:
        op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}[type(node)]
        a, b = self._sub(node, "this"), self._sub(node, "expression")
        result = arith(op, a.type, b.type)
        if result is None:
            return Typed(node, "interval" if "interval" in (a.type, b.type) and op in "+-" else "string")
        if result in INTEGRAL or result == "double":
            # computed in the result type, as SeaTunnel: int / int is an int (Java's division)
            x, y = (cast(v, result) if is_number(v.type) and v.type != result and (result != "double" or v.type in FLOATING)
                    else v.node for v in (a, b))  # fmt: skip
            if op == "/" and result in INTEGRAL:
                return Typed(T(f"CAST(_0 DIV _1 AS {result.upper()})", x, y), result)
            node.set("this", x)
            node.set("expression", y)
        return Typed(node, result)

    def _cast(self, node: exp.Expr) -> Typed:
        a = self._sub(node, "this")
        to = node.args["to"]
        if to.is_type("time"):  # SeaTunnel's TIME: a string here, as the engine's schemas carry it
            if a.type in ("timestamp", "timestamp_ntz"):
                return Typed(T("date_format(_0, 'HH:mm:ss')", a), "string")
            if a.type == "date":
                return Typed(T("CASE WHEN _0 IS NULL THEN NULL ELSE '00:00:00' END", a), "string")
            if a.type in INTEGRAL:  # hhmmss, as SeaTunnel
                return Typed(T("format_string('%02d:%02d:%02d', _0 DIV 10000, _0 DIV 100 % 100, _0 % 100)", a), "string")
            return Typed(cast(a, "string"), "string")
        target = cast_type(to.sql(dialect="spark"))
        if target == "date" and a.type in INTEGRAL:  # yyyymmdd, as SeaTunnel
            return Typed(T("make_date(_0 DIV 10000, _0 DIV 100 % 100, _0 % 100)", a), "date")
        if target == "timestamp" and a.type in INTEGRAL:  # epoch milliseconds, as SeaTunnel
            return Typed(T("timestamp_millis(_0)", a), "timestamp")
        return Typed(node, target)

    def _case(self, node: exp.Case) -> Typed:
        if node.this is not None:
            self._sub(node, "this")
        types = []
        for branch in node.args.get("ifs") or []:
            self._sub(branch, "this")
            types.append(self._sub(branch, "true").type)
        if node.args.get("default") is not None:
            types.append(self._sub(node, "default").type)
        return Typed(node, widen(types))

    def _extract(self, node: exp.Extract) -> Typed:
        value = self._sub(node, "expression")
        field = node.this.name
        t = extract(field, value)
        if t is not None:
            return Typed(atomic(t.node), t.type)
        if field.upper() in _SPARK_EXTRACT_FIELDS:
            return Typed(node, "int")
        raise self.error(f"EXTRACT({field} FROM ...): unsupported field; use one of {', '.join(EXTRACT_FIELDS)}", node)

    # -- calls -----------------------------------------------------------------------------------------
    def _call(self, node: exp.Anonymous) -> Typed:
        name = node.name
        fn = FUNCTIONS.get(name.upper())
        if fn is not None and fn.rule is not None:
            return self._seatunnel(name.upper(), node, list(node.expressions))
        args = self._children(node)  # a Spark function: as written
        low = name.lower()
        if low in _SPARK_TYPES:
            return Typed(node, _SPARK_TYPES[low])
        if low in ("nvl", "greatest", "least") and args:
            return Typed(node, widen([a.type for a in args]))
        if low == "nvl2" and len(args) == 3:
            return Typed(node, widen([args[1].type, args[2].type]))
        if low in ("negative", "positive", "bround", "pmod") and args and is_number(args[0].type):
            return Typed(node, args[0].type)
        if low == "array" and args:
            return Typed(node, f"array<{widen([a.type for a in args]).replace(VOID, 'string')}>")
        if low in ("element_at", "get", "try_element_at") and len(args) == 2:
            return Typed(node, element_type(args[0].type) or "string")
        return Typed(node, "string")

    def _seatunnel(self, name: str, node: exp.Expr, raw: list[exp.Expr]) -> Typed:
        args = [self.compile(a) for a in raw]
        t = FUNCTIONS[name].rule(Call(name, node, args, self.text))  # type: ignore[misc]
        return Typed(atomic(t.node), t.type, t.nullable, t.ref, t.name)
