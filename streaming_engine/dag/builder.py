"""RawJob -> validated LogicalDag, reporting every problem of the file at once.

Steps, each adding problems rather than stopping:
1. env and plugin options (unknown plugins, unknown/invalid options);
2. wiring: output names (duplicates), input names (dangling, ambiguous defaults);
3. graph checks: cycles, sinks no source reaches, sources nobody reads;
4. schema propagation in topological order, so a transform naming a missing
   column or a sink fed an incompatible table fails before Spark starts.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass
from typing import Mapping

from streaming_engine.config.loader import RawBlock, RawJob, clipped, config_error
from streaming_engine.config.models import did_you_mean, parse_env, validate_block, wiring_of
from streaming_engine.dag.logical import LogicalDag, LogicalEdge, LogicalVertex
from streaming_engine.errors import EngineError, Location, Problem, SchemaError
from streaming_engine.plugins.base import Plugin
from streaming_engine.schema import Dataset


@dataclass
class _Node:
    block: RawBlock
    id: str
    plugin: Plugin | None
    inputs: list[str]
    explicit_inputs: bool
    output: str | None  # configured output name
    dataset: str | None  # dataset name produced (configured or implicit)


def build_dag(raw: RawJob, strict: bool = False, planned: Mapping[str, Dataset] | None = None) -> LogicalDag:
    problems: list[Problem] = list(raw.warnings)
    env, env_problems = parse_env(raw.env, raw.file, strict)
    problems += env_problems

    nodes = _nodes(raw, strict, problems)
    for section in ("source", "sink"):
        if not any(n.block.section == section for n in nodes):
            problems.append(Problem("CONFIG.EMPTY_JOB", {"section": section}, _file_loc(raw, section)))

    producers = _check_outputs(nodes, problems)
    _resolve_inputs(nodes, producers, problems)
    edges = [
        LogicalEdge(producers[name].id, n.id, name) for n in nodes for name in n.inputs if name in producers
    ]
    by_id = {n.id: n for n in nodes}
    cyclic = _check_cycles(nodes, edges, problems)
    _check_reachability(nodes, edges, cyclic, problems)

    schemas = _propagate_schemas(nodes, edges, by_id, problems, planned or {})

    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise config_error(errors + [p for p in problems if p.severity == "warning"])

    uids = _stable_uids(nodes)
    vertices = tuple(
        LogicalVertex(
            id=n.id,
            kind=n.block.section,  # type: ignore[arg-type]
            plugin_name=n.plugin.name,  # type: ignore[union-attr]
            uid=uids[n.id],
            location=n.block.location,
            inputs=tuple(n.inputs),
            output=n.dataset if n.block.section != "sink" else None,
            parallelism=n.plugin.options.parallelism or env.parallelism,  # type: ignore[union-attr]
            plugin=n.plugin,  # type: ignore[arg-type]
            schema=schemas[n.id],
        )
        for n in nodes
    )
    job_name = env.job_name or "job"
    return LogicalDag(job_name, env, vertices, tuple(edges), tuple(clipped(p) for p in problems))


def _file_loc(raw: RawJob, section: str) -> Location:
    return Location(raw.file, section)


def _nodes(raw: RawJob, strict: bool, problems: list[Problem]) -> list[_Node]:
    nodes = []
    for number, block in enumerate(raw.blocks, start=1):
        plugin, block_problems = validate_block(block, strict)
        problems += block_problems
        inputs, output = wiring_of(block)
        name = plugin.name if plugin else block.plugin
        vid = f"{name}#{number}"
        if block.section == "source" and inputs:
            inputs = None  # sources read no dataset; plugin options already flag the key
        dataset = output or (vid if block.section != "sink" else None)
        nodes.append(_Node(block, vid, plugin, list(inputs or []), bool(inputs), output, dataset))
    return nodes


def _check_outputs(nodes: list[_Node], problems: list[Problem]) -> dict[str, _Node]:
    producers: dict[str, _Node] = {}
    for n in nodes:
        if n.dataset is None:
            continue
        if n.dataset in producers:
            problems.append(
                Problem(
                    "CONFIG.DUPLICATE_OUTPUT",
                    {"output": n.dataset, "other": producers[n.dataset].id},
                    n.block.location.with_key("plugin_output"),
                )
            )
            continue
        producers[n.dataset] = n
    return producers


def _resolve_inputs(nodes: list[_Node], producers: dict[str, _Node], problems: list[Problem]) -> None:
    """Explicit names must exist; a missing name reads the single upstream dataset."""
    consumed_by_transforms: set[str] = set()
    unread: dict[str, None] = {}  # produced so far (in order) and not read by a transform
    names = set(producers)
    sink_candidates: list[str] | None = None  # the same for every sink: computed once

    def produced(n: _Node) -> None:
        if n.dataset in producers and producers[n.dataset] is n and n.dataset not in consumed_by_transforms:
            unread[n.dataset] = None

    for n in nodes:
        sec = n.block.section
        loc = n.block.location.with_key("plugin_input")
        if sec == "source":
            produced(n)
            continue
        if n.explicit_inputs:
            for name in n.inputs:
                if name not in names:
                    problems.append(
                        Problem("CONFIG.DANGLING_INPUT", {"input": name, "hint": did_you_mean(name, names)}, loc)
                    )
        else:
            if sec == "transform":
                candidates = list(unread)
            else:
                if sink_candidates is None:  # sinks come after every transform
                    sink_candidates = [
                        d for d in producers if producers[d].block.section != "sink" and d not in consumed_by_transforms
                    ]
                candidates = sink_candidates
            if len(candidates) == 1:
                n.inputs = list(candidates)
            elif not candidates:
                problems.append(Problem("CONFIG.NO_INPUT", {}, loc))
            else:
                problems.append(
                    Problem("CONFIG.AMBIGUOUS_INPUT", {"count": len(candidates), "candidates": _some(candidates)}, loc)
                )
        max_inputs = getattr(n.plugin, "max_inputs", None) if sec == "transform" else None
        if max_inputs is not None and len(n.inputs) > max_inputs:
            problems.append(
                Problem("CONFIG.TOO_MANY_INPUTS", {"count": len(n.inputs), "inputs": ", ".join(n.inputs)}, loc)
            )
        if sec == "transform":
            consumed_by_transforms.update(n.inputs)
            for name in n.inputs:
                unread.pop(name, None)
            produced(n)


def _some(names: list[str], shown: int = 10) -> str:
    """A list for a message: the first names, then how many more (messages stay short)."""
    more = f", ... ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _check_cycles(nodes: list[_Node], edges: list[LogicalEdge], problems: list[Problem]) -> set[str]:
    """Report each cycle once, as ``A#1 -> B#2 -> A#1``; return the ids on cycles."""
    succ: dict[str, list[str]] = {n.id: [] for n in nodes}
    for e in edges:
        succ[e.src].append(e.dst)
    order = {n.id: i for i, n in enumerate(nodes)}
    color: dict[str, int] = {}
    on_cycle: set[str] = set()
    seen_cycles: set[frozenset[str]] = set()
    by_id = {n.id: n for n in nodes}

    def visit(start: str) -> None:
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = [start]
        color[start] = 1
        while stack:
            vid, i = stack[-1]
            nxt = succ[vid]
            if i < len(nxt):
                stack[-1] = (vid, i + 1)
                w = nxt[i]
                if color.get(w, 0) == 0:
                    color[w] = 1
                    stack.append((w, 0))
                    path.append(w)
                elif color[w] == 1:
                    cycle = path[path.index(w) :]
                    key = frozenset(cycle)
                    on_cycle.update(cycle)
                    if key not in seen_cycles:
                        seen_cycles.add(key)
                        first = min(cycle, key=order.__getitem__)
                        k = cycle.index(first)
                        ring = cycle[k:] + cycle[:k] + [first]
                        problems.append(
                            Problem("CONFIG.CYCLE", {"cycle": " -> ".join(ring)}, by_id[first].block.location)
                        )
            else:
                color[vid] = 2
                stack.pop()
                path.pop()

    for n in nodes:
        if color.get(n.id, 0) == 0:
            visit(n.id)
    return on_cycle


