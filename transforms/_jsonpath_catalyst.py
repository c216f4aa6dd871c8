"""JsonPath as Spark column expressions (Catalyst, no Python at run time).

Per ``columns`` entry, each step a Column expression (``transforms.jsonpath``
puts them in successive selects, so each is computed once per row):

1. the source value as JSON text (:func:`source_json`), the way SeaTunnel
   serialises it: strings as they are, bytes decoded as UTF-8, arrays and maps
   with ``to_json``, a row (struct) as the JSON array of its field values
   (``["a",18]``, SeaTunnel's ``JsonUtils.toJsonString(row.getFields())``);
2. the value at a definite path (:func:`raw_text`): ``get_json_object``, which
   walks the JSON text and gives strings unquoted and anything else as compact
   JSON in document order (Jackson's ``asText`` / ``toString``, what SeaTunnel
   converts from). Only where it finds nothing (or the text "null"), the
   document is parsed into a VARIANT (:func:`probe`) to tell the cases apart as
   Jayway does (:func:`extract`): a JSON ``null`` (a null value), a path that is
   not there or a text that is not JSON (errors);
3. the conversion to ``dest_type`` (:func:`convert`) with SeaTunnel's rules
   (``JsonToRowConverters``): numbers parsed from the text (an int from a JSON
   number with a fraction is truncated, from a string it is an error), booleans
   ``"true"`` case-insensitively, dates and timestamps in SeaTunnel's formats,
   ``time`` checked as HH:mm:ss[.fraction], bytes as base64 of a JSON string,
   arrays / maps / rows element by element. Where the JSON type matters and the
   text alone does not tell it (a string ``"[1]"`` against an array ``[1]``),
   the value's VARIANT type decides, computed only on the rows that need it
   (every row for bytes, arrays, maps and rows).

Each step gives a value and an error reason (null when fine); the transform
decides what an error does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from transforms._jsonpath import Path

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

# Java's String.trim(): every character up to U+0020.
JAVA_TRIM = "".join(chr(i) for i in range(33))
_INT = r"^[+-]?[0-9]+$"
_JSON_NUMBER = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_JAVA_DOUBLE = r"^[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)$"
_BASE64 = r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
# JsonToRowConverters.TIME_FORMAT: HH:mm:ss with an optional fraction of up to 9 digits
_TIME = r"^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{0,9})?$"
# DateUtils.matchDateFormatter: the five date shapes SeaTunnel recognises
_DATES = (
    (r"^([0-9]{4})-([0-9]{2})-([0-9]{2})$", (1, 2, 3)),
    (r"^([0-9]{4})年([0-9]{2})月([0-9]{2})日$", (1, 2, 3)),
    (r"^([0-9]{4})/([0-9]{2})/([0-9]{2})$", (1, 2, 3)),
    (r"^([0-9]{4})\.([0-9]{2})\.([0-9]{2})$", (1, 2, 3)),
    (r"^([0-9]{4})([0-9]{2})([0-9]{2})$", (1, 2, 3)),
)
# DateTimeUtils.matchDateTimeFormatter's shapes: yyyy-MM-dd(T| )HH:mm:ss[.fraction], the same with / or .
# (and a space), one- or two-digit month, day and hour with - or / (seconds optional), an offset
# (Z or +hh:mm, which SeaTunnel drops: it keeps a LocalDateTime), yyyyMMddHHmmss and the Chinese form.
# Groups: year, month, day, hour, minute, second, fraction.
_TIMESTAMPS = (
    (r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?$", (1, 2, 3, 4, 5, 6, 7)),
    (r"^([0-9]{4})([/.])([0-9]{2})\2([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?$", (1, 3, 4, 5, 6, 7, 8)),
    (r"^([0-9]{4})([-/])([0-9]{1,2})\2([0-9]{1,2}) ([0-9]{1,2}):([0-9]{2})(:([0-9]{2}))?$", (1, 3, 4, 5, 6, 8, None)),
    (
        r"^([0-9]{4})([-/])([0-9]{2})\2([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{0,9})?(Z|[+-][0-9]{2}:[0-9]{2})$",
        (1, 3, 4, 5, 6, 7, 8),
    ),
    (r"^([0-9]{4})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})$", (1, 2, 3, 4, 5, 6, None)),
    (r"^([0-9]{4})年([0-9]{2})月([0-9]{2})日 ([0-9]{2})时([0-9]{2})分([0-9]{2})秒$", (1, 2, 3, 4, 5, 6, None)),
)
_INT_RANGE = {"tinyint": (-(2**7), 2**7 - 1), "smallint": (-(2**15), 2**15 - 1),
              "int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}  # fmt: skip


# -- 1. the source as JSON text ---------------------------------------------------


def source_json(col: "Column", spark_type: str) -> "Column":
    """JSON text of a source value of Spark type ``spark_type`` (DDL), as SeaTunnel serialises it."""
    from pyspark.sql import functions as F

    if spark_type == "string":
        return col
    if spark_type == "binary":
        return col.cast("string")  # new String(bytes): UTF-8, malformed bytes as U+FFFD
    if spark_type.startswith(("array<", "map<")):
        return F.to_json(col, {"ignoreNullFields": "false"})
    if spark_type.startswith("struct<"):
        from pyspark.sql.types import StructType

        from streaming_engine.runtime.rows import data_type

        struct = data_type(spark_type)
        assert isinstance(struct, StructType)
        parts = [_json_value(col.getField(f.name)) for f in struct.fields]
        body = F.concat_ws(",", *parts) if parts else F.lit("")
        return F.when(col.isNotNull(), F.concat(F.lit("["), body, F.lit("]")))
    raise ValueError(f"JsonPath cannot read JSON from a {spark_type} field")  # pragma: no cover - plan time refuses


def _json_value(c: "Column") -> "Column":
    """The JSON text of one value of any type (``null`` for null): ``{"v":<json>}`` without its wrapper."""
    from pyspark.sql import functions as F

    wrapped = F.to_json(F.struct(c.alias("v")), {"ignoreNullFields": "false"})
    return wrapped.substr(F.lit(6), F.length(wrapped) - F.lit(6))


# -- 2. the value at a path ---------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A JSON value: ``text`` as Jackson's asText (strings unquoted, other values as
    compact JSON, SQL null for JSON null) and ``variant`` the same value as a
    VARIANT (null when absent), used only where the JSON type matters.
    ``kind`` overrides the variant's type when it is known at plan time."""

    text: "Column"
    variant: "Column | None" = None
    kind: "str | Column | None" = None


