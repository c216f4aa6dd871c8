"""The REST API (``streaming-engine serve``) over real HTTP: a server process on
a free 127.0.0.1 port, its own Spark session, real Delta tables, no mocks.

One server for the module (its checkpoint root, token file and history table
in the module's tmp folder, through an engine defaults file), restarted once
with TLS at the end: every endpoint refuses requests without the token or with
a wrong one; malformed bodies are 400 with the reason, big ones 413; restricted
mode refuses a Python transform; a STREAMING job submitted with ``run --async``
commits epochs that /job-info shows, stops with a savepoint and is listed in
/finished-jobs, also after the restart (from the history table); a canary
secret in a submitted config appears in no response, no log line of the
server and no history row.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.jvm import C1_ONLY_OPTS

ROOT = Path(__file__).resolve().parents[2]
MAX_BODY = 64 * 1024  # the server runs with --max-body 65536
CANARIES = ("CanaryJaas-5d1e9", "CanaryUri-5d1e9")
SEEN: list[str] = []  # every response body this module received (the canary must be in none)

STREAM_JOB = """
env { job.mode = STREAMING, checkpoint.interval = 500 }
source { FakeSource { plugin_output = src, row.num = 1000000, rows.per.batch = 5,
                      schema = { fields { id = bigint, name = string } } } }
sink { Delta { plugin_input = src, path = "%(work)s/out/events" } }
"""

CANARY_JOB = """
env { job.name = canary, job.mode = BATCH }
source { FakeSource { plugin_output = src, row.num = 5, schema = { fields { id = bigint, name = string } } } }
sink {
  Kafka {
    plugin_input = src
    topic = canary_out
    bootstrap.servers = "127.0.0.1:%(closed)d"
    kafka.config = {
      sasl.jaas.config = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\\"u\\" password=\\"%(jaas)s\\";"
      max.block.ms = 2000
      request.timeout.ms = 2000
      delivery.timeout.ms = 4000
    }
  }
  LocalFile { plugin_input = src, path = "file://writer:%(uri)s@%(work)s/files/${table_name}", file_format_type = csv }
}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


class Server:
    def __init__(self, work: Path, name: str, tls: tuple[Path, Path] | None = None):
        self.work, self.port, self.tls = work, _free_port(), tls
        self.token_file = work / "ck" / "_api" / "token"
        self.log = work / f"{name}.log"
        self.context = ssl.create_default_context(cafile=str(tls[0])) if tls else None
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "streaming_engine", "serve", "--port", str(self.port), "-m", "local[2]",
                "--log-level", "INFO", "--max-body", str(MAX_BODY)]
        if tls:
            argv += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
        env = {**os.environ, "STREAMING_ENGINE_CONF": str(work / "engine.conf"), "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        env.pop("STREAMING_ENGINE_FAULT", None)
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 300
        while "API serving on" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"the server did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.3)
        self.token = self.token_file.read_text().strip()

    def call(self, method: str, path: str, body: bytes | str | None = None, token: str | None = "",
             headers: dict[str, str] | None = None, chunked: bool = False) -> Reply:
        """A request with the server's token (``token=None``: no Authorization header)."""
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token or self.token}"
        if isinstance(body, str):
            body = body.encode()
        conn = (http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=120) if self.tls
                else http.client.HTTPConnection("127.0.0.1", self.port, timeout=120))
        try:
            if chunked:
                conn.request(method, path, body=iter([body[i:i + 8192] for i in range(0, len(body), 8192)]),
                             headers=h, encode_chunked=True)
            else:
                conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode())
        finally:
            conn.close()
        SEEN.append(reply.text)
        return reply

    def wait_for(self, job_id: str, done, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            info = self.call("GET", f"/job-info/{job_id}")
            assert info.status == 200, info.text
            if done(info.json):
                return info.json
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} not there within {timeout} s: {info.text[:3000]}")
            time.sleep(1)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=180)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the server and its JVM
            self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("rest-api")
    (work / "engine.conf").write_text(
        f'env {{ checkpoint.dir = "{work}/ck", job.retry.times = 0, job.retry.interval.seconds = 0,\n'
        f'      spark.driver.extraJavaOptions = "{C1_ONLY_OPTS}" }}\n')
    return work


