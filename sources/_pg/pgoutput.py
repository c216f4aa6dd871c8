"""Decoder of PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1).

The message formats are PostgreSQL's "Logical Replication Message Formats"
(protocol chapter 55.9 of the PostgreSQL 15 manual): one message per change
record, as ``pg_logical_slot_peek_binary_changes`` and a replication connection
return them. Column values are kept as PostgreSQL's text output (``t``), None
for SQL NULL (``n``) and :data:`UNCHANGED_TOAST` for a TOASTed value an UPDATE
did not change (``u``: the server does not send it; the value is the row's
current one, never null). Binary values (``b``) need the ``binary`` option,
which the engine does not ask for.

Nothing here talks to a server: :mod:`sources._pg.slot` reads the messages.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from streaming_engine.errors import RuntimeFailure

# PostgreSQL's epoch for timestamps on the wire: 2000-01-01 UTC, in microseconds
PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


class _UnchangedToast:
    """A TOASTed value an UPDATE left unchanged (pgoutput's ``u``): not sent, not null."""

    _instance: "_UnchangedToast | None" = None

    def __new__(cls) -> "_UnchangedToast":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"  # pickles as the module's singleton


UNCHANGED_TOAST = _UnchangedToast()

Value = str | None | _UnchangedToast


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL writes it: ``16/B374D848``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_int(text: str) -> int:
    """``16/B374D848`` as a number (LSNs compare as numbers)."""
    hi, _, lo = text.partition("/")
    if not _ or not hi or not lo:
        raise ValueError(f"{text!r} is not an LSN (expected hex/hex, e.g. 16/B374D848)")
    return (int(hi, 16) << 32) | int(lo, 16)


def pg_time(micros: int) -> datetime:
    return PG_EPOCH + timedelta(microseconds=micros)


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    key: bool  # part of the replica identity: the primary key under DEFAULT, every column under FULL


@dataclass(frozen=True)
class Relation:
    """A table as the publication describes it; sent before its first change in a session and after DDL."""

    oid: int
    namespace: str  # "" = pg_catalog
    name: str
    replica_identity: str  # d (default: the primary key), n (nothing), f (full), i (an index)
    columns: tuple[Column, ...]

    @property
    def table_id(self) -> str:
        return f"{self.namespace or 'pg_catalog'}.{self.name}"

    def values(self, texts: tuple | None) -> dict | None:
        """A change's tuple as ``{column: text}``; a ``timestamp without time zone`` is marked as UTC (``+00``,
        as Debezium's MicroTimestamp reads it; Spark's cast would read text without an offset in the session's
        time zone); ``infinity`` stays as it is."""
        if texts is None:
            return None
        out = dict(zip((c.name for c in self.columns), texts))
        for c in self.columns:
            if c.type_oid == TIMESTAMP_OID:
                v = out.get(c.name)
                if isinstance(v, str) and v[:1].isdigit():
                    out[c.name] = v + "+00"
        return out


TIMESTAMP_OID = 1114  # timestamp without time zone


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the LSN of the transaction's commit record
    commit_time: datetime
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int  # the end of the commit record: where a consumer that saw it may confirm to
    commit_time: datetime


@dataclass(frozen=True)
class Change:
    """An INSERT, UPDATE or DELETE of one row.

    ``old`` is the row before (UPDATE, DELETE): every column under REPLICA
    IDENTITY FULL (``old_kind`` "O"), the key columns only under DEFAULT or
    INDEX (``old_kind`` "K", the other values None), absent when an UPDATE did
    not change the key under DEFAULT (``old_kind`` None).
    """

    kind: str  # I, U, D
    relation_oid: int
    new: tuple[Value, ...] | None
    old: tuple[Value, ...] | None
    old_kind: str | None


@dataclass(frozen=True)
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class TypeInfo:
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True)
class Origin:
    lsn: int
    name: str


@dataclass(frozen=True)
class LogicalMessage:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


