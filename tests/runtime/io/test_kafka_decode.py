"""The Kafka source's decoding of Debezium TRUNCATE events, on records built
in the test (the same columns Spark's Kafka source gives): reject, apply,
ignore. The broker-backed runs are in test_kafka_source_run.py."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.spark]

JOB = """
source {{ Kafka {{ plugin_output = k, bootstrap.servers = "h:1", topic = "db.public.t", format = debezium_json,
  debezium_record_include_schema = false, truncate_events = {mode}, format_error_handle_way = dead_letter,
  schema = {{ table = "public.t", fields {{ id = int, v = string }}, primaryKey {{ name = pk, columnNames = [id] }} }} }} }}
sink {{ Delta {{ plugin_input = k, path = "/tmp/unused", save_mode = upsert }} }}
"""


def _event(op: str, lsn: int, after: dict | None = None) -> str:
    return json.dumps({"before": None, "after": after, "op": op,
                       "source": {"db": "db", "schema": "public", "table": "t", "lsn": lsn}})


@pytest.mark.parametrize("mode", ["reject", "apply", "ignore"])
def test_a_truncate_event_is_a_dead_letter_a_control_row_or_nothing(spark, mode):
    from sources import _kafka_runtime
    from streaming_engine.job import compile_text
    from streaming_engine.runtime import rows

    job = compile_text(JOB.format(mode=mode))
    [v] = [v for v in job.dag.vertices if v.kind == "source"]
    raw = spark.createDataFrame(
        [("db.public.t", 0, i, value.encode()) for i, value in enumerate([
            _event("c", 10, {"id": 1, "v": "a"}), _event("t", 20), _event("c", 30, {"id": 2, "v": "b"})])],
        "topic string, partition int, offset long, value binary",
    )
    out = [r.asDict(recursive=True) for r in _kafka_runtime.decode(v.plugin, raw, v.schema.tables).collect()]
    data = [(r[rows.KIND], r[rows.SEQ], r["id"]) for r in out if r.get(rows.REJECT) is None]
    letters = [r[rows.REJECT] for r in out if r.get(rows.REJECT) is not None]
    if mode == "apply":
        assert data == [("+I", 10, 1), (rows.TRUNCATE, 20, None), ("+I", 30, 2)] and not letters
        assert v.schema.tables[0].truncates
    elif mode == "ignore":
        assert data == [("+I", 10, 1), ("+I", 30, 2)] and not letters
    else:
        assert data == [("+I", 10, 1), ("+I", 30, 2)]
        assert len(letters) == 1 and "TRUNCATE of db.public.t rejected" in letters[0]["error"], letters


@pytest.mark.parametrize("table", [None, "public.t"])
def test_a_single_unnamed_table_takes_every_event_a_named_one_only_its_own(spark, table):
    """SeaTunnel's single-table reading: a source whose schema names no table
    takes every event as its table's; a named table only the events of that
    table (others are dead letters naming their table)."""
    from sources import _kafka_runtime
    from streaming_engine.job import compile_text
    from streaming_engine.runtime import rows

    named = f'table = "{table}", ' if table else ""
    job = compile_text(JOB.format(mode="reject").replace('table = "public.t", ', named))
    [v] = [v for v in job.dag.vertices if v.kind == "source"]
    other = json.dumps({"before": None, "after": {"id": 2, "v": "b"}, "op": "c",
                        "source": {"db": "inventory", "table": "products"}})
    raw = spark.createDataFrame(
        [("x", 0, i, value.encode()) for i, value in enumerate([_event("c", 10, {"id": 1, "v": "a"}), other])],
        "topic string, partition int, offset long, value binary",
    )
    out = [r.asDict(recursive=True) for r in _kafka_runtime.decode(v.plugin, raw, v.schema.tables).collect()]
    data = sorted(r["id"] for r in out if r.get(rows.REJECT) is None)
    letters = [r[rows.REJECT]["error"] for r in out if r.get(rows.REJECT) is not None]
    if table is None:
        assert data == [1, 2] and not letters
    else:
        assert data == [1] and len(letters) == 1 and "inventory.products" in letters[0], letters
