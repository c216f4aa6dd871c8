"""Delta appends on the direct path (``checkpoint/delta_direct.py``): the files of
all tables written in one Spark job and committed per table through Delta's own
transaction, with the same txn id a DataFrameWriter append records; tables the
direct path must not write fall back to Delta's writer."""

import json
from pathlib import Path

import pytest

from sources._fake_runtime import TableSpec, arrow_schema, generate
from streaming_engine.job import compile_text

FANOUT = """
env {{ job.name = fan }}
source {{ FakeSource {{ plugin_output = src, seed = 5, row.num = {rows}, table-names = [t0, t1, t2, t3, t4],
  schema = {{ fields {{ id = bigint, v = double, s = string, d = date, ts = timestamp, amount = "decimal(12,2)" }} }} }} }}
sink {{ Delta {{ path = "${{work}}/out/${{table_name}}" }} }}
"""


def _source_rows(text: str, work: str, table: str) -> list[dict]:
    job = compile_text(text, variables={"work": work})
    src = job.dag.vertex("FakeSource#1").plugin
    [(index, cfg)] = [(i, c) for i, (t, c) in enumerate(src.table_configs()) if t == table]
    schema = job.dag.vertex("FakeSource#1").schema.table(table)
    batch = generate(TableSpec(index, schema, cfg, cfg.cdc, arrow_schema(schema)), 0, cfg.row_num)
    def plain(v):  # Spark collects timestamps as naive datetimes in the session zone (UTC here)
        return v.replace(tzinfo=None) if getattr(v, "tzinfo", None) is not None else v

    return [{k: plain(v) for k, v in r.items() if not k.startswith("__")} for r in batch.to_pylist()]


def _log(table_dir: Path) -> list[dict]:
    """Every action of every commit of a Delta table, in version order."""
    out = []
    for f in sorted((table_dir / "_delta_log").glob("*.json")):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return out


def _spy_writes(monkeypatch) -> dict[str, list]:
    """Record which phase-1 writer ran, with the tables it was given."""
    from streaming_engine.checkpoint import delta_direct

    calls: dict[str, list] = {"split": [], "union": []}
    split, union = delta_direct.write_split_files, delta_direct.write_files
    def spy_split(spark, splits, epoch):
        calls["split"].append(sorted(splits))
        calls.setdefault("batch_cached", []).extend({sp.envelope.is_cached for _, sp in splits.values()})
        return split(spark, splits, epoch)

    monkeypatch.setattr(delta_direct, "write_split_files", spy_split)
    monkeypatch.setattr(delta_direct, "write_files", lambda spark, frames, dirs, epoch: calls["union"].append(sorted(frames)) or union(spark, frames, dirs, epoch))
    return calls


def test_fan_out_commits_each_table_with_its_txn_id_and_exact_rows(spark, run_job_text, monkeypatch):
    text = FANOUT.format(rows=700)
    calls = _spy_writes(monkeypatch)
    ran = run_job_text(text)
    assert ran.result.status == "FINISHED", ran.result.error
    # the sink got the batch's per-table splits unchanged: all files in one pass over the batch
    # ... which it reads only there: the runtime neither shuffled nor persisted it
    assert calls == {"split": [[f"t{i}" for i in range(5)]], "union": [], "batch_cached": [False]}
    for i in range(5):
        table = ran.work / "out" / f"t{i}"
        actions = _log(table)
        txns = [a["txn"] for a in actions if "txn" in a]
        # the stable transaction id of job/pipeline/sink/table and the epoch, as Delta's writer records them
        assert [t["version"] for t in txns] == [0]
        assert txns[0]["appId"].startswith("fan.") and txns[0]["appId"].endswith(f".t{i}")
        assert [a["commitInfo"]["operation"] for a in actions if "commitInfo" in a] == ["WRITE"]
        adds = [a["add"] for a in actions if "add" in a]
        # written by the direct path's one job (Delta's writer names files part-00000-...)
        assert adds and all(a["path"].startswith("part-e000000-") for a in adds)
        assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 700
        assert all((table / a["path"]).exists() for a in adds)
        # Spark reads back exactly the source's rows, with the source's types
        got = sorted((r.asDict() for r in ran.delta(spark, f"out/t{i}").collect()), key=lambda r: r["id"])
        want = sorted(_source_rows(text, str(ran.work), f"t{i}"), key=lambda r: r["id"])
        assert [tuple(r.values()) for r in got] == [tuple(r.values()) for r in want]
        assert ran.delta(spark, f"out/t{i}").schema.simpleString() == (
            "struct<id:bigint,v:double,s:string,d:date,ts:timestamp,amount:decimal(12,2)>"
        )
    # the run's summary and the ledger agree with the tables
    rows = {r["table"]: r for r in ran.result.committed}
    assert {t: r["total_rows"] for t, r in rows.items()} == {f"t{i}": 700 for i in range(5)}
    assert {r["delta_version"] for r in rows.values()} == {0}


