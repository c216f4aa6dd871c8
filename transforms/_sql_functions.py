"""SeaTunnel's Sql transform functions (``docs/seatunnel/transform-v2/sql-functions.md``) as Spark
expressions: :data:`FUNCTIONS` maps each name (upper case, every alias its own key, in page order)
to a :class:`SqlFunction` with the page's signature, whether it is supported and, if not, why.

Every function compiles to native Spark SQL (Catalyst, no Python). Where Spark has a function of
the same name with another meaning or arity (CONCAT ignores NULLs, DAY_OF_WEEK counts from Monday,
DATE_TRUNC takes the value first, REGEXP_REPLACE's fourth argument is flags, ...) the rule
rewrites it. Semantics follow the page; where the page is silent (NULL arguments, omitted
optional arguments, result types), SeaTunnel's implementation (``ZetaSQLFunction``,
``ZetaSQLType``), noted per function in :attr:`SqlFunction.note`.

A rule gets the call with its compiled arguments (:class:`Call`) and returns the Spark
expression with its plan-time type (:class:`~transforms._sql_dialect.Typed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from sqlglot import exp

from transforms._sql_dialect import SqlError, T, Typed, lit, position
from transforms._sql_types import DATETIME, FLOATING, INTEGRAL, VOID, decimal_parts, is_decimal, is_number, widen


@dataclass(frozen=True)
class SqlFunction:
    name: str
    section: str  # the heading on sql-functions.md
    signature: str  # as on the page
    supported: bool = True
    reason: str = ""  # why not, when not supported
    min_args: int = 0
    max_args: int | None = None  # None: any number
    note: str = ""  # choices where the page is silent or Spark differs
    rule: Callable[["Call"], Typed] | None = field(default=None, repr=False, compare=False)


@dataclass
class Call:
    name: str
    node: exp.Expr  # the call in the query (for positions)
    args: list[Typed]
    text: str  # the whole query

    def error(self, message: str) -> SqlError:
        return SqlError(f"{self.name}(): {message} (at {position(self.text, self.node)} of the query)")

    def is_const(self, i: int) -> bool:
        return _const(self.args[i].node) is not _NOT_CONST

    def const(self, i: int, what: str) -> Any:
        value = _const(self.args[i].node)
        if value is _NOT_CONST:
            raise self.error(f"{what} must be a constant")
        return value


_NOT_CONST = object()


def _const(node: exp.Expr) -> Any:
    if isinstance(node, exp.Paren):
        return _const(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            return float(text)
    if isinstance(node, exp.Neg):
        v = _const(node.this)
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else _NOT_CONST
    return _NOT_CONST


# -- helpers -------------------------------------------------------------------------


def _t(node: exp.Expr, type_: str, nullable: bool = True) -> Typed:
    return Typed(node, type_, nullable)


def cast(a: Typed, type_: str) -> exp.Expr:
    """``a`` as ``type_`` (unchanged when it already is)."""
    if a.type == type_:
        return a.node
    return exp.Cast(this=a.node.copy(), to=exp.DataType.build(type_, dialect="spark"))


def text(a: Typed) -> exp.Expr:
    """``a`` as a string (binary stays binary for the functions that take bytes); a new node."""
    return a.node.copy() if a.type in ("string", VOID, "binary") else cast(a, "string")


def _raise(message: str, *parts: exp.Expr) -> exp.Expr:
    """raise_error(message || parts...): a run-time error, as SeaTunnel's exception."""
    return T("raise_error(" + " || ".join(["_0", *(f"CAST(_{i + 1} AS STRING)" for i in range(len(parts)))]) + ")",
             lit(message), *parts)  # fmt: skip


def _guard(condition: exp.Expr, message: str, value: exp.Expr, *parts: exp.Expr) -> exp.Expr:
    return T("CASE WHEN _0 THEN _1 ELSE _2 END", condition, _raise(message, *parts), value)


def _num(a: Typed) -> Typed:
    """A numeric argument (strings are read as double, as Spark does)."""
    return a if is_number(a.type) or a.type == VOID else Typed(cast(a, "double"), "double")


_JAVA_ONLY_LETTERS = {
    "Y": "week-based year", "w": "week of week-based year", "W": "week of month", "e": "localized day of week",
    "c": "localized day of week", "A": "milli of day", "n": "nano of second", "N": "nano of day",
    "B": "day period", "p": "pad next", "g": "modified Julian day", "v": "generic time-zone name",
}  # fmt: skip


def datetime_pattern(call: Call, i: int) -> exp.Expr:
    """A java.time.format.DateTimeFormatter pattern argument as a Spark datetime pattern.

    The letters mean the same in both; ``u`` (year) is written ``y`` for Spark; letters Spark
    cannot format (week-based fields, nano/milli of day, ...) are a plan-time error naming them."""
    node = call.args[i].node
    pattern = _const(node)
    if not isinstance(pattern, str):
        return node
    out, quoted = [], False
    for ch in pattern:
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in _JAVA_ONLY_LETTERS:
            raise call.error(f"pattern letter {ch!r} ({_JAVA_ONLY_LETTERS[ch]}) in {pattern!r} has no Spark equivalent")
        elif not quoted and ch == "u":
            ch = "y"
        out.append(ch)
    return lit("".join(out))


