"""Console sink."""

import pytest
from pydantic import ValidationError

from sinks.console import Console, ConsoleOptions
from streaming_engine.plugins.registry import SINKS
from streaming_engine.schema import Column, Dataset, TableSchema


def test_doc_example_and_defaults():
    sink = Console(ConsoleOptions.model_validate({"source_table_name": "fake"}))
    assert sink.options.plugin_input == ["fake"]
    assert (sink.options.log_print_data, sink.options.log_print_delay_ms) == (True, 0)
    assert SINKS.find("console") is Console and Console.commit_protocol == "none"


def test_dotted_options_and_targets():
    sink = Console(ConsoleOptions.model_validate({"log.print.data": False, "log.print.delay.ms": 10}))
    assert (sink.options.log_print_data, sink.options.log_print_delay_ms) == (False, 10)
    ds = Dataset((TableSchema("a", (Column("x", "int"),)), TableSchema("b", (Column("y", "map<string,int>"),))))
    sink.check_input(ds)  # accepts anything
    assert sink.targets(ds) == ["a -> console", "b -> console"]


def test_bad_options():
    with pytest.raises(ValidationError, match="log.print.delay.ms"):
        ConsoleOptions.model_validate({"log.print.delay.ms": -1})
    with pytest.raises(ValidationError, match="username"):
        ConsoleOptions.model_validate({"username": "x"})
