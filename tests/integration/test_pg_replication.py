"""The pgoutput decoder and the job's slot, read by epoch, against a real PostgreSQL 15.

Part of the Postgres-CDC source (issue #30): what a change looks like on the
wire (REPLICA IDENTITY FULL and DEFAULT, unchanged TOASTed values, TRUNCATE,
a column added while the slot reads), and that epochs read from a slot that
moves only when told lose and repeat nothing: concurrent writers (some with
synchronous_commit = off), a crash between an epoch's commit and the slot's
advance, and WAL of other tables that the slot must still release.
"""

from __future__ import annotations

import threading

import psycopg2
import pytest

from sources._pg import slot as pgslot
from sources._pg.pgoutput import (
    UNCHANGED_TOAST, Change, Relation, Truncate, decode, lsn_int, lsn_text,
)
from tests.components.fixtures import postgres_db_module  # noqa: F401


@pytest.fixture
def cur(postgres_db_module):
    conn = psycopg2.connect(postgres_db_module.dsn)
    conn.autocommit = True
    c = conn.cursor()
    yield c
    c.execute("SELECT slot_name FROM pg_replication_slots")
    for (name,) in c.fetchall():
        c.execute("SELECT pg_drop_replication_slot(%s)", (name,))
    c.execute("DROP SCHEMA IF EXISTS app CASCADE")
    c.execute("SELECT pubname FROM pg_publication")
    for (name,) in c.fetchall():
        c.execute(f'DROP PUBLICATION "{name}"')
    conn.close()


