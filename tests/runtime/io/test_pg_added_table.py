"""A table added to a Postgres-CDC job's table-names after its checkpoint began, against a real PostgreSQL.

PostgreSQL decodes a change for a publication only if the table was in it when
the change was made, so the changes the new table saw before the job's restart
are in no log the job can read: only a snapshot of the table brings them.
Before this was handled the restarted job neither added the table to its
publication (none of its changes arrived, ever) nor read it (its rows before
the restart never arrived): the target stayed empty, silently. Now the
restart adds the table to the publication and snapshots it (startup.mode =
initial) while the other table goes on streaming; later changes stream.

And a checkpoint read through one slot refuses a job that names another
(a new slot starts where it is created: the changes between would be lost)."""

from __future__ import annotations

import pytest

from tests.components.fixtures import postgres_db_module  # noqa: F401

SLOT = "pgadd_test"


def _job(pg, tables: list[str], slot: str = SLOT) -> str:
    names = ", ".join(f'"postgres.added.{t}"' for t in tables)
    return f"""env {{ job.name = pgadd, job.mode = BATCH }}
source {{ Postgres-CDC {{ plugin_output = s, base-url = "jdbc:postgresql://{pg.host}:{pg.port}/postgres",
  username = postgres, table-names = [{names}], startup.mode = initial, slot.name = {slot},
  snapshot.split.size = 16, snapshot.chunks.per.epoch = 2 }} }}
sink {{ Delta {{ plugin_input = s, path = "${{work}}/out/${{table_name}}", save_mode = upsert }} }}"""


def _same(spark, pg, work, table: str) -> list[tuple]:
    want = sorted(tuple(r) for r in pg.execute(f"SELECT id, v FROM added.{table}"))
    got = sorted(tuple(r) for r in spark.read.format("delta").load(str(work / "out" / table)).select("id", "v").collect())
    assert got == want, f"{table}: {len(got)} rows in Delta, {len(want)} in PostgreSQL"
    return got


@pytest.mark.timeout(900)
def test_a_table_added_to_the_job_is_snapshotted_and_then_streamed(spark, run_job_text, postgres_db_module):
    pg = postgres_db_module
    pg.execute("""CREATE SCHEMA added;
CREATE TABLE added.a (id int PRIMARY KEY, v text); ALTER TABLE added.a REPLICA IDENTITY FULL;
CREATE TABLE added.b (id int PRIMARY KEY, v text); ALTER TABLE added.b REPLICA IDENTITY FULL;
INSERT INTO added.a SELECT i, 'a' || i FROM generate_series(1, 50) i;
INSERT INTO added.b SELECT i, 'b' || i FROM generate_series(1, 40) i;""")
    try:
        first = run_job_text(_job(pg, ["a"]), timeout_s=300)
        assert first.result.status == "FINISHED", first.result.error
        _same(spark, pg, first.work, "a")
        assert not (first.work / "out" / "b").exists()

        # b changes while it is not the job's: none of this is in the log the job reads
        pg.execute("""UPDATE added.a SET v = 'a2-' || id WHERE id % 3 = 0;
UPDATE added.b SET v = 'b2-' || id WHERE id % 2 = 0; DELETE FROM added.b WHERE id > 35;
INSERT INTO added.b SELECT i, 'b-new' || i FROM generate_series(100, 120) i;""")
        second = run_job_text(_job(pg, ["a", "b"]), timeout_s=300)
        assert second.result.status == "FINISHED", second.result.error
        _same(spark, pg, second.work, "a")
        assert len(_same(spark, pg, second.work, "b")) == 35 + 21
        published = {r[0] for r in pg.execute("SELECT tablename FROM pg_publication_tables WHERE pubname = %s", (SLOT,))}
        assert published == {"a", "b"}

        # from now on b streams like a
        pg.execute("""UPDATE added.b SET v = 'b3' WHERE id < 10; DELETE FROM added.b WHERE id = 100;
INSERT INTO added.a VALUES (51, 'a51');""")
        third = run_job_text(_job(pg, ["a", "b"]), timeout_s=300)
        assert third.result.status == "FINISHED", third.result.error
        _same(spark, pg, third.work, "a")
        _same(spark, pg, third.work, "b")

        # the same checkpoint under another slot: refused, naming both; no slot is made for it
        other = run_job_text(_job(pg, ["a", "b"], slot="pgadd_other"), timeout_s=300)
        assert other.result.status == "FAILED"
        assert "'pgadd_test'" in other.result.error and "slot.name = 'pgadd_other'" in other.result.error, other.result.error
        assert not pg.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'pgadd_other'")
    finally:
        for slot in (SLOT, "pgadd_other"):
            pg.execute("SELECT pg_drop_replication_slot(%s) FROM pg_replication_slots WHERE slot_name = %s", (slot, slot))
            pg.execute(f"DROP PUBLICATION IF EXISTS {slot}")
        pg.execute("DROP SCHEMA added CASCADE")
