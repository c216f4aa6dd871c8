"""End to end: FakeSource -> Delta, multi-table, CDC upserts, exactly-once replays."""

import glob
import os
import urllib.request
from collections import Counter, defaultdict

from sources._fake_runtime import TableSpec, generate
from streaming_engine.job import compile_text

CDC_JOB = """
env { job.name = cdc_job, metrics.enabled = true, metrics.port = 0 }
source {
  FakeSource {
    plugin_output = cdc
    seed = 11
    tables_configs = [
      { schema = { table = "shop.orders", fields { id = bigint, amount = double, note = string },
                   primaryKey { name = pk, columnNames = [id] } },
        row.num = 900, rows.per.batch = 300, cdc = { key_column = id, keys = 50, update_ratio = 0.4, delete_ratio = 0.2 } },
      { schema = { table = "shop.users", fields { id = bigint, name = string } },
        row.num = 120, rows.per.batch = 40 }
    ]
  }
}
sink {
  Delta { plugin_input = cdc, path = "${work}/wh/${database_name}/${table_name}", save_mode = upsert, primary_key = [id] }
  Delta { plugin_input = cdc, path = "${work}/raw/${table_name}" }
}
"""


SINKS = ("delta.cdc", "delta.cdc-2")  # upsert, append
TABLES = ("shop.orders", "shop.users")


def expected_state(text: str, work: str, table: str) -> tuple[dict, int]:
    """The oracle: replay the deterministic source in pure Python."""
    job = compile_text(text, variables={"work": work})
    src = job.dag.vertex("FakeSource#1").plugin
    [(index, tid, cfg)] = [(i, t, c) for i, (t, c) in enumerate(src.table_configs()) if t == table]
    schema = job.dag.vertex("FakeSource#1").schema.table(tid)
    from sources._fake_runtime import arrow_schema

    batch = generate(TableSpec(index, schema, cfg, cfg.cdc, arrow_schema(schema)), 0, cfg.row_num)
    state: dict = {}
    for row in batch.to_pylist():
        key = row["id"]
        if row["__kind"] == "-D":
            state.pop(key, None)
        elif row["__kind"] != "-U":
            state[key] = {k: v for k, v in row.items() if not k.startswith("__")}
    return state, batch.num_rows


