"""One running instance per job: ``streaming-engine run`` of a job whose
checkpoint another live driver holds is refused, naming the holder; a driver
that died holding it never blocks the next run for longer than the lease."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streaming_engine.control import history
from streaming_engine.control.lease import Holder, Lease

ROOT = Path(__file__).resolve().parents[2]
JOB = """
env { job.name = leased, job.mode = STREAMING, checkpoint.interval = 500, checkpoint.dir = "${work}/ck",
      job.retry.times = 2, job.retry.interval.seconds = 1, job.lease.seconds = 6 }
source { FakeSource { plugin_output = src, row.num = 1000000, rows.per.batch = 5, schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = src, path = "${work}/out" } }
"""


def _argv(work: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "streaming_engine", *args, "-c", str(work / "job.conf"), "-i", f"work={work}",
            "--log-level", "INFO", "--log-format", "json"]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("STREAMING_ENGINE_FAULT", None)
    return env


def _cli(work: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(_argv(work, *args), cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 300) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the run ended before {needle!r}:\n{''.join(lines[-40:])}")
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"no {needle!r} within {timeout} s")


def test_a_second_run_is_refused_naming_the_holder_and_a_killed_holder_does_not_block(tmp_path, spark):
    (tmp_path / "job.conf").write_text(JOB)
    first = _cli(tmp_path, "run")
    try:
        lines = _wait_for_line(first, '"msg": "EpochCommitted"')
        first_id = next(json.loads(ln)["job_id"] for ln in lines if '"to": "RUNNING"' in ln and ln.startswith("{"))
        second = subprocess.run(_argv(tmp_path, "run"), capture_output=True, text=True, timeout=300, cwd=ROOT,
                                env=_env(), stdin=subprocess.DEVNULL)
        assert second.returncode == 1, second.stdout + second.stderr
        said = second.stdout + second.stderr
        assert "JOB.ALREADY_RUNNING" in said, said[-3000:]
        assert f"pid {first.pid}" in said and f"job id {first_id}" in said and socket.gethostname() in said, said[-3000:]
        assert re.search(r"\) since \d{4}-\d\d-\d\d", said), said[-3000:]  # held since when
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the holder dies without releasing its lease
        first.wait(timeout=60)

    began = time.monotonic()
    third = _cli(tmp_path, "run")
    try:
        _wait_for_line(third, '"msg": "EpochCommitted"')
        assert time.monotonic() - began < 120
    finally:
        third.send_signal(signal.SIGTERM)
    assert third.wait(timeout=120) == 0

    jobs = {r["job_id"]: r for r in history.jobs(spark, str(tmp_path / "ck" / "_history"), name="leased")}
    assert len(jobs) == 3, jobs
    assert jobs[first_id]["state"] == "UNKNOWABLE" and "without releasing" in jobs[first_id]["error"]
    refused = [r for r in jobs.values() if r["state"] == "FAILED"]
    assert len(refused) == 1 and "running already" in refused[0]["error"]
    assert sorted(r["state"] for r in jobs.values()) == ["CANCELED", "FAILED", "UNKNOWABLE"]

    # the same through the CLI: the job's runs, then one run's state changes with their causes
    listed = subprocess.run(_argv(tmp_path, "history", "--format", "json"), cwd=ROOT, env=_env(), capture_output=True,
                            text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert listed.returncode == 0, listed.stderr[-3000:]
    shown = {r["job_id"]: r["state"] for r in json.loads(listed.stdout)["rows"]}
    assert shown == {k: v["state"] for k, v in jobs.items()}
    moves = subprocess.run(_argv(tmp_path, "history", "--job-id", refused[0]["job_id"]), cwd=ROOT, env=_env(),
                           capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert moves.returncode == 0, moves.stderr[-3000:]
    assert "PENDING -> FAILED" in moves.stdout and "JOB.ALREADY_RUNNING" in moves.stdout, moves.stdout


def test_a_lease_of_another_host_lapses_after_its_time_and_its_holder_learns_it_lost(tmp_path, spark):
    d = str(tmp_path / "_lease")
    other = Lease(spark, d, "j", "111", ttl=2)
    held = other.acquire()
    assert held is None
    # make it another host's lease: the holder's process cannot be checked from here, only its age
    other.mine = Holder(**{**other.mine.__dict__, "host": "elsewhere", "pid": 1})
    other._renew()
    mine = Lease(spark, d, "j", "222", ttl=2)
    with pytest.raises(Exception) as e:
        mine.acquire()
    assert e.value.condition == "JOB.ALREADY_RUNNING" and e.value.params["host"] == "elsewhere"
    time.sleep(2.5)  # not renewed for longer than its time
    dead = mine.acquire()
    assert dead is not None and dead.job_id == "111"
    lost = []
    other.keep(lost.append)  # the old holder wakes up and looks
    deadline = time.monotonic() + 10
    while not lost and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lost and lost[0].condition == "JOB.LEASE_LOST" and lost[0].params["job_id"] == "222"
    assert mine.current().job_id == "222"
    mine.release()
    assert mine.current().released and Lease(spark, d, "j", "333", ttl=2).acquire() is None


def test_a_lease_renewed_while_another_run_looks_is_never_taken_for_free(tmp_path, spark):
    """A renewal writes the holder's next file and deletes the older ones; a run
    that listed the directory just before reads a file that is gone. It must
    look again, not take a live lease (seen in CI: the refused run of the test
    above took the lease and ran the job instead)."""
    d = str(tmp_path / "_lease")
    holder = Lease(spark, d, "j", "111", ttl=30)
    assert holder.acquire() is None
    done = threading.Event()

    def renew() -> None:
        while not done.is_set():
            holder._renew()

    t = threading.Thread(target=renew, daemon=True)
    t.start()
    try:
        for i in range(150):
            with pytest.raises(Exception) as e:
                Lease(spark, d, "j", f"other{i}", ttl=30).acquire()
            assert e.value.condition == "JOB.ALREADY_RUNNING", f"attempt {i}: {e.value}"
            now = holder.current()
            assert now is not None and now.job_id == "111", (i, holder._files(), holder.mine)
    finally:
        done.set()
        t.join(10)
    assert max(g for g, _ in holder._files()) == holder.mine.generation  # nobody else wrote a generation
