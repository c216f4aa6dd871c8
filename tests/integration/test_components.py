"""Smoke tests of the real test servers (tests/components): Kafka, PostgreSQL, Debezium.

They start real processes on free 127.0.0.1 ports (jars fetched once by
scripts/fetch_components.py into .components/), so they are marked ``components``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

import pytest

from tests.components.fixtures import debezium_factory, kafka_broker, postgres_db  # noqa: F401

pytestmark = [pytest.mark.components, pytest.mark.timeout(180)]


@dataclass
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]


def read_topic(bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout: float = 30.0) -> list[Record]:
    """Every record of ``topic`` from the beginning up to the end of each partition."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"smoke-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        md = consumer.list_topics(topic, timeout=10).topics[topic]
        assert md.error is None, md.error
        partitions = sorted(md.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # offset 0: from the start
        at_end: set[int] = set()
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic}: no end of partitions {set(partitions) - at_end}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise AssertionError(f"{topic}: {msg.error()}")
            at_end.discard(msg.partition())
            out.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(), dict(msg.headers() or [])))
        return out
    finally:
        consumer.close()


# --- (a) Kafka ----------------------------------------------------------------------


def test_kafka_transactional_producer_and_read_committed_consumer(kafka_broker):
    from confluent_kafka import Producer

    topic = "smoke-transactions"
    kafka_broker.create_topic(topic, partitions=3)
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "transactional.id": f"smoke-{uuid.uuid4().hex}",
            "enable.idempotence": True,
            "acks": "all",
        }
    )
    producer.init_transactions(30)
    # an aborted transaction first: a read_committed consumer must not see it
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=f"aborted-{i}", value=f"aborted-value-{i}")
    producer.flush(30)
    producer.abort_transaction(30)

    producer.begin_transaction()
    for i in range(100):
        producer.produce(topic, key=f"key-{i}", value=f"value-{i}")
    producer.commit_transaction(30)

    committed = read_topic(kafka_broker.bootstrap, topic, isolation="read_committed")
    assert len(committed) == 100
    assert sorted((r.key, r.value) for r in committed) == sorted(
        (f"key-{i}".encode(), f"value-{i}".encode()) for i in range(100)
    )
    assert {r.partition for r in committed} == {0, 1, 2}  # keyed records spread over the partitions
    for p in range(3):  # per partition, offsets increase
        offsets = [r.offset for r in committed if r.partition == p]
        assert offsets == sorted(offsets)

    # the aborted records are really in the log: read_uncommitted sees them
    everything = read_topic(kafka_broker.bootstrap, topic, isolation="read_uncommitted")
    assert len(everything) == 110
    assert sum(r.key.startswith(b"aborted-") for r in everything) == 10


# --- (b) PostgreSQL + Debezium + Kafka ----------------------------------------------


def payload(record: Record) -> dict | None:
    """The Debezium envelope of a record's value (None for a tombstone)."""
    if record.value is None:
        return None
    doc = json.loads(record.value)
    assert set(doc) == {"schema", "payload"}, f"schemas.enable=true envelope expected: {set(doc)}"
    assert doc["schema"]["name"].endswith(".Envelope")
    return doc["payload"]


def key_payload(record: Record) -> dict | None:
    if record.key is None:
        return None
    doc = json.loads(record.key)
    assert set(doc) == {"schema", "payload"}
    return doc["payload"]


