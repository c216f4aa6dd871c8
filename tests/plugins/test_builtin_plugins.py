"""Every built-in plugin: registered under its SeaTunnel name, options documented, traits set."""

import pytest
from pydantic import BaseModel

from streaming_engine.plugins.base import SinkOptions, SourceOptions, TransformOptions
from streaming_engine.plugins.registry import SINKS, SOURCES, TRANSFORMS

EXPECTED = {
    "source": (SOURCES, SourceOptions, {"FakeSource", "LocalFile", "Delta", "Rate", "Kafka"}),
    "transform": (TRANSFORMS, TransformOptions, {
        "Copy", "Filter", "FieldMapper", "FieldRename", "TableRename", "TableMerge", "FilterRowKind",
        "RowKindExtractor", "Replace", "Split", "Sql", "JsonPath", "DataValidator", "Python"}),
    "sink": (SINKS, SinkOptions, {"Delta", "Console", "Assert", "LocalFile", "Noop", "Kafka"}),
}  # fmt: skip

ALL = [(kind, name) for kind, (_, _, names) in EXPECTED.items() for name in sorted(names)]


@pytest.mark.parametrize("kind", EXPECTED)
def test_builtins_are_registered_with_exact_names(kind):
    registry, _, names = EXPECTED[kind]
    found = {n for n in registry.names() if not n.startswith("Test")}
    assert names <= found
    for n in names:
        assert registry.find(n.upper()).name == n


def _models(model: type[BaseModel], seen: set) -> list[type[BaseModel]]:
    if model in seen:
        return []
    seen.add(model)
    out = [model]
    for f in model.model_fields.values():
        for arg in _type_args(f.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                out += _models(arg, seen)
    return out


def _type_args(t):
    yield t
    for a in getattr(t, "__args__", ()) or ():
        yield from _type_args(a)


@pytest.mark.parametrize("kind, name", ALL)
def test_every_option_has_a_description(kind, name):
    registry, base, _ = EXPECTED[kind]
    cls = registry.find(name)
    assert issubclass(cls.Options, base)
    undocumented = [
        f"{m.__name__}.{k}" for m in _models(cls.Options, set()) for k, f in m.model_fields.items() if not f.description
    ]
    assert undocumented == []


@pytest.mark.parametrize("name", sorted(EXPECTED["transform"][2]))
def test_transform_traits(name):
    cls = TRANSFORMS.find(name)
    assert cls.chainable is True
    expected = {"Python": "python", "TableRename": "table", "TableMerge": "table"}.get(name, "expression")
    assert cls.execution == expected
    if name == "TableMerge":
        assert cls.max_inputs > 1  # may pool tables of several datasets
    else:
        assert cls.max_inputs == 1


def test_sink_commit_protocols():
    # Kafka's depends on its semantics (an instance property, tested with the sink)
    protocols = {n: SINKS.find(n).commit_protocol for n in EXPECTED["sink"][2] if n != "Kafka"}
    assert protocols == {"Delta": "delta-txn", "LocalFile": "staged-publish", "Console": "none", "Assert": "none", "Noop": "none"}
