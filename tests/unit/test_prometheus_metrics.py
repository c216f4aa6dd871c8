"""PrometheusMetrics from events, no Spark: commit latency per table, the
bound on table labels per job, Prometheus' naming conventions."""

from __future__ import annotations

import pytest

from streaming_engine.checkpoint.record import CommitRecord
from streaming_engine.metrics.prometheus import OTHER_TABLES, TABLE_LIMIT, PrometheusMetrics
from streaming_engine.runtime.events import EpochCommitted, JobStarted, PipelineStarted, SourceProgress

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


def test_counters_end_in_total_and_durations_are_histograms_in_seconds():
    m = PrometheusMetrics()
    m.on_event(JobStarted("j", "STREAMING", ("p",)))
    m.on_event(PipelineStarted("j", "p", "/ckpt", attempt=2))
    m.on_event(epoch("j", 0, [CommitRecord("delta.a", "db.t", "/t", 5, 0, False, 0.3),
                              CommitRecord("delta.a", "db.u", "/u", 0, None, True)]))
    m.on_event(SourceProgress("j", "p", 0, 5, (("topic", 0, 3),)))
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