def check_stream(records: list[Record]) -> list[tuple]:
    """(op, key, before, after) per event; tombstones as ("tombstone", key, None, None).

    Also checks: a tombstone right after every delete (same key); ``source.lsn`` present
    on every event, equal for all snapshot events, and for streamed events above the
    snapshot's and non-decreasing, strictly increasing from one transaction to the next.
    """
    out: list[tuple] = []
    snapshot_lsns: set[int] = set()
    last_lsn, last_tx = None, None
    for i, rec in enumerate(records):
        env = payload(rec)
        key = key_payload(rec)
        if env is None:
            out.append(("tombstone", key, None, None))
            prev = payload(records[i - 1]) if i else None
            assert prev is not None and prev["op"] == "d", "a tombstone follows a delete"
            assert rec.key == records[i - 1].key
            continue
        src = env["source"]
        assert src["connector"] == "postgresql" and src["db"] == "postgres"
        assert isinstance(src["lsn"], int) and src["lsn"] > 0, src
        if env["op"] == "r":
            assert src["snapshot"] in {"first", "first_in_data_collection", "true", "last_in_data_collection", "last"}
            snapshot_lsns.add(src["lsn"])
        else:
            assert src["snapshot"] == "false"
            assert all(src["lsn"] > s for s in snapshot_lsns)
            if last_lsn is not None:
                assert src["lsn"] >= last_lsn, f"LSN went back: {src['lsn']} < {last_lsn}"
                if src["txId"] != last_tx:
                    assert src["lsn"] > last_lsn
            last_lsn, last_tx = src["lsn"], src["txId"]
        if env["op"] == "d":
            assert i + 1 < len(records) and records[i + 1].value is None, "delete without tombstone"
        out.append((env["op"], key, env["before"], env["after"]))
    assert len(snapshot_lsns) <= 1, f"snapshot events at several LSNs: {snapshot_lsns}"
    return out


def test_debezium_captures_postgres_into_kafka(kafka_broker, postgres_db, debezium_factory):
    pg = postgres_db
    pg.execute("CREATE TABLE public.customers (id int PRIMARY KEY, name text, score int)")
    pg.execute("CREATE TABLE public.orders (id int PRIMARY KEY, customer_id int, amount bigint)")
    pg.execute("ALTER TABLE public.orders REPLICA IDENTITY FULL")  # whole old row in updates/deletes
    pg.execute("CREATE TABLE public.items (sku text PRIMARY KEY, qty int)")  # empty at snapshot time
    pg.execute("CREATE TABLE public.ignored (id int PRIMARY KEY)")  # not captured
    pg.execute("INSERT INTO public.customers VALUES (1, 'ann', 10), (2, 'bob', 20)")
    pg.execute("INSERT INTO public.orders VALUES (100, 1, 500)")

    tables = ["public.customers", "public.orders", "public.items"]
    dbz = debezium_factory(pg, kafka_broker, "cdc", tables)
    assert dbz.published == 3  # READY: the snapshot (3 rows) is in Kafka
    assert dbz.slot_name in pg.replication_slots()

    # streaming, one transaction per statement unless noted
    pg.execute("INSERT INTO public.customers VALUES (3, 'cy', 30)")
    pg.execute("INSERT INTO public.orders VALUES (101, 3, 700)")
    pg.execute("UPDATE public.customers SET score = 11 WHERE id = 1")
    pg.execute("UPDATE public.orders SET amount = 550 WHERE id = 100")
    pg.execute("BEGIN; INSERT INTO public.items VALUES ('a', 1); INSERT INTO public.items VALUES ('b', 2); COMMIT")
    pg.execute("DELETE FROM public.customers WHERE id = 2")
    pg.execute("INSERT INTO public.ignored VALUES (1)")
    pg.execute("UPDATE public.customers SET id = 33 WHERE id = 3")  # primary-key update
    pg.execute("DELETE FROM public.items WHERE sku = 'a'")
    pg.execute("UPDATE public.items SET qty = 3 WHERE sku = 'b'")
    pg.execute("TRUNCATE public.orders")
    pg.execute("INSERT INTO public.orders VALUES (102, 1, 900)")

    # customers 9 records, orders 5, items 5 (tombstones and the 3 snapshot events included)
    dbz.wait_published(9 + 5 + 5, timeout=30)

    topics = {t: dbz.topic(t) for t in tables}
    assert topics["public.customers"] == "cdc.public.customers"
    customers = check_stream(read_topic(kafka_broker.bootstrap, topics["public.customers"]))
    assert customers == [
        ("r", {"id": 1}, None, {"id": 1, "name": "ann", "score": 10}),
        ("r", {"id": 2}, None, {"id": 2, "name": "bob", "score": 20}),
        ("c", {"id": 3}, None, {"id": 3, "name": "cy", "score": 30}),
        # REPLICA IDENTITY DEFAULT: no old row for an update, only the key for a delete
        ("u", {"id": 1}, None, {"id": 1, "name": "ann", "score": 11}),
        ("d", {"id": 2}, {"id": 2, "name": None, "score": None}, None),
        ("tombstone", {"id": 2}, None, None),
        # a primary-key update is a delete of the old key (+ tombstone) and a create of the new
        ("d", {"id": 3}, {"id": 3, "name": None, "score": None}, None),
        ("tombstone", {"id": 3}, None, None),
        ("c", {"id": 33}, None, {"id": 33, "name": "cy", "score": 30}),
    ]
    orders = check_stream(read_topic(kafka_broker.bootstrap, topics["public.orders"]))
    assert orders == [
        ("r", {"id": 100}, None, {"id": 100, "customer_id": 1, "amount": 500}),
        ("c", {"id": 101}, None, {"id": 101, "customer_id": 3, "amount": 700}),
        # REPLICA IDENTITY FULL: the whole old row
        ("u", {"id": 100}, {"id": 100, "customer_id": 1, "amount": 500}, {"id": 100, "customer_id": 1, "amount": 550}),
        ("t", None, None, None),  # TRUNCATE: null key, no before/after
        ("c", {"id": 102}, None, {"id": 102, "customer_id": 1, "amount": 900}),
    ]
    items = check_stream(read_topic(kafka_broker.bootstrap, topics["public.items"]))
    assert items == [
        ("c", {"sku": "a"}, None, {"sku": "a", "qty": 1}),
        ("c", {"sku": "b"}, None, {"sku": "b", "qty": 2}),
        ("d", {"sku": "a"}, {"sku": "a", "qty": None}, None),
        ("tombstone", {"sku": "a"}, None, None),
        ("u", {"sku": "b"}, None, {"sku": "b", "qty": 3}),
    ]
    raw_items = read_topic(kafka_broker.bootstrap, topics["public.items"])
    tx_a, tx_b = (payload(r)["source"]["txId"] for r in raw_items[:2])
    assert tx_a == tx_b  # one transaction, two events
    # the primary-key update's create event names the old key in a header
    pk_create = read_topic(kafka_broker.bootstrap, topics["public.customers"])[-1]
    assert json.loads(pk_create.headers["__debezium.oldkey"])["payload"] == {"id": 3}

    assert "cdc.public.ignored" not in kafka_broker.topics()
    assert kafka_broker.topics() >= set(topics.values())

    assert dbz.stop() in (0, 143)  # 143: the JVM's exit code after SIGTERM and its shutdown hook
    assert dbz.stopped_cleanly  # ... which closed the engine and the producer
    assert dbz.slot_name not in pg.replication_slots()  # slot.drop.on.stop=true


