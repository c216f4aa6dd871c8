"""Exactly-once under crashes: SIGKILL the driver at chosen and random points,
restart the same job, and compare every output table with an oracle computed
from the deterministic source in pure Python.

CI runs the targeted kill points plus random kills (10 kills at least). Set
STREAMING_ENGINE_SOAK=<kills> for a longer soak (hundreds of kills); the test
prints the counts either way.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sources._fake_runtime import TableSpec, arrow_schema, generate
from streaming_engine.job import compile_text

pytestmark = [pytest.mark.spark, pytest.mark.soak]

JOB = """
env { job.name = crash_job, checkpoint.dir = "${work}/ck", job.retry.times = 0,
      spark.driver.extraJavaOptions = "-XX:TieredStopAtLevel=1" }
source {
  FakeSource {
    plugin_output = cdc
    seed = 2026
    tables_configs = [
      { schema = { table = "shop.orders", fields { id = bigint, amount = double, note = string },
                   primaryKey { name = pk, columnNames = [id] } },
        row.num = 2400, rows.per.batch = 200, string.length = 8,
        cdc = { key_column = id, keys = 150, update_ratio = 0.35, delete_ratio = 0.15 } },
      { schema = { table = "shop.users", fields { id = bigint, name = string },
                   primaryKey { name = pk, columnNames = [id] } },
        row.num = 1200, rows.per.batch = 100, cdc = { key_column = id, keys = 80 } }
    ]
  }
}
sink {
  Delta { plugin_input = cdc, path = "${work}/state/${table_name}", save_mode = upsert }
  Delta { plugin_input = cdc, path = "${work}/log/${table_name}" }
}
"""
TABLES = ("shop.orders", "shop.users")
EPOCHS = 12
# sink uids as the planner derives them (see explain): upsert sink, then append sink
SINK_A, SINK_B = "delta.cdc", "delta.cdc-2"

TARGETED = [
    "epoch_start@1",
    f"after_sink@1:{SINK_A}",  # between the two sinks' commits of one epoch
    f"before_sink@2:{SINK_B}",
    "before_ledger@3",
    "after_ledger@3",  # every Delta commit done, Spark's commit log not written yet
    f"after_sink@4:{SINK_B}",
]


def _oracle(work: Path):
    job = compile_text(JOB, variables={"work": str(work)})
    src = job.dag.vertex("FakeSource#1")
    out = {}
    for index, (tid, cfg) in enumerate(src.plugin.table_configs()):
        schema = src.schema.table(tid)
        rows = generate(TableSpec(index, schema, cfg, cfg.cdc, arrow_schema(schema)), 0, cfg.row_num).to_pylist()
        state: dict = {}
        for r in rows:
            data = {k: v for k, v in r.items() if not k.startswith("__")}
            if r["__kind"] == "-D":
                state.pop(r["id"], None)
            elif r["__kind"] != "-U":
                state[r["id"]] = data
        log = Counter(tuple(sorted({k: v for k, v in r.items() if not k.startswith("__")}.items())) for r in rows)
        out[tid] = (state, log)
    return out


def _run(work: Path, fault: str | None = None, kill_after: float | None = None) -> int:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("STREAMING_ENGINE_FAULT", None)
    if fault:
        env["STREAMING_ENGINE_FAULT"] = fault
    conf = work / "job.conf"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming_engine", "run", "-c", str(conf), "-i", f"work={work}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, text=True,
    )
    try:
        out, _ = proc.communicate(timeout=kill_after if kill_after else 900)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole driver: Python and its JVM
        proc.communicate()
        return -signal.SIGKILL
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # no orphan JVM survives a crashed driver
        except ProcessLookupError:
            pass
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"job failed with {proc.returncode}:\n{out[-3000:]}")
    return proc.returncode


@pytest.mark.timeout(3000)
def test_sigkill_at_any_point_gives_exactly_once_results(spark, tmp_path):
    (tmp_path / "job.conf").write_text(JOB)
    soak = int(os.environ.get("STREAMING_ENGINE_SOAK", "0"))
    rng = random.Random(int(os.environ.get("STREAMING_ENGINE_SOAK_SEED", "7")))
    kills = 0
    runs = 0
    # 1. every named point, once each
    slowest = 0.0
    for fault in TARGETED:
        started = time.monotonic()
        rc = _run(tmp_path, fault=fault)
        slowest = max(slowest, time.monotonic() - started)
        runs += 1
        assert rc == -signal.SIGKILL, f"fault {fault} did not fire"
        kills += 1
    # 2. random kills, timed relative to how long a run takes on this machine
    #    (start-up plus an epoch or two), until the job completes
    random_kills = max(4, soak)
    finished = False
    while not finished:
        delay = rng.uniform(0.5, 1.2) * slowest if kills < len(TARGETED) + random_kills else None
        rc = _run(tmp_path, kill_after=delay)
        runs += 1
        if rc == -signal.SIGKILL:
            kills += 1
        else:
            finished = True
    print(f"\ncrash test: {kills} kills, {runs} runs, job finished")

    expected = _oracle(tmp_path)
    for tid in TABLES:
        name = tid.split(".")[1]
        state, log = expected[tid]
        got_state = {r["id"]: r.asDict() for r in spark.read.format("delta").load(str(tmp_path / "state" / name)).collect()}
        assert got_state == state, f"{tid}: upsert table differs from the oracle"
        got_log = Counter(
            tuple(sorted(r.asDict().items())) for r in spark.read.format("delta").load(str(tmp_path / "log" / name)).collect()
        )
        assert got_log == log, f"{tid}: change log has duplicates or losses"
    # the ledger saw every epoch exactly once per sink and table
    ledger = spark.read.format("delta").load(str(tmp_path / "ck" / "crash_job" / "_ledger"))
    per_key = Counter((r["sink"], r["table"], r["epoch"]) for r in ledger.collect())
    assert per_key and max(per_key.values()) == 1
    assert {e for (_, _, e) in per_key} == set(range(EPOCHS))
    assert kills >= 10, f"only {kills} kills landed before the job finished"
