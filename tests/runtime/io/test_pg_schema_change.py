"""Postgres-CDC: a table's columns change while the job runs (schema.change.behavior), real PostgreSQL 15.

lenient (the default): a writer changes two tables the whole time; while the
job streams, ``evo.a`` gets a new column (filled by the writer from then on)
and ``evo.b`` loses one. The run (``job.retry.times = 0``: a restart of the
strategy would fail it) plans its pipeline again once, without ending: the
Delta tables of ``a`` gain the column, every row written around the change
keeps its values (the upsert target equals PostgreSQL, the change log
telescopes to it), ``b``'s dropped column stays in Delta, null in the rows
changed after the drop. A RENAME is both: the old name stays (null from then on), the new
name is added (Flink CDC's lenient).

exception and ignore: the job fails naming the table and the column, and
what it committed before stays; ignore goes on with the planned columns.
"""

from __future__ import annotations

import threading
import time
import pytest

from tests.components.fixtures import postgres_db_module  # noqa: F401
from tests.runtime.io.pg_helpers import assert_telescopes, connect as _connect, drop_slot as _drop, slot_past as _slot_past

SLOT = "pgevo_test"

TABLES = """
CREATE SCHEMA evo;
CREATE TABLE evo.a (id int PRIMARY KEY, v text);
CREATE TABLE evo.b (id int PRIMARY KEY, n int, gone text);
ALTER TABLE evo.a REPLICA IDENTITY FULL;
ALTER TABLE evo.b REPLICA IDENTITY FULL;
INSERT INTO evo.a SELECT i, 'a' || i FROM generate_series(1, 200) i;
INSERT INTO evo.b SELECT i, i, 'g' || i FROM generate_series(1, 200) i;
"""

JOB = """
env {{ job.name = pgevo, job.mode = STREAMING, checkpoint.interval = 200 }}
source {{
  Postgres-CDC {{
    plugin_output = pg
    base-url = "jdbc:postgresql://{host}:{port}/postgres"
    username = postgres
    table-names = [{tables}]
    slot.name = {slot}
    {extra}
  }}
}}
transform {{ RowKindExtractor {{ plugin_input = pg, plugin_output = kinds }} }}
sink {{
  Delta {{ plugin_input = pg, path = "${{work}}/state/${{table_name}}", save_mode = upsert }}
  Delta {{ plugin_input = kinds, path = "${{work}}/log/${{table_name}}" }}
}}
"""


def _run_until_read(run_job_text, job: str, pg, slot: str):
    """Run ``job`` until the slot is past every change made so far, then stop it."""
    c = _connect(pg).cursor()
    c.execute("SELECT pg_current_wal_insert_lsn()::text")
    last = c.fetchone()[0]
    stop = threading.Event()

    def stopper() -> None:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and not _slot_past(c, slot, last):
            time.sleep(0.3)
        stop.set()

    t = threading.Thread(target=stopper, daemon=True)
    t.start()
    ran = run_job_text(job, stop=stop, timeout_s=200)
    t.join()
    return ran


def _committed(work) -> int:
    """Epochs the job's query committed so far (its checkpoint's commit files)."""
    return sum(1 for p in (work / "checkpoints").rglob("commits/*") if p.name.isdigit())


def _run_changing(run_job_text, job: str, pg, slot: str, work, statements: list[str]):
    """Run ``job``; once its snapshot is in (two epochs), make ``statements`` in PostgreSQL; stop the job once
    the slot is past them. Returns the run; asserts the slot got there."""
    stop, state = threading.Event(), {}

    def conductor() -> None:
        c = _connect(pg).cursor()
        deadline = time.monotonic() + 150
        while _committed(work) < 2 and time.monotonic() < deadline:  # the snapshot is in
            time.sleep(0.2)
        for statement in statements:
            c.execute(statement)
        c.execute("SELECT pg_current_wal_insert_lsn()::text")
        last = c.fetchone()[0]
        while time.monotonic() < deadline and not _slot_past(c, slot, last):
            time.sleep(0.3)
        state["advanced"] = _slot_past(c, slot, last)
        stop.set()

    t = threading.Thread(target=conductor, daemon=True)
    t.start()
    ran = run_job_text(job, stop=stop, timeout_s=300)
    stop.set()
    t.join()
    assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
    assert state.get("advanced"), "the slot never passed the last change"
    return ran