@dataclass(frozen=True)
class Extracted:
    node: Node
    error: "Column"  # a reason (string) when the path gives no value; null otherwise


def spark_member(name: str) -> str | None:
    """``name`` in get_json_object's path syntax, or None when it cannot be written there
    (Spark's parser skips leading blanks, reads ``.name`` up to ``.``/``[`` and ``['name']`` up
    to a quote, and takes ``*`` as a wildcard)."""
    if not name or name[0].isspace() or name.startswith("*"):
        return None
    if "." not in name and "[" not in name:
        return "." + name
    if "'" not in name:
        return "['" + name + "']"
    return None


def unsupported_member(path: Path) -> str | None:
    """The first member name of ``path`` that Spark's JSON path syntax cannot express, if any."""
    for s in path.steps:
        if isinstance(s, str) and spark_member(s) is None:
            return s
    return None


def _spark_path(doc: "Column", steps: tuple[str | int, ...]) -> "str | Column":
    """get_json_object's path for ``steps``: a literal, or an expression when an index counts from the end."""
    from pyspark.sql import functions as F

    path: "str | Column" = "$"

    def add(piece: str) -> "str | Column":
        return path + piece if isinstance(path, str) else F.concat(path, F.lit(piece))

    for s in steps:
        if isinstance(s, str):
            member = spark_member(s)
            assert member is not None, s  # plan time refused it
            path = add(member)
        elif s >= 0:
            path = add(f"[{s}]")
        else:
            prefix = F.lit(path) if isinstance(path, str) else path
            length = F.json_array_length(F.call_function("get_json_object", doc, prefix))
            index = length + F.lit(s)
            path = F.concat(prefix, F.lit("["), F.when(index >= 0, index.cast("string")), F.lit("]"))
    return path


