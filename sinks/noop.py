"""Noop: consume rows and drop them (our sink, for benchmarks). Accepts any input."""

from __future__ import annotations

from typing import ClassVar

from streaming_engine.plugins.base import Sink, SinkOptions
from streaming_engine.plugins.registry import register


class NoopOptions(SinkOptions):
    pass


@register
class Noop(Sink):
    name: ClassVar[str] = "Noop"
    Options = NoopOptions
    description = "Consumes and discards rows; measures the pipeline without a sink's cost."
    commit_protocol = "none"
