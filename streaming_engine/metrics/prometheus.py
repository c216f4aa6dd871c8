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
thousand tables cannot blow up the metric cardinality.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from streaming_engine.redact import redact_text
from streaming_engine.runtime.events import (
    EpochCommitted, Event, EventBus, JobFinished, JobStarted, PipelineFinished, PipelineStarted, SourceProgress,
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

    def attach(self, bus: EventBus) -> None:
        bus.subscribe(self.on_event)

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
        elif isinstance(e, PipelineFinished):
            self.pipeline_status.labels(*_safe(e.job, e.pipeline)).set(_STATUS.get(e.status, 4))
        elif isinstance(e, JobFinished):
            self.job_status.labels(*_safe(e.job)).set(_STATUS.get(e.status, 4))

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
            if len(known) < self.table_limit:
                known.add(table)
                return table
        return OTHER_TABLES


def _safe(*values: str) -> list[str]:
    return [redact_text(str(v)) for v in values]
