"""Restart strategies under a job master, on real Spark and Delta: a failed
pipeline restarts from its checkpoint while the job's other pipeline keeps
committing; past the strategy's limit the job fails with its cause in the
job-history table; a stop is heard while a restart waits."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from collections import Counter

from streaming_engine.control import history
from streaming_engine.control.master import JobMaster
from streaming_engine.job import compile_text
from tests.runtime.control_udfs import inject

JOB = """
env {{ job.name = {name}, job.mode = STREAMING, checkpoint.interval = 300, checkpoint.dir = "${{work}}/ck",
      {restart} }}
source {{
  FakeSource {{ plugin_output = a, table-names = ["db.{a}"], row.num = 1000000, rows.per.batch = 3, seed = 1,
               schema = {{ fields {{ id = bigint, v = string }} }} }}
  FakeSource {{ plugin_output = b, table-names = ["db.{b}"], row.num = 1000000, rows.per.batch = 3, seed = 2,
               schema = {{ fields {{ id = bigint, v = string }} }} }}
}}
transform {{ Python {{ plugin_input = a, plugin_output = a2, function = "tests.runtime.control_udfs:fail_when_told" }} }}
sink {{
  Delta {{ plugin_input = a2, path = "${{work}}/out/a" }}
  Delta {{ plugin_input = b, path = "${{work}}/out/b" }}
}}
"""


class Watch:
    """The run's events with their arrival times, and a way to wait for one."""

    def __init__(self, master: JobMaster):
        self.events: list[tuple[float, object]] = []
        self._cv = threading.Condition()
        master.bus.subscribe(self._on)

    def _on(self, e) -> None:
        with self._cv:
            self.events.append((time.monotonic(), e))
            self._cv.notify_all()

    def wait(self, pred, timeout: float = 180):
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for t, e in self.events:
                    if pred(e):
                        return t, e
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; events: {[type(e).__name__ for _, e in self.events][-30:]}"
                self._cv.wait(left)

    def of(self, kind: str, pipeline: str | None = None) -> list[tuple[float, object]]:
        return [(t, e) for t, e in self.events
                if type(e).__name__ == kind and (pipeline is None or getattr(e, "pipeline", None) == pipeline)]


def _start(spark, tmp_path, restart: str):
    token = uuid.uuid4().hex[:8]
    a, b = f"a_{token}", f"b_{token}"
    job = compile_text(JOB.format(name=f"restarts_{token}", a=a, b=b, restart=restart),
                       variables={"work": str(tmp_path)}, file="job.conf")
    keys = {v.schema.tables[0].table_id: p.key for p in job.plan.pipelines for v in p.vertices if v.kind == "source"}
    master = JobMaster(job)
    watch = Watch(master)
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", master.run(spark=spark, timeout_s=600)))
    thread.start()
    return master, watch, thread, out, f"db.{a}", keys[f"db.{a}"], keys[f"db.{b}"]


def test_a_pipeline_recovers_from_three_failures_while_the_other_commits_and_the_fourth_fails_the_job(spark, tmp_path):
    from streaming_engine.metrics.prometheus import PrometheusMetrics

    master, watch, thread, out, table_a, pa, pb = _start(
        spark, tmp_path, "job.retry.times = 3, job.retry.interval.seconds = 2")
    metrics = PrometheusMetrics(port=None)
    metrics.attach(master.bus)  # what a scrape of the job's metrics would count
    watch.wait(lambda e: type(e).__name__ == "EpochCommitted" and e.pipeline == pa)
    for i in range(1, 4):
        inject(table_a)
        t_fail, _ = watch.wait(lambda e, i=i: type(e).__name__ == "PipelineFailed" and e.pipeline == pa and e.attempt == i)
        failed = watch.of("PipelineFailed", pa)[-1][1]
        assert failed.restart_in is not None and "injected failure" in failed.error
        t_back, _ = watch.wait(lambda e, i=i: type(e).__name__ == "PipelineStarted" and e.pipeline == pa and e.attempt == i + 1)
        t_epoch, _ = watch.wait(lambda e, t=t_back: type(e).__name__ == "EpochCommitted" and e.pipeline == pa
                                and any(ts > t and ev is e for ts, ev in watch.events))
        # the other pipeline committed while this one was down and restarting
        assert any(t_fail < t < t_epoch for t, _ in watch.of("EpochCommitted", pb)), (
            f"restart {i}: pipeline {pb} committed nothing between {pa}'s failure and its recovery")
    inject(table_a)  # a fourth failure: beyond job.retry.times = 3
    thread.join(timeout=300)
    result = out["result"]
    assert result.status == "FAILED" and "injected failure" in str(result.error)
    assert [e.restart_in is None for _, e in watch.of("PipelineFailed", pa)] == [False, False, False, True]
    restarts = lambda p: metrics.registry.get_sample_value(  # noqa: E731
        "streaming_engine_pipeline_restarts_total", {"job": master.name, "pipeline": p})
    assert restarts(pa) == 3 and not restarts(pb)

    rows = history.jobs(spark, master.history_path, job_id=master.job_id)
    assert len(rows) == 1 and rows[0]["state"] == "FAILED" and "injected failure" in rows[0]["error"], rows
    moves = history.transitions(spark, master.history_path, master.job_id)
    of = lambda entity: [(r["previous"], r["state"]) for r in moves if r["entity"] == entity]  # noqa: E731
    assert of(pa).count(("FAILING", "CREATED")) == 3 and of(pa)[-2:] == [("RUNNING", "FAILING"), ("FAILING", "FAILED")]
    assert of(pb)[-2:] == [("RUNNING", "CANCELING"), ("CANCELING", "CANCELED")]
    assert of("job")[-3:] == [("SCHEDULED", "RUNNING"), ("RUNNING", "FAILING"), ("FAILING", "FAILED")]
    end = next(r for r in moves if r["entity"] == "job" and r["state"] == "FAILED")
    assert "injected failure" in end["cause"] and '"restarts"' in end["detail"]
    # the submission's row: the config's hash and the three plans as JSON
    import json

    from streaming_engine.control.master import config_hash, plans

    created = next(r for r in moves if r["entity"] == "job" and r["state"] == "CREATED")
    assert created["config_hash"] == config_hash(master.job) and len(created["config_hash"]) == 16
    recorded = json.loads(created["detail"])["plans"]
    assert recorded == json.loads(json.dumps(plans(master.job)))
    assert {"logical", "execution", "physical"} <= set(recorded), set(recorded)

    # every restart replayed its failed epoch from the checkpoint: each epoch of each sink once in the ledger
    ledger = spark.read.format("delta").load(str(tmp_path / "ck" / master.name / "_ledger")).collect()
    counts = Counter((r["pipeline"], r["sink"], r["table"], r["epoch"]) for r in ledger)
    assert counts and max(counts.values()) == 1, {k: n for k, n in counts.items() if n > 1}


