"""build_spark_session's configuration and its error when the jars are missing."""

from __future__ import annotations

import sys

import pytest

from streaming_engine.errors import EngineError
from streaming_engine.runtime import session as session_mod


def test_missing_jars_folder_names_bootstrap(tmp_path, monkeypatch):
    monkeypatch.setenv(session_mod.JARS_DIR_ENV, str(tmp_path / "nope"))
    with pytest.raises(EngineError, match=r"scripts/bootstrap\.sh") as info:
        session_mod.build_spark_session("never-started")
    assert isinstance(info.value, session_mod.JarsNotFoundError)


def test_empty_jars_folder_names_bootstrap(tmp_path, monkeypatch):
    monkeypatch.setenv(session_mod.JARS_DIR_ENV, str(tmp_path))
    with pytest.raises(session_mod.JarsNotFoundError, match="holds no jars"):
        session_mod.jar_paths()


def test_conf_overrides_defaults():
    conf = session_mod.session_conf("local[2]", {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "true"})
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.sql.extensions"] == session_mod.DELTA_EXTENSION
    assert "spark.jars.packages" not in conf
    assert all(j.endswith(".jar") for j in conf["spark.jars"].split(","))


def test_the_checkpoint_file_manager_is_set_only_with_the_engine_jar_and_never_over_the_users(tmp_path, monkeypatch):
    key, engine = session_mod.CHECKPOINT_MANAGER_KEY, session_mod.CHECKPOINT_MANAGER_CLASS
    assert session_mod.session_conf("local[2]")[key] == engine  # the checkout's jars hold the engine's jar
    assert session_mod.session_conf("local[2]", {key: "my.Manager"})[key] == "my.Manager"
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "delta-spark_2.13-4.4.0.jar").write_bytes(b"x")  # without the engine's jar its class is not there
    monkeypatch.setenv(session_mod.JARS_DIR_ENV, str(jars))
    assert key not in session_mod.session_conf("local[2]")


@pytest.mark.spark
def test_session_settings(spark):
    conf = spark.conf
    assert conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf.get("spark.sql.catalog.spark_catalog") == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == "50000"
    assert conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.sparkContext.getConf().get("spark.python.worker.reuse") == "true"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
    assert "spark.jars.packages" not in dict(spark.sparkContext.getConf().getAll())
    # Python workers run this interpreter (with pandas/pyarrow), not the system python3
    assert spark.sparkContext.pythonExec == sys.executable
    workers = spark.range(1).rdd.map(lambda _: __import__("sys").executable).collect()
    assert workers == [sys.executable]