@pytest.mark.timeout(600)
def test_a_column_added_while_the_job_runs_reaches_delta_without_a_restart_and_no_row_loses_a_value(
        spark, run_job_text, postgres_db_module, tmp_path):
    from streaming_engine.runtime.events import PipelineFailed, PipelineReplanned

    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute(TABLES)
    job = JOB.format(host=pg.host, port=pg.port, slot=SLOT, tables='"postgres.evo.a", "postgres.evo.b"', extra="")
    state = {"step": 0, "altered": False}
    stop_writer, stopper, turn = threading.Event(), threading.Event(), threading.Lock()

    def writer() -> None:
        w = _connect(pg).cursor()
        while not stop_writer.is_set():
            with turn:
                _round(w)
            time.sleep(0.02)
        w.connection.close()

    def _round(w) -> None:
        state["step"] += 1
        s = state["step"]
        if state["altered"]:
            w.execute("UPDATE evo.a SET v = %s, extra = %s WHERE id = %s", (f"u{s}", f"x{s}", s % 200 + 1))
            w.execute("INSERT INTO evo.a (id, v, extra) VALUES (%s, 'n', %s)", (1000 + s, f"y{s}"))
            w.execute("UPDATE evo.b SET n = n + 1 WHERE id = %s", (s % 100 + 1,))  # 101-200 keep their value
        else:
            w.execute("UPDATE evo.a SET v = %s WHERE id = %s", (f"u{s}", s % 200 + 1))
            w.execute("INSERT INTO evo.a (id, v) VALUES (%s, 'n')", (1000 + s,))
            w.execute("UPDATE evo.b SET n = n + 1, gone = %s WHERE id = %s", (f"h{s}", s % 200 + 1))
        w.execute("DELETE FROM evo.b WHERE id = %s", (300 + s,))
        w.execute("INSERT INTO evo.b (id, n) VALUES (%s, 0)", (300 + s + 1,))

    def conductor() -> None:
        c = _connect(pg).cursor()
        t = threading.Thread(target=writer, daemon=True)
        deadline = time.monotonic() + 200
        while _committed(tmp_path) < 3 and time.monotonic() < deadline:  # the snapshot is in, changes stream
            time.sleep(0.2)
        t.start()
        time.sleep(2.0)
        # both changes in one transaction with the writer's rows around them: the writer's next statements
        # (a separate connection) fill the new column; b's dropped column is null from then on
        with turn:
            c.execute("BEGIN; ALTER TABLE evo.a ADD COLUMN extra text; ALTER TABLE evo.b DROP COLUMN gone; COMMIT")
            state["altered"] = state["step"]
        time.sleep(4.0)
        stop_writer.set()
        t.join()
        c.execute("SELECT pg_current_wal_insert_lsn()::text")
        last = c.fetchone()[0]
        while time.monotonic() < deadline + 120 and not _slot_past(c, SLOT, last):
            time.sleep(0.3)
        state["advanced"] = _slot_past(c, SLOT, last)
        stopper.set()

    try:
        f = threading.Thread(target=conductor, daemon=True)
        f.start()
        ran = run_job_text(job, stop=stopper, timeout_s=400)
        f.join()
        assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
        assert state.get("advanced"), "the slot never passed the writer's last commit"
        assert state["step"] > 50, state
        replans = [e for e in ran.events if isinstance(e, PipelineReplanned)]
        assert [e.columns for e in replans] == [("postgres.evo.a.extra",)], replans
        assert not [e for e in ran.events if isinstance(e, PipelineFailed)], "a schema change is not a failure"

        cur.execute("SELECT id, v, extra FROM evo.a")
        want_a = sorted(tuple(r) for r in cur.fetchall())
        assert sum(1 for r in want_a if r[2] is not None) > 20 and sum(1 for r in want_a if r[2] is None) > 20
        got_a = spark.read.format("delta").load(str(tmp_path / "state" / "a"))
        assert got_a.columns == ["id", "v", "extra"]
        assert sorted(tuple(r) for r in got_a.collect()) == want_a, "the upsert target of a differs from PostgreSQL"
        log_a = spark.read.format("delta").load(str(tmp_path / "log" / "a"))
        assert_telescopes(log_a.select("row_kind", "id", "v", "extra").collect(), want_a)

        cur.execute("SELECT id, n FROM evo.b")
        want_b = sorted(tuple(r) for r in cur.fetchall())
        got_b = spark.read.format("delta").load(str(tmp_path / "state" / "b"))
        assert "gone" in got_b.columns, "lenient keeps a dropped column"
        assert sorted(tuple(r) for r in got_b.select("id", "n").collect()) == want_b
        # rows the writer changed after the drop: null; rows it did not: their value from before the drop
        gone = {r["id"]: r["gone"] for r in got_b.collect()}
        after = {s % 100 + 1 for s in range(state["altered"] + 1, state["step"] + 1)}
        assert after and all(gone[i] is None for i in after), sorted(i for i in after if gone[i] is not None)[:5]
        assert all(gone[i] is not None and gone[i][0] in "gh" for i in range(101, 201)), "a value from before the drop lost"
        assert gone[300 + state["step"] + 1] is None
    finally:
        stop_writer.set()
        stopper.set()
        _drop(cur, SLOT)
        cur.execute("DROP SCHEMA evo CASCADE")
        conn.close()