@pytest.fixture(scope="module")
def server(work):
    s = Server(work, "server-1")
    state: dict[str, Any] = {"server": s}
    yield state
    for srv in {id(x): x for x in (s, state.get("server"))}.values():
        srv.kill()


def _cli(work: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "STREAMING_ENGINE_CONF": str(work / "engine.conf"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "streaming_engine", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _delta_rows(table: Path) -> int:
    """Rows of an append-only Delta table, from its log's add actions and the files' Parquet footers."""
    import pyarrow.parquet as pq

    live: set[str] = set()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
    return sum(pq.read_metadata(table / p).num_rows for p in live)


ENDPOINTS = [
    ("GET", "/overview", None), ("GET", "/running-jobs", None), ("GET", "/finished-jobs", None),
    ("GET", "/finished-jobs/FINISHED", None), ("GET", "/job-info/1", None), ("GET", "/running-job/1", None),
    ("GET", "/metrics", None), ("GET", "/openapi.json", None), ("GET", "/no-such-path", None),
    ("POST", "/submit-job", STREAM_JOB % {"work": "/tmp/never"}), ("POST", "/stop-job", '{"jobId": 1}'),
]


def test_the_token_file_is_owner_only_and_every_endpoint_refuses_requests_without_the_token(server):
    s: Server = server["server"]
    mode = stat.S_IMODE(os.stat(s.token_file).st_mode)
    assert mode == 0o600, oct(mode)
    assert stat.S_IMODE(os.stat(s.token_file.parent).st_mode) == 0o700
    assert len(s.token) >= 40 and s.token not in s.log.read_text()  # generated, never printed
    wrong = s.token[:-1] + ("A" if s.token[-1] != "A" else "B")
    for method, path, body in ENDPOINTS:
        for token, extra in ((None, {}), (wrong, {}), (None, {"Authorization": f"Basic {s.token}"}),
                             (None, {"Authorization": s.token}), (None, {"X-Token": s.token})):
            r = s.call(method, path + ("?token=" + s.token if extra.get("X-Token") else ""), body, token=token,
                       headers=extra)
            assert r.status == 401, (method, path, token is not None, extra.keys(), r.status, r.text)
            assert r.json["status"] == "fail" and r.json["condition"] == "API.UNAUTHORIZED"
            assert r.headers.get("www-authenticate", "").startswith("Bearer")
    # with the token they answer, and the refused submission started nothing
    assert s.call("GET", "/overview").status == 200
    assert s.call("GET", "/running-jobs").json == []
    assert s.call("GET", "/no-such-path").status == 404
    assert "request refused: no valid token" in s.log.read_text()


def test_run_async_without_a_server_says_so_and_how_to_start_one(work, tmp_path):
    job = tmp_path / "job.conf"
    job.write_text(STREAM_JOB % {"work": tmp_path})
    r = _cli(work, "run", "--async", "-c", str(job), "--server", f"http://127.0.0.1:{_free_port()}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no streaming-engine server answers at" in r.stderr and "streaming-engine serve" in r.stderr, r.stderr
    assert r.stdout == ""


def test_malformed_input_is_400_with_the_reason_and_unknown_jobs_404(server):
    s: Server = server["server"]
    bad_json = s.call("POST", "/submit-job", '{"env": {"job.mode": "BATCH"},\n "source": [', headers={
        "Content-Type": "application/json"})
    assert bad_json.status == 400, bad_json.text
    assert bad_json.json["status"] == "fail" and "cannot parse" in bad_json.json["message"]
    assert bad_json.json["problems"][0]["condition"] == "CONFIG.SYNTAX"
    assert bad_json.json["problems"][0]["location"]["line"] == 2

    wiring = ("env { job.mode = BATCH }\n"
              "source { FakeSource { plugin_output = a, row.num = 3, schema = { fields { id = bigint } } } }\n"
              "sink { Console { plugin_input = b } }\n")
    bad_config = s.call("POST", "/submit-job", wiring, headers={"Content-Type": "text/plain"})
    assert bad_config.status == 400, bad_config.text
    problem = next(p for p in bad_config.json["problems"] if p["condition"] == "CONFIG.DANGLING_INPUT")
    assert problem["location"] == {"section": "sink", "index": 1, "plugin": "Console", "line": 3, "key": "plugin_input"}
    assert ":3, sink[1] Console, key 'plugin_input'" in bad_config.json["message"]

    # the server's environment is no source of variables for a submitted job
    env_var = wiring.replace("plugin_input = b", "plugin_input = a, path = \"${HOME}/x\"").replace("Console", "LocalFile")
    refused = s.call("POST", "/submit-job", env_var, headers={"Content-Type": "text/plain"})
    assert refused.status == 400 and any(p["condition"] == "API.UNSET_VARIABLE" for p in refused.json["problems"])
    assert "${HOME}" in refused.json["message"]

    for name in ("..", "_history", "a/b", "x" * 129):  # a job's name is a folder under the checkpoint root
        r = s.call("POST", "/submit-job?jobName=" + name, wiring.replace("plugin_input = b", "plugin_input = a"),
                   headers={"Content-Type": "text/plain"})
        assert r.status == 400 and r.json["condition"] == "API.BAD_JOB_NAME", (name, r.text)
    assert s.call("POST", "/submit-job", "", headers={"Content-Type": "text/plain"}).status == 400
    assert s.call("POST", "/submit-job", b"env { job.name = \"\xff\" }", headers={"Content-Type": "text/plain"}).json[
        "message"].startswith("the body is not UTF-8")
    assert s.call("POST", "/submit-job?format=xml", wiring).status == 400
    stop_garbage = s.call("POST", "/stop-job", "jobId=1", headers={"Content-Type": "application/json"})
    assert stop_garbage.status == 400 and "Invalid JSON" in stop_garbage.json["message"]
    assert s.call("POST", "/stop-job", '{"isStopWithSavePoint": false}').status == 400
    assert s.call("POST", "/stop-job", '{"jobId": "12x"}').status == 400
    assert s.call("GET", "/job-info/not-a-number").status == 400
    assert s.call("GET", "/finished-jobs/RUNNING").status == 400
    for method, path, body in (("GET", "/job-info/123456789", None), ("GET", "/running-job/123456789", None),
                               ("POST", "/stop-job", '{"jobId": 123456789, "isStopWithSavePoint": false}')):
        r = s.call(method, path, body)
        assert r.status == 404 and r.json["condition"] == "API.UNKNOWN_JOB", r.text
    assert s.call("GET", "/running-jobs").json == []  # none of these started a job


def test_a_body_over_the_limit_is_413(server):
    s: Server = server["server"]
    big = "# padding\n" * (MAX_BODY // 10 + 10)
    for chunked in (False, True):  # refused by its Content-Length, or while a chunked body is read
        r = s.call("POST", "/submit-job", big, headers={"Content-Type": "text/plain"}, chunked=chunked)
        assert r.status == 413, (chunked, r.status, r.text)
        assert r.json["condition"] == "API.BODY_TOO_LARGE" and str(MAX_BODY) in r.json["message"]
    assert s.call("GET", "/overview").status == 200  # the server goes on


def test_restricted_mode_refuses_a_python_transform_and_a_local_file_source(server):
    s: Server = server["server"]

    def refused(job: str, plugin: str) -> dict:
        r = s.call("POST", "/submit-job", job, headers={"Content-Type": "text/plain"})
        assert r.status == 400, r.text
        problem = r.json["problems"][0]
        assert problem["condition"] == "CONFIG.RESTRICTED" and problem["location"]["plugin"] == plugin
        assert "--allow-unrestricted" in problem["message"]
        return problem

    code = refused("env { job.name = code, job.mode = BATCH }\n"
                   "source { FakeSource { plugin_output = src, row.num = 5, schema = { fields { id = bigint } } } }\n"
                   "transform { Python { plugin_input = src, plugin_output = out, function = \"os:getcwd\" } }\n"
                   "sink { Console { plugin_input = out } }\n", "Python")
    assert code["location"]["line"] == 3 and "running code" in code["message"]
    files = refused("env { job.name = files, job.mode = BATCH }\n"
                    "source { LocalFile { plugin_output = src, path = \"/etc\", file_format_type = text } }\n"
                    "sink { Console { plugin_input = src } }\n", "LocalFile")
    assert "reading local files" in files["message"]
    assert s.call("GET", "/running-jobs").json == []
    # and the server listens on the loopback interface only, as it does unless told otherwise (--host)
    assert "API serving on http://127.0.0.1:" in s.log.read_text() and "restricted jobs" in s.log.read_text()


def test_jobs_submitted_as_yaml_and_as_json_run_to_their_end(server, work, tmp_path):
    """``run --async`` of a .yaml job file (sent as YAML) and a JSON body (SeaTunnel's default format)."""
    s: Server = server["server"]
    yaml_job = tmp_path / "job.yaml"
    yaml_job.write_text(
        "env: {job.name: api_yaml, job.mode: BATCH}\n"
        "source:\n  - plugin_name: FakeSource\n    plugin_output: src\n    row.num: 7\n"
        "    schema: {fields: {id: bigint, name: string}}\n"
        f"sink:\n  - plugin_name: Delta\n    plugin_input: src\n    path: {work}/out/yaml\n")
    submitted = _cli(work, "run", "--async", "-c", str(yaml_job), "--server", s.url)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    by_yaml = submitted.stdout.strip()
    json_job = {"env": {"job.name": "api_json", "job.mode": "BATCH"},
                "source": [{"plugin_name": "FakeSource", "plugin_output": "src", "row.num": 4,
                            "schema": {"fields": {"id": "bigint"}}}],
                "sink": [{"plugin_name": "Delta", "plugin_input": "src", "path": f"{work}/out/json"}]}
    r = s.call("POST", "/submit-job", json.dumps(json_job), headers={"Content-Type": "application/json"})
    assert r.status == 200 and r.json["jobName"] == "api_json", r.text
    for job_id, name, rows in ((by_yaml, "yaml", 7), (r.json["jobId"], "json", 4)):
        done = s.wait_for(job_id, lambda j: j["jobStatus"] not in ("CREATED", "PENDING", "SCHEDULED", "RUNNING"))
        assert done["jobStatus"] == "FINISHED", done
        assert _delta_rows(work / "out" / name) == rows


def test_a_streaming_job_runs_reports_progress_stops_with_a_savepoint_and_is_listed_finished(server, work):
    s: Server = server["server"]
    # the canary job runs meanwhile (it ends FAILED: no Kafka broker listens); checked by the next test
    canary = s.call("POST", "/submit-job?jobName=canary", CANARY_JOB % {
        "work": work, "closed": _free_port(), "jaas": CANARIES[0], "uri": CANARIES[1]},
        headers={"Content-Type": "text/plain"})
    assert canary.status == 200, canary.text
    server["canary"] = canary.json["jobId"]

    job = work / "stream.conf"
    job.write_text(STREAM_JOB % {"work": work})
    submitted = _cli(work, "run", "--async", "-c", str(job), "-n", "api_stream", "--server", s.url)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job_id = submitted.stdout.strip()
    assert job_id.isdigit() and job_id != canary.json["jobId"], submitted.stdout
    server["stream"] = job_id

    running = s.wait_for(job_id, lambda j: j["pipelines"]["src"]["epochs"] >= 3)
    assert running["jobName"] == "api_stream" and running["jobStatus"] == "RUNNING"
    progress = running["pipelines"]["src"]
    assert progress["state"] == "RUNNING" and progress["epoch"] >= 2 and progress["rowsCommitted"] >= 15
    assert progress["lastCommitTime"] and progress["rowsRead"] >= progress["rowsCommitted"] - 5
    assert int(running["metrics"]["TableSinkWriteCount"]["src"]) == int(running["metrics"]["SinkWriteCount"]) > 0
    dag = running["jobDag"]
    assert [(v["vertexId"], v["type"], v["vertexName"], v["tablePaths"]) for v in dag["vertexInfoMap"]] == [
        (1, "source", "FakeSource#1", ["src"]), (2, "sink", "Delta#2", ["src"])]
    assert dag["pipelineEdges"] == {"pipeline-1": [{"inputVertexId": 1, "targetVertexId": 2}]}
    assert set(running["plans"]) == {"logical", "execution", "physical"}
    assert running["envOptions"]["job.mode"] == "STREAMING"
    assert [h["to"] for h in running["history"] if h["entity"] == "job"][-1] == "RUNNING"
    assert job_id in [j["jobId"] for j in s.call("GET", "/running-jobs").json]
    assert int(s.call("GET", "/overview").json["runningJobs"]) >= 1
    metrics = s.call("GET", "/metrics")
    assert metrics.status == 200 and 'streaming_engine_epochs_committed_total{job="api_stream",pipeline="src"}' in metrics.text
    listed = _cli(work, "list", "--server", s.url)
    assert listed.returncode == 0 and job_id in listed.stdout and "api_stream" in listed.stdout, listed.stdout + listed.stderr

    # a second job of the same name would share its checkpoint: refused while it runs
    again = s.call("POST", "/submit-job?jobName=api_stream", job.read_text(), headers={"Content-Type": "text/plain"})
    assert again.status == 409 and again.json["condition"] == "API.JOB_NAME_RUNNING", again.text

    # by its id from the command line (POST /stop-job underneath)
    stopped = _cli(work, "stop", "--job-id", job_id, "--savepoint", "--server", s.url)
    assert stopped.returncode == 0 and f"asked job {job_id}" in stopped.stderr, stopped.stdout + stopped.stderr
    ended = s.wait_for(job_id, lambda j: j["jobStatus"] in ("SAVEPOINT_DONE", "CANCELED", "FAILED", "FINISHED"))
    assert ended["jobStatus"] == "SAVEPOINT_DONE" and ended["errorMsg"] is None, json.dumps(ended)[:3000]
    assert ended["finishedTime"] and ended["pipelines"]["src"]["state"] == "SAVEPOINT_DONE"
    rows = _delta_rows(work / "out" / "events")
    assert rows >= 15 and int(ended["metrics"]["SinkWriteCount"]) == rows, (rows, ended["metrics"])
    server["stream_rows"] = rows
    again = s.call("POST", "/stop-job", json.dumps({"jobId": job_id}))
    assert again.status == 409 and again.json["condition"] == "API.JOB_NOT_RUNNING"

    shown = _cli(work, "history", "--job-id", job_id, timeout=300)  # by its id: the engine defaults' history table
    assert shown.returncode == 0 and "DOING_SAVEPOINT -> SAVEPOINT_DONE" in shown.stdout, shown.stdout + shown.stderr

    finished = s.call("GET", "/finished-jobs/SAVEPOINT_DONE").json
    mine = [j for j in finished if j["jobId"] == job_id]
    assert len(mine) == 1 and mine[0]["jobName"] == "api_stream" and mine[0]["finishTime"]
    assert job_id not in [j["jobId"] for j in s.call("GET", "/finished-jobs/FAILED").json]
    assert job_id not in [j["jobId"] for j in s.call("GET", "/running-jobs").json]

    # run --async --restore (isStartWithSavePoint): the job continues from its savepoint, nothing twice
    restored = _cli(work, "run", "--async", "-c", str(job), "-n", "api_stream", "--restore", job_id, "--server", s.url)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    again_id = restored.stdout.strip()
    assert again_id.isdigit() and again_id != job_id
    on = s.wait_for(again_id, lambda j: j["jobStatus"] not in ("CREATED", "PENDING", "SCHEDULED", "RUNNING")
                    or j["pipelines"]["src"]["epochs"] >= 2)
    assert on["jobStatus"] == "RUNNING" and on["isStartWithSavePoint"] and on["restoredFrom"] == job_id, on
    assert s.call("POST", "/stop-job", json.dumps({"jobId": again_id, "isStopWithSavePoint": True})).status == 200
    after = s.wait_for(again_id, lambda j: j["jobStatus"] in ("SAVEPOINT_DONE", "CANCELED", "FAILED", "FINISHED"))
    assert after["jobStatus"] == "SAVEPOINT_DONE", json.dumps(after)[:3000]
    more = _delta_rows(work / "out" / "events")
    assert more == rows + int(after["metrics"]["SinkWriteCount"]) > rows, (rows, more, after["metrics"])
    epochs = [json.loads(line)["txn"]["version"] for commit in sorted((work / "out" / "events" / "_delta_log").glob(
        "*.json")) for line in commit.read_text().splitlines() if '"txn"' in line]
    assert epochs == list(range(len(epochs))), epochs  # every epoch once, in order, across the two runs
    server["stream_total"] = more


def _history_text(history: Path) -> str:
    """Everything the history table holds: its Parquet files' rows (also of removed files) and its log."""
    import pyarrow.parquet as pq

    parts = []
    for f in sorted(history.rglob("*")):
        if f.suffix == ".parquet":
            parts.append(json.dumps(pq.read_table(f).to_pylist(), default=str))
        elif f.is_file():
            parts.append(f.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def test_a_canary_secret_is_in_no_response_no_log_line_and_no_history_row(server, work):
    s: Server = server["server"]
    job_id = server.get("canary")
    assert job_id, "the canary job was submitted by the previous test"
    ended = s.wait_for(job_id, lambda j: j["jobStatus"] in ("FINISHED", "FAILED", "CANCELED"))
    assert ended["jobStatus"] == "FAILED" and "canary_out" in ended["errorMsg"]  # no broker: it ran, then failed
    info = s.call("GET", f"/job-info/{job_id}").text
    # its options are shown, masked
    assert "file://******@" in info and '"sasl.jaas.config":"******"' in info, info[:4000]
    s.call("GET", "/finished-jobs")
    s.call("GET", "/running-jobs")
    s.call("GET", "/metrics")
    log = s.log.read_text()
    history = _history_text(work / "ck" / "_history")
    assert job_id in log and job_id in history and "Kafka" in log  # the places looked at hold the job
    assert len(SEEN) > 50
    for canary in CANARIES:
        assert not [t for t in SEEN if canary in t], canary
        assert canary not in log, canary
        assert canary not in history, canary


def test_after_a_restart_with_tls_the_finished_jobs_and_their_history_are_read_again(server, work):
    first: Server = server["server"]
    job_id, canary = server.get("stream"), server.get("canary")
    assert job_id and canary, "the jobs were run by the previous tests"
    token = first.token_file.read_bytes()
    assert first.stop() == 0
    assert "stopping the running jobs" in first.log.read_text()

    openssl = shutil.which("openssl")
    assert openssl, "openssl makes the test's self-signed certificate"
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    s = Server(work, "server-2", tls=(cert, key))
    server["server"] = s
    assert s.token_file.read_bytes() == token  # the same token: not generated again

    plain = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    with pytest.raises((http.client.HTTPException, OSError)):
        plain.request("GET", "/overview", headers={"Authorization": f"Bearer {s.token}"})
        plain.getresponse().read()
    plain.close()
    assert s.call("GET", "/overview", token=None).status == 401

    assert s.call("GET", "/running-jobs").json == []
    finished = {j["jobId"]: j for j in s.call("GET", "/finished-jobs").json}
    assert finished[job_id]["jobStatus"] == "SAVEPOINT_DONE" and finished[job_id]["jobName"] == "api_stream"
    assert finished[canary]["jobStatus"] == "FAILED" and "canary_out" in finished[canary]["errorMsg"]
    assert [v["vertexName"] for v in finished[job_id]["jobDag"]["vertexInfoMap"]] == ["FakeSource#1", "Delta#2"]
    assert job_id in [j["jobId"] for j in s.call("GET", "/finished-jobs/SAVEPOINT_DONE").json]
    assert canary not in [j["jobId"] for j in s.call("GET", "/finished-jobs/SAVEPOINT_DONE").json]

    info = s.call("GET", f"/job-info/{job_id}").json
    assert info["jobStatus"] == "SAVEPOINT_DONE" and info["finishedTime"] and info["createTime"]
    assert int(info["metrics"]["SinkWriteCount"]) == server["stream_rows"]
    assert _delta_rows(work / "out" / "events") == server["stream_total"]  # with the restored run's rows
    moves = [(h["entity"], h["from"], h["to"]) for h in info["history"]]
    assert ("job", "SCHEDULED", "RUNNING") in moves and ("job", "RUNNING", "DOING_SAVEPOINT") in moves
    assert ("job", "DOING_SAVEPOINT", "SAVEPOINT_DONE") in moves and ("src", "DEPLOYING", "RUNNING") in moves
    assert info["plans"]["logical"]["job"] == "api_stream" and info["pipelines"]["src"]["state"] == "SAVEPOINT_DONE"
    overview = s.call("GET", "/overview").json
    assert int(overview["savepointDoneJobs"]) >= 1 and int(overview["failedJobs"]) >= 1 and overview["runningJobs"] == "0"

    listed = _cli(work, "list", "--server", s.url, "--tls-ca", str(cert))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert job_id in listed.stdout and "SAVEPOINT_DONE" in listed.stdout and canary in listed.stdout
    for canary_secret in CANARIES:
        assert not [t for t in SEEN if canary_secret in t]
    assert s.stop() == 0
