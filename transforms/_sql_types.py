"""Plan-time Spark types for the Sql transform: type strings as in :mod:`streaming_engine.schema`
(Spark DDL: ``int``, ``decimal(10,2)``, ``array<string>``, ``struct<a: int>``), no Spark needed.

``void`` is the type of a bare NULL here (it becomes ``string`` in an output schema).
Arithmetic follows SeaTunnel's Sql transform (``ZetaSQLType``): integers stay integers (``7 / 2``
is 3), anything with a float or double is a double; decimals follow Spark's precision rules, so a
result always fits its type.
"""

from __future__ import annotations

import re

from streaming_engine.errors import SchemaError
from streaming_engine.schema import normalize_type, split_top

VOID = "void"
INTEGRAL = ("tinyint", "smallint", "int", "bigint")
FLOATING = ("float", "double")
DATETIME = ("date", "timestamp", "timestamp_ntz")
_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4, "float": 6, "double": 7}
_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def is_decimal(t: str) -> bool:
    return t.startswith("decimal(")


def is_number(t: str) -> bool:
    return t in _RANK or is_decimal(t)


def decimal_parts(t: str) -> tuple[int, int] | None:
    """(precision, scale) of a decimal type, or of the decimal an integral type widens to."""
    if t in _DIGITS:
        return _DIGITS[t], 0
    m = _DECIMAL.match(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def decimal(p: int, s: int) -> str:
    """Spark's bounded decimal(p, s): above 38 digits the scale gives way, keeping at least 6."""
    if p > 38:
        s = max(38 - (p - s), min(s, 6))
        p = 38
    return f"decimal({p},{s})"


def _decimal_arith(op: str, a: str, b: str) -> str:
    (p1, s1), (p2, s2) = decimal_parts(a), decimal_parts(b)  # type: ignore[misc]
    if op in ("+", "-"):
        s = max(s1, s2)
        return decimal(max(p1 - s1, p2 - s2) + s + 1, s)
    if op == "*":
        return decimal(p1 + p2 + 1, s1 + s2)
    if op == "/":
        s = max(6, s1 + p2 + 1)
        return decimal(p1 - s1 + s2 + s, s)
    s = max(s1, s2)  # %
    return decimal(min(p1 - s1, p2 - s2) + s, s)


def arith(op: str, a: str, b: str) -> str | None:
    """Result type of ``a <op> b`` (op one of + - * / %), None when not numeric/temporal."""
    if a == VOID or b == VOID:
        return b if a == VOID else a
    if a in INTEGRAL and b in INTEGRAL:
        return "bigint" if "bigint" in (a, b) else "int"
    if is_number(a) and is_number(b):
        if a in FLOATING or b in FLOATING:
            return "double"
        return _decimal_arith(op, a, b)
    if op in ("+", "-") and a in DATETIME and (b in INTEGRAL or b == "interval"):
        return a
    if op == "+" and b in DATETIME and a in INTEGRAL:
        return b
    if "string" in (a, b) and (is_number(a) or is_number(b) or a == b):
        return "double"
    return None


def widen(types: list[str]) -> str:
    """The common type of CASE branches / COALESCE arguments: numbers widen, else the first non-NULL."""
    known = [t for t in types if t != VOID]
    if not known:
        return VOID
    if all(is_number(t) for t in known) and len(set(known)) > 1:
        if any(t in FLOATING for t in known):
            return "double"
        if any(is_decimal(t) for t in known):
            parts = [decimal_parts(t) for t in known]
            s = max(x[1] for x in parts)  # type: ignore[index]
            return decimal(max(x[0] - x[1] for x in parts) + s, s)  # type: ignore[index]
        return max(known, key=lambda t: _RANK[t])
    return known[0]


def number_type(text: str) -> str:
    """Spark's type of a numeric literal."""
    up = text.upper()
    if up.endswith("BD"):
        int_part, _, frac = up[:-2].partition(".")
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
                 (re.compile(r"^timestamp_ltz$", re.I), "timestamp"), (re.compile(r"^decimal$", re.I), "decimal(10,0)"),
                 (re.compile(r"^text$", re.I), "string")]  # fmt: skip


def cast_type(text: str) -> str:
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


# -- nested types ----------------------------------------------------------------


def struct_fields(t: str) -> list[tuple[str, str]] | None:
    if not (t.startswith("struct<") and t.endswith(">")):
        return None
    fields = []
    for part in split_top(t[7:-1]):
        if part.startswith("`"):
            end = part.index("`", 1)
            name, rest = part[1:end], part[end + 1 :]
        else:
            name, _, rest = part.partition(":")
            rest = ":" + rest
        fields.append((name.strip(), rest.lstrip().removeprefix(":").strip()))
    return fields


def element_type(t: str) -> str | None:
    """Type of ``value[i]``: an array's element or a map's value."""
    if t.startswith("array<") and t.endswith(">"):
        return t[6:-1]
    if t.startswith("map<") and t.endswith(">"):
        parts = split_top(t[4:-1])
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