def test_a_replayed_epoch_is_skipped_by_its_txn_id(spark, run_job_text):
    """Spark re-runs the batch in its offset log that has no commit entry. Here
    the tables and the ledger have it already (the crash came after them):
    the replay commits nothing and leaves no stray file behind."""
    text = FANOUT.format(rows=300)
    first = run_job_text(text)
    assert first.result.status == "FINISHED", first.result.error
    before = {i: sorted(p.name for p in (first.work / "out" / f"t{i}").glob("*.parquet")) for i in range(5)}
    [commits] = list((first.work / "checkpoints").glob("fan/*/commits"))
    for f in (commits / "0", commits / ".0.crc"):  # as if the driver died before Spark's commit log
        f.unlink(missing_ok=True)
    again = run_job_text(text)
    assert again.result.status == "FINISHED", again.result.error
    for i in range(5):
        table = first.work / "out" / f"t{i}"
        assert [a["txn"]["version"] for a in _log(table) if "txn" in a] == [0]
        assert sorted(p.name for p in table.glob("*.parquet")) == before[i]
        assert first.delta(spark, f"out/t{i}").count() == 300
    replayed = [c for e in again.events if type(e).__name__ == "EpochCommitted" for c in e.commits]
    assert replayed and all(c.skipped and c.version is None for c in replayed)


def test_a_table_with_a_constraint_goes_through_deltas_writer(spark, run_job_text, tmp_path):
    """A CHECK constraint is enforced by Delta's writer, not its commit: such a
    table is not plain, so the sink falls back, and a violating row fails the job."""
    target = tmp_path / "out" / "t0"
    spark.sql(f"CREATE TABLE delta.`{target}` (id bigint, v double) USING delta")
    spark.sql(f"ALTER TABLE delta.`{target}` ADD CONSTRAINT positive CHECK (id > 0)")
    job = """
    env { job.name = checked }
    source { FakeSource { plugin_output = src, table-names = [t0],
      schema = { fields { id = bigint, v = double } },
      rows = [ { kind = INSERT, fields = [1, 1.5] }, { kind = INSERT, fields = [-7, 2.5] } ] } }
    sink { Delta { path = "${work}/out/${table_name}" } }
    """
    ran = run_job_text(job)
    assert ran.result.status == "FAILED"
    assert "positive" in str(ran.result.error) and "CHECK" in str(ran.result.error).upper()
    assert ran.delta(spark, "out/t0").count() == 0  # nothing of the failed epoch committed


def test_an_existing_table_with_other_columns_goes_through_deltas_writer(spark, run_job_text, tmp_path):
    target = tmp_path / "out" / "t0"
    spark.sql(f"CREATE TABLE delta.`{target}` (id bigint, v double, note string) USING delta")
    job = """
    env { job.name = wider }
    source { FakeSource { plugin_output = src, table-names = [t0],
      schema = { fields { id = bigint, v = double } },
      rows = [ { kind = INSERT, fields = [1, 1.5] }, { kind = INSERT, fields = [2, 2.5] } ] } }
    sink { Delta { path = "${work}/out/${table_name}" } }
    """
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    got = sorted(ran.rows(spark, "out/t0"), key=lambda r: r["id"])
    assert got == [{"id": 1, "v": 1.5, "note": None}, {"id": 2, "v": 2.5, "note": None}]
    assert not list(target.glob("part-e*"))  # no direct-path file was left behind


@pytest.mark.parametrize("first_multi", [True, False])
def test_two_sources_union_into_one_multi_table_batch(spark, run_job_text, first_multi):
    """Several sources of one pipeline are unioned in one envelope: each table's
    columns land in the right slots, whichever source holds them."""
    multi = """FakeSource { plugin_output = m, seed = 2, tables_configs = [
        { schema = { table = "db.a", fields { id = bigint, name = string } }, row.num = 40 },
        { schema = { table = "db.b", fields { code = string, id = bigint, score = double } }, row.num = 40 } ] }"""
    single = """FakeSource { plugin_output = s, seed = 3, row.num = 30,
        schema = { table = "db.c", fields { x = double, y = double, label = string } } }"""
    sources = f"{multi}\n{single}" if first_multi else f"{single}\n{multi}"
    job = f"""
    env {{ job.name = unioned }}
    source {{
    {sources}
    }}
    sink {{ Delta {{ plugin_input = [m, s], path = "${{work}}/out/${{table_name}}" }} }}
    """
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    shapes = {t: ran.delta(spark, f"out/{t}").schema.simpleString() for t in "abc"}
    assert shapes == {
        "a": "struct<id:bigint,name:string>",
        "b": "struct<code:string,id:bigint,score:double>",
        "c": "struct<x:double,y:double,label:string>",
    }
    assert {t: ran.delta(spark, f"out/{t}").count() for t in "abc"} == {"a": 40, "b": 40, "c": 30}
    for t in "abc":  # no column of any table is left null by a wrong slot
        df = ran.delta(spark, f"out/{t}")
        assert df.dropna().count() == df.count()


