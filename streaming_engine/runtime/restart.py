"""Restart strategies: when a failed pipeline starts again from its checkpoint.

Flink's three strategies with SeaTunnel's own keys for the first
(``env.restart.strategy``):

- ``fixed-delay`` (default): at most ``job.retry.times`` restarts per
  pipeline, ``job.retry.interval.seconds`` apart (SeaTunnel's meaning);
- ``exponential-delay``: ``restart.backoff.initial.seconds`` growing by
  ``restart.backoff.multiplier`` up to ``restart.backoff.max.seconds``, each
  delay varied by +-``restart.backoff.jitter``; after
  ``restart.backoff.reset.seconds`` without a failure the backoff starts over;
  no limit on attempts (a CDC job rides out an outage of any length);
- ``failure-rate``: restarts ``job.retry.interval.seconds`` apart while at most
  ``restart.failure_rate.max_failures`` failures fall within
  ``restart.failure_rate.interval.seconds``;
- ``none``: never.

A strategy is state per pipeline (:class:`RestartTracker`): pipelines restart
independently. Errors no restart can heal (:func:`retriable`) never restart.
"""

from __future__ import annotations

import random
import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from streaming_engine.config.models import EnvConfig

STRATEGIES = ("fixed-delay", "exponential-delay", "failure-rate", "none")

# Errors a restart cannot heal: the same input or setting fails the same way
# again. The engine's own conditions (an assertion, the config, the data (every
# record a dead letter), a schema
# conflict, a checkpoint behind its targets, the control plane), Spark's and
# Delta's errors whose SQLSTATE says so (class 42: the query cannot be analysed
# against the table, e.g. a column Delta's schema lacks; class 22: a data
# exception, which the replayed epoch's same rows raise again, e.g. Delta's
# DELTA_FAILED_TO_MERGE_FIELDS when a column's type conflicts with the
# target's; class 28: invalid authorization), and credentials or permissions
# refused by a client library.
_NOT_RETRIABLE_CONDITIONS = ("ASSERT.", "CONFIG.", "SCHEMA.", "CHECKPOINT.", "JOB.", "DATA.", "RUNTIME.NOT_AVAILABLE")
_NOT_RETRIABLE_SQLSTATES = ("42", "22", "28")
_NOT_RETRIABLE_CAUSES = (
    "[terminal]", "AuthenticationException", "AuthorizationException", "AccessDeniedException",
    "AccessControlException", "password authentication failed",
)
_CONDITION = re.compile(r"\[([A-Z][A-Z_]*(?:\.[A-Z_]+)+)\]")
_SQLSTATE = re.compile(r"SQLSTATE:?\s*([0-9A-Z]{5})")


SCHEMA_CHANGED = "RUNTIME.SCHEMA_CHANGED"


def replan_requested(message: str) -> bool:
    """Whether the failure is a source's report that a table's columns changed
    while the job ran (``[RUNTIME.SCHEMA_CHANGED]``): the pipeline is planned
    again from its config (the source reads the new columns) and restarted at
    once, without using a restart of its strategy."""
    return SCHEMA_CHANGED in _CONDITION.findall(message)


def found_columns(message: str) -> dict[str, list[tuple[str, str]]]:
    """The columns a source found in its records with a schema-change report, by table id: the
    ``[columns {"<table>": [["<name>", "<type>"], ...]}]`` it ends with (a source whose records carry
    their schema, e.g. Debezium events; a source that reads its catalog again names none)."""
    import json

    at = message.rfind("[columns {")
    if at < 0:
        return {}
    try:
        found, _ = json.JSONDecoder().raw_decode(message, at + len("[columns "))
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(t): [(str(c[0]), str(c[1])) for c in cols if isinstance(c, list) and len(c) == 2]
            for t, cols in found.items() if isinstance(cols, list)}


def retriable(message: str, job_name: str = "") -> bool:
    """Whether a restart may heal the failure ``message`` (a pipeline's error
    text). The job's name is left out of the look: a job called ``CONFIG.x``
    still restarts."""
    text = message
    if job_name:  # where the engine's messages name the job (not every occurrence: a job called "j" or "CONFIG")
        text = text.replace(f"job {job_name},", "job ,").replace(f"job {job_name!r}", "job ''")
    if any(c.startswith(_NOT_RETRIABLE_CONDITIONS) for c in _CONDITION.findall(text)):
        return False
    if any(s.startswith(_NOT_RETRIABLE_SQLSTATES) for s in _SQLSTATE.findall(text)):
        return False
    return not any(m in text for m in _NOT_RETRIABLE_CAUSES)


@dataclass
class RestartTracker:
    """One pipeline's restart state under one strategy."""

    strategy: str
    times: int = 3
    interval: float = 3.0
    initial: float = 1.0
    maximum: float = 300.0
    multiplier: float = 2.0
    jitter: float = 0.1
    reset_after: float = 3600.0
    max_failures: int = 3
    window: float = 300.0
    restarts: int = 0  # restarts granted so far
    _backoff: float | None = None
    _last_failure: float | None = None
    _failures: deque = field(default_factory=deque)

    def on_failure(self, now: float) -> float | None:
        """A failure at ``now`` (monotonic seconds): the delay before the
        restart, or None when the strategy gives up."""
        delay = self._delay(now)
        self._last_failure = now
        if delay is not None:
            self.restarts += 1
        return delay

    def _delay(self, now: float) -> float | None:
        if self.strategy == "none":
            return None
        if self.strategy == "fixed-delay":
            return self.interval if self.restarts < self.times else None
        if self.strategy == "failure-rate":
            self._failures.append(now)
            while self._failures and self._failures[0] < now - self.window:
                self._failures.popleft()
            return self.interval if len(self._failures) <= self.max_failures else None
        # exponential-delay
        if self._backoff is None or (self._last_failure is not None and now - self._last_failure > self.reset_after):
            self._backoff = self.initial
        base = min(self._backoff, self.maximum)
        self._backoff = min(self._backoff * self.multiplier, self.maximum)
        return max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter)))

    def describe(self) -> str:
        if self.strategy == "fixed-delay":
            return f"fixed-delay, {self.times} restart(s) {self.interval:g} s apart"
        if self.strategy == "failure-rate":
            return f"failure-rate, at most {self.max_failures} failure(s) per {self.window:g} s"
        if self.strategy == "exponential-delay":
            return f"exponential-delay from {self.initial:g} s to {self.maximum:g} s"
        return "none"


def tracker(env: "EnvConfig") -> RestartTracker:
    return RestartTracker(
        strategy=env.restart_strategy,
        times=env.job_retry_times,
        interval=float(env.job_retry_interval_seconds),
        initial=env.restart_backoff_initial_seconds,
        maximum=env.restart_backoff_max_seconds,
        multiplier=env.restart_backoff_multiplier,
        jitter=env.restart_backoff_jitter,
        reset_after=env.restart_backoff_reset_seconds,
        max_failures=env.restart_failure_rate_max_failures,
        window=env.restart_failure_rate_interval_seconds,
    )
