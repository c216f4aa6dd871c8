"""Noop sink."""

import pytest
from pydantic import ValidationError

from sinks.noop import Noop, NoopOptions
from streaming_engine.plugins.registry import SINKS
from streaming_engine.schema import Column, Dataset, TableSchema


def test_noop():
    assert SINKS.find("noop") is Noop and Noop.commit_protocol == "none"
    sink = Noop(NoopOptions.model_validate({"plugin_input": "a, b"}))
    assert sink.options.plugin_input == ["a", "b"]
    sink.check_input(Dataset((TableSchema("t", (Column("x", "int"),)),)))
    with pytest.raises(ValidationError, match="path"):
        NoopOptions.model_validate({"path": "/x"})