def test_a_stop_is_heard_while_a_restart_waits(spark, tmp_path):
    master, watch, thread, out, table_a, pa, pb = _start(
        spark, tmp_path, "restart.strategy = exponential-delay, restart.backoff.initial.seconds = 120")
    watch.wait(lambda e: type(e).__name__ == "EpochCommitted" and e.pipeline == pa)
    inject(table_a)
    _, failed = watch.wait(lambda e: type(e).__name__ == "PipelineFailed" and e.pipeline == pa)
    assert failed.restart_in > 100
    t_b = len(watch.of("EpochCommitted", pb))
    watch.wait(lambda e: type(e).__name__ == "EpochCommitted" and e.pipeline == pb
               and len(watch.of("EpochCommitted", pb)) > t_b + 1)  # the other pipeline goes on meanwhile
    asked = time.monotonic()
    master.stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive() and time.monotonic() - asked < 30, "the stop waited for the restart's delay"
    assert out["result"].status == "CANCELED"
    moves = history.transitions(spark, master.history_path, master.job_id)
    assert [(r["previous"], r["state"]) for r in moves if r["entity"] == pa][-2:] == [("CREATED", "CANCELING"),
                                                                                     ("CANCELING", "CANCELED")]
    assert [r["state"] for r in moves if r["entity"] == "job"][-2:] == ["CANCELING", "CANCELED"]


ONE = """
env {{ job.name = {name}, job.mode = STREAMING, checkpoint.interval = 300, checkpoint.dir = "${{work}}/ck",
      job.retry.times = 3, job.retry.interval.seconds = 1 }}
source {{ FakeSource {{ plugin_output = a, table-names = ["db.{table}"], row.num = 1000000, rows.per.batch = 3, seed = 1,
                      schema = {{ fields {{ id = bigint, v = string }} }} }} }}
sink {{ Delta {{ plugin_input = a, path = "${{work}}/out" }} }}
"""


def _run_once(spark, tmp_path, token: str, stop_after: int | None = None):
    job = compile_text(ONE.format(name=f"noheal_{token}", table=f"t_{token}"), variables={"work": str(tmp_path)},
                       file="job.conf")
    master = JobMaster(job)
    watch = Watch(master)
    if stop_after is not None:
        master.bus.subscribe(lambda e: type(e).__name__ == "EpochCommitted" and e.epoch >= stop_after
                             and master.stop.set())
    return master, watch, master.run(spark=spark, timeout_s=300)


def _failed_once_for_good(spark, master, watch, result, cause: str) -> None:
    assert result.status == "FAILED" and cause in str(result.error), result
    failures = [e for _, e in watch.of("PipelineFailed")]
    assert len(failures) == 1 and failures[0].restart_in is None, [(e.attempt, e.error) for e in failures]
    moves = history.transitions(spark, master.history_path, master.job_id)
    assert not [r for r in moves if r["state"] == "CREATED" and r["previous"] == "FAILING"], "it restarted"
    assert cause in history.jobs(spark, master.history_path, job_id=master.job_id)[0]["error"]


