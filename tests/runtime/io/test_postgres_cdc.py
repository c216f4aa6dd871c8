"""Postgres-CDC (streaming from the slot) against a real PostgreSQL 15, into Delta upsert and change-log sinks.

The job runs while a writer changes two tables (inserts, updates that leave a
TOASTed value unchanged, a key change, deletes, every mapped type); the test
stops it once the slot has moved past the writer's last commit, which the
source does only after an epoch committed in every sink. The upsert targets
then equal the tables, and the change logs hold each change once. Changes made
while the job is stopped are read by the next run from the slot (the
checkpoint's offset), again exactly once.
"""

from __future__ import annotations

import threading
import time

import psycopg2
import pytest

from tests.components.fixtures import postgres_db_module  # noqa: F401

TABLES = """
CREATE SCHEMA app;
CREATE TABLE app.orders (id int PRIMARY KEY, amount numeric(10,2), note text, flag bool, at timestamptz,
                         doc text, raw bytea, qty int2, big int8, ratio float8, day date, tiny float4);
ALTER TABLE app.orders ALTER COLUMN doc SET STORAGE EXTERNAL;
ALTER TABLE app.orders REPLICA IDENTITY FULL;
CREATE TABLE app.items (id bigint PRIMARY KEY, name varchar(20), payload jsonb);
ALTER TABLE app.items REPLICA IDENTITY FULL;
"""

JOB = """
env {{ job.name = pgcdc, job.mode = STREAMING, checkpoint.interval = 300 }}
source {{
  Postgres-CDC {{
    plugin_output = pg
    base-url = "jdbc:postgresql://{host}:{port}/postgres?loggerLevel=OFF"
    username = postgres
    password = "unused-with-trust"
    database-names = ["postgres"]
    schema-names = ["app"]
    table-names = ["postgres.app.orders,postgres.app.items"]
    startup.mode = latest
    slot.name = pgcdc_test
  }}
}}
sink {{
  Delta {{ plugin_input = pg, path = "${{work}}/state/${{schema_name}}_${{table_name}}", save_mode = upsert }}
  Delta {{ plugin_input = pg, path = "${{work}}/log/${{table_name}}" }}
}}
"""

BIG = "d" * 30000  # TOASTed (EXTERNAL storage), left unchanged by later updates


def _connect(pg):
    conn = psycopg2.connect(pg.dsn)
    conn.autocommit = True
    return conn


def _changes(cur, start: int, n: int) -> int:
    """A round of changes on keys start..start+n; returns the rows the change logs get (an UPDATE is two:
    -U and +U, REPLICA IDENTITY FULL sending the old row)."""
    events = 0
    for i in range(start, start + n):
        cur.execute(
            "INSERT INTO app.orders VALUES (%s, %s, %s, %s, '2026-01-02 03:04:05.123456+02', %s, %s, 7, %s, 0.125, "
            "'2024-02-29', 1.5)", (i, f"{i}.25", f"n{i}", i % 2 == 0, BIG, bytes([i % 256, 255]), 2**40 + i))
        cur.execute("INSERT INTO app.items VALUES (%s, %s, %s)", (i, f"item{i}", '{"k": [1, 2]}'))
        events += 2
    for i in range(start, start + n, 2):
        cur.execute("UPDATE app.orders SET amount = amount + 1, flag = NOT flag WHERE id = %s", (i,))  # doc unchanged
        events += 2
    for i in range(start + 1, start + n, 3):
        cur.execute("DELETE FROM app.items WHERE id = %s", (i,))
        events += 1
    cur.execute("UPDATE app.items SET id = %s WHERE id = %s", (start + 10_000, start))  # a key change
    events += 2
    with cur.connection:  # one transaction of several changes
        cur.execute("UPDATE app.orders SET note = 'tx' WHERE id BETWEEN %s AND %s", (start, start + 2))
        cur.execute("INSERT INTO app.items VALUES (%s, 'in-tx', NULL)", (start + 20_000,))
    return events + 3 * 2 + 1


def _slot_past(cur, lsn: str) -> bool:
    cur.execute("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = 'pgcdc_test'", (lsn,))
    row = cur.fetchone()
    return bool(row and row[0])


def _run_while(run_job_text, pg, job: str, write) -> tuple:
    """Run the job; ``write(cur)`` once the slot exists; stop when the slot is past the writer's last commit."""
    stop = threading.Event()
    out: dict = {}

    def writer() -> None:
        conn = _connect(pg)
        cur = conn.cursor()
        deadline = time.monotonic() + 180
        try:
            while time.monotonic() < deadline:
                cur.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'pgcdc_test'")
                if cur.fetchone():
                    break
                time.sleep(0.2)
            out["events"] = write(cur)
            cur.execute("SELECT pg_current_wal_insert_lsn()::text")
            last = cur.fetchone()[0]
            while time.monotonic() < deadline and not _slot_past(cur, last):
                time.sleep(0.3)
            out["advanced"] = _slot_past(cur, last)
        finally:
            stop.set()
            conn.close()

    t = threading.Thread(target=writer)
    t.start()
    ran = run_job_text(job, stop=stop, timeout_s=300)
    t.join()
    return ran, out


