"""PrometheusMetrics from events, no Spark: commit latency per table, the
bound on table labels per job, job and pipeline state sets, the event-time
lag of CDC sources, Prometheus' naming conventions."""

from __future__ import annotations

import time

import pytest

from streaming_engine.checkpoint.record import CommitRecord
from streaming_engine.control.states import JobStatus, PipelineStatus
from streaming_engine.metrics.prometheus import OTHER_TABLES, TABLE_LIMIT, PrometheusMetrics
from streaming_engine.runtime.events import (
    EpochCommitted, EventBus, JobFinished, JobStarted, PipelineStarted, SourceProgress, StateChanged,
)
from streaming_engine.runtime.rows import observed_event_times

ROWS = "streaming_engine_rows_committed_total"
COMMITS = "streaming_engine_commit_duration_seconds"


def epoch(job: str, n: int, commits: list[CommitRecord], seconds: float = 1.0) -> EpochCommitted:
    return EpochCommitted(job, "p", n, tuple(commits), seconds)


def series(m: PrometheusMetrics, name: str, job: str) -> dict[tuple[str, str], float]:
    """(sink, table) -> value of the samples called ``name`` of ``job``."""
    return {
        (s.labels["sink"], s.labels["table"]): s.value
        for family in m.registry.collect() for s in family.samples
        if s.name == name and s.labels.get("job") == job
    }


def test_commit_latency_is_a_histogram_in_seconds_per_sink_and_table():
    m = PrometheusMetrics()
    m.on_event(epoch("j", 0, [CommitRecord("delta.a", "db.t", "/t", 5, 0, False, 0.3),
                              CommitRecord("delta.a", "db.u", "/u", 2, 0, False, 7.0)]))
    m.on_event(epoch("j", 1, [CommitRecord("delta.a", "db.t", "/t", 1, 1, False, 0.04),
                              # a replay commits nothing, a sink that is not Delta measures nothing
                              CommitRecord("delta.a", "db.u", "/u", 0, None, True),
                              CommitRecord("console.a", "db.t", "console", 6)]))
    assert series(m, f"{COMMITS}_count", "j") == {("delta.a", "db.t"): 2, ("delta.a", "db.u"): 1}
    assert series(m, f"{COMMITS}_sum", "j") == pytest.approx({("delta.a", "db.t"): 0.34, ("delta.a", "db.u"): 7.0})
    labels = {"job": "j", "pipeline": "p", "sink": "delta.a", "table": "db.t"}
    assert m.registry.get_sample_value(f"{COMMITS}_bucket", {**labels, "le": "0.05"}) == 1
    assert m.registry.get_sample_value(f"{COMMITS}_bucket", {**labels, "le": "0.5"}) == 2
    assert series(m, ROWS, "j") == {("delta.a", "db.t"): 6, ("delta.a", "db.u"): 2, ("console.a", "db.t"): 6}


def test_tables_beyond_the_limit_share_one_series_per_sink():
    m = PrometheusMetrics(table_limit=3)
    tables = [f"db.t{i}" for i in range(5)]
    m.on_event(epoch("j", 0, [CommitRecord("delta.a", t, "/x", 10 + i, 0, False, 0.1) for i, t in enumerate(tables)]))
    # the next epoch: a known table keeps its series, a new one joins _other, in every sink;
    # the engine's own rows (table "*": rows in, dead letters) are not a table
    m.on_event(epoch("j", 1, [
        CommitRecord("delta.a", "db.t0", "/x", 1, 1, False, 0.1),
        CommitRecord("delta.a", "db.t9", "/x", 100, 0, False, 0.1),
        CommitRecord("delta.b", "db.t4", "/y", 7, 0, False, 0.1),
        CommitRecord("delta.b", "db.t1", "/y", 8, 0, False, 0.1),
        CommitRecord("_rows_in", "*", "", 116),
        CommitRecord("delta.a", "db.t3", "/x", 0, None, True),
    ]))
    assert series(m, ROWS, "j") == {
        ("delta.a", "db.t0"): 11, ("delta.a", "db.t1"): 11, ("delta.a", "db.t2"): 12,
        ("delta.a", OTHER_TABLES): 13 + 14 + 100,
        ("delta.b", "db.t1"): 8, ("delta.b", OTHER_TABLES): 7,
        ("_rows_in", "*"): 116,
    }
    assert series(m, f"{COMMITS}_count", "j")[("delta.a", OTHER_TABLES)] == 3
    assert series(m, "streaming_engine_epoch_replays_total", "j") == {("delta.a", OTHER_TABLES): 1}
    # the bound is per job: another job's tables have their own
    m.on_event(epoch("k", 0, [CommitRecord("delta.a", t, "/z", 1, 0, False, 0.1) for t in tables[3:]]))
    assert set(series(m, ROWS, "k")) == {("delta.a", "db.t3"), ("delta.a", "db.t4")}


