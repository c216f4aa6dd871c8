"""Exactly once from a PostgreSQL slot under crashes: the Postgres-CDC source -> Delta, the driver
SIGKILLed at named points and at a random moment while a writer keeps changing three tables.

The job (STREAMING, 200 ms trigger) reads the tables from the job's slot and writes an upsert
target per table and a change log (row kinds kept by RowKindExtractor, UPDATE_BEFORE dropped).
Every change the writer makes gives ``n`` a value no other change has, so each change is one
unique (id, n, kind) row in the log. The kills (``TARGETED``): between the two sinks' commits, after the ledger (the epoch committed, the
slot not yet advanced: the next run must read the epoch again and apply nothing of it twice), a
later epoch's start (the slot advanced or not), then one at random; with ``STREAMING_ENGINE_SOAK``
also an epoch's start and before the ledger. The last run stops gracefully once the slot is past the writer's
final commit. Then: each upsert target equals its table, and the change log holds every change
the writer made exactly once, and no epoch is in a target twice.
"""

from __future__ import annotations

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
from tests.recovery.test_cdc_crash import _txn_versions
from tests.recovery.test_crash_recovery import Run

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.soak]

TABLES = ("t0", "t1", "t2")
JOB = """
env { job.name = pg_crash, job.mode = STREAMING, checkpoint.interval = 200, checkpoint.dir = "${work}/ck",
      job.retry.times = 0, spark.driver.extraJavaOptions = "@JVM@" }
source {
  Postgres-CDC {
    plugin_output = pg, base-url = "jdbc:postgresql://@PG@/postgres", username = postgres,
    table-names = [@TABLES@], startup.mode = latest, slot.name = pg_crash
  }
}
transform {
  FilterRowKind { plugin_input = pg, plugin_output = kept, exclude_kinds = [UPDATE_BEFORE] }
  RowKindExtractor { plugin_input = kept, plugin_output = logged, transform_type = SHORT }
}
sink {
  Delta { plugin_input = pg, path = "${work}/state/${table_name}", save_mode = upsert }
  Delta { plugin_input = logged, path = "${work}/log/${table_name}" }
}
"""
# (point, epoch, which sink: 0 = the upsert sink, None = any). CI: between the sinks' commits, after the
# ledger (the epoch committed, the slot not advanced), a later epoch's start (each run costs ~25 s of
# driver start); STREAMING_ENGINE_SOAK set: also an epoch's start and before the ledger.
TARGETED = [("sink_table_committed", 3, 0), ("after_ledger", 4, None), ("epoch_start", 6, None)]
if os.environ.get("STREAMING_ENGINE_SOAK"):
    TARGETED = [("epoch_start", 3, None), ("sink_table_committed", 4, 0), ("before_ledger", 5, None),
                ("after_ledger", 6, None), ("epoch_start", 8, None)]


class Writer(threading.Thread):
    """Random inserts, updates, deletes and key changes until stopped; every change a new ``n``."""

    def __init__(self, dsn: str, seed: int = 5):
        super().__init__(daemon=True)
        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True
        self.rng, self.n, self.next_id = random.Random(seed), 0, 0
        self.log: list[tuple[str, int, int, str]] = []  # (table, id, n, kind) the change log must hold once
        self.halt = threading.Event()

    def run(self) -> None:
        cur = self.conn.cursor()
        while not self.halt.is_set():
            self.change(cur)
            time.sleep(0.02)

    def change(self, cur) -> None:
        t = self.rng.choice(TABLES)
        self.n += 1
        cur.execute(f"SELECT id FROM app.{t}")
        ids = [r[0] for r in cur.fetchall()]
        op = self.rng.random()
        if op < 0.4 or len(ids) < 3:
            self.next_id += 1
            cur.execute(f"INSERT INTO app.{t} VALUES (%s, 'new', %s)", (self.next_id, self.n))
            self.log.append((t, self.next_id, self.n, "+I"))
        elif op < 0.8:
            key = self.rng.choice(ids)
            cur.execute(f"UPDATE app.{t} SET n = %s, v = 'upd' WHERE id = %s", (self.n, key))
            self.log.append((t, key, self.n, "+U"))
        elif op < 0.93:
            key = self.rng.choice(ids)
            cur.execute(f"DELETE FROM app.{t} WHERE id = %s RETURNING n", (key,))
            self.log.append((t, key, cur.fetchone()[0], "-D"))
        else:
            key = self.rng.choice(ids)
            self.next_id += 1
            cur.execute(f"UPDATE app.{t} SET id = %s WHERE id = %s RETURNING n", (self.next_id, key))
            n = cur.fetchone()[0]
            self.log += [(t, key, n, "-D"), (t, self.next_id, n, "+I")]  # a key change: the old key goes

    def finish(self) -> str:
        self.halt.set()
        self.join()
        cur = self.conn.cursor()
        cur.execute("SELECT pg_current_wal_insert_lsn()::text")
        return cur.fetchone()[0]