def _variant_at(doc_variant: "Column", steps: tuple[str | int, ...]) -> "Column":
    """The VARIANT at ``steps`` (SQL null when the path is not there, a variant null for JSON null)."""
    from pyspark.sql import functions as F

    x = doc_variant
    pending: list[str] = []

    def flush(x: "Column") -> "Column":
        if pending:
            x = F.try_variant_get(x, "$" + "".join(pending), "variant")
            pending.clear()
        return x

    for s in steps:
        if isinstance(s, int) and s >= 0:
            pending.append(f"[{s}]")
        elif isinstance(s, int):
            x = F.try_element_at(F.try_variant_get(flush(x), "$", "array<variant>"), F.lit(s))
        elif "'" in s or "\\" in s:
            x = F.try_element_at(F.try_variant_get(flush(x), "$", "map<string,variant>"), F.lit(s))
        else:
            pending.append("['" + s + "']")
    return flush(x)


def raw_text(doc: "Column", path: Path) -> "Column":
    """get_json_object's text at ``path`` (null when nothing is there, and for some JSON nulls)."""
    from pyspark.sql import functions as F

    spark_path = _spark_path(doc, path.steps)
    if isinstance(spark_path, str):
        return F.get_json_object(doc, spark_path)
    return F.call_function("get_json_object", doc, spark_path)


def leaf_variant(doc: "Column", path: Path) -> "Column":
    """The value at ``path`` as a VARIANT: SQL null when not there (or ``doc`` is not JSON), a variant
    null for a JSON null. Parses the whole document: used where get_json_object cannot tell."""
    from pyspark.sql import functions as F

    return _variant_at(F.try_parse_json(doc), path.steps)


PERMISSIVE_FN = "streaming_engine_permissive_json"
PERMISSIVE_CLASS = "io.streamingengine.spark.PermissiveJson"


def register_permissive(spark: "object") -> None:
    """Register :data:`PERMISSIVE_FN` (jvm/PermissiveJson.java: json-smart's permissive parser, a
    Java function run in the JVM) on ``spark``'s session, once."""
    from pyspark.sql.types import StringType

    from streaming_engine.errors import RuntimeFailure

    if spark.catalog.functionExists(PERMISSIVE_FN):  # type: ignore[attr-defined]
        return
    try:
        spark.udf.registerJavaFunction(PERMISSIVE_FN, PERMISSIVE_CLASS, StringType())  # type: ignore[attr-defined]
    except Exception as e:  # the engine's Spark jar or json-smart is not on spark.jars
        raise RuntimeFailure("RUNTIME.NOT_AVAILABLE", {"detail": (
            f"JsonPath reads documents that are not strict JSON as SeaTunnel does, with {PERMISSIVE_CLASS} and "
            f"json-smart, which this session cannot load ({type(e).__name__}); run scripts/bootstrap.sh to fetch "
            "and build the engine's jars")}) from None


def permissive(doc: "Column", raw: "Column") -> "Column":
    """Where get_json_object found nothing and ``doc`` is not strict JSON: the document as Jayway's
    json-smart reads it (permissive: unquoted keys and string values, single quotes, ...), as strict
    JSON text; null elsewhere, and where even the permissive parser refuses it."""
    from pyspark.sql import functions as F

    return F.when(raw.isNull() & doc.isNotNull() & F.try_parse_json(doc).isNull(), F.call_udf(PERMISSIVE_FN, doc))


# what :func:`probe` says when the path is not there, or the document is not JSON (JSON text never
# starts with a NUL character, so neither is a value's to_json)
MISSING, INVALID = "\u0000missing", "\u0000invalid"