def _check_reachability(
    nodes: list[_Node], edges: list[LogicalEdge], cyclic: set[str], problems: list[Problem]
) -> None:
    succ: dict[str, list[str]] = {n.id: [] for n in nodes}
    for e in edges:
        succ[e.src].append(e.dst)
    reached: set[str] = set()
    frontier = [n.id for n in nodes if n.block.section == "source"]
    while frontier:
        vid = frontier.pop()
        if vid in reached:
            continue
        reached.add(vid)
        frontier.extend(succ[vid])
    on_cycle_paths = _downstream_of(cyclic, succ)
    for n in nodes:
        sec = n.block.section
        if sec == "sink" and n.inputs and (n.id not in reached or n.id in on_cycle_paths):
            problems.append(
                Problem("CONFIG.UNREACHABLE_SINK", {"input": ", ".join(n.inputs)}, n.block.location)
            )
        if sec == "source" and not succ[n.id] and n.plugin is not None:
            problems.append(
                Problem("CONFIG.UNREAD_SOURCE", {"output": n.dataset}, n.block.location, severity="warning")
            )


def _downstream_of(targets: set[str], succ: dict[str, list[str]]) -> set[str]:
    """The targets and every vertex that depends on one of them."""
    seen: set[str] = set()
    frontier = list(targets)
    while frontier:
        v = frontier.pop()
        if v not in seen:
            seen.add(v)
            frontier.extend(succ.get(v, ()))
    return seen


