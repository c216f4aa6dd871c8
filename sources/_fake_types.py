"""FakeSource's view of SeaTunnel types and value notation (pure Python, no Spark).

Plan-time schemas hold Spark DDL, where SeaTunnel's ``time`` and ``null`` are
both ``string``; FakeSource needs the declared SeaTunnel type (a ``time`` column
gets times, a ``null`` column nulls), so :func:`parse_type` reads the schema's
own type declarations into a small tree (:class:`SType`), the same grammar as
``sources._schema_options.spark_type`` (``SType.ddl()`` gives the same Spark DDL).

:func:`coerce` turns a value written in ``rows`` into the Python value Arrow
builds the declared Spark type from, with SeaTunnel's reading of that value
(its JSON row converter): maps as objects ``{k = v}``, rows as lists (by
position) or objects (by name), decimals as strings or numbers, bytes as
base64 strings, dates ``2023-04-22`` (also ``/``, ``.``, ``yyyyMMdd``), times
``23:20:58[.fff]``, timestamps ``2023-04-22T23:20:58`` or ``2023-04-22
23:20:58[.ffffff]``, and ``CURRENT_DATE`` / ``CURRENT_TIME`` /
``CURRENT_TIMESTAMP``. :func:`default_value` reads a column's ``defaultValue``
as SeaTunnel's random generator does (bytes as UTF-8 text there). Anything
else is a ``ValueError`` saying what was expected, raised at plan time by the
options model.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
import re
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from streaming_engine.schema import _SIMPLE_TYPES, split_top

UTC = dt.timezone.utc
_INT_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
FLOAT_MAX = 3.4028234663852886e38
CONTAINERS = ("array", "map", "row")


@dataclass(frozen=True)
class SType:
    """A declared SeaTunnel type. ``kind`` is the Spark type name, except
    ``time`` and ``null`` (both carried as Spark strings), ``decimal``,
    ``array``, ``map`` and ``row``."""

    kind: str
    precision: int = 0
    scale: int = 0
    args: tuple["SType", ...] = ()  # array: (element,); map: (key, value)
    fields: tuple[tuple[str, "SType"], ...] = ()  # row

    def ddl(self) -> str:
        """The Spark DDL ``streaming_engine.schema.normalize_type`` gives this type."""
        from streaming_engine.schema import _quote

        if self.kind in ("time", "null"):
            return _SIMPLE_TYPES[self.kind]
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.kind == "array":
            return f"array<{self.args[0].ddl()}>"
        if self.kind == "map":
            return f"map<{self.args[0].ddl()},{self.args[1].ddl()}>"
        if self.kind == "row":
            return "struct<" + ", ".join(f"{_quote(n)}: {t.ddl()}" for n, t in self.fields) + ">"
        return self.kind

    def __str__(self) -> str:
        if self.kind == "binary":
            return "bytes"
        if self.kind == "row":
            return "{" + ", ".join(f"{n} = {t}" for n, t in self.fields) + "}"
        if self.kind == "array":
            return f"array<{self.args[0]}>"
        if self.kind == "map":
            return f"map<{self.args[0]}, {self.args[1]}>"
        return self.ddl() if self.kind == "decimal" else self.kind


_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$", re.I)


def parse_type(spec: Any) -> SType:
    """A SeaTunnel type declaration (string, or an object for a row) as a tree."""
    if isinstance(spec, dict):
        return SType("row", fields=tuple((str(k), parse_type(v)) for k, v in spec.items()))
    if not isinstance(spec, str):
        raise ValueError(f"field type must be a string or an object, got {spec!r}")
    t = spec.strip()
    low = t.lower()
    if low in ("time", "null"):
        return SType(low)
    if low in _SIMPLE_TYPES:
        return SType(_SIMPLE_TYPES[low])
    if low == "decimal":
        return SType("decimal", 38, 18)
    m = _DECIMAL.match(t)
    if m:
        return SType("decimal", int(m.group(1)), int(m.group(2)))
    if low.startswith("array<") and low.endswith(">"):
        return SType("array", args=(parse_type(t[6:-1]),))
    if low.startswith("map<") and low.endswith(">"):
        parts = split_top(t[4:-1])
        if len(parts) != 2:
            raise ValueError(f"map type {spec!r} needs a key and a value type")
        return SType("map", args=(parse_type(parts[0]), parse_type(parts[1])))
    if t.startswith("{") and t.endswith("}"):
        return SType("row", fields=_row_fields(t[1:-1], "="))
    if (low.startswith("struct<") or low.startswith("row<")) and low.endswith(">"):
        return SType("row", fields=_row_fields(t[t.index("<") + 1 : -1], ":"))
    raise ValueError(f"unknown type {spec!r}")


def _row_fields(body: str, first: str) -> tuple[tuple[str, SType], ...]:
    out = []
    for part in split_top(body):
        sep = first if first in part else ("=" if "=" in part else ":")
        name, _, typ = part.partition(sep)
        typ = typ.strip()
        if len(typ) > 1 and typ[0] == typ[-1] == '"':  # JSON style: {"a": "int"}
            typ = typ[1:-1]
        out.append((name.strip().strip("`").strip('"'), parse_type(typ)))
    return tuple(out)


def column_types(schema: Any) -> list[tuple[str, SType, Any]]:
    """(name, type, defaultValue or None) per column of a ``SchemaBlock``."""
    if schema.fields is not None:
        return [(str(n), parse_type(t), None) for n, t in schema.fields.items()]
    return [(c.name, parse_type(c.type), c.defaultValue) for c in schema.columns or ()]


def check_type(t: SType, where: str) -> None:
    """What Spark cannot hold: a map with ``null`` keys (map keys are never null)."""
    if t.kind == "map":
        if t.args[0].kind == "null":
            raise ValueError(f"{where}: map keys cannot be of type null (Spark map keys are never null)")
        check_type(t.args[0], where)
        check_type(t.args[1], where)
    elif t.kind == "array":
        check_type(t.args[0], where)
    elif t.kind == "row":
        for _, f in t.fields:
            check_type(f, where)


# ---------------------------------------------------------------------------
# values written in ``rows``


@dataclass(frozen=True)
class Clock:
    """What CURRENT_DATE / CURRENT_TIME / CURRENT_TIMESTAMP read, and the zone
    local date-times are in (Spark's session time zone)."""

    now_ms: int = 0
    zone: str = "UTC"

    @property
    def tz(self) -> dt.tzinfo:
        return zone(self.zone)

    def local_now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.now_ms / 1000, UTC).astimezone(self.tz).replace(tzinfo=None)


