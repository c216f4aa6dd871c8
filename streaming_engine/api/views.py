"""Job objects in SeaTunnel REST v2's shape, from a live run or from the history table.

SeaTunnel's fields (``jobId``, ``jobName``, ``jobStatus``, ``createTime``,
``finishedTime``, ``errorMsg``, ``jobDag`` with ``vertexInfoMap`` and
``pipelineEdges``, ``metrics`` with ``SourceReceivedCount``,
``SinkWriteCount``, ``TableSinkWriteCount``, ...) keep their names and their
string values, so scripts written against SeaTunnel read them; the engine adds
``plans`` (the logical, execution and physical plans as ``explain --format
json`` prints them), ``pipelines`` (per pipeline: state, last committed epoch,
epochs and rows of this run, last commit time, restarts) and ``history``
(every recorded state change). Times are UTC, ``yyyy-MM-dd HH:mm:ss`` as
SeaTunnel prints them. Everything here is data; the app redacts it on the way out.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def fmt_time(t: float | datetime | None) -> str | None:
    if t is None:
        return None
    if isinstance(t, datetime):
        at = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
    else:
        at = datetime.fromtimestamp(t, timezone.utc)
    return at.astimezone(timezone.utc).strftime(TIME_FORMAT)


def job_dag(job_id: str, plans: Mapping[str, Any] | None, env_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """SeaTunnel's ``jobDag`` from the plans: one vertex per plugin block
    (``vertexId`` = its position in the file, ``type`` source/transform/sink,
    ``vertexName`` = the block's id, ``tablePaths`` = the tables it produces or
    receives) and, per pipeline, the edges between the vertices it holds."""
    logical = (plans or {}).get("logical") or {}
    execution = (plans or {}).get("execution") or {}
    vertices = list(logical.get("vertices") or [])
    number = {v.get("id"): i for i, v in enumerate(vertices, start=1)}
    vertex_info = [
        {"vertexId": number[v.get("id")], "type": v.get("kind"), "vertexName": v.get("id"),
         "tablePaths": [t.get("table") for t in (v.get("schema") or []) if isinstance(t, Mapping)]}
        for v in vertices
    ]
    owner: dict[str, str] = {}
    for p in execution.get("pipelines") or []:
        for ev in p.get("vertices") or []:
            for member in ev.get("members") or []:
                owner[member] = p.get("name") or p.get("key")
    edges: dict[str, list[dict[str, Any]]] = {}
    for e in logical.get("edges") or []:
        pipeline = owner.get(e.get("from")) or owner.get(e.get("to")) or "?"
        edges.setdefault(pipeline, []).append(
            {"inputVertexId": number.get(e.get("from")), "targetVertexId": number.get(e.get("to"))})
    return {"jobId": job_id, "envOptions": dict(env_options or {}), "vertexInfoMap": vertex_info, "pipelineEdges": edges}


def metrics(source_rows: int, table_rows: Mapping[str, int], seconds: float | None) -> dict[str, Any]:
    """SeaTunnel's job metrics (string values, as SeaTunnel returns them).
    Rows written are the rows the sinks committed (skipped replays excluded);
    rows received are Spark's input rows of the pipelines' sources; rates are
    over the time the job has been running."""
    written = sum(table_rows.values())
    rate = (lambda n: f"{n / seconds:.2f}") if seconds and seconds > 0 else (lambda n: "0.00")
    return {
        "SourceReceivedCount": str(source_rows),
        "SourceReceivedQPS": rate(source_rows),
        "SinkWriteCount": str(written),
        "SinkWriteQPS": rate(written),
        "TableSinkWriteCount": {t: str(n) for t, n in sorted(table_rows.items())},
    }


def committed_table_rows(committed: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Rows per table from a run summary (``JobResult.committed``, the history's end row)."""
    out: dict[str, int] = {}
    for row in committed:
        if row.get("table") == "*":  # the engine's own rows (rows in, dead letters), no table
            continue
        out[str(row.get("table"))] = out.get(str(row.get("table")), 0) + int(row.get("total_rows") or 0)
    return out


def transition(t: Any) -> dict[str, Any]:
    """One state change (a history row or an in-memory Transition) as the API shows it."""
    get = (lambda k: t.get(k)) if isinstance(t, Mapping) else (lambda k: getattr(t, k, None))
    return {"entity": get("entity"), "from": get("previous") if isinstance(t, Mapping) else get("old"),
            "to": get("state") if isinstance(t, Mapping) else get("new"), "at": fmt_time(get("at")),
            "cause": get("cause")}
