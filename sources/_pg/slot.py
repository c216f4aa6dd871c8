"""A job's publication and logical replication slot on PostgreSQL, read by LSN range.

The slot is read with ``pg_logical_slot_peek_binary_changes`` (SQL, pgoutput):
peeking never moves the slot, so the changes of an epoch stay in the slot until
:func:`advance` confirms them, which the source does only after the epoch has
committed in every sink and the ledger. No client library confirms anything on
its own (psycopg2's replication connection moves its flush position to the
server's WAL end by itself once the last data message is confirmed; a peek has
no such position), and a crash before :func:`advance` leaves the changes in the
slot for the next run to read again.

Positions are LSNs (numbers, :func:`sources._pg.pgoutput.lsn_int`). An epoch
reads the transactions whose commit record ENDS in ``(after, upto]``. ``upto``
comes from :func:`epoch_end`: the WAL insert position (always a record
boundary, so no commit record straddles it) once the WAL is flushed that far
(decoding reads only flushed WAL). Two rules of the server make this exact:
a commit record that starts before a record boundary also ends before it, and
after :func:`advance` to ``upto`` the slot skips exactly the transactions whose
commit record starts before ``upto``, i.e. the ones already read. A flush
position taken at any moment would not do: it can fall inside a commit record,
whose transaction the next epoch would then skip.
:func:`advance` also moves the slot over WAL that holds no change of the
publication (other tables, other databases), so an idle publication does not
make the server keep WAL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from sources._pg.pgoutput import Begin, Commit, Message, Relation, decode, lsn_int, lsn_text
from streaming_engine.errors import RuntimeFailure

_NAME = re.compile(r"[a-z0-9_]{1,63}")  # PostgreSQL's rule for replication slot names


def check_slot_name(name: str) -> str:
    """ValueError unless ``name`` is a valid slot name (lower-case letters, digits and _, at most 63)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"slot name {name!r}: PostgreSQL allows lower-case letters, digits and _ (at most 63)")
    return name


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(table_id: str) -> str:
    schema, _, table = table_id.rpartition(".")
    return f"{_ident(schema)}.{_ident(table)}" if schema else _ident(table)


@dataclass(frozen=True)
class Transaction:
    """One committed transaction: its messages between Begin and Commit, in WAL order."""

    begin: Begin
    commit: Commit
    messages: tuple[Message, ...]
    lsns: tuple[int, ...]  # the LSN of each message's WAL record (a change's position, for ordering)

    @property
    def commit_lsn(self) -> int:
        return self.commit.commit_lsn


def epoch_end(cur: Any, timeout_s: float = 10.0) -> int | None:
    """The WAL insert position, once the WAL is flushed up to it (None if that takes longer than ``timeout_s``).

    Commits of ``synchronous_commit = off`` transactions are flushed by the
    WAL writer within a few ``wal_writer_delay``; until then they cannot be
    decoded, so the epoch must not end after them.
    """
    import time

    cur.execute("SELECT pg_current_wal_insert_lsn()::text")
    end = lsn_int(cur.fetchone()[0])
    deadline = time.monotonic() + timeout_s
    while True:
        cur.execute("SELECT pg_current_wal_flush_lsn()::text")
        if lsn_int(cur.fetchone()[0]) >= end:
            return end
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def ensure_publication(cur: Any, name: str, tables: list[str]) -> list[str]:
    """Create the publication for ``tables`` (schema.table), or add the ones it lacks; returns the tables added.

    A publication FOR ALL TABLES already covers every table. Tables are never
    dropped from it: another job may read them.
    """
    cur.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
    row = cur.fetchone()
    if row is None:
        cur.execute(f"CREATE PUBLICATION {_ident(name)} FOR TABLE {', '.join(_table(t) for t in tables)}")
        return list(tables)
    if row[0]:
        return []
    cur.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s", (name,))
    have = {r[0] for r in cur.fetchall()}
    missing = [t for t in tables if t not in have]
    if missing:
        cur.execute(f"ALTER PUBLICATION {_ident(name)} ADD TABLE {', '.join(_table(t) for t in missing)}")
    return missing


def ensure_slot(cur: Any, name: str) -> int:
    """Create the logical slot (pgoutput) unless it exists; returns its confirmed position.

    An existing slot must be a pgoutput slot of this database (RUNTIME.FAILED
    says which it is otherwise).
    """
    check_slot_name(name)
    cur.execute(
        "SELECT plugin, slot_type, database, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
        (name,),
    )
    row = cur.fetchone()
    if row is None:
        cur.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
        return lsn_int(cur.fetchone()[0])
    plugin, kind, database, confirmed = row
    cur.execute("SELECT current_database()")
    here = cur.fetchone()[0]
    if kind != "logical" or plugin != "pgoutput" or database != here:
        raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
            f"replication slot {name!r} exists but is a {kind} slot of plugin {plugin!r} in database {database!r}, "
            f"not a pgoutput slot of {here!r}: set slot.name to another name, or drop that slot")})
    return lsn_int(confirmed)


