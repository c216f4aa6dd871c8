"""The job master: one per run, the owner of the job's and its pipelines' states.

It follows SeaTunnel's ``JobMaster`` and Flink's: it gives the job an id,
takes the job's lease (one running instance per job), starts the run through
the runtime's narrow API (:func:`runtime.runner.execute` with an event bus and
a stop event), turns the runtime's events into checked state transitions
(:mod:`control.states`), records each in the job-history table
(:mod:`control.history`) and derives the job's end state from its pipelines'.
The runtime never imports this module: it publishes events, the master listens.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from typing import TYPE_CHECKING, Any

from streaming_engine.control import history, restore as plan_diff, savepoint
from streaming_engine.control.lease import Lease
from streaming_engine.control.states import (
    JobStatus as J, PipelineStatus as P, StateMachine, Transition, job_end_state, job_machine, pipeline_machine,
)
from streaming_engine.errors import EngineError
from streaming_engine.checkpoint.ledger import ledger_path
from streaming_engine.plan.physical import checkpoint_location, slug
from streaming_engine.plan.render import to_json
from streaming_engine.runtime.events import (
    Event, EventBus, JobStarted, JobStopping, PipelineFailed, PipelineFinished, PipelineReplanned, PipelineStarted, PipelineStarting,
    StateChanged,
)
from streaming_engine.runtime.runner import JobResult, execute

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from streaming_engine.job import CompiledJob

log = logging.getLogger("streaming_engine.control")

# the transitional state a job or pipeline passes through on its way to an end state
_VIA_JOB = {J.FAILED: J.FAILING, J.CANCELED: J.CANCELING, J.SAVEPOINT_DONE: J.DOING_SAVEPOINT}
_VIA_PIPELINE = {P.FAILED: P.FAILING, P.CANCELED: P.CANCELING, P.SAVEPOINT_DONE: P.DOING_SAVEPOINT}


def new_job_id() -> str:
    """A decimal id, as SeaTunnel's, ordered by creation time (ms) with random low digits."""
    return str(int(time.time() * 1000) * 10_000 + random.randrange(10_000))


def plans(job: "CompiledJob") -> dict[str, Any]:
    """The three plans as plain JSON data (what a savepoint keeps and a restore diffs against)."""
    return json.loads(to_json(job))


def config_hash(job: "CompiledJob") -> str:
    return hashlib.sha256(to_json(job).encode()).hexdigest()[:16]


