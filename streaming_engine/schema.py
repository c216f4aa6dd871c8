"""Plan-time schemas: plain, frozen data with no Spark dependency.

A dataset flowing between plugins is one or more tables (SeaTunnel's
CatalogTables). Each table has an id (``database.table`` style path, as
SeaTunnel's TablePath), columns with Spark-DDL type strings, and an optional
primary key. Every row at run time also carries its table id and row kind;
those are engine metadata columns, not part of these schemas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from streaming_engine.errors import SchemaError

# SeaTunnel type name -> Spark DDL type name.
_SIMPLE_TYPES = {
    "string": "string",
    "varchar": "string",
    "text": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "tinyint": "tinyint",
    "byte": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "time": "string",  # Spark has no stable TIME type across 4.x; carried as string
    "timestamp": "timestamp",
    "timestamp_tz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "bytes": "binary",
    "binary": "binary",
    "null": "string",
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$", re.I)

# The row envelope (runtime/rows.py): metadata columns every row carries, then the data.
TABLE = "__table"
KIND = "__kind"
SEQ = "__seq"
META = (TABLE, KIND, SEQ)
META_DDL = f"{TABLE} string, {KIND} string, {SEQ} bigint"

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = "+I", "-U", "+U", "-D"
ROW_KINDS = (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)
# A control row, not data: "every row of this table older than my __seq is gone"
# (a source's TRUNCATE). Only tables marked ``truncates`` carry it; the planner
# lets it reach only transforms and sinks that declare they handle it.
TRUNCATE = "!T"
# An upsert that leaves some columns as the target's row of its key has them
# (PostgreSQL's unchanged TOASTed values under REPLICA IDENTITY DEFAULT): the
# kind ``+U`` (or ``+I``: a changed key) then ``~`` and those columns'
# positions in the table, e.g. ``+U~3,5``. Only tables marked ``by_key`` carry
# it; the planner lets it reach only sinks that apply changes by key.
PARTIAL = "~"


def partial_kind(kind: str, positions: "Iterable[int]") -> str:
    """``kind`` leaving the columns at ``positions`` (0-based, in the table's order) unchanged."""
    return f"{kind}{PARTIAL}{','.join(str(i) for i in positions)}"


def unchanged_sql(kind: str, position: int) -> str:
    """SQL: whether the row whose kind is the expression ``kind`` leaves the column at ``position`` unchanged."""
    return (f"(instr({kind}, '{PARTIAL}') > 0 AND "
            f"array_contains(split(substring({kind}, instr({kind}, '{PARTIAL}') + 1), ','), '{int(position)}'))")
# SeaTunnel's names <-> short strings
KIND_OF_NAME = {"INSERT": INSERT, "UPDATE_BEFORE": UPDATE_BEFORE, "UPDATE_AFTER": UPDATE_AFTER, "DELETE": DELETE}
NAME_OF_KIND = {v: k for k, v in KIND_OF_NAME.items()}


def split_top(s: str, sep: str = ",") -> list[str]:
    """Split ``s`` on ``sep`` outside of <>, () and {} brackets; parts stripped."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "<({":
            depth += 1
        elif ch in ">)}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def normalize_type(spec: Any) -> str:
    """Turn a SeaTunnel field type (string, or nested object for a row) into Spark DDL."""
    if isinstance(spec, dict):
        inner = ", ".join(f"{_quote(k)}: {normalize_type(v)}" for k, v in spec.items())
        return f"struct<{inner}>"
    if not isinstance(spec, str):
        raise SchemaError("SCHEMA.INVALID", {"detail": f"field type must be a string or an object, got {spec!r}"})
    t = spec.strip()
    low = t.lower()
    if low in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[low]
    if low == "decimal":
        return "decimal(38,18)"
    m = _DECIMAL.match(t)
    if m:
        p, s = int(m.group(1)), int(m.group(2))
        if not (1 <= p <= 38 and 0 <= s <= p):
            raise SchemaError("SCHEMA.INVALID", {"detail": f"decimal({p},{s}) is out of range: precision 1..38, scale 0..precision"})
        return f"decimal({p},{s})"
    if low.startswith("array<") and low.endswith(">"):
        return f"array<{normalize_type(t[6:-1])}>"
    if low.startswith("map<") and low.endswith(">"):
        parts = split_top(t[4:-1])
        if len(parts) != 2:
            raise SchemaError("SCHEMA.INVALID", {"detail": f"map type {spec!r} needs a key and a value type"})
        return f"map<{normalize_type(parts[0])},{normalize_type(parts[1])}>"
    if (low.startswith("struct<") or low.startswith("row<")) and low.endswith(">"):
        body = t[t.index("<") + 1 : -1]
        fields = []
        for part in split_top(body):
            name, _, typ = part.partition(":")
            if not typ:
                raise SchemaError("SCHEMA.INVALID", {"detail": f"struct field {part!r} needs name:type"})
            fields.append(f"{_quote(name.strip().strip('`'))}: {normalize_type(typ)}")
        return f"struct<{', '.join(fields)}>"
    raise SchemaError(
        "SCHEMA.INVALID",
        {"detail": f"unknown type {spec!r}; use one of {', '.join(sorted(set(_SIMPLE_TYPES)))}, decimal(p,s), array<t>, map<k,v> or a nested row object"},
    )


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else "`" + name.replace("`", "``") + "`"


NUMERIC_TYPES = {"tinyint", "smallint", "int", "bigint", "float", "double"}


def is_numeric(t: str) -> bool:
    return t in NUMERIC_TYPES or t.startswith("decimal")


_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def widens(old: str, new: str) -> bool:
    """True when every value of type ``old`` is a value of ``new`` and Delta's type widening changes a column of
    ``old`` to ``new`` in place (Delta 4: a larger integer, float to double, a decimal whose precision grows at
    least as much as its scale). Changes Delta applies only by hand (an integer to double or decimal) are not."""
    if old in _INTEGRAL and new in _INTEGRAL:
        return _INTEGRAL.index(new) > _INTEGRAL.index(old)
    if (old, new) == ("float", "double"):
        return True
    a, b = _DECIMAL.match(old), _DECIMAL.match(new)
    if a and b:
        (p, s), (p2, s2) = (int(a[1]), int(a[2])), (int(b[1]), int(b[2]))
        return (p2, s2) != (p, s) and p2 - p >= s2 - s >= 0
    return False


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    # A source that tells columns apart by more than their names (Postgres-CDC: the column's attnum) says which
    # of its columns this is: a rename keeps it. Sources under schema.change.behavior = evolve only.
    origin: int | None = None
    former: tuple[str, ...] = ()  # the names it had before (renames in the source, oldest first): sinks rename

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": self.type}
        if not self.nullable:
            d["nullable"] = False
        if self.origin is not None:
            d["origin"] = self.origin
        if self.former:
            d["former"] = list(self.former)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Column":
        return cls(d["name"], d["type"], d.get("nullable", True), d.get("origin"), tuple(d.get("former", ())))


@dataclass(frozen=True)
class TableSchema:
    table_id: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    truncates: bool = False  # rows may include TRUNCATE control rows (see TRUNCATE)
    # schema.change.behavior = evolve or try_evolve of its source (None: any other): the sinks rename the columns
    # renamed there (Column.former) and drop those it dropped (``dropped``); try_evolve keeps a sink's table as
    # lenient does where the sink cannot apply the change
    evolution: str | None = None
    dropped: tuple[str, ...] = ()  # columns the source dropped under evolve (its sinks drop them too)
    # its changes hold only when applied by key (Postgres-CDC under REPLICA IDENTITY DEFAULT): a DELETE carries
    # the key alone, an upsert may leave columns as the target's row has them (PARTIAL kinds), a snapshot row may
    # be newer than its epoch (its changes since come again); only sinks that upsert by key take such a table
    by_key: bool = False

    # -- lookups ---------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def database(self) -> str | None:
        parts = self.table_id.split(".")
        return parts[0] if len(parts) > 1 else None

    @property
    def table_name(self) -> str:
        return self.table_id.split(".")[-1]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise SchemaError(
            "SCHEMA.MISSING_COLUMN",
            {"column": name, "table": self.table_id, "available": ", ".join(self.names) or "(none)"},
        )

    def require(self, names: Iterable[str]) -> None:
        for n in names:
            self.column(n)

    # -- derivations (each returns a new schema) --------------------------
    def with_columns(self, columns: Iterable[Column]) -> "TableSchema":
        cols = tuple(columns)
        seen: set[str] = set()
        for c in cols:
            if c.name in seen:
                raise SchemaError("SCHEMA.DUPLICATE_COLUMN", {"column": c.name, "table": self.table_id})
            seen.add(c.name)
        pk = tuple(k for k in self.primary_key if k in seen)
        return replace(self, columns=cols, primary_key=pk if len(pk) == len(self.primary_key) else ())

    def renamed(self, table_id: str) -> "TableSchema":
        return replace(self, table_id=table_id)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"table": self.table_id, "columns": [c.to_dict() for c in self.columns]}
        if self.primary_key:
            d["primary_key"] = list(self.primary_key)
        if self.truncates:
            d["truncates"] = True
        if self.evolution:
            d["evolution"] = self.evolution
        if self.dropped:
            d["dropped"] = list(self.dropped)
        if self.by_key:
            d["by_key"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TableSchema":
        return cls(d["table"], tuple(Column.from_dict(c) for c in d["columns"]), tuple(d.get("primary_key", ())),
                   bool(d.get("truncates", False)), d.get("evolution"), tuple(d.get("dropped", ())),
                   bool(d.get("by_key", False)))

    def ddl(self) -> str:
        return ", ".join(f"{_quote(c.name)} {c.type}" for c in self.columns)


@dataclass(frozen=True)
class Dataset:
    """What flows along one edge of the DAG: one or more tables."""

    tables: tuple[TableSchema, ...] = field(default_factory=tuple)

    @property
    def is_multi_table(self) -> bool:
        return len(self.tables) > 1

    @property
    def table_ids(self) -> tuple[str, ...]:
        return tuple(t.table_id for t in self.tables)

    def table(self, table_id: str) -> TableSchema:
        for t in self.tables:
            if t.table_id == table_id:
                return t
        raise SchemaError("SCHEMA.INVALID", {"detail": f"no table {table_id!r}; tables: {', '.join(self.table_ids)}"})

    def with_found(self, found: "dict[str, list[tuple[str, str]]]") -> "Dataset":
        """This dataset with the (name, type) columns ``found`` names per table added where missing
        (nullable, after the table's own): what a source reported seeing in its records."""
        tables = []
        for t in self.tables:
            names = set(t.names)
            extra = tuple(Column(n, normalize_type(ty), True) for n, ty in found.get(t.table_id, ()) if n not in names)
            tables.append(replace(t, columns=t.columns + extra) if extra else t)
        return Dataset(tuple(tables))

    def to_dict(self) -> list[dict[str, Any]]:
        return [t.to_dict() for t in self.tables]


def schema_from_fields(table_id: str, fields: dict[str, Any], primary_key: Iterable[str] = ()) -> TableSchema:
    """Build a table from SeaTunnel's ``schema { fields { name = type } }``."""
    cols = tuple(Column(str(name), normalize_type(spec)) for name, spec in fields.items())
    t = TableSchema(table_id, cols)
    pk = tuple(primary_key)
    t.require(pk)
    return replace(t, primary_key=pk)