def confirmed_lsn(cur: Any, name: str) -> int | None:
    cur.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (name,))
    row = cur.fetchone()
    return None if row is None or row[0] is None else lsn_int(row[0])


def lag_bytes(cur: Any, name: str) -> int | None:
    """WAL the slot keeps the server from recycling: current WAL end minus the slot's confirmed position."""
    cur.execute(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots "
        "WHERE slot_name = %s", (name,))
    row = cur.fetchone()
    return None if row is None else int(row[0])


def transactions(
    cur: Any, slot: str, publication: str, after: int, upto: int, relations: dict[int, Relation] | None = None,
) -> Iterator[Transaction]:
    """The transactions whose commit record ends in ``(after, upto]``, in commit order, from a peek (the slot
    does not move); ``after`` and ``upto`` are epoch ends (:func:`epoch_end`).

    Transactions ending at or before ``after`` are still in the slot when the
    last advance did not happen (a crash after the epoch committed): skipped,
    but their Relation messages go into ``relations`` like every other one
    (pgoutput describes a table once per decoding session, before its first
    change, which may be in a skipped transaction).
    """
    cur.execute(
        "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
        "'proto_version', '1', 'publication_names', %s)",
        (slot, lsn_text(upto + 1), publication),
    )
    begin: Begin | None = None
    body: list[tuple[int, Any]] = []  # (lsn, the message's bytes): decoded only for a transaction in range
    for at, data in cur:
        lsn = lsn_int(at)
        kind = bytes(data[:1])  # psycopg2's memoryview of a bytea has format "c": an item is one byte, as bytes
        if kind == _BEGIN:
            message = decode(bytes(data), lsn)
            assert isinstance(message, Begin)
            begin, body = message, []
        elif kind == _COMMIT:
            message = decode(bytes(data), lsn)
            assert isinstance(message, Commit)
            if begin is None:
                raise RuntimeFailure("RUNTIME.FAILED", {"detail": f"slot {slot!r}: a commit at {at} without its begin"})
            if after < message.end_lsn <= upto:
                messages = tuple(m if not isinstance(m, (bytes, memoryview)) else decode(bytes(m), l) for l, m in body)
                yield Transaction(begin, message, messages, tuple(l for l, _ in body))
            begin = None
        elif kind == _RELATION:
            message = decode(bytes(data), lsn)
            if relations is not None:
                relations[message.oid] = message  # type: ignore[union-attr]
            body.append((lsn, message))
        else:
            body.append((lsn, bytes(data)))


_BEGIN, _COMMIT, _RELATION = b"B", b"C", b"R"


def peek(conn: Any, slot: str, publication: str, after: int, upto: int, relations: dict[int, Relation] | None = None,
         named: bool = False, timeout_s: float = 300.0) -> Iterator[Transaction]:
    """:func:`transactions` over a cursor of ``conn`` (``named``: server-side, the rows stream), waiting while
    another session uses the slot: a slot serves one session at a time, and a job's epoch peeks it from
    several tasks (the log and each snapshot chunk). Each peek holds the slot only while it decodes."""
    import time

    import psycopg2.errors

    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        cur = conn.cursor(name="streaming_engine_peek") if named else conn.cursor()
        if named:
            cur.itersize = 2000
        found = transactions(cur, slot, publication, after, upto, relations)
        try:
            first = next(found, None)
        except psycopg2.errors.ObjectInUse:
            cur.close()
            if not conn.autocommit:
                conn.rollback()
            attempt += 1
            if time.monotonic() > deadline:
                raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
                    f"replication slot {slot!r} stayed in use by another session for {timeout_s:.0f} s; is another "
                    "job (or a second run of this one) reading it?")}) from None
            time.sleep(min(0.2, 0.01 * attempt))
            continue
        try:
            if first is not None:
                yield first
                yield from found
        finally:
            cur.close()
        return


def advance(cur: Any, slot: str, lsn: int, wait_s: float = 300.0) -> bool:
    """Confirm everything up to ``lsn`` (an epoch end): the server may recycle the WAL before it. Never moves back.

    The slot serves one session at a time: while a task peeks it, this waits up
    to ``wait_s`` (RUNTIME.FAILED after it when ``wait_s`` >= 1, else returns
    False: a later confirmation of a later epoch covers this one)."""
    cur.execute("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s",
                (lsn_text(lsn), slot))
    row = cur.fetchone()
    if row is None:
        raise RuntimeFailure("RUNTIME.FAILED", {"detail": f"replication slot {slot!r} is gone; the job cannot confirm its changes"})
    if row[0]:
        return True
    import time

    import psycopg2.errors

    deadline = time.monotonic() + wait_s
    while True:
        try:
            cur.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, lsn_text(lsn)))
            return True
        except psycopg2.errors.ObjectInUse:
            if time.monotonic() > deadline:
                if wait_s < 1:
                    return False
                raise RuntimeFailure("RUNTIME.FAILED", {"detail": f"replication slot {slot!r} stayed in use; cannot confirm"}) from None
            time.sleep(0.1)
