"""Postgres-CDC's initial snapshot (startup.mode = initial) against a real PostgreSQL 15, while writes go on.

Five tables: one cut into integer-key chunks, one with a two-column integer
key, one with a text key (read as one chunk), one of exactly one chunk's rows
and an empty one (exact's column names hold a ``%``). A writer changes them the whole
time (updates, deletes, inserts inside and above the key range, key changes,
TOASTed values left unchanged, several changes in one transaction). The first
run stops after two epochs, in the middle of the snapshot; the writer goes on
while it is stopped; the second run finishes the snapshot and streams until
the slot has passed the writer's last commit. Then:

- the upsert targets equal PostgreSQL's tables;
- the change logs (row kinds kept by RowKindExtractor) telescope to them: per
  table, the rows added (+I, +U) minus the rows removed (-U, -D), as multisets
  of whole rows, are exactly PostgreSQL's rows. A chunk read twice, a change
  kept beside the chunk that already holds it, or a change lost breaks that.
- the second run's first chunks start where the first run's last committed
  epoch left off: only unfinished chunks are read again.

CI snapshots 6,000 rows of ``snap.big``; ``STREAMING_ENGINE_SOAK`` (any
value) makes it 1,000,000 (the issue's size) in chunks of 20,000.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest

from tests.components.fixtures import postgres_db_module  # noqa: F401
from tests.runtime.io.pg_helpers import assert_telescopes, connect as _connect, slot_past, writer

SLOT = "pgsnap_test"
SOAK = bool(os.environ.get("STREAMING_ENGINE_SOAK"))
ROWS = 1_000_000 if SOAK else 6000  # of snap.big
SPLIT = 20_000 if SOAK else 500
KEYS = ROWS * 7 // 6  # the writer's keys: inside the table and above it
BIG = "t" * 20000  # TOASTed (EXTERNAL storage)

TABLES = """
CREATE SCHEMA snap;
CREATE TABLE snap.big (id bigint PRIMARY KEY, v text, n int, doc text);
ALTER TABLE snap.big ALTER COLUMN doc SET STORAGE EXTERNAL;
CREATE TABLE snap.pair (a int, b int, v text, PRIMARY KEY (a, b));
CREATE TABLE snap.named (code text PRIMARY KEY, v int);
ALTER TABLE snap.big REPLICA IDENTITY FULL;
ALTER TABLE snap.pair REPLICA IDENTITY FULL;
ALTER TABLE snap.named REPLICA IDENTITY FULL;
CREATE TABLE snap.exact ("id%" int PRIMARY KEY, "v%" text);
ALTER TABLE snap.exact REPLICA IDENTITY FULL;
INSERT INTO snap.exact SELECT i, 'e' || i FROM generate_series(1, {split}) i;
CREATE TABLE snap.empty (id int PRIMARY KEY, v text);
ALTER TABLE snap.empty REPLICA IDENTITY FULL;
INSERT INTO snap.big SELECT i, 'v' || i, i % 97, CASE WHEN i % 500 = 0 THEN repeat('t', 20000) ELSE 'd' || i END
  FROM generate_series(1, {rows}) i;
