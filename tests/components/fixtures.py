"""Pytest fixtures that start real servers; import them into a test module::

    from tests.components.fixtures import kafka_broker, postgres_db, debezium_factory  # noqa: F401

Each fixture starts its server (function scope: a fresh server per test) in its own
``tmp_path_factory`` folder, which keeps the server's log, and stops it by its pid
afterwards. The ``*_module`` variants share one server across a module.
"""

from __future__ import annotations

import pytest

from tests.components.debezium import DebeziumPostgresToKafka
from tests.components.kafka import KafkaBroker
from tests.components.postgres import PostgresServer


def _kafka(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


def _postgres(tmp_path_factory):
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


@pytest.fixture
def kafka_broker(tmp_path_factory) -> KafkaBroker:
    """A started ``KafkaBroker`` (one node, KRaft); ``.bootstrap`` is "127.0.0.1:PORT"."""
    yield from _kafka(tmp_path_factory)


@pytest.fixture
def postgres_db(tmp_path_factory) -> PostgresServer:
    """A started ``PostgresServer`` (``wal_level=logical``); ``.dsn``, ``.execute(sql)``."""
    yield from _postgres(tmp_path_factory)


@pytest.fixture(scope="module")
def kafka_broker_module(tmp_path_factory) -> KafkaBroker:
    yield from _kafka(tmp_path_factory)


@pytest.fixture(scope="module")
def postgres_db_module(tmp_path_factory) -> PostgresServer:
    yield from _postgres(tmp_path_factory)


@pytest.fixture
def debezium_factory(tmp_path_factory):
    """``start(postgres, kafka, topic_prefix, tables, **kwargs)`` -> a started
    ``DebeziumPostgresToKafka``; every one still running is stopped after the test."""
    started: list[DebeziumPostgresToKafka] = []

    def start(postgres, kafka, topic_prefix, tables, **kwargs) -> DebeziumPostgresToKafka:
        engine = DebeziumPostgresToKafka(
            tmp_path_factory.mktemp(f"debezium-{topic_prefix}"), postgres, kafka, topic_prefix, tables, **kwargs
        )
        started.append(engine)
        return engine.start()

    yield start
    for engine in reversed(started):
        engine.stop()
