"""Prometheus metrics per job, pipeline and table, from lifecycle events.

One registry and one HTTP server per process (``PrometheusMetrics.shared``);
every job run in the process attaches to it. Labels are stable configured
names (job name, pipeline key, sink uid, table id), never counters, and
never secrets: every label value goes through :func:`redact.redact_text`.

Names follow Prometheus' conventions: counters are exported with ``_total``
(prometheus_client appends it), durations are histograms in seconds
(``_seconds``). A job's tables get series of their own up to a bound
(``table_limit``, :data:`TABLE_LIMIT` by default): the tables after the first
N the job reports share one series per sink, ``table="_other"``, so a job of a
thousand tables cannot blow up the metric cardinality. The bound is per job:
``attach(bus, table_limit=...)`` (a job's ``metrics.table.limit``) sets it for
the jobs whose events that bus carries.

States: ``streaming_engine_job_state{job,state}`` and
``streaming_engine_pipeline_state{job,pipeline,state}`` are state sets (1 for
the current state, 0 for the others) from the control plane's
:class:`~streaming_engine.runtime.events.StateChanged` events; the older
``*_status`` gauges (one number per state) stay. Event time: for sources whose
records carry one (Kafka's ``debezium_json``: ``source.ts_ms``),
``streaming_engine_source_last_event_timestamp_seconds`` is the newest applied
change's source time and ``streaming_engine_source_lag_seconds`` is now minus
it, computed when scraped (it grows while nothing new is applied); both go
when the job finishes. Other sources export neither. A source's own gauges
(``Source.gauges``, names in ``runtime.events.SOURCE_GAUGES``):
``streaming_engine_source_backlog_bytes{job,pipeline,source}`` (Postgres-CDC:
the WAL its slot keeps) and ``streaming_engine_source_snapshot_chunks_done`` /
``_total{...,table}`` (an initial snapshot's progress).
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

from streaming_engine.redact import redact_text
from streaming_engine.runtime.events import (
    SOURCE_GAUGES, EpochCommitted, Event, EventBus, JobFinished, JobStarted, PipelineFinished, PipelineStarted,
    SourceProgress, StateChanged,
)

_STATUS = {"CREATED": 0, "RUNNING": 1, "FINISHED": 2, "CANCELED": 3, "FAILED": 4}

TABLE_LIMIT = 100  # distinct table label values per job; the others are aggregated
OTHER_TABLES = "_other"  # the table label of the aggregated tables
# a commit is a few Delta log round trips (local: ~0.05 s) up to a MERGE of a large table
COMMIT_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class PrometheusMetrics:
    _shared: ClassVar["PrometheusMetrics | None"] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, port: int | None = None, table_limit: int = TABLE_LIMIT):
        if table_limit < 1:
            raise ValueError(f"table_limit must be at least 1, not {table_limit}")
        self.table_limit = table_limit
        self._tables: dict[str, set[str]] = {}  # job -> tables with series of their own (at most table_limit)
        self._tables_lock = threading.Lock()
        self._limits: dict[str, int] = {}  # job -> its own table limit (attach(..., table_limit=))
        self._states: dict[tuple[str, ...], set[str]] = {}  # (job[, pipeline]) -> states exported for it
        self._event_times: dict[tuple[str, str, str], float] = {}  # (job, pipeline, source) -> newest event time, s
        self._event_times_lock = threading.Lock()
        self.registry = CollectorRegistry()
        r = self.registry
        self.epochs = Counter("streaming_engine_epochs_committed", "Epochs committed", ["job", "pipeline"], registry=r)
        self.rows = Counter(
            "streaming_engine_rows_committed", "Rows committed", ["job", "pipeline", "sink", "table"], registry=r
        )
        self.replays = Counter(
            "streaming_engine_epoch_replays", "Sink-table commits found already committed (replays)",
            ["job", "pipeline", "sink", "table"], registry=r,
        )
        self.last_epoch = Gauge(
            "streaming_engine_last_committed_epoch", "Last committed epoch", ["job", "pipeline"], registry=r
        )
        self.commit_seconds = Histogram(
            "streaming_engine_commit_duration_seconds",
            "Time from the start of a table's write to its commit (Delta sinks), per epoch",
            ["job", "pipeline", "sink", "table"], buckets=COMMIT_BUCKETS, registry=r,
        )
        self.epoch_seconds = Histogram(
            "streaming_engine_epoch_duration_seconds", "Time to process and commit one epoch", ["job", "pipeline"],
            registry=r,
        )
        self.pipeline_status = Gauge(
            "streaming_engine_pipeline_status", "0 created, 1 running, 2 finished, 3 canceled, 4 failed",
            ["job", "pipeline"], registry=r,
        )
        self.restarts = Counter("streaming_engine_pipeline_restarts", "Pipeline restarts", ["job", "pipeline"], registry=r)
        self.job_status = Gauge("streaming_engine_job_status", "1 running, 2 finished, 4 failed", ["job"], registry=r)
        self.input_rows = Counter(
            "streaming_engine_source_rows", "Rows the pipeline's source(s) read (Spark's numInputRows)", ["job", "pipeline"],
            registry=r,
        )
        self.lag = Gauge(
            "streaming_engine_source_lag_records",
            "Records of a source partition (Kafka: topic, partition) not read yet, after the last micro-batch",
            ["job", "pipeline", "topic", "partition"], registry=r,
        )
        self.job_state = Gauge(
            "streaming_engine_job_state", "1 for the job's current state (the control plane's JobStatus), 0 for the others",
            ["job", "state"], registry=r,
        )
        self.pipeline_state = Gauge(
            "streaming_engine_pipeline_state",
            "1 for the pipeline's current state (the control plane's PipelineStatus), 0 for the others",
            ["job", "pipeline", "state"], registry=r,
        )
        self.source_gauges = {
            name: Gauge(f"streaming_engine_source_{name}", text,
                        ["job", "pipeline", "source"] + (["table"] if name.startswith("snapshot_") else []), registry=r)
            for name, text in SOURCE_GAUGES.items()
        }
        r.register(_EventTime(self))
        self.server = None
        self.port = None
        if port is not None:
            self.server, _ = start_http_server(port, addr="127.0.0.1", registry=r)
            self.port = self.server.server_port

    @classmethod
    def shared(cls, port: int) -> "PrometheusMetrics":
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls(port)
            return cls._shared

    def attach(self, bus: EventBus, table_limit: int | None = None) -> None:
        """Follow the events of ``bus``; ``table_limit``: the table bound of
        the jobs its events name (default: the instance's)."""
        if table_limit is None:
            bus.subscribe(self.on_event)
            return
        if table_limit < 1:
            raise ValueError(f"table_limit must be at least 1, not {table_limit}")

        def on_event(e: Event) -> None:
            self._limits[e.job] = table_limit
            self.on_event(e)

        bus.subscribe(on_event)

    def on_event(self, e: Event) -> None:
        if isinstance(e, JobStarted):
            self.job_status.labels(*_safe(e.job)).set(_STATUS["RUNNING"])
        elif isinstance(e, PipelineStarted):
            self.pipeline_status.labels(*_safe(e.job, e.pipeline)).set(_STATUS["RUNNING"])
            if e.attempt > 1:
                self.restarts.labels(*_safe(e.job, e.pipeline)).inc()
        elif isinstance(e, EpochCommitted):
            self.epochs.labels(*_safe(e.job, e.pipeline)).inc()
            self.last_epoch.labels(*_safe(e.job, e.pipeline)).set(e.epoch)
            self.epoch_seconds.labels(*_safe(e.job, e.pipeline)).observe(e.seconds)
            for c in e.commits:
                labels = _safe(e.job, e.pipeline, c.sink, self._table(e.job, c.table))
                if c.skipped:
                    self.replays.labels(*labels).inc()
                else:
                    self.rows.labels(*labels).inc(c.rows)
                    if c.seconds is not None:
                        self.commit_seconds.labels(*labels).observe(c.seconds)
        elif isinstance(e, SourceProgress):
            self.input_rows.labels(*_safe(e.job, e.pipeline)).inc(e.input_rows)
            for topic, partition, behind in e.lag:
                self.lag.labels(*_safe(e.job, e.pipeline, topic, str(partition))).set(behind)
            for source, name, table, value in e.gauges:
                gauge = self.source_gauges.get(name)
                if gauge is not None:
                    labels = [e.job, e.pipeline, source] + ([self._table(e.job, table)] if name.startswith("snapshot_") else [])
                    gauge.labels(*_safe(*labels)).set(value)
            with self._event_times_lock:
                for source, ms in e.event_time_ms:
                    key = (e.job, e.pipeline, source)
                    self._event_times[key] = max(ms / 1000.0, self._event_times.get(key, float("-inf")))
        elif isinstance(e, StateChanged):
            key = (e.job,) if e.kind == "job" else (e.job, e.entity)
            states = self._states.setdefault(key, set())
            states.update(e.states)
            states.add(e.state)
            gauge = self.job_state if e.kind == "job" else self.pipeline_state
            for state in states:
                gauge.labels(*_safe(*key, state)).set(1 if state == e.state else 0)
        elif isinstance(e, PipelineFinished):
            self.pipeline_status.labels(*_safe(e.job, e.pipeline)).set(_STATUS.get(e.status, 4))
        elif isinstance(e, JobFinished):
            self.job_status.labels(*_safe(e.job)).set(_STATUS.get(e.status, 4))
            with self._event_times_lock:  # a lag that grows for a job that ended would page someone
                for key in [k for k in self._event_times if k[0] == e.job]:
                    del self._event_times[key]

    def _table(self, job: str, table: str) -> str:
        """The table label: the table itself for the first ``table_limit``
        tables of the job (in the order they first commit), else
        :data:`OTHER_TABLES`. The engine's own rows (``*``: rows in, dead
        letters) are not a table and always keep their label."""
        if table == "*":
            return table
        with self._tables_lock:
            known = self._tables.setdefault(job, set())
            if table in known:
                return table
            if len(known) < self._limits.get(job, self.table_limit):
                known.add(table)
                return table
        return OTHER_TABLES


class _EventTime:
    """The event-time series, computed when scraped: the newest applied
    change's source time, and now minus it."""

    def __init__(self, metrics: PrometheusMetrics) -> None:
        self.metrics = metrics

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        labels = ["job", "pipeline", "source"]
        return (
            GaugeMetricFamily("streaming_engine_source_last_event_timestamp_seconds",
                              "Source time of the newest change applied (Debezium: source.ts_ms), epoch seconds",
                              labels=labels),
            GaugeMetricFamily("streaming_engine_source_lag_seconds",
                              "Now minus the source time of the newest change applied (grows while none arrives)",
                              labels=labels),
        )

    def describe(self):  # noqa: ANN201 - prometheus_client's collector protocol
        return list(self._families())

    def collect(self):  # noqa: ANN201
        last, lag = self._families()
        with self.metrics._event_times_lock:
            times = dict(self.metrics._event_times)
        now = time.time()
        for key, at in sorted(times.items()):
            labels = _safe(*key)
            last.add_metric(labels, at)
            lag.add_metric(labels, max(0.0, now - at))
        return [last, lag]


def _safe(*values: str) -> list[str]:
    return [redact_text(str(v)) for v in values]
