"""Console: print rows to the log (SeaTunnel Console sink). Accepts any input."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from streaming_engine.plugins.base import Sink, SinkOptions
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset


class ConsoleOptions(SinkOptions):
    log_print_data: bool = Field(True, alias="log.print.data", description="Print the rows (false: only count them).")
    log_print_delay_ms: int = Field(0, ge=0, alias="log.print.delay.ms", description="Delay in milliseconds after each printed row.")


@register
class Console(Sink):
    name: ClassVar[str] = "Console"
    Options = ConsoleOptions
    description = "Prints rows (with table id and row kind) to the log."
    commit_protocol = "none"

    def targets(self, dataset: Dataset) -> list[str]:
        return [f"{t.table_id} -> console" for t in dataset.tables]
