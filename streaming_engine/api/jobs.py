"""The dispatcher: jobs submitted to a running server, on ONE Spark session.

Flink's Dispatcher and SeaTunnel's CoordinatorService in small: it accepts a
job (compiles it, in restricted mode unless the server allows otherwise),
gives it a job master (:class:`control.master.JobMaster`) and a thread of its
own that runs it on the server's Spark session (SeaTunnel's session mode: jobs
share one Spark application), follows its progress through the runtime's
events, stops it on request, and lists running and finished jobs. Finished
jobs come from the job-history Delta table, so they survive a restart of the
server; every job the server runs records there (the server's
``history.path``, whatever the job's own env says).

A submitted config substitutes no variable from the server's environment
(``${HOME}``, ``${AWS_SECRET_ACCESS_KEY}``): only a block's own
``${var:default}`` defaults apply.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from streaming_engine import redact
from streaming_engine.api import views
from streaming_engine.control import history
from streaming_engine.errors import ConfigError, EngineError, Problem
from streaming_engine.runtime.events import EpochCommitted, Event, JobStarted, PipelineReplanned, SourceProgress

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from streaming_engine.control.master import JobMaster
    from streaming_engine.job import CompiledJob
    from streaming_engine.metrics.prometheus import PrometheusMetrics

log = logging.getLogger("streaming_engine.api")

FINISHED_STATES = ("FINISHED", "CANCELED", "FAILED", "SAVEPOINT_DONE", "UNKNOWABLE")
MAX_JOB_ID_DIGITS = 19  # a Java long, as SeaTunnel's job ids
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")


class ApiError(EngineError):
    """An error the API answers with ``status`` (and, for a config, its problems)."""

    def __init__(self, status: int, condition: str, params: dict[str, Any] | None = None,
                 problems: tuple[Problem, ...] = ()):
        super().__init__(condition, params)
        self.status, self.problems = status, tuple(problems)


@dataclass
class PipelineProgress:
    name: str
    epoch: int | None = None  # the last epoch committed (Spark's batch id)
    epochs: int = 0  # epochs committed in this run
    rows_committed: int = 0
    rows_read: int = 0
    last_commit: float | None = None
    last_commit_seconds: float | None = None


@dataclass
class Submitted:
    """One job the server runs (or ran, in its lifetime)."""

    job: "CompiledJob"
    master: "JobMaster"
    created: float
    start_with_savepoint: bool
    plans: dict[str, Any]
    env_options: dict[str, Any]
    pipelines: dict[str, PipelineProgress]
    restore_from: str | None = None  # the job id whose savepoint this run continues from
    source_rows: int = 0
    table_rows: dict[str, int] = field(default_factory=dict)
    running_since: float | None = None
    finished: float | None = None
    status: str | None = None  # the end state, once the run returned
    error: str | None = None
    stop_requested: str | None = None
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def job_id(self) -> str:
        return self.master.job_id

    @property
    def state(self) -> str:
        return self.master.state.state.value

    @property
    def ended(self) -> bool:
        return self.status is not None

    def on_event(self, e: Event) -> None:
        with self.lock:
            if isinstance(e, EpochCommitted):
                p = self.pipelines.setdefault(e.pipeline, PipelineProgress(e.pipeline))
                p.epoch = e.epoch if p.epoch is None else max(p.epoch, e.epoch)
                p.epochs += 1
                p.last_commit, p.last_commit_seconds = time.time(), e.seconds
                for c in e.commits:
                    if not c.skipped and c.table != "*":  # "*": the engine's own rows (rows in), no table
                        p.rows_committed += c.rows
                        self.table_rows[c.table] = self.table_rows.get(c.table, 0) + c.rows
            elif isinstance(e, SourceProgress):
                p = self.pipelines.setdefault(e.pipeline, PipelineProgress(e.pipeline))
                p.rows_read += e.input_rows
                self.source_rows += e.input_rows
            elif isinstance(e, (PipelineReplanned, JobStarted)) and e.plans:  # explain shows them as planned now
                self.plans = json.loads(e.plans)
        if self.running_since is None and self.master.state.state.value == "RUNNING":
            self.running_since = time.time()

    def view(self) -> dict[str, Any]:
        """The job object (SeaTunnel's fields, plans, per-pipeline progress, state changes)."""
        with self.lock:
            end = self.finished or time.time()
            seconds = end - self.running_since if self.running_since else None
            out: dict[str, Any] = {
                "jobId": self.job_id, "jobName": self.master.name, "jobStatus": self.state,
                "createTime": views.fmt_time(self.created),
                "jobDag": views.job_dag(self.job_id, self.plans),
                "metrics": views.metrics(self.source_rows, self.table_rows, seconds),
                "envOptions": self.env_options, "pluginJarsUrls": [],
                "isStartWithSavePoint": self.start_with_savepoint,
                "pipelines": {
                    key: {"name": p.name, "state": self._pipeline_state(key), "epoch": p.epoch, "epochs": p.epochs,
                          "rowsCommitted": p.rows_committed, "rowsRead": p.rows_read,
                          "lastCommitTime": views.fmt_time(p.last_commit),
                          "lastCommitSeconds": round(p.last_commit_seconds, 3) if p.last_commit_seconds else None,
                          "restarts": self.master.restarts.get(key, 0)}
                    for key, p in self.pipelines.items()
                },
                "plans": self.plans,
                "history": [views.transition(t) for t in self._transitions()],
            }
            if self.ended:
                out["finishedTime"] = views.fmt_time(self.finished)
                out["errorMsg"] = self.error
            else:
                out["errorMsg"] = None
            if self.stop_requested:
                out["stopRequested"] = self.stop_requested
            if self.restore_from:
                out["restoredFrom"] = self.restore_from
            return out

    def _pipeline_state(self, key: str) -> str | None:
        m = self.master.pipelines.get(key)
        return m.state.value if m is not None else None

    def _transitions(self) -> list[Any]:
        machines = [self.master.state, *self.master.pipelines.values()]
        return sorted((t for m in machines for t in list(m.history)), key=lambda t: t.at)


class JobService:
    def __init__(self, spark: "SparkSession", spark_master: str, history_path: str, *, restricted: bool = True,
                 metrics: "PrometheusMetrics | None" = None, keep_finished: int = 100, extras: tuple[str, ...] = ()):
        self.spark, self.spark_master, self.history_path = spark, spark_master, history_path
        self.extras = tuple(extras)  # the extra jar sets the server's session was built with
        self.restricted, self.metrics, self.keep_finished = restricted, metrics, keep_finished
        self.jobs: dict[str, Submitted] = {}  # this server's jobs, in submission order
        self._lock = threading.Lock()
        self._history_lock = threading.Lock()  # one history query at a time on the shared session
        self.started = time.time()
        self.closing = False

    # -- submit ----------------------------------------------------------------------
    def compile(self, text: str, fmt: str, job_name: str | None) -> "CompiledJob":
        from streaming_engine.config.loader import load_text
        from streaming_engine.job import compile_raw

        try:
            raw = load_text(text, fmt=fmt, environ={})  # never the server's environment
            job = compile_raw(raw, job_name=job_name or None, restricted=self.restricted)
        except ConfigError as e:
            problems = tuple(self._said_by_server(p) for p in e.problems)
            errors = tuple(p for p in problems if p.severity == "error") or problems
            raise ApiError(400, "API.BAD_CONFIG", {"count": len(errors), "s": "s" if len(errors) != 1 else "",
                                                   "problems": "; ".join(str(p) for p in errors)},
                           problems=problems) from None
        env = job.dag.env.model_copy(update={"history_path": self.history_path})
        return replace(job, dag=replace(job.dag, env=env))

    def _said_by_server(self, p: Problem) -> Problem:
        """Restricted mode's refusals name the server as what switched it on (not a CLI flag)."""
        if p.condition == "CONFIG.RESTRICTED" and p.params.get("switch") == "--restricted":
            return replace(p, params={**p.params, "switch": "the API server; 'serve --allow-unrestricted' lifts it"})
        if p.condition == "CONFIG.UNSET_VARIABLE":  # no -i here, and never the server's environment
            return replace(p, condition="API.UNSET_VARIABLE")
        return p

    def submit(self, text: str, fmt: str = "json", job_name: str | None = None, job_id: str | None = None,
               start_with_savepoint: bool = False) -> Submitted:
        from streaming_engine.control.master import JobMaster
        from streaming_engine.runtime.session import required_extras

        if self.closing:
            raise ApiError(503, "API.SHUTTING_DOWN", {})
        if job_id is not None:
            job_id = job_id.strip()
            if not job_id.isdigit() or len(job_id) > MAX_JOB_ID_DIGITS:
                raise ApiError(400, "API.BAD_PARAMETER", {"name": "jobId", "detail": f"must be a decimal number of at "
                                                          f"most {MAX_JOB_ID_DIGITS} digits"})
            job_id = str(int(job_id))
        restore_from = None
        if start_with_savepoint:  # SeaTunnel's restart from a savepoint: a new run continues job <jobId>'s
            if job_id is None:
                raise ApiError(400, "API.BAD_PARAMETER", {"name": "jobId", "detail": "isStartWithSavePoint=true needs "
                                                          "jobId: the id of the job whose savepoint to continue from"})
            restore_from, job_id = job_id, None
        job = self.compile(text, fmt, job_name)
        if not JOB_NAME.fullmatch(job.dag.job_name) or job.dag.job_name.strip(".") == "":
            # the name is a folder under the checkpoint root, beside the server's own (_history, _api)
            raise ApiError(400, "API.BAD_JOB_NAME", {"name": job.dag.job_name})
        missing = [x for x in required_extras(job.raw) if x not in self.extras]
        if missing:
            raise ApiError(400, "API.SESSION_LACKS", {"extras": ", ".join(missing)})
        if job_id is not None and job_id in self.jobs:
            raise ApiError(409, "API.JOB_ID_TAKEN", {"job_id": job_id})
        if job_id is not None and self._history_jobs(job_id=job_id):
            raise ApiError(409, "API.JOB_ID_TAKEN", {"job_id": job_id})
        master = JobMaster(job, master=self.spark_master, job_id=job_id)
        s = self._follow(job, master, start_with_savepoint, restore_from)
        env = job.dag.env
        with self._lock:  # checked and registered at once: two submissions of one name cannot both pass
            same = [x for x in self.jobs.values() if not x.ended and x.master.name == job.dag.job_name]
            if same:
                raise ApiError(409, "API.JOB_NAME_RUNNING", {"name": job.dag.job_name, "job_id": same[0].job_id})
            if master.job_id in self.jobs:
                raise ApiError(409, "API.JOB_ID_TAKEN", {"job_id": master.job_id})
            self.jobs[master.job_id] = s
            self._forget_old()
        s.thread = threading.Thread(target=self._run, args=(s,), name=f"job-{master.job_id}", daemon=True)
        s.thread.start()
        log.info("job submitted", extra={"job_id": master.job_id, "job": master.name,
                                         "pipelines": len(job.plan.pipelines), "mode": env.job_mode})
        return s

    def _follow(self, job: "CompiledJob", master: "JobMaster", start_with_savepoint: bool = False,
                restore_from: str | None = None) -> Submitted:
        """A job object that follows ``master``'s run through its events (and its metrics, when the server has them)."""
        from streaming_engine.plan.render import to_json

        env = job.dag.env
        env_options = redact.redact_options({k: v for k, v in env.model_dump(by_alias=True).items()
                                             if k != "spark" and v not in (None, (), [])})
        env_options.update({k: v for k, v in redact.redact_options(env.spark).items()})
        s = Submitted(job, master, time.time(), start_with_savepoint, json.loads(to_json(job)), env_options,
                      {p.key: PipelineProgress(p.name) for p in job.plan.pipelines}, restore_from=restore_from)
        master.bus.subscribe(s.on_event)
        if self.metrics is not None:
            self.metrics.attach(master.bus, table_limit=env.metrics_table_limit)
        return s

    def attach(self, job: "CompiledJob", master: "JobMaster") -> Submitted:
        """Serve a job run by someone else (``run --api-port``: the CLI's attached run), read-only."""
        s = self._follow(job, master, restore_from=None)
        with self._lock:
            self.jobs[master.job_id] = s
        return s

    @staticmethod
    def ended(s: Submitted, error: str | None) -> None:
        with s.lock:
            s.finished, s.status, s.error = time.time(), s.master.state.state.value, error

    def _run(self, s: Submitted) -> None:
        try:
            result = s.master.run(spark=self.spark, count_rows=False, restore=s.restore_from)
            status, error = s.master.state.state.value, result.error
        except Exception as e:  # noqa: BLE001 - a job's failure never takes the server down
            status, error = "FAILED", redact.redact_text(f"{type(e).__name__}: {e}")
            log.error("job run failed", extra={"job_id": s.job_id, "error": error})
        with s.lock:
            s.finished, s.status, s.error = time.time(), status, error
        log.info("job ended", extra={"job_id": s.job_id, "job": s.master.name, "state": status})

    def _forget_old(self) -> None:
        """Keep at most ``keep_finished`` ended jobs in memory (the history table has them all)."""
        ended = [k for k, s in self.jobs.items() if s.ended]
        for k in ended[: max(0, len(ended) - self.keep_finished)]:
            del self.jobs[k]

    # -- stop ----------------------------------------------------------------------------
    def stop(self, job_id: str, savepoint: bool = False) -> Submitted:
        s = self.jobs.get(job_id)
        if s is None:
            if self._history_jobs(job_id=job_id):
                state = self._history_jobs(job_id=job_id)[0]["state"]
                raise ApiError(409, "API.JOB_NOT_RUNNING", {"job_id": job_id, "state": state,
                                                            "detail": " (or it runs in another driver)"})
            raise ApiError(404, "API.UNKNOWN_JOB", {"job_id": job_id})
        if s.ended or s.master.state.state.terminal:
            raise ApiError(409, "API.JOB_NOT_RUNNING", {"job_id": job_id, "state": s.state, "detail": ""})
        s.stop_requested = "with a savepoint" if savepoint else "without a savepoint"
        s.master.request_stop(savepoint=savepoint)
        log.info("job stop requested", extra={"job_id": job_id, "job": s.master.name, "savepoint": savepoint})
        return s

    # -- reads ----------------------------------------------------------------------------
    def info(self, job_id: str) -> dict[str, Any]:
        s = self.jobs.get(job_id)
        if s is not None:
            return s.view()
        found = self._history_jobs(job_id=job_id)
        if not found:
            raise ApiError(404, "API.UNKNOWN_JOB", {"job_id": job_id})
        with self._history_lock:
            rows = history.transitions(self.spark, self.history_path, job_id)
        return _from_history(found[0], rows)

    def running(self) -> list[dict[str, Any]]:
        with self._lock:
            live = [s for s in self.jobs.values() if not s.ended]
        return [s.view() for s in live]

    def finished(self, state: str | None = None) -> list[dict[str, Any]]:
        if state is not None and state.upper() not in FINISHED_STATES:
            raise ApiError(400, "API.BAD_PARAMETER", {"name": "state", "detail": "must be one of "
                                                      + ", ".join(FINISHED_STATES)})
        with self._lock:
            live = {k: s for k, s in self.jobs.items() if not s.ended}
            done = {k: s for k, s in self.jobs.items() if s.ended}
        rows = [r for r in self._history_jobs() if r["state"] in FINISHED_STATES and r["job_id"] not in live]
        if state is not None:
            rows = [r for r in rows if r["state"] == state.upper()]
        plans = self._history_plans([r["job_id"] for r in rows if r["job_id"] not in done])
        out = []
        for r in rows:
            if r["job_id"] in done:
                v = done[r["job_id"]].view()
                v["jobStatus"] = r["state"]  # the recorded end, as a reader after a restart sees it
                out.append(v)
            else:
                out.append(_from_history(r, [], plans.get(r["job_id"])))
        for v in out:  # SeaTunnel's list spells it finishTime
            v["finishTime"] = v.get("finishedTime")
        return out

    def overview(self) -> dict[str, Any]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            engine_version = version("streaming-engine")
        except PackageNotFoundError:  # pragma: no cover - a checkout without install
            engine_version = "unknown"
        with self._lock:
            running = sum(1 for s in self.jobs.values() if not s.ended)
            live = {k for k, s in self.jobs.items() if not s.ended}
        counts: dict[str, int] = {}
        for r in self._history_jobs():
            if r["job_id"] not in live and r["state"] in FINISHED_STATES:
                counts[r["state"]] = counts.get(r["state"], 0) + 1
        slots = self.spark.sparkContext.defaultParallelism
        return {
            "projectVersion": engine_version, "gitCommitAbbrev": _git_commit(),
            "totalSlot": str(slots), "unassignedSlot": "0", "works": "1",
            "runningJobs": str(running), "finishedJobs": str(counts.get("FINISHED", 0)),
            "failedJobs": str(counts.get("FAILED", 0)), "cancelledJobs": str(counts.get("CANCELED", 0)),
            "savepointDoneJobs": str(counts.get("SAVEPOINT_DONE", 0)),
            "unknowableJobs": str(counts.get("UNKNOWABLE", 0)),
            "sparkMaster": self.spark_master, "sparkVersion": self.spark.version,
            "history": self.history_path, "restricted": self.restricted,
            "upSince": views.fmt_time(self.started),
        }

    # -- the history table ------------------------------------------------------------------
    def _history_jobs(self, job_id: str | None = None) -> list[dict[str, Any]]:
        with self._history_lock:
            return history.jobs(self.spark, self.history_path, job_id=job_id, limit=1000)

    def _history_plans(self, job_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The plans each job recorded last: with its CREATED state, a pipeline's first start when the run
        planned the job as it last ran, or a pipeline's re-plan for a schema change (one query for all)."""
        if not job_ids:
            return {}
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        with self._history_lock:
            if not DeltaTable.isDeltaTable(self.spark, self.history_path):
                return {}
            rows = (self.spark.read.format("delta").load(self.history_path)
                    .where(F.col("job_id").isin(job_ids) & F.col("detail").contains('"plans"'))
                    .select("job_id", "seq", "detail").orderBy("seq").collect())
        out = {}
        for r in rows:  # the newest last
            if '"plans"' not in r["detail"]:
                continue
            try:
                found = (json.loads(r["detail"]) or {}).get("plans")
            except ValueError:
                continue
            if found:
                out[r["job_id"]] = found
        return out

    # -- shutdown -----------------------------------------------------------------------------
    def shutdown(self, timeout: float = 120.0) -> None:
        """Stop every running job (no savepoint: an epoch in flight is replayed
        by the next run) and wait for their runs to record their end."""
        self.closing = True
        with self._lock:
            live = [s for s in self.jobs.values() if not s.ended]
        for s in live:
            s.stop_requested = "the server is shutting down"
            s.master.request_stop(savepoint=False)
        deadline = time.monotonic() + timeout
        for s in live:
            if s.thread is not None:
                s.thread.join(max(0.0, deadline - time.monotonic()))


def _from_history(summary: dict[str, Any], rows: list[dict[str, Any]],
                  plans: dict[str, Any] | None = None) -> dict[str, Any]:
    """A job object from the history table: its summary (``history.jobs``) and,
    when read, every transition (``history.transitions``)."""
    job_id = summary["job_id"]
    metrics_detail: dict[str, Any] = {}
    if summary.get("metrics"):
        try:
            metrics_detail = json.loads(summary["metrics"]) or {}
        except ValueError:
            metrics_detail = {}
    for r in sorted(rows, key=lambda r: r.get("seq") or 0) if plans is None else ():  # the newest plans recorded
        if r.get("detail") and '"plans"' in r["detail"]:
            try:
                plans = (json.loads(r["detail"]) or {}).get("plans") or plans
            except ValueError:
                pass
    committed = metrics_detail.get("committed") or []
    pipelines: dict[str, dict[str, Any]] = {}
    for key, state in (metrics_detail.get("pipelines") or {}).items():
        mine = [c for c in committed if c.get("pipeline") == key and c.get("table") != "*"]
        pipelines[key] = {
            "state": state, "epoch": max((c.get("last_epoch", -1) for c in mine), default=None),
            "epochs": max((int(c.get("epochs") or 0) for c in mine), default=0),
            "rowsCommitted": sum(int(c.get("total_rows") or 0) for c in mine),
            "restarts": (metrics_detail.get("restarts") or {}).get(key, 0),
        }
    finished = summary.get("finished")
    out = {
        "jobId": job_id, "jobName": summary.get("job_name"), "jobStatus": summary.get("state"),
        "createTime": views.fmt_time(summary.get("created")),
        "finishedTime": views.fmt_time(finished),
        "errorMsg": summary.get("error") if summary.get("state") in ("FAILED", "UNKNOWABLE") else None,
        "endCause": summary.get("error") if finished else None,  # e.g. where a savepoint went
        "jobDag": views.job_dag(job_id, plans),
        "metrics": views.metrics(0, views.committed_table_rows(committed), None),
        "pipelines": pipelines, "plans": plans,
    }
    if rows:
        out["history"] = [views.transition(r) for r in rows]
    return out


def _git_commit() -> str:
    """The checkout's commit (short), read from .git without running git; "" when not a checkout."""
    from pathlib import Path

    git = Path(__file__).resolve().parents[2] / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            path = git / ref
            if path.is_file():
                head = path.read_text().strip()
            else:
                packed = (git / "packed-refs").read_text().splitlines()
                head = next((ln.split()[0] for ln in packed if ln.endswith(" " + ref)), "")
        return head[:8]
    except OSError:
        return ""
