"""Which MERGE made each commit of a Delta table: the engine's one-job MERGE
(``checkpoint/delta_merge.py``) or Delta's own (the per-table path).

The one-job MERGE records its conditions as written (``s.__kind = '-D' ...``);
Delta's MERGE prints its condition expressions in parentheses."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


def merge_paths(table: Path) -> Counter:
    """{"one job": n, "delta": m}: the MERGE commits of the table at ``table``, by who made them."""
    seen: Counter = Counter()
    for f in sorted((table / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            info = json.loads(line).get("commitInfo") if '"commitInfo"' in line else None
            if info and info.get("operation") == "MERGE":
                matched = json.loads(info["operationParameters"]["matchedPredicates"])
                seen["one job" if str(matched[0].get("predicate", "")).startswith("s.__kind") else "delta"] += 1
    return seen