def _unit(call: Call, i: int, allowed: tuple[str, ...], default: str | None = None) -> str:
    if i >= len(call.args):
        assert default is not None
        return default
    value = call.const(i, "the datetime field")
    if value is None and default is not None:
        return default
    unit = str(value).upper()
    if unit not in allowed:
        raise call.error(f"unsupported datetime field {value!r}; use one of {', '.join(allowed)}")
    return unit


def _regex(call: Call, regex: int, flags: int | None) -> exp.Expr:
    """The pattern with SeaTunnel's flags ('i', 'c', 'n', 'm'; later ones win) as inline flags."""
    mode = call.const(flags, "the flags") if flags is not None and flags < len(call.args) else None
    prefix = ""
    if mode:
        insensitive, dotall, multiline = False, False, False
        for ch in str(mode):
            if ch == "i":
                insensitive = True
            elif ch == "c":
                insensitive = False
            elif ch == "n":
                dotall = True
            elif ch == "m":
                multiline = True
            else:
                raise call.error(f"flags may only contain 'i', 'c', 'n', 'm', got {mode!r}")
        if insensitive or dotall or multiline:  # Java's flags always hold UNICODE_CASE
            prefix = "(?" + "iu" * insensitive + "s" * dotall + "m" * multiline + ")"
    pattern = call.args[regex]
    if not prefix:
        return text(pattern)
    value = _const(pattern.node)
    if isinstance(value, str):
        return lit(prefix + value)
    return T("concat(_0, _1)", lit(prefix), text(pattern))


def _same_numeric(a: Typed, node: exp.Expr) -> Typed:
    """``node`` cast back to ``a``'s numeric type (Spark's CEIL/FLOOR/... widen it)."""
    return Typed(cast(Typed(node, "?"), a.type), a.type)


# -- string functions ----------------------------------------------------------------


def _ascii(c: Call) -> Typed:
    return _t(T("ascii(_0)", text(c.args[0])), "int")


def _length(spark: str) -> Callable[[Call], Typed]:
    return lambda c: _t(T(f"CAST({spark}(_0) AS BIGINT)", text(c.args[0])), "bigint")


def _chr(c: Call) -> Typed:
    # Java's (char) n: the UTF-16 unit n mod 65536 (Spark's chr() takes n mod 256)
    return _t(T("decode(unhex(lpad(hex(pmod(CAST(_0 AS INT), 65536)), 4, '0')), 'UTF-16BE')", c.args[0]), "string")


def _string(a: Typed) -> exp.Expr:
    return a.node.copy() if a.type in ("string", VOID) else cast(a, "string")


def _concat(c: Call) -> Typed:
    return _t(exp.Anonymous(this="concat_ws", expressions=[lit(""), *(_string(a) for a in c.args)]), "string", False)


def _concat_ws(c: Call) -> Typed:
    sep = c.args[0]
    sep_node = _string(sep) if isinstance(_const(sep.node), str) else T("coalesce(_0, '')", _string(sep))
    return _t(exp.Anonymous(this="concat_ws", expressions=[sep_node, *(_string(a) for a in c.args[1:])]), "string",
              False)  # fmt: skip


def _hextoraw(c: Call) -> Typed:
    s = text(c.args[0])
    value = T("decode(unhex(_0), 'UTF-16BE')", s)
    check = T("length(_0) % 4 <> 0", s)
    return _t(_guard(check, "HEXTORAW(): the length of the hex string must be a multiple of 4: ", value, s), "string")


def _rawtohex(c: Call) -> Typed:
    a = c.args[0]
    if a.type == "binary":
        return _t(T("lower(hex(_0))", a), "string")
    return _t(T("lower(hex(encode(_0, 'UTF-16BE')))", text(a)), "string")


def _insert(c: Call) -> Typed:
    s1, start, length, s2 = text(c.args[0]), c.args[1].node, c.args[2].node, text(c.args[3])
    return _t(T("CASE WHEN _0 IS NULL THEN _3 WHEN _3 IS NULL THEN _0 "
                "WHEN _1 < 1 OR _2 <= 0 OR char_length(_3) = 0 OR _1 - 1 > char_length(_0) THEN _0 "
                "ELSE concat(substring(_0, 1, _1 - 1), _3, substring(_0, _1 + _2)) END", s1, start, length, s2),
              "string")  # fmt: skip


def _simple(spark: str, type_: str, as_text: bool = True) -> Callable[[Call], Typed]:
    def rule(c: Call) -> Typed:
        args = [text(a) if as_text and i == 0 else a.node for i, a in enumerate(c.args)]
        return _t(exp.Anonymous(this=spark, expressions=[a.copy() for a in args]), type_)

    return rule


def _last_index(search: exp.Expr, s: exp.Expr, start: exp.Expr) -> exp.Expr:
    """Java's s.lastIndexOf(search, length(s) + start) + 1 (start < 0)."""
    return T("CASE WHEN char_length(_1) + _2 < 0 THEN 0 "
             "WHEN locate(reverse(_0), reverse(substring(_1, 1, char_length(_1) + _2 + char_length(_0)))) = 0 THEN 0 "
             "ELSE char_length(substring(_1, 1, char_length(_1) + _2 + char_length(_0))) "
             "- locate(reverse(_0), reverse(substring(_1, 1, char_length(_1) + _2 + char_length(_0)))) "
             "- char_length(_0) + 2 END", search, s, start)  # fmt: skip


