"""Run jobs through the engine's public interface, on the shared SparkSession.

``run_job_text(config_text)`` compiles a job (HOCON unless ``fmt`` says
otherwise), runs it to completion and returns a ``Ran`` with the JobResult and
the test's work directory. Configs refer to that directory as ``${work}``;
checkpoints go to ``${work}/checkpoints`` and restarts are off (retry times 0)
unless the config says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from streaming_engine.job import compile_text
from streaming_engine.runtime.events import EventBus
from streaming_engine.runtime.runner import JobResult, execute


@dataclass
class Ran:
    result: JobResult
    work: Path
    events: list

    def delta(self, spark, relative: str):
        return spark.read.format("delta").load(str(self.work / relative))

    def rows(self, spark, relative: str, order_by: str | None = None) -> list[dict]:
        df = self.delta(spark, relative)
        if order_by:
            df = df.orderBy(order_by)
        return [r.asDict(recursive=True) for r in df.collect()]


@pytest.fixture
def run_job_text(spark, tmp_path, monkeypatch):
    defaults = tmp_path / "engine.conf"
    defaults.write_text(
        f'env {{ checkpoint.dir = "{tmp_path}/checkpoints", job.retry.times = 0, job.retry.interval.seconds = 0 }}\n'
    )
    monkeypatch.setenv("STREAMING_ENGINE_CONF", str(defaults))

    def run(text: str, fmt: str = "hocon", variables: dict | None = None, **kw) -> Ran:
        job = compile_text(text, fmt=fmt, variables={"work": str(tmp_path), **(variables or {})}, file="job.conf")
        bus = EventBus()
        events: list = []
        bus.subscribe(events.append)
        result = execute(job, spark=spark, bus=bus, **kw)
        return Ran(result, tmp_path, events)

    return run
