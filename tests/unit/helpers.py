"""Compile job text in tests."""

from __future__ import annotations

import pytest

from streaming_engine.errors import ConfigError
from streaming_engine.job import CompiledJob, compile_text


def compile_ok(text: str, fmt: str = "hocon", **kw) -> CompiledJob:
    return compile_text(text, fmt=fmt, file=f"job.{ 'conf' if fmt == 'hocon' else fmt}", **kw)


def problems_of(text: str, fmt: str = "hocon", **kw):
    with pytest.raises(ConfigError) as exc:
        compile_ok(text, fmt, **kw)
    return exc.value.problems


def one_problem(text: str, condition: str, **kw):
    found = [p for p in problems_of(text, **kw) if p.condition == condition]
    assert len(found) == 1, f"expected one {condition}, got {[str(p) for p in problems_of(text, **kw)]}"
    return found[0]