def probe(doc: "Column", raw: "Column", path: Path) -> "Column":
    """For the rows where get_json_object found nothing or the text "null" (null on the others):
    the value at ``path`` as JSON text by a full parse of the document ("null" for a JSON null),
    else :data:`MISSING` or :data:`INVALID`."""
    from pyspark.sql import functions as F

    what = F.when(F.try_parse_json(doc).isNull(), F.lit(INVALID)).otherwise(F.lit(MISSING))
    return F.when(raw.isNull() | (raw == F.lit("null")), F.coalesce(F.to_json(leaf_variant(doc, path)), what))


def extract(doc: "Column", raw: "Column", found: "Column", path: Path) -> Extracted:
    """The value at ``path`` in the JSON text ``doc`` and why there is none when that is an error,
    from ``raw`` (:func:`raw_text`) and ``found`` (:func:`probe`), usually columns computed before
    (so the document is parsed again only on the rows that need it)."""
    from pyspark.sql import functions as F

    none = F.lit(None).cast("string")
    # get_json_object gives the text "null" for a JSON null at an array index or the root
    text = F.when((raw == F.lit("null")) & (found == F.lit("null")), none).otherwise(raw)
    error = (
        F.when(doc.isNull() | raw.isNotNull(), none)
        .when(found == F.lit(INVALID), F.lit("not valid JSON"))
        .when(found == F.lit(MISSING), F.lit(f"no results for path {path.text}"))
        .when(found != F.lit("null"), F.lit(f"get_json_object could not read path {path.text}"))
    )
    return Extracted(Node(text, leaf_variant(doc, path)), error)


# -- 3. conversion to dest_type -----------------------------------------------------


def _kind(node: Node) -> "Column":
    """The node's JSON type as schema_of_variant names it (STRING, BIGINT, DECIMAL(p,s), DOUBLE,
    BOOLEAN, OBJECT<...>, ARRAY<...>, VOID), null when unknown."""
    from pyspark.sql import functions as F

    if isinstance(node.kind, str):
        return F.lit(node.kind)
    if node.kind is not None:
        return node.kind
    assert node.variant is not None
    return F.schema_of_variant(node.variant)


def _is(node: Node, *prefixes: str) -> "Column":
    """Whether the node's JSON type is one of ``prefixes`` (one regex: the type is computed once)."""
    return _kind(node).rlike("^(" + "|".join(prefixes) + ")")


def _cannot(text: "Column", what: str) -> "Column":
    """A conversion error: the value (its first 80 characters) and the type."""
    from pyspark.sql import functions as F

    return F.concat(F.lit("cannot convert '"), text.substr(1, 80), F.lit(f"' to {what}"))


def _unknown_kind(node: Node) -> "Column":
    from pyspark.sql import functions as F

    return F.when(
        node.text.isNotNull() & _kind(node).isNull(),
        F.lit("cannot read the JSON type of the value (is the document valid JSON without duplicate keys?)"),
    )


@dataclass(frozen=True)
class Converted:
    """A converted value and its error: ``error_of(v)`` builds the error from ``v``, the value or
    a column holding it (so the conversion's code is not generated twice)."""

    value: "Column"
    error_of: "Callable[[Column], Column]"

    def error(self) -> "Column":
        return self.error_of(self.value)