Message = Begin | Commit | Relation | Change | Truncate | TypeInfo | Origin | LogicalMessage


@dataclass
class _Reader:
    data: bytes
    pos: int = 0
    where: str = field(default="")

    def need(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise self.error(f"the message ends after {len(self.data)} bytes, {n} more expected at byte {self.pos}")

    def error(self, detail: str) -> RuntimeFailure:
        return RuntimeFailure("RUNTIME.FAILED", {"detail": f"cannot decode the pgoutput message{self.where}: {detail}"})

    def byte(self) -> str:
        self.need(1)
        self.pos += 1
        return chr(self.data[self.pos - 1])

    def _unpack(self, fmt: str, size: int) -> int:
        self.need(size)
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def int8(self) -> int:
        return self._unpack(">b", 1)

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def uint32(self) -> int:
        return self._unpack(">I", 4)

    def int64(self) -> int:
        return self._unpack(">q", 8)

    def uint64(self) -> int:
        return self._unpack(">Q", 8)

    def string(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise self.error(f"a string at byte {self.pos} has no terminating NUL")
        text = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return text

    def raw(self, n: int) -> bytes:
        self.need(n)
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def tuple_data(self) -> tuple[Value, ...]:
        values: list[Value] = []
        for _ in range(self.int16()):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED_TOAST)
            elif kind == "t":
                values.append(self.raw(self.int32()).decode("utf-8"))
            elif kind == "b":
                raise self.error("a binary column value (the binary option); the engine reads text values")
            else:
                raise self.error(f"unknown column value kind {kind!r} at byte {self.pos - 1}")
        return tuple(values)


def decode(data: bytes, lsn: int | None = None) -> Message:
    """One pgoutput message; RUNTIME.FAILED names what is wrong and where (``lsn``)."""
    r = _Reader(bytes(data), where=f" at LSN {lsn_text(lsn)}" if lsn is not None else "")
    tag = r.byte()
    if tag == "B":
        return Begin(r.uint64(), pg_time(r.int64()), r.uint32())
    if tag == "C":
        r.int8()  # flags, unused
        return Commit(r.uint64(), r.uint64(), pg_time(r.int64()))
    if tag == "R":
        oid, namespace, name, identity = r.uint32(), r.string(), r.string(), r.byte()
        columns = []
        for _ in range(r.int16()):
            flags, col = r.int8(), r.string()
            columns.append(Column(col, r.uint32(), r.int32(), bool(flags & 1)))
        return Relation(oid, namespace, name, identity, tuple(columns))
    if tag == "I":
        oid = r.uint32()
        if r.byte() != "N":
            raise r.error("an INSERT without its new tuple")
        return Change("I", oid, r.tuple_data(), None, None)
    if tag == "U":
        oid = r.uint32()
        old, old_kind = None, None
        marker = r.byte()
        if marker in ("K", "O"):
            old, old_kind = r.tuple_data(), marker
            marker = r.byte()
        if marker != "N":
            raise r.error(f"an UPDATE without its new tuple (found {marker!r})")
        return Change("U", oid, r.tuple_data(), old, old_kind)
    if tag == "D":
        oid = r.uint32()
        marker = r.byte()
        if marker not in ("K", "O"):
            raise r.error(f"a DELETE without its old tuple (found {marker!r})")
        return Change("D", oid, None, r.tuple_data(), marker)
    if tag == "T":
        count, options = r.int32(), r.int8()
        return Truncate(tuple(r.uint32() for _ in range(count)), bool(options & 1), bool(options & 2))
    if tag == "Y":
        return TypeInfo(r.uint32(), r.string(), r.string())
    if tag == "O":
        return Origin(r.uint64(), r.string())
    if tag == "M":
        flags, at, prefix = r.int8(), r.uint64(), r.string()
        return LogicalMessage(bool(flags & 1), at, prefix, r.raw(r.int32()))
    raise r.error(f"unknown message type {tag!r} (streamed transactions, protocol 2+, are not asked for)")
