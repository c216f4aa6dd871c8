"""Plain context objects handed to plugins at run time (instead of long argument lists)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from streaming_engine.checkpoint.record import CommitRecord  # noqa: F401  (what sinks return)
from streaming_engine.schema import Dataset

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SourceContext:
    spark: "SparkSession"
    job_name: str
    pipeline: str  # pipeline key
    vertex_id: str
    uid: str
    dataset: Dataset  # what the source must produce (plan-time schema)
    streaming: bool  # STREAMING job (keep producing) or BATCH (bounded)
    parallelism: int
    interval_ms: int  # trigger interval in STREAMING mode
    # envelope metadata columns nothing downstream reads: the runtime drops
    # them before the query, so a source may leave them null instead of
    # computing them (Spark cannot prune what a streaming file scan computes
    # for its metadata columns: row positions would be read for nothing)
    unread_metadata: tuple[str, ...] = ()


@dataclass(frozen=True)
class TransformContext:
    spark: "SparkSession"
    vertex_id: str
    input_names: tuple[str, ...]  # dataset names this transform reads (Sql uses them as view names)
    inputs: tuple[Dataset, ...]  # input schemas
    output: Dataset  # output schema (plan time)
    batch_id: int


@dataclass(frozen=True)
class EpochContext:
    """One sink's view of one epoch (micro-batch) of its pipeline."""

    spark: "SparkSession"
    job_name: str
    pipeline: str  # pipeline key
    sink_uid: str
    vertex_id: str
    batch_id: int  # the epoch: Spark's batch id, stable across restarts
    txn_app_id: Callable[[str], str]  # table id -> stable Delta txnAppId
    commit_parallelism: int = 1  # per-table Spark jobs (MERGEs, writes) a sink may run concurrently
    log_parallelism: int = 1  # per-table Delta log operations (state reads, commits of written files) at a time
    extras: dict[str, Any] = field(default_factory=dict)
    # builds :attr:`envelope` when a sink first asks for it (None: no envelope)
    envelope_of: "Callable[[], tuple[DataFrame, dict[str, tuple[int, ...]]] | None] | None" = None

    @functools.cached_property
    def envelope(self) -> "tuple[DataFrame, dict[str, tuple[int, ...]]] | None":
        """When the sink's input is a multi-table batch shuffled by table (the
        source batch itself, or the frames transforms made of it, in one
        envelope, each table's rows in one partition): that batch and, per table
        id, the ordinals of the batch columns holding the table's columns, so a
        sink may write every table in ONE pass instead of one job per table.
        Built on first use (a sink writing table by table never pays for it)."""
        return self.envelope_of() if self.envelope_of is not None else None
