"""Live progress of an attached run: plain lines when not on a terminal, a
table redrawn in place on one, nothing with --quiet."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JOB = """
env { job.name = shown, job.mode = BATCH, checkpoint.dir = "${work}/ck", job.retry.times = 0 }
source { FakeSource { plugin_output = src, row.num = 30, rows.per.batch = 10, schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = src, path = "${work}/out" } }
"""


def _argv(work: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "streaming_engine", "run", "-c", str(work / "job.conf"), "-i", f"work={work}", *extra]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("STREAMING_ENGINE_FAULT", None)
    return env


def test_plain_progress_lines_when_not_on_a_terminal_and_none_when_quiet(tmp_path):
    (tmp_path / "job.conf").write_text(JOB)
    ran = subprocess.run(_argv(tmp_path, "--progress-interval", "0.5"), cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = [ln for ln in ran.stderr.splitlines() if ln.startswith("progress pipeline-1: ")]
    assert lines, ran.stderr[-3000:]
    assert "FINISHED" in lines[-1] and "30 rows committed" in lines[-1] and "epoch 2 (3 this run)" in lines[-1], lines
    assert "\x1b[" not in ran.stderr  # no terminal codes in a log
    again = tmp_path / "quiet"
    again.mkdir()
    (again / "job.conf").write_text(JOB)
    quiet = subprocess.run(_argv(again, "--quiet"), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600,
                           stdin=subprocess.DEVNULL)
    assert quiet.returncode == 0 and "progress " not in quiet.stderr, quiet.stderr[-3000:]


def test_a_live_table_on_a_terminal(tmp_path):
    (tmp_path / "job.conf").write_text(JOB)
    leader, follower = os.openpty()
    proc = subprocess.Popen(_argv(tmp_path), cwd=ROOT, env={**_env(), "TERM": "xterm", "COLUMNS": "140"},
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    assert proc.wait(timeout=60) == 0
    os.close(leader)
    screen = b"".join(chunks).decode(errors="replace")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert "\x1b[" in screen, "no terminal output"
    assert "rows committed" in plain and "pipeline-1" in plain and "FINISHED" in plain, plain[-3000:]
    assert not re.search(r"^progress pipeline-1: ", plain, re.M)  # the table, not the log lines
