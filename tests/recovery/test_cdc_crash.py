"""Exactly-once CDC apply under crashes: PostgreSQL -> real Debezium -> Kafka ->
the engine -> Delta, with the driver SIGKILLed at named points and at random
moments while it applies the change events, restarted each time.

PostgreSQL holds four tables; the test changes them (inserts, updates, deletes,
primary-key changes) in waves while Debezium captures them into Kafka (one
topic per table). The job reads the topics in small epochs
(``max_offsets_per_trigger``) and upserts into Delta with the LSN as source
order. The kills: targeted (an epoch's start, one table of the sink
committed, before the ledger, after the ledger), then random ones a random
delay after the restarted query started, until ``CI_KILLS`` landed (or
``STREAMING_ENGINE_SOAK`` kills); when a run finishes before its kill, the
test makes another wave of changes. At the end: every Delta table equals its
PostgreSQL table, and no epoch was applied twice (each table's log and its
tombstones' log hold each epoch's txn at most once, in order).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.jvm import C1_ONLY_OPTS

from tests.components.fixtures import debezium_factory, kafka_broker, postgres_db  # noqa: F401
from tests.recovery.test_crash_recovery import Run

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.soak]

TABLES = ("t0", "t1", "t2", "t3")
CI_KILLS = 7  # 4 targeted + 3 random; STREAMING_ENGINE_SOAK=<kills> for more
SOAK_KILLS = int(os.environ.get("STREAMING_ENGINE_SOAK", "0") or 0)
JOB = """
env { job.name = cdc_crash, checkpoint.dir = "${work}/ck", job.retry.times = 0,
      spark.driver.extraJavaOptions = "@JVM@" }
