"""A Kafka ``table_list`` job written as SeaTunnel's Kafka page writes it: the
options inside each item (topic, start_mode, consumer.group, format,
debezium_record_table_filter, schema), the tables named by the items. Real
PostgreSQL, real Debezium, a real broker, Delta tables."""

from __future__ import annotations

import pytest

from tests.components.fixtures import debezium_factory, kafka_broker, postgres_db  # noqa: F401
from tests.runtime.io.test_kafka_source_run import _consume_all, _produce

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.timeout(600)]

_PG = {
    "a": "CREATE TABLE a (id int PRIMARY KEY, name text, n int)",
    "b": "CREATE TABLE b (id int PRIMARY KEY, name text, n int)",
    "c": "CREATE TABLE c (id int PRIMARY KEY, name text, n int)",
}
FIELDS = "fields { id = int, name = string, n = int }, primaryKey { name = pk, columnNames = [id] }"


def _item(topic: str, table: str, extra: str = "") -> str:
    return (f'{{ topic = "{topic}", start_mode = earliest, format = debezium_json, {extra}\n'
            f'      schema = {{ table = "{table}", {FIELDS} }} }}')


def _job(bootstrap: str) -> str:
    mixed = 'start_mode = latest, debezium_record_table_filter { schema_name = public, table_name = %s }, '
    items = [
        _item("tl.public.a", "lake.a", 'consumer.group = "group-a", '),
        _item("tl.public.b", "lake.b"),
        _item("tl.public.c", "lake.c"),
        # one topic holding two tables' events: each item keeps its table's (and starts at the end)
        _item("mixed", "lake.mixed_a", mixed % "a").replace("start_mode = earliest, ", ""),
        _item("mixed", "lake.mixed_b", mixed % "b").replace("start_mode = earliest, ", ""),
    ]
    return f"""
env {{ job.name = tablelist, job.mode = BATCH }}
source {{
  Kafka {{
    plugin_output = cdc
    bootstrap.servers = "{bootstrap}"
    consumer.group = "group-all"
    table_list = [
      {(',' + chr(10) + '      ').join(items)}
    ]
  }}
}}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/wh/${{table_name}}", save_mode = upsert }} }}
"""


def test_a_table_list_job_as_seatunnel_writes_it_applies_each_topic_to_its_items_table(
    postgres_db, kafka_broker, debezium_factory, run_job_text, spark, request
):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    pg = postgres_db
    for stmt in _PG.values():
        pg.execute(stmt)
    for t in _PG:
        for i in range(1, 11):
            pg.execute(f"INSERT INTO {t} VALUES (%s, %s, %s)", (i, f"{t}{i}", i))
    dbz = debezium_factory(pg, kafka_broker, "tl", [f"public.{t}" for t in _PG], schemas_enable=True)
    for t in _PG:  # changes after the snapshot: updates, a delete, a key change, an insert
        pg.execute(f"UPDATE {t} SET n = n * 100 WHERE id <= 3")
        pg.execute(f"DELETE FROM {t} WHERE id = 4")
        pg.execute(f"UPDATE {t} SET id = 50 WHERE id = 5")
        pg.execute(f"INSERT INTO {t} VALUES (60, 'new', NULL)")
    dbz.wait_published(3 * (10 + 3 + 2 + 3 + 1), timeout=90)
    kafka_broker.create_topic("mixed", partitions=1)
    _produce(kafka_broker.bootstrap, "mixed", [(None, "not a change event", 0)])  # before the items' start (latest)

    job = _job(kafka_broker.bootstrap)
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    for t in _PG:  # the events of each item's topic are the item's table (named lake.<t>, not public.<t>)
        got = sorted((r["id"], r["name"], r["n"]) for r in ran.rows(spark, f"wh/{t}"))
        assert got == sorted(pg.execute(f"SELECT id, name, n FROM {t}")), t
    # the mixed topic's items start at its end: nothing read yet (its record before that would fail the job)
    assert ran.rows(spark, "wh/mixed_a") == [] and ran.rows(spark, "wh/mixed_b") == []

    # the item's own consumer group holds its topic's offsets; the others the source's group
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})

    def committed(group: str, topic: str) -> int:
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
        [tp] = admin.list_consumer_group_offsets([req])[group].result().topic_partitions
        return tp.offset

    events = {t: _consume_all(kafka_broker.bootstrap, [f"tl.public.{t}"]) for t in _PG}
    assert committed("group-a", "tl.public.a") == len(events["a"])
    assert committed("group-all", "tl.public.b") == len(events["b"])
    assert committed("group-all", "tl.public.a") < 0  # not committed there

    # a and b's events copied into the one topic: each item keeps its table's by the table filter
    _produce(kafka_broker.bootstrap, "mixed", [(k.decode() if k else None, v.decode() if v else None, 0)
                                              for t in ("a", "b") for k, v in events[t]])
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    for t in ("a", "b"):
        got = sorted((r["id"], r["name"], r["n"]) for r in ran.rows(spark, f"wh/mixed_{t}"))
        assert got == sorted(pg.execute(f"SELECT id, name, n FROM {t}")), t
    request.node.user_properties.append(
        ("ran", f"table_list of 5 items over 4 topics: {sum(len(e) for e in events.values())} Debezium events, "
                f"{len(events['a']) + len(events['b'])} copied into one topic split by table filter"))
