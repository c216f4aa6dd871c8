"""ExecutionPlan -> PhysicalPlan: what Spark will run, per pipeline.

A preview the runtime follows stage by stage: source reads; each transform
chain split into Catalyst segments (Spark column expressions, no Python) and
fused Python segments (ONE mapInArrow pass for a run of Python transforms);
the shuffle-by-table stage; the sink group with its commit protocol; the
trigger; and the checkpoint location and transaction ids, all derived from
stable configured names (job name, pipeline key, plugin uids), never counters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from streaming_engine.dag.logical import LogicalDag, LogicalVertex
from streaming_engine.plan.execution import ExecutionPlan, ExecutionVertex, Pipeline
from streaming_engine.schema import META

# How each transform execution style runs (declared by the plugin, never by name).
_SEGMENT_OF = {"expression": "catalyst", "table": "catalyst", "python": "python"}


@dataclass(frozen=True)
class Stage:
    kind: str  # read | transform-chain | shuffle | sink-group
    vertex: str  # execution vertex id
    operator: str  # what Spark runs, in words
    members: tuple[str, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "vertex": self.vertex, "operator": self.operator}
        if self.members:
            d["members"] = list(self.members)
        if self.detail:
            d["detail"] = self.detail
        return d


@dataclass(frozen=True)
class PhysicalPipeline:
    name: str
    key: str
    mode: str  # BATCH | STREAMING
    trigger: str
    checkpoint_location: str
    stages: tuple[Stage, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "mode": self.mode,
            "trigger": self.trigger,
            "checkpoint_location": self.checkpoint_location,
            "stages": [s.to_dict() for s in self.stages],
        }


@dataclass(frozen=True)
class PhysicalPlan:
    job_name: str
    pipelines: tuple[PhysicalPipeline, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job_name, "pipelines": [p.to_dict() for p in self.pipelines]}


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", s).strip("_") or "job"


def checkpoint_location(dag: LogicalDag, pipeline_key: str) -> str:
    root = dag.env.checkpoint_dir.rstrip("/")
    return f"{root}/{slug(dag.job_name)}/{slug(pipeline_key)}"


def txn_app_id(dag: LogicalDag, pipeline_key: str, sink_uid: str, table: str | None = None) -> str:
    """Delta ``txnAppId`` of one sink (and table): stable across restarts."""
    parts = [slug(dag.job_name), slug(pipeline_key), slug(sink_uid)]
    if table:
        parts.append(slug(table))
    return ".".join(parts)


def persisted(dag: LogicalDag, p: Pipeline) -> frozenset[str]:
    """Execution vertices whose output the runtime persists in every epoch.

    An output is persisted exactly when it would otherwise be computed more
    than once per epoch: a multi-table source batch (each table is a filter
    over it), an output read by several vertices or by the shuffle-by-table
    stage, or an output whose only reader is a sink that scans its input more
    than once (``Sink.scans_input_once``). A linear single-table pipeline into
    an append sink is not persisted: Spark streams it straight into the write.
    """
    by_id = {v.id: v for v in p.vertices}
    readers_of: dict[str, list[ExecutionVertex]] = {}
    for e in p.edges:
        readers_of.setdefault(e.src, []).append(by_id[e.dst])
    out = set()
    for v in p.vertices:
        if v.kind not in ("source", "transform_chain"):
            continue
        readers = readers_of.get(v.id, [])
        if (
            (v.kind == "source" and dag.vertex(v.members[0]).schema.is_multi_table)
            or len(readers) > 1
            or any(r.kind == "shuffle" for r in readers)
            or any(r.kind == "sink" and not dag.vertex(r.members[0]).plugin.scans_input_once() for r in readers)
        ):
            out.add(v.id)
    if len([v for v in p.vertices if v.kind == "source"]) > 1:  # unioned into one multi-table batch
        out.update(v.id for v in p.vertices if v.kind == "source")
    # read twice: its dead letters, then its good rows
    out.update(v.id for v in p.vertices if v.kind == "source" and dag.vertex(v.members[0]).plugin.dead_letters())
    return frozenset(out)


def dead_letter_path(dag: LogicalDag) -> str:
    """The job's dead-letter Delta table (``env.dead_letter.path``)."""
    if dag.env.dead_letter_path:
        return dag.env.dead_letter_path
    return f"{dag.env.checkpoint_dir.rstrip('/')}/{slug(dag.job_name)}/_dead_letter"


def dead_letter_app_id(dag: LogicalDag, pipeline_key: str) -> str:
    """Delta ``txnAppId`` of a pipeline's dead-letter appends (one per epoch)."""
    return ".".join([slug(dag.job_name), slug(pipeline_key), "_dead_letter"])


def unread_metadata(dag: LogicalDag, p: Pipeline) -> tuple[str, ...]:
    """Metadata columns of the row envelope no block of the pipeline reads
    (``Plugin.reads_metadata``): the runtime leaves them null at the source,
    so Spark prunes what computes them (a file source's row positions, say).
    ``__table`` is read by the runtime itself when the batch holds several tables."""
    read: set[str] = set()
    for v in p.vertices:
        if v.kind in ("transform_chain", "sink"):
            read.update(*(dag.vertex(m).plugin.reads_metadata() for m in v.members))
        elif v.kind == "source" and dag.vertex(v.members[0]).schema.is_multi_table:
            read.add(META[0])
    if len([v for v in p.vertices if v.kind == "source"]) > 1:
        read.add(META[0])
    return tuple(c for c in META if c not in read)