source {
  Kafka {
    plugin_output = cdc, bootstrap.servers = "${kafka}", topic = "crash\\\\.public\\\\..*", pattern = true
    start_mode = earliest, format = debezium_json, debezium_record_include_schema = false
    max_offsets_per_trigger = 60
    tables_configs = [ %s ]
  }
}
sink { Delta { plugin_input = cdc, path = "${work}/out/${table_name}", save_mode = upsert, source_order_column = _lsn } }
""" % ", ".join(
    f'{{ schema = {{ table = "public.{t}", fields {{ id = int, v = string, n = bigint }}, '
    f"primaryKey {{ name = pk, columnNames = [id] }} }} }}"
    for t in TABLES
)
JOB = JOB.replace("@JVM@", C1_ONLY_OPTS)


class Changes:
    """Random changes to the four tables; counts the Kafka records Debezium will publish."""

    def __init__(self, pg, seed: int = 11):
        self.pg, self.rng, self.records, self.next_id = pg, random.Random(seed), 0, 1000

    def create(self, rows: int) -> None:
        for t in TABLES:
            self.pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text, n bigint)")
            for i in range(rows):
                self.pg.execute(f"INSERT INTO {t} VALUES (%s, %s, %s)", (i, f"{t}-{i}", i))
        self.records += len(TABLES) * rows  # the snapshot

    def wave(self, n: int) -> None:
        for _ in range(n):
            t = self.rng.choice(TABLES)
            ids = [r[0] for r in self.pg.execute(f"SELECT id FROM {t}")]
            op = self.rng.random()
            if op < 0.35 or not ids:
                self.next_id += 1
                self.pg.execute(f"INSERT INTO {t} VALUES (%s, %s, %s)", (self.next_id, "new", self.next_id))
                self.records += 1
            elif op < 0.75:
                self.pg.execute(f"UPDATE {t} SET n = n + 1, v = %s WHERE id = %s", (f"u{self.rng.random():.3f}", self.rng.choice(ids)))
                self.records += 1
            elif op < 0.92:
                self.pg.execute(f"DELETE FROM {t} WHERE id = %s", (self.rng.choice(ids),))
                self.records += 2  # the delete and its tombstone
            else:
                self.next_id += 1
                self.pg.execute(f"UPDATE {t} SET id = %s WHERE id = %s", (self.next_id, self.rng.choice(ids)))
                self.records += 3  # delete of the old key, its tombstone, insert of the new one


def _txn_versions(table: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for f in sorted((table / "_delta_log").glob("*.json"), key=lambda p: int(p.stem)):
        for line in f.read_text().splitlines():
            if '"txn"' in line:
                txn = json.loads(line)["txn"]
                out.setdefault(txn["appId"], []).append(txn["version"])
    return out


def _progress(work: Path) -> int:
    commits = work / "ck" / "cdc_crash" / "cdc" / "commits"
    return max((int(p.name) for p in commits.iterdir() if p.name.isdigit()), default=-1) if commits.is_dir() else -1


@pytest.mark.timeout(max(1800, 120 * SOAK_KILLS))
def test_sigkill_during_the_cdc_apply_leaves_delta_equal_to_postgresql(
    request, tmp_path, postgres_db, kafka_broker, debezium_factory
):
    from streaming_engine.job import compile_text

    pg = postgres_db
    changes = Changes(pg)
    changes.create(rows=30)
    dbz = debezium_factory(pg, kafka_broker, "crash", [f"public.{t}" for t in TABLES], schemas_enable=False)
    changes.wave(150)
    dbz.wait_published(changes.records, timeout=120)
    (tmp_path / "job.conf").write_text(JOB.replace("${kafka}", kafka_broker.bootstrap))
    job = compile_text((tmp_path / "job.conf").read_text(), variables={"work": str(tmp_path)})
    [sink] = [v.uid for v in job.dag.vertices if v.kind == "sink"]

    want_kills = max(CI_KILLS, SOAK_KILLS)
    rng = random.Random(int(os.environ.get("STREAMING_ENGINE_SOAK_SEED", "7")))
    kills = runs = waves = 0
    began = time.monotonic()
    # 1. targeted: (point, sink uid or None), each at the epoch after the last committed one
    for point, uid in [("epoch_start", None), ("sink_table_committed", sink), ("before_ledger", None),
                       ("after_ledger", None)]:
        epoch = _progress(tmp_path) + 1
        run = Run(tmp_path, f"{point}@{epoch}" + (f":{uid}" if uid else ""))
        rc = run.wait()
        runs += 1
        assert rc == -signal.SIGKILL, f"fault {point}@{epoch} did not kill the driver (rc {rc}):\n{run.output()}"
        kills += 1
    # 2. random kills once the restarted query runs; more changes when a run finishes first
    while kills < want_kills:
        run = Run(tmp_path)
        runs += 1
        if run.wait_for("PipelineStarted", timeout=600):
            time.sleep(rng.uniform(0.0, 4.0))
        landed = run.kill()
        rc = run.wait()
        if landed:
            assert rc == -signal.SIGKILL, f"run ended with {rc} before the kill:\n{run.output()}"
            kills += 1
        else:
            assert rc == 0, f"job failed with {rc}:\n{run.output()}"
            waves += 1
            changes.wave(60)
            dbz.wait_published(changes.records, timeout=120)
    # 3. the last run applies everything
    run = Run(tmp_path)
    rc = run.wait()
    runs += 1
    assert rc == 0, f"job failed with {rc}:\n{run.output()}"
    request.node.user_properties.append((
        "ran",
        f"{len(TABLES)} PostgreSQL tables through Debezium and Kafka, {changes.records} Kafka records, {kills} kills, "
        f"{runs} runs, {waves} extra waves, {_progress(tmp_path) + 1} epochs, {time.monotonic() - began:.0f} s",
    ))

    spark = request.getfixturevalue("spark")
    for t in TABLES:
        out = tmp_path / "out" / t
        got = sorted((r.id, r.v, r.n) for r in spark.read.format("delta").load(str(out)).collect())
        assert got == sorted(pg.execute(f"SELECT id, v, n FROM {t}")), t
        # no epoch applied twice: each txn app id's versions strictly increase (a replay commits nothing)
        for where in (out, out / "_cdc_tombstones"):
            if (where / "_delta_log").is_dir():
                for app, versions in _txn_versions(where).items():
                    assert versions == sorted(set(versions)), (t, app, versions)