def test_a_thousand_table_job_has_at_most_the_engine_default_of_table_series():
    m = PrometheusMetrics()
    for n in range(2):
        commits = [CommitRecord("delta.a", f"db.t{i:04}", "/x", 1, n, False, 0.01) for i in range(1000)]
        m.on_event(epoch("big", n, commits))
    rows = series(m, ROWS, "big")
    assert len(rows) == TABLE_LIMIT + 1 == 101
    assert sum(rows.values()) == 2000  # nothing is lost: the other 900 tables are in _other
    assert rows[("delta.a", OTHER_TABLES)] == 2 * 900
    assert rows[("delta.a", "db.t0000")] == 2 and ("delta.a", "db.t0100") not in rows
    buckets = [s for f in m.registry.collect() for s in f.samples if s.name == f"{COMMITS}_bucket"]
    assert len({s.labels["table"] for s in buckets}) == TABLE_LIMIT + 1


def test_table_limit_must_be_positive():
    with pytest.raises(ValueError, match="table_limit"):
        PrometheusMetrics(table_limit=0)
    with pytest.raises(ValueError, match="table_limit"):
        PrometheusMetrics().attach(EventBus(), table_limit=0)


def test_the_table_limit_of_an_attached_bus_is_its_jobs_own():
    """One registry, several jobs: each bus attached with its job's limit
    (env metrics.table.limit); a bus attached without one keeps the default."""
    m = PrometheusMetrics()
    small, large, default = EventBus(), EventBus(), EventBus()
    m.attach(small, table_limit=1)
    m.attach(large, table_limit=3)
    m.attach(default)
    tables = [f"db.t{i}" for i in range(4)]
    for bus, job in ((small, "small"), (large, "large"), (default, "default")):
        bus.publish(epoch(job, 0, [CommitRecord("delta.a", t, "/x", 1, 0, False, 0.1) for t in tables]))
    assert set(series(m, ROWS, "small")) == {("delta.a", "db.t0"), ("delta.a", OTHER_TABLES)}
    assert series(m, ROWS, "small")[("delta.a", OTHER_TABLES)] == 3
    assert set(series(m, ROWS, "large")) == {("delta.a", t) for t in tables[:3]} | {("delta.a", OTHER_TABLES)}
    assert set(series(m, ROWS, "default")) == {("delta.a", t) for t in tables}


def state_set(m: PrometheusMetrics, name: str, **labels: str) -> dict[str, float]:
    return {
        s.labels["state"]: s.value for family in m.registry.collect() for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    }


def test_job_and_pipeline_states_are_state_sets_one_for_the_current_state():
    m = PrometheusMetrics()
    jobs = tuple(s.value for s in JobStatus)
    pipes = tuple(s.value for s in PipelineStatus)
    m.on_event(StateChanged("j", "job", "job", "SCHEDULED", "PENDING", jobs))
    m.on_event(StateChanged("j", "pipeline", "src", "DEPLOYING", "SCHEDULED", pipes))
    m.on_event(StateChanged("j", "pipeline", "src", "RUNNING", "DEPLOYING", pipes))
    m.on_event(StateChanged("j", "job", "job", "RUNNING", "SCHEDULED", jobs))
    # a pipeline keyed "job" is a pipeline: its states do not touch the job's
    m.on_event(StateChanged("j", "pipeline", "job", "FAILING", "RUNNING", pipes))
    job = state_set(m, "streaming_engine_job_state", job="j")
    assert job == {s: (1.0 if s == "RUNNING" else 0.0) for s in jobs}
    src = state_set(m, "streaming_engine_pipeline_state", job="j", pipeline="src")
    assert src == {s: (1.0 if s == "RUNNING" else 0.0) for s in pipes}
    assert state_set(m, "streaming_engine_pipeline_state", job="j", pipeline="job")["FAILING"] == 1.0
    m.on_event(StateChanged("j", "job", "job", "CANCELING", "RUNNING", jobs))
    m.on_event(StateChanged("j", "job", "job", "CANCELED", "CANCELING", jobs))
    job = state_set(m, "streaming_engine_job_state", job="j")
    assert [s for s, v in job.items() if v == 1] == ["CANCELED"] and sum(job.values()) == 1
    # another job has a state set of its own; the old status gauge is untouched by states
    m.on_event(StateChanged("k", "job", "job", "RUNNING", "SCHEDULED"))
    assert state_set(m, "streaming_engine_job_state", job="k") == {"RUNNING": 1.0}
    assert m.registry.get_sample_value("streaming_engine_job_status", {"job": "j"}) is None


