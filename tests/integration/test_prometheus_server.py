"""A real Prometheus scrapes a running STREAMING job: its per-table series
equal what the Delta tables hold, and every query of the shipped Grafana
dashboard is PromQL that Prometheus evaluates on them.

The job runs through the engine's public API (``compile_text``, then the
control plane's ``JobMaster.run``, metrics on a free port) on a thread, so the
job and pipeline state sets are scraped too (RUNNING while it runs); Prometheus (``tests/components/prometheus.py``,
the Debian package, installed when missing) scrapes it every second. The
source's rows end after three epochs while the job keeps running: once
Prometheus has scraped after the last epoch, its series must be exact.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from streaming_engine.control.master import JobMaster
from streaming_engine.control.states import JobStatus, PipelineStatus
from streaming_engine.job import compile_text
from streaming_engine.metrics.prometheus import PrometheusMetrics
from streaming_engine.runtime.events import EpochCommitted, EventBus
from tests.components.prometheus import PrometheusServer

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.timeout(420)]

DASHBOARD = Path(__file__).resolve().parents[2] / "conf" / "grafana" / "streaming-engine.json"

JOB_NAME = "prom_scraped"
# STREAMING without rows.per.batch: each table's row.num rows in split.num
# splits, one split per micro-batch (3 epochs), then the source idles and the
# job keeps running. The first sink takes the multi-table batch as it is (one
# Spark job writes every table, then a commit per table); behind the
# transform the second writes table by table.
JOB = f"""
env {{ job.name = {JOB_NAME}, job.mode = STREAMING, checkpoint.interval = 500, metrics.enabled = true, metrics.port = 0 }}
source {{
  FakeSource {{
    plugin_output = shop
    seed = 7
    tables_configs = [
      {{ schema = {{ table = "shop.orders", fields {{ id = bigint, amount = double }} }}, row.num = 90, split.num = 3 }},
      {{ schema = {{ table = "shop.users", fields {{ id = bigint, name = string }} }}, row.num = 30, split.num = 3 }},
      {{ schema = {{ table = "shop.items", fields {{ id = bigint, sku = string }} }}, row.num = 12, split.num = 3 }}
    ]
  }}
}}
transform {{ FilterRowKind {{ plugin_input = shop, plugin_output = inserts, include_kinds = [INSERT] }} }}
sink {{
  Delta {{ plugin_input = shop, path = "${{work}}/raw/${{table_name}}" }}
  Delta {{ plugin_input = inserts, path = "${{work}}/ins/${{table_name}}" }}
}}
"""
SINKS = {"delta.shop": "raw", "delta.inserts": "ins"}
TABLES = {"shop.orders": "orders", "shop.users": "users", "shop.items": "items"}
EPOCHS = 3


def test_prometheus_scrapes_a_running_job_and_its_table_series_equal_the_committed_rows(
    spark, tmp_path, monkeypatch, record_property
):
    (tmp_path / "engine.conf").write_text(
        f'env {{ checkpoint.dir = "{tmp_path}/checkpoints", job.retry.times = 0, job.retry.interval.seconds = 0 }}\n'
    )
    monkeypatch.setenv("STREAMING_ENGINE_CONF", str(tmp_path / "engine.conf"))
    # the process' metrics endpoint (the job attaches to the same one: one per process)
    metrics = PrometheusMetrics.shared(0)
    with PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{metrics.port}"]) as prom:
        job = compile_text(JOB, variables={"work": str(tmp_path)}, file="job.conf")
        master = JobMaster(job)
        epochs: list[EpochCommitted] = []
        master.bus = _AfterEverySubscriber(epochs)  # the master's events, on a bus that tells when they are handled
        master.bus.subscribe(master.on_event)
        outcome: dict = {}
        runner = threading.Thread(target=lambda: outcome.update(result=master.run(spark=spark)), daemon=True)
        runner.start()
        try:
            deadline = time.monotonic() + 240
            while len(epochs) < EPOCHS:
                assert runner.is_alive(), f"the job ended before {EPOCHS} epochs: {outcome}"
                assert time.monotonic() < deadline, f"{len(epochs)} epochs within 240 s"
                time.sleep(0.1)
            last_epoch_at = time.time()
            prom.wait_for_scrape(after=last_epoch_at)
            assert runner.is_alive(), f"the job ended: {outcome}"  # scraped while it runs

            job_label = f'job="{JOB_NAME}"'
            rows = _by_sink_table(prom.query(f"streaming_engine_rows_committed_total{{{job_label}}}"))
            commits = _by_sink_table(prom.query(f"streaming_engine_commit_duration_seconds_count{{{job_label}}}"))
            slowest = _by_sink_table(prom.query(f"streaming_engine_commit_duration_seconds_sum{{{job_label}}}"))
            status = prom.query(f"streaming_engine_job_status{{{job_label}}}")
            job_state = _by_state(prom.query(f"streaming_engine_job_state{{{job_label}}}"))
            pipeline_state = _by_state(prom.query(f"streaming_engine_pipeline_state{{{job_label}}}"))
            last = prom.query(f"streaming_engine_last_committed_epoch{{{job_label}}}")
            epoch_count = prom.query(f"sum(streaming_engine_epochs_committed_total{{{job_label}}})")
            dashboard = _dashboard_queries(prom)
        finally:
            master.request_stop()
            runner.join(120)
        assert not runner.is_alive(), "the job did not stop"
        assert outcome["result"].status in ("FINISHED", "CANCELED"), outcome["result"].error
        assert len(epochs) == EPOCHS, [e.epoch for e in epochs]  # the source idled: no epoch after the scrape

    # per sink and table: Prometheus' series == the rows the Delta table holds
    from delta.tables import DeltaTable

    held = {
        (sink, table): spark.read.format("delta").load(str(tmp_path / folder / name)).count()
        for sink, folder in SINKS.items() for table, name in TABLES.items()
    }
    assert held == {(s, t): n for s in SINKS for t, n in (("shop.orders", 90), ("shop.users", 30), ("shop.items", 12))}
    assert rows == held
    # a commit-latency observation per Delta commit of each table (one per epoch), none of them free
    versions = {
        (sink, table): DeltaTable.forPath(spark, str(tmp_path / folder / name)).history().count()
        for sink, folder in SINKS.items() for table, name in TABLES.items()
    }
    assert versions == {key: EPOCHS for key in held}
    assert commits == versions
    assert all(v > 0 for v in slowest.values()), slowest
    # the commit records the histogram came from: each measured, within its epoch's own time
    for e in epochs:
        for c in e.commits:
            assert c.seconds is not None and 0 < c.seconds <= e.seconds, (e.epoch, c)
    assert [float(s["value"][1]) for s in status] == [1.0]  # RUNNING when scraped
    # the control plane's state sets: every state a series, RUNNING the one at 1
    assert job_state == {(None, s.value): float(s is JobStatus.RUNNING) for s in JobStatus}
    [pipeline] = job.plan.pipelines
    assert pipeline_state == {(pipeline.key, s.value): float(s is PipelineStatus.RUNNING) for s in PipelineStatus}
    assert [float(s["value"][1]) for s in last] == [EPOCHS - 1.0]
    assert [float(s["value"][1]) for s in epoch_count] == [float(EPOCHS)]
    # every dashboard query is PromQL Prometheus evaluates; the per-table ones have this job's series
    assert dashboard["errors"] == {}, dashboard["errors"]
    assert dashboard["empty"] <= dashboard["may_be_empty"], dashboard["empty"]
    record_property("ran", f"{EPOCHS} epochs, {sum(held.values())} rows in 6 tables; "
                           f"{len(dashboard['answered'])} dashboard queries answered by Prometheus")


class _AfterEverySubscriber(EventBus):
    """Keeps each EpochCommitted once every subscriber (the metrics among
    them) has handled it: an epoch in the list is in the registry."""

    def __init__(self, epochs: list) -> None:
        super().__init__()
        self.epochs = epochs

    def publish(self, event) -> None:
        super().publish(event)
        if isinstance(event, EpochCommitted):
            self.epochs.append(event)


def _by_state(samples: list[dict]) -> dict[tuple[str | None, str], float]:
    return {(s["metric"].get("pipeline"), s["metric"]["state"]): float(s["value"][1]) for s in samples}


def _by_sink_table(samples: list[dict]) -> dict[tuple[str, str], float]:
    return {(s["metric"]["sink"], s["metric"]["table"]): float(s["value"][1]) for s in samples}


# What a query may return nothing for in this job: it has no restart, no
# replayed epoch, no Kafka source (lag) and no source reporting gauges of its
# own (a Postgres-CDC source's slot backlog and snapshot chunks: those are
# asserted in tests/runtime/io/test_pg_snapshot.py); everything else must answer.
_MAY_BE_EMPTY = ("restarts", "replays", "lag", "source_backlog_bytes", "source_snapshot_chunks")


def _dashboard_queries(prom: PrometheusServer) -> dict:
    """Runs every panel query of the dashboard, its variables set to this job."""
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    errors, empty, may_be_empty, answered = {}, set(), set(), []
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$job", JOB_NAME)
            if any(word in expr for word in _MAY_BE_EMPTY):
                may_be_empty.add(expr)
            try:
                data = prom.api("query", query=expr)
            except Exception as e:  # Prometheus refused the query: report every one
                errors[panel["title"]] = f"{expr}: {e}"
                continue
            answered.append(expr)
            if not data["result"]:
                empty.add(expr)
    return {"errors": errors, "empty": empty, "may_be_empty": may_be_empty, "answered": answered}