def _pg_rows(cur, table: str, columns: str) -> list[tuple]:
    cur.execute(f"SELECT {columns} FROM app.{table} ORDER BY id")
    return [tuple(r) for r in cur.fetchall()]


@pytest.mark.timeout(900)
def test_changes_reach_delta_exactly_once(spark, run_job_text, postgres_db_module):
    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute(TABLES)
    job = JOB.format(host=pg.host, port=pg.port)
    try:
        ran, out = _run_while(run_job_text, pg, job, lambda c: _changes(c, 1, 12))
        assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
        assert out["advanced"], "the slot did not move past the writer's last commit: no epoch committed it"
        _check(spark, ran.work, cur, out["events"])

        # changes while the job is stopped: the slot keeps them; the next run reads them once
        more = _changes(cur, 100, 9)
        ran2, out2 = _run_while(run_job_text, pg, job, lambda c: _changes(c, 200, 5))
        assert ran2.result.status in ("FINISHED", "CANCELED"), ran2.result.error
        assert out2["advanced"]
        _check(spark, ran.work, cur, out["events"] + more + out2["events"])
    finally:
        cur.execute("SELECT pg_drop_replication_slot('pgcdc_test') FROM pg_replication_slots WHERE slot_name = 'pgcdc_test'")
        cur.execute("DROP PUBLICATION IF EXISTS pgcdc_test")
        cur.execute("DROP SCHEMA app CASCADE")
        conn.close()


def _check(spark, work, cur, events: int) -> None:
    from pyspark.sql import functions as F

    orders = spark.read.format("delta").load(str(work / "state" / "app_orders"))
    got = [tuple(r) for r in orders.orderBy("id").select(
        "id", F.col("amount").cast("string"), "note", "flag", F.date_format("at", "yyyy-MM-dd HH:mm:ss.SSSSSS"),
        F.length("doc"), F.hex("raw"), "qty", "big", "ratio", F.col("day").cast("string"), "tiny").collect()]
    cur.execute("SET TIME ZONE 'UTC'")
    want = _pg_rows(cur, "orders", "id, amount::text, note, flag, to_char(at, 'YYYY-MM-DD HH24:MI:SS.US'), "
                    "length(doc), upper(encode(raw, 'hex')), qty, big, ratio, day::text, tiny")
    assert got == want
    assert all(r[5] == len(BIG) for r in got)  # the TOASTed value survived every update that left it unchanged
    items = spark.read.format("delta").load(str(work / "state" / "app_items"))
    assert [tuple(r) for r in items.orderBy("id").select("id", "name", "payload").collect()] == _pg_rows(
        cur, "items", "id, name, payload::text")
    assert dict(orders.dtypes)["amount"] == "decimal(10,2)" and dict(orders.dtypes)["at"] == "timestamp"
    assert dict(orders.dtypes)["raw"] == "binary" and dict(orders.dtypes)["qty"] == "int"
    # the change logs: every change once
    logged = sum(spark.read.format("delta").load(str(work / "log" / t)).count() for t in ("orders", "items"))
    assert logged == events


def test_a_batch_run_reads_the_changes_up_to_its_start_and_finishes(spark, run_job_text, postgres_db_module):
    """job.mode = BATCH: each run applies what the slot holds up to when it started, then ends FINISHED, and
    its last epoch is confirmed in the slot (Spark confirms a batch to its source only when it plans the next
    one, which a finished batch run never does: the source confirms it from the progress of the batch)."""
    pg = postgres_db_module
    pg.execute("CREATE TABLE public.batch_t (id int PRIMARY KEY, v text); ALTER TABLE public.batch_t REPLICA IDENTITY FULL")
    job = f"""env {{ job.name = pgbatch, job.mode = BATCH }}
source {{ Postgres-CDC {{ plugin_output = s, base-url = "jdbc:postgresql://{pg.host}:{pg.port}/postgres",
  username = postgres, table-names = ["postgres.public.batch_t"], startup.mode = latest, slot.name = pgbatch }} }}
sink {{ Delta {{ plugin_input = s, path = "${{work}}/batch", save_mode = upsert }} }}"""
    try:
        first = run_job_text(job, timeout_s=300)  # creates the slot; nothing to read yet
        assert first.result.status == "FINISHED", first.result.error
        pg.execute("INSERT INTO public.batch_t VALUES (1, 'a'), (2, 'b'); UPDATE public.batch_t SET v = 'c' WHERE id = 1")
        last = pg.execute("SELECT pg_current_wal_insert_lsn()::text")[0][0]
        second = run_job_text(job, timeout_s=300)
        assert second.result.status == "FINISHED", second.result.error
        got = sorted(tuple(r) for r in spark.read.format("delta").load(str(second.work / "batch")).collect())
        assert got == [(1, "c"), (2, "b")]
        confirmed = pg.execute("SELECT confirmed_flush_lsn::text, confirmed_flush_lsn >= %s::pg_lsn "
                               "FROM pg_replication_slots WHERE slot_name = 'pgbatch'", (last,))
        assert confirmed[0][1], f"the slot stayed at {confirmed[0][0]}, before the changes the run committed ({last})"
    finally:
        pg.execute("SELECT pg_drop_replication_slot('pgbatch') FROM pg_replication_slots WHERE slot_name = 'pgbatch'")
        pg.execute("DROP PUBLICATION IF EXISTS pgbatch")
        pg.execute("DROP TABLE public.batch_t")


