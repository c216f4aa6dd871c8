"""SIGKILL of the driver around the Kafka sink's transaction (EXACTLY_ONCE):
inside the transaction (every record of epoch 1 sent, not committed), then,
in the next run, right after epoch 2 committed (before Spark's commit log);
a fresh run finishes the job. A ``read_committed`` consumer sees every row
exactly once; a ``read_uncommitted`` one also sees the aborted attempt of
epoch 1. And a zombie: a producer of the sink's transactional id with an
open transaction is fenced by the next run, its records never committed.

The job runs in its own process (``python -m streaming_engine run``), the
rows are the test's own (FakeSource ``rows``), three per epoch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.jvm import C1_ONLY_OPTS

from tests.components.fixtures import kafka_broker_module  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
IDS = list(range(1, 13))
PER_EPOCH = 3
JOB = """
env {{ job.name = {name}, job.mode = BATCH, checkpoint.dir = "${{work}}/ck", job.retry.times = 0,
      spark.driver.extraJavaOptions = "{jvm}" }}  # C1 only: a short job starts faster
source {{ FakeSource {{ plugin_output = src, rows.per.batch = {per_epoch},
  schema = {{ table = "shop.items", fields {{ id = bigint, label = string }}, primaryKey {{ name = pk, columnNames = [id] }} }},
  rows = [ {rows} ] }} }}
sink {{ Kafka {{ plugin_input = src, topic = "{topic}", bootstrap.servers = "{bootstrap}", format = json,
  semantics = EXACTLY_ONCE, transaction_prefix = "{prefix}" }} }}
"""


def _job(work: Path, name: str, topic: str, bootstrap: str, prefix: str = "crash") -> None:
    rows = ", ".join(f'{{ kind = INSERT, fields = [{i}, "item-{i}"] }}' for i in IDS)
    text = JOB.format(jvm=C1_ONLY_OPTS, name=name, per_epoch=PER_EPOCH, rows=rows, topic=topic, bootstrap=bootstrap, prefix=prefix)
    (work / "job.conf").write_text(text)


def _run(work: Path, fault: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("STREAMING_ENGINE_FAULT", None)
    if fault:
        env["STREAMING_ENGINE_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "streaming_engine", "run", "-c", str(work / "job.conf"), "-i", f"work={work}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, start_new_session=True,
    )


def _ids(bootstrap: str, topic: str, isolation: str, timeout: float = 30.0) -> list[int]:
    """The ids of every record of ``topic`` (one partition), from the start to its end
    (read_committed: to the last stable offset)."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": isolation,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[int] = []
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"{topic}: no end of partition 0 ({isolation})"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"{topic}: {msg.error()}")
            out.append(json.loads(msg.value())["id"])
    finally:
        consumer.close()


def _mark(broker, group: str) -> int | None:
    """The epoch the sink's group holds (its offset of the epoch topic's partition 0)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = broker.admin()
    spec = ConsumerGroupTopicPartitions(group, [TopicPartition("_streaming_engine_sink_epochs", 0)])
    [found] = admin.list_consumer_group_offsets([spec], require_stable=True).values()
    [tp] = found.result(30).topic_partitions
    return tp.offset if tp.offset >= 0 else None


def _epoch(i: int) -> int:
    return (i - 1) // PER_EPOCH


def _tail(done: subprocess.CompletedProcess) -> str:
    return done.stdout[-3000:] + done.stderr[-3000:]


def test_kills_inside_and_after_the_transaction_leave_every_record_once(kafka_broker_module, tmp_path):
    broker = kafka_broker_module
    topic, group = "items", "crash-kcrash.src.kafka.src"
    _job(tmp_path, "kcrash", topic, broker.bootstrap)

    # 1. killed inside epoch 1's transaction: its records are in the log, not committed
    killed = _run(tmp_path, "kafka_records_sent@1")
    assert killed.returncode == -signal.SIGKILL, _tail(killed)
    assert _ids(broker.bootstrap, topic, "read_uncommitted") == IDS[: 2 * PER_EPOCH]
    assert _mark(broker, group) == 0

    # 2. the next run fences the dead producer (epoch 1's transaction aborted),
    #    writes epoch 1 again and is killed right after committing epoch 2
    killed = _run(tmp_path, "sink_table_committed@2")
    assert killed.returncode == -signal.SIGKILL, _tail(killed)
    assert _mark(broker, group) == 2
    assert _ids(broker.bootstrap, topic, "read_committed") == IDS[: 3 * PER_EPOCH]

    # 3. a fresh run: Spark replays epoch 2, which the topic holds (skipped), then the rest
    done = _run(tmp_path, None)
    assert done.returncode == 0, _tail(done)
    committed = _ids(broker.bootstrap, topic, "read_committed")
    assert committed == IDS  # every record once, in order
    everything = _ids(broker.bootstrap, topic, "read_uncommitted")
    aborted = [i for i in IDS if _epoch(i) == 1]
    assert sorted(everything) == sorted(IDS + aborted)  # the aborted attempt of epoch 1, invisible to read_committed
    assert _mark(broker, group) == _epoch(IDS[-1])


def test_a_zombie_producer_of_the_transactional_id_is_fenced(kafka_broker_module, tmp_path):
    from confluent_kafka import KafkaException, Producer

    broker = kafka_broker_module
    topic = "zombie_items"
    broker.create_topic(topic)
    _job(tmp_path, "kzombie", topic, broker.bootstrap, prefix="zz")
    # a driver that lost contact: its producer has an open transaction with a record in it
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "zz-kzombie.src.kafka.src"})
    zombie.init_transactions(60)
    zombie.begin_transaction()
    zombie.produce(topic, key=b'{"id":999}', value=json.dumps({"id": 999, "label": "zombie"}).encode())
    assert zombie.flush(30) == 0

    done = _run(tmp_path, None)
    assert done.returncode == 0, _tail(done)
    with pytest.raises(KafkaException) as e:  # fenced: the zombie can no longer commit
        zombie.commit_transaction(30)
    assert "fenced" in str(e.value).lower() or "epoch" in str(e.value).lower(), e.value
    assert _ids(broker.bootstrap, topic, "read_committed") == IDS
    assert sorted(_ids(broker.bootstrap, topic, "read_uncommitted")) == sorted([999, *IDS])
