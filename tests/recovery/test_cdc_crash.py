"""Exactly-once CDC apply under crashes: PostgreSQL -> real Debezium -> Kafka ->
the engine -> Delta, with the driver SIGKILLed at named points and at random
moments while it applies the change events, restarted each time.

PostgreSQL holds four tables; the test changes them (inserts, updates, deletes,
primary-key changes) in waves while Debezium captures them into Kafka (one
topic per table). The job reads the topics in small epochs
(``max_offsets_per_trigger``) and upserts into Delta with the LSN as source
order. The kills: targeted (an epoch's start, one table of the sink
committed, before the ledger, after the ledger, one table committed again) in
epochs past the snapshot (the first ``FIRST_KILL_EPOCH`` epochs hold only
snapshot reads; the test prints what each killed epoch held: rows inserted,
updated and deleted by its MERGEs, tombstones, and asserts that updates and
deletes were among them), then random ones a random delay after the
restarted query started, until ``CI_KILLS`` landed (or
``STREAMING_ENGINE_SOAK`` kills); when a run finishes before its kill, the
test makes another wave of changes. After every run, killed or not: no
epoch is in a target twice (each txn app id's versions strictly increase in
the table's log and in its tombstones' log) and every epoch the ledger
records for a table is in that table's log (so the check cannot pass on a
log without any). At the end: every Delta table equals its PostgreSQL table.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.jvm import C1_ONLY_OPTS
from tests.merge_paths import merge_paths

from tests.components.fixtures import debezium_factory, kafka_broker, postgres_db  # noqa: F401
from tests.recovery.test_crash_recovery import Run, _commits as crash_commits, _ledger_epochs as crash_ledger_epochs

pytestmark = [pytest.mark.spark, pytest.mark.components, pytest.mark.soak]

TABLES = ("t0", "t1", "t2", "t3")
FIRST_KILL_EPOCH = 4  # epochs 0-3 read the snapshot (4 x 30 rows at ~10 per topic per epoch)
# (fault point, its epoch, whether it names the sink): each planned at the epoch the previous kill left to replay
# (the sink's points land inside the one-job MERGE: after every table's files are written and before any
# commit, and between two tables' commits)
TARGETED = [("epoch_start", 4, False), ("sink_table_committed", 4, True), ("sink_files_written", 5, True),
            ("before_ledger", 5, False), ("after_ledger", 6, False), ("sink_table_committed", 7, True)]
CI_KILLS = 7  # 6 targeted + 1 random; STREAMING_ENGINE_SOAK=<kills> for more
SOAK_KILLS = int(os.environ.get("STREAMING_ENGINE_SOAK", "0") or 0)
JOB = """
env { job.name = cdc_crash, checkpoint.dir = "${work}/ck", job.retry.times = 0,
      spark.driver.extraJavaOptions = "@JVM@" }