def _slot_past(dsn: str, lsn: str) -> bool:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = 'pg_crash'", (lsn,))
        row = cur.fetchone()
        return bool(row and row[0])


def _check_no_epoch_twice(work: Path, when: str) -> None:
    for kind in ("state", "log"):
        for t in TABLES:
            target = work / kind / t
            if (target / "_delta_log").is_dir():
                for app, versions in _txn_versions(target).items():
                    assert versions == sorted(set(versions)), (when, kind, t, app, versions)


@pytest.mark.timeout(1500)
def test_sigkill_while_reading_the_slot_loses_and_repeats_nothing(request, tmp_path, postgres_db):
    pg = postgres_db
    pg.execute("CREATE SCHEMA app")
    for t in TABLES:
        pg.execute(f"CREATE TABLE app.{t} (id int PRIMARY KEY, v text, n bigint); ALTER TABLE app.{t} REPLICA IDENTITY FULL")
    names = ", ".join(f'"postgres.app.{t}"' for t in TABLES)
    (tmp_path / "job.conf").write_text(
        JOB.replace("@PG@", f"{pg.host}:{pg.port}").replace("@TABLES@", names).replace("@JVM@", C1_ONLY_OPTS))
    from streaming_engine.job import compile_text

    job = compile_text((tmp_path / "job.conf").read_text(), variables={"work": str(tmp_path)})
    upsert = [v.uid for v in job.dag.vertices if v.kind == "sink"][0]

    writer = Writer(pg.dsn)
    started = False
    kills = 0
    try:
        for point, epoch, sink in TARGETED:
            run = Run(tmp_path, f"{point}@{epoch}" + (f":{upsert}" if sink == 0 else ""))
            if not started:  # startup.mode = latest: the changes made after the slot's creation are read
                deadline = time.monotonic() + 300
                while not pg.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'pg_crash'"):
                    assert time.monotonic() < deadline and run.proc.poll() is None, run.output()
                    time.sleep(0.2)
                writer.start()
                started = True
            rc = run.wait(timeout=600)
            assert rc == -signal.SIGKILL, f"fault {point}@{epoch} did not kill the driver (rc {rc}):\n{run.output()}"
            kills += 1
            print(f"killed at {point}@{epoch} after {time.monotonic() - run.started:.0f} s", flush=True)
            _check_no_epoch_twice(tmp_path, f"after the kill at {point}@{epoch}")
        run = Run(tmp_path)
        assert run.wait_for("EpochCommitted", timeout=300), run.output()
        time.sleep(random.Random(3).uniform(0.5, 3.0))
        if run.kill():
            kills += 1
        run.wait()
        _check_no_epoch_twice(tmp_path, "after the random kill")
        last = writer.finish()
        run = Run(tmp_path)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _slot_past(pg.dsn, last):
            assert run.proc.poll() is None, f"the last run ended early:\n{run.output()}"
            time.sleep(0.5)
        assert _slot_past(pg.dsn, last), f"the slot never passed the writer's last commit:\n{run.output()}"
        print(f"the last run caught up in {time.monotonic() - run.started:.0f} s", flush=True)
        run.proc.send_signal(signal.SIGTERM)  # a graceful stop: the engine ends the running epoch and exits
        rc = run.wait(timeout=120)
        assert rc == 0, f"the last run ended with {rc}:\n{run.output()}"
    finally:
        writer.halt.set()
    _check_no_epoch_twice(tmp_path, "at the end")

    spark = request.getfixturevalue("spark")
    for t in TABLES:
        got = sorted(tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "state" / t)).select("id", "v", "n").collect())
        assert got == sorted(pg.execute(f"SELECT id, v, n FROM app.{t}")), t
    logged = Counter()
    for t in TABLES:
        for r in spark.read.format("delta").load(str(tmp_path / "log" / t)).select("id", "n", "row_kind").collect():
            logged[(t, r.id, r.n, r.row_kind)] += 1
    want = Counter(writer.log)
    extra, missing = logged - want, want - logged
    assert not extra and not missing, (
        f"{sum(extra.values())} rows logged the writer did not make (or twice): {sorted(extra.items())[:5]}; "
        f"{sum(missing.values())} changes missing, of keys {sorted(Counter((t, i) for t, i, _, _ in missing).items())[:10]}, "
        f"n {min(n for _, _, n, _ in missing)}..{max(n for _, _, n, _ in missing)}: {sorted(missing, key=lambda m: m[2])[:8]}")
    assert len(writer.log) > 100 and kills == len(TARGETED) + 1
    request.node.user_properties.append(("ran", f"{len(writer.log)} changes, {kills} kills"))