@pytest.mark.timeout(400)
def test_exception_fails_naming_the_change_and_keeps_what_was_committed_and_ignore_goes_on(
        spark, run_job_text, postgres_db_module, tmp_path):
    from streaming_engine.runtime.events import PipelineReplanned

    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA evx; CREATE TABLE evx.s (id int PRIMARY KEY, v text); "
                "ALTER TABLE evx.s REPLICA IDENTITY FULL; INSERT INTO evx.s VALUES (1, 'a'), (2, 'b')")
    slot = "pgevx_test"
    try:
        for behavior, new_id in (("exception", 10), ("ignore", 11)):
            job = JOB.format(host=pg.host, port=pg.port, slot=slot, tables='"postgres.evx.s"',
                             extra=f"schema.change.behavior = {behavior}").replace("pgevo", f"pgevx_{behavior}")
            job = job.replace("/state/", f"/state_{behavior}/").replace("/log/", f"/log_{behavior}/")
            stop = threading.Event()

            def conductor() -> None:
                c = _connect(pg).cursor()
                deadline = time.monotonic() + 150
                while _committed(tmp_path) < 2 and time.monotonic() < deadline:  # the snapshot is in
                    time.sleep(0.2)
                c.execute(f"ALTER TABLE evx.s ADD COLUMN c_{behavior} int")
                c.execute(f"INSERT INTO evx.s (id, v, c_{behavior}) VALUES (%s, 'c', 7)", (new_id,))
                c.execute("SELECT pg_current_wal_insert_lsn()::text")
                last = c.fetchone()[0]
                while time.monotonic() < deadline and not _slot_past(c, slot, last) and not stop.is_set():
                    time.sleep(0.3)
                stop.set()

            t = threading.Thread(target=conductor, daemon=True)
            t.start()
            ran = run_job_text(job, stop=stop, timeout_s=200)
            stop.set()
            t.join()
            got = spark.read.format("delta").load(str(tmp_path / f"state_{behavior}" / "s"))
            assert not [e for e in ran.events if isinstance(e, PipelineReplanned)]
            if behavior == "exception":
                assert ran.result.status == "FAILED", ran.result
                assert "[SCHEMA.CHANGED]" in ran.result.error and "postgres.evx.s" in ran.result.error, ran.result.error
                assert "added: c_exception" in ran.result.error and "schema.change.behavior" in ran.result.error
                assert sorted(tuple(r) for r in got.collect()) == [(1, "a"), (2, "b")], "what was committed stays"
                _drop(cur, slot)
                cur.execute("ALTER TABLE evx.s DROP COLUMN c_exception")
                (tmp_path / "checkpoints").rename(tmp_path / "checkpoints_exception")  # _committed counts the next
            else:
                assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
                assert got.columns == ["id", "v"]
                assert sorted(tuple(r) for r in got.collect()) == [(1, "a"), (2, "b"), (10, "c"), (11, "c")]
    finally:
        _drop(cur, slot)
        cur.execute("DROP SCHEMA evx CASCADE")
        conn.close()


