"""Run a compiled job: one streaming query per pipeline, a restart strategy,
and a summary of what was committed.

BATCH jobs run the same plan with an available-now trigger (one commit path
for both modes) and return when every pipeline finished; STREAMING jobs run
until stopped (SIGTERM/SIGINT), ``timeout_s`` passes or every pipeline
committed ``stop_after_epochs`` epochs. A failed pipeline is restarted from
its checkpoint as its restart strategy says (``runtime/restart.py``: by
default up to ``job.retry.times`` times, ``job.retry.interval.seconds``
apart), unless its error cannot heal (a failed Assert, a config error); the
others go on committing meanwhile. Every step is an event (``events.py``):
the control plane's job master follows the run through them.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from streaming_engine.checkpoint import ledger
from streaming_engine.errors import EngineError
from streaming_engine.job import CompiledJob
from streaming_engine.plan.physical import slug
from streaming_engine.runtime.events import (
    EpochCommitted,
    Event,
    EventBus,
    JobFinished,
    JobStarted,
    JobStopping,
    PipelineFailed,
    PipelineReplanned,
    PipelineFinished,
    PipelineStarted,
    PipelineStarting,
    SourceProgress,
)
from streaming_engine.runtime import restart
from streaming_engine.runtime.pipeline import PipelineRunner
from streaming_engine.runtime.restart import RestartTracker

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("streaming_engine.runtime")


@dataclass
class _Running:
    runner: PipelineRunner
    restarts: RestartTracker
    query: "StreamingQuery | None" = None  # None: not started yet, or waiting for a restart
    attempt: int = 1
    done: bool = False
    error: str | None = None
    reported: int = -1  # the newest micro-batch whose progress was published
    start_at: float = 0.0  # monotonic time of the next (re)start while ``query`` is None
    job: CompiledJob | None = None  # what the pipeline was planned from (planned again when a schema changes)


@dataclass
class JobResult:
    status: str  # FINISHED | FAILED | CANCELED | SAVEPOINT_DONE
    error: str | None = None
    # what THIS run committed per (pipeline, sink, table), from its epoch
    # events; `streaming-engine status` reads the whole history from the ledger
    committed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.status in ("FINISHED", "CANCELED", "SAVEPOINT_DONE") else 1


def run_job(
    job: CompiledJob,
    master: str = "local[2]",
    deploy_mode: str = "client",
    spark: "SparkSession | None" = None,
    bus: EventBus | None = None,
    stop_after_epochs: int | None = None,
    timeout_s: float | None = None,
    print_summary: bool = True,
) -> int:
    result = execute(job, master, spark, bus, stop_after_epochs, timeout_s, count_rows=print_summary)
    if print_summary:
        print_result(job, result)
    return result.exit_code


def execute(
    job: CompiledJob,
    master: str = "local[2]",
    spark: "SparkSession | None" = None,
    bus: EventBus | None = None,
    stop_after_epochs: int | None = None,
    timeout_s: float | None = None,
    count_rows: bool = False,
    stop: threading.Event | None = None,
    savepoint: threading.Event | None = None,
    maintain: Sequence[str] = (),
) -> JobResult:
    """Run the job to its end. ``stop``: set it (or send SIGTERM/SIGINT) to
    stop the job; ``savepoint``: set it (then ``stop``) to drain instead: every
    running epoch commits, none starts after it, the job ends SAVEPOINT_DONE.
    ``maintain``: more Delta tables of the job (the control plane's history)
    compacted and vacuumed between epochs like its ledger.
    The narrow API the control plane drives a run with."""
    from streaming_engine.runtime.session import add_python_files, build_spark_session, release_session, required_extras

    dag = job.dag
    bus = bus or EventBus()
    spark = spark or build_spark_session(dag.job_name, master, conf=dag.env.spark, extras=required_extras(job.raw))
    add_python_files(spark, job.raw)
    compiled = job
    job = _as_last_planned(spark, job)  # raises what planning it so raised: the run fails before it starts
    dag = job.dag
    ledger_path = ledger.ledger_path(dag.env.checkpoint_dir, slug(dag.job_name))
    _attach_metrics(job, bus)
    bus.subscribe(_log_event)

    # the ledger is created when a query start has read its targets (PipelineRunner._open_sinks)
    runners = [PipelineRunner(spark.newSession(), dag, p, bus, ledger_path) for p in job.plan.pipelines]
    runners[0].maintains_ledger = True  # the job's own tables: maintained by one pipeline
    runners[0].also_maintained = tuple(maintain)
    epochs: dict[str, int] = {r.pipeline.key: 0 for r in runners}
    summary = ledger.Summary()  # bounded by the number of tables, not of epochs
    bus.subscribe(lambda e: _count_epoch(e, epochs, summary))
    from streaming_engine.plan.render import to_json

    bus.publish(JobStarted(dag.job_name, dag.env.job_mode, tuple(p.name for p in job.plan.pipelines),
                           to_json(job) if job is not compiled else ""))

    stop = stop or threading.Event()
    _install_signal_handlers(stop)
    running = [_Running(r, restart.tracker(dag.env), job=job) for r in runners]
    try:
        status, error = _supervise(bus, running, epochs, stop, stop_after_epochs, timeout_s, savepoint)
    except EngineError as e:
        status, error = "FAILED", str(e)
    except Exception as e:  # noqa: BLE001 - a bug of the supervisor: the job fails, said why; never a silent end
        log.exception("the job's supervisor failed", extra={"job": dag.job_name})
        status, error = "FAILED", f"the engine's supervisor failed: {type(e).__name__}: {e}"
    finally:
        for item in running:
            if item.query is not None and item.query.isActive:
                item.runner.stopping = True
                item.query.stop()
            if not item.done:  # left by an error of the supervisor itself
                item.done = True
                _finished(bus, item, "CANCELED")
        for r in runners:
            release_session(r.spark)
    bus.publish(JobFinished(dag.job_name, status, error))
    committed = summary.rows()
    for row in committed:
        row["table_rows"] = _current_rows(spark, row["target"]) if count_rows else None
    return JobResult(status, error, committed)


def _current_rows(spark: "SparkSession", target: str) -> int | None:
    """Rows in a Delta target now (None when the target is not a Delta table)."""
    from delta.tables import DeltaTable

    try:
        if DeltaTable.isDeltaTable(spark, target):
            return spark.read.format("delta").load(target).count()
    except Exception:  # a summary must not fail a finished job
        return None
    return None


def _supervise(
    bus: EventBus,
    running: list[_Running],
    epochs: dict[str, int],
    stop: threading.Event,
    stop_after_epochs: int | None,
    timeout_s: float | None,
    savepoint: threading.Event | None = None,
) -> tuple[str, str | None]:
    """Start every pipeline, watch them, restart a failed one when its
    strategy allows: never by sleeping in this loop, so the other pipelines
    go on committing and a stop is heard while a restart waits."""
    deadline = time.monotonic() + timeout_s if timeout_s else None
    while True:
        if savepoint is not None and savepoint.is_set():
            return _drain_all(bus, running)
        if stop.is_set() or (deadline and time.monotonic() > deadline):
            bus.publish(JobStopping(running[0].runner.dag.job_name if running else "", "stop requested"
                                    if stop.is_set() else f"timeout of {timeout_s} s"))
            _cancel_all(bus, running)
            return "CANCELED", None
        for item in running:
            if item.done:
                continue
            if item.query is None:
                if time.monotonic() >= item.start_at and _launch(bus, item):
                    return _fail_job(bus, running, item)
                continue
            _report_progress(bus, item)
            q = item.query
            if q.isActive:
                enough = stop_after_epochs is not None and epochs[item.runner.pipeline.key] >= stop_after_epochs
                if enough:
                    item.runner.stopping = True
                    q.stop()
                    _report_progress(bus, item)  # batches that ended while it stopped
                    item.done = True
                    _finished(bus, item, "FINISHED")
                continue
            _report_progress(bus, item)  # the last batches may have ended after the look above
            exc = q.exception()
            if exc is None:
                item.done = True
                try:
                    item.runner.finish()
                except EngineError as e:
                    item.error = str(e)
                    bus.publish(PipelineFailed(item.runner.dag.job_name, item.runner.pipeline.key, item.attempt, str(e)))
                    _finished(bus, item, "FAILED", str(e))
                    return _fail_job(bus, running, item)
                _finished(bus, item, "FINISHED")
                continue
            if _failed(bus, item, _error_text(exc)):
                return _fail_job(bus, running, item)
        if all(i.done for i in running):
            return "FINISHED", None
        _wait_a_little(running)


def _as_last_planned(spark: "SparkSession", job: CompiledJob) -> CompiledJob:
    """The job as its sources were planned when it last ran (``checkpoint.planned``): planned again when
    a source's stored tables differ from the fresh plan's (a column a lenient source keeps after the
    database dropped it), else ``job`` itself."""
    from streaming_engine.checkpoint import planned
    from streaming_engine.plan.physical import checkpoint_location

    now = {v.id: v.schema for v in job.dag.vertices if v.kind == "source"}
    before = {}
    for p in job.plan.pipelines:
        before.update({k: d for k, d in planned.read(spark, checkpoint_location(job.dag, p.key)).items()
                       if k in now and d != now[k]})
    if not before:
        return job
    try:
        again = job.recompile(before)
    except EngineError:
        log.error("the job's sources were planned differently when it last ran; planning it so again failed",
                  extra={"sources": sorted(before)})
        raise
    changed = sorted(k for k in before if again.dag.vertex(k).schema != now[k])
    if changed:
        log.warning("sources planned as when the job last ran", extra={"sources": changed})
        return again
    return job


def _launch(bus: EventBus, item: _Running) -> bool:
    """Start (or restart) the pipeline's query; True when it failed for good."""
    r = item.runner
    bus.publish(PipelineStarting(r.dag.job_name, r.pipeline.key, item.attempt))
    try:
        r.stopping = False
        item.query = r.start()
    except Exception as e:  # noqa: BLE001 - a failed start is a pipeline failure like any other
        from streaming_engine.runtime.pipeline import _short  # the JVM cause, not py4j's "An error occurred while calling"

        return _failed(bus, item, str(e) if isinstance(e, EngineError) else _short(e))
    bus.publish(PipelineStarted(r.dag.job_name, r.pipeline.key, r.checkpoint, item.attempt))
    return False


def _failed(bus: EventBus, item: _Running, message: str) -> bool:
    """The pipeline failed: schedule its restart, or (True) end it FAILED."""
    r = item.runner
    if restart.replan_requested(message) and item.job is not None:
        return _replan(bus, item, message)
    delay = item.restarts.on_failure(time.monotonic()) if restart.retriable(message, r.dag.job_name) else None
    bus.publish(PipelineFailed(r.dag.job_name, r.pipeline.key, item.attempt, message, delay))
    if delay is None:
        return _failed_for_good(bus, item, message)
    log.warning(
        "restarting pipeline",
        extra={"pipeline": r.pipeline.name, "attempt": item.attempt + 1, "in_seconds": round(delay, 3),
               "strategy": item.restarts.describe(), "error": message},
    )
    item.query = None
    item.attempt += 1
    item.start_at = time.monotonic() + delay
    return False


def _failed_for_good(bus: EventBus, item: _Running, message: str) -> bool:
    item.error = message
    item.done = True
    _finished(bus, item, "FAILED", message)
    return True


def _replan(bus: EventBus, item: _Running, message: str) -> bool:
    """A source reported that a table's columns changed while the job ran:
    plan the job again from its config (the source reads the tables' columns
    again; transforms and sinks are planned for them: a transform that no
    longer fits fails here, naming itself) and start the pipeline again at
    once from its checkpoint. No restart of the strategy is used. True when
    the new plan cannot run (the pipeline then fails for good)."""
    r = item.runner
    assert item.job is not None
    before = {t.table_id: {c.name: c.type for c in t.columns} for t in r.combined_dataset().tables}
    found = restart.found_columns(message)  # columns the source saw in its records (it has no catalog to read)
    planned = {v.id: v.schema.with_found(found) for v in item.job.dag.vertices if v.kind == "source"}
    try:
        job = item.job.recompile(planned)
    except EngineError as e:
        text = f"{message}; planning the job again for the change failed: {e}"
        bus.publish(PipelineFailed(r.dag.job_name, r.pipeline.key, item.attempt, text, None))
        return _failed_for_good(bus, item, text)
    pipeline = next((p for p in job.plan.pipelines if p.key == r.pipeline.key), None)
    new = PipelineRunner(r.spark, job.dag, pipeline, r.bus, r.ledger_path) if pipeline is not None else None
    added = _changed_columns(before, new.combined_dataset().tables if new is not None else ())
    if new is None or not added:
        text = (f"{message}; planned again, the source still reads the same columns (the change was undone "
                "since): set the table's schema.change.behavior = ignore until the job is past the change (the "
                "column's values of that time are not read), then set it back") if new is not None else (
                f"{message}; planned again, the job has no pipeline {r.pipeline.key} any more")
        bus.publish(PipelineFailed(r.dag.job_name, r.pipeline.key, item.attempt, text, None))
        return _failed_for_good(bus, item, text)
    r.dag, r.pipeline, r._maintenance = job.dag, pipeline, None  # type: ignore[assignment]
    item.job = job
    from streaming_engine.plan.render import to_json

    bus.publish(PipelineReplanned(r.dag.job_name, r.pipeline.key, item.attempt, message, added, to_json(job)))
    log.warning("planned the pipeline again for a schema change",
                extra={"pipeline": r.pipeline.name, "added": list(added), "change": message})
    item.query = None
    item.attempt += 1
    item.start_at = time.monotonic()
    return False


def _changed_columns(before: dict[str, dict[str, str]], tables: Any) -> tuple[str, ...]:
    """The columns a new plan reads that the old one (``before``: table -> column -> type) did not, or reads
    as another type or by a new name; and those it no longer reads (a source under evolve drops them)."""
    out = []
    for t in tables:
        was_cols = before.get(t.table_id)
        if was_cols is None:
            continue
        renamed = set()
        for c in t.columns:
            was = was_cols.get(c.name)
            if was is None and c.former and c.former[-1] in was_cols:
                renamed.add(c.former[-1])
                out.append(f"{t.table_id}.{c.name} (renamed from {c.former[-1]})")
            elif was != c.type:
                out.append(f"{t.table_id}.{c.name}" + (f" ({was} -> {c.type})" if was is not None else ""))
        names = set(t.names)
        out += [f"{t.table_id}.{n} (dropped)" for n in was_cols if n not in names and n not in renamed]
    return tuple(out)


def _fail_job(bus: EventBus, running: list[_Running], failed: _Running) -> tuple[str, str | None]:
    _cancel_all(bus, running)
    return "FAILED", f"{failed.runner.pipeline.name}: {failed.error}"


def _drain_all(bus: EventBus, running: list[_Running]) -> tuple[str, str | None]:
    """Stop with a savepoint: no pipeline starts another epoch; each one's
    epoch in flight commits, then its query stops between epochs. A pipeline
    waiting for a restart stands at its last commit already."""
    bus.publish(JobStopping(running[0].runner.dag.job_name if running else "", "stop with a savepoint", True))
    failed: _Running | None = None
    while True:
        for item in running:
            if item.done:
                continue
            q = item.query
            if q is None:
                item.done = True
                _finished(bus, item, "SAVEPOINT_DONE")
                continue
            if q.isActive:
                # between epochs, and Spark done with the last one (its commit log written): nothing to interrupt
                if item.runner.drain() and not _trigger_active(q):
                    item.runner.stopping = True
                    q.stop()
                else:
                    continue
            _report_progress(bus, item)
            exc = q.exception()
            message = _error_text(exc) if exc is not None else None
            item.done = True
            if message is None or "RUNTIME.DRAINED" in message:
                _finished(bus, item, "SAVEPOINT_DONE")
            else:  # it failed while draining: no savepoint
                item.error = message
                bus.publish(PipelineFailed(item.runner.dag.job_name, item.runner.pipeline.key, item.attempt, message))
                _finished(bus, item, "FAILED", message)
                failed = failed or item
        if all(i.done for i in running):
            return ("FAILED", f"{failed.runner.pipeline.name}: {failed.error}") if failed else ("SAVEPOINT_DONE", None)
        time.sleep(0.05)


def _trigger_active(q: "StreamingQuery") -> bool:
    """Spark is inside a trigger: planning a batch, running it, or writing its
    commit log after foreachBatch returned."""
    try:
        return bool((q.status or {}).get("isTriggerActive"))
    except Exception:  # the query is going away
        return False


def _cancel_all(bus: EventBus, running: list[_Running]) -> None:
    for item in running:
        if item.done:
            continue
        if item.query is not None:
            item.runner.stopping = True
            item.query.stop()
            _report_progress(bus, item)
        item.done = True
        _finished(bus, item, "CANCELED")


def _report_progress(bus: "EventBus | None", item: "_Running") -> None:
    """A SourceProgress event for each micro-batch Spark finished since the last look."""
    if bus is None:
        return
    try:
        recent = item.query.recentProgress  # every batch since the last look, not only the newest
    except Exception:  # the query is going away
        return
    for progress in recent or []:
        p = progress if isinstance(progress, dict) else json.loads(progress.json)
        batch = int(p.get("batchId", -1))
        if batch > item.reported:
            item.reported = batch
            _publish_progress(bus, item, batch, p)


def _publish_progress(bus: "EventBus", item: "_Running", batch: int, p: dict) -> None:
    from streaming_engine.runtime.rows import observed_event_times

    r = item.runner
    sources = list(p.get("sources") or [])
    plugins = [(v.members[0], r.dag.vertex(v.members[0]).plugin) for v in r.pipeline.vertices if v.kind == "source"]
    for uid, plugin in plugins:  # first: the gauges then see what the hook did (a confirmed source position)
        try:
            plugin.on_progress(r.spark, sources)  # type: ignore[attr-defined]
        except Exception as e:  # bookkeeping only: the epoch is committed either way
            log.warning("source progress hook failed", extra={"pipeline": r.pipeline.name, "error": str(e)[:300]})
    gauges = []
    for uid, plugin in plugins:
        try:
            gauges += [(uid, name, table, float(value)) for name, table, value in plugin.gauges(r.spark, sources)]  # type: ignore[attr-defined]
        except Exception as e:  # metrics only: the epoch is committed either way
            log.warning("source gauges failed", extra={"pipeline": r.pipeline.name, "error": str(e)[:300]})
    bus.publish(SourceProgress(r.dag.job_name, r.pipeline.key, batch, int(p.get("numInputRows") or 0),
                               tuple(_partition_lag(sources)),
                               tuple(observed_event_times(p.get("observedMetrics"))), tuple(gauges)))


def _partition_lag(sources: list) -> "list[tuple[str, int, int]]":
    """Per (topic, partition): newest offset Spark saw minus the batch's end offset."""
    out = []
    for s in sources:
        try:
            latest, end = s.get("latestOffset"), s.get("endOffset")
            latest = json.loads(latest) if isinstance(latest, str) else latest
            end = json.loads(end) if isinstance(end, str) else end
        except (ValueError, AttributeError):
            continue
        if not isinstance(latest, dict) or not isinstance(end, dict):
            continue
        for topic, parts in latest.items():
            if not isinstance(parts, dict):
                continue
            for partition, newest in parts.items():
                done = (end.get(topic) or {}).get(partition)
                if isinstance(newest, int) and isinstance(done, int):
                    out.append((topic, int(partition), max(0, newest - done)))
    return out


def _wait_a_little(running: list[_Running], seconds: float = 0.2) -> None:
    """Sleep up to ``seconds``, waking as soon as a running query ends or a
    restart is due."""
    waiting = [i.start_at for i in running if not i.done and i.query is None]
    if waiting:
        seconds = max(0.0, min(seconds, min(waiting) - time.monotonic()))
    active = [i for i in running if not i.done and i.query is not None]
    if not active:
        time.sleep(seconds)
        return
    try:
        active[0].query.awaitTermination(seconds)  # type: ignore[union-attr]
    except Exception:  # it failed: the supervisor reads q.exception() next round
        pass


def _finished(bus: EventBus | None, item: _Running, status: str, error: str | None = None) -> None:
    if bus is not None:
        r = item.runner
        bus.publish(PipelineFinished(r.dag.job_name, r.pipeline.key, status, error))


def _error_text(exc: Any) -> str:
    text = getattr(exc, "desc", None) or str(exc)
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    for ln in reversed(lines):  # the Python error raised inside foreachBatch, when there is one
        if "streaming_engine.errors." in ln or ln.startswith(("RuntimeFailure", "CommitError", "EngineError")):
            return ln.split("errors.", 1)[-1].strip()
    return lines[0] if lines else repr(exc)


def _count_epoch(event: Event, epochs: dict[str, int], summary: ledger.Summary) -> None:
    if isinstance(event, EpochCommitted):
        epochs[event.pipeline] = epochs.get(event.pipeline, 0) + 1
        summary.add(event.pipeline, event.epoch, event.commits)


def _log_event(event: Event) -> None:
    fields = {k: v for k, v in event.__dict__.items() if k != "commits"}
    if isinstance(event, EpochCommitted):
        fields["rows"] = sum(c.rows for c in event.commits)
    log.info(type(event).__name__, extra={"event": fields})


def _attach_metrics(job: CompiledJob, bus: EventBus) -> None:
    if not job.dag.env.metrics_enabled:
        return
    from streaming_engine.metrics.prometheus import PrometheusMetrics

    metrics = PrometheusMetrics.shared(job.dag.env.metrics_port)
    metrics.attach(bus, table_limit=job.dag.env.metrics_table_limit)  # the job's own bound on table series
    print(f"metrics: http://127.0.0.1:{metrics.port}/metrics", file=sys.stderr)


def _install_signal_handlers(stop: threading.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())


def print_result(job: CompiledJob, result: JobResult) -> None:
    out = sys.stdout if result.status != "FAILED" else sys.stderr
    print(f"job {job.dag.job_name!r} {result.status}", file=out)
    if result.error:
        print(f"error: {result.error}", file=out)
    if result.status == "FINISHED" and not result.committed:
        print(
            "  nothing new to commit in this run: the input was committed before "
            "(`streaming-engine status -c <job file>` shows the commit ledger)",
            file=out,
        )
    for row in result.committed:
        now = f", {row['table_rows']} rows in the table now" if row.get("table_rows") is not None else ""
        print(
            f"  {row['table']} -> {row['target']}: {row['total_rows']} rows committed by {row['sink']} "
            f"over {row['epochs']} epoch(s) in this run (last epoch {row['last_epoch']}){now}",
            file=out,
        )
