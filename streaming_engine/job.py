"""The compile pipeline in one place: file -> RawJob -> LogicalDag -> ExecutionPlan -> PhysicalPlan."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from streaming_engine import redact, security
from streaming_engine.config.loader import RawJob, load_file, load_text
from streaming_engine.dag.builder import build_dag
from streaming_engine.dag.logical import LogicalDag
from streaming_engine.plan import execution, physical
from streaming_engine.plan.execution import ExecutionPlan
from streaming_engine.plan.physical import PhysicalPlan
from streaming_engine.schema import Dataset


@dataclass(frozen=True)
class CompiledJob:
    raw: RawJob
    dag: LogicalDag
    plan: ExecutionPlan
    physical: PhysicalPlan
    strict: bool = False
    restricted: bool = False

    def recompile(self, planned: "Mapping[str, Dataset] | None" = None) -> "CompiledJob":
        """The job planned again from its config (a source's tables changed
        while it ran: their new columns are read from the source again), given
        what its sources were planned with before (``planned``, by source
        vertex id; default: this plan's)."""
        if planned is None:
            planned = {v.id: v.schema for v in self.dag.vertices if v.kind == "source"}
        return compile_raw(self.raw, strict=self.strict, job_name=self.dag.job_name, restricted=self.restricted,
                           planned=planned)


def compile_raw(
    raw: RawJob, strict: bool = False, job_name: str | None = None, restricted: bool = False,
    planned: "Mapping[str, Dataset] | None" = None,
) -> CompiledJob:
    """``restricted``: refuse plugins that run code or read local files (security.check); ``planned``: the
    sources' datasets of the running job planned again (``CompiledJob.recompile``)."""
    redact.remember(redact.secret_values([raw.env, *(b.options for b in raw.blocks)]))
    dag = build_dag(raw, strict=strict, planned=planned)
    redact.remember(redact.secret_values([v.plugin.options for v in dag.vertices]))
    security.check(dag, restricted)
    if job_name:
        from dataclasses import replace

        dag = replace(dag, job_name=job_name, env=dag.env.model_copy(update={"job_name": job_name}))
    plan = execution.generate(dag)
    return CompiledJob(raw, dag, plan, physical.build(dag, plan), strict, restricted)


def compile_file(
    path: str | os.PathLike,
    variables: Mapping[str, str] | None = None,
    strict: bool = False,
    job_name: str | None = None,
    restricted: bool = False,
) -> CompiledJob:
    return compile_raw(load_file(path, variables), strict=strict, job_name=job_name, restricted=restricted)


def compile_text(text: str, fmt: str = "hocon", variables: Mapping[str, str] | None = None, strict: bool = False,
                 file: str | None = None, restricted: bool = False) -> CompiledJob:
    return compile_raw(load_text(text, fmt=fmt, variables=variables, file=file), strict=strict, restricted=restricted)
