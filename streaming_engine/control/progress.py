"""Live progress of an attached run, per pipeline: state, epoch, rows/s, last
commit, lag. On a terminal a table redrawn in place (rich's ``Live``); else a
plain line per pipeline every ``interval`` seconds when something changed (a
log a weeks-long job can afford); nothing with ``--quiet``.

It follows the run through the job master's bus (epochs, Spark's progress)
and its state machines; what it keeps per pipeline is a handful of numbers
and a window of the last minute of input counts, whatever the job's age.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from streaming_engine.runtime.events import EpochCommitted, Event, SourceProgress

if TYPE_CHECKING:  # pragma: no cover
    from streaming_engine.control.master import JobMaster

RATE_WINDOW_S = 60.0


@dataclass
class _Pipeline:
    name: str
    epoch: int = -1
    epochs: int = 0
    rows: int = 0  # committed by the sinks (all tables), this run
    last_commit: float | None = None  # wall time
    lag: int | None = None  # records behind, summed over the source's partitions
    inputs: deque = field(default_factory=deque)  # (monotonic time, input rows of one batch)
    changed: bool = True

    def rate(self, now: float) -> float:
        while self.inputs and self.inputs[0][0] < now - RATE_WINDOW_S:
            self.inputs.popleft()
        if not self.inputs:
            return 0.0
        span = max(now - self.inputs[0][0], 1.0)
        return sum(n for _, n in self.inputs) / span


class Progress:
    def __init__(self, master: "JobMaster", out: IO[str] | None = None, interval: float = 10.0,
                 live: bool | None = None):
        self.master, self.out, self.interval = master, out or sys.stderr, interval
        self.live = self.out.isatty() if live is None else live
        names = {p.key: p.name for p in master.job.plan.pipelines}
        self.pipelines = {k: _Pipeline(n) for k, n in names.items()}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        master.bus.subscribe(self.on_event)

    def on_event(self, e: Event) -> None:
        p = self.pipelines.get(getattr(e, "pipeline", ""))
        if p is None:
            return
        with self._lock:
            if isinstance(e, EpochCommitted):
                p.epoch, p.epochs = e.epoch, p.epochs + 1
                p.rows += sum(c.rows for c in e.commits if c.table != "*" and not c.skipped)
                p.last_commit, p.changed = time.time(), True
            elif isinstance(e, SourceProgress):
                p.inputs.append((time.monotonic(), e.input_rows))
                if e.lag:
                    p.lag = sum(behind for _, _, behind in e.lag)
                p.changed = True

    def rows(self) -> list[dict]:
        now = time.monotonic()
        with self._lock:
            out = []
            for key, p in self.pipelines.items():
                out.append({
                    "pipeline": p.name, "state": self.master.pipelines[key].state.value,
                    "epoch": p.epoch if p.epochs else None, "epochs": p.epochs, "rows": p.rows,
                    "rows_per_s": p.rate(now), "last_commit": p.last_commit, "lag": p.lag,
                })
            return out

    def line(self, r: dict) -> str:
        ago = f"{time.time() - r['last_commit']:.0f} s ago" if r["last_commit"] else "none yet"
        lag = f", lag {r['lag']} records" if r["lag"] is not None else ""
        epoch = r["epoch"] if r["epoch"] is not None else "-"
        return (f"progress {r['pipeline']}: {r['state']}, epoch {epoch} ({r['epochs']} this run), "
                f"{r['rows']} rows committed, {r['rows_per_s']:.0f} rows/s, last commit {ago}{lag}")

    def table(self):
        from rich.table import Table

        t = Table(title=f"job {self.master.name} ({self.master.job_id}): {self.master.state.state.value}")
        for col in ("pipeline", "state", "epoch", "rows committed", "rows/s", "last commit", "lag (records)"):
            t.add_column(col, justify="left" if col in ("pipeline", "state") else "right")
        for r in self.rows():
            ago = f"{time.time() - r['last_commit']:.0f} s ago" if r["last_commit"] else "-"
            t.add_row(r["pipeline"], r["state"], "-" if r["epoch"] is None else str(r["epoch"]), str(r["rows"]),
                      f"{r['rows_per_s']:.0f}", ago, "-" if r["lag"] is None else str(r["lag"]))
        return t

    # -- showing it -------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._live if self.live else self._plain, name="progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        with Live(self.table(), console=Console(file=self.out), refresh_per_second=2, transient=False) as live:
            while not self._done.wait(0.5):
                live.update(self.table())
            live.update(self.table())

    def _plain(self) -> None:
        while not self._done.wait(self.interval):
            self._print_changed()
        self._print_changed()

    def _print_changed(self) -> None:
        with self._lock:
            changed = [k for k, p in self.pipelines.items() if p.changed]
            for k in changed:
                self.pipelines[k].changed = False
        names = {self.pipelines[k].name for k in changed}
        for r in self.rows():
            if r["pipeline"] in names:
                print(self.line(r), file=self.out, flush=True)
