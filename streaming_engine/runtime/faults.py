"""Crash injection for recovery tests: SIGKILL the driver at a named point.

``STREAMING_ENGINE_FAULT=<point>@<epoch>[:<sink uid>]`` kills the process the
first time the pipeline reaches that point in that epoch. Points:
``epoch_start``, ``before_sink``, ``after_sink`` (between two sinks' commits
of one epoch), ``before_ledger``, ``after_ledger`` (after every Delta commit,
before Spark's commit log). Unset in production: then this is a no-op.
"""

from __future__ import annotations

import os
import signal

ENV = "STREAMING_ENGINE_FAULT"


def _spec() -> tuple[str, int, str | None] | None:
    raw = os.environ.get(ENV)
    if not raw:
        return None
    point, _, rest = raw.partition("@")
    epoch, _, sink = rest.partition(":")
    try:
        return point, int(epoch), sink or None
    except ValueError:
        return None


def maybe_crash(point: str, epoch: int, sink: str | None = None) -> None:
    spec = _spec()
    if spec is None:
        return
    want_point, want_epoch, want_sink = spec
    if point == want_point and epoch == want_epoch and (want_sink is None or want_sink == sink):
        _kill_driver()


def _kill_driver() -> None:
    """SIGKILL the whole driver at once, the JVM first: a lost machine, not a
    clean shutdown (the JVM would otherwise run its shutdown hooks when it
    notices the Python process is gone)."""
    try:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None) if gateway is not None else None
        if proc is not None:
            os.kill(proc.pid, signal.SIGKILL)
    except Exception:
        pass
    os.kill(os.getpid(), signal.SIGKILL)