def test_transformed_tables_are_written_from_their_own_frames(spark, run_job_text, monkeypatch):
    """A transform on one table makes its frame no plain split of the batch:
    the sink unions the tables' own frames instead (still one job), and every
    table gets its rows, t1 with the transform applied."""
    text = FANOUT.format(rows=200).replace(
        "sink {",
        """transform { Sql { plugin_input = src, plugin_output = out, table_match_regex = ".*t1",
          query = "select id, v * 2 as v, s, d, ts, amount from dual" } }
sink {""",
    ).replace("Delta { path", "Delta { plugin_input = out, path")
    assert "Sql" in text and "plugin_input = out" in text
    calls = _spy_writes(monkeypatch)
    ran = run_job_text(text)
    assert ran.result.status == "FINISHED", ran.result.error
    assert calls == {"split": [], "union": [[f"t{i}" for i in range(5)]]}
    for i in range(5):
        got = {r["id"]: r["v"] for r in ran.delta(spark, f"out/t{i}").collect()}
        want = {r["id"]: r["v"] * (2 if i == 1 else 1) for r in _source_rows(FANOUT.format(rows=200), str(ran.work), f"t{i}")}
        assert got == want


SINGLE = """
env {{ job.name = one }}
source {{ FakeSource {{ plugin_output = src, seed = 9, row.num = {rows}, split.num = 3,
  schema = {{ fields {{ id = bigint, v = double, s = string, d = date, ts = timestamp, amount = "decimal(12,2)" }} }} }} }}
sink {{ Delta {{ path = "${{work}}/single" }} }}
"""


def test_one_table_is_written_by_sparks_parquet_writer_and_committed_directly(spark, run_job_text, monkeypatch):
    from streaming_engine.checkpoint import delta_direct

    native = []
    orig = delta_direct._write_native
    monkeypatch.setattr(delta_direct, "_write_native", lambda df, d, e: native.append(d) or orig(df, d, e))
    text = SINGLE.format(rows=900)
    ran = run_job_text(text)
    assert ran.result.status == "FINISHED", ran.result.error
    table = ran.work / "single"
    assert native == [str(table)]
    actions = _log(table)
    adds = [a["add"] for a in actions if "add" in a]
    assert adds and all(a["path"].startswith("part-e000000-") for a in adds)
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 900
    assert [t["txn"]["version"] for t in actions if "txn" in t] == [0]
    # nothing but the committed files, the log and no staging folder left behind
    assert sorted(p.name for p in table.iterdir() if not p.name.startswith(".")) == sorted([a["path"] for a in adds] + ["_delta_log"])
    got = sorted((r.asDict() for r in ran.delta(spark, "single").collect()), key=lambda r: r["id"])
    job = compile_text(text, variables={"work": str(ran.work)})
    schema = job.dag.vertex("FakeSource#1").schema.tables[0]
    [(index, cfg)] = list(enumerate(c for _, c in job.dag.vertex("FakeSource#1").plugin.table_configs()))
    batch = generate(TableSpec(index, schema, cfg, cfg.cdc, arrow_schema(schema)), 0, cfg.row_num)
    want = sorted(
        ({k: (v.replace(tzinfo=None) if getattr(v, "tzinfo", None) else v) for k, v in r.items() if not k.startswith("__")}
         for r in batch.to_pylist()),
        key=lambda r: r["id"],
    )
    assert got == want
    assert ran.delta(spark, "single").schema.simpleString() == (
        "struct<id:bigint,v:double,s:string,d:date,ts:timestamp,amount:decimal(12,2)>"
    )


def test_session_default_table_properties_send_new_tables_to_deltas_writer(spark, tmp_path):
    """A table the direct path creates gets no properties; with session
    defaults (spark.databricks.delta.properties.defaults.*) Delta's writer must
    create it, so such a session never qualifies."""
    from streaming_engine.checkpoint import delta_direct

    plain = spark.newSession()
    assert delta_direct.qualifies(plain, str(tmp_path / "t"))
    with_defaults = spark.newSession()
    with_defaults.conf.set("spark.databricks.delta.properties.defaults.appendOnly", "true")
    assert not delta_direct.qualifies(with_defaults, str(tmp_path / "t"))
    assert not delta_direct.qualifies(plain, "s3a://bucket/t")  # not a local file system