_OFFSET = re.compile(r"^(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?$", re.I)


def zone(name: str) -> dt.tzinfo:
    """Spark's session time zone (a region id or an offset such as +08:00) as a tzinfo."""
    if name.upper() in ("UTC", "Z", "GMT", "UT", "ETC/UTC"):
        return UTC
    m = _OFFSET.match(name.strip())
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        return dt.timezone(dt.timedelta(minutes=-minutes if m.group(1) == "-" else minutes))
    return ZoneInfo(name)


def coerce(value: Any, t: SType, clock: Clock = Clock()) -> Any:
    """``value`` as written in ``rows`` -> the Python value of type ``t`` for Arrow."""
    if value is None or t.kind == "null":
        return None
    kind = t.kind
    if isinstance(value, str) and kind in CONTAINERS:
        value = _parse_text(value, t)
    if kind == "array":
        if not isinstance(value, list):
            raise ValueError(f"expected a list [..] for {t}, got {_show(value)}")
        return [_at(i, coerce, v, t.args[0], clock) for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, dict):
            raise ValueError(f"expected an object {{key = value, ...}} for {t}, got {_show(value)}")
        key_t, val_t = t.args
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = _at(k, _key, k, key_t, clock)
            out[_hashable(key)] = (key, _at(k, coerce, v, val_t, clock))
        return list(out.values())
    if kind == "row":
        return _row(value, t.fields, clock)
    return _scalar(value, t, clock)


