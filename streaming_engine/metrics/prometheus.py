"""Prometheus metrics per job, pipeline and table, from lifecycle events.

One registry and one HTTP server per process (``PrometheusMetrics.shared``);
every job run in the process attaches to it. Labels are stable configured
names (job name, pipeline key, sink uid, table id), never counters, and
never secrets: every label value goes through :func:`redact.redact_text`.
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


class PrometheusMetrics:
    _shared: ClassVar["PrometheusMetrics | None"] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, port: int | None = None):
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
                if c.skipped:
                    self.replays.labels(*_safe(e.job, e.pipeline, c.sink, c.table)).inc()
                else:
                    self.rows.labels(*_safe(e.job, e.pipeline, c.sink, c.table)).inc(c.rows)
        elif isinstance(e, SourceProgress):
            self.input_rows.labels(*_safe(e.job, e.pipeline)).inc(e.input_rows)
            for topic, partition, behind in e.lag:
                self.lag.labels(*_safe(e.job, e.pipeline, topic, str(partition))).set(behind)
        elif isinstance(e, PipelineFinished):
            self.pipeline_status.labels(*_safe(e.job, e.pipeline)).set(_STATUS.get(e.status, 4))
        elif isinstance(e, JobFinished):
            self.job_status.labels(*_safe(e.job)).set(_STATUS.get(e.status, 4))


def _safe(*values: str) -> list[str]:
    return [redact_text(str(v)) for v in values]
