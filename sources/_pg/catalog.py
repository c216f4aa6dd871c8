"""What a Postgres-CDC job reads, from PostgreSQL's catalog: tables, columns, types, keys, replica identity.

Read at plan time (``check``, ``explain`` and ``run`` connect to the database,
as SeaTunnel's CDC sources do when a job is submitted). Types map as
SeaTunnel's Postgres-CDC page documents (connector-v2/source/Postgres-CDC.md,
"Data Type Mapping"); a column of a type it does not map is a plan-time error
naming the column and its type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from streaming_engine.schema import Column, TableSchema

# PostgreSQL type name (pg_type.typname) -> the engine's type
_TYPES = {
    "bool": "boolean",
    "int2": "int", "int4": "int",  # SeaTunnel maps INT2 to INT
    "int8": "bigint",
    "float4": "float",
    "float8": "double",
    "bpchar": "string", "varchar": "string", "text": "string", "json": "string", "jsonb": "string",
    "uuid": "string", "name": "string",
    "date": "date",
    "timestamp": "timestamp",
    "timestamptz": "timestamp",
    "time": "time",
    "bytea": "binary",
}  # fmt: skip


# pg_type oids of the built-in types above (fixed by PostgreSQL): pgoutput's Relation messages carry oids
_OIDS = {
    16: "bool", 21: "int2", 23: "int4", 20: "int8", 700: "float4", 701: "float8", 1042: "bpchar", 1043: "varchar",
    25: "text", 114: "json", 3802: "jsonb", 2950: "uuid", 19: "name", 1082: "date", 1114: "timestamp",
    1184: "timestamptz", 1083: "time", 17: "bytea", 1700: "numeric",
}  # fmt: skip


def engine_type_of_oid(type_oid: int, typmod: int) -> str | None:
    """The engine's type of a column of built-in type ``type_oid`` (None: not a type the engine maps)."""
    name = _OIDS.get(type_oid)
    if name is None:
        return None
    try:
        return engine_type("", "", name, typmod)
    except ValueError:  # numeric over 38 digits
        return None


_LIBPQ = frozenset({"sslmode", "sslrootcert", "sslcert", "sslkey", "options", "target_session_attrs"})