def _locate_in(search: exp.Expr, s: exp.Expr, start: exp.Expr | None) -> Typed:
    if start is None:
        return _t(T("CASE WHEN _1 IS NULL THEN 0 ELSE locate(_0, _1) END", search, s), "int")
    return _t(T("CASE WHEN _1 IS NULL THEN 0 WHEN _2 < 0 THEN _3 "
                "WHEN _0 = '' THEN least(greatest(_2, 1), char_length(_1) + 1) "  # Java: "" is found where the search starts
                "ELSE locate(_0, _1, CASE WHEN _2 = 0 THEN 1 ELSE _2 END) END",
                search, s, start, _last_index(search, s, start)), "int")  # fmt: skip


def _locate(c: Call) -> Typed:
    return _locate_in(text(c.args[0]), text(c.args[1]), c.args[2].node if len(c.args) > 2 else None)


def _instr(c: Call) -> Typed:
    return _locate_in(text(c.args[1]), text(c.args[0]), c.args[2].node if len(c.args) > 2 else None)


def _position(c: Call) -> Typed:
    return _locate_in(text(c.args[0]), text(c.args[1]), None)


def _pad(spark: str) -> Callable[[Call], Typed]:
    def rule(c: Call) -> Typed:
        if len(c.args) < 3 or c.is_const(2):
            given = c.const(2, "") if len(c.args) > 2 else None
            pad = lit(str(given)[0] if given not in (None, "") else " ")
        else:
            pad = T("CASE WHEN _0 IS NULL OR _0 = '' THEN ' ' ELSE left(_0, 1) END", text(c.args[2]))
        return _t(exp.Anonymous(this=spark, expressions=[text(c.args[0]).copy(), c.args[1].node.copy(), pad]), "string")

    return rule


def _trim(where: str) -> Callable[[Call], Typed]:
    def rule(c: Call) -> Typed:
        if len(c.args) < 2 or c.is_const(1):
            given = c.const(1, "") if len(c.args) > 1 else None
            char = lit(str(given)[0] if given not in (None, "") else " ")
        else:
            char = T("CASE WHEN _0 IS NULL OR _0 = '' THEN ' ' ELSE left(_0, 1) END", text(c.args[1]))
        return _t(T(f"TRIM({where} _1 FROM _0)", text(c.args[0]), char), "string")

    return rule


def _regexp_replace(c: Call) -> Typed:
    return _t(T("regexp_replace(_0, _1, _2)", text(c.args[0]), _regex(c, 1, 3), text(c.args[2])), "string")


def _regexp_like(c: Call) -> Typed:
    return _t(T("regexp_like(_0, _1)", text(c.args[0]), _regex(c, 1, 2)), "boolean")


def _regexp_substr(c: Call) -> Typed:
    if len(c.args) == 2:
        return _t(T("regexp_substr(_0, _1)", text(c.args[0]), _regex(c, 1, None)), "string")
    if len(c.args) != 6:
        raise c.error("takes 2 arguments, or 6 (inputString, regexString, positionInt, occurrenceInt, flagsString, "
                      "groupInt)")  # fmt: skip
    s, pos, occ, group = text(c.args[0]), c.args[2].node, c.args[3].node, c.args[5].node
    return _t(T("get(regexp_extract_all(substring(_0, greatest(coalesce(_1, 1), 1)), _2, coalesce(_3, 0)), "
                "greatest(coalesce(_4, 1), 1) - 1)", s, pos, _regex(c, 1, 4), group, occ), "string")  # fmt: skip


def _soundex(c: Call) -> Typed:
    # H2's SOUNDEX skips every non-letter and gives '0000' without letters; Spark's returns the
    # input when it does not start with a letter
    return _t(T("CASE WHEN soundex(regexp_replace(_0, '[^A-Za-z]', '')) = '' THEN '0000' "
                "ELSE soundex(regexp_replace(_0, '[^A-Za-z]', '')) END", text(c.args[0])), "string")  # fmt: skip


def _substring(c: Call) -> Typed:
    args = [text(c.args[0]), *(a.node for a in c.args[1:])]
    if len(args) == 3:  # a NULL length is no length (SeaTunnel)
        length = _const(args[2])
        if length is None:
            args = args[:2]
        elif length is _NOT_CONST:
            args[2] = T("coalesce(_0, 2147483647)", args[2])
    return _t(T("nullif(_0, '')", exp.Anonymous(this="substring", expressions=[a.copy() for a in args])), "string")


def _to_char(c: Call) -> Typed:
    a = c.args[0]
    if a.type == VOID:
        return _t(exp.Null(), "string")
    if len(c.args) > 1 and c.args[1].type != VOID:
        if a.type in DATETIME:
            return _t(T("date_format(_0, _1)", a, datetime_pattern(c, 1)), "string")
        if is_number(a.type):
            fmt = _const(c.args[1].node)
            if isinstance(fmt, str) and (not fmt or set(fmt.upper()) - set("09.,DGSMIPR$ ")):
                raise c.error(f"number format {fmt!r} may only use 0 9 . , D G S MI PR $ (Oracle's TO_CHAR)")
            return _t(T("to_char(_0, _1)", a, c.args[1]), "string")
    return _t(cast(a, "string"), "string")


# -- numeric functions -----------------------------------------------------------------


