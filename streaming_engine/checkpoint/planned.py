"""The tables and columns each source of a pipeline was last planned with, kept in the pipeline's
checkpoint (``engine_planned_sources.json``), so a run after a restart plans its sources as the run
before it ended: a column a source keeps although the database dropped it (Postgres-CDC under
``schema.change.behavior = lenient``: null from the drop on) stays planned, as in the running job,
and the sinks' tables, which hold it, get null in every row changed after the drop, whether the job
ran through the drop or was stopped across it. Written at every start of the pipeline's query (a
restart, a re-plan for a schema change); read once when a job starts (``runner.execute``), which
plans the job again (``CompiledJob.recompile``) only when a source's stored tables differ from
the fresh plan's (``Source.output_after`` decides what of them it keeps)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Mapping

from streaming_engine.checkpoint import files
from streaming_engine.schema import Dataset, TableSchema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FILE = "engine_planned_sources.json"


def _path(checkpoint: str) -> str:
    return f"{checkpoint.rstrip('/')}/{FILE}"


def write(spark: "SparkSession", checkpoint: str, sources: Mapping[str, Dataset]) -> None:
    text = json.dumps({"version": 1, "sources": {k: v.to_dict() for k, v in sources.items()}}, sort_keys=True)
    files.write_text(spark, _path(checkpoint), text, overwrite=True)


def read(spark: "SparkSession", checkpoint: str) -> dict[str, Dataset]:
    """The sources' datasets stored in ``checkpoint`` ({} when none: a pipeline that never started)."""
    text = files.read_text(spark, _path(checkpoint))
    if not text:
        return {}
    data = json.loads(text)
    return {k: Dataset(tuple(TableSchema.from_dict(t) for t in tables)) for k, tables in data.get("sources", {}).items()}