def coerce_fields(values: Any, columns: list[tuple[str, SType]], clock: Clock = Clock()) -> list[Any]:
    """One ``rows`` entry's ``fields`` (a list by position or an object by name) -> one value per column."""
    row = _row(values, tuple(columns), clock, top=True)
    return [row.get(n) for n, _ in columns]


def _row(value: Any, fields: tuple[tuple[str, SType], ...], clock: Clock, top: bool = False) -> dict[str, Any]:
    names = [n for n, _ in fields]
    if isinstance(value, list):
        if len(value) != len(fields) and not top:
            raise ValueError(f"expected {len(fields)} values ({', '.join(names)}), got {len(value)}")
        return {n: _at(n, coerce, v, ft, clock) for (n, ft), v in zip(fields, value)}
    if isinstance(value, dict):
        unknown = [k for k in value if k not in names]
        if unknown:
            raise ValueError(f"no field {unknown[0]!r}; the fields are {', '.join(names)}")
        return {n: _at(n, coerce, value.get(n), ft, clock) for n, ft in fields}
    raise ValueError(f"expected a row as a list [..] or an object {{{', '.join(n + ' = ..' for n in names)}}}, got {_show(value)}")


def _parse_text(text: str, t: SType) -> Any:
    """An array, map or row written as text (SeaTunnel's Assert page writes a map
    as "{ k = v }"): its JSON or HOCON reading. SeaTunnel itself would read any
    text as an empty map or array (a row of nulls); text that is neither is refused."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        from pyhocon import ConfigFactory

        return _plain(ConfigFactory.parse_string("v = " + text).get("v"))
    except Exception:
        shape = "a list [..]" if t.kind == "array" else "an object {key = value, ...}"
        raise ValueError(
            f"expected {shape} for {t}, got the text {_show(text)}, which is neither HOCON nor JSON "
            '(quote keys holding ":" as in {"12:01:26" = v0})'
        ) from None


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k).strip('"'): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _key(text: str, t: SType, clock: Clock) -> Any:
    """A map key: object keys are text, read as the key type (SeaTunnel parses the key's text)."""
    if t.kind in CONTAINERS:
        raise ValueError(f"map keys of type {t} cannot be written in rows (object keys are text)")
    return _scalar(text, t, clock)


def _at(where: Any, fn: Any, value: Any, t: SType, clock: Clock) -> Any:
    try:
        return fn(value, t, clock)
    except _PathError as e:
        raise _PathError(_join(where, e.path), e.message) from None
    except ValueError as e:
        raise _PathError(_join(where, ""), str(e)) from None


def _join(where: Any, rest: str) -> str:
    head = f"[{where}]" if isinstance(where, int) else f".{where}"
    return head + rest


class _PathError(ValueError):
    def __init__(self, path: str, message: str):
        super().__init__(f"{path.lstrip('.')}: {message}" if path else message)
        self.path, self.message = path, message


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:
        return json.dumps(v, sort_keys=True, default=str)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


_INT_TEXT = re.compile(r"^[+-]?\d+$")
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(nan|inf|infinity)$", re.I)


def _scalar(value: Any, t: SType, clock: Clock, default: bool = False) -> Any:
    kind = t.kind
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (dict, list)):
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return str(value)
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError(f"expected true or false for boolean, got {_show(value)}")
    if kind in _INT_RANGES:
        if isinstance(value, bool):
            raise ValueError(f"expected a whole number for {kind}, got {_show(value)}")
        if isinstance(value, float) and value.is_integer() and not default:
            value = int(value)
        if isinstance(value, str) and _INT_TEXT.match(value.strip()):
            value = int(value.strip())
        if not isinstance(value, int):
            raise ValueError(f"expected a whole number for {kind}, got {_show(value)}")
        lo, hi = _INT_RANGES[kind]
        if not lo <= value <= hi:
            raise ValueError(f"{value} is out of the {kind} range {lo}..{hi}")
        return value
    if kind in ("float", "double"):
        if isinstance(value, bool):
            raise ValueError(f"expected a number for {kind}, got {_show(value)}")
        if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
            value = float(value.strip())
        if not isinstance(value, (int, float)):
            raise ValueError(f"expected a number for {kind}, got {_show(value)}")
        value = float(value)
        if kind == "float" and abs(value) > FLOAT_MAX and value == value and abs(value) != float("inf"):
            raise ValueError(f"{value} is out of the float range")
        return value
    if kind == "decimal":
        return _decimal(value, t)
    if kind == "binary":
        if not isinstance(value, str):
            raise ValueError(f"expected a base64 string for bytes, got {_show(value)}")
        if default:  # SeaTunnel: defaultValue.toString().getBytes()
            return value.encode("utf-8")
        try:
            return base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"expected a base64 string for bytes (\"bWlJWmo=\" is \"miIZj\"), got {_show(value)}") from None
    if kind == "date":
        return _date(_text(value), clock)
    if kind == "time":
        return _time(_text(value), clock, lenient=default, current_any_case=default)
    if kind in ("timestamp", "timestamp_ntz"):
        local = _datetime(_text(value), clock)
        return local if kind == "timestamp_ntz" else local.replace(tzinfo=clock.tz)
    raise ValueError(f"type {t} is not supported by FakeSource")