INSERT INTO snap.pair SELECT i / 10, i % 10, 'p' || i FROM generate_series(0, 999) i;
INSERT INTO snap.named SELECT 'k' || i, i FROM generate_series(1, 300) i;
"""

JOB = """
env {{ job.name = pgsnap, job.mode = STREAMING, checkpoint.interval = 200 }}
source {{
  Postgres-CDC {{
    plugin_output = pg
    base-url = "jdbc:postgresql://{host}:{port}/postgres"
    username = postgres
    table-names = ["postgres.snap.big", "postgres.snap.pair", "postgres.snap.named", "postgres.snap.exact",
                   "postgres.snap.empty"]
    slot.name = {slot}
    snapshot.split.size = {split}
    snapshot.chunks.per.epoch = 3
  }}
}}
transform {{ RowKindExtractor {{ plugin_input = pg, plugin_output = kinds }} }}
sink {{
  Delta {{ plugin_input = pg, path = "${{work}}/state/${{table_name}}", save_mode = upsert }}
  Delta {{ plugin_input = kinds, path = "${{work}}/log/${{table_name}}" }}
}}
"""

COLUMNS = {"big": ["id", "v", "n", "doc"], "pair": ["a", "b", "v"], "named": ["code", "v"]}


def _write(cur, rng: random.Random, step: int) -> None:
    """One round of changes all over the tables."""
    i = rng.randint(1, KEYS)
    cur.execute("UPDATE snap.big SET n = n + 1, v = %s WHERE id = %s", (f"u{step}", i))  # doc (TOAST) unchanged
    cur.execute("DELETE FROM snap.big WHERE id = %s", (rng.randint(1, KEYS),))
    cur.execute("INSERT INTO snap.big VALUES (%s, %s, 0, 'new') ON CONFLICT (id) DO NOTHING", (rng.randint(1, KEYS), f"i{step}"))
    cur.execute("INSERT INTO snap.big VALUES (%s, 'top', 1, %s)", (10 * KEYS + step, BIG if step % 7 == 0 else "s"))
    if step % 5 == 0:  # a key change, down into a chunk that may or may not have been read
        to = rng.randint(1, KEYS)
        cur.execute("UPDATE snap.big SET id = %s WHERE id = %s AND NOT EXISTS (SELECT 1 FROM snap.big WHERE id = %s)",
                    (to, rng.randint(1, KEYS), to))
    with cur.connection:
        cur.execute("UPDATE snap.pair SET v = %s WHERE a = %s", (f"w{step}", rng.randint(0, 99)))
        cur.execute("UPDATE snap.named SET v = v + 1 WHERE code = %s", (f"k{rng.randint(1, 300)}",))
        cur.execute("INSERT INTO snap.named VALUES (%s, %s) ON CONFLICT (code) DO UPDATE SET v = -1", (f"z{step % 40}", step))
    if step % 3 == 0:
        cur.execute("DELETE FROM snap.pair WHERE a = %s AND b = %s", (rng.randint(0, 99), rng.randint(0, 9)))
        cur.execute("INSERT INTO snap.pair VALUES (%s, %s, 'n') ON CONFLICT DO NOTHING", (rng.randint(0, 120), rng.randint(0, 9)))


def _writer(pg, stop: threading.Event, seed: int, state: dict) -> threading.Thread:
    return writer(pg, stop, seed, state, _write)


def _slot_past(cur, lsn: str) -> bool:
    return slot_past(cur, SLOT, lsn)


def _last_committed(work) -> int:
    return max(int(p.name) for p in work.rglob("commits/*") if p.name.isdigit())


def _offset(work, batch: int) -> dict:
    """The source's end offset of epoch ``batch`` (an offset file is written before its epoch runs)."""
    offset = next(p for p in work.rglob(f"offsets/{batch}"))
    return json.loads(offset.read_text().splitlines()[-1])


def _last_offset(work) -> dict:
    """The source's end offset of the last COMMITTED epoch."""
    return _offset(work, _last_committed(work))


def _snapshot_done(work) -> bool:
    try:
        return "snapshot" not in _last_offset(work)
    except (IndexError, ValueError, OSError):
        return False


