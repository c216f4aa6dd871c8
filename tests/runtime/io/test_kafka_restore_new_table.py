"""Adding a table to a multi-table Kafka source on a restore from a savepoint
(Flink CDC's scan.newly-added-table): the new table, on topics of its own,
is read from their beginning; the other table continues where the savepoint
stood: every record once, against a real broker."""

from __future__ import annotations

import json
import threading
import time

import pytest

from streaming_engine.control.master import JobMaster
from streaming_engine.job import compile_text
from tests.components.fixtures import kafka_broker  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.timeout(600)]

TABLE_A = '{ topic = ta, schema = { table = "db.a", fields { id = bigint, v = string } } }'
TABLE_B = '{ topic = tb, schema = { table = "db.b", fields { id = bigint, v = string } } }'
JOB = """
env {{ job.name = grows, job.mode = {mode}, checkpoint.interval = 300, checkpoint.dir = "${{work}}/ck", job.retry.times = 0 }}
source {{ Kafka {{ plugin_output = src, bootstrap.servers = "{bootstrap}", format = json, start_mode = earliest,
                  max_offsets_per_trigger = 20, tables_configs = [ {tables} ] }} }}
sink {{ Delta {{ plugin_input = src, path = "${{work}}/out/${{table_name}}" }} }}
"""


def _produce(bootstrap: str, topic: str, ids: range) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in ids:
        p.produce(topic, value=json.dumps({"id": i, "v": f"{topic}-{i}"}))
    assert p.flush(30) == 0


def test_a_table_added_on_restore_is_read_from_its_beginning_and_the_others_continue(kafka_broker, spark, tmp_path):
    for topic in ("ta", "tb"):
        kafka_broker.create_topic(topic, partitions=1)
    _produce(kafka_broker.bootstrap, "ta", range(0, 60))
    _produce(kafka_broker.bootstrap, "tb", range(0, 30))  # written before the table is part of the job
    work = {"work": str(tmp_path)}

    first = JobMaster(compile_text(JOB.format(mode="STREAMING", bootstrap=kafka_broker.bootstrap, tables=TABLE_A),
                                   variables=work, file="job.conf"))
    epochs: list[int] = []
    first.bus.subscribe(lambda e: epochs.append(e.epoch) if type(e).__name__ == "EpochCommitted" else None)
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("r", first.run(spark=spark, timeout_s=300)))
    thread.start()
    deadline = time.monotonic() + 240
    while len(epochs) < 2 and time.monotonic() < deadline:  # 20 records an epoch: 60 records take three
        time.sleep(0.1)
    first.request_stop(savepoint=True)
    thread.join(timeout=120)
    assert out["r"].status == "SAVEPOINT_DONE", out["r"]
    read_a = spark.read.format("delta").load(str(tmp_path / "out" / "a")).count() if epochs else 0
    assert 0 < read_a <= 60

    _produce(kafka_broker.bootstrap, "ta", range(60, 80))
    _produce(kafka_broker.bootstrap, "tb", range(30, 40))
    restored = JobMaster(compile_text(JOB.format(mode="BATCH", bootstrap=kafka_broker.bootstrap,
                                                 tables=f"{TABLE_A}, {TABLE_B}"), variables=work, file="job.conf"))
    result = restored.run(spark=spark, restore=first.job_id)
    assert result.status == "FINISHED", result.error
    assert any("table 'db.b' added" in a for a in restored.restored.allowed), restored.restored.allowed
    a = sorted(r.id for r in spark.read.format("delta").load(str(tmp_path / "out" / "a")).collect())
    b = sorted(r.id for r in spark.read.format("delta").load(str(tmp_path / "out" / "b")).collect())
    assert a == list(range(80)), "table a: every record once, across the savepoint"
    assert b == list(range(40)), "table b: from the beginning of its topic, records before the restore included"
