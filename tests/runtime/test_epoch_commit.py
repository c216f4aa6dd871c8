"""End to end: FakeSource -> Delta, multi-table, CDC upserts, exactly-once replays."""

import urllib.request
from collections import defaultdict

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
    # the ledger has every epoch for every sink and table
    per_table = defaultdict(int)
    for row in ran.result.committed:
        per_table[(row["sink"], row["table"])] = row["epochs"]
    assert per_table[("delta.cdc", "shop.orders")] == 3
    assert per_table[("delta.cdc-2", "shop.users")] == 3
    # Prometheus metrics per job, pipeline, sink and table, over real HTTP
    from streaming_engine.metrics.prometheus import PrometheusMetrics

    port = PrometheusMetrics._shared.port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    series = 'streaming_engine_rows_committed_total{job="cdc_job",pipeline="cdc",sink="delta.cdc-2",table="shop.orders"}'
    assert f"{series} 900.0" in text
    assert 'streaming_engine_last_committed_epoch{job="cdc_job",pipeline="cdc"} 2.0' in text
    assert 'streaming_engine_job_status{job="cdc_job"} 2.0' in text


def test_rerunning_a_finished_job_writes_nothing_twice(spark, run_job_text):
    first = run_job_text(CDC_JOB)
    assert first.result.status == "FINISHED"
    before = first.delta(spark, "raw/orders").count()
    again = run_job_text(CDC_JOB)
    assert again.result.status == "FINISHED"
    assert again.delta(spark, "raw/orders").count() == before


STREAMING_JOB = """
env { job.name = streaming_job, job.mode = STREAMING, checkpoint.interval = 500 }
source {
  FakeSource {
    plugin_output = ticks
    seed = 5
    row.num = 10
    schema = { fields { id = bigint, v = double } }
  }
}
sink { Delta { plugin_input = ticks, path = "${work}/ticks" } }
"""


def test_streaming_fake_source_keeps_producing_until_stopped(spark, run_job_text):
    ran = run_job_text(STREAMING_JOB, stop_after_epochs=3)
    assert ran.result.status in ("FINISHED", "CANCELED"), ran.result.error
    epochs = [e.epoch for e in ran.events if type(e).__name__ == "EpochCommitted"]
    assert len(epochs) >= 3 and epochs == sorted(set(epochs))
    # each trigger admitted row.num new rows: no batch repeats rows, none is lost
    assert ran.delta(spark, "ticks").count() == 10 * len(epochs)