def _abs(c: Call) -> Typed:
    a = _num(c.args[0])
    return _t(T("abs(_0)", a), a.type if a.type != VOID else "double")


def _double(spark: str, guard: str | None = None) -> Callable[[Call], Typed]:
    """A function of one number returning a double; ``guard`` (a condition on _0) raises."""

    def rule(c: Call) -> Typed:
        a = c.args[0]
        value = T(f"{spark}(_0)", a)
        if guard:
            value = _guard(T(guard, a), f"{c.name}() argument is out of range: ", value, a.node)
        return _t(value, "double")

    return rule


def _mod(c: Call) -> Typed:
    a, b = _num(c.args[0]), _num(c.args[1])
    type_ = next((t for t in (b.type, a.type) if t != VOID), "int")
    return _t(cast(Typed(T("mod(_0, _1)", a, b), "?"), type_), type_)


def _round_like(spark: str) -> Callable[[Call], Typed]:
    """CEIL/FLOOR: the argument's type with scale 0 (Spark: bigint for floats, decimal(p-s+1,0))."""

    def rule(c: Call) -> Typed:
        a = _num(c.args[0])
        node = T(f"{spark}(_0)", a)
        if is_decimal(a.type):
            p, s = decimal_parts(a.type)  # type: ignore[misc]
            return _t(node, f"decimal({min(p - s + 1, 38)},0)")
        return _same_numeric(a, node) if a.type != VOID else _t(node, "double")

    return rule


def _log(c: Call) -> Typed:
    if len(c.args) == 1:  # deprecated one-argument form: natural logarithm
        return _double("ln", "_0 <= 0")(c)
    base, x = c.args
    value = T("CASE WHEN _0 = 10 THEN log10(_1) WHEN _0 = e() THEN ln(_1) ELSE log(_0, _1) END", base, x)
    value = _guard(T("_0 <= 0 OR _0 = 1", base), "LOG() base must be positive and not 1: ", value, base.node)
    return _t(_guard(T("_0 <= 0", x), "LOG() argument must be positive: ", value, x.node), "double")


_MULTIPLIER, _MASK, _MOD48 = 0x5DEECE66D, (1 << 48) - 1, 1 << 48


def _rand(c: Call) -> Typed:
    if not c.args or c.args[0].type == VOID:
        return _t(T("rand()"), "double")
    # SeaTunnel: new Random(); setSeed(seed.intValue()); nextDouble() -- java.util.Random's LCG
    seed = f"((CAST(CAST(_0 AS INT) AS BIGINT) ^ {_MULTIPLIER}) & {_MASK})"
    s1 = f"CAST(pmod(CAST({seed} AS DECIMAL(20,0)) * {_MULTIPLIER} + 11, {_MOD48}) AS DECIMAL(20,0))"
    s2 = f"pmod({s1} * {_MULTIPLIER} + 11, {_MOD48})"
    bits = f"shiftleft(shiftright(CAST({s1} AS BIGINT), 22), 27) + shiftright(CAST({s2} AS BIGINT), 21)"
    return _t(T(f"CASE WHEN _0 IS NULL THEN rand() ELSE CAST({bits} AS DOUBLE) / 9007199254740992D END", c.args[0]),
              "double")  # fmt: skip


def _round(c: Call) -> Typed:
    a = _num(c.args[0])
    digits = c.const(1, "the number of digits") if len(c.args) > 1 else 0
    digits = 0 if digits is None else int(digits)
    node = T("round(_0, _1)", a, lit(digits))
    if is_decimal(a.type):
        p, s = decimal_parts(a.type)  # type: ignore[misc]
        if digits < 0:
            return _t(node, f"decimal({max(p - s + 1, -digits + 1)},0)")
        scale = min(s, digits)
        return _t(node, f"decimal({min(p - s + 1 + scale, 38)},{scale})")
    return _t(node, a.type if a.type != VOID else "double")


def _sign(c: Call) -> Typed:
    a = _num(c.args[0])
    nan = "WHEN isnan(_0) THEN 0 " if a.type in FLOATING else ""
    # SeaTunnel returns 0 for NULL (a Java int)
    return _t(T(f"CASE {nan}WHEN _0 > 0 THEN 1 WHEN _0 < 0 THEN -1 ELSE 0 END", a), "int", False)


def _trunc(c: Call) -> Typed:
    a = c.args[0]
    if a.type in DATETIME:  # not SeaTunnel's (numbers only): Spark's TRUNC(date, unit)
        return _t(T("trunc(_0, _1)", a, c.args[1]) if len(c.args) > 1 else T("trunc(_0, 'DAY')", a), "date")
    a = _num(a)
    digits = c.const(1, "the number of digits") if len(c.args) > 1 else 0
    digits = 0 if digits is None else int(digits)
    if a.type in INTEGRAL and digits >= 0:
        return a
    node = T("CASE WHEN _0 < 0 THEN ceil(_0, _1) ELSE floor(_0, _1) END", a, lit(digits))
    return _same_numeric(a, node) if a.type != VOID else _t(node, "double")


# -- date and time functions --------------------------------------------------------------

