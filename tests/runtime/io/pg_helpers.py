"""What the Postgres-CDC run tests share: a connection, the slot's position, the change-log check."""

from __future__ import annotations

from collections import Counter

import psycopg2


def connect(pg):
    conn = psycopg2.connect(pg.dsn)
    conn.autocommit = True
    return conn


def slot_past(cur, slot: str, lsn: str) -> bool:
    """Whether the slot's confirmed position is at or past ``lsn``."""
    cur.execute("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s", (lsn, slot))
    row = cur.fetchone()
    return bool(row and row[0])


def assert_telescopes(rows, want, table: str = "") -> None:
    """A change log (rows: row kind first, then the columns) telescopes to the table ``want``: the rows
    added (+I, +U) minus the rows removed (-U, -D), as multisets of whole rows, are exactly its rows."""
    added, removed = Counter(), Counter()
    for r in rows:
        (added if r[0] in ("+I", "+U") else removed)[tuple(r[1:])] += 1
    net = added.copy()
    net.subtract(removed)
    want = Counter(want)
    assert +net == want and not -net, (
        f"{table}: the change log does not telescope to the table: extra {list((+net - want).items())[:3]}, "
        f"missing {list((want - +net).items())[:3]}, removed more than added {list((-net).items())[:3]}")