def convert(node: Node, dtype: "DataType", time: bool = False) -> Converted:
    """``node`` as ``dtype``, and the error (a reason, or null); a JSON null gives null, no error.
    The value is null whenever there is an error (and when ``node.text`` is null), so a caller
    that only nulls bad values never needs to read the error."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    t = node.text

    def unless_null(what: str) -> "Callable[[Column], Column]":
        return lambda v: F.when(t.isNotNull() & v.isNull(), _cannot(t, what))

    if isinstance(dtype, T.StringType) and time:
        bad = (t != "") & ~t.rlike(_TIME)
        return Converted(F.when((t != "") & ~bad, t), lambda v: F.when(bad, _cannot(t, "time (HH:mm:ss[.fraction])")))
    if isinstance(dtype, T.StringType):
        return Converted(t, lambda v: F.lit(None).cast("string"))
    if isinstance(dtype, T.BooleanType):
        return Converted(F.lower(F.btrim(t, F.lit(JAVA_TRIM))) == F.lit("true"), lambda v: F.lit(None).cast("string"))
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return Converted(_integer(node, dtype.simpleString()), unless_null(dtype.simpleString()))
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        # Double/Float.parseX(text.trim()): Spark's cast reads the same grammar, but also spells
        # infinity and NaN as "inf", "nan" (any case): those must be Java's "Infinity", "NaN"
        value = F.btrim(t, F.lit(JAVA_TRIM)).try_cast(dtype)
        special = F.isnan(value) | (F.abs(value) == F.lit(float("inf")))
        value = F.when(~special, value).when(F.btrim(t, F.lit(JAVA_TRIM)).rlike(_JAVA_DOUBLE), value)
        return Converted(value, unless_null(dtype.simpleString()))
    if isinstance(dtype, T.DecimalType):
        # new BigDecimal(text): Spark's cast reads the same grammar, after trimming (which BigDecimal does not)
        return Converted(F.when(t == F.btrim(t, F.lit(JAVA_TRIM)), t.try_cast(dtype)), unless_null(dtype.simpleString()))
    if isinstance(dtype, T.DateType):
        return Converted(_date(t), lambda v: F.when((t != "") & v.isNull(), _cannot(t, "date")))
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        value = _timestamp(t, ntz=isinstance(dtype, T.TimestampNTZType))
        return Converted(value, lambda v: F.when((t != "") & v.isNull(), _cannot(t, dtype.simpleString())))
    if isinstance(dtype, T.BinaryType):
        # TextNode.binaryValue(): base64 (padding required); any other JSON value gives null
        string = _is(node, "STRING")
        error = F.coalesce(_unknown_kind(node), F.when(string & ~t.rlike(_BASE64), _cannot(t, "bytes (base64)")))
        return Converted(F.when(string & t.rlike(_BASE64), F.unbase64(t)), lambda v: error)
    if isinstance(dtype, T.ArrayType):
        value, error = _array(node, dtype)
    elif isinstance(dtype, T.MapType):
        value, error = _map(node, dtype)
    elif isinstance(dtype, T.StructType):
        value, error = _struct(node, dtype)
    else:  # pragma: no cover - plan time refuses
        raise ValueError(f"JsonPath cannot convert to {dtype.simpleString()}")
    return Converted(value, lambda v: error)


def _integer(node: Node, name: str) -> "Column":
    """Byte/Short/Integer/Long.parseX(text.trim()) (Spark's cast reads the same grammar); for int
    and bigint a JSON number in range with a fraction or exponent is truncated (Jackson's
    canConvertToInt/asInt), which the value's JSON type tells from a string."""
    from pyspark.sql import functions as F

    t = node.text
    jt = F.btrim(t, F.lit(JAVA_TRIM))
    value = jt.try_cast(name)
    if name in ("int", "bigint"):
        low, high = _INT_RANGE[name]
        d = jt.try_cast("double")
        number = jt.rlike(_JSON_NUMBER) & _is(node, "BIGINT", "DECIMAL", "DOUBLE", "FLOAT")
        truncated = F.when(number & (d >= F.lit(float(low))) & (d <= F.lit(float(high))), d.try_cast(name))
        value = F.coalesce(value, F.when(~jt.rlike(_INT), truncated))  # read only when the cast failed
    return value


def _fields(t: "Column", shapes: tuple, n: int) -> list["Column"]:
    """The ``n`` parts of ``t`` by the first of ``shapes`` (regex, group per part or None) that matches it."""
    from pyspark.sql import functions as F

    joined = None
    for pattern, groups in shapes:
        template = "|".join("" if g is None else f"${g}" for g in groups)
        v = F.regexp_replace(t, pattern, template)
        joined = F.when(t.rlike(pattern), v) if joined is None else joined.when(t.rlike(pattern), v)
    parts = F.split(joined, "[|]", -1)
    return [F.try_element_at(parts, F.lit(i + 1)) for i in range(n)]


def _date(t: "Column") -> "Column":
    """DateUtils' shapes, resolved as Java's SMART resolver does (a day past the month's end is its last day)."""
    y, m, d = (c.cast("int") for c in _fields(t, _DATES, 3))
    return _make_date(y, m, d)


def _make_date(y: "Column", m: "Column", d: "Column") -> "Column":
    from pyspark.sql import functions as F

    ok = m.between(1, 12) & d.between(1, 31) & y.between(1, 9999)
    last = F.dayofmonth(F.last_day(F.make_date(y, m, F.lit(1))))
    return F.when(ok, F.make_date(y, m, F.least(d, last)))


def _timestamp(t: "Column", ntz: bool) -> "Column":
    """DateTimeUtils' shapes (an offset is dropped, as SeaTunnel's LocalDateTime does)."""
    from pyspark.sql import functions as F

    y, mo, d, h, mi, s, frac = _fields(t, _TIMESTAMPS, 7)
    y, mo, d, h, mi = (c.cast("int") for c in (y, mo, d, h, mi))
    # microseconds: a longer fraction is truncated, as a LocalDateTime becomes a Spark timestamp
    seconds = F.concat(F.when(s == "", F.lit("0")).otherwise(s), frac.substr(1, 7)).try_cast("decimal(8,6)")
    date = _make_date(y, mo, d)
    ok = date.isNotNull() & h.between(0, 23) & mi.between(0, 59) & (seconds < 60)
    make = F.try_make_timestamp_ntz if ntz else F.try_make_timestamp
    return F.when(ok, make(F.year(date), F.month(date), F.dayofmonth(date), h, mi, seconds))


def _first_error(conv: "Column", what: str) -> "Column":
    """The first element error of an array of struct(v, e, i), as a message naming the element."""
    from pyspark.sql import functions as F

    first = F.try_element_at(F.filter(conv, lambda c: c["e"].isNotNull()), F.lit(1))
    return F.when(first.isNotNull(), F.concat(F.lit(f"{what} "), first["i"], F.lit(": "), first["e"]))


def needs_kind(dtype: "DataType") -> bool:
    """Whether converting to ``dtype`` looks at the JSON type of (nearly) every value; an int or
    bigint looks at it only for a number with a fraction, so it is read lazily there."""
    from pyspark.sql import types as T

    return isinstance(dtype, (T.BinaryType, T.ArrayType, T.MapType, T.StructType))


def _elements(node: Node, element: "DataType") -> tuple["Column", "Column"]:
    """(values, first error) of the elements of a node known to be a JSON array."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    texts = F.from_json(node.text, T.ArrayType(T.StringType()))
    variants = F.try_variant_get(node.variant, "$", "array<variant>") if node.variant is not None else None

    def one(x: "Column", v: "Column | None", i: "Column") -> "Column":
        c = convert(Node(x, v), element)
        return F.struct(c.value.alias("v"), c.error().alias("e"), i.cast("string").alias("i"))

    if variants is None or not needs_kind(element):
        conv = F.transform(texts, lambda x, i: one(x, None if variants is None else F.try_element_at(variants, i + 1), i))
    else:
        indexed = F.zip_with(texts, variants, lambda x, v: F.struct(x.alias("x"), v.alias("v")))
        conv = F.transform(indexed, lambda p, i: one(p["x"], p["v"], i))
    return F.transform(conv, lambda c: c["v"]), _first_error(conv, "element")


def _array(node: Node, dtype: "DataType") -> tuple["Column", "Column"]:
    """ArrayConverter over jsonNode.size()/get(i): a JSON array element by element, an object
    as one null per member (ObjectNode.get(i) is null), any other value as an empty array."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    t = node.text
    first = t.substr(1, 1)
    values, error = _elements(node, dtype.elementType)  # type: ignore[attr-defined]
    is_array = (first == "[") & _is(node, "ARRAY")
    is_object = (first == "{") & _is(node, "OBJECT")
    nulls = F.array_repeat(F.lit(None).cast(dtype.elementType), F.size(F.json_object_keys(t)))  # type: ignore[attr-defined]
    value = (
        F.when(t.isNull(), F.lit(None).cast(dtype))
        .when(is_array, values)
        .when(is_object, nulls)
        .otherwise(F.array().cast(dtype))
    )
    kind_error = F.when(first.isin("[", "{"), _unknown_kind(node))
    error = F.when(t.isNotNull(), F.coalesce(kind_error, F.when(is_array, error)))
    return F.when(error.isNull(), value), error


def _map(node: Node, dtype: "DataType") -> tuple["Column", "Column"]:
    """MapConverter over jsonNode.fields(): a JSON object's members, keys and values converted;
    any other value gives an empty map."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    t = node.text
    entries = F.map_entries(F.from_json(t, T.MapType(T.StringType(), T.StringType())))
    variants = F.try_variant_get(node.variant, "$", "map<string,variant>") if node.variant is not None else None
    key_type, value_type = dtype.keyType, dtype.valueType  # type: ignore[attr-defined]

    def one(e: "Column", i: "Column") -> "Column":
        kc = convert(Node(e["key"], kind="STRING"), key_type)
        k, k_error = kc.value, kc.error()
        v_variant = F.try_element_at(variants, e["key"]) if variants is not None else None
        vc = convert(Node(e["value"], v_variant), value_type)
        v, v_error = vc.value, vc.error()
        error = F.coalesce(
            F.when(k_error.isNotNull(), F.concat(F.lit("key: "), k_error)),
            F.when(k.isNull(), F.lit("a key converts to null")),
            v_error,
        )
        return F.struct(F.struct(k.alias("key"), v.alias("value")).alias("v"), error.alias("e"), e["key"].alias("i"))

    conv = F.transform(entries, one)
    error = _first_error(conv, "member")
    converted = F.map_from_entries(F.transform(conv, lambda c: c["v"]))
    is_object = (t.substr(1, 1) == "{") & _is(node, "OBJECT")
    empty = F.create_map().cast(dtype)
    value = F.when(t.isNull(), F.lit(None).cast(dtype)).when(is_object, F.when(error.isNull(), converted)).otherwise(empty)
    kind_error = F.when(t.substr(1, 1) == "{", _unknown_kind(node))
    error = F.when(t.isNotNull(), F.coalesce(kind_error, F.when(is_object, error)))
    return F.when(error.isNull(), value), error


def _struct(node: Node, dtype: "DataType") -> tuple["Column", "Column"]:
    """RowConverter: from a JSON array by position, from an object by field name; any other
    value gives a row of nulls."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    t = node.text
    first = t.substr(1, 1)
    is_array = (first == "[") & _is(node, "ARRAY")
    is_object = (first == "{") & _is(node, "OBJECT")
    texts = F.from_json(t, T.ArrayType(T.StringType()))
    members = F.from_json(t, T.MapType(T.StringType(), T.StringType()))
    a_variants = F.try_variant_get(node.variant, "$", "array<variant>") if node.variant is not None else None
    o_variants = F.try_variant_get(node.variant, "$", "map<string,variant>") if node.variant is not None else None
    fields, errors = [], []
    for i, f in enumerate(dtype.fields):  # type: ignore[attr-defined]
        by_position = Node(F.try_element_at(texts, F.lit(i + 1)),
                           None if a_variants is None else F.try_element_at(a_variants, F.lit(i + 1)))
        by_name = Node(F.try_element_at(members, F.lit(f.name)),
                       None if o_variants is None else F.try_element_at(o_variants, F.lit(f.name)))
        pc, nc = convert(by_position, f.dataType), convert(by_name, f.dataType)
        pv, pe, nv, ne = pc.value, pc.error(), nc.value, nc.error()
        fields.append(F.when(is_array, pv).when(is_object, nv).alias(f.name))
        err = F.when(is_array, pe).when(is_object, ne)
        errors.append(F.when(err.isNotNull(), F.concat(F.lit(f"field {f.name!r}: "), err)))
    value = F.when(t.isNotNull(), F.struct(*fields)) if fields else F.when(t.isNotNull(), F.struct())
    kind_error = F.when(first.isin("[", "{"), _unknown_kind(node))
    error = F.when(t.isNotNull(), F.coalesce(kind_error, *errors) if errors else kind_error)
    return F.when(error.isNull(), value.cast(dtype)), error
