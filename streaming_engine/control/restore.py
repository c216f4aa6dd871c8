"""The plan diff before a restore from a savepoint.

A restored job continues from its pipelines' Spark checkpoints: each source's
offsets and every sink's transaction ids. Spark allows some changes of a query
between two runs of one checkpoint and not others (Structured Streaming
guide, "Recovery Semantics after Changes in a Streaming Query"); this module
classifies every difference between the savepoint's plans and the new job's:

- **allowed**, and reported: transforms added, removed or changed (filters,
  projections), sink options, sinks added or removed, columns added or removed
  at a sink (the sink takes them or says so when the epoch runs), a source's
  tunable options (``Source.restore_tunable``: rate limits), a new pipeline (it
  starts from its beginning);
- **refused**, with the reason and what to do instead: another source plugin
  or a source gone from a pipeline that remains, a changed source identity
  (``Source.restore_identity``: topics, paths, brokers), a changed table set of
  a source, a changed key, ordering or write mode of a sink
  (``Sink.restore_refusals``).

Vertices are matched by their stable ``uid`` (from the configured names), as
the checkpoint paths and transaction ids are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streaming_engine.plugins.registry import REGISTRIES


@dataclass
class PlanDiff:
    allowed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return {"allowed": self.allowed, "refused": self.refused}


def _by_uid(plans: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {v["uid"]: v for v in plans["logical"]["vertices"] if v["kind"] == kind}


def _tables(v: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["table"]: t for t in v["schema"]}


def _pipelines(plans: dict[str, Any]) -> dict[str, set[str]]:
    """pipeline key -> the ids of its source vertices."""
    out = {}
    for p in plans["execution"]["pipelines"]:
        out[p["key"]] = {v["id"] for v in p["vertices"] if v["kind"] == "source"}
    return out


def diff(old: dict[str, Any], new: dict[str, Any]) -> PlanDiff:
    """``old``: the savepoint's plans, ``new``: the restored job's (both as
    :func:`plan.render.to_dict` gives them)."""
    d = PlanDiff()
    _sources(old, new, d)
    _transforms(old, new, d)
    _sinks(old, new, d)
    return d


def _sources(old: dict[str, Any], new: dict[str, Any], d: PlanDiff) -> None:
    before, after = _by_uid(old, "source"), _by_uid(new, "source")
    old_pipelines, new_pipelines = _pipelines(old), _pipelines(new)
    for uid, o in before.items():
        n = after.get(uid)
        if n is None:
            if any(o["id"] in ids for ids in old_pipelines.values()) and _kept_pipeline(old, uid, new_pipelines):
                d.refused.append(f"source {uid!r} ({o['plugin']}) is gone from a pipeline that remains: its "
                                 "checkpoint holds that source's offsets; restore with the source, or run the "
                                 "changed job under a new job name (new checkpoints, new targets' transaction ids)")
            else:
                d.allowed.append(f"source {uid!r} ({o['plugin']}) removed with its pipeline (its checkpoint stays)")
            continue
        if n["plugin"] != o["plugin"]:
            d.refused.append(f"source {uid!r} is another source now ({o['plugin']} -> {n['plugin']}): the checkpoint's "
                             "offsets belong to the old one; run the new source under a new job name")
            continue
        cls = REGISTRIES["source"].find(n["plugin"])
        identity = getattr(cls, "restore_identity", None)
        tunable = getattr(cls, "restore_tunable", frozenset())
        per_table = getattr(cls, "restore_table_option", None)
        keys = sorted((set(o["options"]) | set(n["options"])) - {per_table})
        for k in keys:
            a, b = o["options"].get(k), n["options"].get(k)
            if a == b:
                continue
            fixed = k in identity if identity is not None else k not in tunable
            if fixed:
                d.refused.append(f"source {uid!r}: option {k!r} changed from {a!r} to {b!r}: that is what the source "
                                 "reads, and its offsets in the checkpoint mean nothing for another; restore with the "
                                 "old value, or run the changed job under a new job name")
            else:
                d.allowed.append(f"source {uid!r}: option {k!r} changed from {a!r} to {b!r}")
        if cls is not None:
            allowed, refused = cls.restore_tables(o, n)
            d.allowed += [f"source {uid!r}: {a}" for a in allowed]
            d.refused += [f"source {uid!r}: {r}" for r in refused]
    for uid, n in after.items():
        if uid not in before:
            key = next((k for k, ids in new_pipelines.items() if n["id"] in ids), None)
            if key in old_pipelines:
                d.refused.append(f"source {uid!r} ({n['plugin']}) is new in pipeline {key!r}, whose checkpoint holds "
                                 "other sources' offsets; give it a pipeline of its own or a new job name")
            else:
                d.allowed.append(f"source {uid!r} ({n['plugin']}) is new: its pipeline starts from its beginning")


def _kept_pipeline(old: dict[str, Any], uid: str, new_pipelines: dict[str, set[str]]) -> bool:
    src = next(v for v in old["logical"]["vertices"] if v["uid"] == uid)
    key = next((k for k, ids in _pipelines(old).items() if src["id"] in ids), None)
    return key in new_pipelines


def _transforms(old: dict[str, Any], new: dict[str, Any], d: PlanDiff) -> None:
    before, after = _by_uid(old, "transform"), _by_uid(new, "transform")
    for uid in sorted(set(before) | set(after)):
        o, n = before.get(uid), after.get(uid)
        if o is None:
            d.allowed.append(f"transform {uid!r} ({n['plugin']}) added")  # type: ignore[index]
        elif n is None:
            d.allowed.append(f"transform {uid!r} ({o['plugin']}) removed")
        elif o["plugin"] != n["plugin"] or o["options"] != n["options"]:
            d.allowed.append(f"transform {uid!r} changed ({o['plugin']} -> {n['plugin']}, options differ)"
                             if o["plugin"] != n["plugin"] else f"transform {uid!r} ({n['plugin']}): options changed")


def _sinks(old: dict[str, Any], new: dict[str, Any], d: PlanDiff) -> None:
    before, after = _by_uid(old, "sink"), _by_uid(new, "sink")
    for uid in sorted(set(before) | set(after)):
        o, n = before.get(uid), after.get(uid)
        if o is None:
            d.allowed.append(f"sink {uid!r} ({n['plugin']}) added: it receives the epochs from the restore on")  # type: ignore[index]
            continue
        if n is None:
            d.allowed.append(f"sink {uid!r} ({o['plugin']}) removed")
            continue
        if o["plugin"] != n["plugin"]:
            d.refused.append(f"sink {uid!r} is another sink now ({o['plugin']} -> {n['plugin']}); give the new sink "
                             "another name (a new uid) if that is meant")
            continue
        cls = REGISTRIES["sink"].find(n["plugin"])
        for why in cls.restore_refusals(o, n) if cls is not None else []:
            d.refused.append(f"sink {uid!r}: {why}: the rows its targets hold were written by the old rule; write the "
                             "changed rule to new targets (a new path or job name)")
        for k in sorted(set(o["options"]) | set(n["options"])):
            if o["options"].get(k) != n["options"].get(k) and k not in getattr(cls, "restore_fixed", ()):
                d.allowed.append(f"sink {uid!r}: option {k!r} changed from {o['options'].get(k)!r} to "
                                 f"{n['options'].get(k)!r}")
        ot, nt = _tables(o), _tables(n)
        for t in sorted(set(ot) & set(nt)):
            oc = [c["name"] for c in ot[t]["columns"]]
            nc = [c["name"] for c in nt[t]["columns"]]
            if oc != nc:
                d.allowed.append(f"sink {uid!r} table {t!r}: columns {oc} -> {nc} (the target must take them: "
                                 "the epoch says so if it cannot)")
        for t in sorted(set(nt) - set(ot)):
            d.allowed.append(f"sink {uid!r}: table {t!r} added")
        for t in sorted(set(ot) - set(nt)):
            d.allowed.append(f"sink {uid!r}: table {t!r} no longer written")
