"""The Kafka source against a real broker (and real Debezium from real PostgreSQL).

Records are produced with confluent-kafka; the engine reads them with Spark's
Kafka connector, offsets in the pipeline's checkpoint, so a second run of the
same job reads only what arrived since.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter

import pytest

from tests.components.fixtures import debezium_factory, kafka_broker, postgres_db  # noqa: F401
from tests.merge_paths import merge_paths

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.timeout(600)]


def _produce(bootstrap: str, topic: str, records: list[tuple[str | None, str | None, int]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for key, value, partition in records:
        p.produce(topic, key=key, value=value, partition=partition)
    assert p.flush(30) == 0


JSON_JOB = """
env {{ job.name = kjson, job.mode = BATCH }}
source {{
  Kafka {{
    plugin_output = orders
    bootstrap.servers = "{bootstrap}"
    topic = "orders"
    start_mode = earliest
    format = json
    format_error_handle_way = {errors}
    max_offsets_per_trigger = 40
    kafka.config = {{ client.id = engine-test }}
    schema = {{ table = "shop.orders", fields {{ id = bigint, item = string, qty = int, at = timestamp }} }}
  }}
}}
sink {{ Delta {{ plugin_input = orders, path = "${{work}}/orders" }} }}
"""


def _order(i: int) -> str:
    return json.dumps({"id": i, "item": f"item-{i}", "qty": i % 7, "at": f"2026-01-01T00:00:{i % 60:02d}Z"})


def test_json_records_are_read_once_across_runs_of_one_checkpoint(kafka_broker, run_job_text, spark):
    kafka_broker.create_topic("orders", partitions=2)
    _produce(kafka_broker.bootstrap, "orders", [(str(i), _order(i), i % 2) for i in range(100)])
    job = JSON_JOB.format(bootstrap=kafka_broker.bootstrap, errors="fail")

    ran = run_job_text(job)
    got = ran.rows(spark, "orders", order_by="id")
    assert [r["id"] for r in got] == list(range(100))
    assert got[7] == {"id": 7, "item": "item-7", "qty": 0, "at": got[7]["at"]}
    assert got[7]["at"].second == 7
    # max_offsets_per_trigger = 40: at most 40 records per epoch (100 records -> >= 3 epochs, one commit each)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{ran.work / 'orders'}`").count() >= 3
    # Spark's progress of every micro-batch: rows read, and each partition's lag, which ends at 0
    from streaming_engine.metrics.prometheus import PrometheusMetrics
    from streaming_engine.runtime.events import SourceProgress

    progress = [e for e in ran.events if isinstance(e, SourceProgress)]
    assert sum(e.input_rows for e in progress) == 100 and all(e.input_rows <= 40 for e in progress)
    assert any(behind > 0 for e in progress for _, _, behind in e.lag)
    assert sorted(progress[-1].lag) == [("orders", 0, 0), ("orders", 1, 0)]
    metrics = PrometheusMetrics()
    for e in ran.events:
        metrics.on_event(e)
    labels = {"job": "kjson", "pipeline": "orders", "topic": "orders", "partition": "1"}
    assert metrics.registry.get_sample_value("streaming_engine_source_lag_records", labels) == 0
    assert metrics.registry.get_sample_value("streaming_engine_source_rows_total", {"job": "kjson", "pipeline": "orders"}) == 100

    # a second run of the same job (same checkpoint) reads only the new records
    _produce(kafka_broker.bootstrap, "orders", [(str(i), _order(i), i % 2) for i in range(100, 130)])
    ran = run_job_text(job)
    ids = [r["id"] for r in ran.rows(spark, "orders", order_by="id")]
    assert ids == list(range(130))
    assert ran.result.status == "FINISHED", ran.result.error


def test_a_record_that_is_not_json_stops_the_job_naming_its_offset_or_is_skipped(kafka_broker, run_job_text, spark):
    kafka_broker.create_topic("orders", partitions=1)
    _produce(kafka_broker.bootstrap, "orders", [("1", _order(1), 0), ("2", "this is not json", 0), ("3", _order(3), 0)])

    ran = run_job_text(JSON_JOB.format(bootstrap=kafka_broker.bootstrap, errors="fail"))
    assert ran.result.status == "FAILED"
    text = ran.result.error
    assert "topic orders partition 0 offset 1" in text and "not a JSON object" in text, text
    assert not (ran.work / "orders" / "_delta_log").exists() or ran.rows(spark, "orders") == []

    ran = run_job_text(JSON_JOB.format(bootstrap=kafka_broker.bootstrap, errors="skip").replace("kjson", "kjson2"))
    assert [r["id"] for r in ran.rows(spark, "orders", order_by="id")] == [1, 3]


def test_a_run_whose_every_record_is_a_dead_letter_fails_naming_the_first_error_unless_allowed(
    kafka_broker, run_job_text, spark, caplog
):
    """A job that decodes nothing (here: text records read as json) keeps its
    dead letters, logs each such epoch as an error and ends FAILED (not
    retried); env dead_letter.allow_all = true accepts it."""
    import logging

    kafka_broker.create_topic("orders", partitions=1)
    _produce(kafka_broker.bootstrap, "orders", [(str(i), f"order {i};item;{i}", 0) for i in range(50)])
    job = JSON_JOB.format(bootstrap=kafka_broker.bootstrap, errors="dead_letter").replace("kjson", "kall")
    job = job.replace("job.mode = BATCH", "job.mode = BATCH, job.retry.times = 2")
    with caplog.at_level(logging.ERROR, logger="streaming_engine.runtime"):
        ran = run_job_text(job)
    assert ran.result.status == "FAILED"
    text = str(ran.result.error)
    assert "[DATA.ALL_DEAD_LETTERS]" in text and "every record of this run (50)" in text, text
    assert "the value is not a JSON object" in text and "dead_letter.allow_all" in text, text
    epochs = [r for r in caplog.records if r.getMessage() == "every record of the epoch went to the dead-letter table"]
    assert [r.ctx["records"] for r in epochs] == [40, 10], epochs  # max_offsets_per_trigger = 40
    assert len(ran.rows(spark, "checkpoints/kall/_dead_letter")) == 50  # kept
    assert not [e for e in ran.events if type(e).__name__ == "PipelineFailed" and e.restart_in is not None]

    allowed = job.replace("kall", "kall2").replace("job.retry.times = 2", "dead_letter.allow_all = true")
    ran = run_job_text(allowed)
    assert ran.result.status == "FINISHED", ran.result.error
    assert len(ran.rows(spark, "checkpoints/kall2/_dead_letter")) == 50


def test_records_that_cannot_be_decoded_go_to_the_dead_letter_table_in_the_same_epoch(kafka_broker, run_job_text, spark):
    kafka_broker.create_topic("orders", partitions=2)
    good = [(str(i), _order(i), i % 2) for i in range(60)]
    bad = [("x1", "this is not json", 0), ("x2", '{"id": "not a number", "item": 1}', 1), ("x3", "[1, 2]", 0)]
    _produce(kafka_broker.bootstrap, "orders", good[:30] + bad + good[30:])
    job = JSON_JOB.format(bootstrap=kafka_broker.bootstrap, errors="dead_letter").replace("kjson", "kdead")
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    assert [r["id"] for r in ran.rows(spark, "orders", order_by="id")] == list(range(60))
    letters = ran.rows(spark, "checkpoints/kdead/_dead_letter", order_by="payload")
    assert [r["payload"] for r in letters] == sorted(v for _, v, _ in bad)
    for r in letters:
        assert r["topic"] == "orders" and r["source_table"] == "shop.orders" and r["pipeline"] == "orders"
        assert "not a JSON object" in r["error"] or "expected" in r["error"]
    # the offset of every dead letter is the record's own: rows of other partitions/offsets are the good ones
    by_payload = {r["payload"]: (r["partition"], r["offset"]) for r in letters}
    assert by_payload["this is not json"][0] == 0 and by_payload['{"id": "not a number", "item": 1}'][0] == 1
    # rows in = rows applied + rows dead-lettered, epoch by epoch, in the ledger
    ledger = spark.read.format("delta").load(str(ran.work / "checkpoints" / "kdead" / "_ledger"))
    per_epoch: dict[int, dict[str, int]] = {}
    for r in ledger.collect():
        d = r.asDict()
        per_epoch.setdefault(d["epoch"], {})[d["sink"]] = d["rows"]
    assert sum(e.get("_dead_letter", 0) for e in per_epoch.values()) == 3
    assert sum(sum(v for k, v in e.items() if not k.startswith("_")) for e in per_epoch.values()) == 60
    assert sum(e["_rows_in"] for e in per_epoch.values()) == len(good) + len(bad)
    for epoch, e in per_epoch.items():
        assert e["_rows_in"] == e.get("_dead_letter", 0) + sum(v for k, v in e.items() if not k.startswith("_")), epoch
    # and `status` shows the totals: rows in, dead letters, rows written
    import subprocess
    import sys

    (ran.work / "job.conf").write_text(job.replace("${work}", str(ran.work)))
    shown = subprocess.run([sys.executable, "-m", "streaming_engine", "status", "-c", str(ran.work / "job.conf")],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    lines = {ln.split()[1]: ln for ln in shown.stdout.splitlines() if ln.startswith("  ")}
    assert "rows 63 " in lines["_rows_in"] and "rows 3 " in lines["_dead_letter"], shown.stdout
    # explain names the dead-letter table
    from streaming_engine.job import compile_text
    from streaming_engine.plan.render import render

    text = render(compile_text(job, variables={"work": str(ran.work)}, file="job.conf"))
    assert "-> dead-letter table" in text and "kdead/_dead_letter" in text, text


CDC_JOB = """
env {{ job.name = cdc, job.mode = BATCH }}
source {{
  Kafka {{
    plugin_output = cdc
    bootstrap.servers = "{bootstrap}"
    topic = "{prefix}\\\\.public\\\\..*"
    pattern = true
    start_mode = earliest
    format = debezium_json
    tables_configs = [
      {{ schema = {{ table = "public.customers", fields {{ id = int, name = string, score = int }},
                    primaryKey {{ name = pk, columnNames = [id] }} }} }}
      {{ schema = {{ table = "public.orders", fields {{ id = bigint, customer = int, total = "decimal(10,2)",
                    placed = timestamp, day = date }}, primaryKey {{ name = pk, columnNames = [id] }} }} }}
    ]
  }}
}}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/wh/${{table_name}}", save_mode = upsert {sink} }} }}
"""

_PG_TABLES = """
CREATE TABLE customers (id int PRIMARY KEY, name text, score int);
CREATE TABLE orders (id bigint PRIMARY KEY, customer int, total numeric(10,2), placed timestamp, day date);
"""


def _pg_rows(pg, table: str) -> list[tuple]:
    return sorted(pg.execute(f"SELECT * FROM {table}"))


def _delta_rows(spark, ran, table: str, columns: list[str]) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in ran.rows(spark, f"wh/{table}"))


def test_debezium_change_events_from_postgresql_are_applied_to_delta(
    postgres_db, kafka_broker, debezium_factory, run_job_text, spark
):
    pg = postgres_db
    for stmt in _PG_TABLES.strip().split(";"):
        if stmt.strip():
            pg.execute(stmt)
    for i in range(1, 21):  # snapshot rows
        pg.execute("INSERT INTO customers VALUES (%s, %s, %s)", (i, f"c{i}", i * 10))
        pg.execute(
            "INSERT INTO orders VALUES (%s, %s, %s, %s, %s)",
            (1000 + i, i, f"{i}.25", f"2026-01-0{1 + i % 9} 10:00:00.123456", f"2026-02-{1 + i % 28:02d}"),
        )
    dbz = debezium_factory(
        pg, kafka_broker, "pgx", ["public.customers", "public.orders"], schemas_enable=True,
        properties={"decimal.handling.mode": "string"},
    )
    # streamed changes: updates, deletes, a primary-key change, a second update of one row
    pg.execute("UPDATE customers SET score = score + 1 WHERE id <= 5")
    pg.execute("UPDATE customers SET name = 'twice' WHERE id = 1")
    pg.execute("DELETE FROM customers WHERE id IN (6, 7)")
    pg.execute("UPDATE customers SET id = 100 WHERE id = 8")  # key change: delete 8, insert 100
    pg.execute("INSERT INTO customers VALUES (21, 'new', NULL)")
    pg.execute("UPDATE orders SET total = total * 2 WHERE id = 1001")
    pg.execute("DELETE FROM orders WHERE id = 1002")
    dbz.wait_published(40 + 5 + 1 + 2 * 2 + 3 + 1 + 1 + 2, timeout=60)

    job = CDC_JOB.format(bootstrap=kafka_broker.bootstrap, prefix="pgx", sink="").replace("sink {", """sink {
  Delta { plugin_input = cdc, path = "${work}/hist/${table_name}", save_mode = upsert, source_order_column = _lsn,
          stored_as_scd_type = 2 }""", 1)
    ran = run_job_text(job)
    cols_c = ["id", "name", "score"]
    cols_o = ["id", "customer", "total", "placed", "day"]
    assert _delta_rows(spark, ran, "customers", cols_c) == _pg_rows(pg, "customers")
    assert _delta_rows(spark, ran, "orders", cols_o) == _pg_rows(pg, "orders")

    def history(table: str) -> dict:
        out: dict = {}
        for r in sorted(ran.rows(spark, f"hist/{table}"), key=lambda r: r["__START_AT"]):
            out.setdefault(r["id"], []).append(r)
        return out

    # SCD type 2 beside it: the current versions equal PostgreSQL, every change before them is history
    hist = history("customers")
    assert sorted(tuple(v[-1][c] for c in cols_c) for v in hist.values() if v[-1]["__END_AT"] is None) \
        == _pg_rows(pg, "customers")
    assert [(r["name"], r["score"]) for r in hist[1]] == [("c1", 10), ("c1", 11), ("twice", 11)]
    assert [r["__END_AT"] for r in hist[1]] == [hist[1][1]["__START_AT"], hist[1][2]["__START_AT"], None]
    assert len(hist[6]) == 1 and hist[6][0]["__END_AT"] > hist[6][0]["__START_AT"]  # deleted: its version ended
    assert hist[8][0]["__END_AT"] == hist[100][0]["__START_AT"]  # the key change: one LSN ends 8 and starts 100

    # more changes, the same job again: only the new events are applied
    pg.execute("UPDATE customers SET score = 0 WHERE id = 100")
    pg.execute("DELETE FROM customers WHERE id = 1")
    pg.execute("INSERT INTO orders VALUES (2000, 21, 9.99, '2026-03-01 00:00:00', '2026-03-01')")
    dbz.wait_published(57 + 1 + 2 + 1, timeout=60)
    ran = run_job_text(job)
    assert _delta_rows(spark, ran, "customers", cols_c) == _pg_rows(pg, "customers")
    assert _delta_rows(spark, ran, "orders", cols_o) == _pg_rows(pg, "orders")
    hist = history("customers")
    assert [r["score"] for r in hist[100]] == [80, 0] and hist[100][-1]["__END_AT"] is None
    assert hist[1][-1]["__END_AT"] is not None and len(hist[1]) == 3  # deleted now: the last version ended


def _consume_all(bootstrap: str, topics: list[str]) -> list[tuple[bytes | None, bytes | None]]:
    from tests.integration.test_components import read_topic

    return [(r.key, r.value) for t in topics for r in read_topic(bootstrap, t)]


def test_debezium_events_replayed_three_times_and_shuffled_across_partitions_give_the_same_tables(
    postgres_db, kafka_broker, debezium_factory, run_job_text, spark, request
):
    """The same change events three times over, in random order on random
    partitions of one topic, read in small epochs: with the source's order (the
    LSN) stored in the tables and tombstones for deletes, the Delta tables still
    equal PostgreSQL."""
    import random

    pg = postgres_db
    for stmt in _PG_TABLES.strip().split(";"):
        if stmt.strip():
            pg.execute(stmt)
    for i in range(1, 11):
        pg.execute("INSERT INTO customers VALUES (%s, %s, %s)", (i, f"c{i}", i))
    dbz = debezium_factory(pg, kafka_broker, "rpl", ["public.customers", "public.orders"], schemas_enable=False,
                           properties={"decimal.handling.mode": "string"})
    for round_ in range(3):  # the same keys changed again and again: order matters
        pg.execute("UPDATE customers SET score = score * 10 + %s WHERE id <= 6", (round_,))
        pg.execute("DELETE FROM customers WHERE id = %s", (7 + round_,))
        pg.execute("INSERT INTO customers VALUES (%s, %s, %s)", (7 + round_, f"back{round_}", round_))
        pg.execute("UPDATE customers SET id = %s WHERE id = %s", (100 + round_, 1 + round_))  # key change
        pg.execute("INSERT INTO orders VALUES (%s, %s, %s, %s, %s)",
                   (round_, round_, "1.50", "2026-01-01 00:00:00", "2026-01-01"))
        pg.execute("DELETE FROM orders WHERE id = %s", (round_ - 1,))
        if round_ == 1:  # a TRUNCATE between changes: order 1 goes; a copy of its insert arriving later must not revive it
            pg.execute("TRUNCATE orders")
    # snapshot 10; rounds: updates (6, 5, 4 keys left), delete + tombstone, insert, key change (d, tombstone, c),
    # an order inserted, the previous order deleted (+ tombstone; none in round 0, nothing left in round 2),
    # the truncate (one event)
    dbz.wait_published(10 + (6 + 2 + 1 + 3 + 1) + (5 + 2 + 1 + 3 + 1 + 2 + 1) + (4 + 2 + 1 + 3 + 1), timeout=60)
    events = _consume_all(kafka_broker.bootstrap, dbz.topics)
    kafka_broker.create_topic("replay", partitions=3)
    copies = events * 3
    random.Random(7).shuffle(copies)
    _produce(kafka_broker.bootstrap, "replay", [(k.decode() if k else None, v.decode() if v else None,
                                                 random.Random(i).randrange(3)) for i, (k, v) in enumerate(copies)])
    job = (
        CDC_JOB.format(bootstrap=kafka_broker.bootstrap, prefix="rpl", sink=", source_order_column = _lsn")
        .replace('topic = "rpl\\\\.public\\\\..*"', 'topic = "replay"')
        .replace("pattern = true", "pattern = false, max_offsets_per_trigger = 25, debezium_record_include_schema = false")
        .replace("format = debezium_json", "format = debezium_json, truncate_events = apply")
    )
    assert 'topic = "replay"' in job and "max_offsets_per_trigger = 25" in job
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    assert _delta_rows(spark, ran, "customers", ["id", "name", "score"]) == _pg_rows(pg, "customers")
    assert _delta_rows(spark, ran, "orders", ["id", "customer", "total", "placed", "day"]) == _pg_rows(pg, "orders")
    assert [r[0] for r in _pg_rows(pg, "orders")] == [2]
    # several epochs (25 records each), so older events did arrive after newer ones across epochs
    versions = spark.sql(f"DESCRIBE HISTORY delta.`{ran.work / 'wh' / 'customers'}`").count()
    assert versions > 5
    request.node.user_properties.append(
        ("ran", f"{len(events)} Debezium events x 3 = {len(copies)} records shuffled over 3 partitions, 2 tables, "
                f"{versions} Delta versions of customers"))


def test_many_postgresql_tables_through_debezium_equal_their_delta_tables(
    postgres_db, kafka_broker, debezium_factory, run_job_text, spark, request
):
    """20 tables (STREAMING_ENGINE_CDC_TABLES=100 for a hundred) captured by
    one Debezium engine (one topic each), read through one topic pattern and
    applied by the one-job MERGE: snapshot rows, then per table an update, a
    delete, a primary-key change and an insert; every fifth table truncated."""
    pg = postgres_db
    count = int(os.environ.get("STREAMING_ENGINE_CDC_TABLES", "20"))
    tables = [f"t{i:02d}" for i in range(count)]
    for t in tables:
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text, n bigint)")
        for i in range(5):
            pg.execute(f"INSERT INTO {t} VALUES (%s, %s, %s)", (i, f"{t}-{i}", i))
    dbz = debezium_factory(pg, kafka_broker, "twenty", [f"public.{t}" for t in tables], schemas_enable=True)
    for k, t in enumerate(tables):
        pg.execute(f"UPDATE {t} SET n = n * 100, v = 'upd' WHERE id = 1")
        pg.execute(f"DELETE FROM {t} WHERE id = 2")
        pg.execute(f"UPDATE {t} SET id = 50 WHERE id = 3")
        pg.execute(f"INSERT INTO {t} VALUES (%s, %s, %s)", (100 + k, "new", None))
        if k % 5 == 0:  # every fifth table is truncated, then gets one new row
            pg.execute(f"TRUNCATE {t}")
            pg.execute(f"INSERT INTO {t} VALUES (7, 'after', 7)")
    published = count * 5 + count * (1 + 2 + 3 + 1) + len(tables[::5]) * 2
    dbz.wait_published(published, timeout=90 + 3 * count)
    configs = ",\n".join(
        f'{{ schema = {{ table = "public.{t}", fields {{ id = int, v = string, n = bigint }}, '
        f"primaryKey {{ name = pk, columnNames = [id] }} }} }}"
        for t in tables
    )
    job = f"""
