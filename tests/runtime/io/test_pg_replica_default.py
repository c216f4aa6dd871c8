"""Postgres-CDC with ``replica.identity = DEFAULT``: tables under PostgreSQL's REPLICA IDENTITY DEFAULT, real
PostgreSQL 15.

Under DEFAULT the server sends a DELETE's key alone, no old row for an UPDATE, and an UPDATE that leaves a
TOASTed value alone does not send it ('u'). The engine then takes the value from the key's earlier change in
the same epoch or leaves it to the upsert sink, which keeps its table's value; a snapshot chunk gives its rows
as its snapshot sees them and the changes since come again. What is checked:

- a snapshot while a writer changes two tables (updates that leave TOASTed documents alone, deletes, inserts,
  a document set and then left alone in one transaction, key changes, a TOASTed row's key changed in the
  transaction that set its document), stopped in the middle and resumed: both Delta tables equal PostgreSQL;
- an UPDATE that changes a key and leaves a TOASTed value alone, with nothing in its epoch to take it from,
  fails the run naming the table, the column and the key; what was committed before stays;
- what the planner refuses (a sink that does not upsert by key, a transform on the way, a table without a
  primary key, DEFAULT tables without the option) and what explain says.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from tests.components.fixtures import postgres_db_module  # noqa: F401
from tests.runtime.io.pg_helpers import connect as _connect, drop_slot, slot_past, writer

SLOT = "pgdef_test"
ROWS = 3000
SPLIT = 300

TABLES = f"""
CREATE SCHEMA def;
CREATE TABLE def.docs (id bigint PRIMARY KEY, v text, n int, doc text);
ALTER TABLE def.docs ALTER COLUMN doc SET STORAGE EXTERNAL;
CREATE TABLE def.small (id int PRIMARY KEY, v int);
INSERT INTO def.docs SELECT i, 'v' || i, 0, CASE WHEN i % 5 = 0 THEN repeat(md5(i::text), 200) ELSE 'd' || i END
  FROM generate_series(1, {ROWS}) i;
INSERT INTO def.small SELECT i, i FROM generate_series(1, 500) i;
"""

JOB = """
env {{ job.name = pgdef, job.mode = {mode}, checkpoint.interval = 200, job.retry.times = 0 }}
source {{
  Postgres-CDC {{
    plugin_output = pg
    base-url = "jdbc:postgresql://{host}:{port}/postgres"
    username = postgres
    table-names = [{tables}]
    slot.name = {slot}
    replica.identity = {identity}
    snapshot.split.size = {split}
    snapshot.chunks.per.epoch = 2
    {extra}
  }}
}}
{transform}
sink {{
  {sink}
}}
"""
UPSERT = 'Delta { plugin_input = pg, path = "${work}/state/${table_name}", save_mode = upsert }'
TABLE_NAMES = '"postgres.def.docs", "postgres.def.small"'


def _job(pg, mode: str = "STREAMING", tables: str = TABLE_NAMES, identity: str = "DEFAULT", extra: str = "",
         transform: str = "", sink: str = UPSERT, slot: str = SLOT) -> str:
    return JOB.format(mode=mode, host=pg.host, port=pg.port, tables=tables, slot=slot, identity=identity,
                      split=SPLIT, extra=extra, transform=transform, sink=sink)


def _doc(step: int) -> str:
    return (f"{step:08x}" * 4) * 200  # 6,400 characters: stored outside the row (EXTERNAL)


def _write(cur, rng: random.Random, step: int) -> None:
    """One round of changes. A key change of a row whose document is TOASTed only in the transaction that
    sets its document (the value is then in the epoch: the one case the engine can follow)."""
    toasted = 5 * rng.randint(1, ROWS // 5)
    cur.execute("UPDATE def.docs SET n = n + 1, v = %s WHERE id = %s", (f"u{step}", toasted))  # doc left alone
    cur.execute("UPDATE def.docs SET n = n + 1 WHERE id = %s", (rng.randint(1, ROWS + 300),))
    cur.execute("DELETE FROM def.docs WHERE id = %s", (rng.randint(1, ROWS + 300),))
    cur.execute("INSERT INTO def.docs VALUES (%s, %s, 0, %s) ON CONFLICT (id) DO NOTHING",
                (rng.randint(1, ROWS + 300), f"i{step}", _doc(step) if step % 2 else "small"))
    x = rng.randint(1, ROWS)  # the document set, then left alone by the next UPDATE of the same transaction
    cur.execute("BEGIN")  # (the connection is in autocommit)
    cur.execute("UPDATE def.docs SET doc = %s WHERE id = %s", (_doc(step), x))
    cur.execute("UPDATE def.docs SET n = n + 10 WHERE id = %s", (x,))
    cur.execute("COMMIT")
    if step % 5 == 0:  # a key change of a row whose document is small (sent whole)
        to = rng.randint(1, ROWS + 300)
        cur.execute("UPDATE def.docs SET id = %s WHERE id = %s AND length(doc) < 100 "
                    "AND NOT EXISTS (SELECT 1 FROM def.docs WHERE id = %s)", (to, rng.randint(1, ROWS), to))
    if step % 7 == 0:  # a TOASTed row's key changed in the transaction that set its document
        to = 100_000 + step
        x = rng.randint(1, ROWS)
        cur.execute("BEGIN")
        cur.execute("UPDATE def.docs SET doc = %s WHERE id = %s", (_doc(-step & 0xFFFF), x))
        cur.execute("UPDATE def.docs SET id = %s WHERE id = %s", (to, x))
        cur.execute("COMMIT")
    cur.execute("UPDATE def.small SET v = v + 1 WHERE id = %s", (rng.randint(1, 550),))
    if step % 3 == 0:
        cur.execute("DELETE FROM def.small WHERE id = %s", (rng.randint(1, 550),))
        cur.execute("INSERT INTO def.small VALUES (%s, 0) ON CONFLICT DO NOTHING", (rng.randint(1, 550),))


def _writer(pg, stop: threading.Event, seed: int, state: dict) -> threading.Thread:
    return writer(pg, stop, seed, state, _write)


def _snapshot_done(work) -> bool:
    """Whether the last committed epoch's end offset says the snapshot is over (its chunks are all read)."""
    try:
        last = max(int(p.name) for p in work.rglob("commits/*") if p.name.isdigit())
        offset = next(p for p in work.rglob(f"offsets/{last}"))
        return "snapshot" not in json.loads(offset.read_text().splitlines()[-1])
    except (ValueError, StopIteration, OSError, IndexError):
        return False


