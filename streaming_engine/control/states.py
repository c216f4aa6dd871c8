"""Job and pipeline states, SeaTunnel's names, with checked transitions.

Every state change goes through :meth:`StateMachine.move`, which refuses a
move the tables below do not allow: an illegal transition is a bug in the
control plane and fails loudly (``JOB.ILLEGAL_TRANSITION``), as Flink's
``JobStatus`` transitions and SeaTunnel's ``JobMaster`` do. A job's end state
is derived from its pipelines' (:func:`job_end_state`), as SeaTunnel's
``PhysicalPlan`` does.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from streaming_engine.errors import EngineError


class JobStatus(str, Enum):
    INITIALIZING = "INITIALIZING"  # the job master exists; the config is being compiled
    CREATED = "CREATED"  # plans built
    PENDING = "PENDING"  # waiting for its resources: the Spark session, the job's lease
    SCHEDULED = "SCHEDULED"  # lease held; pipelines being started
    RUNNING = "RUNNING"  # every pipeline started once
    FAILING = "FAILING"  # a pipeline failed for good: the others are being stopped
    DOING_SAVEPOINT = "DOING_SAVEPOINT"  # stop with a savepoint: the running epochs commit, no new one starts
    CANCELING = "CANCELING"  # stop requested
    FAILED = "FAILED"
    SAVEPOINT_DONE = "SAVEPOINT_DONE"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    UNKNOWABLE = "UNKNOWABLE"  # its driver died without recording an end (found by a later run)

    @property
    def terminal(self) -> bool:
        return self in _JOB_END


class PipelineStatus(str, Enum):
    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"  # its streaming query is starting (checkpoint, targets, source)
    RUNNING = "RUNNING"
    FAILING = "FAILING"  # it failed; a restart follows (-> CREATED) or it fails for good (-> FAILED)
    DOING_SAVEPOINT = "DOING_SAVEPOINT"
    CANCELING = "CANCELING"
    FAILED = "FAILED"
    SAVEPOINT_DONE = "SAVEPOINT_DONE"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"

    @property
    def terminal(self) -> bool:
        return self in _PIPELINE_END


J, P = JobStatus, PipelineStatus
HISTORY_KEPT = 64
_JOB_END = frozenset({J.FAILED, J.SAVEPOINT_DONE, J.CANCELED, J.FINISHED, J.UNKNOWABLE})
_PIPELINE_END = frozenset({P.FAILED, P.SAVEPOINT_DONE, P.CANCELED, P.FINISHED})

JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    J.INITIALIZING: frozenset({J.CREATED, J.FAILED, J.CANCELING}),
    J.CREATED: frozenset({J.PENDING, J.FAILED, J.CANCELING}),
    J.PENDING: frozenset({J.SCHEDULED, J.FAILED, J.CANCELING}),
    J.SCHEDULED: frozenset({J.RUNNING, J.FAILING, J.CANCELING, J.DOING_SAVEPOINT, J.FAILED}),
    J.RUNNING: frozenset({J.FINISHED, J.FAILING, J.CANCELING, J.DOING_SAVEPOINT}),
    J.FAILING: frozenset({J.FAILED}),
    J.CANCELING: frozenset({J.CANCELED, J.FAILING}),
    J.DOING_SAVEPOINT: frozenset({J.SAVEPOINT_DONE, J.FAILING}),
    **{s: frozenset() for s in _JOB_END},
}
# a driver that died leaves its job in whatever state it had: a later run records it UNKNOWABLE
for _s in JOB_TRANSITIONS:
    if not _s.terminal:
        JOB_TRANSITIONS[_s] = JOB_TRANSITIONS[_s] | {J.UNKNOWABLE}

PIPELINE_TRANSITIONS: dict[PipelineStatus, frozenset[PipelineStatus]] = {
    P.CREATED: frozenset({P.SCHEDULED, P.CANCELING, P.DOING_SAVEPOINT}),  # DOING_SAVEPOINT: while a restart waits
    P.SCHEDULED: frozenset({P.DEPLOYING, P.CANCELING, P.DOING_SAVEPOINT}),
    P.DEPLOYING: frozenset({P.RUNNING, P.FAILING, P.CANCELING}),
    P.RUNNING: frozenset({P.FINISHED, P.FAILING, P.CANCELING, P.DOING_SAVEPOINT}),
    P.FAILING: frozenset({P.FAILED, P.CREATED}),  # CREATED: restarted from its checkpoint (SeaTunnel's restore)
    P.CANCELING: frozenset({P.CANCELED, P.FAILED}),
    P.DOING_SAVEPOINT: frozenset({P.SAVEPOINT_DONE, P.FAILING}),
    **{s: frozenset() for s in _PIPELINE_END},
}


@dataclass(frozen=True)
class Transition:
    entity: str  # "job" or a pipeline key
    old: str | None
    new: str
    at: float  # epoch seconds
    cause: str | None = None


@dataclass
class StateMachine:
    """One entity's state. ``move`` is the only way to change it."""

    entity: str
    state: JobStatus | PipelineStatus
    transitions: dict
    # the latest transitions (the history table keeps all of them): bounded, as
    # a job restarted by exponential-delay for weeks moves four times a restart
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY_KEPT))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def move(self, new: JobStatus | PipelineStatus, cause: str | None = None) -> Transition:
        with self._lock:
            if new not in self.transitions[self.state]:
                raise EngineError(
                    "JOB.ILLEGAL_TRANSITION",
                    {"entity": self.entity, "old": self.state.value, "new": new.value,
                     "allowed": ", ".join(sorted(s.value for s in self.transitions[self.state])) or "none (terminal)"},
                )
            t = Transition(self.entity, self.state.value, new.value, time.time(), cause)
            self.state = new
            self.history.append(t)
            return t


def job_machine(entity: str = "job") -> StateMachine:
    return StateMachine(entity, J.INITIALIZING, JOB_TRANSITIONS,
                        deque([Transition(entity, None, J.INITIALIZING.value, time.time())], maxlen=HISTORY_KEPT))


def pipeline_machine(key: str) -> StateMachine:
    return StateMachine(key, P.CREATED, PIPELINE_TRANSITIONS,
                        deque([Transition(key, None, P.CREATED.value, time.time())], maxlen=HISTORY_KEPT))


def job_end_state(pipelines: list[PipelineStatus], savepoint: bool = False) -> JobStatus:
    """SeaTunnel's rule: any pipeline FAILED -> FAILED; else any CANCELED ->
    CANCELED; all SAVEPOINT_DONE (or FINISHED) after a savepoint -> SAVEPOINT_DONE;
    else FINISHED. Every pipeline must have ended."""
    if not all(p.terminal for p in pipelines):
        raise EngineError("JOB.ILLEGAL_TRANSITION", {
            "entity": "job", "old": "(pipelines running)", "new": "an end state",
            "allowed": "none until every pipeline ended: " + ", ".join(p.value for p in pipelines)})
    if P.FAILED in pipelines:
        return J.FAILED
    if P.CANCELED in pipelines:
        return J.CANCELED
    if savepoint or P.SAVEPOINT_DONE in pipelines:
        return J.SAVEPOINT_DONE
    return J.FINISHED
