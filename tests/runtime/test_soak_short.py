"""The CI version of the long-run soak (bench/ has the 2,000-epoch row): a
STREAMING CDC job over several tables (upserts and a change log) for a few
dozen epochs, checking the bounds that are not timings between an early
epoch and the last: files per table bounded by the compaction (not by the
number of epochs), the JVM heap after a full GC flat, the threads and the
driver's open files bounded,
the run's summary one row per table whatever the number of epochs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from streaming_engine.job import compile_text
from streaming_engine.runtime.events import EpochCommitted, EventBus
from streaming_engine.runtime.runner import execute

pytestmark = [pytest.mark.spark]  # a session of its own, in a subprocess

TABLES = 3
MIN_FILES = 6
# the heap after GC fills up to its plateau over the first ~40 epochs (Spark's bounded status store and code
# cache, Delta's snapshots; measured 114, 120, 155, 125, 155 MB at epochs 12, 25, 40, 55, 70) and swings with
# what an epoch holds when looked at: the early point is after the warm-up, each point the smallest of the
# looks after the epochs of a window ending there
EARLY, EPOCHS = 35, 60
WINDOW = 5
JOB = """
env { job.name = soak, job.mode = STREAMING, checkpoint.interval = 100, checkpoint.dir = "${work}/ck",
      job.retry.times = 0, maintenance.compact.min_files = %d }
source { FakeSource { plugin_output = cdc, seed = 7, tables_configs = [ %s ] } }
sink {
  Delta { plugin_input = cdc, path = "${work}/state/${table_name}", save_mode = upsert, compact_min_files = %d }
  Delta { plugin_input = cdc, path = "${work}/log/${table_name}", compact_min_files = %d }
}
""" % (MIN_FILES, ", ".join(
    f'{{ schema = {{ table = "db.t{i}", fields {{ id = bigint, v = string, n = double }}, '
    f"primaryKey {{ name = pk{i}, columnNames = [id] }} }}, row.num = 1000000, rows.per.batch = 20, "
    f"cdc = {{ key_column = id, keys = 40, update_ratio = 0.3, delete_ratio = 0.1 }} }}"
    for i in range(TABLES)), MIN_FILES, MIN_FILES)


def _live_files(table: Path) -> int:
    live: set[str] = set()
    for f in sorted((table / "_delta_log").glob("*.json"), key=lambda p: int(p.stem)):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                live.add(a["add"]["path"])
            elif "remove" in a:
                live.discard(a["remove"]["path"])
    return len(live)


def soak(spark, work: Path) -> dict:
    """Run the job for EPOCHS epochs; the heap and thread counts at the two windows."""
    import gc
    import os

    jvm = spark.sparkContext._jvm
    fds = Path(f"/proc/{jvm.java.lang.ProcessHandle.current().pid()}/fd")
    job = compile_text(JOB, variables={"work": str(work)}, file="soak.conf")
    seen: dict[int, dict] = {}
    count = [0]

    def look(e: object) -> None:
        if not isinstance(e, EpochCommitted):
            return
        count[0] += 1
        point = next((p for p in (EARLY, EPOCHS) if p - WINDOW < count[0] <= p), None)
        if point is not None:
            gc.collect()  # Python's unreachable DataFrames hold JVM plans until py4j releases them
            for _ in range(2):
                jvm.java.lang.System.gc()
            rt = jvm.java.lang.Runtime.getRuntime()
            heap = rt.totalMemory() - rt.freeMemory()
            seen[point] = {
                "heap": min(heap, seen.get(point, {}).get("heap", heap)),
                "jvm_threads": jvm.java.lang.management.ManagementFactory.getThreadMXBean().getThreadCount(),
                "threads": threading.active_count(),
                "open_files": min(len(os.listdir(fds)), seen.get(point, {}).get("open_files", 1 << 30)),
            }

    bus = EventBus()
    bus.subscribe(look)
    result = execute(job, spark=spark, bus=bus, stop_after_epochs=EPOCHS)
    return {"status": result.status, "error": str(result.error or ""), "committed": result.committed,
            "seen": {str(k): v for k, v in seen.items()}}


def test_a_cdc_job_of_many_epochs_keeps_files_heap_and_threads_bounded(tmp_path):
    """In a driver of its own: the heap of the tests' shared session holds what
    earlier tests left in Spark's and Delta's bounded caches, which fill up
    (with this job's larger entries) while the soak runs."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tests.runtime.test_soak_short", str(tmp_path)],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] in ("FINISHED", "CANCELED"), out["error"]
    seen = {int(k): v for k, v in out["seen"].items()}
    assert set(seen) == {EARLY, EPOCHS}, seen
    early, late = seen[EARLY], seen[EPOCHS]
    print(f"soak: {EPOCHS} epochs; heap after GC {early['heap'] >> 20} -> {late['heap'] >> 20} MB; "
          f"JVM threads {early['jvm_threads']} -> {late['jvm_threads']}; Python threads {early['threads']} -> "
          f"{late['threads']}; open files {early['open_files']} -> {late['open_files']}")
    # no structure grows with the epochs (slack for what one epoch holds at the moment it is looked at)
    assert late["heap"] <= 1.1 * early["heap"] + (16 << 20), seen
    # Spark's pools grow to their maximum, then stay: no thread per epoch (stage pools: 128 for shuffle
    # and result stages, session.BASE_CONF, and Spark's 128 for broadcasts; the block manager's two: 100
    # each; up to ~150 others: py4j, RPC, listeners). Spark's defaults let the stage pools grow to 1024 each (950 threads at epoch 20)
    assert late["jvm_threads"] <= 3 * 128 + 2 * 100 + 150 and late["threads"] <= early["threads"] + 2, seen
    # no file left open per epoch: the one-job MERGE's first look at a file stopped at its first changed key
    # and Spark's row-based Parquet reader closes a file only at its end (two descriptors per table and epoch
    # grew: 7,400 open in the bench soak at epoch 1,100)
    assert late["open_files"] <= early["open_files"] + 40, seen
    # files per table: bounded by the compaction, not by the number of epochs (one file per epoch per
    # table without it: 40 in each change log)
    for kind in ("state", "log"):
        for i in range(TABLES):
            files = _live_files(tmp_path / kind / f"t{i}")  # ${table_name}: the table part
            assert 1 <= files <= 2 * MIN_FILES + 2, (kind, i, files)
    assert _live_files(tmp_path / "ck" / "soak" / "_ledger") <= 2 * MIN_FILES + 2
    # the run's summary: one row per (sink, table), every epoch counted
    committed = out["committed"]
    assert len(committed) == 2 * TABLES
    assert all(r["epochs"] >= EPOCHS for r in committed), committed


if __name__ == "__main__":
    import sys

    from streaming_engine.runtime.session import build_spark_session

    session = build_spark_session("soak-short", conf={"spark.sql.warehouse.dir": sys.argv[1] + "/warehouse"})
    try:
        print(json.dumps(soak(session, Path(sys.argv[1])), default=str))
    finally:
        session.stop()
