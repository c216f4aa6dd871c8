"""Stop a CDC job (Debezium change events from a real Kafka broker, applied
in order to a Delta upsert table) with a savepoint while changes keep
arriving, restore it with a changed filter: the table equals the oracle built
from the savepoint's own offsets (changes before them through the old filter,
after them through the new one): nothing lost, nothing twice."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from streaming_engine.control.master import JobMaster
from streaming_engine.job import compile_text
from tests.components.fixtures import kafka_broker  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.timeout(900)]

JOB = """
env {{ job.name = cdc_saved, job.mode = {mode}, checkpoint.interval = 300, checkpoint.dir = "${{work}}/ck",
      job.retry.times = 0 }}
source {{ Kafka {{ plugin_output = cdc, bootstrap.servers = "{bootstrap}", topic = cdc_saved, start_mode = earliest,
                  format = debezium_json, debezium_record_include_schema = false, max_offsets_per_trigger = 25,
                  schema = {{ table = "public.items", fields {{ id = bigint, qty = bigint }},
                             primaryKey {{ name = pk, columnNames = [id] }} }} }} }}
transform {{ Sql {{ plugin_input = cdc, plugin_output = kept, query = "select * from cdc where qty >= {least}" }} }}
sink {{ Delta {{ plugin_input = kept, path = "${{work}}/items", save_mode = upsert, source_order_column = _lsn }} }}
"""
KEYS = 12


class Changes:
    """Debezium events of one table (PostgreSQL's shape), and the rows they make."""

    def __init__(self) -> None:
        self.rng = random.Random(26)
        self.state: dict[int, int] = {}
        self.events: list[tuple[str, int, int | None]] = []  # (op, id, qty after) in offset order

    def next(self) -> str:
        key = self.rng.randrange(KEYS)
        lsn = 1000 + len(self.events)
        source = {"connector": "postgresql", "db": "shop", "schema": "public", "table": "items", "lsn": lsn}
        before = {"id": key, "qty": self.state[key]} if key in self.state else None
        if key in self.state and self.rng.random() < 0.2:
            op, after = "d", None
            del self.state[key]
        else:
            op, after = ("u" if key in self.state else "c"), {"id": key, "qty": self.rng.randrange(100)}
            self.state[key] = after["qty"]
        self.events.append((op, key, after["qty"] if after else None))
        return json.dumps({"before": before, "after": after, "op": op, "source": source, "ts_ms": 0})


def _produce(bootstrap: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for v in values:
        p.produce("cdc_saved", value=v, partition=0)
    assert p.flush(30) == 0


def test_a_cdc_job_stopped_with_a_savepoint_and_restored_with_a_changed_filter_equals_the_oracle(
        kafka_broker, spark, tmp_path):
    kafka_broker.create_topic("cdc_saved", partitions=1)
    changes = Changes()
    _produce(kafka_broker.bootstrap, [changes.next() for _ in range(60)])
    work = {"work": str(tmp_path)}
    first = JobMaster(compile_text(JOB.format(mode="STREAMING", bootstrap=kafka_broker.bootstrap, least=20),
                                   variables=work, file="job.conf"))
    epochs: list[int] = []
    first.bus.subscribe(lambda e: epochs.append(e.epoch) if type(e).__name__ == "EpochCommitted" else None)
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("r", first.run(spark=spark, timeout_s=600)))
    thread.start()
    deadline = time.monotonic() + 300
    while len(epochs) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    _produce(kafka_broker.bootstrap, [changes.next() for _ in range(40)])  # changes keep arriving meanwhile
    first.request_stop(savepoint=True)
    thread.join(timeout=300)
    assert out["r"].status == "SAVEPOINT_DONE", out["r"]

    saved = json.loads((tmp_path / "ck" / "cdc_saved" / "_savepoints" / f"{first.job_id}.json").read_text())
    (point,) = saved["pipelines"].values()
    (offsets,) = point["offsets"]  # the source's offsets at the savepoint: {"cdc_saved": {"0": next offset}}
    cut = int(offsets["cdc_saved"]["0"])
    assert 0 < cut <= 100

    _produce(kafka_broker.bootstrap, [changes.next() for _ in range(40)])
    restored = JobMaster(compile_text(JOB.format(mode="BATCH", bootstrap=kafka_broker.bootstrap, least=50),
                                      variables=work, file="job.conf"))
    result = restored.run(spark=spark, restore=first.job_id)
    assert result.status == "FINISHED", result.error
    assert "transform 'kept' (Sql): options changed" in restored.restored.allowed

    # the oracle: each change in offset order through the filter of its side of the savepoint; a
    # delete always applies (the Sql filter sees a delete's row as it was before it: a -D row
    # passes when its old qty does), an upsert only when it passes
    want: dict[int, int] = {}
    last: dict[int, int] = {}  # id -> qty before a delete
    for offset, (op, key, qty) in enumerate(changes.events):
        least = 20 if offset < cut else 50
        if op == "d":
            if last.get(key, -1) >= least:
                want.pop(key, None)
        elif qty >= least:
            want[key] = qty
        if qty is not None:
            last[key] = qty
    got = {r.id: r.qty for r in spark.read.format("delta").load(str(tmp_path / "items")).collect()}
    assert got == want
