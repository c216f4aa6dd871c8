"""Render the three plans as text, JSON (stable, for tests and tools), DOT, Mermaid.

Every format is redacted (:mod:`streaming_engine.redact`): option values are
masked by ``public_dict`` already; targets, descriptions and any other text
lose URI user-info and remembered secrets here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from streaming_engine.redact import redact_text, redact_tree

if TYPE_CHECKING:
    from streaming_engine.job import CompiledJob

FORMATS = ("text", "json", "dot", "mermaid")


def render(job: "CompiledJob", fmt: str = "text") -> str:
    return redact_text({"text": to_text, "json": to_json, "dot": to_dot, "mermaid": to_mermaid}[fmt](job))


def to_dict(job: "CompiledJob") -> dict[str, Any]:
    return redact_tree({
        "logical": job.dag.to_dict(),
        "execution": job.plan.to_dict(),
        "physical": job.physical.to_dict(),
    })


def to_json(job: "CompiledJob") -> str:
    return json.dumps(to_dict(job), indent=2, sort_keys=True, default=str)


def _tables(schema_dicts: list[dict[str, Any]]) -> str:
    out = []
    for t in schema_dicts:
        cols = ", ".join(f"{c['name']} {c['type']}" for c in t["columns"])
        pk = f" pk({', '.join(t['primary_key'])})" if t.get("primary_key") else ""
        out.append(f"{t['table']}({cols}){pk}")
    return "; ".join(out)


def to_text(job: "CompiledJob") -> str:
    dag, plan, phys = job.dag, job.plan, job.physical
    lines = [f"Job {dag.job_name!r}  mode={dag.env.job_mode}  parallelism={dag.env.parallelism}", ""]
    lines.append("== Logical DAG ==")
    for v in dag.vertices:
        wiring = ""
        if v.inputs:
            wiring += f" <- {', '.join(v.inputs)}"
        if v.output:
            wiring += f" -> {v.output}"
        extra = f" [{v.execution}{'' if v.chainable else ', not chainable'}]" if v.kind == "transform" else ""
        lines.append(f"  {v.kind:<9} {v.id}{wiring}{extra}")
        lines.append(f"            schema: {_tables(v.schema.to_dict())}")
    for e in dag.edges:
        lines.append(f"  edge      {e.src} --{e.dataset}--> {e.dst}")
    for w in dag.warnings:
        lines.append(f"  {w}")
    lines += ["", "== Execution plan =="]
    for phase, result in plan.phases:
        lines.append(f"  phase {phase}: {result}")
    for p in plan.pipelines:
        lines.append(f"  {p.name} (key {p.key})")
        for v in p.vertices:
            tables = ", ".join(v.schema.table_ids)
            lines.append(f"    {p.full_name(v.id)}  [{v.kind}, parallelism {v.parallelism}]  tables: {tables}")
        for e in p.edges:
            lines.append(f"    {e.src} -> {e.dst}")
    lines += ["", "== Physical plan =="]
    for pp in phys.pipelines:
        lines.append(f"  {pp.name}: {pp.mode}, trigger {pp.trigger}")
        lines.append(f"    checkpoint: {pp.checkpoint_location}")
        for i, s in enumerate(pp.stages, start=1):
            cache = "  (output persisted per epoch: read more than once)" if s.detail.get("persist") else ""
            lines.append(f"    {i}. [{s.kind}] {s.vertex}: {s.operator}{cache}")
            if s.detail.get("unread_metadata"):
                lines.append(f"       - not read downstream, left null: {', '.join(s.detail['unread_metadata'])}")
            if s.detail.get("dead_letter"):
                lines.append(f"       - records it cannot decode -> dead-letter table {s.detail['dead_letter']}")
            for seg in s.detail.get("segments", ()):
                lines.append(f"       - {seg['operator']}: {seg['describe']}")
            if s.kind == "sink-group":
                for entry in s.detail["sinks"]:
                    lines.append(f"       - {entry['sink']}: commit={entry['commit']}")
                    if "txn_app_id" in entry:
                        lines.append(f"         txnAppId={entry['txn_app_id']}")
                    for t in entry["targets"]:
                        lines.append(f"         {t}")
    return "\n".join(lines) + "\n"


def _q(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(job: "CompiledJob") -> str:
    lines = ["digraph job {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];']
    shapes = {"source": "cds", "transform_chain": "box", "shuffle": "diamond", "sink": "folder"}
    for p in job.plan.pipelines:
        lines.append(f'  subgraph "cluster_{_q(p.name)}" {{')
        lines.append(f'    label="{_q(p.name)} ({_q(p.key)})";')
        for v in p.vertices:
            name = p.full_name(v.id)
            lines.append(f'    "{_q(name)}" [label="{_q(v.id)}", shape={shapes[v.kind]}];')
        for e in p.edges:
            lines.append(f'    "{_q(p.full_name(e.src))}" -> "{_q(p.full_name(e.dst))}";')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(job: "CompiledJob") -> str:
    lines = ["flowchart LR"]
    ids: dict[str, str] = {}

    def node_id(name: str) -> str:
        return ids.setdefault(name, f"n{len(ids)}")

    brackets = {"source": ("([", "])"), "transform_chain": ("[", "]"), "shuffle": ("{", "}"), "sink": ("[(", ")]")}
    for p in job.plan.pipelines:
        lines.append(f'  subgraph {p.name}["{p.name}"]')
        for v in p.vertices:
            o, c = brackets[v.kind]
            label = v.id.replace('"', "'")
            lines.append(f'    {node_id(p.full_name(v.id))}{o}"{label}"{c}')
        for e in p.edges:
            lines.append(f"    {node_id(p.full_name(e.src))} --> {node_id(p.full_name(e.dst))}")
        lines.append("  end")
    return "\n".join(lines) + "\n"
