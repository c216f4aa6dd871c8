"""``run --api-port``: one attached run serves its read-only REST endpoints
(job-info, running jobs, metrics) behind the API token; submit and stop are
not there (405)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JOB = """
env { job.name = watched, job.mode = STREAMING, checkpoint.interval = 500, checkpoint.dir = "${work}/ck", job.retry.times = 0 }
source { FakeSource { plugin_output = src, row.num = 1000000, rows.per.batch = 5, schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = src, path = "${work}/out" } }
"""


def _call(url: str, token: str | None, method: str = "GET", body: bytes | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_an_attached_run_serves_its_read_only_endpoints(tmp_path):
    (tmp_path / "job.conf").write_text(JOB)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("STREAMING_ENGINE_FAULT", None)
    proc = subprocess.Popen([sys.executable, "-m", "streaming_engine", "run", "-c", str(tmp_path / "job.conf"), "-i",
                             f"work={tmp_path}", "--api-port", "0", "--progress-interval", "1"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while not any("rows committed" in ln and "epoch 1" in ln for ln in list(lines)):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines[-40:])
            time.sleep(0.2)
        text = "".join(lines)
        job_id = re.search(r"job 'watched' id (\d+)", text).group(1)
        url = re.search(r"read-only API of this run on (\S+)", text).group(1)
        token = (tmp_path / "ck" / "_api" / "token").read_text().strip()
        assert oct((tmp_path / "ck" / "_api" / "token").stat().st_mode & 0o777) == "0o600"

        assert _call(f"{url}/job-info/{job_id}", None)[0] == 401
        assert _call(f"{url}/job-info/{job_id}", "wrong-token-" + "x" * 30)[0] == 401
        status, body = _call(f"{url}/job-info/{job_id}", token)
        info = json.loads(body)
        assert status == 200 and info["jobStatus"] == "RUNNING" and info["jobName"] == "watched", body[:2000]
        assert json.dumps(info).count('"epochs"') >= 1 and '"epochs": 0' not in json.dumps(info), body[:2000]
        status, body = _call(f"{url}/running-jobs", token)
        assert status == 200 and job_id in body
        status, body = _call(f"{url}/metrics", token)
        assert status == 200 and "streaming_engine_rows_committed_total" in body
        for path, payload in (("/submit-job", b"env { job.name = other }"), ("/stop-job", json.dumps({"jobId": job_id}).encode())):
            status, body = _call(f"{url}{path}", token, "POST", payload)
            assert status == 405 and "API.READ_ONLY" in body, (path, status, body)
    finally:
        proc.send_signal(signal.SIGTERM)  # the driver (its JVM is a child of its own, stopped by it)
    assert proc.wait(timeout=120) == 0, "".join(lines[-40:])
