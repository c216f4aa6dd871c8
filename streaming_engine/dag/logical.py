"""The logical DAG: one vertex per plugin block, one edge per dataset read.

Plain frozen data. Vertex ids (``Copy#2``) are the plugin name and the block's
1-based position in the file, for messages; ``uid`` is the stable identity
(from configured names) that checkpoint paths, transaction ids and metric
labels derive from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from streaming_engine.config.models import EnvConfig
from streaming_engine.errors import Location, Problem
from streaming_engine.plugins.base import Plugin, PluginKind
from streaming_engine.schema import Dataset


@dataclass(frozen=True)
class LogicalVertex:
    id: str
    kind: PluginKind
    plugin_name: str
    uid: str
    location: Location
    inputs: tuple[str, ...]  # dataset names this vertex reads
    output: str | None  # dataset name it produces (None for sinks)
    parallelism: int
    plugin: Plugin = field(compare=False, repr=False)
    # sources/transforms: the produced dataset; sinks: the dataset they receive
    schema: Dataset = field(default_factory=Dataset, compare=False)

    @property
    def chainable(self) -> bool:
        return self.kind == "transform" and bool(getattr(self.plugin, "chainable", False))

    @property
    def execution(self) -> str | None:
        return getattr(self.plugin, "execution", None) if self.kind == "transform" else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "plugin": self.plugin_name,
            "uid": self.uid,
            "inputs": list(self.inputs),
            "output": self.output,
            "parallelism": self.parallelism,
            "options": self.plugin.options.public_dict(),
            "schema": self.schema.to_dict(),
            "location": self.location.to_dict(),
        }
        if self.kind == "transform":
            d["execution"] = self.execution
            d["chainable"] = self.chainable
        return d


@dataclass(frozen=True)
class LogicalEdge:
    src: str
    dst: str
    dataset: str

    def to_dict(self) -> dict[str, str]:
        return {"from": self.src, "to": self.dst, "dataset": self.dataset}


@dataclass(frozen=True)
class LogicalDag:
    job_name: str
    env: EnvConfig
    vertices: tuple[LogicalVertex, ...]
    edges: tuple[LogicalEdge, ...]
    warnings: tuple[Problem, ...] = ()

    @cached_property
    def _index(self) -> tuple[dict[str, LogicalVertex], dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
        """Vertices by id, upstream and downstream ids: built once, so lookups are O(1)."""
        up: dict[str, list[str]] = {}
        down: dict[str, list[str]] = {}
        for e in self.edges:
            up.setdefault(e.dst, []).append(e.src)
            down.setdefault(e.src, []).append(e.dst)
        as_tuples = lambda d: {k: tuple(v) for k, v in d.items()}  # noqa: E731
        return {v.id: v for v in self.vertices}, as_tuples(up), as_tuples(down)

    def vertex(self, vid: str) -> LogicalVertex:
        return self._index[0][vid]

    def upstream(self, vid: str) -> tuple[str, ...]:
        return self._index[1].get(vid, ())

    def downstream(self, vid: str) -> tuple[str, ...]:
        return self._index[2].get(vid, ())

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job_name,
            "mode": self.env.job_mode,
            "vertices": [v.to_dict() for v in self.vertices],
            "edges": [e.to_dict() for e in self.edges],
            "warnings": [w.to_dict() for w in self.warnings],
        }