def _topological(nodes: list[_Node], edges: list[LogicalEdge]) -> list[str]:
    indeg = Counter(e.dst for e in edges)
    succ: dict[str, list[str]] = {n.id: [] for n in nodes}
    for e in edges:
        succ[e.src].append(e.dst)
    ready = deque(n.id for n in nodes if indeg[n.id] == 0)
    out = []
    while ready:
        vid = ready.popleft()
        out.append(vid)
        for w in succ[vid]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return out  # vertices on cycles are left out


def _propagate_schemas(
    nodes: list[_Node], edges: list[LogicalEdge], by_id: dict[str, _Node], problems: list[Problem],
    planned: Mapping[str, Dataset],
) -> dict[str, Dataset]:
    """``planned``: a source's dataset when the running job was planned before
    (by vertex id; a job planned again for a schema change, ``Source.output_after``)."""
    schemas: dict[str, Dataset | None] = {}
    inputs_of: dict[str, list[str]] = {n.id: [] for n in nodes}
    for e in edges:
        inputs_of[e.dst].append(e.src)
    for vid in _topological(nodes, edges):
        n = by_id[vid]
        upstream = [schemas.get(u) for u in inputs_of[vid]]
        if n.plugin is None or any(u is None for u in upstream) or len(upstream) != len(n.inputs):
            schemas[vid] = None  # its own problem was reported; skip dependants quietly
            continue
        try:
            if n.block.section == "source":
                before = planned.get(vid)
                schemas[vid] = n.plugin.output() if before is None else n.plugin.output_after(before)  # type: ignore[attr-defined]
            elif n.block.section == "transform":
                _check_marks(n, upstream)  # type: ignore[arg-type]
                schemas[vid] = n.plugin.output(upstream)  # type: ignore[attr-defined]
                _warn_unmatched_tables(n, upstream, problems)  # type: ignore[arg-type]
            else:
                merged = Dataset(tuple(t for d in upstream for t in d.tables))  # type: ignore[union-attr]
                _check_marks(n, [merged])
                n.plugin.check_input(merged)  # type: ignore[attr-defined]
                schemas[vid] = merged
        except EngineError as e:
            problems.append(Problem(e.condition, e.params, n.block.location.with_key(_key_of(e))))
            schemas[vid] = None
        except Exception as e:  # a plugin bug must still not become a traceback
            problems.append(
                Problem("SCHEMA.INVALID", {"detail": f"{type(e).__name__}: {e}"}, n.block.location)
            )
            schemas[vid] = None
    return {k: v or Dataset() for k, v in schemas.items()}


