"""What the Postgres-CDC run tests share: a connection, the slot's position, the change-log check."""

from __future__ import annotations

import random
import threading
import time
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


def drop_slot(cur, slot: str) -> None:
    """Drop a job's replication slot and publication (both named ``slot``), if there."""
    cur.execute("SELECT pg_drop_replication_slot(%s) FROM pg_replication_slots WHERE slot_name = %s", (slot, slot))
    cur.execute(f"DROP PUBLICATION IF EXISTS {slot}")


def writer(pg, stop: threading.Event, seed: int, state: dict, write) -> threading.Thread:
    """A thread calling ``write(cur, rng, step)`` every 10 ms until ``stop``; ``state["step"]`` carries the step
    count across writers (a second writer goes on numbering where the first stopped)."""
    def run() -> None:
        conn = connect(pg)
        cur = conn.cursor()
        rng = random.Random(seed)
        step = state.get("step", 0)
        try:
            while not stop.is_set():
                step += 1
                write(cur, rng, step)
                time.sleep(0.01)
        finally:
            state["step"] = step
            conn.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t