def test_the_job_master_publishes_each_transition_and_the_state_sets_follow_it():
    """The control plane's job master (no Spark: its event handling only)
    publishes every checked transition on its bus; the metrics attached to
    that bus export the current state of the job and of each pipeline."""
    from streaming_engine.control.master import JobMaster
    from streaming_engine.job import compile_text
    from streaming_engine.runtime.events import JobStopping, PipelineFinished, PipelineStarting

    job = compile_text("""
env { job.name = states_job, job.mode = STREAMING }
source { FakeSource { plugin_output = src, schema = { fields { id = bigint } } } }
sink { Console { plugin_input = src } }
""", file="job.conf")
    [pipeline] = job.plan.pipelines
    master = JobMaster(job)
    m = PrometheusMetrics()
    m.attach(master.bus)
    changes: list[StateChanged] = []
    master.bus.subscribe(lambda e: changes.append(e) if isinstance(e, StateChanged) else None)

    def current() -> tuple[list[str], list[str]]:
        job_set = state_set(m, "streaming_engine_job_state", job="states_job")
        pipe_set = state_set(m, "streaming_engine_pipeline_state", job="states_job", pipeline=pipeline.key)
        assert set(job_set) == {s.value for s in JobStatus} and set(pipe_set) == {s.value for s in PipelineStatus}
        return [s for s, v in job_set.items() if v == 1], [s for s, v in pipe_set.items() if v == 1]

    # what JobMaster.run does before the runtime starts, then the runtime's events
    master._move(master.state, JobStatus.CREATED)
    master._move(master.state, JobStatus.PENDING)
    master._move(master.pipelines[pipeline.key], PipelineStatus.SCHEDULED)
    master._move(master.state, JobStatus.SCHEDULED)
    master.bus.publish(PipelineStarting("states_job", pipeline.key, 1))
    assert current() == (["SCHEDULED"], ["DEPLOYING"])
    master.bus.publish(PipelineStarted("states_job", pipeline.key, "/ck", 1))
    assert current() == (["RUNNING"], ["RUNNING"])
    master.bus.publish(JobStopping("states_job", "asked"))
    master.bus.publish(PipelineFinished("states_job", pipeline.key, "CANCELED"))
    assert current() == (["CANCELING"], ["CANCELED"])
    assert [(c.kind, c.entity, c.previous, c.state) for c in changes] == [
        ("job", "job", "INITIALIZING", "CREATED"), ("job", "job", "CREATED", "PENDING"),
        ("pipeline", pipeline.key, "CREATED", "SCHEDULED"), ("job", "job", "PENDING", "SCHEDULED"),
        ("pipeline", pipeline.key, "SCHEDULED", "DEPLOYING"), ("pipeline", pipeline.key, "DEPLOYING", "RUNNING"),
        ("job", "job", "SCHEDULED", "RUNNING"), ("job", "job", "RUNNING", "CANCELING"),
        ("pipeline", pipeline.key, "RUNNING", "CANCELING"), ("pipeline", pipeline.key, "CANCELING", "CANCELED"),
    ]
    # an illegal transition is not a state change: nothing is published
    master._move(master.state, JobStatus.RUNNING)
    assert len(changes) == 10 and master.bug is not None


