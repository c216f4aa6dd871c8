"""Registering the engine's Spark Python data sources (FakeSource's, Postgres-CDC's)."""

from __future__ import annotations

from typing import Any, Callable


def register(spark: Any, name: str, define: Callable[[Any], None]) -> None:
    """Register data source ``name`` in ``spark`` with ``define(spark)``, made the active session first:
    Spark resolves a Python data source through the THREAD'S active session, and refuses to register a
    name that session knows (another session of the process that registered it made registering it
    here fail)."""
    from pyspark.sql import SparkSession

    SparkSession._get_j_spark_session_class(spark._jvm).setActiveSession(spark._jsparkSession)
    SparkSession._activeSession = spark
    if spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(name):
        return
    define(spark)