@pytest.mark.timeout(2400 if SOAK else 900)
def test_the_snapshot_reads_every_row_once_while_writes_go_on_and_resumes_after_a_stop(
        spark, run_job_text, postgres_db_module, tmp_path):
    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute(TABLES.replace("{rows}", str(ROWS)).replace("{split}", str(SPLIT)))
    job = JOB.format(host=pg.host, port=pg.port, slot=SLOT, split=SPLIT)
    progress: dict = {}
    try:
        # run 1: two epochs of the snapshot while the writer changes the tables
        stop = threading.Event()
        w = _writer(pg, stop, 1, progress)
        first = run_job_text(job, stop_after_epochs=2, timeout_s=300)
        assert first.result.status in ("FINISHED", "CANCELED"), first.result.error
        stopped_at = _last_committed(first.work)
        left = _offset(first.work, stopped_at)
        assert left.get("snapshot"), f"the first run was meant to stop inside the snapshot: {left}"
        time.sleep(1.0)  # changes while the job is stopped
        stop.set()
        w.join()

        # run 2: the rest of the snapshot, then the stream, while the writer goes on for a while
        stop2 = threading.Event()
        w2 = _writer(pg, stop2, 2, progress)
        done: dict = {}

        def finisher() -> None:
            c = _connect(pg).cursor()
            time.sleep(6.0)
            stop2.set()
            w2.join()
            c.execute("SELECT pg_current_wal_insert_lsn()::text")
            last = c.fetchone()[0]
            deadline = time.monotonic() + (1200 if SOAK else 240)
            while time.monotonic() < deadline and not (_slot_past(c, last) and _snapshot_done(tmp_path)):
                time.sleep(0.3)
            done["advanced"] = _slot_past(c, last)
            stopper.set()

        stopper = threading.Event()
        f = threading.Thread(target=finisher, daemon=True)
        f.start()
        second = run_job_text(job, stop=stopper, timeout_s=1500 if SOAK else 400)
        f.join()
        assert second.result.status in ("FINISHED", "CANCELED"), second.result.error
        assert done.get("advanced"), "the slot never passed the writer's last commit"
        assert "snapshot" not in _last_offset(second.work), "the snapshot did not finish"
        assert progress["step"] > 50, progress
        # the epoch after the first run's last committed one read on from where that one left off
        resumed = _offset(second.work, stopped_at + 1)["chunks"]
        for tid, state in left["snapshot"].items():
            mine = [lo for table, lo, _ in resumed if table == tid]
            if state.get("done"):
                assert not mine, f"{tid}: finished before the stop, read again: {resumed}"
            elif mine:
                assert mine[0] == state["after"], f"{tid}: resumed at {mine[0]}, not after {state['after']}"
        assert resumed and resumed[0][1] is not None, f"the snapshot started over: {resumed}"

        # metrics: each table's chunks read and estimated, the slot's backlog, the commits' time
        from streaming_engine.runtime.events import SourceProgress

        reports = [e for e in first.events + second.events if isinstance(e, SourceProgress)]
        done = {t: v for e in reports for (_, name, t, v) in e.gauges if name == "snapshot_chunks_done"}
        total = {t: v for e in reports for (_, name, t, v) in e.gauges if name == "snapshot_chunks_total"}
        assert done == total and done["postgres.snap.big"] >= 12 and done["postgres.snap.named"] == 1, (done, total)
        # a table of exactly one split (its last chunk is empty) and an empty table (the writer leaves both alone)
        assert done["postgres.snap.exact"] == 2 and done["postgres.snap.empty"] == 1, done
        exact = spark.read.format("delta").load(str(second.work / "state" / "exact"))
        assert sorted(tuple(r) for r in exact.collect()) == [(i, f"e{i}") for i in range(1, SPLIT + 1)]
        assert exact.columns == ["id%", "v%"]  # a % in a name, inside statements run with parameters
        assert any(name == "backlog_bytes" and v >= 0 for e in reports for (_, name, _, v) in e.gauges)
        assert any(e.event_time_ms for e in second.events if isinstance(e, SourceProgress)), "no commit time observed"

        for table, columns in COLUMNS.items():
            key = ", ".join(columns[:2] if table == "pair" else columns[:1])
            cur.execute(f"SELECT {', '.join(columns)} FROM snap.{table} ORDER BY {key}")
            want = [tuple(r) for r in cur.fetchall()]
            assert len(want) > 100
            state = spark.read.format("delta").load(str(second.work / "state" / table))
            got = sorted(tuple(r) for r in state.select(*columns).collect())
            assert got == sorted(want), f"{table}: the upsert target differs from PostgreSQL"
            log = spark.read.format("delta").load(str(second.work / "log" / table)).select("row_kind", *columns)
            assert_telescopes(log.collect(), want, table)
    finally:
        cur.execute("SELECT pg_drop_replication_slot(%s) FROM pg_replication_slots WHERE slot_name = %s", (SLOT, SLOT))
        cur.execute(f"DROP PUBLICATION IF EXISTS {SLOT}")
        cur.execute("DROP SCHEMA snap CASCADE")
        conn.close()