def test_the_event_time_lag_is_now_minus_the_newest_applied_change_when_scraped():
    m = PrometheusMetrics()
    labels = {"job": "j", "pipeline": "p", "source": "kafka.cdc"}
    lag = "streaming_engine_source_lag_seconds"
    last = "streaming_engine_source_last_event_timestamp_seconds"
    m.on_event(SourceProgress("j", "p", 0, 5))  # a source without event time exports neither
    assert m.registry.get_sample_value(lag, labels) is None and m.registry.get_sample_value(last, labels) is None
    hour_ago = int(time.time() * 1000) - 3_600_000
    m.on_event(SourceProgress("j", "p", 1, 5, (), (("kafka.cdc", hour_ago),)))
    assert m.registry.get_sample_value(last, labels) == hour_ago / 1000
    first = m.registry.get_sample_value(lag, labels)
    assert 3600 <= first < 3660
    time.sleep(0.05)
    assert m.registry.get_sample_value(lag, labels) > first  # computed at scrape time: it grows while idle
    # an older change (a replay) does not move it back; a newer one does
    m.on_event(SourceProgress("j", "p", 2, 5, (), (("kafka.cdc", hour_ago - 60_000),)))
    assert m.registry.get_sample_value(last, labels) == hour_ago / 1000
    m.on_event(SourceProgress("j", "p", 3, 5, (), (("kafka.cdc", int(time.time() * 1000)),)))
    assert 0 <= m.registry.get_sample_value(lag, labels) < 60
    m.on_event(JobFinished("j", "FINISHED"))  # a finished job has no lag that grows
    assert m.registry.get_sample_value(lag, labels) is None and m.registry.get_sample_value(last, labels) is None


def test_a_sources_own_gauges_are_exported_by_name_and_unknown_names_dropped():
    m = PrometheusMetrics()
    m.on_event(SourceProgress("j", "p", 0, 5, gauges=(
        ("pg", "backlog_bytes", "", 123.0), ("pg", "snapshot_chunks_done", "db.s.t", 2.0),
        ("pg", "snapshot_chunks_total", "db.s.t", 5.0), ("pg", "made_up", "", 1.0))))
    assert m.registry.get_sample_value("streaming_engine_source_backlog_bytes",
                                       {"job": "j", "pipeline": "p", "source": "pg"}) == 123.0
    table = {"job": "j", "pipeline": "p", "source": "pg", "table": "db.s.t"}
    assert m.registry.get_sample_value("streaming_engine_source_snapshot_chunks_done", table) == 2.0
    assert m.registry.get_sample_value("streaming_engine_source_snapshot_chunks_total", table) == 5.0
    assert not any("made_up" in f.name for f in m.registry.collect())


def test_observed_event_times_are_read_from_spark_progress():
    observed = {
        "source_time:kafka.cdc": {"max_ts_ms": 1_700_000_000_123},
        "source_time:empty": {"max_ts_ms": None},  # a batch without rows
        "something_else": {"max_ts_ms": 5},
    }
    assert observed_event_times(observed) == [("kafka.cdc", 1_700_000_000_123)]
    from pyspark.sql import Row  # what PySpark's StreamingQueryProgress holds (recentProgress)

    assert observed_event_times({"source_time:a": Row(max_ts_ms=5), "source_time:b": Row(max_ts_ms=None)}) == [("a", 5)]
    assert observed_event_times(None) == [] and observed_event_times({}) == []


def test_counters_end_in_total_and_durations_are_histograms_in_seconds():
    m = PrometheusMetrics()
    m.on_event(JobStarted("j", "STREAMING", ("p",)))
    m.on_event(PipelineStarted("j", "p", "/ckpt", attempt=2))
    m.on_event(epoch("j", 0, [CommitRecord("delta.a", "db.t", "/t", 5, 0, False, 0.3),
                              CommitRecord("delta.a", "db.u", "/u", 0, None, True)]))
    m.on_event(SourceProgress("j", "p", 0, 5, (("topic", 0, 3),), (("kafka.cdc", 1_700_000_000_000),),
                              (("pg", "backlog_bytes", "", 4096.0), ("pg", "snapshot_chunks_done", "db.s.t", 3.0),
                               ("pg", "snapshot_chunks_total", "db.s.t", 9.0))))
    m.on_event(StateChanged("j", "job", "job", "RUNNING", "SCHEDULED", ("SCHEDULED", "RUNNING")))
    m.on_event(StateChanged("j", "pipeline", "p", "RUNNING", "DEPLOYING", ("DEPLOYING", "RUNNING")))
    families = {f.name: f for f in m.registry.collect()}
    assert all(name.startswith("streaming_engine_") for name in families)
    for name, family in families.items():
        names = {s.name for s in family.samples}
        assert names, f"{name}: no sample after one event of each kind"
        if family.type == "counter":
            assert names <= {f"{name}_total", f"{name}_created"} and f"{name}_total" in names
        if family.type == "histogram":
            assert name.endswith("_seconds"), f"{name}: a duration histogram not in seconds"
        assert "duration" not in name or name.endswith("_seconds")
    assert {"streaming_engine_commit_duration_seconds", "streaming_engine_epoch_duration_seconds"} <= {
        n for n, f in families.items() if f.type == "histogram"
    }
