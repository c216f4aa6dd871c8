"""The plugin registry: built-ins on import, third parties through entry points."""

import sys
import textwrap

import pytest

from streaming_engine.errors import PluginError
from streaming_engine.plugins.base import Transform
from streaming_engine.plugins.registry import TRANSFORMS, Registry
from tests.unit.plugins_for_tests import TMap


def test_lookup_is_case_insensitive():
    assert TRANSFORMS.find("testmap") is TMap
    assert TRANSFORMS.find("TESTMAP") is TMap
    assert TRANSFORMS.find("nope") is None


def test_names_are_sorted():
    names = TRANSFORMS.names()
    assert names == sorted(names, key=str.lower)


def test_registering_a_second_plugin_under_the_same_name_is_an_error():
    class Impostor(Transform):
        name = "testMAP"

    with pytest.raises(PluginError) as exc:
        TRANSFORMS.register(Impostor)
    assert exc.value.condition == "PLUGIN.DUPLICATE"
    assert "Impostor" in exc.value.params["second"]
    assert TRANSFORMS.find("TestMap") is TMap  # never silently overwritten


def test_registering_the_same_class_twice_is_harmless():
    TRANSFORMS.register(TMap)
    assert TRANSFORMS.find("TestMap") is TMap


def test_only_plugins_of_the_right_kind_register():
    with pytest.raises(PluginError):
        TRANSFORMS.register(int)  # type: ignore[arg-type]


def test_third_party_plugins_load_through_entry_points(tmp_path, monkeypatch):
    pkg = tmp_path / "acme_plugins.py"
    pkg.write_text(
        textwrap.dedent(
            """
            from streaming_engine.plugins.base import Transform

            class Upper(Transform):
                name = "AcmeUpper"
            """
        )
    )
    dist = tmp_path / "acme_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[streaming_engine.transforms]\nupper = acme_plugins:Upper\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("transform", Transform)
    assert registry.find("acmeupper").__name__ == "Upper"
    assert "AcmeUpper" in registry.names()
    sys.modules.pop("acme_plugins", None)


def test_a_broken_entry_point_names_itself(tmp_path, monkeypatch):
    dist = tmp_path / "broken-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[streaming_engine.sinks]\nb = no_such_module:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from streaming_engine.plugins.base import Sink

    with pytest.raises(PluginError) as exc:
        Registry("sink", Sink).load()
    assert exc.value.condition == "PLUGIN.LOAD_FAILED"
    assert exc.value.params["entry"] == "no_such_module:Thing"