def test_the_example_job_runs_against_a_database(spark, run_job_text, postgres_db_module, tmp_path):
    """conf/examples/postgres_cdc_to_delta.conf as a user runs it (-i variables), against the test server."""
    from pathlib import Path

    pg = postgres_db_module
    conn = psycopg2.connect(pg.dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE TABLE public.customers (id int PRIMARY KEY, name text); "
                "CREATE TABLE public.orders (id bigint PRIMARY KEY, customer int, total numeric(12,2)); "
                "ALTER TABLE public.customers REPLICA IDENTITY FULL; ALTER TABLE public.orders REPLICA IDENTITY FULL; "
                "INSERT INTO public.customers SELECT i, 'c' || i FROM generate_series(1, 50) i; "
                "INSERT INTO public.orders SELECT i, i % 50 + 1, i * 1.5 FROM generate_series(1, 300) i")
    text = (Path(__file__).resolve().parents[3] / "conf" / "examples" / "postgres_cdc_to_delta.conf").read_text()
    text = text.replace('"work/', f'"{tmp_path}/work/')  # its paths are relative to where the driver runs
    try:
        ran = run_job_text(text, variables={"PG_HOST": pg.host, "PG_PORT": str(pg.port), "PG_DB": "postgres",
                                            "PG_USER": "postgres", "METRICS_PORT": "0"},
                           stop_after_epochs=1, timeout_s=300)
        assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
        for table, columns in (("customers", "id, name"), ("orders", "id, customer, total")):
            got = spark.read.format("delta").load(str(tmp_path / "work" / "lake" / "public" / table))
            cur.execute(f"SELECT {columns} FROM public.{table}")
            assert sorted(tuple(r) for r in got.select(*columns.split(", ")).collect()) == sorted(cur.fetchall())
    finally:
        cur.execute("SELECT pg_drop_replication_slot('shop_to_lake') FROM pg_replication_slots "
                    "WHERE slot_name = 'shop_to_lake'")
        cur.execute("DROP PUBLICATION IF EXISTS shop_to_lake; DROP TABLE public.customers, public.orders")
        conn.close()


def test_a_numeric_nan_fails_the_run_naming_table_column_and_row(spark, run_job_text, postgres_db_module):
    """A NUMERIC NaN (no Spark or Delta decimal holds it) fails the job naming where it is; nothing is written
    as null."""
    pg = postgres_db_module
    pg.execute("CREATE TABLE public.nan_t (id int PRIMARY KEY, amount numeric(10,2)); "
               "ALTER TABLE public.nan_t REPLICA IDENTITY FULL; INSERT INTO public.nan_t VALUES (1, 1.5), (2, 'NaN')")
    job = f"""env {{ job.name = pgnan, job.mode = BATCH }}
source {{ Postgres-CDC {{ plugin_output = s, base-url = "jdbc:postgresql://{pg.host}:{pg.port}/postgres",
  username = postgres, table-names = ["postgres.public.nan_t"], slot.name = pgnan }} }}
sink {{ Delta {{ plugin_input = s, path = "${{work}}/nan", save_mode = upsert }} }}"""
    try:
        ran = run_job_text(job, timeout_s=300)
        assert ran.result.status == "FAILED", ran.result
        assert "[DATA.NOT_REPRESENTABLE]" in ran.result.error, ran.result.error
        assert "postgres.public.nan_t, column amount" in ran.result.error and "{'id': '2'} holds NaN" in ran.result.error
    finally:
        pg.execute("SELECT pg_drop_replication_slot('pgnan') FROM pg_replication_slots WHERE slot_name = 'pgnan'")
        pg.execute("DROP PUBLICATION IF EXISTS pgnan")
        pg.execute("DROP TABLE public.nan_t")