def test_a_schema_conflict_with_the_target_fails_the_job_without_a_restart(spark, tmp_path):
    # the target exists with another type for `id`: Delta refuses the write (DELTA_FAILED_TO_MERGE_FIELDS,
    # SQLSTATE class 22), every time
    spark.createDataFrame([("x", 1)], "id string, w int").write.format("delta").save(str(tmp_path / "out"))
    master, watch, result = _run_once(spark, tmp_path, uuid.uuid4().hex[:8])
    _failed_once_for_good(spark, master, watch, result, "DELTA_FAILED_TO_MERGE_FIELDS")


def test_a_checkpoint_behind_its_targets_fails_the_job_without_a_restart(spark, tmp_path):
    import shutil

    token = uuid.uuid4().hex[:8]
    first, _, done = _run_once(spark, tmp_path, token, stop_after=1)
    assert done.status in ("CANCELED", "FINISHED"), done
    lost = [d.parent for d in (tmp_path / "ck").rglob("offsets")]  # the query's checkpoint is lost
    assert len(lost) == 1, lost
    shutil.rmtree(lost[0])
    master, watch, result = _run_once(spark, tmp_path, token)
    _failed_once_for_good(spark, master, watch, result, "CHECKPOINT.BEHIND_TARGETS")


def _run_in_thread(spark, tmp_path):
    token = uuid.uuid4().hex[:8]
    job = compile_text(ONE.format(name=f"bug_{token}", table=f"t_{token}"), variables={"work": str(tmp_path)},
                       file="job.conf")
    master = JobMaster(job)
    watch = Watch(master)
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", master.run(spark=spark, timeout_s=300)))
    thread.start()
    watch.wait(lambda e: type(e).__name__ == "EpochCommitted")
    return master, watch, thread, out


def _history_says(spark, master, cause: str) -> None:
    row = history.jobs(spark, master.history_path, job_id=master.job_id)[0]
    assert row["state"] == "FAILED" and cause in row["error"], row
    moves = history.transitions(spark, master.history_path, master.job_id)
    assert [r["state"] for r in moves if r["entity"] == "job"][-2:] == ["FAILING", "FAILED"]
    assert all(r["state"] in ("CANCELED", "FAILED", "FINISHED") for r in moves
               if r["entity"] != "job" and r["seq"] == max(x["seq"] for x in moves if x["entity"] == r["entity"]))


def test_a_failure_of_the_supervisor_itself_fails_the_job_with_its_cause_in_the_history(spark, tmp_path, monkeypatch):
    from streaming_engine.runtime import runner

    broken = threading.Event()
    real = runner._report_progress

    def report(bus, item):
        if broken.is_set():
            raise ZeroDivisionError("supervisor drill")
        return real(bus, item)

    monkeypatch.setattr(runner, "_report_progress", report)
    master, watch, thread, out = _run_in_thread(spark, tmp_path)
    broken.set()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert out["result"].status == "FAILED" and "ZeroDivisionError: supervisor drill" in out["result"].error
    _history_says(spark, master, "supervisor drill")


def test_an_illegal_transition_while_the_job_runs_ends_it_failed_with_the_bug_in_the_history(spark, tmp_path):
    from streaming_engine.runtime.events import PipelineStarted

    master, watch, thread, out = _run_in_thread(spark, tmp_path)
    key = next(iter(master.pipelines))
    master.bus.publish(PipelineStarted(master.name, key, "nowhere", 0))  # RUNNING -> RUNNING: a control-plane bug
    assert master.bug is not None and master.bug.condition == "JOB.ILLEGAL_TRANSITION"
    master.request_stop()
    thread.join(timeout=120)
    assert out["result"].status == "FAILED" and "JOB.ILLEGAL_TRANSITION" in out["result"].error
    _history_says(spark, master, "JOB.ILLEGAL_TRANSITION")


def test_the_job_history_is_compacted_between_epochs_like_the_ledger(spark, tmp_path):
    """The job master hands its history table to the run (``execute(maintain=)``): its maintainer pipeline
    compacts it between epochs; the history reads the same afterwards."""
    import json

    token = uuid.uuid4().hex[:8]
    text = ONE.format(name=f"kept_{token}", table=f"t_{token}").replace(
        "job.retry.times = 3,", "job.retry.times = 3, maintenance.compact.min_files = 2,")
    master = JobMaster(compile_text(text, variables={"work": str(tmp_path)}, file="job.conf"))
    log = Path(master.history_path.replace("file:", "")) / "_delta_log"

    def optimized() -> bool:
        return any(json.loads(line).get("commitInfo", {}).get("operation") == "OPTIMIZE"
                   for f in log.glob("*.json") for line in f.read_text().splitlines())

    master.bus.subscribe(lambda e: type(e).__name__ == "EpochCommitted" and optimized() and master.stop.set())
    result = master.run(spark=spark, timeout_s=300)
    assert result.status == "CANCELED", result
    assert optimized(), sorted(p.name for p in log.iterdir())
    moves = history.transitions(spark, master.history_path, master.job_id)
    assert [r["state"] for r in moves if r["entity"] == "job"] == [
        "INITIALIZING", "CREATED", "PENDING", "SCHEDULED", "RUNNING", "CANCELING", "CANCELED"], moves