@pytest.mark.timeout(400)
def test_a_restart_plans_a_column_added_while_stopped_and_older_changes_read_after_it_are_no_change(
        spark, run_job_text, postgres_db_module, tmp_path):
    """Under ``exception``: changes from before the ADD COLUMN, read by the run that planned the column,
    carry the table's older columns; they are not a schema change (the plan's WAL position says so)."""
    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA evr; CREATE TABLE evr.s (id int PRIMARY KEY, v text); "
                "ALTER TABLE evr.s REPLICA IDENTITY FULL; INSERT INTO evr.s VALUES (1, 'a'), (2, 'b')")
    slot = "pgevr_test"
    job = JOB.format(host=pg.host, port=pg.port, slot=slot, tables='"postgres.evr.s"',
                     extra="schema.change.behavior = exception").replace("pgevo", "pgevr")
    try:
        first = run_job_text(job, stop_after_epochs=2, timeout_s=200)
        assert first.result.status in ("FINISHED", "CANCELED"), first.result.error
        cur.execute("INSERT INTO evr.s VALUES (3, 'old')")
        cur.execute("ALTER TABLE evr.s ADD COLUMN c int")
        cur.execute("INSERT INTO evr.s VALUES (4, 'new', 7)")
        cur.execute("UPDATE evr.s SET c = 8 WHERE id = 1")
        ran = _run_until_read(run_job_text, job, pg, slot)
        assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
        got = spark.read.format("delta").load(str(tmp_path / "state" / "s"))
        assert got.columns == ["id", "v", "c"]
        assert sorted(tuple(r) for r in got.collect()) == [(1, "a", 8), (2, "b", None), (3, "old", None), (4, "new", 7)]
    finally:
        _drop(cur, slot)
        cur.execute("DROP SCHEMA evr CASCADE")
        conn.close()


@pytest.mark.timeout(400)
def test_a_restart_after_a_lenient_drop_writes_the_tables_that_keep_the_column(
        spark, run_job_text, postgres_db_module, tmp_path):
    """lenient keeps a dropped column in Delta. A run planned after the DROP no longer reads the column
    (the catalog has it no more), while both Delta tables still hold it: the run writes them as the
    running job would have, the column null in every row changed after the drop, older rows untouched."""
    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA evd; CREATE TABLE evd.s (id int PRIMARY KEY, v text, gone text); "
                "ALTER TABLE evd.s REPLICA IDENTITY FULL; INSERT INTO evd.s VALUES (1, 'a', 'g1'), (2, 'b', 'g2')")
    slot = "pgevd_test"
    job = JOB.format(host=pg.host, port=pg.port, slot=slot, tables='"postgres.evd.s"', extra="").replace("pgevo", "pgevd")
    try:
        first = run_job_text(job, stop_after_epochs=2, timeout_s=200)
        assert first.result.status in ("FINISHED", "CANCELED"), first.result.error
        cur.execute("ALTER TABLE evd.s DROP COLUMN gone")
        cur.execute("INSERT INTO evd.s VALUES (3, 'c')")
        cur.execute("UPDATE evd.s SET v = 'a2' WHERE id = 1")
        ran = _run_until_read(run_job_text, job, pg, slot)
        assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
        from streaming_engine.runtime.events import JobStarted

        (started,) = [e for e in ran.events if isinstance(e, JobStarted)]  # the plans explain shows: with gone
        assert '"gone"' in started.plans
        state = spark.read.format("delta").load(str(tmp_path / "state" / "s"))
        assert state.columns == ["id", "v", "gone"]
        assert sorted(tuple(r) for r in state.collect()) == [(1, "a2", None), (2, "b", "g2"), (3, "c", None)]
        log = spark.read.format("delta").load(str(tmp_path / "log" / "s"))
        assert sorted(tuple(r) for r in log.select("row_kind", "id", "v", "gone").collect()) == sorted([
            ("+I", 1, "a", "g1"), ("+I", 2, "b", "g2"), ("+I", 3, "c", None), ("-U", 1, "a", None),
            ("+U", 1, "a2", None)])
    finally:
        _drop(cur, slot)
        cur.execute("DROP SCHEMA evd CASCADE")
        conn.close()


