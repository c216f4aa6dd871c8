"""LogicalDag -> ExecutionPlan, in the named phases of SeaTunnel's
ExecutionPlanGenerator (edges -> shuffle_by_table -> chain_transforms ->
split_pipelines -> check_names) with Flink's chaining rule.

Each phase is a pure function returning new frozen data; nothing is mutated
and no phase switches on a plugin's name: a transform's chainability and
execution style are the plugin's own declarations.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from streaming_engine.dag.logical import LogicalDag
from streaming_engine.errors import PlanError
from streaming_engine.schema import Dataset

log = logging.getLogger("streaming_engine.plan")

VertexKind = Literal["source", "transform_chain", "shuffle", "sink"]


@dataclass(frozen=True)
class ExecutionVertex:
    id: str
    kind: VertexKind
    members: tuple[str, ...]  # logical vertex ids, in chain order (empty for a shuffle)
    parallelism: int
    schema: Dataset = field(default_factory=Dataset, compare=False)
    order: int = 0  # declaration order of the first member, for stable output

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "members": list(self.members),
            "parallelism": self.parallelism,
            "tables": list(self.schema.table_ids),
        }


@dataclass(frozen=True)
class ExecutionEdge:
    src: str
    dst: str

    def to_dict(self) -> dict[str, str]:
        return {"from": self.src, "to": self.dst}


@dataclass(frozen=True)
class Graph:
    vertices: tuple[ExecutionVertex, ...]
    edges: tuple[ExecutionEdge, ...]

    @cached_property
    def _index(self) -> tuple[dict[str, ExecutionVertex], dict[str, list[str]], dict[str, list[str]]]:
        """Vertices by id, downstream and upstream ids: built once, so lookups are O(1)."""
        by_id = {v.id: v for v in self.vertices}
        down: dict[str, list[str]] = {v.id: [] for v in self.vertices}
        up: dict[str, list[str]] = {v.id: [] for v in self.vertices}
        for e in self.edges:
            down.setdefault(e.src, []).append(e.dst)
            up.setdefault(e.dst, []).append(e.src)
        return by_id, down, up

    def vertex(self, vid: str) -> ExecutionVertex:
        return self._index[0][vid]

    def downstream(self, vid: str) -> list[str]:
        return list(self._index[1].get(vid, ()))

    def upstream(self, vid: str) -> list[str]:
        return list(self._index[2].get(vid, ()))


@dataclass(frozen=True)
class Pipeline:
    name: str  # pipeline-1, pipeline-2, ... (display)
    key: str  # stable identity from configured names (checkpoints, txn ids)
    vertices: tuple[ExecutionVertex, ...]
    edges: tuple[ExecutionEdge, ...]

    def full_name(self, vertex_id: str) -> str:
        return f"{self.name}/{vertex_id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "vertices": [{**v.to_dict(), "name": self.full_name(v.id)} for v in self.vertices],
            "edges": [e.to_dict() for e in self.edges],
        }


@dataclass(frozen=True)
class ExecutionPlan:
    job_name: str
    pipelines: tuple[Pipeline, ...]
    phases: tuple[tuple[str, str], ...] = ()  # (phase, what it did)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job_name,
            "phases": [{"phase": p, "result": r} for p, r in self.phases],
            "pipelines": [p.to_dict() for p in self.pipelines],
        }


# ---------------------------------------------------------------------------
# the phases


def generate(dag: LogicalDag) -> ExecutionPlan:
    phases: list[tuple[str, str]] = []

    def record(name: str, result: str) -> None:
        phases.append((name, result))
        log.info("plan phase", extra={"phase": name, "result": result, "job": dag.job_name})

    graph = edges_phase(dag)
    record("edges", f"{len(graph.vertices)} vertices, {len(graph.edges)} edges")
    graph, shuffles = shuffle_by_table(graph, dag)
    record("shuffle_by_table", f"{shuffles} shuffle vertex(es) inserted")
    graph, chained = chain_transforms(graph, dag, enabled=dag.env.chaining)
    record("chain_transforms", f"{chained} transform(s) chained" if dag.env.chaining else "chaining disabled")
    pipelines = split_pipelines(graph, dag)
    record("split_pipelines", f"{len(pipelines)} pipeline(s)")
    plan = ExecutionPlan(dag.job_name, pipelines, ())
    check_names(plan)
    record("check_names", "vertex names unique")
    return replace(plan, phases=tuple(phases))


def edges_phase(dag: LogicalDag) -> Graph:
    """One execution vertex per logical vertex; a transform is a chain of one."""
    kinds: dict[str, VertexKind] = {"source": "source", "transform": "transform_chain", "sink": "sink"}
    vertices = []
    ids: dict[str, str] = {}
    for order, v in enumerate(dag.vertices):
        vid = _chain_name((v.id,)) if v.kind == "transform" else v.id
        ids[v.id] = vid
        vertices.append(ExecutionVertex(vid, kinds[v.kind], (v.id,), v.parallelism, v.schema, order))
    edges = _dedup(ExecutionEdge(ids[e.src], ids[e.dst]) for e in dag.edges)
    return Graph(tuple(vertices), edges)


def shuffle_by_table(graph: Graph, dag: LogicalDag) -> tuple[Graph, int]:
    """Insert ``Shuffle [<source>]`` where a single multi-table source fans out to sinks.

    In each connected part with exactly one source producing more than one
    table, a vertex whose (still multi-table) output feeds more than one sink
    directly gets a shuffle-by-table vertex between it and those sinks.
    """
    vertices = list(graph.vertices)
    ids = {v.id for v in vertices}
    removed: set[tuple[str, str]] = set()
    added: list[ExecutionEdge] = []
    inserted = 0
    for component in _components(graph):
        sources = [v for v in component if v.kind == "source"]
        if len(sources) != 1 or not sources[0].schema.is_multi_table:
            continue
        source = sources[0]
        for v in sorted(component, key=lambda x: x.order):
            sinks = [d for d in graph.downstream(v.id) if graph.vertex(d).kind == "sink"]
            if len(sinks) < 2 or not v.schema.is_multi_table:
                continue
            shuffle_id = f"Shuffle [{source.members[0]}]"
            if shuffle_id in ids:
                shuffle_id = f"Shuffle [{source.members[0]} @ {v.id}]"
            ids.add(shuffle_id)
            vertices.append(ExecutionVertex(shuffle_id, "shuffle", (), v.parallelism, v.schema, v.order))
            removed.update((v.id, s) for s in sinks)
            added.append(ExecutionEdge(v.id, shuffle_id))
            added.extend(ExecutionEdge(shuffle_id, s) for s in sinks)
            inserted += 1
    edges = [e for e in graph.edges if (e.src, e.dst) not in removed] + added
    return Graph(tuple(vertices), _dedup(edges)), inserted


def chain_transforms(graph: Graph, dag: LogicalDag, enabled: bool = True) -> tuple[Graph, int]:
    """Flink's rule: a transform joins its upstream transform's chain when the
    upstream has exactly one downstream, it has exactly one input, both have
    the same parallelism and both are chainable.

    Merging never changes the in- and out-degree of what remains (a chain has
    its head's inputs and its tail's outputs), so the rule holds for an edge
    before any merge exactly when it holds after all of them: the chains are
    the paths of chainable edges, found in one pass.
    """
    if not enabled:
        return graph, 0
    chainable = {v.id: v.chainable for v in dag.vertices}

    def joins(up: ExecutionVertex, down: ExecutionVertex) -> bool:
        return (
            up.kind == down.kind == "transform_chain"
            and len(graph.downstream(up.id)) == 1
            and len(graph.upstream(down.id)) == 1
            and up.parallelism == down.parallelism
            and all(chainable[m] for m in up.members + down.members)
        )

    nxt = {e.src: e.dst for e in graph.edges if joins(graph.vertex(e.src), graph.vertex(e.dst))}
    chained_to = set(nxt.values())
    heads = [v for v in graph.vertices if v.id in nxt and v.id not in chained_to]
    rename: dict[str, str] = {}
    merged_at: dict[str, ExecutionVertex] = {}
    inner: set[tuple[str, str]] = set()
    for head in heads:
        chain = [head]
        while chain[-1].id in nxt:
            down = graph.vertex(nxt[chain[-1].id])
            inner.add((chain[-1].id, down.id))
            chain.append(down)
        members = tuple(m for v in chain for m in v.members)
        new = ExecutionVertex(_chain_name(members), "transform_chain", members, head.parallelism, chain[-1].schema, head.order)
        merged_at[head.id] = new
        rename.update((v.id, new.id) for v in chain)
    if not inner:
        return graph, 0
    vertices = [merged_at.get(v.id, v) for v in graph.vertices if v.id not in rename or v.id in merged_at]
    edges = [
        ExecutionEdge(rename.get(e.src, e.src), rename.get(e.dst, e.dst))
        for e in graph.edges
        if (e.src, e.dst) not in inner
    ]
    return Graph(tuple(vertices), _dedup(edges)), len(inner)


def split_pipelines(graph: Graph, dag: LogicalDag) -> tuple[Pipeline, ...]:
    """Unrelated connected parts become pipeline-1, pipeline-2, ... in file order."""
    uid = {v.id: v.uid for v in dag.vertices}
    pipelines = []
    comps = sorted(_components(graph), key=lambda c: min(v.order for v in c))
    part = {v.id: i for i, comp in enumerate(comps) for v in comp}
    edges_of: list[list[ExecutionEdge]] = [[] for _ in comps]
    for e in graph.edges:
        edges_of[part[e.src]].append(e)
    for i, comp in enumerate(comps, start=1):
        verts = tuple(sorted(comp, key=lambda v: (v.order, _kind_rank(v.kind))))
        edges = tuple(edges_of[i - 1])
        key = "+".join(sorted(uid[v.members[0]] for v in verts if v.kind == "source"))
        pipelines.append(Pipeline(f"pipeline-{i}", key, verts, edges))
    return tuple(pipelines)


def check_names(plan: ExecutionPlan) -> None:
    seen: set[str] = set()
    for p in plan.pipelines:
        for v in p.vertices:
            name = p.full_name(v.id)
            if name in seen:
                raise PlanError("PLAN.DUPLICATE_VERTEX", {"name": name})
            seen.add(name)
    keys = [p.key for p in plan.pipelines]
    if len(set(keys)) != len(keys):
        raise PlanError("PLAN.DUPLICATE_VERTEX", {"name": f"pipeline key in {keys}"})


# ---------------------------------------------------------------------------
# helpers


def _chain_name(members: tuple[str, ...]) -> str:
    return f"TransformChain[{'->'.join(members)}]"


def _kind_rank(kind: str) -> int:
    return {"source": 0, "transform_chain": 1, "shuffle": 2, "sink": 3}[kind]


def _dedup(edges) -> tuple[ExecutionEdge, ...]:
    seen: dict[tuple[str, str], ExecutionEdge] = {}
    for e in edges:
        seen.setdefault((e.src, e.dst), e)
    return tuple(seen.values())


def _components(graph: Graph) -> list[list[ExecutionVertex]]:
    adj: dict[str, set[str]] = {v.id: set() for v in graph.vertices}
    for e in graph.edges:
        adj[e.src].add(e.dst)
        adj[e.dst].add(e.src)
    seen: set[str] = set()
    out = []
    for v in graph.vertices:
        if v.id in seen:
            continue
        comp, frontier = [], [v.id]
        while frontier:
            x = frontier.pop()
            if x in seen:
                continue
            seen.add(x)
            comp.append(graph.vertex(x))
            frontier.extend(adj[x])
        out.append(comp)
    return out