@pytest.mark.timeout(300)
def test_a_chunks_copy_streams_its_rows_and_a_copy_failing_midway_raises_its_own_error(postgres_db_module):
    """The COPY stream a chunk is read through (``snapshot._copy_batches``): every row once, as text (NULL as
    null, an empty string as one, a newline inside a value); no rows: no batch; a COPY that fails after
    sending rows raises the server's error, not a parse error of the cut text; a reader that stops early
    ends the COPY and leaves the connection usable."""
    import psycopg2

    from sources._pg.snapshot import _copy_batches

    conn = _connect(postgres_db_module)
    try:
        sql = ("SELECT i, CASE WHEN i %% 3 = 0 THEN NULL WHEN i %% 3 = 1 THEN '' ELSE 'a,\"b\"' || chr(10) || i END "
               "FROM generate_series(1, %s) i")
        got = [row for b in _copy_batches(conn, sql, [300_000], 2) for row in zip(*(c.to_pylist() for c in b.columns))]
        assert len(got) == 300_000 and got[:3] == [("1", ""), ("2", 'a,"b"\n2'), ("3", None)], got[:3]
        assert [int(i) for i, _ in got] == list(range(1, 300_001))
        assert list(_copy_batches(conn, "SELECT 1 WHERE false", [], 1)) == []
        for fails_at in (200_000, 3000):  # rows go out before the failing one: beyond and inside the first block
            with pytest.raises(psycopg2.errors.DivisionByZero):
                for _ in _copy_batches(conn, "SELECT i, repeat('x', 100) || (1 / (i - %s)) FROM generate_series(1, 300000) i",
                                       [fails_at], 2):
                    pass
        # a COPY that would not end (an hour's sleep after 100,000 rows, ~11 MB): only its cancel lets the
        # connection serve the next query
        batches = _copy_batches(conn, "SELECT repeat('x', 100) || i, pg_sleep(CASE WHEN i > 100000 THEN 3600 ELSE 0 END) "
                                      "FROM generate_series(1, 100001) i", [], 2)
        assert next(batches).num_rows > 0
        batches.close()
        with conn.cursor() as cur:
            cur.execute("SELECT 42")
            assert cur.fetchone() == (42,)
    finally:
        conn.close()


def test_a_partitions_snapshot_is_taken_again_only_for_a_transaction_committed_by_the_epochs_end(postgres_db_module):
    """``Window.settled`` over a real slot: the chunks' snapshot must see every transaction committed by the
    epoch's end ``at``; one it misses that committed after ``at`` (its keys' rows come from its old rows) is
    no reason to take it again (under steady writes almost every snapshot misses one); one it misses that
    the window does not hold (here: a write to a table outside the publication) cannot be placed, so the
    snapshot is taken again. ``Window.changes``: the table's changes after ``at``, decoded once."""
    from types import SimpleNamespace

    from sources._pg import slot as pgslot
    from sources._pg.snapshot import Window, _changed_rows
    from streaming_engine.schema import Column, TableSchema

    conn = _connect(postgres_db_module)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA settle; CREATE TABLE settle.t (id int PRIMARY KEY, v text); "
                "ALTER TABLE settle.t REPLICA IDENTITY FULL; CREATE TABLE settle.other (id int); "
                "CREATE PUBLICATION settle_pub FOR TABLE settle.t")
    cur.execute("SELECT pg_create_logical_replication_slot('settle_slot', 'pgoutput')")
    try:
        def xid(sql: str) -> int:
            cur.execute(sql + " RETURNING pg_current_xact_id()::text")
            return int(cur.fetchone()[0])

        start = pgslot.epoch_end(cur)
        before = xid("INSERT INTO settle.t VALUES (1, 'a'), (5, 'b')")
        at = pgslot.epoch_end(cur)
        after = xid("UPDATE settle.t SET v = 'c' WHERE id = 5")
        elsewhere = xid("INSERT INTO settle.other VALUES (1)")
        high = pgslot.epoch_end(cur)
        spec = SimpleNamespace(slot="settle_slot", publication="settle_pub", connection=SimpleNamespace(database="postgres"))
        window = Window(start)
        top = max(before, after, elsewhere) + 1
        assert window.settled(spec, conn, at, high, (before, top, set()), set())  # it sees them all
        assert not window.settled(spec, conn, at, high, (before, top, {before}), {before})
        assert window.settled(spec, conn, at, high, (before, top, {after}), {after})
        # (PostgreSQL 15's pgoutput sends nothing for a transaction without a published change)
        assert not window.settled(spec, conn, at, high, (before, top, {elsewhere}), {elsewhere})
        table = TableSchema("postgres.settle.t", (Column("id", "int"), Column("v", "string")), ("id",))
        changes = window.changes(spec, table, at, high)
        assert changes == [((5,), {"id": "5", "v": "b"}, (5,), {"id": "5", "v": "c"})], changes
        assert _changed_rows(changes, table, [0], [10]) == {("5",): {"id": "5", "v": "b"}}  # its row at ``at``
        assert _changed_rows(changes, table, [5], None) == {}  # another chunk's key
    finally:
        cur.execute("SELECT pg_drop_replication_slot('settle_slot')")
        cur.execute("DROP PUBLICATION settle_pub; DROP SCHEMA settle CASCADE")
        conn.close()
