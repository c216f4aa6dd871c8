"""Exactly once from PostgreSQL under crashes: the Postgres-CDC source (its snapshot, then the slot)
-> Delta, the driver SIGKILLed at named points and at random moments while a writer keeps changing
twenty tables.

The tables start with rows, each with a large ``doc`` value stored out of line (TOAST) that no
change ever updates, so every UPDATE's new row arrives without it ('u' in pgoutput) and must be
filled from the old row, never written as null. The job (STREAMING, 200 ms trigger,
``startup.mode = initial``) reads the tables in chunks, eight per epoch (about eight epochs of
snapshot), then streams the slot, and writes an upsert target per table and a change log (row
kinds kept by RowKindExtractor): 40 Delta targets an epoch. Every change the writer makes gives
``n`` a value no other change of its table has. The kills (``TARGETED``, one run each, every run
killed within about two epochs of its start, so a kill costs a driver start and an epoch or two):
six in the snapshot and three in the stream at every fault point of an epoch (an epoch's start,
between a sink's files and its commit, after one sink's tables, between the sinks, before, inside
and after the ledger: the epoch committed, the slot not yet advanced, so the next run reads it
again and must apply nothing of it twice), then one at random; ``STREAMING_ENGINE_SOAK=<kills>``
makes that many random ones. After every kill the slot's confirmed position is checked against
the checkpoint: it never passes the last committed epoch. The last run stops gracefully once the
slot is past the writer's final commit. Then: each upsert target equals its table, ``doc``
included; the change log telescopes to it (per table, the rows added, +I and +U, minus the rows
removed, -U and -D, are exactly the table's rows: a chunk or a change applied twice, or one lost,
breaks it); every change the writer made after the snapshot ended is logged exactly once; no
epoch is in a target twice. Midway the writer adds a column to ``t0`` (``ALTER TABLE ... ADD
COLUMN``) and fills it from then on: a running job plans its pipeline again (schema.change.behavior
= lenient), a restarted one plans it from the start; either way the column and its values reach
both of ``t0``'s Delta tables.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg2
import pytest

from tests.components.fixtures import postgres_db  # noqa: F401
from tests.jvm import C1_ONLY_OPTS
from tests.runtime.io.pg_helpers import assert_telescopes
from tests.recovery.test_cdc_crash import _txn_versions
from tests.recovery.test_crash_recovery import Run

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.soak]

TABLES = tuple(f"t{i}" for i in range(20))
JOB = """
env { job.name = pg_crash, job.mode = STREAMING, checkpoint.interval = 200, checkpoint.dir = "${work}/ck",
      job.retry.times = 0, spark.driver.extraJavaOptions = "@JVM@" }