def test_two_debezium_engines_without_schemas_on_one_database(kafka_broker, postgres_db, debezium_factory):
    """The fixtures again in the same session (new ports), and two engines side by side
    on one database (their own slots and publications) with ``schemas.enable=false``."""
    pg = postgres_db
    pg.execute("CREATE TABLE public.events (id bigint PRIMARY KEY, body text)")
    pg.execute("INSERT INTO public.events VALUES (1, 'before snapshot')")
    first = debezium_factory(pg, kafka_broker, "one", ["public.events"], schemas_enable=False)
    second = debezium_factory(pg, kafka_broker, "two", ["public.events"], schemas_enable=False)
    assert first.slot_name != second.slot_name
    assert first.publication_name != second.publication_name
    assert {first.slot_name, second.slot_name} <= set(pg.replication_slots())

    pg.execute("INSERT INTO public.events VALUES (2, 'streamed')")
    for engine in (first, second):
        engine.wait_published(2, timeout=30)
        records = read_topic(kafka_broker.bootstrap, engine.topic("public.events"))
        assert len(records) == 2
        values = [json.loads(r.value) for r in records]
        keys = [json.loads(r.key) for r in records]
        assert keys == [{"id": 1}, {"id": 2}]  # no schema/payload wrapper
        assert [v["op"] for v in values] == ["r", "c"]
        assert "schema" not in values[0] and values[1]["after"] == {"id": 2, "body": "streamed"}
        assert values[1]["source"]["name"] == engine.topic_prefix

    for engine in (first, second):
        assert engine.stop() in (0, 143)
        assert engine.stopped_cleanly
    assert pg.replication_slots() == []