def _drop(cur, slot: str = SLOT) -> None:
    drop_slot(cur, slot)


def _assert_equal(spark, cur, work) -> None:
    for table, columns in (("docs", ["id", "v", "n", "doc"]), ("small", ["id", "v"])):
        cur.execute(f"SELECT {', '.join(columns)} FROM def.{table} ORDER BY id")
        want = [tuple(r) for r in cur.fetchall()]
        got = sorted(tuple(r) for r in spark.read.format("delta").load(str(work / "state" / table))
                     .select(*columns).collect())
        if got != want:
            wanted, have = {r[0]: r for r in want}, {r[0]: r for r in got}
            diff = sorted(k for k in {*wanted, *have} if wanted.get(k) != have.get(k))
            shown = [(k, [str(x)[:20] for x in wanted.get(k, ())], [str(x)[:20] for x in have.get(k, ())])
                     for k in diff[:5]]
            raise AssertionError(f"{table}: {len(diff)} keys differ from PostgreSQL, e.g. {shown}")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("merge", ["one job", "delta"])
def test_a_snapshot_and_the_stream_under_replica_identity_default_equal_postgres_with_toasted_values_kept(
        spark, run_job_text, postgres_db_module, tmp_path, monkeypatch, merge):
    """Both MERGEs keep an unchanged column: the engine's one-job MERGE of the tables of an epoch
    (delta_merge.py, MultiTableMerge.java) and Delta's own, per table (delta_txn.upsert); the second run
    also has the reader keep an epoch's TOASTable values on disk beyond 2,000 bytes."""
    from sinks.delta import MERGE_ENV
    from sources.postgres_cdc import SPILL_ENV
    from tests.merge_paths import merge_paths

    if merge == "delta":  # and the reader's values past 2,000 bytes an epoch in its SQLite file (_Latest)
        monkeypatch.setenv(MERGE_ENV, "per_table")
        monkeypatch.setenv(SPILL_ENV, "2000")
    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute(TABLES)
    job = _job(pg)
    progress: dict = {}
    try:
        stop = threading.Event()
        w = _writer(pg, stop, 1, progress)
        first = run_job_text(job, stop_after_epochs=2, timeout_s=300)  # inside the snapshot
        assert first.result.status in ("FINISHED", "CANCELED"), first.result.error
        stop.set()
        w.join()

        stop2, stopper, done = threading.Event(), threading.Event(), {}
        w2 = _writer(pg, stop2, 2, progress)

        def finisher() -> None:
            c = _connect(pg).cursor()
            time.sleep(8.0)
            stop2.set()
            w2.join()
            c.execute("SELECT pg_current_wal_insert_lsn()::text")
            last = c.fetchone()[0]
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and not (slot_past(c, SLOT, last) and _snapshot_done(tmp_path)):
                time.sleep(0.3)
            done["advanced"] = slot_past(c, SLOT, last) and _snapshot_done(tmp_path)
            stopper.set()

        f = threading.Thread(target=finisher, daemon=True)
        f.start()
        second = run_job_text(job, stop=stopper, timeout_s=400)
        f.join()
        assert second.result.status in ("FINISHED", "CANCELED"), second.result.error
        assert done.get("advanced"), "the slot never passed the writer's last commit, or the snapshot never finished"
        assert progress["step"] > 30, progress
        # the writer's updates left TOASTed documents alone on rows the targets held before
        cur.execute("SELECT count(*) FROM def.docs WHERE n > 0 AND length(doc) > 5000 AND v LIKE 'u%%'")
        assert cur.fetchone()[0] > 10
        _assert_equal(spark, cur, second.work)
        paths = merge_paths(second.work / "state" / "docs")
        assert set(paths) == {merge} and paths[merge] >= 2, paths
    finally:
        _drop(cur)
        cur.execute("DROP SCHEMA def CASCADE")
        conn.close()


