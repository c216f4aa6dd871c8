"""Postgres-CDC timestamps read under a Spark session whose time zone is not UTC, against a real PostgreSQL.

A ``timestamp without time zone`` has no offset in PostgreSQL's text; Spark's
cast reads such text in the session's time zone, so before this was handled
the snapshot and the stream of a job whose session ran in
America/Los_Angeles (``spark.sql.session.timeZone`` in its env) stored 12:00 as 20:00 UTC (while Debezium's
MicroTimestamp, and so the Kafka source's debezium_json, reads it as UTC). Now
both read it as UTC, from the snapshot and from the slot alike, a table keyed
by one included (a chunk and a change give its key the same text: what the
snapshot compares to drop a chunk's row a later change replaced; that race
itself is not staged here).
``timestamptz`` carries its offset and was right before too. PostgreSQL's
``infinity`` fails the job naming the table, column and row."""

from __future__ import annotations

import pytest

from tests.components.fixtures import postgres_db_module  # noqa: F401

SLOT = "pgts_test"


def _job(pg, mode: str) -> str:
    return f"""env {{ job.name = pgts, job.mode = BATCH }}
source {{ Postgres-CDC {{ plugin_output = s, base-url = "jdbc:postgresql://{pg.host}:{pg.port}/postgres",
  username = postgres, table-names = ["postgres.tsz.t", "postgres.tsz.k"], startup.mode = {mode}, slot.name = {SLOT} }} }}
sink {{ Delta {{ plugin_input = s, path = "${{work}}/out/${{table_name}}", save_mode = upsert }} }}"""


def _rows(spark, work, table: str, columns: list[str]) -> list[tuple]:
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(str(work / "out" / table))
    return sorted(tuple(r) for r in df.select(
        *[F.date_format(F.col(c), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(c) if c in ("ts", "tz", "at") else F.col(c)
          for c in columns]).collect())


def _want(pg, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in pg.execute(sql))


@pytest.mark.timeout(600)
def test_timestamps_without_a_zone_are_read_as_utc_in_any_session_time_zone(spark, run_job_text, postgres_db_module):
    pg = postgres_db_module
    pg.execute("""CREATE SCHEMA tsz;
CREATE TABLE tsz.t (id int PRIMARY KEY, ts timestamp, tz timestamptz); ALTER TABLE tsz.t REPLICA IDENTITY FULL;
CREATE TABLE tsz.k (at timestamp PRIMARY KEY, v text); ALTER TABLE tsz.k REPLICA IDENTITY FULL;
INSERT INTO tsz.t VALUES (1, '2026-01-02 12:00:00.123456', '2026-01-02 12:00:00+02'), (2, NULL, NULL),
                         (3, '1970-01-01 00:00:00', '2026-07-01 00:30:00-07');
INSERT INTO tsz.k VALUES ('2026-03-29 01:30:00', 'a'), ('2026-11-01 01:30:00', 'b');""")
    # the job's sessions (SparkSession.newSession: SQL settings from the SparkConf, as env's spark.* set it when the
    # engine builds the session) run in Los Angeles; the assertions read in UTC
    live = spark.sparkContext._jsc.sc().conf()
    live.set("spark.sql.session.timeZone", "America/Los_Angeles")
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    utc = ("SELECT id, to_char(ts, 'YYYY-MM-DD HH24:MI:SS.US'), to_char(tz AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') "
           "FROM tsz.t")
    keyed = "SELECT to_char(at, 'YYYY-MM-DD HH24:MI:SS.US'), v FROM tsz.k"
    try:
        first = run_job_text(_job(pg, "initial"), timeout_s=300)  # the snapshot
        assert first.result.status == "FINISHED", first.result.error
        assert _rows(spark, first.work, "t", ["id", "ts", "tz"]) == _want(pg, utc)
        assert _rows(spark, first.work, "k", ["at", "v"]) == _want(pg, keyed)

        # the stream: inserts, an update of a timestamp key (delete + insert), an update of a keyed row
        pg.execute("""INSERT INTO tsz.t VALUES (4, '1999-12-31 23:59:59.5', '1999-12-31 23:59:59.5+00');
UPDATE tsz.t SET ts = ts + interval '1 hour' WHERE id = 1;
UPDATE tsz.k SET at = '2026-06-15 08:00:00' WHERE v = 'a'; UPDATE tsz.k SET v = 'b2' WHERE v = 'b';""")
        second = run_job_text(_job(pg, "initial"), timeout_s=300)
        assert second.result.status == "FINISHED", second.result.error
        assert _rows(spark, second.work, "t", ["id", "ts", "tz"]) == _want(pg, utc)
        assert _rows(spark, second.work, "k", ["at", "v"]) == _want(pg, keyed)

        # PostgreSQL's infinity has no Spark or Delta timestamp: the job fails naming table, column and row
        # (it failed with Spark's bare cast error before), and what was committed stays
        pg.execute("UPDATE tsz.t SET ts = 'infinity' WHERE id = 2")
        third = run_job_text(_job(pg, "initial"), timeout_s=300)
        assert third.result.status == "FAILED"
        assert "[DATA.NOT_REPRESENTABLE]" in third.result.error and "postgres.tsz.t, column ts (timestamp)" in \
            third.result.error and "{'id': '2'} holds infinity" in third.result.error, third.result.error
        assert _rows(spark, second.work, "t", ["id", "ts", "tz"])[1] == (2, None, None)
    finally:
        live.remove("spark.sql.session.timeZone")
        spark.conf.set("spark.sql.session.timeZone", before)
        pg.execute(f"SELECT pg_drop_replication_slot('{SLOT}') FROM pg_replication_slots WHERE slot_name = '{SLOT}'")
        pg.execute(f"DROP PUBLICATION IF EXISTS {SLOT}")
        pg.execute("DROP SCHEMA tsz CASCADE")