class JobMaster:
    def __init__(self, job: "CompiledJob", master: str = "local[2]", job_id: str | None = None):
        self.job, self.spark_master = job, master
        self.job_id = job_id or new_job_id()
        self.name = job.dag.job_name
        self.stop = threading.Event()
        self.savepoint = threading.Event()  # set with stop: drain and record a savepoint
        self.state = job_machine()
        self.pipelines: dict[str, StateMachine] = {p.key: pipeline_machine(p.key) for p in job.plan.pipelines}
        self.bus = EventBus()
        self.bus.subscribe(self.on_event)
        self.restarts: dict[str, int] = {p.key: 0 for p in job.plan.pipelines}
        self.bug: EngineError | None = None  # an illegal transition seen while the job ran
        self.plans_now: dict[str, Any] | None = None  # the plans since a pipeline was planned again, else None
        self._plans_unrecorded: set[str] = set()  # pipelines whose history row should carry plans_now
        self.lost: EngineError | None = None  # the lease went to another run
        self._seq = 0
        self._pending: list[dict[str, Any]] = []
        self._writer: history.HistoryWriter | None = None
        self._lock = threading.Lock()
        env = job.dag.env
        self.history_path = history.history_path(env.checkpoint_dir, env.history_path)
        self.lease_path = f"{env.checkpoint_dir.rstrip('/')}/{slug(self.name)}/_lease"
        self.savepoint_dir = savepoint.directory(env.checkpoint_dir, slug(self.name))
        self.restored: plan_diff.PlanDiff | None = None  # run(restore=...): the changes since the savepoint
        for m in [self.state, *self.pipelines.values()]:
            self._record(m.history[0])

    # -- recording ---------------------------------------------------------------
    def _record(self, t: Transition, config: bool = False, detail: Any = None, job_id: str | None = None) -> None:
        with self._lock:
            self._seq += 1
            r = history.row(job_id or self.job_id, self._seq, self.name, t.entity, t.old, t.new, t.at, t.cause,
                            config_hash(self.job) if config else None, detail)
            if self._writer is None:
                self._pending.append(r)
            else:
                self._writer.add(r)

    def _move(self, m: StateMachine, new, cause: str | None = None, **kw: Any) -> None:
        try:
            t = m.move(new, cause)
        except EngineError as e:
            self.bug = self.bug or e
            log.error("illegal state transition", extra={"job_id": self.job_id, "error": str(e)})
            return
        log.info("state", extra={"job_id": self.job_id, "entity": t.entity, "from": t.old, "to": t.new, "cause": cause})
        self._record(t, **kw)
        kind = "job" if m is self.state else "pipeline"  # for metrics (a state-set per job and per pipeline)
        states = tuple(s.value for s in (J if kind == "job" else P))
        self.bus.publish(StateChanged(self.name, kind, t.entity, t.new, t.old, states))

    def _end(self, m: StateMachine, new, cause: str | None = None, **kw: Any) -> None:
        """Move to an end state through its transitional state where needed."""
        via = (_VIA_JOB if m is self.state else _VIA_PIPELINE).get(new)
        if new not in m.transitions[m.state] and via is not None and m.state is not via:
            self._move(m, via, cause)
        self._move(m, new, cause, **kw)

    # -- the run ------------------------------------------------------------------
    def run(self, spark: "SparkSession | None" = None, stop_after_epochs: int | None = None,
            timeout_s: float | None = None, count_rows: bool = False, restore: str | None = None) -> JobResult:
        """Run the job attached: returns when it reached an end state.
        ``restore``: the job id of a savepoint to continue from (after a plan
        diff that refuses what would corrupt the targets)."""
        from streaming_engine.runtime.session import build_spark_session, required_extras

        env = self.job.dag.env
        self._move(self.state, J.CREATED, config=True, detail={"plans": plans(self.job)})
        self._move(self.state, J.PENDING, "waiting for the Spark session and the job's lease")
        lease = None
        try:
            spark = spark or build_spark_session(self.name, self.spark_master, conf=env.spark,
                                                 extras=required_extras(self.job.raw))
            self._start_history(spark)
            lease = Lease(spark, self.lease_path, self.name, self.job_id, env.job_lease_seconds)
            dead = lease.acquire()
            if restore is not None:
                self.restored = self._check_restore(spark, restore)
        except EngineError as e:
            return self._refused(str(e), lease)
        except Exception as e:  # noqa: BLE001 - a submission that cannot start is a failed job, said why
            return self._refused(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", lease)
        if dead is not None and dead.job_id not in ("?", self.job_id):
            # the dead run's job: recorded for its id (a reader ignores it if that run did record its end)
            self._record(Transition("job", None, J.UNKNOWABLE.value, time.time(),
                                    f"its driver ({dead.host}:{dead.pid}) ended without releasing the job's lease; "
                                    f"job {self.job_id} took it over"), job_id=dead.job_id)
        lease.keep(self._lease_lost, lambda sp: self.request_stop(savepoint=sp))
        for m in self.pipelines.values():
            self._move(m, P.SCHEDULED)
        cause = f"lease {self.lease_path} held"
        if self.restored is not None:
            cause += f"; restored from the savepoint of job {restore}"
        self._move(self.state, J.SCHEDULED, cause,
                   detail={"restored_from": restore, "changes": self.restored.allowed} if self.restored else None)
        try:
            try:
                result = execute(self.job, self.spark_master, spark, self.bus, stop_after_epochs, timeout_s,
                                 count_rows=count_rows, stop=self.stop, savepoint=self.savepoint,
                                 maintain=(self.history_path,))  # compacted and vacuumed like the ledger
            except Exception as e:  # noqa: BLE001 - the run broke: its end state is still recorded, with the cause
                log.exception("the run failed", extra={"job_id": self.job_id})
                result = JobResult("FAILED", f"the run failed: {type(e).__name__}: {e}")
                for m in self.pipelines.values():
                    if not m.state.terminal:
                        self._end(m, P.CANCELED, "the run failed")
            saved = self._save(spark) if result.status == "SAVEPOINT_DONE" else None
            return self._finish(result, saved)  # the end state recorded before the lease is given back
        finally:
            lease.release()

    def savepoint_path(self, job_id: str) -> str:
        return f"{self.savepoint_dir}/{job_id}.json"

    def _check_restore(self, spark: "SparkSession", job_id: str) -> plan_diff.PlanDiff:
        saved = savepoint.read(spark, self.savepoint_path(job_id), job_id)
        d = plan_diff.diff(saved["plans"], plans(self.job))
        reasons = list(d.refused) + savepoint.check_checkpoints(spark, saved)
        if reasons:
            raise EngineError("JOB.RESTORE_REFUSED", {"job": self.name, "job_id": job_id, "reasons": "; ".join(reasons)})
        return d

    def _save(self, spark: "SparkSession") -> str | Exception:
        """Record the drained job's savepoint; its path, or why it could not be written."""
        env = self.job.dag.env
        try:
            data = savepoint.record(
                spark, self.job_id, self.name, config_hash(self.job), self.plans_now or plans(self.job),
                {p.key: checkpoint_location(self.job.dag, p.key) for p in self.job.plan.pipelines},
                ledger_path(env.checkpoint_dir, slug(self.name)),
            )
            path = self.savepoint_path(self.job_id)
            savepoint.write(spark, path, data)
            return path
        except Exception as e:  # noqa: BLE001 - the job failed to record its savepoint: said in its end state
            return e

    def _start_history(self, spark: "SparkSession") -> None:
        writer = history.HistoryWriter(spark, self.history_path)
        with self._lock:
            for r in self._pending:
                writer.add(r)
            self._pending = []
            self._writer = writer

    def _refused(self, cause: str, lease: Lease | None) -> JobResult:
        for m in self.pipelines.values():
            self._end(m, P.CANCELED, "the job did not start")
        self._move(self.state, J.FAILED, cause)
        if lease is not None:
            lease.release()
        self._close_history()
        return JobResult("FAILED", cause)

    def request_stop(self, savepoint: bool = False) -> None:
        """Ask the running job to stop: with ``savepoint``, every pipeline's
        running epoch commits, no new one starts, and the job ends
        SAVEPOINT_DONE with a savepoint to restore from; else its queries
        stop now (an epoch in flight is replayed by the next run) and it ends
        CANCELED. Returns at once; the run ends on its own thread."""
        if savepoint:
            self.savepoint.set()
        self.stop.set()

    def _lease_lost(self, error: EngineError) -> None:
        self.lost = error
        self.stop.set()

    def _finish(self, result: JobResult, saved: "str | Exception | None" = None) -> JobResult:
        ends = [m.state for m in self.pipelines.values()]
        try:
            end = job_end_state(ends)  # type: ignore[arg-type]
        except EngineError as e:
            self.bug = self.bug or e
            end = J.FAILED
        error = result.error
        if result.status == "FAILED":  # the run failed beside its pipelines (its supervisor, the session)
            end = J.FAILED
        if self.lost is not None:
            end, error = J.FAILED, str(self.lost)
        if isinstance(saved, Exception):
            end, error = J.FAILED, f"the savepoint could not be recorded: {type(saved).__name__}: {saved}"
        if self.bug is not None:
            end, error = J.FAILED, f"{error + '; ' if error else ''}{self.bug}"
        metrics = {"committed": result.committed, "restarts": self.restarts,
                   "pipelines": {k: m.state.value for k, m in self.pipelines.items()}}
        if isinstance(saved, str) and end is J.SAVEPOINT_DONE:
            metrics["savepoint"] = saved
        self._end(self.state, end, error if end is not J.SAVEPOINT_DONE else f"savepoint {saved}", detail=metrics)
        self._close_history()
        status = end.value if end in (J.FINISHED, J.CANCELED, J.SAVEPOINT_DONE) else "FAILED"
        return JobResult(status, error, result.committed)

    def _close_history(self) -> None:
        if self._writer is not None:
            self._writer.close()
            if self._writer.failed:
                log.error("job history incomplete", extra={"job_id": self.job_id, "error": self._writer.failed})

    # -- events -> states ---------------------------------------------------------
    def on_event(self, e: Event) -> None:
        if isinstance(e, JobStarted) and e.plans:  # planned as when it last ran: what explain shows from now on
            self.plans_now = json.loads(e.plans)
            self._plans_unrecorded = set(self.pipelines)
        elif isinstance(e, PipelineStarting):
            m = self.pipelines[e.pipeline]
            if m.state is P.CREATED:  # a restart
                self._move(m, P.SCHEDULED, f"restart attempt {e.attempt}")
            recorded = e.pipeline in self._plans_unrecorded  # the history keeps the plans the run started with
            self._plans_unrecorded.discard(e.pipeline)
            self._move(m, P.DEPLOYING, f"attempt {e.attempt}",
                       detail={"plans": self.plans_now} if recorded else None)
        elif isinstance(e, PipelineStarted):
            self._move(self.pipelines[e.pipeline], P.RUNNING, f"attempt {e.attempt}, checkpoint {e.checkpoint}")
            if self.state.state is J.SCHEDULED:
                self._move(self.state, J.RUNNING)
        elif isinstance(e, PipelineFailed):
            m = self.pipelines[e.pipeline]
            self._move(m, P.FAILING, e.error)
            if e.restart_in is not None:
                self.restarts[e.pipeline] += 1
                self._move(m, P.CREATED, f"restarting from its checkpoint in {e.restart_in:.1f} s "
                                         f"(restart {self.restarts[e.pipeline]})")
            elif self.state.state in (J.SCHEDULED, J.RUNNING, J.CANCELING):
                self._move(self.state, J.FAILING, f"{e.pipeline}: {e.error}")
        elif isinstance(e, PipelineReplanned):  # its query stopped for a schema change; no restart is counted
            m = self.pipelines[e.pipeline]
            self._move(m, P.FAILING, e.change)
            if e.plans:
                self.plans_now = json.loads(e.plans)
            self._move(m, P.CREATED, f"planned again for a schema change (columns {', '.join(e.columns)})",
                       detail={"plans": self.plans_now} if e.plans else None)
        elif isinstance(e, JobStopping):
            if self.state.state in (J.SCHEDULED, J.RUNNING):
                self._move(self.state, J.DOING_SAVEPOINT if e.savepoint else J.CANCELING,
                           str(self.lost) if self.lost else e.reason)
        elif isinstance(e, PipelineFinished):
            m = self.pipelines[e.pipeline]
            end = {"FINISHED": P.FINISHED, "CANCELED": P.CANCELED, "SAVEPOINT_DONE": P.SAVEPOINT_DONE}.get(e.status, P.FAILED)
            self._end(m, end, e.error)