@pytest.mark.timeout(400)
def test_a_column_widened_while_the_job_runs_is_widened_in_delta_and_no_value_is_lost(
        spark, run_job_text, postgres_db_module, tmp_path):
    """lenient: ALTER COLUMN ... TYPE to a wider type (int -> bigint, numeric(10,2) -> numeric(14,4)) while the
    job streams: the pipeline is planned again for the new types, both Delta tables' columns are widened
    (Delta's type widening), and rows changed before and after the change, with values only the new types
    hold, equal PostgreSQL's."""
    from streaming_engine.runtime.events import PipelineFailed, PipelineReplanned

    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA evw; CREATE TABLE evw.s (id int PRIMARY KEY, n int, d numeric(10,2)); "
                "ALTER TABLE evw.s REPLICA IDENTITY FULL; "
                "INSERT INTO evw.s SELECT i, i, i / 4.0 FROM generate_series(1, 50) i")
    slot = "pgevw_test"
    job = JOB.format(host=pg.host, port=pg.port, slot=slot, tables='"postgres.evw.s"', extra="").replace("pgevo", "pgevw")
    try:
        ran = _run_changing(run_job_text, job, pg, slot, tmp_path, [
            "UPDATE evw.s SET n = n + 1 WHERE id <= 10",
            "BEGIN; ALTER TABLE evw.s ALTER COLUMN n TYPE bigint, ALTER COLUMN d TYPE numeric(14,4); COMMIT",
            "INSERT INTO evw.s VALUES (100, 1099511627776, 1234567890.1234)",
            "UPDATE evw.s SET n = n + 8589934592, d = d + 0.0001 WHERE id BETWEEN 11 AND 20",
            "DELETE FROM evw.s WHERE id = 30"])
        assert not [e for e in ran.events if isinstance(e, PipelineFailed)], "a widening is not a failure"
        replans = [e for e in ran.events if isinstance(e, PipelineReplanned)]
        assert [e.columns for e in replans] == [
            ("postgres.evw.s.n (int -> bigint)", "postgres.evw.s.d (decimal(10,2) -> decimal(14,4))")]
        # the plans explain shows from then on (the REST API's job view, a savepoint's record)
        assert "decimal(14,4)" in replans[0].plans and "decimal(10,2)" not in replans[0].plans
        cur.execute("SELECT id, n, d FROM evw.s")
        want = sorted(tuple(r) for r in cur.fetchall())
        got = spark.read.format("delta").load(str(tmp_path / "state" / "s"))
        assert dict(got.dtypes) == {"id": "int", "n": "bigint", "d": "decimal(14,4)"}
        assert sorted(tuple(r) for r in got.collect()) == want, "the upsert target differs from PostgreSQL"
        log = spark.read.format("delta").load(str(tmp_path / "log" / "s"))
        assert dict(log.dtypes)["n"] == "bigint" and dict(log.dtypes)["d"] == "decimal(14,4)"
        assert_telescopes(log.select("row_kind", "id", "n", "d").collect(), want)
    finally:
        _drop(cur, slot)
        cur.execute("DROP SCHEMA evw CASCADE")
        conn.close()


@pytest.mark.timeout(400)
def test_a_column_renamed_while_the_job_runs_is_kept_under_its_old_name_and_added_under_the_new(
        spark, run_job_text, postgres_db_module, tmp_path):
    """lenient, as Flink CDC's lenient mode takes a rename: the column under its old name stays in Delta (never
    dropped), the new name is added (the pipeline planned again, without a restart); rows changed after the
    RENAME carry their value under the new name, null under the old; rows not changed since keep the old."""
    from streaming_engine.runtime.events import PipelineFailed, PipelineReplanned

    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA evn; CREATE TABLE evn.s (id int PRIMARY KEY, v text, old text); "
                "ALTER TABLE evn.s REPLICA IDENTITY FULL; "
                "INSERT INTO evn.s SELECT i, 'v' || i, 'o' || i FROM generate_series(1, 20) i")
    slot = "pgevn_test"
    job = JOB.format(host=pg.host, port=pg.port, slot=slot, tables='"postgres.evn.s"', extra="").replace("pgevo", "pgevn")
    try:
        ran = _run_changing(run_job_text, job, pg, slot, tmp_path, [
            "UPDATE evn.s SET old = 'o1b' WHERE id = 1",  # before the rename: under the old name
            "ALTER TABLE evn.s RENAME COLUMN old TO new",
            "UPDATE evn.s SET v = 'v2b' WHERE id = 2",  # not the renamed column: its value moves too
            "UPDATE evn.s SET new = 'n3' WHERE id = 3",
            "INSERT INTO evn.s VALUES (21, 'v21', 'n21')",
            "DELETE FROM evn.s WHERE id = 4"])
        assert not [e for e in ran.events if isinstance(e, PipelineFailed)], "a rename under lenient is not a failure"
        replans = [e for e in ran.events if isinstance(e, PipelineReplanned)]
        assert [e.columns for e in replans] == [("postgres.evn.s.new",)], [e.columns for e in replans]
        want = {i: ("v" + str(i), "o" + str(i), None) for i in range(1, 21)}
        want.update({1: ("v1", "o1b", None), 2: ("v2b", None, "o2"), 3: ("v3", None, "n3"), 21: ("v21", None, "n21")})
        del want[4]
        got = spark.read.format("delta").load(str(tmp_path / "state" / "s"))
        assert got.columns == ["id", "v", "old", "new"]
        assert {r[0]: tuple(r[1:]) for r in got.collect()} == want
        cur.execute("SELECT id, v, new FROM evn.s")  # PostgreSQL's values, each under one of the two names
        assert sorted(cur.fetchall()) == sorted((i, v, new if new is not None else old) for i, (v, old, new) in want.items())
        log = spark.read.format("delta").load(str(tmp_path / "log" / "s"))
        assert sorted(tuple(r) for r in log.where("id IN (2, 3, 21)").select("row_kind", "id", "v", "old", "new")
                      .collect()) == sorted([("+I", 2, "v2", "o2", None), ("+I", 3, "v3", "o3", None),
                                             ("-U", 2, "v2", None, "o2"), ("+U", 2, "v2b", None, "o2"),
                                             ("-U", 3, "v3", None, "o3"), ("+U", 3, "v3", None, "n3"),
                                             ("+I", 21, "v21", None, "n21")])
    finally:
        _drop(cur, slot)
        cur.execute("DROP SCHEMA evn CASCADE")
        conn.close()