def _text(value: Any) -> str:
    if isinstance(value, (dict, list, bool)) or value is None:
        raise ValueError(f"expected text, got {_show(value)}")
    return str(value).strip()


def _decimal(value: Any, t: SType) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number or a numeric string for {t}, got {_show(value)}")
    try:
        d = decimal.Decimal(repr(value) if isinstance(value, float) else str(value).strip())
    except decimal.InvalidOperation:
        raise ValueError(f"expected a number or a numeric string for {t}, got {_show(value)}") from None
    if not d.is_finite():
        raise ValueError(f"{value} is not a finite number for {t}")
    q = d.quantize(decimal.Decimal(1).scaleb(-t.scale), rounding=decimal.ROUND_HALF_UP, context=decimal.Context(prec=80))
    digits = len(q.as_tuple().digits) if q != 0 else 0
    whole = digits - t.scale if digits > t.scale else 0
    if whole > t.precision - t.scale:
        raise ValueError(f"{value} does not fit {t} (at most {t.precision - t.scale} digits before the point)")
    return q


_DATE_FORMS = [
    re.compile(r"^(\d{4})-(\d{2})-(\d{2})$"),
    re.compile(r"^(\d{4})年(\d{2})月(\d{2})日$"),
    re.compile(r"^(\d{4})/(\d{2})/(\d{2})$"),
    re.compile(r"^(\d{4})\.(\d{2})\.(\d{2})$"),
    re.compile(r"^(\d{4})(\d{2})(\d{2})$"),
]


def _date(text: str, clock: Clock) -> dt.date:
    if text.upper() == "CURRENT_DATE":
        return clock.local_now().date()
    for form in _DATE_FORMS:
        m = form.match(text)
        if m:
            try:
                return dt.date(*(int(g) for g in m.groups()))
            except ValueError as e:
                raise ValueError(f"{text!r} is not a date: {e}") from None
    raise ValueError(f"expected a date such as 2023-04-22 (or 2023/04/22, 2023.04.22, 20230422, CURRENT_DATE), got {text!r}")


_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")
_TIME_LENIENT = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")


