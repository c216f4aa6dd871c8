"""Console: print rows to stdout (SeaTunnel Console sink). Accepts any input.

At run time each epoch prints, per table, a header line with the row type
(once per table) and one line per row, as SeaTunnel's ConsoleSinkWriter does::

    output rowType of shop.orders: id<BIGINT>, name<STRING>
    subtaskIndex=0 rowIndex=1: SeaTunnelRow#tableId=shop.orders SeaTunnelRow#kind=INSERT : 1, Ann

Rows are printed by the driver in source order (``__seq``); ``rowIndex`` counts
on across epochs per table. ``log.print.data = false`` only counts the rows;
``log.print.delay.ms`` sleeps after every printed row. The console has no
transactions: an epoch this sink instance already printed is not printed again
when Spark replays it after a restart in the same process (a new process
prints a replayed epoch again, as SeaTunnel's Console is at-least-once).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import sys
import threading
import time
from typing import Any, ClassVar

from pydantic import Field

from streaming_engine.plugins.base import Sink, SinkOptions
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema


class ConsoleOptions(SinkOptions):
    log_print_data: bool = Field(True, alias="log.print.data", description="Print the rows (false: only count them).")
    log_print_delay_ms: int = Field(0, ge=0, alias="log.print.delay.ms", description="Delay in milliseconds after each printed row.")


@register
class Console(Sink):
    name: ClassVar[str] = "Console"
    seatunnel_page = "connector-v2/sink/Console.md"
    Options = ConsoleOptions
    description = "Prints rows (with table id and row kind) to the log."
    commit_protocol = "none"

    options: ConsoleOptions

    def __init__(self, options: ConsoleOptions):
        super().__init__(options)
        self._lock = threading.Lock()
        self._printed: dict[tuple[str, int], dict[str, int]] = {}  # (pipeline, epoch) -> rows per table
        self._row_index: dict[str, int] = {}  # table -> rows printed so far
        self._headers: set[str] = set()

    def targets(self, dataset: Dataset) -> list[str]:
        return [f"{t.table_id} -> console" for t in dataset.tables]

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        from streaming_engine.runtime import rows as envelope
        from streaming_engine.runtime.context import CommitRecord

        with self._lock:
            done = self._printed.get((ctx.pipeline, ctx.batch_id))
            if done is not None:  # replay of an epoch this instance already printed
                return [CommitRecord(ctx.sink_uid, t, "console", n, skipped=True) for t, n in done.items()]
            counts: dict[str, int] = {}
            for table in dataset.tables:
                df = frames.get(table.table_id)
                if df is None:
                    continue
                if not self.options.log_print_data:
                    counts[table.table_id] = df.count()
                    continue
                counts[table.table_id] = self._print_table(table, df.orderBy(envelope.SEQ), envelope)
            self._printed[(ctx.pipeline, ctx.batch_id)] = counts
            for old in [k for k in self._printed if k[0] == ctx.pipeline and k[1] < ctx.batch_id - 16]:
                del self._printed[old]  # only recent epochs can be replayed
            return [CommitRecord(ctx.sink_uid, t, "console", n) for t, n in counts.items()]

    def _print_table(self, table: TableSchema, df: Any, envelope: Any) -> int:
        out = sys.stdout
        tid = table.table_id
        if tid not in self._headers:
            types = ", ".join(f"{c.name}<{c.type.upper()}>" for c in table.columns)
            print(f"output rowType of {tid}: {types}", file=out, flush=True)
            self._headers.add(tid)
        delay = self.options.log_print_delay_ms / 1000.0
        names = table.names
        n = 0
        for row in df.toLocalIterator():
            n += 1
            index = self._row_index.get(tid, 0) + 1
            self._row_index[tid] = index
            kind = envelope.NAME_OF_KIND.get(row[envelope.KIND], row[envelope.KIND])
            values = ", ".join(format_value(row[c]) for c in names)
            print(
                f"subtaskIndex=0 rowIndex={index}: SeaTunnelRow#tableId={row[envelope.TABLE]} "
                f"SeaTunnelRow#kind={kind} : {values}",
                file=out,
                flush=True,
            )
            if delay:
                time.sleep(delay)
        return n


def format_value(v: Any) -> str:
    """A value as SeaTunnel's console prints it: null, true/false, ISO dates, JSON for nested values."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (list, tuple, dict)) or hasattr(v, "asDict"):
        return json.dumps(_plain(v), ensure_ascii=False, default=str)
    return str(v)


def _plain(v: Any) -> Any:
    if hasattr(v, "asDict"):
        return {k: _plain(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return v