def test_lsn_text_round_trip():
    assert lsn_int("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert lsn_text(lsn_int("16/B374D848")) == "16/B374D848" and lsn_text(0) == "0/0"
    with pytest.raises(ValueError, match="not an LSN"):
        lsn_int("12345")


def test_a_truncated_message_is_an_error_naming_where():
    with pytest.raises(Exception, match=r"pgoutput message at LSN 0/10: the message ends after 3 bytes"):
        decode(b"I\x00\x00", lsn=16)
    with pytest.raises(Exception, match="unknown message type 'S'"):
        decode(b"S\x00\x00\x00\x01")


def _changes(cur, name, after, upto):
    return list(pgslot.transactions(cur, name, name, after, upto))


def test_what_a_change_looks_like_on_the_wire(cur):
    cur.execute("CREATE SCHEMA app")
    cur.execute("CREATE TABLE app.full_t (id int PRIMARY KEY, v text, doc text)")
    cur.execute("ALTER TABLE app.full_t REPLICA IDENTITY FULL")
    cur.execute("CREATE TABLE app.key_t (id int PRIMARY KEY, v text, doc text)")
    cur.execute("ALTER TABLE app.full_t ALTER COLUMN doc SET STORAGE EXTERNAL")  # TOASTed, uncompressed
    cur.execute("ALTER TABLE app.key_t ALTER COLUMN doc SET STORAGE EXTERNAL")
    assert pgslot.ensure_publication(cur, "wire", ["app.full_t", "app.key_t"]) == ["app.full_t", "app.key_t"]
    start = pgslot.ensure_slot(cur, "wire")
    big = "x" * 20000  # over the TOAST threshold
    for t in ("full_t", "key_t"):
        cur.execute(f"INSERT INTO app.{t} VALUES (1, 'a', %s), (2, NULL, 'small')", (big,))
        cur.execute(f"UPDATE app.{t} SET v = 'b' WHERE id = 1")  # doc unchanged: not sent under DEFAULT
        cur.execute(f"UPDATE app.{t} SET id = 3 WHERE id = 2")  # a key change
        cur.execute(f"DELETE FROM app.{t} WHERE id = 3")
    cur.execute("TRUNCATE app.key_t")
    cur.execute("ALTER TABLE app.key_t ADD COLUMN extra int")
    cur.execute("INSERT INTO app.key_t VALUES (9, 'z', NULL, 42)")
    end = pgslot.epoch_end(cur)
    txs = _changes(cur, "wire", start, end)
    assert [t.commit.end_lsn for t in txs] == sorted(t.commit.end_lsn for t in txs)
    messages = [m for t in txs for m in t.messages]
    relations = {m.oid: m for m in messages if isinstance(m, Relation)}
    by_name = {r.name: r for r in relations.values()}
    assert by_name["full_t"].replica_identity == "f" and by_name["key_t"].replica_identity == "d"
    # "key" is the replica identity: every column under FULL, the primary key under DEFAULT
    assert [(c.name, c.key, c.type_oid) for c in by_name["full_t"].columns] == [
        ("id", True, 23), ("v", True, 25), ("doc", True, 25)]
    assert [(c.name, c.key) for c in by_name["key_t"].columns] == [("id", True), ("v", False), ("doc", False), ("extra", False)]
    assert by_name["full_t"].table_id == "app.full_t"

    def rows(name):
        oids = {r.oid for r in relations.values() if r.name == name}
        return [(m.kind, m.old_kind, m.old, m.new) for m in messages if isinstance(m, Change) and m.relation_oid in oids]

    assert rows("full_t") == [
        ("I", None, None, ("1", "a", big)),
        ("I", None, None, ("2", None, "small")),
        ("U", "O", ("1", "a", big), ("1", "b", UNCHANGED_TOAST)),  # FULL: the old row has the value
        ("U", "O", ("2", None, "small"), ("3", None, "small")),
        ("D", "O", ("3", None, "small"), None),
    ]
    key_rows = rows("key_t")
    assert key_rows[:5] == [
        ("I", None, None, ("1", "a", big)),
        ("I", None, None, ("2", None, "small")),
        ("U", None, None, ("1", "b", UNCHANGED_TOAST)),  # DEFAULT, key unchanged: no old row, doc not sent
        ("U", "K", ("2", None, None), ("3", None, "small")),  # key changed: the old key only
        ("D", "K", ("3", None, None), None),
    ]
    truncates = [m for m in messages if isinstance(m, Truncate)]
    assert len(truncates) == 1 and relations[truncates[0].relation_oids[0]].name == "key_t"
    # the column added while the slot reads: a new Relation message before the next change
    added = [r for r in relations.values() if r.name == "key_t" and len(r.columns) == 4]
    assert added and added[0].columns[3].name == "extra"
    assert key_rows[-1] == ("I", None, None, ("9", "z", None, "42"))


def test_epochs_lose_and_repeat_nothing(cur, postgres_db_module):
    """Writers commit while epochs are cut (a third of them with synchronous_commit = off); each epoch
    reads (after, upto] and advances the slot only after it 'committed'; the advance of the first epoch
    that read changes is lost, as in a crash after the sinks' commit. Every inserted row is read exactly once."""
    cur.execute("CREATE SCHEMA app")
    cur.execute("CREATE TABLE app.t (id int PRIMARY KEY, w int)")
    cur.execute("CREATE TABLE app.other (id serial PRIMARY KEY, pad text)")  # WAL the publication does not hold
    pgslot.ensure_publication(cur, "epochs", ["app.t"])
    after = pgslot.ensure_slot(cur, "epochs")
    stop = threading.Event()
    written: list[int] = []

    def writer(w: int) -> None:
        conn = psycopg2.connect(postgres_db_module.dsn)
        conn.autocommit = True
        c = conn.cursor()
        if w == 0:
            c.execute("SET synchronous_commit = off")
        i = 0
        while not stop.is_set() and i < 400:
            c.execute("INSERT INTO app.t VALUES (%s, %s)", (w * 100000 + i, w))
            c.execute("INSERT INTO app.other (pad) VALUES (repeat('p', 200))")
            written.append(w * 100000 + i)
            i += 1
        conn.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    seen: list[int] = []
    epochs, lost = 0, None
    try:
        while any(t.is_alive() for t in threads) or epochs < 6:
            upto = pgslot.epoch_end(cur)
            assert upto is not None and upto >= after
            read = [int(m.new[0]) for tx in _changes(cur, "epochs", after, upto) for m in tx.messages if isinstance(m, Change)]
            seen += read
            epochs += 1
            if lost is None and read:  # this epoch's advance is lost: the next peeks its changes again, skips them
                lost = epochs
            else:
                pgslot.advance(cur, "epochs", upto)
            after = upto
    finally:
        stop.set()
        for t in threads:
            t.join()
    upto = pgslot.epoch_end(cur)
    for tx in _changes(cur, "epochs", after, upto):
        seen += [int(m.new[0]) for m in tx.messages if isinstance(m, Change)]
    pgslot.advance(cur, "epochs", upto)
    assert lost is not None and epochs >= 6
    assert sorted(seen) == sorted(written) and len(seen) == len(set(seen)) == 1200
    assert pgslot.confirmed_lsn(cur, "epochs") == upto
    # the slot keeps no WAL once advanced over the other table's changes too
    assert pgslot.lag_bytes(cur, "epochs") <= 1024 * 1024
    assert _changes(cur, "epochs", upto, pgslot.epoch_end(cur)) == []


def test_an_existing_slot_of_another_kind_is_refused(cur):
    cur.execute("SELECT pg_create_logical_replication_slot('taken', 'test_decoding')")
    with pytest.raises(Exception, match="'taken' exists but is a logical slot of plugin 'test_decoding'"):
        pgslot.ensure_slot(cur, "taken")
    with pytest.raises(ValueError, match="lower-case letters"):
        pgslot.ensure_slot(cur, "Bad-Name")
    cur.execute("CREATE SCHEMA app")
    cur.execute("CREATE TABLE app.a (id int PRIMARY KEY)")
    cur.execute("CREATE TABLE app.b (id int PRIMARY KEY)")
    assert pgslot.ensure_publication(cur, "grow", ["app.a"]) == ["app.a"]
    assert pgslot.ensure_publication(cur, "grow", ["app.a", "app.b"]) == ["app.b"]  # added, never dropped
    assert pgslot.ensure_publication(cur, "grow", ["app.b"]) == []


def test_base_url_as_the_source_reads_it():
    from sources._pg.catalog import Connection

    c = Connection.from_url("jdbc:postgresql://db1:6543/shop?loggerLevel=OFF&sslmode=require&password=s3cret", "u", None)
    assert (c.host, c.port, c.database, c.password, c.params) == ("db1", 6543, "shop", "s3cret", (("sslmode", "require"),))
    assert Connection.from_url("jdbc:postgresql://db1/shop", "u", "opt").port == 5432
    assert Connection.from_url("jdbc:postgresql://db1/shop?password=url", "u", "opt").password == "opt"
    v6 = Connection.from_url("jdbc:postgresql://[fe80::1]:6543/shop", "u", None)  # IPv6, as JDBC writes it
    assert (v6.host, v6.port, v6.where()) == ("fe80::1", 6543, "[fe80::1]:6543/shop")
    assert Connection.from_url("jdbc:postgresql://[::1]/shop", "u", None).port == 5432
    for bad, says in (("postgresql://db1/shop", "must look like"), ("jdbc:postgresql://db1", "name the host and the database"),
                      ("jdbc:postgresql://db1:x/shop", "not a number"), ("jdbc:postgresql://::1:5432/shop", "in brackets"),
                      ("jdbc:postgresql://[::1/shop", r"is not \[IPv6 address\]"), ("jdbc:postgresql://[::1]:x/shop", "not a number")):
        with pytest.raises(ValueError, match=says):
            Connection.from_url(bad, "u", None)


def test_an_unreachable_database_is_a_plan_error_naming_it_never_the_password():
    from tests.components import free_port
    from streaming_engine.errors import EngineError
    from streaming_engine.job import compile_text

    port = free_port()
    job = (f'env {{ job.mode = STREAMING }}\nsource {{ Postgres-CDC {{ plugin_output = s, '
           f'base-url = "jdbc:postgresql://127.0.0.1:{port}/postgres", username = u, password = "s3cret-pw", '
           f'table-names = ["postgres.public.t"], startup.mode = latest, connect.max-retries = 1 }} }}\n'
           f'sink {{ Console {{ plugin_input = s }} }}')
    with pytest.raises(EngineError) as e:
        compile_text(job, file="job.conf")
    text = str(e.value)
    assert f"cannot connect to 127.0.0.1:{port}/postgres as 'u'" in text and "s3cret-pw" not in text


def test_schema_change_behavior_per_source_and_per_table_and_what_is_refused():
    from sources.postgres_cdc import PostgresCdcOptions

    base = {"base-url": "jdbc:postgresql://h:5432/db", "username": "u", "table-names": ["db.public.a", "db.public.b"]}
    o = PostgresCdcOptions.model_validate({**base, "schema.change.behavior": "ignore", "table-names-config": [
        {"table": "db.public.b", "schema.change.behavior": "exception"}]})
    assert o.schema_changes() == {"db.public.a": "ignore", "db.public.b": "exception"}
    assert PostgresCdcOptions.model_validate(base).schema_changes() == {"db.public.a": "lenient", "db.public.b": "lenient"}
    o = PostgresCdcOptions.model_validate({**base, "schema.change.behavior": "evolve", "table-names-config": [
        {"table": "db.public.b", "schema.change.behavior": "try_evolve"}]})
    assert o.schema_changes() == {"db.public.a": "evolve", "db.public.b": "try_evolve"}
    for bad, says in (({"schema.change.behavior": "evolves"}, "schema.change.behavior"),
                      ({"table-names-config": [{"table": "db.public.c", "schema.change.behavior": "ignore"}]},
                       "table-names does not list")):
        with pytest.raises(ValueError, match=says):
            PostgresCdcOptions.model_validate({**base, **bad})


def test_planned_again_a_lenient_table_keeps_a_dropped_column_and_adds_the_new_ones_at_the_end():
    from sources.postgres_cdc import PostgresCdc, PostgresCdcOptions
    from streaming_engine.schema import Column, Dataset, TableSchema

    o = PostgresCdcOptions.model_validate({
        "base-url": "jdbc:postgresql://h:5432/db", "username": "u", "table-names": ["db.public.a", "db.public.b"],
        "table-names-config": [{"table": "db.public.b", "schema.change.behavior": "ignore"}]})
    src = PostgresCdc(o)
    before = Dataset((TableSchema("db.public.a", (Column("id", "int", False), Column("gone", "string"), Column("v", "string")), ("id",)),
                      TableSchema("db.public.b", (Column("id", "int", False), Column("gone", "string")), ("id",))))
    src.__dict__["_dataset"] = Dataset((  # what the catalog says now (no connection needed: discovery is cached)
        TableSchema("db.public.a", (Column("id", "int", False), Column("v", "string"), Column("new", "bigint")), ("id",)),
        TableSchema("db.public.b", (Column("id", "int", False), Column("new", "bigint")), ("id",))))
    after = src.output_after(before)
    a, b = after.tables
    assert [(c.name, c.type, c.nullable) for c in a.columns] == [
        ("id", "int", False), ("gone", "string", True), ("v", "string", True), ("new", "bigint", True)]
    assert b.names == ("id", "new")  # ignore: the catalog's columns
    assert src.output() is after


def test_what_each_behavior_does_with_a_relation_whose_columns_or_types_changed():
    """``_Rows`` (what an epoch's reader makes of the slot's messages), no server needed: the Relation
    messages a table's changes come with, against the plan (columns, type oids, the plan's WAL position)."""
    from sources._pg.catalog import Connection
    from sources._pg.pgoutput import Change, Column as PgColumn, Relation
    from sources._pg.reader import Spec, _Rows
    from streaming_engine.errors import RuntimeFailure, SchemaError
    from streaming_engine.schema import Column, TableSchema

    table = TableSchema("db.s.t", (Column("id", "int", False), Column("v", "string")), ("id",))
    conn = Connection.from_url("jdbc:postgresql://h/db", "u", None)
    planned = {"db.s.t": {"id": 23, "v": 25}}

    def read(behavior: str, columns: tuple, values: tuple, lsn: int = 2000) -> list:
        rows = _Rows(Spec(conn, "s", "s", (table,), "UTC", "reject", schema_changes={"db.s.t": behavior},
                          planned_at=1000, type_oids=planned))
        rows.relations[7] = Relation(7, "s", "t", "f", tuple(PgColumn(n, o, -1, True) for n, o in columns))
        return list(rows.rows(Change("I", 7, values, None, None), lsn))

    same = (("id", 23), ("v", 25))
    assert [r[3:5] for r in read("exception", same, ("1", "a"))] == [("1", "a")]
    added = (*same, ("c", 23))
    with pytest.raises(RuntimeFailure, match=r"RUNTIME.SCHEMA_CHANGED.*new columns c"):
        read("lenient", added, ("1", "a", "5"))
    with pytest.raises(SchemaError, match=r"SCHEMA.CHANGED.*added: c.*schema.change.behavior = exception"):
        read("exception", added, ("1", "a", "5"))
    assert [r[3:5] for r in read("ignore", added, ("1", "a", "5"))] == [("1", "a")]
    assert [r[3:5] for r in read("exception", added, ("1", "a", "5"), lsn=999)] == [("1", "a")]  # older than the plan
    dropped = (("id", 23),)
    assert [r[3:5] for r in read("lenient", dropped, ("1",))] == [("1", None)]
    with pytest.raises(SchemaError, match="dropped: v"):
        read("exception", dropped, ("1",))
    assert [r[3:5] for r in read("exception", (("id", 23), ("v", 1043)), ("1", "a"))] == [("1", "a")]  # text -> varchar: both strings


def test_a_type_change_is_planned_again_under_lenient_when_delta_can_widen_it_else_refused():
    """``_Rows`` against Relation messages whose column types changed (pg_type oid and type modifier, as
    pgoutput sends them): compared as the engine maps them."""
    from sources._pg.catalog import Connection
    from sources._pg.pgoutput import Change, Column as PgColumn, Relation
    from sources._pg.reader import Spec, _Rows
    from streaming_engine.errors import RuntimeFailure, SchemaError
    from streaming_engine.schema import Column, TableSchema

    table = TableSchema("db.s.t", (Column("id", "int", False), Column("n", "int"), Column("d", "decimal(10,2)")), ("id",))
    conn = Connection.from_url("jdbc:postgresql://h/db", "u", None)
    numeric = lambda p, s: (p << 16 | s) + 4  # noqa: E731 - atttypmod of numeric(p,s)

    def read(behavior: str, n: tuple, d: tuple) -> list:
        rows = _Rows(Spec(conn, "s", "s", (table,), "UTC", "reject", schema_changes={"db.s.t": behavior},
                          planned_at=1000, type_oids={"db.s.t": {"id": 23, "n": 23, "d": 1700}}))
        rows.relations[7] = Relation(7, "s", "t", "f", (PgColumn("id", 23, -1, True), PgColumn("n", *n, True),
                                                        PgColumn("d", *d, True)))
        return list(rows.rows(Change("I", 7, ("1", "2", "3.5"), None, None), 2000))

    same_n, same_d = (23, -1), (1700, numeric(10, 2))
    assert [r[3:6] for r in read("exception", (21, -1), same_d)] == [("1", "2", "3.5")]  # int2 -> int4: both int
    with pytest.raises(RuntimeFailure, match=r"RUNTIME.SCHEMA_CHANGED.*wider column types: n int -> bigint"):
        read("lenient", (20, -1), same_d)
    with pytest.raises(RuntimeFailure, match=r"d decimal\(10,2\) -> decimal\(14,4\)"):
        read("lenient", same_n, (1700, numeric(14, 4)))
    with pytest.raises(SchemaError, match=r"SCHEMA.CHANGED.*d decimal\(10,2\) -> decimal\(10,4\).*only widenings"):
        read("lenient", same_n, (1700, numeric(10, 4)))  # fewer digits before the point: not a widening
    with pytest.raises(SchemaError, match=r"n int -> string.*only widenings"):
        read("lenient", (25, -1), same_d)
    with pytest.raises(SchemaError, match=r"n int -> a type the engine does not map"):
        read("lenient", (16400, -1), same_d)
    with pytest.raises(SchemaError, match=r"SCHEMA.CHANGED.*n int -> bigint"):
        read("exception", (20, -1), same_d)
    assert [r[3:6] for r in read("ignore", (20, -1), same_d)] == [("1", "2", "3.5")]


def test_what_delta_widens():
    from streaming_engine.schema import widens

    assert widens("int", "bigint") and widens("smallint", "int") and widens("float", "double")
    assert widens("decimal(10,2)", "decimal(12,2)") and widens("decimal(10,2)", "decimal(14,4)")
    assert not widens("bigint", "int") and not widens("int", "int") and not widens("int", "double")
    assert not widens("decimal(10,2)", "decimal(10,4)") and not widens("decimal(10,2)", "decimal(9,2)")
    assert not widens("int", "string") and not widens("date", "timestamp")


def test_planned_again_a_transform_that_no_longer_fits_fails_naming_itself_and_the_column(cur, postgres_db_module):
    """What the runner does on a schema change (``CompiledJob.recompile``) against the real catalog: a chain
    planned for the old columns is planned for the new ones (the column reaches the sink through it); a
    transform whose plan clashes with the new column fails the plan, naming the transform and the column."""
    from streaming_engine.errors import EngineError
    from streaming_engine.job import compile_text

    pg = postgres_db_module
    cur.execute("CREATE SCHEMA app; CREATE TABLE app.t (id int PRIMARY KEY, v text); ALTER TABLE app.t REPLICA IDENTITY FULL")
    job = """
    env { job.name = replan, job.mode = STREAMING }
    source { Postgres-CDC { plugin_output = pg, base-url = "jdbc:postgresql://%s:%d/postgres", username = postgres,
                            table-names = ["postgres.app.t"], startup.mode = latest, slot.name = replan } }
    transform {
      Sql { plugin_input = pg, plugin_output = fits, query = "select *, upper(v) as v_upper from pg" }
      Sql { plugin_input = pg, plugin_output = clashes, query = "select *, length(v) as extra from pg" }
    }
    sink { Console { plugin_input = fits }, Console { plugin_input = clashes } }
    """ % (pg.host, pg.port)
    compiled = compile_text(job)
    sinks = {v.id: v for v in compiled.dag.vertices if v.kind == "sink"}
    assert [list(v.schema.tables[0].names) for v in sinks.values()] == [["id", "v", "v_upper"], ["id", "v", "extra"]]

    cur.execute("ALTER TABLE app.t ADD COLUMN note text")
    again = compiled.recompile()
    assert [list(v.schema.tables[0].names) for v in again.dag.vertices if v.kind == "sink"] == [
        ["id", "v", "note", "v_upper"], ["id", "v", "note", "extra"]]

    cur.execute("ALTER TABLE app.t ADD COLUMN extra int")
    with pytest.raises(EngineError) as e:
        again.recompile()
    text = str(e.value)
    assert "transform[2] Sql: column 'extra' would appear twice in table 'postgres.app.t'" in text, text


def test_a_numeric_that_is_not_a_number_fails_naming_table_column_and_row(spark):
    """PostgreSQL's NUMERIC holds NaN and +-Infinity, which no Spark or Delta decimal holds: a change or a
    snapshot row carrying one fails the read naming the table, the column and the row (never null)."""
    import pyarrow as pa

    from sources._pg.catalog import Connection
    from sources._pg.pgoutput import Change, Column as PgColumn, Relation
    from sources._pg.reader import Spec, _Rows
    from streaming_engine.errors import RuntimeFailure
    from streaming_engine.schema import Column, Dataset, TableSchema
    from sources._pg.reader import text_struct

    table = TableSchema("db.s.t", (Column("id", "int", False), Column("amount", "decimal(10,2)")), ("id",))
    conn = Connection.from_url("jdbc:postgresql://h/db", "u", None)
    rows = _Rows(Spec(conn, "s", "s", (table,), "UTC", "reject", struct_json=text_struct(Dataset((table,))).json()))
    rows.relations[7] = Relation(7, "s", "t", "f", (PgColumn("id", 23, -1, True), PgColumn("amount", 1700, (10 << 16 | 2) + 4, True)))
    assert [r[3:5] for r in rows.rows(Change("I", 7, ("1", "2.50"), None, None), 2000)] == [("1", "2.50")]
    with pytest.raises(RuntimeFailure, match=r"DATA.NOT_REPRESENTABLE.*db.s.t, column amount.*row \{'id': '2'\} holds NaN"):
        list(rows.rows(Change("I", 7, ("2", "NaN"), None, None), 2000))
    assert rows.chunk_batch(table, [pa.array(["1", "3"]), pa.array(["1.00", "7"])], 10).num_rows == 2
    with pytest.raises(RuntimeFailure, match=r"column amount.*snapshot's row \{'id': '3'\} holds -Infinity"):
        rows.chunk_batch(table, [pa.array(["1", "3"]), pa.array(["1.00", "-Infinity"])], 10)


def test_evolve_tells_a_rename_from_a_drop_by_the_columns_number_and_keeps_the_names_a_column_had():
    """``output_after`` of a table under evolve (the catalog's columns cached, no server): a column is
    matched to the plan's by its attnum (``Column.origin``), so a rename gives the column its former name
    and a drop lists it; two renames in a row keep both names; a new column with an old column's name is
    refused, naming it."""
    from sources.postgres_cdc import PostgresCdc, PostgresCdcOptions
    from streaming_engine.errors import SchemaError
    from streaming_engine.schema import Column, Dataset, TableSchema

    o = PostgresCdcOptions.model_validate({"base-url": "jdbc:postgresql://h:5432/db", "username": "u",
                                           "table-names": ["db.public.a"], "schema.change.behavior": "evolve"})
    src = PostgresCdc(o)

    def after(before: tuple, now: tuple, dropped: tuple = ()) -> TableSchema:
        src.__dict__["_dataset"] = Dataset((TableSchema("db.public.a", now, ("id",), evolution="evolve"),))
        planned = TableSchema("db.public.a", before, ("id",), evolution="evolve", dropped=dropped)
        (t,) = src.output_after(Dataset((planned,))).tables
        return t

    first = (Column("id", "int", False, 1), Column("old", "string", True, 2), Column("gone", "string", True, 3))
    t = after(first, (Column("id", "int", False, 1), Column("new", "string", True, 2), Column("add", "int", True, 4)))
    assert [(c.name, c.former) for c in t.columns] == [("id", ()), ("new", ("old",)), ("add", ())]
    assert t.dropped == ("gone",) and t.evolution == "evolve"
    t2 = after(t.columns, (Column("id", "int", False, 1), Column("newer", "string", True, 2), Column("add", "int", True, 4)),
               t.dropped)
    assert t2.column("newer").former == ("old", "new") and t2.dropped == ("gone",)
    with pytest.raises(SchemaError, match="column gone is a new column with the name of one renamed or dropped"):
        after(t.columns, (*t.columns, Column("gone", "string", True, 5)), t.dropped)
    with pytest.raises(SchemaError, match="column old is a new column"):
        after(t.columns, (*t.columns, Column("old", "string", True, 5)), t.dropped)
    # a plan stored before evolve (no attnums): columns are matched by name, nothing counts as dropped
    t3 = after(tuple(Column(c.name, c.type, c.nullable) for c in first), first[:2])
    assert t3.names == ("id", "old") and t3.dropped == () and t3.column("old").origin == 2

    # the runner names what changed (PipelineReplanned.columns)
    from streaming_engine.runtime.runner import _changed_columns

    before = {"db.public.a": {c.name: c.type for c in first}}
    assert _changed_columns(before, (t,)) == (
        "db.public.a.new (renamed from old)", "db.public.a.add", "db.public.a.gone (dropped)")


def test_under_evolve_a_changed_relation_is_planned_again_and_older_changes_are_read_by_the_new_names():
    """``_Rows`` of a table planned under evolve with a column renamed (old -> new): a Relation message that
    differs from the plan (after the plan's WAL position) asks for a new plan, whatever changed; a change
    from before the rename (read again: its Relation names the old column) gives its value to the new name;
    a type change Delta cannot make in place is refused."""
    from sources._pg.catalog import Connection
    from sources._pg.pgoutput import Change, Column as PgColumn, Relation
    from sources._pg.reader import Spec, _Rows
    from streaming_engine.errors import RuntimeFailure, SchemaError
    from streaming_engine.schema import Column, TableSchema

    table = TableSchema("db.s.t", (Column("id", "int", False, 1), Column("new", "string", True, 2, ("old",))),
                        ("id",), evolution="evolve")
    conn = Connection.from_url("jdbc:postgresql://h/db", "u", None)

    def read(columns: tuple, values: tuple, lsn: int, old: tuple | None = None) -> list:
        rows = _Rows(Spec(conn, "s", "s", (table,), "UTC", "reject", schema_changes={"db.s.t": "evolve"},
                          planned_at=1000, type_oids={"db.s.t": {"id": 23, "new": 25}}))
        rows.relations[7] = Relation(7, "s", "t", "f", tuple(PgColumn(n, o, -1, True) for n, o in columns))
        return list(rows.rows(Change("U" if old else "I", 7, values, old, "O" if old else None), lsn))

    older = (("id", 23), ("old", 25))
    assert [r[1:] for r in read(older, ("1", "b"), 999, old=("1", "a"))] == [("-U", 999, "1", "a"), ("+U", 999, "1", "b")]
    assert [r[3:] for r in read((("id", 23), ("new", 25)), ("1", "c"), 2000)] == [("1", "c")]
    with pytest.raises(RuntimeFailure, match=r"RUNTIME.SCHEMA_CHANGED.*dropped: new.*evolve: the sinks rename"):
        read((("id", 23),), ("1",), 2000)
    with pytest.raises(RuntimeFailure, match=r"RUNTIME.SCHEMA_CHANGED.*added: x"):
        read((("id", 23), ("new", 25), ("x", 23)), ("1", "c", "5"), 2000)
    with pytest.raises(RuntimeFailure, match=r"RUNTIME.SCHEMA_CHANGED.*wider column types: id int -> bigint"):
        read((("id", 20), ("new", 25)), ("1", "c"), 2000)
    with pytest.raises(SchemaError, match=r"new string -> int.*evolve applies only widenings"):
        read((("id", 23), ("new", 23)), ("1", "5"), 2000)