@pytest.mark.timeout(400)
def test_a_restart_whose_last_plan_no_longer_fits_a_transform_fails_through_the_master_naming_both(
        spark, run_job_text, postgres_db_module, tmp_path):
    """The run before kept a column dropped since (lenient); the job was then edited to add a column of that
    name in a Sql transform. The fresh plan fits (the catalog lacks the column), the plan the checkpoint
    holds does not: the master's run ends FAILED naming the transform and the column, its pipeline CANCELED,
    and nothing more is written."""
    from streaming_engine.control.master import JobMaster
    from streaming_engine.job import compile_text

    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA evf; CREATE TABLE evf.s (id int PRIMARY KEY, v text, gone text); "
                "ALTER TABLE evf.s REPLICA IDENTITY FULL; INSERT INTO evf.s VALUES (1, 'a', 'g1')")
    slot = "pgevf_test"
    job = f"""
env {{ job.name = pgevf, job.mode = STREAMING, checkpoint.interval = 200 }}
source {{ Postgres-CDC {{ plugin_output = pg, base-url = "jdbc:postgresql://{pg.host}:{pg.port}/postgres",
  username = postgres, table-names = ["postgres.evf.s"], slot.name = {slot} }} }}
transform {{ Sql {{ plugin_input = pg, plugin_output = q, query = "select * from pg" }} }}
sink {{ Delta {{ plugin_input = q, path = "${{work}}/state/${{table_name}}", save_mode = upsert }} }}
"""
    try:
        first = run_job_text(job, stop_after_epochs=2, timeout_s=200)
        assert first.result.status in ("FINISHED", "CANCELED"), first.result.error
        cur.execute("ALTER TABLE evf.s DROP COLUMN gone")
        cur.execute("INSERT INTO evf.s VALUES (2, 'b')")
        edited = job.replace('query = "select * from pg"', "query = \"select *, 'x' as gone from pg\"")
        compiled = compile_text(edited, variables={"work": str(tmp_path)}, file="job.conf")  # the fresh plan fits
        master = JobMaster(compiled)
        result = master.run(spark=spark, timeout_s=200)
        assert result.status == "FAILED", result
        assert "Sql" in result.error and "column 'gone' would appear twice" in result.error, result.error
        assert master.state.state.value == "FAILED"
        assert [m.state.value for m in master.pipelines.values()] == ["CANCELED"]
        state = spark.read.format("delta").load(str(tmp_path / "state" / "s"))
        assert sorted(tuple(r) for r in state.collect()) == [(1, "a", "g1")], "nothing more is written"
    finally:
        _drop(cur, slot)
        cur.execute("DROP SCHEMA evf CASCADE")
        conn.close()


