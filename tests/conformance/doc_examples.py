"""Read the examples of SeaTunnel's pages (docs/seatunnel/, verbatim) for the
conformance specs: the config blocks of a page, in order, and its data tables
(the Markdown tables that are not option tables), as the page writes them.

A spec (tests/conformance/examples/*.yaml, one file per page) names examples
by their position on the page, so the configs and the expected rows are the
page's own text: when a page changes, its spec notices."""

from __future__ import annotations

import re
from pathlib import Path

from streaming_engine.compat import DOCS, _HEADER_NAMES

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_PLUGIN_BLOCK = re.compile(r"^\s*(source|transform|sink|env)\s*\{|^\s*[A-Z][A-Za-z-]+\s*\{", re.M)


def config_blocks(page: str) -> list[str]:
    """The page's fenced code blocks that hold job config (sections or plugin blocks)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [b for b in _FENCE.findall(text) if _PLUGIN_BLOCK.search(b)]


def data_tables(page: str) -> list[list[dict[str, str]]]:
    """The page's Markdown tables that are data (input and output examples), in
    order, as rows of header -> cell text. Option tables are left out."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    text = (DOCS / page).read_text(encoding="utf-8")
    text = _FENCE.sub("", text)  # tables inside code blocks are not the page's tables
    for line in text.splitlines():
        if line.strip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if current is None:
                current = []
                tables.append(current)
            if not all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                current.append(cells)
        else:
            current = None
    out = []
    for t in tables:
        if not t:
            continue
        header, *rows = t
        low = [h.lower() for h in header]
        if low and low[0] in _HEADER_NAMES and {"type", "required", "default", "default value"} & set(low[1:]):
            continue
        out.append([dict(zip(header, r)) for r in rows])
    return out


def page_path(page: str) -> Path:
    return DOCS / page
