"""Lifecycle events: the seam metrics, history and the REST API subscribe to.

The runtime publishes; subscribers must be quick and must not raise (a
failing subscriber is logged and ignored, never fails a pipeline).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from streaming_engine.runtime.context import CommitRecord

log = logging.getLogger("streaming_engine.events")


@dataclass(frozen=True)
class Event:
    job: str


@dataclass(frozen=True)
class JobStarted(Event):
    mode: str
    pipelines: tuple[str, ...]
    # the job's plans (plan.render.to_json) when this run planned it otherwise than its config compiles:
    # as its sources were last planned (checkpoint.planned, a column a lenient source kept); else empty
    plans: str = ""


@dataclass(frozen=True)
class PipelineStarting(Event):
    """The pipeline's query is being started (attempt 1, or a restart)."""

    pipeline: str
    attempt: int = 1


@dataclass(frozen=True)
class PipelineStarted(Event):
    pipeline: str
    checkpoint: str
    attempt: int = 1


@dataclass(frozen=True)
class EpochCommitted(Event):
    pipeline: str
    epoch: int
    commits: tuple[CommitRecord, ...]
    seconds: float


@dataclass(frozen=True)
class TableMaintained(Event):
    """A maintenance task ran between two epochs (``checkpoint/maintenance.py``):
    ``task`` is "compact", "vacuum" or "log" (expired log files removed); ``files_after`` the table's files after
    a compaction (-1 for a VACUUM)."""

    pipeline: str
    task: str
    table: str
    seconds: float
    files_after: int = -1


@dataclass(frozen=True)
class SourceProgress(Event):
    """What Spark reported after a micro-batch: its input rows and, for
    sources with offsets per partition (Kafka), each partition's lag behind
    the newest offset Spark saw: ((topic, partition, records behind), ...);
    for sources whose records carry an event time (Debezium's ``source.ts_ms``),
    the newest event time the batch applied: ((source uid, epoch ms), ...),
    absent for a batch without such records; ``gauges``: what a source
    reports of itself (``Source.gauges``): ((source uid, name, table or "",
    value), ...), names from :data:`SOURCE_GAUGES`."""

    pipeline: str
    batch: int
    input_rows: int
    lag: tuple[tuple[str, int, int], ...] = ()
    event_time_ms: tuple[tuple[str, int], ...] = ()
    gauges: tuple[tuple[str, str, str, float], ...] = ()


# The gauges a source may report (Source.gauges), exported by the metrics as
# streaming_engine_source_<name>; a name outside this set is dropped.
SOURCE_GAUGES = {
    "backlog_bytes": "Bytes the source has not read yet (Postgres-CDC: WAL its replication slot keeps)",
    "snapshot_chunks_done": "Snapshot chunks of a table read and committed",
    "snapshot_chunks_total": "Snapshot chunks of a table, estimated (PostgreSQL: pg_class.reltuples / split size)",
}


@dataclass(frozen=True)
class PipelineFailed(Event):
    """The pipeline failed (its query, or its start). ``restart_in``: seconds
    until the restart strategy starts it again; None: it will not restart
    (the strategy gave up, or the error cannot heal), PipelineFinished follows."""

    pipeline: str
    attempt: int
    error: str
    restart_in: float | None = None


@dataclass(frozen=True)
class PipelineReplanned(Event):
    """A source found a table's columns changed while the job ran: the
    pipeline was planned again from the job's config (``columns``: what the
    new plan reads that the old one did not, per table) and starts again at
    once from its checkpoint; the epoch in flight is read again with them."""

    pipeline: str
    attempt: int
    change: str
    columns: tuple[str, ...] = ()
    plans: str = ""  # the job's plans as planned again (plan.render.to_json): what explain shows from now on


@dataclass(frozen=True)
class JobStopping(Event):
    """A stop was asked for (signal, timeout, the control plane): no
    pipeline restarts; running queries are stopped. ``savepoint``: a drain,
    every running epoch commits first and none starts after it."""

    reason: str
    savepoint: bool = False


@dataclass(frozen=True)
class PipelineFinished(Event):
    pipeline: str
    status: str  # FINISHED | FAILED | CANCELED | SAVEPOINT_DONE
    error: str | None = None


@dataclass(frozen=True)
class JobFinished(Event):
    status: str  # FINISHED | FAILED | CANCELED | SAVEPOINT_DONE
    error: str | None = None


@dataclass(frozen=True)
class StateChanged(Event):
    """The job or one of its pipelines moved to a new state (published by
    whoever owns the states: the control plane's job master). ``kind``: "job"
    or "pipeline"; ``entity``: "job" or the pipeline's key; ``states``: every
    state of its state set (a state-set metric exports each, 1 for the current
    one, 0 for the others)."""

    kind: str  # job | pipeline
    entity: str
    state: str
    previous: str | None = None
    states: tuple[str, ...] = ()


Subscriber = Callable[[Event], None]


@dataclass
class EventBus:
    _subscribers: list[Subscriber] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn)

    def publish(self, event: Event) -> None:
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception:  # a subscriber never fails the job
                log.exception("event subscriber failed", extra={"event": type(event).__name__})