@pytest.mark.timeout(500)
def test_evolve_renames_and_drops_columns_in_delta_by_column_mapping_and_a_restart_goes_on_from_there(
        spark, run_job_text, postgres_db_module, tmp_path):
    """evolve: a RENAME (in one transaction with changes before and after it: the epoch holding them is read
    again after the plan changes, the changes from before the rename naming the column by its old name), a
    DROP and an ADD while the job streams. Both Delta tables (the upsert target and the change log) get the
    catalog's columns exactly, by column mapping (said in explain), and every value of PostgreSQL: the
    renamed column keeps the values written before the rename. A second run (the plan as the first left it,
    from the checkpoint) goes on without planning again."""
    from streaming_engine.runtime.events import PipelineFailed, PipelineReplanned

    pg = postgres_db_module
    conn = _connect(pg)
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA eve; CREATE TABLE eve.s (id int PRIMARY KEY, v text, old text, gone text); "
                "ALTER TABLE eve.s REPLICA IDENTITY FULL; "
                "INSERT INTO eve.s SELECT i, 'v' || i, 'o' || i, 'g' || i FROM generate_series(1, 60) i")
    slot = "pgeve_test"
    job = JOB.format(host=pg.host, port=pg.port, slot=slot, tables='"postgres.eve.s"',
                     extra="schema.change.behavior = evolve").replace("pgevo", "pgeve")

    def check(ran) -> None:
        cur.execute("SELECT id, v, new, extra FROM eve.s")
        want = sorted(tuple(r) for r in cur.fetchall())
        for kind in ("state", "log"):
            got = spark.read.format("delta").load(str(tmp_path / kind / "s"))
            props = dict(spark.sql(f"SHOW TBLPROPERTIES delta.`{tmp_path / kind / 's'}`").collect())
            assert props.get("delta.columnMapping.mode") == "name", (kind, props)
            assert [c for c in got.columns if c != "row_kind"] == ["id", "v", "new", "extra"], (kind, got.columns)
            if kind == "state":
                assert sorted(tuple(r) for r in got.collect()) == want, "the upsert target differs from PostgreSQL"
            else:
                assert_telescopes(got.select("row_kind", "id", "v", "new", "extra").collect(), want, "log")

    try:
        ran = _run_changing(run_job_text, job, pg, slot, tmp_path, [
            "BEGIN; UPDATE eve.s SET old = 'o-before' WHERE id <= 10; ALTER TABLE eve.s RENAME COLUMN old TO new; "
            "UPDATE eve.s SET new = 'n-after' WHERE id > 50; COMMIT",
            "ALTER TABLE eve.s DROP COLUMN gone",
            "UPDATE eve.s SET v = 'after-drop' WHERE id % 10 = 0",
            "ALTER TABLE eve.s ADD COLUMN extra int",
            "UPDATE eve.s SET extra = id WHERE id % 7 = 0",
            "INSERT INTO eve.s VALUES (100, 'v100', 'n100', 100)",
            "DELETE FROM eve.s WHERE id = 3"])
        assert not [e for e in ran.events if isinstance(e, PipelineFailed)], "a schema change is not a failure"
        changed = {c for e in ran.events if isinstance(e, PipelineReplanned) for c in e.columns}
        assert {"postgres.eve.s.new (renamed from old)", "postgres.eve.s.gone (dropped)",
                "postgres.eve.s.extra"} <= changed, changed
        from streaming_engine.job import compile_text
        from streaming_engine.plan.render import to_text

        explained = to_text(compile_text(job, variables={"work": str(tmp_path)}, file="job.conf"))
        assert explained.count("evolve: column mapping, delta.columnMapping.mode = name") == 2, explained
        assert "renames and drops reach the sinks" in explained
        check(ran)
        state = {r["id"]: r for r in spark.read.format("delta").load(str(tmp_path / "state" / "s")).collect()}
        assert state[1]["new"] == "o-before" and state[55]["new"] == "n-after" and state[20]["new"] == "o20"

        cur.execute("UPDATE eve.s SET new = 'second-run', extra = -1 WHERE id = 1")
        cur.execute("INSERT INTO eve.s VALUES (101, 'v101', 'n101', 101)")
        again = _run_until_read(run_job_text, job, pg, slot)
        assert again.result.status in ("FINISHED", "CANCELED"), again.result.error
        assert not [e for e in again.events if isinstance(e, (PipelineReplanned, PipelineFailed))]
        check(again)
    finally:
        _drop(cur, slot)
        cur.execute("DROP SCHEMA eve CASCADE")
        conn.close()