_ADD_UNITS = ("YEAR", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND")
_TRUNC_UNITS = ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND")


def _spark_form(c: Call, spark: str, type_: str) -> Typed | None:
    """``f(DAY, n, ts)`` (Spark's form: a unit keyword first) passes through."""
    if c.args and c.args[0].type == "unit" and len(c.args) == 3:
        return _t(exp.Anonymous(this=spark, expressions=[a.node.copy() for a in c.args]), type_)
    return None


def _dateadd(c: Call) -> Typed:
    spark = _spark_form(c, "timestampadd", "timestamp")
    if spark:
        return spark
    value, n = c.args[0], c.args[1]
    unit = _unit(c, 2, _ADD_UNITS, "DAY")
    if value.type == VOID:
        return _t(exp.Null(), "timestamp")
    if value.type == "date" and unit in ("YEAR", "MONTH", "WEEK", "DAY"):
        template = {"YEAR": "add_months(_0, CAST(_1 AS INT) * 12)", "MONTH": "add_months(_0, CAST(_1 AS INT))",
                    "WEEK": "date_add(_0, CAST(_1 AS INT) * 7)", "DAY": "date_add(_0, CAST(_1 AS INT))"}[unit]  # fmt: skip
        return _t(T(template, value, n), "date")
    type_ = value.type if value.type in ("timestamp", "timestamp_ntz") else "timestamp"
    return _t(T(f"timestampadd({unit}, _1, _0)", Typed(cast(value, type_), type_), n), type_)


def _datediff(c: Call) -> Typed:
    spark = _spark_form(c, "datediff", "bigint")
    if spark:
        return spark
    unit = _unit(c, 2, _ADD_UNITS, "DAY")
    # the number of unit boundaries crossed between a and b
    return _t(T(f"timestampdiff({unit}, date_trunc('{unit}', _0), date_trunc('{unit}', _1))", c.args[0], c.args[1]),
              "bigint")  # fmt: skip


def _date_trunc(c: Call) -> Typed:
    if len(c.args) == 2 and isinstance(_const(c.args[0].node), str) and not isinstance(_const(c.args[1].node), str):
        return _t(T("date_trunc(_0, _1)", c.args[0], c.args[1]), "timestamp")  # Spark's order: unit first
    if len(c.args) > 1 and not c.is_const(1):
        return _t(T("date_trunc(_1, _0)", c.args[0], c.args[1]), "timestamp")
    unit = _unit(c, 1, _TRUNC_UNITS, "DAY")
    return _t(T(f"date_trunc('{unit}', _0)", c.args[0]), "timestamp")


def _formatted(pattern: str) -> Callable[[Call], Typed]:
    return lambda c: _t(T(f"date_format(_0, '{pattern}')", c.args[0]), "string")


def _week(c: Call) -> Typed:
    # SeaTunnel: date.get(WeekFields.ISO.weekOfYear()) + 1 (java.time's arithmetic, weeks from Monday,
    # week 1 = the first with 4 days)
    return _t(T("(7 + CASE WHEN pmod(dayofyear(_0) - weekday(_0) - 1, 7) + 1 > 4 "
                "THEN 7 - pmod(dayofyear(_0) - weekday(_0) - 1, 7) ELSE -pmod(dayofyear(_0) - weekday(_0) - 1, 7) END "
                "+ dayofyear(_0) - 1) DIV 7 + 1", c.args[0]), "int")  # fmt: skip


def _is_date(c: Call) -> Typed:
    fmt = _const(c.args[1].node)
    if isinstance(fmt, str) and "yy" not in fmt and "mm" not in fmt:
        return _t(T("_0 IS NULL", c.args[0]), "boolean", False)  # SeaTunnel cannot parse it: false
    # SeaTunnel: parsing NULL gives NULL without an exception, so IS_DATE(NULL, f) is true
    return _t(T("CASE WHEN _0 IS NULL THEN TRUE ELSE try_to_timestamp(_0, _1) IS NOT NULL END",
                text(c.args[0]), datetime_pattern(c, 1)), "boolean", False)  # fmt: skip


def _parsedatetime(c: Call) -> Typed:
    fmt = c.const(1, "the format")
    pattern = datetime_pattern(c, 1)
    s = text(c.args[0])
    fmt = fmt or ""
    if "yy" in fmt and "mm" in fmt:
        return _t(T("to_timestamp(_0, _1)", s, pattern), "timestamp")
    if "yy" in fmt:
        return _t(T("to_date(_0, _1)", s, pattern), "date")
    if "mm" in fmt:  # a TIME: carried as a string, as the engine's schemas do
        return _t(T("date_format(to_timestamp(_0, _1), 'HH:mm:ss')", s, pattern), "string")
    raise c.error(f"the format {fmt!r} has neither a year (yy) nor minutes (mm)")


def _from_unixtime(c: Call) -> Typed:
    seconds, pattern = c.args[0], datetime_pattern(c, 1)
    if len(c.args) == 2 or c.args[2].type == VOID:
        return _t(T("from_unixtime(_0, _1)", seconds, pattern), "string")
    local = T("convert_timezone('UTC', _1, timestampadd(SECOND, _0, CAST('1970-01-01 00:00:00' AS TIMESTAMP_NTZ)))",
              seconds, c.args[2])  # fmt: skip
    return _t(T("date_format(_0, _1)", local, pattern), "string")


# -- system functions ---------------------------------------------------------------------


def _coalesce(spark: str) -> Callable[[Call], Typed]:
    def rule(c: Call) -> Typed:
        type_ = widen([a.type for a in c.args])
        return _t(exp.Anonymous(this=spark, expressions=[a.node.copy() for a in c.args]), type_)

    return rule


def _nullif(c: Call) -> Typed:
    return _t(T("nullif(_0, _1)", c.args[0], c.args[1]), c.args[0].type)


def _current(spark: str, type_: str) -> Callable[[Call], Typed]:
    return lambda c: _t(T(spark), type_, False)


# -- the table -------------------------------------------------------------------------------------

FUNCTIONS: dict[str, SqlFunction] = {}


def _add(section: str, signature: str, names: str, args: tuple[int, int | None], rule: Callable[[Call], Typed] | None,
         note: str = "", reason: str = "", syntax: bool = False) -> None:  # fmt: skip
    """Register ``names`` (space-separated aliases; one name when ``syntax``: compiled by
    :mod:`transforms._sql_compile`, not a call). Without a rule (and not syntax): refused for ``reason``."""
    for name in [names] if syntax else names.split():
        FUNCTIONS[name] = SqlFunction(name, section, signature, rule is not None or syntax, reason, args[0], args[1],
                                      note, rule)  # fmt: skip


# String Functions
_add("ASCII", "ASCII(string)", "ASCII", (1, 1), _ascii)
_add("BIT_LENGTH", "BIT_LENGTH(bytes)", "BIT_LENGTH", (1, 1), _length("bit_length"))
_add("CHAR_LENGTH / LENGTH", "CHAR_LENGTH | LENGTH (string)", "CHAR_LENGTH LENGTH", (1, 1), _length("char_length"))
_add("OCTET_LENGTH", "OCTET_LENGTH(bytes)", "OCTET_LENGTH", (1, 1), _length("octet_length"))
_add("CHAR / CHR", "CHAR | CHR (int)", "CHAR CHR", (1, 1), _chr, "the UTF-16 character n (Java's (char) n), not n mod 256")
_add("CONCAT", "CONCAT(string, string[, string ...] )", "CONCAT", (1, None), _concat,
     "NULL arguments are skipped; all NULL gives ''")
_add("CONCAT_WS", "CONCAT_WS(separatorString, string, string[, string ...] )", "CONCAT_WS", (2, None), _concat_ws,
     "a NULL separator is ''; NULL arguments are skipped")
_add("HEXTORAW", "HEXTORAW(string)", "HEXTORAW", (1, 1), _hextoraw, "a length not a multiple of 4 is a run-time error")
_add("RAWTOHEX", "RAWTOHEX(string)", "RAWTOHEX", (1, 1), _rawtohex, "lower-case hex; bytes: 2 digits per byte")
_add("INSERT", "INSERT(originalString, startInt, lengthInt, addString)", "INSERT", (4, 4), _insert,
     "a NULL original gives the added string, a NULL added string the original")
_add("LOWER / LCASE", "LOWER | LCASE (string)", "LOWER LCASE", (1, 1), _simple("lower", "string"))
_add("UPPER / UCASE", "UPPER | UCASE (string)", "UPPER UCASE", (1, 1), _simple("upper", "string"))
_add("LEFT", "LEFT(string, int)", "LEFT", (2, 2), _simple("left", "string"))
_add("RIGHT", "RIGHT(string, int)", "RIGHT", (2, 2), _simple("right", "string"))
_add("LOCATE / INSTR / POSITION", "LOCATE(searchString, string[, startInit])", "LOCATE", (2, 3), _locate,
     "a NULL string gives 0")
_add("LOCATE / INSTR / POSITION", "INSTR(string, searchString[, startInit])", "INSTR", (2, 3), _instr,
     "a NULL string gives 0")
_add("LOCATE / INSTR / POSITION", "POSITION(searchString, string)", "POSITION", (2, 2), _position,
     "also POSITION(searchString IN string); a NULL string gives 0")
_add("LPAD", "LPAD(string ,int[, string])", "LPAD", (2, 3), _pad("lpad"), "pads with the first character of the padding")
_add("RPAD", "RPAD(string, int[, string])", "RPAD", (2, 3), _pad("rpad"), "pads with the first character of the padding")
_add("LTRIM", "LTRIM(string[, characterToTrimString])", "LTRIM", (1, 2), _trim("LEADING"),
     "trims the first character of the second argument (default space)")
_add("RTRIM", "RTRIM(string[, characterToTrimString])", "RTRIM", (1, 2), _trim("TRAILING"),
     "trims the first character of the second argument (default space)")
_add("TRIM", "TRIM(string[, characterToTrimString])", "TRIM", (1, 2), _trim("BOTH"),
     "both ends; TRIM(BOTH|LEADING|TRAILING chars FROM string) is Spark's (any of the characters)")
_add("REGEXP_REPLACE", "REGEXP_REPLACE(inputString, regexString, replacementString[, flagsString])", "REGEXP_REPLACE",
     (3, 4), _regexp_replace, "flags must be a constant")
_add("REGEXP_LIKE", "REGEXP_LIKE(inputString, regexString[, flagsString])", "REGEXP_LIKE", (2, 3), _regexp_like,
     "Matcher.find(): a match anywhere; flags must be a constant")
_add("REGEXP_SUBSTR", "REGEXP_SUBSTR(inputString, regexString[, positionInt, occurrenceInt, flagsString, groupInt])",
     "REGEXP_SUBSTR", (2, 6), _regexp_substr, "2 or 6 arguments; no match gives NULL; flags must be a constant")
_add("REPEAT", "REPEAT(string, int)", "REPEAT", (2, 2), _simple("repeat", "string"))
_add("REPLACE", "REPLACE(string, searchString[, replacementString])", "REPLACE", (2, 3), _simple("replace", "string"))
_add("SOUNDEX", "SOUNDEX(string)", "SOUNDEX", (1, 1), _soundex, "non-letters are skipped; no letters gives '0000'")
_add("SPACE", "SPACE(int)", "SPACE", (1, 1), _simple("space", "string", as_text=False))
_add("SUBSTRING / SUBSTR", "SUBSTRING | SUBSTR (string, startInt[, lengthInt ])", "SUBSTRING SUBSTR", (2, 3),
     _substring, "an empty result is NULL (H2)")
_add("TO_CHAR", "TO_CHAR(value[, formatString])", "TO_CHAR", (1, 2), _to_char,
     "dates/timestamps: a java.time pattern; numbers: Oracle's number format (Spark's to_char); "
     "without a format: the value as a string")
_add("TRANSLATE", "TRANSLATE(value, searchString, replacementString)", "TRANSLATE", (3, 3), _simple("translate", "string"))
# Numeric Functions
_add("ABS", "ABS(numeric)", "ABS", (1, 1), _abs)
for _name in ("ACOS", "ASIN", "ATAN", "COS", "COSH", "COT", "SIN", "SINH", "TAN", "TANH"):
    if _name == "COT":
        _add("COT", "COT(numeric)", "COT", (1, 1), _double("cot", "tan(_0) = 0"), "COT(0) is a run-time error")
    else:
        _add(_name, f"{_name}(numeric)", _name, (1, 1), _double(_name.lower()))
_add("MOD", "MOD(dividendNumeric, divisorNumeric )", "MOD", (2, 2), _mod, "the divisor's type")
_add("CEIL / CEILING", "CEIL | CEILING (numeric)", "CEIL CEILING", (1, 1), _round_like("ceil"), "the argument's type")
_add("EXP", "EXP(numeric)", "EXP", (1, 1), _double("exp"))
_add("FLOOR", "FLOOR(numeric)", "FLOOR", (1, 1), _round_like("floor"), "the argument's type")
_add("LN", "LN(numeric)", "LN", (1, 1), _double("ln", "_0 <= 0"), "a non-positive argument is a run-time error")
_add("LOG", "LOG(baseNumeric, numeric)", "LOG", (1, 2), _log, "one argument: natural logarithm")
_add("LOG10", "LOG10(numeric)", "LOG10", (1, 1), _double("log10", "_0 <= 0"))
_add("RADIANS", "RADIANS(numeric)", "RADIANS", (1, 1), _double("radians"))
_add("SQRT", "SQRT(numeric)", "SQRT", (1, 1), _double("sqrt"))
_add("PI", "PI()", "PI", (0, 0), _current("pi()", "double"))
_add("POWER", "POWER(numeric, numeric)", "POWER", (2, 2), lambda c: _t(T("power(_0, _1)", *c.args), "double"))
_add("RAND / RANDOM", "RAND | RANDOM([ int ])", "RAND RANDOM", (0, 1), _rand,
     "with a seed: java.util.Random(seed).nextDouble(), as SeaTunnel")
_add("ROUND", "ROUND(numeric[, digitsInt])", "ROUND", (1, 2), _round, "HALF_UP; digits must be a constant")
_add("SIGN", "SIGN(numeric)", "SIGN", (1, 1), _sign, "NULL gives 0 (SeaTunnel)")
_add("TRUNC", "TRUNC | TRUNCATE(numeric[, digitsInt])", "TRUNC TRUNCATE", (1, 2), _trunc,
     "the argument's type; digits must be a constant")
# Time and Date Functions
_add("CURRENT_DATE", "CURRENT_DATE [()]", "CURRENT_DATE", (0, 0), _current("current_date()", "date"))
_add("CURRENT_TIME", "CURRENT_TIME [()]", "CURRENT_TIME", (0, 0),
     _current("date_format(current_timestamp(), 'HH:mm:ss.SSSSSS')", "string"), "a string (the engine has no TIME type)")
_add("CURRENT_TIMESTAMP / NOW", "CURRENT_TIMESTAMP[()] | NOW()", "CURRENT_TIMESTAMP NOW", (0, 0),
     _current("current_timestamp()", "timestamp"))
_add("DATEADD / TIMESTAMPADD", "DATEADD| TIMESTAMPADD(dateAndTime, addIntLong, datetimeFieldString)",
     "DATEADD TIMESTAMPADD", (2, 3), _dateadd,
     "the field must be a constant (default DAY); TIMESTAMPADD(DAY, n, ts) is Spark's")
_add("DATEDIFF", "DATEDIFF(aDateAndTime, bDateAndTime, datetimeFieldString)", "DATEDIFF", (2, 3), _datediff,
     "crossed unit boundaries from a to b; the field must be a constant (default DAY); DATEDIFF(DAY, a, b) is Spark's")
_add("DATE_TRUNC", "DATE_TRUNC (dateAndTime, datetimeFieldString)", "DATE_TRUNC", (1, 2), _date_trunc,
     "a timestamp; DATE_TRUNC('DAY', ts) (Spark's order) also works")
_add("DAYNAME", "DAYNAME(dateAndTime)", "DAYNAME", (1, 1), _formatted("EEEE"), "the full English name")
_add("DAY_OF_MONTH", "DAY_OF_MONTH(dateAndTime)", "DAY_OF_MONTH", (1, 1), _simple("dayofmonth", "int", False))
_add("DAY_OF_WEEK", "DAY_OF_WEEK(dateAndTime)", "DAY_OF_WEEK", (1, 1),
     lambda c: _t(T("weekday(_0) + 1", c.args[0]), "int"), "1 = Monday ... 7 = Sunday")
_add("DAY_OF_YEAR", "DAY_OF_YEAR(dateAndTime)", "DAY_OF_YEAR", (1, 1), _simple("dayofyear", "int", False))
_add("EXTRACT", "EXTRACT ( datetimeField FROM dateAndTime)", "EXTRACT", (2, 2), None,
     "int; EPOCH: seconds as decimal(18,6); DAYOFWEEK: 1 = Monday; Spark's other fields pass through", syntax=True)
_add("FORMATDATETIME", "FORMATDATETIME (dateAndTime, formatString)", "FORMATDATETIME", (2, 2),
     lambda c: _t(T("date_format(_0, _1)", c.args[0], datetime_pattern(c, 1)), "string"), "a java.time pattern")
for _name, _spark in (("HOUR", "hour"), ("MINUTE", "minute"), ("MONTH", "month")):
    _add(_name, f"{_name}(dateAndTime)", _name, (1, 1), _simple(_spark, "int", False))
_add("MONTHNAME", "MONTHNAME(dateAndTime)", "MONTHNAME", (1, 1), _formatted("MMMM"), "the full English name")
_add("IS_DATE", "IS_DATE(string, formatString)", "IS_DATE", (2, 2), _is_date,
     "a java.time pattern; IS_DATE(NULL, f) is true (SeaTunnel)")
_add("PARSEDATETIME / TO_DATE", "PARSEDATETIME | TO_DATE(string, formatString)", "PARSEDATETIME TO_DATE", (2, 2),
     _parsedatetime, "the format must be a constant: with yy and mm a timestamp, with yy a date, with mm a time "
     "(string), as SeaTunnel")
for _name, _spark in (("QUARTER", "quarter"), ("SECOND", "second")):
    _add(_name, f"{_name}(dateAndTime)", _name, (1, 1), _simple(_spark, "int", False))
_add("WEEK", "WEEK(dateAndTime)", "WEEK", (1, 1), _week, "SeaTunnel's: ISO week-of-year (weeks from Monday) + 1")
_add("YEAR", "YEAR(dateAndTime)", "YEAR", (1, 1), _simple("year", "int", False))
_add("FROM_UNIXTIME", "FROM_UNIXTIME (unixtime, formatString,timeZone)", "FROM_UNIXTIME", (2, 3), _from_unixtime,
     "without a time zone: the session's")
# System Functions
_add("CAST", "CAST(value as dataType)", "CAST", (1, 1), None,
     "also CONVERT(value AS type) and value::type; integers to DATE are yyyymmdd, to TIMESTAMP epoch milliseconds, "
     "to TIME hhmmss; TIME is a string 'HH:mm:ss'", syntax=True)
_add("COALESCE", "COALESCE(aValue, bValue [,...])", "COALESCE", (1, None), _coalesce("coalesce"))
_add("IFNULL", "IFNULL(aValue, bValue)", "IFNULL", (2, 2), _coalesce("ifnull"))
_add("NULLIF", "NULLIF(aValue, bValue)", "NULLIF", (2, 2), _nullif)
_add("CASE WHEN", "case when c_string in ('c_string') then 1 else 0 end", "CASE WHEN", (0, None), None,
     "the branches' common type", syntax=True)
_add("UUID", "UUID()", "UUID", (0, 0), lambda c: _t(T("uuid()"), "string", False))

SYNTAX = frozenset(name for name, f in FUNCTIONS.items() if f.supported and f.rule is None)

EXTRACT_FIELDS = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "DAYOFWEEK", "DAYOFYEAR", "EPOCH")


def extract(field_name: str, value: Typed) -> Typed | None:
    """EXTRACT(field FROM value) as SeaTunnel computes it (int; EPOCH: seconds as decimal(18,6))."""
    f = field_name.upper()
    simple = {"YEAR": "year", "MONTH": "month", "DAY": "dayofmonth", "HOUR": "hour", "MINUTE": "minute",
              "SECOND": "second", "DAYOFYEAR": "dayofyear"}  # fmt: skip
    if f in simple:
        return _t(T(f"{simple[f]}(_0)", value), "int")
    if f == "DAYOFWEEK":
        return _t(T("weekday(_0) + 1", value), "int")
    if f == "MILLISECOND":
        return _t(T("CAST(date_format(_0, 'SSS') AS INT)", value), "int")
    if f == "EPOCH":
        return _t(T("CAST(CAST(unix_micros(CAST(_0 AS TIMESTAMP)) AS DECIMAL(20,0)) / 1000000 AS DECIMAL(18,6))", value),
                  "decimal(18,6)")  # fmt: skip
    return None