env {{ job.name = twenty, job.mode = BATCH }}
source {{ Kafka {{ plugin_output = cdc, bootstrap.servers = "{kafka_broker.bootstrap}", topic = "twenty\\\\.public\\\\..*",
  pattern = true, start_mode = earliest, format = debezium_json, truncate_events = apply, tables_configs = [ {configs} ] }} }}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/wh/${{table_name}}", save_mode = upsert, source_order_column = _lsn }} }}
"""
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    for t in tables:
        assert _delta_rows(spark, ran, t, ["id", "v", "n"]) == _pg_rows(pg, t), t
    assert _pg_rows(pg, "t05") == [(7, "after", 7)]
    assert not (ran.work / "checkpoints" / "twenty" / "_dead_letter").exists()
    merges = sum((merge_paths(ran.work / "wh" / t) for t in tables), Counter())
    assert merges["one job"] >= len(tables) and merges["delta"] == 0, merges  # every table, every epoch: one job
    request.node.user_properties.append(
        ("ran", f"{len(tables)} PostgreSQL tables, {published} Debezium records (snapshot, updates, deletes, "
                f"key changes, {len(tables[::5])} truncates) in one topic pattern, {merges['one job']} one-job MERGE "
                "commits, every Delta table equal to PostgreSQL"))


def test_committed_epochs_move_the_consumer_group_and_group_offsets_start_a_new_checkpoint_there(
    kafka_broker, run_job_text, spark
):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import ConsumerGroupTopicPartitions

    kafka_broker.create_topic("orders", partitions=2)
    _produce(kafka_broker.bootstrap, "orders", [(str(i), _order(i), i % 2) for i in range(20)])
    job = JSON_JOB.format(bootstrap=kafka_broker.bootstrap, errors="fail").replace(
        "start_mode = earliest", 'start_mode = earliest, consumer.group = "eng-group"')
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    req = ConsumerGroupTopicPartitions("eng-group", [TopicPartition("orders", 0), TopicPartition("orders", 1)])
    got = admin.list_consumer_group_offsets([req])["eng-group"].result()
    assert sorted((tp.partition, tp.offset) for tp in got.topic_partitions) == [(0, 10), (1, 10)]

    # a NEW job (new checkpoint) starting from the group's offsets reads only what came after
    _produce(kafka_broker.bootstrap, "orders", [(str(i), _order(i), i % 2) for i in range(20, 26)])
    fresh = job.replace("kjson", "kjson_group").replace("start_mode = earliest", "start_mode = group_offsets") \
               .replace('path = "${work}/orders"', 'path = "${work}/orders2"')
    ran = run_job_text(fresh)
    assert ran.result.status == "FINISHED", ran.result.error
    assert [r["id"] for r in ran.rows(spark, "orders2", order_by="id")] == list(range(20, 26))


SCHEMALESS_JOB = """
env {{ job.name = plain, job.mode = BATCH }}
source {{ Kafka {{ plugin_output = raw, topic = plain, bootstrap.servers = "{bootstrap}", start_mode = earliest }} }}
sink {{ Delta {{ plugin_input = raw, path = "${{work}}/plain" }} }}
"""


def test_without_a_schema_each_record_is_the_text_of_one_content_column(kafka_broker, run_job_text, spark):
    """SeaTunnel's Kafka source without schema (its page's pattern and SASL
    examples): the record value, as text, in the column ``content``."""
    kafka_broker.create_topic("plain", partitions=1)
    values = ['{"id": 1}', "two words, a comma", "tab\tinside"]
    _produce(kafka_broker.bootstrap, "plain", [(None, v, 0) for v in values])
    ran = run_job_text(SCHEMALESS_JOB.format(bootstrap=kafka_broker.bootstrap))
    assert ran.result.status == "FINISHED", ran.result.error
    df = ran.delta(spark, "plain")
    assert df.columns == ["content"]
    assert sorted(r["content"] for r in df.collect()) == sorted(values)


LAG_JOB = """
env {{ job.name = cdc_lag, job.mode = BATCH }}
source {{
  Kafka {{
    plugin_output = cdc
    bootstrap.servers = "{bootstrap}"
    topic = "cdc_lag"
    start_mode = earliest
    format = debezium_json
    debezium_record_include_schema = false
    format_error_handle_way = dead_letter
    schema = {{ table = "public.customers", fields {{ id = int, name = string }} }}
  }}
}}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/customers" }} }}
"""


def _change(i: int, source_ts_ms: int | None, ts_ms: int, op: str = "c") -> str:
    """A Debezium change event (PostgreSQL connector's shape, without the schema wrapper)."""
    source = {"connector": "postgresql", "db": "shop", "schema": "public", "table": "customers", "lsn": 1000 + i}
    if source_ts_ms is not None:
        source["ts_ms"] = source_ts_ms
    return json.dumps({"before": None, "after": {"id": i, "name": f"c{i}"}, "op": op, "source": source, "ts_ms": ts_ms})


def test_the_time_lag_of_a_debezium_source_is_now_minus_the_source_time_of_the_last_applied_change(
    kafka_broker, run_job_text, spark
):
    """Debezium events whose changes were made an hour ago: lag >= 3600 s,
    from their ``source.ts_ms`` (not the envelope's ``ts_ms``, when the
    connector saw them); a record that is not a change (a dead letter) does not
    count; then fresh events: the lag is the seconds since they were made."""
    import time

    from streaming_engine.metrics.prometheus import PrometheusMetrics
    from streaming_engine.runtime.events import JobFinished, SourceProgress

    def metrics_of(ran) -> tuple[float | None, float | None]:
        m = PrometheusMetrics()
        for e in ran.events:
            if not isinstance(e, JobFinished):  # a finished job's event-time series go: read them as the run left them
                m.on_event(e)
        labels = {"job": "cdc_lag", "pipeline": "cdc", "source": "cdc"}
        return (m.registry.get_sample_value("streaming_engine_source_last_event_timestamp_seconds", labels),
                m.registry.get_sample_value("streaming_engine_source_lag_seconds", labels))

    kafka_broker.create_topic("cdc_lag", partitions=2)
    now_ms = int(time.time() * 1000)
    hour_ago = now_ms - 3_600_000
    old = [(str(i), _change(i, hour_ago - 1000 * (9 - i), now_ms), i % 2) for i in range(10)]  # newest: hour_ago
    future = now_ms + 86_400_000
    bad = [("x", _change(99, future, future, op="x"), 0)]  # unknown op: a dead letter, not an applied change
    _produce(kafka_broker.bootstrap, "cdc_lag", old[:5] + bad + old[5:])
    job = LAG_JOB.format(bootstrap=kafka_broker.bootstrap)

    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    assert sorted(r["id"] for r in ran.rows(spark, "customers")) == list(range(10))
    assert ran.delta(spark, "customers").columns == ["id", "name"]  # the envelope did not change
    times = [dict(e.event_time_ms) for e in ran.events if isinstance(e, SourceProgress) and e.event_time_ms]
    assert times and max(t["cdc"] for t in times) == hour_ago, times
    last, lag = metrics_of(ran)
    assert last == hour_ago / 1000
    assert 3600 <= lag < 3600 + (time.time() * 1000 - now_ms) / 1000 + 5, lag

    # fresh changes, the same job again (its checkpoint: only the new events)
    fresh_ms = int(time.time() * 1000)
    _produce(kafka_broker.bootstrap, "cdc_lag", [(str(i), _change(i, fresh_ms, fresh_ms), i % 2) for i in range(10, 14)])
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    assert sorted(r["id"] for r in ran.rows(spark, "customers")) == list(range(14))
    last, lag = metrics_of(ran)
    assert last == fresh_ms / 1000
    assert 0 <= lag <= time.time() - fresh_ms / 1000 + 1 and lag < 600, lag


TOAST_JOB = """
env {{ job.name = {name}, job.mode = BATCH }}
source {{
  Kafka {{
    plugin_output = cdc
    bootstrap.servers = "{bootstrap}"
    topic = "{prefix}.public.docs"
    start_mode = earliest
    format = debezium_json
    format_error_handle_way = {errors}
    schema = {{ table = "public.docs", fields {{ id = int, title = string, body = string, blob = bytes }},
               primaryKey {{ name = pk, columnNames = [id] }} }}
  }}
}}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/wh/docs", save_mode = upsert }} }}
"""


def test_a_value_debezium_could_not_read_is_never_written_over_the_stored_one(
    postgres_db, kafka_broker, debezium_factory, run_job_text, spark
):
    """PostgreSQL logs no TOASTed value an UPDATE left unchanged unless the table has REPLICA IDENTITY FULL;
    Debezium then sends its placeholder (``__debezium_unavailable_value``) in that column. Written as the
    value, it replaced the stored document in Delta. Now such an event is a decoding error naming the
    column: the job stops (fail) or keeps the event in the dead-letter table, and the stored value stays."""
    pg = postgres_db
    pg.execute("CREATE TABLE docs (id int PRIMARY KEY, title text, body text, blob bytea)")
    pg.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")  # TOASTed above ~2 kB, uncompressed
    pg.execute("ALTER TABLE docs ALTER COLUMN blob SET STORAGE EXTERNAL")
    body, blob = "b" * 20000, bytes(range(256)) * 40
    for i in (1, 2):
        pg.execute("INSERT INTO docs VALUES (%s, %s, %s, %s)", (i, f"t{i}", f"{i}{body}", blob))
    dbz = debezium_factory(pg, kafka_broker, "toast", ["public.docs"], schemas_enable=True)
    pg.execute("UPDATE docs SET title = 'renamed' WHERE id = 1")  # body and blob unchanged: not logged
    pg.execute("INSERT INTO docs VALUES (3, 't3', 'short', '\\x00')")
    dbz.wait_published(4, timeout=60)

    job = TOAST_JOB.format(name="toastfail", bootstrap=kafka_broker.bootstrap, prefix="toast", errors="fail")
    failed = run_job_text(job)
    assert failed.result.status == "FAILED"
    assert "column body: Debezium sent no value" in failed.result.error and "REPLICA IDENTITY FULL" in failed.result.error
    assert "offset 2" in failed.result.error, failed.result.error  # the record: snapshot 1, 2, then the update

    job = TOAST_JOB.format(name="toastdead", bootstrap=kafka_broker.bootstrap, prefix="toast", errors="dead_letter")
    ran = run_job_text(job)
    assert ran.result.status == "FINISHED", ran.result.error
    got = {r["id"]: (r["title"], r["body"], bytes(r["blob"])) for r in ran.rows(spark, "wh/docs")}
    assert got == {1: ("t1", f"1{body}", blob), 2: ("t2", f"2{body}", blob), 3: ("t3", "short", b"\x00")}
    (letter,) = ran.rows(spark, "checkpoints/toastdead/_dead_letter")
    assert letter["offset"] == 2 and "column body: Debezium sent no value" in letter["error"]
    assert '"title":"renamed"' in letter["payload"]  # the whole event, for a replay once the table is FULL


SCHEMA_JOB = """
env {{ job.name = {name}, job.mode = BATCH }}
source {{
  Kafka {{
    plugin_output = cdc
    bootstrap.servers = "{bootstrap}"
    topic = "{prefix}.public.gadgets"
    start_mode = earliest
    format = debezium_json
    schema.change.behavior = {behavior}
    schema = {{ table = "public.gadgets", fields {{ id = int, name = string, qty = int }},
               primaryKey {{ name = pk, columnNames = [id] }} }}
  }}
}}
sink {{
  Delta {{ plugin_input = cdc, path = "${{work}}/{name}/gadgets", save_mode = upsert }}
  Delta {{ plugin_input = cdc, path = "${{work}}/{name}/log" }}
}}
"""


def test_columns_added_in_postgresql_reach_delta_through_debezium_events_or_stop_the_job(
    postgres_db, kafka_broker, debezium_factory, run_job_text, spark
):
    """Debezium sends no DDL: a table's new columns show in its events (the ``after`` image and the event's
    schema). ``schema.change.behavior = exception`` fails the job naming them and the record; ``lenient``
    plans the pipeline again with them (types from the event's schema) and the Delta tables get them, every
    row with its value; a later run of the same checkpoint keeps them; ``ignore`` (the default) reads the
    declared columns only."""
    from streaming_engine.runtime.events import PipelineReplanned

    pg = postgres_db
    pg.execute("CREATE TABLE gadgets (id int PRIMARY KEY, name text, qty int)")
    for i in (1, 2, 3):
        pg.execute("INSERT INTO gadgets VALUES (%s, %s, %s)", (i, f"g{i}", i))
    dbz = debezium_factory(pg, kafka_broker, "evo", ["public.gadgets"], schemas_enable=True)
    pg.execute("UPDATE gadgets SET qty = 10 WHERE id = 1")
    pg.execute("ALTER TABLE gadgets ADD COLUMN color text, ADD COLUMN made date, ADD COLUMN big bigint")
    pg.execute("INSERT INTO gadgets VALUES (4, 'g4', 4, 'blue', '2026-03-01', 5000000000)")
    pg.execute("UPDATE gadgets SET color = 'red' WHERE id = 2")
    pg.execute("DELETE FROM gadgets WHERE id = 3")
    dbz.wait_published(3 + 1 + 1 + 1 + 2, timeout=60)  # a delete is followed by its tombstone
    job = functools.partial(SCHEMA_JOB.format, bootstrap=kafka_broker.bootstrap, prefix="evo")
    everything = "id, name, qty, color, made, big"

    failed = run_job_text(job(name="evo_exc", behavior="exception"))
    assert failed.result.status == "FAILED"
    error = failed.result.error or ""
    assert "[SCHEMA.CHANGED] table public.gadgets changed" in error and "added: color, made, big" in error, error
    assert "offset 4" in error, error  # snapshot 0-2, the update 3, then the insert with the new columns

    ran = run_job_text(job(name="evo_len", behavior="lenient"))
    assert ran.result.status == "FINISHED", ran.result.error
    [replanned] = [e for e in ran.events if isinstance(e, PipelineReplanned)]
    assert replanned.columns == ("public.gadgets.color", "public.gadgets.made", "public.gadgets.big"), replanned
    table = spark.read.format("delta").load(str(ran.work / "evo_len" / "gadgets"))
    assert [(f.name, f.dataType.simpleString()) for f in table.schema.fields][3:] == [
        ("color", "string"), ("made", "date"), ("big", "bigint")]
    assert sorted(tuple(r) for r in table.select(*everything.split(", ")).collect()) == sorted(
        pg.execute(f"SELECT {everything} FROM gadgets"))
    log = spark.read.format("delta").load(str(ran.work / "evo_len" / "log"))
    assert log.where("id = 4").select("color", "big").collect() == [("blue", 5000000000)]

    # the same checkpoint again, after more changes: planned with the columns it found, no new re-plan
    pg.execute("UPDATE gadgets SET color = 'green', big = 7 WHERE id = 4")
    pg.execute("INSERT INTO gadgets VALUES (5, 'g5', 5, 'white', '2026-04-01', NULL)")
    dbz.wait_published(8 + 2, timeout=60)
    again = run_job_text(job(name="evo_len", behavior="lenient"))
    assert again.result.status == "FINISHED", again.result.error
    assert not [e for e in again.events if isinstance(e, PipelineReplanned)]
    table = spark.read.format("delta").load(str(ran.work / "evo_len" / "gadgets"))
    assert sorted(tuple(r) for r in table.select(*everything.split(", ")).collect()) == sorted(
        pg.execute(f"SELECT {everything} FROM gadgets"))

    # a rename: its events name the new column and lack the old one; lenient (as Flink CDC's) adds the new
    # column and never drops: the old one keeps what it held, null in every row written after the rename
    pg.execute("ALTER TABLE gadgets RENAME COLUMN qty TO amount")
    pg.execute("UPDATE gadgets SET amount = 44 WHERE id = 4")
    pg.execute("INSERT INTO gadgets VALUES (6, 'g6', 6, 'black', NULL, NULL)")
    dbz.wait_published(10 + 2, timeout=60)
    renamed = run_job_text(job(name="evo_len", behavior="lenient"))
    assert renamed.result.status == "FINISHED", renamed.result.error
    [replanned] = [e for e in renamed.events if isinstance(e, PipelineReplanned)]
    assert replanned.columns == ("public.gadgets.amount",), replanned
    table = spark.read.format("delta").load(str(ran.work / "evo_len" / "gadgets"))
    assert table.columns == ["id", "name", "qty", "color", "made", "big", "amount"]
    got = {r["id"]: (r["qty"], r["amount"]) for r in table.collect()}
    assert got == {1: (10, None), 2: (2, None), 4: (None, 44), 5: (5, None), 6: (None, 6)}, got
    log = spark.read.format("delta").load(str(ran.work / "evo_len" / "log"))
    assert log.where("id = 6").select("qty", "amount").collect() == [(None, 6)]

    ignored = run_job_text(job(name="evo_ign", behavior="ignore"))
    assert ignored.result.status == "FINISHED", ignored.result.error
    table = spark.read.format("delta").load(str(ran.work / "evo_ign" / "gadgets"))
    assert table.columns == ["id", "name", "qty"]
    # the declared qty is not in the events after its rename: null in the rows they changed (4 and 6)
    assert sorted(tuple(r) for r in table.collect()) == sorted(
        pg.execute("SELECT id, name, CASE WHEN id IN (4, 6) THEN NULL ELSE amount END FROM gadgets"))