def build(dag: LogicalDag, plan: ExecutionPlan) -> PhysicalPlan:
    lv = {v.id: v for v in dag.vertices}
    mode = dag.env.job_mode
    trigger = (
        f"processingTime({dag.env.checkpoint_interval} ms)" if dag.env.streaming else "availableNow (run to completion)"
    )
    pipelines = []
    for p in plan.pipelines:
        stages: list[Stage] = []
        cached = persisted(dag, p)
        unread = unread_metadata(dag, p)
        for v in p.vertices:
            if v.kind == "source":
                stages.append(_read_stage(v, lv[v.members[0]], dag, v.id in cached, unread))
            elif v.kind == "transform_chain":
                stages.append(_chain_stage(v, lv, v.id in cached))
            elif v.kind == "shuffle":
                stages.append(_shuffle_stage(v, p))
        sinks = [v for v in p.vertices if v.kind == "sink"]
        if sinks:
            stages.append(_sink_group(sinks, lv, dag, p))
        pipelines.append(
            PhysicalPipeline(p.name, p.key, mode, trigger, checkpoint_location(dag, p.key), tuple(stages))
        )
    return PhysicalPlan(dag.job_name, tuple(pipelines))


def _read_stage(
    v: ExecutionVertex, lv: LogicalVertex, dag: LogicalDag, persist: bool, unread: tuple[str, ...]
) -> Stage:
    detail: dict[str, Any] = {
        "plugin": lv.plugin_name,
        "tables": list(lv.schema.table_ids),
        "parallelism": v.parallelism,
        "streaming": dag.env.streaming,
        "persist": persist,
    }
    if unread:
        detail["unread_metadata"] = list(unread)  # left null: not computed
    if lv.plugin.dead_letters():
        detail["dead_letter"] = dead_letter_path(dag)
    return Stage(
        "read",
        v.id,
        lv.plugin.describe(),
        (lv.id,),
        detail,
    )


def segments(members: list[LogicalVertex]) -> list[tuple[str, list[LogicalVertex]]]:
    """Maximal runs of a chain: ("catalyst", [...]) or ("python", [...]).

    The runtime executes exactly these: each catalyst run as Spark column
    expressions, each python run as ONE fused mapInArrow pass per table.
    """
    runs: list[tuple[str, list[LogicalVertex]]] = []
    for m in members:
        seg = _SEGMENT_OF.get(m.execution or "expression", "python")
        if runs and runs[-1][0] == seg:
            runs[-1][1].append(m)
        else:
            runs.append((seg, [m]))
    return runs


def _chain_stage(v: ExecutionVertex, lv: dict[str, LogicalVertex], persist: bool) -> Stage:
    """A chain is ONE stage made of segments: maximal runs of Catalyst
    expressions (no Python) and maximal runs of Python transforms, each run
    fused into ONE mapInArrow pass."""
    runs = [(seg, [m.id for m in ms]) for seg, ms in segments([lv[m] for m in v.members])]
    described = []
    for seg, members in runs:
        what = ", ".join(f"{m} {lv[m].plugin.describe()}" for m in members)
        op = "Spark column expressions (Catalyst, no Python)" if seg == "catalyst" else "ONE fused mapInArrow pass"
        described.append({"segment": seg, "operator": op, "members": members, "describe": what})
    passes = sum(1 for seg, _ in runs if seg == "python")
    operator = f"transform chain of {len(v.members)}: {len(runs)} segment(s), {passes} Python pass(es)"
    return Stage(
        "transform-chain",
        v.id,
        operator,
        v.members,
        {"segments": described, "output_tables": list(lv[v.members[-1]].schema.table_ids), "persist": persist},
    )


def _shuffle_stage(v: ExecutionVertex, p: Pipeline) -> Stage:
    sinks = [e.dst for e in p.edges if e.src == v.id]
    return Stage(
        "shuffle",
        v.id,
        "group rows by table id on the persisted batch (computed once), route each table to its sinks",
        (),
        {"tables": list(v.schema.table_ids), "to": sinks},
    )


def _sink_group(
    sinks: list[ExecutionVertex], lv: dict[str, LogicalVertex], dag: LogicalDag, p: Pipeline
) -> Stage:
    entries = []
    for s in sinks:
        v = lv[s.members[0]]
        protocol = getattr(v.plugin, "commit_protocol", "none")
        entry: dict[str, Any] = {
            "sink": s.id,
            "plugin": v.plugin_name,
            "uid": v.uid,
            "commit": protocol,
            "tables": list(v.schema.table_ids),
            "targets": v.plugin.targets(v.schema),
        }
        if protocol == "delta-txn":
            entry["txn_app_id"] = txn_app_id(dag, p.key, v.uid) + ".<table>"
        entries.append(entry)
    return Stage(
        "sink-group",
        "+".join(s.id for s in sinks),
        "foreachBatch: every sink commits the epoch (batch id = txnVersion); the epoch is done when all have",
        tuple(s.members[0] for s in sinks),
        {"sinks": entries},
    )