def _warn_unmatched_tables(n: _Node, inputs: list[Dataset], problems: list[Problem]) -> None:
    """A warning for each ``table_transform`` entry (and a ``table_match_regex``) that selects no input table.

    SeaTunnel ignores them silently; a table path differing only by case from an
    input table (after a TableRename with convert_case, say) is the usual cause.
    """
    options = n.plugin.options  # type: ignore[union-attr]
    ids = [t.table_id for d in inputs for t in d.tables]
    if not ids:
        return
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    unmatched: list[tuple[str, str, str]] = []  # (key, option, value)
    entries = getattr(options, "table_transform", None) or ()
    for i, entry in enumerate(entries, 1):
        if entry.get("table_path") not in ids:
            unmatched.append((f"table_transform[{i}].table_path", "table_path", entry.get("table_path")))
    regex = getattr(options, "table_match_regex", None)
    if regex not in (None, ".*") and not entries and not any(re.fullmatch(regex, i) for i in ids):
        unmatched.append(("table_match_regex", "table_match_regex", regex))
    for key, option, value in unmatched:
        same = [i for i in ids if i.lower() == str(value).lower()]
        hint = f"; table names are case-sensitive: did you mean {same[0]!r}?" if same else ""
        problems.append(Problem("CONFIG.UNMATCHED_TABLE", {"what": f"{option} {value!r}", "tables": shown, "hint": hint},
                                n.block.location.with_key(key), "warning"))


def _check_marks(n: _Node, inputs: list[Dataset]) -> None:
    """TRUNCATE control rows reach only transforms and sinks that declare they handle them; changes that hold
    only by key (``TableSchema.by_key``) reach only sinks that upsert by key, through no transform."""
    table = next((t for d in inputs for t in d.tables if t.truncates), None)
    if table is not None:
        if n.block.section == "transform" and not type(n.plugin).passes_truncates:
            hint = ("let the source's sink read it directly (no transform on the way), or set the source's "
                    "truncate_events = reject or ignore")
            raise SchemaError("SCHEMA.TRUNCATES", {"table": table.table_id, "kind": "transform", "verb": "pass on",
                                                   "hint": hint})
        if n.block.section == "sink" and not n.plugin.applies_truncates():  # type: ignore[union-attr]
            hint = ("write it with a sink that applies them (Delta with save_mode = upsert and no sequence_column), "
                    "or set the source's truncate_events = reject or ignore")
            raise SchemaError("SCHEMA.TRUNCATES", {"table": table.table_id, "kind": "sink", "verb": "apply",
                                                   "hint": hint})
    table = next((t for d in inputs for t in d.tables if t.by_key), None)
    if table is None:
        return
    where = "transform" if n.block.section == "transform" else "sink"
    if where == "transform" or not n.plugin.applies_by_key():  # type: ignore[union-attr]
        raise SchemaError("SCHEMA.BY_KEY", {"table": table.table_id, "kind": where, "hint": (
            "write it with a sink that upserts by key (Delta with save_mode = upsert, stored_as_scd_type = 1), read "
            "directly from the source" if where == "transform" else
            "write it with Delta's save_mode = upsert (stored_as_scd_type = 1)")})


def _key_of(e: EngineError) -> str | None:
    key = e.params.get("key") if isinstance(e.params, dict) else None
    return str(key) if key else None


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "x"


def _stable_uids(nodes: list[_Node]) -> dict[str, str]:
    """Identities from configured names, not positions where avoidable.

    Sources and transforms: their plugin_output, else the plugin name. Sinks:
    plugin name and the datasets they read. Collisions get ``-2``, ``-3``...
    in declaration order.
    """
    base: dict[str, str] = {}
    for n in nodes:
        pname = (n.plugin.name if n.plugin else n.block.plugin).lower()
        if n.block.section == "sink":
            base[n.id] = _slug(f"{pname}.{'+'.join(n.inputs)}")
        else:
            base[n.id] = _slug(n.output or pname)
    counts: Counter[str] = Counter()
    out = {}
    for n in nodes:
        b = base[n.id]
        counts[b] += 1
        out[n.id] = b if counts[b] == 1 else f"{b}-{counts[b]}"
    return out

