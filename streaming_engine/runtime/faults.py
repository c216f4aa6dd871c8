"""Crash injection for recovery tests: SIGKILL the driver at a named point.

``STREAMING_ENGINE_FAULT=<point>@<epoch>[:<sink uid>]`` kills the process the
first time the pipeline reaches that point in that epoch. Points:
``epoch_start``; ``before_sink`` and ``after_sink`` (around one sink's whole
commit: between two sinks' commits of one epoch); inside a Delta sink
``sink_files_written`` (a table's data files are written, its commit not
made) and ``sink_table_committed`` (one table committed, the sink's other
tables maybe not); ``before_ledger``, ``ledger_files_written`` (the ledger's
file written, not committed), ``after_ledger`` (after every commit, before
Spark's commit log). Unset in production: then this is a no-op.

``STREAMING_ENGINE_FAULT_ACTION=pause`` SIGSTOPs the driver's Python process
there instead (its JVM keeps running): a driver that froze (a long GC, a
suspended VM) and wakes up on SIGCONT while another driver of the job runs.
"""

from __future__ import annotations

import os
import signal

ENV = "STREAMING_ENGINE_FAULT"
ACTION_ENV = "STREAMING_ENGINE_FAULT_ACTION"


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
        if os.environ.get(ACTION_ENV) == "pause":
            os.environ.pop(ENV, None)  # once: after the wake-up the driver goes on
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
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
        elif os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit the JVM is our parent
            os.kill(os.getppid(), signal.SIGKILL)
    except Exception:
        pass
    os.kill(os.getpid(), signal.SIGKILL)