source {
  Postgres-CDC {
    plugin_output = pg, base-url = "jdbc:postgresql://@PG@/postgres", username = postgres,
    table-names = [@TABLES@], startup.mode = initial, slot.name = pg_crash,
    snapshot.split.size = 100, snapshot.chunks.per.epoch = 8
  }
}
transform {
  RowKindExtractor { plugin_input = pg, plugin_output = logged, transform_type = SHORT }
}
sink {
  Delta { plugin_input = pg, path = "${work}/state/${table_name}", save_mode = upsert }
  Delta { plugin_input = logged, path = "${work}/log/${table_name}" }
}
"""
ROWS = 250  # per table at the start: 3 chunks of 100 (60 in all), 8 an epoch -> the snapshot takes epochs 0-7
DOC_CHARS = 3200  # > PostgreSQL's TOAST threshold (~2 kB), stored out of line uncompressed (STORAGE EXTERNAL)
UPSERT, LOG = 0, 1
# (point, epoch, sink: UPSERT, LOG or None = any). Each kill in the epoch after the previous one's (or
# two on), so every run dies within about two epochs of its start: six kills in the snapshot, three in
# the stream, one at random (STREAMING_ENGINE_SOAK=<kills>: that many random ones).
TARGETED = [("sink_table_committed", 1, UPSERT), ("after_ledger", 2, None), ("epoch_start", 3, None),
            ("sink_files_written", 4, LOG), ("before_ledger", 5, None), ("ledger_files_written", 6, None),
            ("after_sink", 8, UPSERT), ("sink_table_committed", 9, LOG), ("after_ledger", 11, None)]
RANDOM_KILLS = max(1, int(os.environ.get("STREAMING_ENGINE_SOAK", "0") or 0))
# replica.identity = DEFAULT (tables under PostgreSQL's default identity: upsert targets only, no change log):
# six tables, kills in the snapshot (its chunks give rows newer than their epoch) and in the stream
DEFAULT_TABLES = TABLES[:6]
DEFAULT_TARGETED = [("sink_table_committed", 1, UPSERT), ("after_ledger", 2, None), ("sink_files_written", 4, UPSERT),
                    ("before_ledger", 7, None), ("after_ledger", 9, None)]


def _doc(rng: random.Random) -> str:
    """A value PostgreSQL cannot compress: TOASTed out of line."""
    return "".join(rng.choices("0123456789abcdef", k=DOC_CHARS))


class Writer(threading.Thread):
    """Random inserts, updates, deletes and key changes until stopped; every change a new ``n``."""

    def __init__(self, dsn: str, seed: int = 5, tables: tuple[str, ...] = TABLES, key_change_sets_doc: bool = False):
        super().__init__(daemon=True)
        self.tables, self.key_change_sets_doc = tables, key_change_sets_doc
        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True
        self.rng, self.n, self.next_id = random.Random(seed), ROWS, ROWS
        self.log: list[tuple[str, int, int, str]] = []  # (table, id, n, kind) the change log must hold once
        self.at: list[int] = []  # per log row, a WAL position before its change committed
        self.halt = threading.Event()
        self.alter_at = ROWS + 300  # the change before which t0 gets a column (``extra``), filled from then on

    def run(self) -> None:
        cur = self.conn.cursor()
        while not self.halt.is_set():
            self.change(cur)
            time.sleep(0.05)  # ~15 changes a second: the snapshot and the 40 targets share 2 cores with it

    def change(self, cur) -> None:
        before = self._lsn(cur)  # the change commits after this position
        t = self.rng.choice(self.tables)
        self.n += 1
        if self.n == self.alter_at:
            cur.execute("ALTER TABLE app.t0 ADD COLUMN extra text")
        extra = t == "t0" and self.n > self.alter_at
        cur.execute(f"SELECT id FROM app.{t}")
        ids = [r[0] for r in cur.fetchall()]
        op = self.rng.random()
        if op < 0.4 or len(ids) < 3:
            self.next_id += 1
            if extra:
                cur.execute(f"INSERT INTO app.{t} VALUES (%s, 'new', %s, %s, %s)",
                            (self.next_id, self.n, _doc(self.rng), f"e{self.n}"))
            else:
                cur.execute(f"INSERT INTO app.{t} VALUES (%s, 'new', %s, %s)", (self.next_id, self.n, _doc(self.rng)))
            self.log.append((t, self.next_id, self.n, "+I"))
        elif op < 0.8:
            key = self.rng.choice(ids)
            cur.execute(f"UPDATE app.{t} SET n = %s, v = 'upd'{', extra = %s' if extra else ''} WHERE id = %s",
                        (self.n, *([f"x{self.n}"] if extra else []), key))
            self.log.append((t, key, self.n, "+U"))
        elif op < 0.93:
            key = self.rng.choice(ids)
            cur.execute(f"DELETE FROM app.{t} WHERE id = %s RETURNING n", (key,))
            self.log.append((t, key, cur.fetchone()[0], "-D"))
        else:
            key = self.rng.choice(ids)
            self.next_id += 1
            if self.key_change_sets_doc:  # REPLICA IDENTITY DEFAULT: the TOASTed doc in the key change's transaction
                cur.execute("BEGIN")
                cur.execute(f"UPDATE app.{t} SET doc = %s WHERE id = %s", (_doc(self.rng), key))
            cur.execute(f"UPDATE app.{t} SET id = %s WHERE id = %s RETURNING n", (self.next_id, key))
            n = cur.fetchone()[0]
            if self.key_change_sets_doc:
                cur.execute("COMMIT")
            self.log += [(t, key, n, "-D"), (t, self.next_id, n, "+I")]  # a key change: the old key goes
        self.at += [before] * (len(self.log) - len(self.at))

    @staticmethod
    def _lsn(cur) -> int:
        cur.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
        return int(cur.fetchone()[0])

    def finish(self) -> str:
        self.halt.set()
        self.join()
        cur = self.conn.cursor()
        cur.execute("SELECT pg_current_wal_insert_lsn()::text")
        return cur.fetchone()[0]


def _in_snapshot(work: Path) -> bool:
    commits = sorted((p for p in (work / "ck").rglob("commits/*") if p.name.isdigit()), key=lambda p: int(p.name))
    if not commits:
        return True
    return "snapshot" in json.loads((commits[-1].parent.parent / "offsets" / commits[-1].name).read_text().splitlines()[-1])


def _snapshot_end(work: Path) -> int:
    """The end position of the epoch that read the last snapshot chunks."""
    offsets = sorted((p for p in (work / "ck").rglob("offsets/*") if p.name.isdigit()), key=lambda p: int(p.name))
    for p in offsets:
        o = json.loads(p.read_text().splitlines()[-1])
        if o.get("chunks") and "snapshot" not in o:
            return int(o["lsn"])
    raise AssertionError("no epoch finished the snapshot")


def _slot_past(dsn: str, lsn: str) -> bool:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = 'pg_crash'", (lsn,))
        row = cur.fetchone()
        return bool(row and row[0])


def _committed_end(work: Path) -> int | None:
    """The source's end position (LSN) of the checkpoint's last committed epoch."""
    commits = sorted((p for p in (work / "ck").rglob("commits/*") if p.name.isdigit()), key=lambda p: int(p.name))
    if not commits:
        return None
    return int(json.loads((commits[-1].parent.parent / "offsets" / commits[-1].name).read_text().splitlines()[-1])["lsn"])


def _check_slot(pg, work: Path, when: str) -> None:
    """The slot never confirms past the last committed epoch (its changes would be lost to a restart)."""
    row = pg.execute("SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'pg_crash'")
    end = _committed_end(work)
    if row and end is not None:
        assert int(row[0][0]) <= end, f"{when}: the slot confirmed {row[0][0]}, the last committed epoch ends at {end}"


def _check_no_epoch_twice(work: Path, when: str, tables: tuple[str, ...] = TABLES) -> None:
    for kind in ("state", "log"):
        for t in tables:
            target = work / kind / t
            if (target / "_delta_log").is_dir():
                for app, versions in _txn_versions(target).items():
                    assert versions == sorted(set(versions)), (when, kind, t, app, versions)


def _kill_at_random(run: "Run", rng: random.Random) -> bool:
    """SIGKILL ``run`` at a random moment of an epoch after its first commit; False if it ended first."""
    assert run.wait_for("EpochCommitted", timeout=300), run.output()
    time.sleep(rng.uniform(0.2, 3.0))
    killed = run.kill()
    run.wait()
    return killed


@pytest.mark.timeout(3600 + 60 * RANDOM_KILLS)  # 1,504 s on a 2.5x slower machine (2026-12-01)
@pytest.mark.parametrize("identity", ["FULL", "DEFAULT"])
def test_sigkill_while_reading_the_slot_loses_and_repeats_nothing(request, tmp_path, postgres_db, identity):
    """FULL: the twenty tables, an upsert target and a change log each. DEFAULT (replica.identity = DEFAULT):
    six tables under PostgreSQL's default identity, upsert targets only (a delete carries its key alone, an
    unchanged TOASTed doc is kept from the target; a key change sets doc in its transaction, else its value
    would be nowhere), fewer kills: the targets must equal the tables all the same."""
    full = identity == "FULL"
    tables, targeted = (TABLES, TARGETED) if full else (DEFAULT_TABLES, DEFAULT_TARGETED)
    pg = postgres_db
    pg.execute("CREATE SCHEMA app")
    for t in tables:
        pg.execute(f"CREATE TABLE app.{t} (id int PRIMARY KEY, v text, n bigint, doc text); "
                   f"{f'ALTER TABLE app.{t} REPLICA IDENTITY FULL; ' if full else ''}"
                   f"ALTER TABLE app.{t} ALTER COLUMN doc SET STORAGE EXTERNAL")
        pg.execute(f"INSERT INTO app.{t} SELECT i, 'old', i, (SELECT string_agg(md5(i::text || '-' || g), '') "
                   f"FROM generate_series(1, {DOC_CHARS // 32}) g) FROM generate_series(1, {ROWS}) i")
    # the doc values are out of line: an UPDATE that leaves them is sent without them
    assert all(pg.execute(f"SELECT pg_relation_size(reltoastrelid) > 0 FROM pg_class WHERE oid = 'app.{t}'::regclass")[0][0]
               for t in tables)
    names = ", ".join(f'"postgres.app.{t}"' for t in tables)
    text = JOB.replace("@PG@", f"{pg.host}:{pg.port}").replace("@TABLES@", names).replace("@JVM@", C1_ONLY_OPTS)
    if not full:
        text = text.replace("slot.name = pg_crash,", "slot.name = pg_crash, replica.identity = DEFAULT,")
        text = text[:text.index("transform {")] + text[text.index("sink {"):]
        text = text.replace('  Delta { plugin_input = logged, path = "${work}/log/${table_name}" }\n', "")
        assert "logged" not in text and "replica.identity = DEFAULT" in text, text
    (tmp_path / "job.conf").write_text(text)
    from streaming_engine.job import compile_text

    job = compile_text((tmp_path / "job.conf").read_text(), variables={"work": str(tmp_path)})
    sinks = [v.uid for v in job.dag.vertices if v.kind == "sink"]

    writer = Writer(pg.dsn, tables=tables, key_change_sets_doc=not full)
    rng = random.Random(int(os.environ.get("STREAMING_ENGINE_SOAK_SEED", "3")))
    started = False
    kills: list[str] = []

    def after_kill(what: str, run: "Run") -> None:
        where = "in the snapshot" if _in_snapshot(tmp_path) else "streaming"
        kills.append(f"{what} ({where})")
        print(f"kill {len(kills)}: {what} after {time.monotonic() - run.started:.0f} s ({where}; pipeline started at "
              f"{run.first.get('PipelineStarted', -1):.0f} s, epochs of {[round(s, 1) for s in run.epoch_seconds]} s)",
              flush=True)
        _check_no_epoch_twice(tmp_path, f"after the kill at {what}", tables)
        _check_slot(pg, tmp_path, f"after the kill at {what}")

    try:
        for point, epoch, sink in targeted:
            run = Run(tmp_path, f"{point}@{epoch}" + (f":{sinks[sink]}" if sink is not None else ""))
            if not started:  # the writer starts with the job's slot (the snapshot runs while it writes)
                deadline = time.monotonic() + 300
                while not pg.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'pg_crash'"):
                    assert time.monotonic() < deadline and run.proc.poll() is None, run.output()
                    time.sleep(0.2)
                writer.start()
                started = True
            rc = run.wait(timeout=600)
            assert rc == -signal.SIGKILL, f"fault {point}@{epoch} did not kill the driver (rc {rc}):\n{run.output()}"
            after_kill(f"{point}@{epoch}", run)
        for _ in range(RANDOM_KILLS):
            run = Run(tmp_path)
            if _kill_at_random(run, rng):
                after_kill("random", run)
        run = Run(tmp_path)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and _in_snapshot(tmp_path):  # a slow machine: the snapshot goes on
            assert run.proc.poll() is None, f"the last run ended early:\n{run.output()}"
            time.sleep(0.5)
        time.sleep(3.0)  # changes after the snapshot's end, which must be logged exactly once
        last = writer.finish()
        while time.monotonic() < deadline and not _slot_past(pg.dsn, last):
            assert run.proc.poll() is None, f"the last run ended early:\n{run.output()}"
            time.sleep(1.0)  # the source confirms each epoch once Spark's commit log holds it, new WAL or not
        assert _slot_past(pg.dsn, last), f"the slot never passed the writer's last commit:\n{run.output()}"
        print(f"the last run caught up in {time.monotonic() - run.started:.0f} s", flush=True)
        run.proc.send_signal(signal.SIGTERM)  # a graceful stop: the engine ends the running epoch and exits
        rc = run.wait(timeout=120)
        assert rc == 0, f"the last run ended with {rc}:\n{run.output()}"
    finally:
        writer.halt.set()
    _check_no_epoch_twice(tmp_path, "at the end", tables)
    print("kills: " + "; ".join(kills), flush=True)

    spark = request.getfixturevalue("spark")
    assert writer.n > writer.alter_at, "the writer stopped before it added the column"
    columns = {t: "id, v, n, doc, extra" if t == "t0" else "id, v, n, doc" for t in tables}
    for t in tables:
        got = sorted(tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "state" / t))
                     .select(*columns[t].split(", ")).collect())
        want = sorted(pg.execute(f"SELECT {columns[t]} FROM app.{t}"))
        if got != want:  # name what differs (a null doc: an unchanged TOASTed value written as null)
            diff = sorted(set(got) ^ set(want))
            raise AssertionError(f"{t}: {len(diff)} rows differ, e.g. {[(r[:3], r[3] is None) for r in diff[:4]]}")
    assert sum(1 for r in pg.execute("SELECT extra FROM app.t0") if r[0] is not None) > 5
    updated = Counter(t for t, _, _, kind in writer.log if kind == "+U")
    assert all(updated[t] > 0 for t in tables), updated  # every table had UPDATEs leaving its TOASTed doc
    if not full:  # (no change log: a DEFAULT table reaches upsert sinks only)
        assert len(writer.log) > 100 and len(kills) >= len(targeted) + 1
        request.node.user_properties.append(("ran", f"{len(writer.log)} changes, {len(kills)} kills"))
        return
    snapshot_end = _snapshot_end(tmp_path)
    for t in tables:
        rows = spark.read.format("delta").load(str(tmp_path / "log" / t)).select("row_kind", *columns[t].split(", ")).collect()
        assert_telescopes(rows, pg.execute(f"SELECT {columns[t]} FROM app.{t}"), t)
        # every change after the snapshot's end: logged exactly once
        logged = Counter((r.id, r.n, r.row_kind) for r in rows if r.row_kind != "-U")
        late = Counter((i, n, k) for (tt, i, n, k), at in zip(writer.log, writer.at) if tt == t and at >= snapshot_end)
        assert late and all(logged[k] == c for k, c in late.items()), (
            t, sorted((k, c, logged[k]) for k, c in late.items() if logged[k] != c)[:8])
    assert len(writer.log) > 100 and len(kills) >= len(targeted) + 1
    request.node.user_properties.append(("ran", f"{len(writer.log)} changes, {len(kills)} kills"))
