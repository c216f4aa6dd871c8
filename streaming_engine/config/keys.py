"""Option keys as users write them: dotted keys, closest-match hints."""

from __future__ import annotations

import difflib
from typing import Any


def flatten_options(raw: dict[str, Any], known: set[str], prefix: str = "", items: bool = True) -> dict[str, Any]:
    """Undo HOCON's nesting of dotted keys, guided by the known option names.

    ``{"row": {"num": 5}}`` becomes ``{"row.num": 5}`` when ``row.num`` is a
    known key; an object under a known key (``schema { ... }``) stays nested,
    unless some of its keys spell longer known keys (``rows`` and
    ``rows.per.batch`` are both options: the dotted ones are pulled out).
    Lists of objects of the top level (``tables_configs``, ``table_transform``)
    are flattened item by item against the same names (``items``): inside an
    item only what spells longer option names (``row.num``) is flattened; any
    other value (a FakeSource row's ``fields`` object, a map value) is left as
    written.
    Unknown nested keys come out dotted, so "unknown option" messages name them
    as the user wrote them.
    """
    out: dict[str, Any] = {}
    for key, value in raw.items():
        full = f"{prefix}{key}"
        longer = [k for k in known if k.startswith(full + ".")]
        # inside a list item (items=False) an object is data unless it spells longer option names
        if isinstance(value, dict) and value and (longer or (full not in known and items)):
            if full in known:
                inner = {k: v for k, v in value.items() if any(x == f"{full}.{k}" or x.startswith(f"{full}.{k}.") for x in longer)}
                rest = {k: v for k, v in value.items() if k not in inner}
                out.update(flatten_options(inner, known, full + ".", items))
                if rest:
                    out[full] = rest
            else:
                out.update(flatten_options(value, known, full + ".", items))
        elif items and isinstance(value, list):
            out[full] = [flatten_options(v, known, items=False) if isinstance(v, dict) else v for v in value]
        else:
            out[full] = value
    return out


def dotted_map(value: Any, prefix: str = "") -> dict[str, str]:
    """A pass-through settings map (``kafka.config``) as flat dotted keys with
    text values: ``{request: {timeout: {ms: 1}}}`` (HOCON's reading of
    ``request.timeout.ms = 1``) -> ``{"request.timeout.ms": "1"}``; booleans
    as ``true``/``false``, lists comma-joined."""
    out: dict[str, str] = {}
    for k, v in (value or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(dotted_map(v, key + "."))
        elif isinstance(v, bool):
            out[key] = str(v).lower()
        elif isinstance(v, (list, tuple)):
            out[key] = ",".join(str(x) for x in v)
        else:
            out[key] = str(v)
    return out


def did_you_mean(key: str, known: set[str]) -> str:
    low = {k.lower(): k for k in known}
    if key.lower() in low:
        close = [low[key.lower()]]
    else:
        close = difflib.get_close_matches(key, sorted(known), n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