def test_multi_table_cdc_job_commits_every_epoch_to_every_sink(spark, run_job_text):
    ran = run_job_text(CDC_JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    orders, n_orders = expected_state(CDC_JOB, str(ran.work), "shop.orders")
    got = {r["id"]: r for r in ran.rows(spark, "wh/shop/orders")}
    assert got == orders
    assert ran.delta(spark, "raw/orders").count() == n_orders == 900
    assert ran.delta(spark, "raw/users").count() == 120
    # the ledger table on disk has every epoch exactly once for every sink and table
    ledger = _ledger_rows(spark, ran)
    per_key = Counter((r["sink"], r["table"], r["epoch"]) for r in ledger)
    assert set(per_key.values()) == {1}, f"ledger rows recorded twice: {per_key}"
    for sink in SINKS:
        for table in TABLES:
            assert sorted(e for (s, t, e) in per_key if (s, t) == (sink, table)) == [0, 1, 2], (sink, table)
    assert {(r["sink"], r["table"]) for r in ledger} == {(s, t) for s in SINKS for t in TABLES}
    # the append sink's ledger rows add up to the source's rows, each with the Delta version it made
    appended = defaultdict(int)
    for r in ledger:
        if r["sink"] == "delta.cdc-2":
            appended[r["table"]] += r["rows"]
            assert r["delta_version"] is not None and not r["replayed"], r
    assert appended == {"shop.orders": 900, "shop.users": 120}
    # Prometheus metrics per job, pipeline, sink and table, over real HTTP
    from streaming_engine.metrics.prometheus import PrometheusMetrics

    port = PrometheusMetrics._shared.port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    series = 'streaming_engine_rows_committed_total{job="cdc_job",pipeline="cdc",sink="delta.cdc-2",table="shop.orders"}'
    assert f"{series} 900.0" in text
    # commit latency: one observation per epoch and table, for the appends and the MERGEs alike
    for sink in SINKS:
        for table in TABLES:
            labels = f'job="cdc_job",pipeline="cdc",sink="{sink}",table="{table}"'
            assert f"streaming_engine_commit_duration_seconds_count{{{labels}}} 3.0" in text, (sink, table)
    assert 'streaming_engine_last_committed_epoch{job="cdc_job",pipeline="cdc"} 2.0' in text
    assert 'streaming_engine_job_status{job="cdc_job"} 2.0' in text


def test_rerunning_a_finished_job_writes_nothing_twice(spark, run_job_text):
    """The second run REALLY runs the last epoch again against targets that
    hold it: Spark's commit-log entry of the last epoch is removed (a crash
    after the ledger, before Spark's commit log), so Spark replays it. Every
    table must skip it: no Delta commit, no row twice, no second ledger row."""
    first = run_job_text(CDC_JOB)
    assert first.result.status == "FINISHED", first.result.error
    [checkpoint] = glob.glob(str(first.work / "checkpoints" / "cdc_job" / "*" / "commits"))
    last = max(int(n) for n in os.listdir(checkpoint) if n.isdigit())
    assert last == 2
    for name in (str(last), f".{last}.crc"):
        if os.path.exists(os.path.join(checkpoint, name)):
            os.remove(os.path.join(checkpoint, name))
    targets = [f"wh/shop/{t}" for t in ("orders", "users")] + [f"raw/{t}" for t in ("orders", "users")]
    versions = {t: _version(spark, first.work / t) for t in targets}
    contents = {t: Counter(tuple(sorted(r.items())) for r in first.rows(spark, t)) for t in targets}
    ledger_before = Counter(_ledger_key(r) for r in _ledger_rows(spark, first))

    again = run_job_text(CDC_JOB)
    assert again.result.status == "FINISHED", again.result.error
    # the epoch ran again ...
    replayed = [e for e in again.events if type(e).__name__ == "EpochCommitted"]
    assert [e.epoch for e in replayed] == [last], "the second run did not replay the last epoch"
    assert os.path.exists(os.path.join(checkpoint, str(last))), "Spark did not commit the replayed epoch"
    # ... and every (sink, table) skipped it
    commits = {(c.sink, c.table): c for c in replayed[0].commits}
    assert set(commits) == {(s, t) for s in SINKS for t in TABLES}
    for key, c in commits.items():
        assert c.skipped and c.version is None and c.rows == 0, f"{key} wrote the replayed epoch: {c}"
    for t in targets:
        assert _version(spark, again.work / t) == versions[t], f"{t}: a Delta commit for the replayed epoch"
        assert Counter(tuple(sorted(r.items())) for r in again.rows(spark, t)) == contents[t], f"{t} changed"
    # the ledger already had the epoch: no second row for it
    assert Counter(_ledger_key(r) for r in _ledger_rows(spark, again)) == ledger_before


def _ledger_rows(spark, ran) -> list:
    """The commit ledger read from disk (<checkpoint.dir>/<job>/_ledger)."""
    from streaming_engine.checkpoint.ledger import ledger_path

    return spark.read.format("delta").load(ledger_path(str(ran.work / "checkpoints"), "cdc_job")).collect()


def _ledger_key(r) -> tuple:
    return (r["sink"], r["table"], r["epoch"], r["delta_version"], r["rows"], r["replayed"])


def _version(spark, path) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, str(path)).history(1).collect()[0]["version"]


STREAMING_JOB = """
env { job.name = streaming_job, job.mode = STREAMING, checkpoint.interval = 500 }
source {
  FakeSource {
    plugin_output = ticks
    seed = 5
    row.num = 10
    rows.per.batch = 10  # endless: rows.per.batch new rows every trigger (row.num alone: once, then idle)
    schema = { fields { id = bigint, v = double } }
  }
}
sink { Delta { plugin_input = ticks, path = "${work}/ticks" } }
"""


def test_streaming_fake_source_keeps_producing_until_stopped(spark, run_job_text):
    ran = run_job_text(STREAMING_JOB, stop_after_epochs=3, timeout_s=120)
    assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
    epochs = [e.epoch for e in ran.events if type(e).__name__ == "EpochCommitted"]
    assert len(epochs) >= 3 and epochs == sorted(set(epochs))
    # each trigger admitted rows.per.batch new rows: no batch repeats rows, none is lost
    assert ran.delta(spark, "ticks").count() == 10 * len(epochs)


def test_jobs_run_one_after_another_in_one_driver_leave_no_session_behind(spark, run_job_text):
    """Every pipeline runs on a session of its own; Spark registers a
    session's streaming listener bus on the SparkContext when its first query
    starts and never removes it, and the Delta sink clones sessions for its
    MERGEs. After each run neither is left: a driver running job after job
    (the benchmark, a job server) does not keep every session it ever made,
    nor hand every Spark event to all of them."""
    from streaming_engine.checkpoint import delta_txn

    bus = spark.sparkContext._jsc.sc().listenerBus()

    def session_buses() -> int:
        return sum(1 for listener in bus.listeners() if listener.getClass().getSimpleName() == "StreamingQueryListenerBus")

    before = session_buses()
    for _ in range(3):
        ran = run_job_text(CDC_JOB.replace("cdc_job", f"cdc_job_{_}"))
        assert ran.result.status == "FINISHED", ran.result.error
        assert session_buses() == before
    assert ran.rows(spark, "wh/shop/orders")  # the MERGE sink ran (a txn session was cloned and given back)
    assert not [s for s, _, _ in delta_txn._TXN_SESSIONS.values() if s is not spark]