@pytest.mark.timeout(600)
def test_a_key_change_leaving_a_toasted_value_alone_fails_naming_the_key_and_keeps_what_was_committed(
        spark, run_job_text, postgres_db_module, tmp_path):
    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute(TABLES)
    job = _job(pg, mode="BATCH")
    try:
        ran = run_job_text(job, timeout_s=300)  # the snapshot
        assert ran.result.status == "FINISHED", ran.result.error
        cur.execute("UPDATE def.docs SET n = 7 WHERE id = 10")  # left alone: kept from the table
        cur.execute("DELETE FROM def.docs WHERE id = 11")
        ran = run_job_text(job, timeout_s=300)
        assert ran.result.status == "FINISHED", ran.result.error
        _assert_equal(spark, cur, ran.work)

        cur.execute("UPDATE def.docs SET id = 100005 WHERE id = 5")  # its document, TOASTed, is in no change
        failed = run_job_text(job, timeout_s=300)
        assert failed.result.status == "FAILED", failed.result
        error = failed.result.error
        # (the engine's one-job MERGE says it; test_delta_writes checks Delta's MERGE says the same)
        assert "column doc unchanged" in error and '{"id":100005}' in error and "REPLICA IDENTITY FULL" in error, error
        got = {r.id: r.doc for r in spark.read.format("delta").load(str(tmp_path / "state" / "docs")).collect()}
        assert got[5] == "".join([__import__("hashlib").md5(b"5").hexdigest()] * 200) and 100005 not in got
        assert got[10] is not None and 11 not in got
    finally:
        _drop(cur)
        cur.execute("DROP SCHEMA def CASCADE")
        conn.close()


def test_what_the_planner_refuses_and_explain_says_under_replica_identity_default(postgres_db_module):
    from streaming_engine.plan.render import to_text
    from tests.unit.helpers import compile_ok, problems_of

    pg = postgres_db_module
    pg.execute("CREATE SCHEMA defp; CREATE TABLE defp.t (id int PRIMARY KEY, doc text); "
               "CREATE TABLE defp.nokey (id int, doc text); "
               "CREATE TABLE defp.full (id int PRIMARY KEY, doc text); ALTER TABLE defp.full REPLICA IDENTITY FULL")
    tables = '"postgres.defp.t"'
    try:
        def problems(**kw) -> list[str]:
            return [str(p) for p in problems_of(_job(pg, slot="pgdefp", **{"tables": tables, **kw}), variables={"work": "/w"})]

        found = problems(identity="FULL")
        assert any("needs REPLICA IDENTITY FULL" in p and "postgres.defp.t" in p and "replica.identity = DEFAULT" in p
                   for p in found), found
        found = problems(sink='Delta { plugin_input = pg, path = "${work}/log/${table_name}" }')
        assert any("read under REPLICA IDENTITY DEFAULT" in p and "not this sink" in p and "save_mode = upsert" in p
                   for p in found), found
        found = problems(sink='Delta { plugin_input = pg, path = "/w/t", save_mode = upsert, stored_as_scd_type = 2, '
                              'source_order_column = _lsn }')
        assert any("not this sink" in p for p in found), found
        found = problems(transform="transform { Filter { plugin_input = pg, plugin_output = f, include_fields = [id, doc] } }",
                         sink='Delta { plugin_input = f, path = "/w/t", save_mode = upsert }')
        assert any("not this transform" in p for p in found), found
        found = problems(sink='Delta { plugin_input = pg, path = "/w/t", save_mode = upsert, primary_key = [doc] }')
        assert any("not by primary_key ['doc']" in p for p in found), found
        found = problems(tables='"postgres.defp.nokey"',
                         extra='table-names-config = [{ table = "postgres.defp.nokey", primaryKeys = [id] }]')
        assert any("has no primary key" in p and "REPLICA IDENTITY FULL" in p for p in found), found

        text = to_text(compile_ok(_job(pg, slot="pgdefp", tables='"postgres.defp.t", "postgres.defp.full"'),
                                  variables={"work": "/w"}))
        assert "REPLICA IDENTITY DEFAULT accepted: deletes carry the key alone" in text, text
        assert text.count("a column the source left unchanged (TOAST) keeps the table's value") == 2, text
    finally:
        pg.execute("DROP SCHEMA defp CASCADE")