source {
  Kafka {
    plugin_output = cdc, bootstrap.servers = "${kafka}", topic = "crash\\\\.public\\\\..*", pattern = true
    start_mode = earliest, format = debezium_json, debezium_record_include_schema = false
    max_offsets_per_trigger = 40
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


def _ledger_epochs(work: Path) -> dict[str, set[int]]:
    """table (its last name part) -> the epochs the ledger records for it."""
    out: dict[str, set[int]] = {}
    for (_, table, epoch), _n in crash_ledger_epochs(work, "cdc_crash").items():
        out.setdefault(table.split(".")[-1], set()).add(epoch)
    return out


def _check_targets(work: Path, when: str) -> None:
    """No epoch twice in any target, and every epoch the ledger holds for a table in its log."""
    recorded = _ledger_epochs(work)
    for t in TABLES:
        out = work / "out" / t
        for where in (out, out / "_cdc_tombstones"):
            if (where / "_delta_log").is_dir():
                for app, versions in _txn_versions(where).items():
                    assert versions == sorted(set(versions)), (when, t, app, versions)
        held = {v for versions in _txn_versions(out).values() for v in versions} if (out / "_delta_log").is_dir() else set()
        missing = recorded.get(t, set()) - held
        assert not missing, f"{when}: epochs {sorted(missing)} are in the ledger for {t} but not in its log"


def _what_epoch_held(work: Path, epoch: int) -> Counter:
    """What an epoch's commits did to the four targets: rows inserted, updated and
    deleted by its MERGEs (Delta's operationMetrics), tombstones appended."""
    held: Counter = Counter()
    for t in TABLES:
        out = work / "out" / t
        for where, tomb in ((out, False), (out / "_cdc_tombstones", True)):
            for _, actions in crash_commits(where):
                if not any("txn" in a and a["txn"]["version"] == epoch for a in actions):
                    continue
                for a in actions:
                    m = a.get("commitInfo", {}).get("operationMetrics", {})
                    if tomb:  # appended, or merged into the tombstones of earlier deletes
                        held["tombstones"] += sum(int(m.get(k, 0)) for k in (
                            "numOutputRows", "numTargetRowsInserted", "numTargetRowsUpdated"))
                    else:
                        for k in ("inserted", "updated", "deleted"):
                            held[k] += int(m.get(f"numTargetRows{k.capitalize()}", 0))
    return held


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
    changes.wave(200)  # with the snapshot ~390 records: ~10 epochs of 40
    dbz.wait_published(changes.records, timeout=120)
    (tmp_path / "job.conf").write_text(JOB.replace("${kafka}", kafka_broker.bootstrap))
    job = compile_text((tmp_path / "job.conf").read_text(), variables={"work": str(tmp_path)})
    [sink] = [v.uid for v in job.dag.vertices if v.kind == "sink"]

    want_kills = max(CI_KILLS, SOAK_KILLS)
    rng = random.Random(int(os.environ.get("STREAMING_ENGINE_SOAK_SEED", "7")))
    kills = runs = waves = 0
    began = time.monotonic()
    # 1. targeted, in epochs past the snapshot: the first run commits epochs 0-3 and dies at the start of 4
    landed: list[tuple[str, int]] = []
    for point, epoch, names_sink in TARGETED:
        run = Run(tmp_path, f"{point}@{epoch}" + (f":{sink}" if names_sink else ""))
        rc = run.wait()
        runs += 1
        assert rc == -signal.SIGKILL, f"fault {point}@{epoch} did not kill the driver (rc {rc}):\n{run.output()}"
        kills += 1
        landed.append((point, epoch))
        _check_targets(tmp_path, f"after the kill at {point}@{epoch}")
    # 2. random kills once the restarted query runs; more changes when a run finishes first
    while kills < want_kills:
        run = Run(tmp_path)
        runs += 1
        if run.wait_for("PipelineStarted", timeout=600):
            time.sleep(rng.uniform(0.0, 4.0))
        hit = run.kill()
        rc = run.wait()
        if hit:
            assert rc == -signal.SIGKILL, f"run ended with {rc} before the kill:\n{run.output()}"
            kills += 1
            landed.append(("random", _progress(tmp_path) + 1))
        else:
            assert rc == 0, f"job failed with {rc}:\n{run.output()}"
            waves += 1
            changes.wave(60)
            dbz.wait_published(changes.records, timeout=120)
        _check_targets(tmp_path, f"after run {runs}")
    # 3. the last run applies everything
    run = Run(tmp_path)
    rc = run.wait()
    runs += 1
    assert rc == 0, f"job failed with {rc}:\n{run.output()}"
    _check_targets(tmp_path, "after the last run")
    assert set(TABLES) <= set(_ledger_epochs(tmp_path))  # (so the check above compared every table's epochs)
    merges = sum((merge_paths(tmp_path / "out" / t) for t in TABLES), Counter())
    assert merges["one job"] > 0 and merges["delta"] == 0, merges  # every epoch through the one-job MERGE
    held = {(p, e): _what_epoch_held(tmp_path, e) for p, e in landed}
    targeted = sum((held[(p, e)] for p, e, _ in TARGETED), Counter())
    # the targeted kills landed in epochs that changed rows, not only in the snapshot's inserts
    assert targeted["updated"] > 0 and targeted["deleted"] > 0 and targeted["tombstones"] > 0, held
    request.node.user_properties.append((
        "ran",
        f"{len(TABLES)} PostgreSQL tables through Debezium and Kafka, {changes.records} Kafka records, {kills} kills, "
        f"{runs} runs, {waves} extra waves, {_progress(tmp_path) + 1} epochs, {time.monotonic() - began:.0f} s; "
        "kills (point@epoch: what the epoch's commits did): " + "; ".join(
            f"{p}@{e}: " + (", ".join(f"{n} {k}" for k, n in sorted(held[(p, e)].items()) if n) or "nothing")
            for p, e in landed),
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
