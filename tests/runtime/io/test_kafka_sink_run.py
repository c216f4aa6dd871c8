"""The Kafka sink against a real broker: json, text and Debezium records,
topics per table, keys from the primary key; Debezium events read back by
the engine's own Kafka source; exactly-once transactions readable with
``read_committed``; options refused at plan time."""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import datetime

import pytest

from tests.components.fixtures import kafka_broker  # noqa: F401



def with_broker(test):
    """A test that runs jobs on Spark against a real broker."""
    for mark in (pytest.mark.timeout(600), pytest.mark.components, pytest.mark.spark):
        test = mark(test)
    return test


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 30.0) -> list[dict]:
    """Every record of ``topic`` from the start to the end of each partition (for
    read_committed: up to the last stable offset)."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": isolation,
    })  # fmt: skip
    try:
        md = consumer.list_topics(topic, timeout=10).topics[topic]
        assert md.error is None, md.error
        partitions = sorted(md.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        out: list[dict] = []
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
            key, value = msg.key(), msg.value()
            out.append({
                "partition": msg.partition(), "offset": msg.offset(),
                "key": None if key is None else key.decode(), "value": None if value is None else value.decode(),
            })  # fmt: skip
        return out
    finally:
        consumer.close()


# -- json and text: every row a record, topic per table --------------------------

ORDERS = [
    ("INSERT", [1, "apple", 3, "2026-01-02"]),
    ("INSERT", [2, "pear", None, "2026-01-03"]),
    ("UPDATE_BEFORE", [1, "apple", 3, "2026-01-02"]),
    ("UPDATE_AFTER", [1, "apple", 4, "2026-01-02"]),
    ("DELETE", [2, "pear", None, "2026-01-03"]),
]
NOTES = [("INSERT", ["hello", 1]), ("INSERT", ["world", 2])]


def _rows(rows: list) -> str:
    return ", ".join(f"{{ kind = {k}, fields = {json.dumps(f)} }}" for k, f in rows)


JSON_JOB = """
env {{ job.name = kjson, job.mode = BATCH }}
source {{
  FakeSource {{
    plugin_output = src
    tables_configs = [
      {{ schema = {{ table = "shop.orders", fields {{ id = bigint, item = string, qty = int, day = date }},
                    primaryKey {{ name = pk, columnNames = [id] }} }}, rows = [ {orders} ] }},
      {{ schema = {{ table = "shop.notes", fields {{ text = string, n = int }} }}, rows = [ {notes} ] }}
    ]
  }}
}}
sink {{
  Kafka {{ plugin_input = src, topic = "${{table_name}}", bootstrap.servers = "{bootstrap}", format = json,
          kafka.config = {{ client.id = engine-sink-test, linger.ms = 5 }} }}
  Kafka {{ plugin_input = src, topic = "${{table_name}}_txt", bootstrap.servers = "{bootstrap}", format = text,
          field_delimiter = "|", partition = 1, semantics = NON }}
}}
"""


@with_broker
def test_json_and_text_records_one_topic_per_table_keys_from_the_primary_key(kafka_broker, run_job_text):
    for topic in ("orders_txt", "notes_txt"):
        kafka_broker.create_topic(topic, partitions=2)
    ran = run_job_text(JSON_JOB.format(bootstrap=kafka_broker.bootstrap, orders=_rows(ORDERS), notes=_rows(NOTES)))
    assert ran.result.status == "FINISHED", ran.result.error

    # json: every row, whatever its kind (SeaTunnel's json format carries no kind), in order
    orders = read_topic(kafka_broker.bootstrap, "orders")
    assert [json.loads(r["value"]) for r in orders] == [
        {"id": i, "item": item, "qty": qty, "day": day} for _, (i, item, qty, day) in ORDERS
    ]
    assert [r["key"] for r in orders] == ['{"id":1}', '{"id":2}', '{"id":1}', '{"id":1}', '{"id":2}']
    assert '"qty":null' in orders[1]["value"]  # null columns are written
    notes = read_topic(kafka_broker.bootstrap, "notes")
    assert [(r["key"], json.loads(r["value"])) for r in notes] == [(None, {"text": "hello", "n": 1}), (None, {"text": "world", "n": 2})]

    # text: fields joined by the delimiter, a null as an empty field; every record in partition 1
    text = read_topic(kafka_broker.bootstrap, "orders_txt")
    assert [r["value"] for r in text] == ["1|apple|3|2026-01-02", "2|pear||2026-01-03", "1|apple|3|2026-01-02",
                                          "1|apple|4|2026-01-02", "2|pear||2026-01-03"]
    assert {r["partition"] for r in text} == {1}
    assert [r["value"] for r in read_topic(kafka_broker.bootstrap, "notes_txt")] == ["hello|1", "world|2"]
    committed = {(c["sink"], c["table"]): (c["target"], c["total_rows"]) for c in ran.result.committed}
    assert sorted(committed.values()) == [("notes", 2), ("notes_txt", 2), ("orders", 5), ("orders_txt", 5)]


# -- debezium_json, exactly once, read back by the engine's Kafka source -----------

CUSTOMERS = [
    ("INSERT", [1, "ann", "10.50", "2026-03-01 10:00:00.123456", "2026-03-01"]),
    ("INSERT", [2, "bob", "20.00", "2026-03-02 11:30:00", "2026-03-02"]),
    ("INSERT", [3, "cid", None, None, None]),
    ("UPDATE_BEFORE", [2, "bob", "20.00", "2026-03-02 11:30:00", "2026-03-02"]),
    ("UPDATE_AFTER", [2, "bobby", "21.25", "2026-03-02 11:30:00", "2026-03-05"]),
    ("DELETE", [3, "cid", None, None, None]),
    ("UPDATE_AFTER", [1, "anne", "10.50", "2026-03-01 10:00:00.123456", "2026-03-01"]),  # no before image
    ("INSERT", [4, "dan", "0.01", "2026-03-04 00:00:00", "2026-03-04"]),
]
ITEMS = [("INSERT", [7, "x"]), ("INSERT", [8, "y"]), ("UPDATE_BEFORE", [7, "x"]), ("UPDATE_AFTER", [7, "z"]),
         ("DELETE", [8, "y"])]

CDC_JOB = """
env {{ job.name = kdbz, job.mode = BATCH }}
source {{
  FakeSource {{
    plugin_output = src
    tables_configs = [
      {{ schema = {{ table = "crm.public.customers",
                    fields {{ id = int, name = string, credit = "decimal(10,2)", seen = timestamp, day = date }},
                    primaryKey {{ name = pk, columnNames = [id] }} }}, rows = [ {customers} ] }},
      {{ schema = {{ table = "shop.items", fields {{ id = bigint, label = string }},
                    primaryKey {{ name = pk, columnNames = [id] }} }}, rows = [ {items} ] }}
    ]
  }}
}}
sink {{
  Kafka {{ plugin_input = src, topic = "cdc", bootstrap.servers = "{bootstrap}", format = debezium_json,
          semantics = EXACTLY_ONCE, transaction_prefix = "test-tx" }}
}}
"""

READ_BACK = """
env {{ job.name = kback, job.mode = BATCH }}
source {{
  Kafka {{
    plugin_output = cdc
    bootstrap.servers = "{bootstrap}"
    topic = "cdc"
    start_mode = earliest
    format = debezium_json
    debezium_record_include_schema = false
    tables_configs = [
      {{ schema = {{ table = "crm.public.customers",
                    fields {{ id = int, name = string, credit = "decimal(10,2)", seen = timestamp, day = date }},
                    primaryKey {{ name = pk, columnNames = [id] }} }} }}
      {{ schema = {{ table = "shop.items", fields {{ id = bigint, label = string }},
                    primaryKey {{ name = pk, columnNames = [id] }} }} }}
    ]
  }}
}}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/back/${{table_name}}", save_mode = upsert }} }}
"""


def _final(rows: list) -> dict:
    """The table a change stream leaves: +I/+U set the row, -D removes it (-U changes nothing)."""
    out: dict = {}
    for kind, fields in rows:
        if kind in ("INSERT", "UPDATE_AFTER"):
            out[fields[0]] = fields
        elif kind == "DELETE":
            out.pop(fields[0], None)
    return out


@with_broker
def test_debezium_events_exactly_once_are_read_back_by_the_kafka_source(kafka_broker, run_job_text, spark):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    ran = run_job_text(CDC_JOB.format(bootstrap=kafka_broker.bootstrap, customers=_rows(CUSTOMERS), items=_rows(ITEMS)))
    assert ran.result.status == "FINISHED", ran.result.error

    records = read_topic(kafka_broker.bootstrap, "cdc")  # read_committed
    events = [json.loads(r["value"]) for r in records]
    by_table: dict = {}
    for r, e in zip(records, events):
        by_table.setdefault(e["source"]["table"], []).append((r["key"], e))
    customers = by_table["customers"]
    # -U then +U of one key: ONE u event; a +U alone: u without before; -D: d with before
    assert [e["op"] for _, e in customers] == ["c", "c", "c", "u", "d", "u", "c"]
    assert [k for k, _ in customers] == ['{"id":1}', '{"id":2}', '{"id":3}', '{"id":2}', '{"id":3}', '{"id":1}', '{"id":4}']
    _, update = customers[3]
    assert (update["before"]["name"], update["after"]["name"]) == ("bob", "bobby")
    assert customers[5][1]["before"] is None and customers[4][1]["after"] is None
    assert customers[0][1]["source"] == {"connector": "streaming-engine", "db": "crm", "schema": "public", "table": "customers"}
    assert customers[0][1]["after"]["day"] == 20513  # days since 1970-01-01, as Debezium writes dates
    assert {e["source"]["db"] for _, e in by_table["items"]} == {"shop"}
    assert [e["op"] for _, e in by_table["items"]] == ["c", "c", "u", "d"]
    assert all(isinstance(e["ts_ms"], int) for e in events)

    # the epoch is recorded in the same transaction: the sink's group holds the last epoch
    admin = kafka_broker.admin()
    groups = [g.group_id for g in admin.list_consumer_groups().result(30).valid if g.group_id.startswith("test-tx-")]
    assert groups == ["test-tx-kdbz.src.kafka.src"], groups
    spec = ConsumerGroupTopicPartitions(groups[0], [TopicPartition("_streaming_engine_sink_epochs", 0)])
    [found] = admin.list_consumer_group_offsets([spec]).values()
    assert [p.offset for p in found.result(30).topic_partitions] == [0]  # one epoch: epoch 0

    # a lost checkpoint: the topic holds an epoch the checkpoint never started -> stop, write nothing
    shutil.rmtree(ran.work / "checkpoints" / "kdbz")
    again = run_job_text(CDC_JOB.format(bootstrap=kafka_broker.bootstrap, customers=_rows(CUSTOMERS), items=_rows(ITEMS)))
    assert again.result.status == "FAILED" and "behind its targets" in again.result.error, again.result.error
    assert "test-tx-kdbz.src.kafka.src" in again.result.error or "cdc" in again.result.error
    assert len(read_topic(kafka_broker.bootstrap, "cdc", isolation="read_uncommitted")) == len(records)

    # the engine's Kafka source reads the events back into the same tables
    back = run_job_text(READ_BACK.format(bootstrap=kafka_broker.bootstrap))
    assert back.result.status == "FINISHED", back.result.error
    got = {r["id"]: r for r in back.rows(spark, "back/customers")}
    want = _final(CUSTOMERS)
    assert sorted(got) == sorted(want) == [1, 2, 4]
    for i, (_, name, credit, seen, day) in want.items():
        row = got[i]
        assert (row["name"], str(row["credit"]), str(row["day"])) == (name, credit, day)
        assert row["seen"] == datetime.fromisoformat(seen)  # microseconds kept
    assert {r["id"]: r["label"] for r in back.rows(spark, "back/items")} == {7: "z"}


# -- plan time --------------------------------------------------------------------

PLAN_JOB = """
env {{ job.name = kplan, job.mode = BATCH }}
source {{ FakeSource {{ plugin_output = src, schema = {{ table = "shop.orders", fields {{ id = int, name = string }} }} }} }}
sink {{ Kafka {{ plugin_input = src, topic = "${{table_name}}", bootstrap.servers = "127.0.0.1:9", {options} }} }}
"""


@pytest.mark.parametrize("options, key, words", [
    ("format = avro", "format", ["format 'avro' is not supported", "schema registry"]),
    ("format = canal_json", "format", ["format 'canal_json' is not supported"]),
    ("semantics = TWICE", "semantics", ["EXACTLY_ONCE", "AT_LEAST_ONCE", "NON"]),
    ("assign_partitions = [shoe]", "assign_partitions", ["not supported"]),
    ("kafka.config = { transactional.id = x }", "kafka.config", ["transaction_prefix"]),
    ("semantics = EXACTLY_ONCE, kafka.config = { acks = 1 }", None, ["EXACTLY_ONCE needs acks = all"]),
    ("transaction_prefix = p", None, ["transaction_prefix only applies to semantics = EXACTLY_ONCE"]),
    ("field_delimiter = \";\"", None, ["field_delimiter only applies to format = text"]),
    ("partition_key_fields = [nope]", None, ["'nope' does not exist", "shop.orders"]),
    ('topic = "a/${table_name}"', None, ["'a/orders' is not a valid Kafka topic name"]),
])  # fmt: skip
def test_unsupported_options_are_config_errors_naming_the_option(options, key, words):
    from streaming_engine.errors import ConfigError
    from streaming_engine.job import compile_text

    text = PLAN_JOB.format(options=options)
    if options.startswith("topic"):
        text = text.replace('topic = "${table_name}", ', "")
    with pytest.raises(ConfigError) as e:
        compile_text(text)
    [problem] = [p for p in e.value.problems if p.severity == "error"]
    message = str(problem)
    assert "Kafka" in message
    if key is not None:
        assert problem.location.key == key, message
    for w in words:
        assert w in message, message


def test_defaults_and_explain():
    from streaming_engine.job import compile_text
    from streaming_engine.plan.render import render

    job = compile_text(PLAN_JOB.format(options="semantics = exactly_once, format = DEBEZIUM_JSON, partition_key_fields = [name]"))
    [sink] = [v.plugin for v in job.dag.vertices if v.kind == "sink"]
    assert (sink.options.semantics, sink.options.format, sink.commit_protocol) == ("EXACTLY_ONCE", "debezium_json", "kafka-txn")
    text = render(job)
    assert "shop.orders -> topic orders (debezium_json, key name)" in text
    assert "transactional.id streaming-engine-<job>.<pipeline>.<sink uid>" in text
    assert [n for n, f in type(sink.options).model_fields.items() if not f.description] == []
    plain = compile_text(PLAN_JOB.format(options="format = json"))
    [sink] = [v.plugin for v in plain.dag.vertices if v.kind == "sink"]
    # not SeaTunnel's NON (a declared deviation: seatunnel_defaults); NON is said in explain
    assert (sink.options.semantics, sink.commit_protocol, sink.reads_metadata()) == ("AT_LEAST_ONCE", "flush", frozenset())
    assert "semantics" in type(sink).seatunnel_defaults
    non = compile_text(PLAN_JOB.format(options="format = json, semantics = NON"))
    assert "semantics NON: failed sends are logged, not retried" in render(non)
