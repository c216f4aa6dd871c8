"""scripts/fetch_jars.py keeps the engine's own built jar (it sits beside the pinned ones)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from streaming_engine.runtime.session import ENGINE_SPARK_JAR

ROOT = Path(__file__).resolve().parents[2]


def _fetch_jars():
    spec = importlib.util.spec_from_file_location("fetch_jars", ROOT / "scripts" / "fetch_jars.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fetch_jars"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_only_unpinned_jars_are_stale_not_the_engine_jar(tmp_path, monkeypatch, capsys):
    fj = _fetch_jars()
    monkeypatch.setenv("STREAMING_ENGINE_JARS_DIR", str(tmp_path))
    for a in fj.load_artifacts():
        (tmp_path / a.jar).write_bytes(b"x")
    (tmp_path / ENGINE_SPARK_JAR).write_bytes(b"x")
    (tmp_path / "kafka-clients-0.1.jar").write_bytes(b"x")  # an old pin left behind

    assert fj.fetch(check_only=True) == 1
    err = capsys.readouterr().err
    assert "not pinned: kafka-clients-0.1.jar" in err
    assert ENGINE_SPARK_JAR not in err
    assert fj.BUILT_JARS == {ENGINE_SPARK_JAR}

    (tmp_path / "kafka-clients-0.1.jar").unlink()
    assert fj.fetch(check_only=True) == 0
