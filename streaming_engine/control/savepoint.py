"""Savepoints: where a job stood when it stopped with one, kept next to its
checkpoints (``<checkpoint.dir>/<job>/_savepoints/<job id>.json``).

A savepoint is taken by draining the job (every running epoch commits, none
starts after it), so each pipeline's Spark checkpoint, its targets and the
commit ledger agree on one epoch. The file records that agreement: the plans,
per pipeline its checkpoint, the last committed epoch and the source offsets of
that epoch (Spark's offset log), the ledger's Delta version. A restore checks
the checkpoints still stand there (nothing ran since) and diffs the plans
(:mod:`control.restore`); the queries then continue from their checkpoints.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from streaming_engine.checkpoint import delta_log, files, resume
from streaming_engine.errors import EngineError
from streaming_engine.redact import redact_tree

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


def directory(checkpoint_dir: str, job_slug: str) -> str:
    return f"{checkpoint_dir.rstrip('/')}/{job_slug}/_savepoints"


def offsets(spark: "SparkSession", checkpoint: str, batch: int) -> list[Any]:
    """The source offsets of ``batch`` in Spark's offset log (one per source, in order)."""
    if batch < 0:
        return []
    text = files.read_text(spark, f"{checkpoint.rstrip('/')}/offsets/{batch}")
    if text is None:
        return []
    lines = text.splitlines()[2:]  # "v1", the batch's metadata, then one line per source
    out: list[Any] = []
    for ln in lines:
        try:
            out.append(json.loads(ln))
        except ValueError:
            out.append(ln)
    return out


def record(spark: "SparkSession", job_id: str, job_name: str, config_hash: str, plans: dict[str, Any],
           checkpoints: dict[str, str], ledger: str) -> dict[str, Any]:
    """What a drained job's pipelines hold now (after its queries stopped)."""
    pipelines = {}
    for key, ck in checkpoints.items():
        where = resume.progress(spark, ck)
        pipelines[key] = {"checkpoint": ck, "committed": where.committed, "started": where.started,
                          "offsets": offsets(spark, ck, where.committed)}
    return redact_tree({
        "job_id": job_id, "job_name": job_name, "created": time.time(), "config_hash": config_hash,
        "plans": plans, "pipelines": pipelines, "ledger": {"path": ledger, "version": delta_log.table_version(spark, ledger)},
    })


def write(spark: "SparkSession", path: str, data: dict[str, Any]) -> None:
    files.write_text(spark, path, json.dumps(data, indent=2, sort_keys=True, default=str))


def read(spark: "SparkSession", path: str, job_id: str) -> dict[str, Any]:
    text = files.read_text(spark, path)
    if text is None:
        raise EngineError("JOB.SAVEPOINT_NOT_FOUND", {"job_id": job_id, "path": path})
    return json.loads(text)


def check_checkpoints(spark: "SparkSession", saved: dict[str, Any]) -> list[str]:
    """Pipelines whose checkpoint moved since the savepoint (a run without
    --restore continued the job): restoring would not be exactly where it stopped."""
    moved = []
    for key, p in saved["pipelines"].items():
        where = resume.progress(spark, p["checkpoint"])
        if where.committed != p["committed"]:
            moved.append(f"pipeline {key!r}: its checkpoint {p['checkpoint']} has committed epoch {where.committed}, "
                         f"the savepoint epoch {p['committed']}")
    return moved
