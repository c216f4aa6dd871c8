"""Stop with a savepoint, restore with a plan diff, through the CLI as an
operator runs it: ``streaming-engine stop --savepoint`` of a running job
(files keep arriving), a restore with another source refused with the
reason, a restore with a changed filter continuing exactly where the
savepoint stood: the Delta tables equal the oracle (nothing lost, nothing
twice), the history shows both runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from streaming_engine.control import history

ROOT = Path(__file__).resolve().parents[2]
ROWS = 10  # per file; file f holds ids 0..9 with qty = 10 f + i, so later files update the same keys

JOB = """
env {{ job.name = saved, job.mode = {mode}, checkpoint.interval = 400, checkpoint.dir = "${{work}}/ck",
      job.retry.times = 0 }}
source {{ {source} }}
transform {{ Sql {{ plugin_input = src, plugin_output = kept, query = "select * from src where qty >= {least}" }} }}
sink {{
  Delta {{ plugin_input = kept, path = "${{work}}/log" }}
  Delta {{ plugin_input = kept, path = "${{work}}/state", save_mode = upsert }}
}}
"""
FILES = """LocalFile { plugin_output = src, path = "${work}/in", file_format_type = json, max_files_per_trigger = 1,
  schema = { fields { id = bigint, qty = bigint, name = string }, primaryKey { name = pk, columnNames = [id] } } }"""
FAKE = """FakeSource { plugin_output = src, row.num = 10,
  schema = { fields { id = bigint, qty = bigint, name = string }, primaryKey { name = pk, columnNames = [id] } } }"""


def _rows(f: int) -> list[dict]:
    return [{"id": i, "qty": 10 * f + i, "name": f"v{f}"} for i in range(ROWS)]


def _write(work: Path, f: int) -> None:
    d = work / "in"
    d.mkdir(exist_ok=True)
    tmp = d / f".part-{f:04d}.json.tmp"
    tmp.write_text("\n".join(json.dumps(r) for r in _rows(f)) + "\n")
    os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))  # the file source takes files by modification time
    tmp.rename(d / f"part-{f:04d}.json")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("STREAMING_ENGINE_FAULT", None)
    return env


def _argv(work: Path, conf: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "streaming_engine", *args, "-c", str(work / conf), "-i", f"work={work}"]


def _cli(work: Path, conf: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(work, conf, *args), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


def test_stop_with_a_savepoint_then_restore_with_a_changed_filter_gives_exactly_the_oracle(tmp_path, spark):
    (tmp_path / "run.conf").write_text(JOB.format(mode="STREAMING", source=FILES, least=5))
    (tmp_path / "other_source.conf").write_text(JOB.format(mode="BATCH", source=FAKE, least=40))
    (tmp_path / "restore.conf").write_text(JOB.format(mode="BATCH", source=FILES, least=40))
    for f in range(3):
        _write(tmp_path, f)
    first = subprocess.Popen(_argv(tmp_path, "run.conf", "run", "--log-level", "INFO", "--log-format", "json"),
                             cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(first.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + 300
    while sum('"msg": "EpochCommitted"' in ln for ln in list(out)) < 2:
        assert first.poll() is None and time.monotonic() < deadline, "".join(out[-50:])
        time.sleep(0.2)
    # files keep arriving while the job is asked to stop: an epoch is in flight or about to start
    written, stop_writing = [3], threading.Event()

    # a file every 2 s until the stop returns (it took ~24 s here), at most 25: the restore replays one file an epoch
    def feed() -> None:
        while not stop_writing.is_set() and written[0] < 3 + 25:
            _write(tmp_path, written[0])
            written[0] += 1
            stop_writing.wait(2.0)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        stopped = _cli(tmp_path, "run.conf", "stop", "--savepoint")
    finally:
        stop_writing.set()
        feeder.join()
    assert first.wait(timeout=120) == 0, "".join(out[-60:])
    reader.join(timeout=10)
    assert stopped.returncode == 0 and "SAVEPOINT_DONE" in stopped.stdout, stopped.stdout + stopped.stderr[-3000:]
    job_id = next(json.loads(ln)["job_id"] for ln in out if '"to": "RUNNING"' in ln and ln.startswith("{"))
    assert f"--restore {job_id}" in stopped.stdout

    saved = json.loads((tmp_path / "ck" / "saved" / "_savepoints" / f"{job_id}.json").read_text())
    (point,) = saved["pipelines"].values()
    savepoint_epoch = point["committed"]
    assert savepoint_epoch >= 1 and point["offsets"], saved["pipelines"]
    log_at_savepoint = spark.read.format("delta").load(str(tmp_path / "log")).count()
    assert log_at_savepoint == sum(1 for f in range(savepoint_epoch + 1) for r in _rows(f) if r["qty"] >= 5)
    for f in range(written[0], written[0] + 3):  # more input after the stop
        _write(tmp_path, f)
    total_files = written[0] + 3

    refused = _cli(tmp_path, "other_source.conf", "run", "--restore", job_id)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "JOB.RESTORE_REFUSED" in refused.stderr and "another source" in refused.stderr, refused.stderr[-3000:]
    assert spark.read.format("delta").load(str(tmp_path / "log")).count() == log_at_savepoint  # nothing written

    restored = _cli(tmp_path, "restore.conf", "run", "--restore", job_id)
    assert restored.returncode == 0, restored.stdout[-3000:] + restored.stderr[-3000:]
    assert "transform 'kept' (Sql): options changed" in restored.stderr, restored.stderr[-3000:]

    # the oracle: files up to the savepoint's epoch through the old filter, every later one through the new
    want = [r for f in range(total_files) for r in _rows(f) if r["qty"] >= (5 if f <= savepoint_epoch else 40)]
    got = spark.read.format("delta").load(str(tmp_path / "log")).collect()
    assert Counter((r.id, r.qty, r.name) for r in got) == Counter((r["id"], r["qty"], r["name"]) for r in want)
    latest = {r["id"]: r for r in want}  # files in order: the last change per key wins
    state = spark.read.format("delta").load(str(tmp_path / "state")).collect()
    assert {r.id: (r.qty, r.name) for r in state} == {k: (r["qty"], r["name"]) for k, r in latest.items()}
    ledger = spark.read.format("delta").load(str(tmp_path / "ck" / "saved" / "_ledger")).collect()
    per_epoch = Counter((r.sink, r.table, r.epoch) for r in ledger)
    assert max(per_epoch.values()) == 1 and sorted({r.epoch for r in ledger}) == list(range(total_files))

    jobs = {r["job_id"]: r for r in history.jobs(spark, str(tmp_path / "ck" / "_history"), name="saved")}
    assert jobs[job_id]["state"] == "SAVEPOINT_DONE" and "_savepoints" in jobs[job_id]["error"]
    states = sorted(r["state"] for r in jobs.values())
    assert states == ["FAILED", "FINISHED", "SAVEPOINT_DONE"], states
    moves = history.transitions(spark, str(tmp_path / "ck" / "_history"), job_id)
    assert [r["state"] for r in moves if r["entity"] == "job"][-2:] == ["DOING_SAVEPOINT", "SAVEPOINT_DONE"]