def _time(text: str, clock: Clock, lenient: bool = False, current_any_case: bool = False) -> str:
    """A time of day as text ``HH:MM:SS[.fraction]`` (Spark columns of SeaTunnel's ``time`` are strings)."""
    if text == "CURRENT_TIME" or (current_any_case and text.upper() == "CURRENT_TIME"):
        return clock.local_now().time().replace(microsecond=0).isoformat()
    m = (_TIME_LENIENT if lenient else _TIME).match(text)
    if not m:
        raise ValueError(f"expected a time such as 23:20:58 (or 23:20:58.123, CURRENT_TIME), got {text!r}")
    h, mi, s, frac = m.group(1), m.group(2), m.group(3) or "00", m.group(4)
    if not (int(h) < 24 and int(mi) < 60 and int(s) < 60):
        raise ValueError(f"{text!r} is not a time of day")
    frac = (frac or "").rstrip("0")
    return f"{h}:{mi}:{s}" + (f".{frac}" if frac else "")


_DATETIME = re.compile(
    r"^(\d{4})([-/.])(\d{2})\2(\d{2})([ T])(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$"
)
_DATETIME_CN = re.compile(r"^(\d{4})年(\d{2})月(\d{2})日\s(\d{2})时(\d{2})分(\d{2})秒$")
_DATETIME_14 = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})$")


def _datetime(text: str, clock: Clock) -> dt.datetime:
    """A local date-time (SeaTunnel's LocalDateTime) in SeaTunnel's notations."""
    if text.upper() == "CURRENT_TIMESTAMP":
        return clock.local_now()
    parts: tuple | None = None
    m = _DATETIME.match(text)
    if m and (m.group(5) == " " or m.group(2) == "-") and (len(text) > 19 or m.group(8) is not None):
        y, _, mo, d, _, h, mi, s, frac = m.groups()
        parts = (y, mo, d, h, mi, s or "0", frac or "")
    elif (m := _DATETIME_CN.match(text)) or (m := _DATETIME_14.match(text)):
        parts = (*m.groups(), "")
    if parts is None:
        raise ValueError(
            "expected a timestamp such as 2023-04-22T23:20:58 or 2023-04-22 23:20:58[.ffffff] "
            f"(or 2023/04/22 23:20:58, 20230422232058, CURRENT_TIMESTAMP), got {text!r}"
        )
    *whole, frac = parts
    try:
        return dt.datetime(*(int(x) for x in whole), int((frac + "000000")[:6]))
    except ValueError as e:
        raise ValueError(f"{text!r} is not a timestamp: {e}") from None


# ---------------------------------------------------------------------------
# a column's defaultValue (random generation)


def default_value(value: Any, t: SType, cfg: Any, clock: Clock = Clock()) -> Any:
    """SeaTunnel's random generator returns a column's defaultValue (its text
    read as the column type) instead of a random value; inside an array, map or
    row every element is that default read as the element's type."""
    if t.kind == "null":
        return None
    if t.kind == "array":
        return [default_value(value, t.args[0], cfg, clock)] * cfg.array_size
    if t.kind == "map":
        if cfg.map_size == 0:
            return []
        return [(default_value(value, t.args[0], cfg, clock), default_value(value, t.args[1], cfg, clock))]
    if t.kind == "row":
        return {n: default_value(value, ft, cfg, clock) for n, ft in t.fields}
    text = "true" if value is True else "false" if value is False else str(value)
    return _scalar(text, t, clock, default=True)


def uses_clock(cfg: Any) -> bool:
    """True when the table's values read the clock (CURRENT_DATE/TIME/TIMESTAMP)."""
    words = {"CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP"}

    def walk(v: Any) -> bool:
        if isinstance(v, str):
            return v.strip().upper() in words
        if isinstance(v, dict):
            return any(walk(x) for x in v.values())
        if isinstance(v, list):
            return any(walk(x) for x in v)
        return False

    if cfg.schema_ is not None and cfg.schema_.columns:
        if any(walk(c.defaultValue) for c in cfg.schema_.columns):
            return True
    return any(walk(r.fields) for r in cfg.rows or ())