@dataclass(frozen=True)
class Connection:
    """Where the database is: ``base-url`` (jdbc:postgresql://host[:port]/db[?k=v...]) plus credentials."""

    host: str
    port: int
    database: str
    user: str
    password: str | None
    params: tuple[tuple[str, str], ...] = ()  # libpq settings only (sslmode, ...): never a secret
    connect_timeout_s: int = 30
    max_retries: int = 3

    @classmethod
    def from_url(cls, url: str, user: str, password: str | None, connect_timeout_ms: int = 30000,
                 max_retries: int = 3) -> "Connection":
        """JDBC-only URL parameters (loggerLevel, ...) are dropped; a ``password`` parameter is the password
        when the option is not set, and never kept among the parameters (they travel in the query's options)."""
        prefix = "jdbc:postgresql://"
        if not url.startswith(prefix):
            raise ValueError(f"base-url must look like {prefix}host:5432/database, not {url.split('?')[0]!r}")
        rest, _, query = url[len(prefix):].partition("?")
        hostport, slash, database = rest.partition("/")
        if not slash or not database or not hostport:
            raise ValueError("base-url must name the host and the database: jdbc:postgresql://host:5432/database")
        if hostport.startswith("["):  # an IPv6 address, as JDBC writes it: [::1]:5432
            host, bracket, after = hostport[1:].partition("]")
            if not bracket or not host or (after and not after.startswith(":")):
                raise ValueError(f"base-url: {hostport!r} is not [IPv6 address] or [IPv6 address]:port")
            port = after[1:] if after else "5432"
        elif hostport.count(":") > 1:
            raise ValueError(f"base-url: write an IPv6 host in brackets, jdbc:postgresql://[{hostport}]:5432/...")
        else:
            host, colon, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "5432")
        if not port.isdigit():
            raise ValueError(f"base-url: port {port!r} is not a number")
        given = parse_qsl(query)
        if password is None:
            password = next((v for k, v in given if k == "password"), None)
        params = tuple((k, v) for k, v in given if k in _LIBPQ)
        return cls(host, int(port), unquote(database), user, password, params, max(1, connect_timeout_ms // 1000),
                   max_retries)

    def connect(self, application: str = "streaming-engine") -> Any:
        """A psycopg2 connection (autocommit), tried ``1 + max_retries`` times (connect.max-retries) a second apart."""
        import time

        import psycopg2

        for attempt in range(self.max_retries + 1):
            try:
                conn = psycopg2.connect(host=self.host, port=self.port, dbname=self.database, user=self.user,
                                        password=self.password, connect_timeout=self.connect_timeout_s,
                                        application_name=application, **dict(self.params))
                break
            except psycopg2.OperationalError:
                if attempt == self.max_retries:
                    raise
                time.sleep(1.0)
        conn.autocommit = True
        return conn

    def where(self) -> str:
        return f"{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}/{self.database}"


@dataclass(frozen=True)
class TableInfo:
    schema: TableSchema  # table id database.schema.table
    oid: int
    replica_identity: str  # d, n, f, i
    type_oids: tuple[tuple[str, int], ...] = ()  # (column, pg_type oid): what pgoutput's Relation messages carry
    attnums: tuple[tuple[str, int], ...] = ()  # (column, attnum): a column's number, which a RENAME keeps
    own_key: bool = True  # the key is the table's primary key (not table-names-config's)


def split_table_names(names: list[str]) -> list[str]:
    """``table-names`` items, each possibly "a,b" (the page's own example writes two tables in one string)."""
    return [p.strip() for n in names for p in n.split(",") if p.strip()]


def discover(cur: Any, database: str, table_names: list[str], keys: dict[str, list[str]]) -> list[TableInfo]:
    """The tables ``table_names`` (database.schema.table) name, in that order; ``keys`` gives the primary key
    of a table that has none (``table-names-config``). ValueError says what is missing or unmapped."""
    out = []
    for full in table_names:
        parts = full.split(".")
        if len(parts) != 3:
            raise ValueError(f"table-names item {full!r} must be database.schema.table")
        db, schema, table = parts
        if db != database:
            raise ValueError(f"table-names item {full!r} is in database {db!r}, but base-url connects to {database!r}")
        cur.execute(
            "SELECT c.oid, c.relreplident, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s", (schema, table))
        row = cur.fetchone()
        if row is None or row[2] not in ("r", "p"):
            raise ValueError(f"table {full!r} does not exist in {database!r} (or is not a table)")
        oid, identity = int(row[0]), row[1]
        cur.execute(
            "SELECT a.attname, t.typname, a.atttypmod, a.attnotnull, a.atttypid, a.attnum FROM pg_attribute a "
            "JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped "
            # generated columns: pgoutput (before PostgreSQL 18) does not send them, so neither does the snapshot
            "AND a.attgenerated = '' ORDER BY a.attnum", (oid,))
        columns, oids, attnums = [], [], []
        for name, typname, typmod, notnull, type_oid, attnum in cur.fetchall():
            columns.append(Column(name, engine_type(full, name, typname, typmod), nullable=not notnull))
            oids.append((name, int(type_oid)))
            attnums.append((name, int(attnum)))
        cur.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.indisprimary "
            "ORDER BY array_position(i.indkey::int2[], a.attnum)", (oid,))
        own = tuple(r[0] for r in cur.fetchall())
        pk = own or tuple(keys.get(full, ()))
        names = {c.name for c in columns}
        missing = [k for k in pk if k not in names]
        if missing:
            raise ValueError(f"table-names-config gives {full!r} the key {missing}, which it has no column of")
        out.append(TableInfo(TableSchema(full, tuple(columns), pk), oid, identity, tuple(oids), tuple(attnums),
                             bool(own)))
    return out


def engine_type(table: str, column: str, typname: str, typmod: int) -> str:
    if typname == "numeric":
        if typmod is None or typmod < 4:
            return "decimal(38,18)"  # unconstrained NUMERIC, as SeaTunnel maps it
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        if precision > 38:
            raise ValueError(f"column {column!r} of {table!r} is numeric({precision},{scale}); Spark's decimals hold 38 digits")
        return f"decimal({precision},{scale})"
    found = _TYPES.get(typname)
    if found is None:
        kind = "an array type" if typname.startswith("_") else "a type"
        raise ValueError(f"column {column!r} of {table!r} has {kind} the engine does not map yet ({typname}); "
                         "supported: " + ", ".join(sorted({*_TYPES, "numeric"})))
    return found
