"""SeaTunnel compatibility: what each documented option of the plugins we ship is here.

A plugin names its SeaTunnel page (``Plugin.seatunnel_page``, relative to
``docs/seatunnel/``, verbatim copies of SeaTunnel's docs); the option tables of
that page, of the common-options page of its kind and, for transforms with
``table_transform``, of the multi-table page are its contract. Each documented
option is one of

- ``supported``: a key of the plugin's options model (at any depth: Assert's
  ``rules.field_rules.field_name`` is ``field_name`` of a ``field_rules`` item);
- ``refused``: declared with :func:`streaming_engine.plugins.base.refused` and a
  reason: accepted by name, refused at plan time when set;
- ``erratum``: the page lists it by mistake (``Plugin.seatunnel_errata`` says
  what SeaTunnel really does);
- ``missing``: none of these (the conformance tests fail on it).

``python -m streaming_engine.compat`` writes ``docs/seatunnel-compatibility.md``
from this (``--check``: exit 1 when the page is stale), so the page cannot drift
from the option models.
"""

from __future__ import annotations

import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from streaming_engine.plugins.base import Plugin, _alternatives, _is_model, option_keys_of_field, refusal
from streaming_engine.plugins.registry import REGISTRIES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "seatunnel"
PAGE = ROOT / "docs" / "seatunnel-compatibility.md"
COMMON = {
    "source": "connector-v2/source-common-options.md",
    "sink": "connector-v2/sink-common-options.md",
    "transform": "transform-v2/common-options.md",
}
MULTI_TABLE = "transform-v2/transform-multi-table.md"
_HEADER_NAMES = {"name", "option", "options", "param", "parameter", "parameters"}


def documented_options(page: str) -> list[str]:
    """The option names of a page: first cells of every Markdown table whose
    header starts with Name and has a Type, Required or Default column.
    Rows pointing at the common-options page are left out (read separately)."""
    names: list[str] = []
    in_options = False
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        if not line.lstrip().startswith("|"):
            in_options = False
            continue
        cells = [c.strip().strip("`").strip() for c in line.strip().strip("|").split("|")]
        low = [c.lower() for c in cells]
        if low and low[0] in _HEADER_NAMES and {"type", "required", "default"} & set(low[1:]):
            in_options = True
        elif in_options and cells and not re.fullmatch(r":?-+:?", cells[0] or "-"):
            name = cells[0]
            if name and not name.lower().startswith("common") and name not in names:
                names.append(name)
    return names


def documented_defaults(page: str) -> dict[str, str]:
    """Option name -> the text of its Default column, for the option tables
    of a page that have one (the first table naming an option wins)."""
    out: dict[str, str] = {}
    column = None
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        if not line.lstrip().startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # "string\|ConfigMap": one cell
        low = [c.lower().strip("`").strip() for c in cells]
        if low and low[0] in _HEADER_NAMES and {"type", "required", "default"} & set(low[1:]):
            column = next((i for i, c in enumerate(low) if c.startswith("default")), None)
        elif column is not None and cells and not re.fullmatch(r":?-+:?", cells[0] or "-") and column < len(cells):
            out.setdefault(cells[0].strip("`").strip(), cells[column].strip())
    return out


_NO_DEFAULT = {"", "-", "none", "null", "no"}


def page_default(text: str) -> Any:
    """A Default cell as a value: None when the page gives none ("-"); bools,
    numbers (hex too) and strings as written; anything else as its text."""
    t = text.strip().strip("`").strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        t = t[1:-1]
    if t.lower() in _NO_DEFAULT:
        return None
    if "\\" in t:  # "\n", '\001': the escapes the pages write for control characters
        import codecs

        try:
            t = codecs.decode(t, "unicode_escape")
        except UnicodeDecodeError:
            return t
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    for parse in (int, lambda x: int(x, 16), float, float.fromhex):
        try:
            return parse(t)
        except ValueError:
            continue
    return t


def _same_default(page: Any, ours: Any) -> bool:
    if isinstance(page, bool) or isinstance(ours, bool):
        return page is ours or (isinstance(ours, str) and str(page).lower() == ours.lower())
    if isinstance(page, (int, float)) and isinstance(ours, (int, float)):
        return float(page) == float(ours)
    if isinstance(ours, (int, float)) and isinstance(page, str):
        return False
    return str(page).lower() == str(ours).lower()


def default_mismatches(plugin: type[Plugin]) -> list[tuple[str, str, Any]]:
    """(option, the page's default, ours) for every supported option whose
    documented default differs from the options model's (refused options and
    options the page gives no default for are left out)."""
    from pydantic_core import PydanticUndefined

    out = []
    for row in status_of(plugin):
        if row.status != "supported":
            continue
        text = documented_defaults(row.page).get(row.name, "-")
        page = page_default(text)
        if page is None:
            continue
        field = _field_anywhere(plugin.Options, row.name.split("/")[0].strip())
        ours = field.default if field.default is not PydanticUndefined else None
        if ours is None and field.default_factory is not None:
            ours = field.default_factory()
        if not _same_default(page, ours):
            out.append((row.name, text, ours))
    return out


@dataclass(frozen=True)
class OptionStatus:
    name: str
    page: str
    status: str  # supported | refused | erratum (the page is wrong) | missing
    reason: str = ""


def contract(plugin: type[Plugin]) -> list[tuple[str, str]]:
    """(option, page) for every option the plugin's SeaTunnel pages document."""
    if plugin.seatunnel_page is None:
        return []
    pages = [plugin.seatunnel_page, COMMON[plugin.kind]]
    if plugin.kind == "transform" and "table_transform" in plugin.Options.model_fields:
        pages.append(MULTI_TABLE)
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for page in pages:
        for name in documented_options(page):
            if name not in seen:
                seen.add(name)
                out.append((name, page))
    return out


def status_of(plugin: type[Plugin]) -> list[OptionStatus]:
    out = []
    for name, page in contract(plugin):
        # "delimiter/field_delimiter": one option, two spellings
        found = [f for n in name.split("/") if (f := _field_anywhere(plugin.Options, n.strip())) is not None]
        field = found[0] if found else None
        if name in plugin.seatunnel_errata:
            out.append(OptionStatus(name, page, "erratum", plugin.seatunnel_errata[name]))
        elif field is None:
            out.append(OptionStatus(name, page, "missing"))
        elif (mark := refusal(field)) is not None:
            out.append(OptionStatus(name, page, "refused", mark.reason))
        else:
            out.append(OptionStatus(name, page, "supported"))
    return out


def _field(model: type[BaseModel], name: str) -> Any:
    """The pydantic field documented as ``name`` (dotted through nested
    option objects and list items), or None."""
    for fname, f in model.model_fields.items():
        if name in option_keys_of_field(fname, f):
            return f
    parts = name.split(".")
    for i in range(1, len(parts)):
        head, rest = ".".join(parts[:i]), ".".join(parts[i:])
        for fname, f in model.model_fields.items():
            if head not in option_keys_of_field(fname, f):
                continue
            if fname == "table_transform":  # an entry: table_path + the transform's own options
                return f if rest == "table_path" else _field(model, rest)
            for inner in _nested_models(f.annotation):
                if (found := _field(inner, rest)) is not None:
                    return found
    return None


def _field_anywhere(model: type[BaseModel], name: str) -> Any:
    """``name`` at the top or as a key of a nested option object (pages list
    JsonPath's ``src_field``, a key of each ``columns`` item, beside ``columns``)."""
    if (found := _field(model, name)) is not None:
        return found
    for f in model.model_fields.values():
        for inner in _nested_models(f.annotation):
            if (found := _field(inner, name)) is not None:
                return found
    return None


def extras(plugin: type[Plugin]) -> list[str]:
    """Top-level options of the plugin its SeaTunnel pages do not document."""
    documented = {n.strip() for name, _ in contract(plugin) for n in name.split("/")}
    tops = {d.split(".")[0] for d in documented}
    out = []
    for name, f in plugin.Options.model_fields.items():
        spelled = option_keys_of_field(name, f)
        if spelled & documented or (f.alias or name) in tops or name in ("plugin_input", "plugin_output", "parallelism"):
            continue
        out.append(f.alias or name)
    return sorted(out)


def _accepts(plugin: type[Plugin], name: str) -> str:
    field = _field_anywhere(plugin.Options, name)
    mark = refusal(field) if field is not None else None
    return f" ({', '.join(repr(a).lower() for a in mark.accepts)} accepted)" if mark and mark.accepts else ""


def _nested_models(tp: Any) -> list[type[BaseModel]]:
    out = []
    for t in _alternatives(tp):
        if _is_model(t):
            out.append(t)
        elif typing.get_origin(t) in (list, tuple, dict):
            args = typing.get_args(t)
            if args:
                out += _nested_models(args[-1] if typing.get_origin(t) is dict else args[0])
    return out


def shipped(kind: str) -> list[type[Plugin]]:
    """The built-in plugins of a kind (not third-party ones, nor test doubles)."""
    registry = REGISTRIES[kind]
    found = [registry.find(n) for n in registry.names()]
    return [c for c in found if c is not None and c.__module__.split(".")[0] in ("sources", "transforms", "sinks")]


def render() -> str:
    lines = [
        "# SeaTunnel compatibility",
        "",
        "Generated by `python -m streaming_engine.compat` from the plugins' option models and",
        "the SeaTunnel pages in `docs/seatunnel/` (do not edit by hand; a test checks it is current).",
        "",
        "Every option SeaTunnel documents for a plugin we ship is either supported with SeaTunnel's",
        "meaning and default, or refused at plan time with the reason below, never accepted and ignored.",
        "Options SeaTunnel does not document are warnings (\"did you mean\"), errors with `--strict`.",
        "",
    ]
    for kind in ("source", "transform", "sink"):
        lines += [f"## {kind.capitalize()}s", ""]
        for cls in shipped(kind):
            if cls.seatunnel_page is None:
                lines += [f"### {cls.name}", "", "This engine's own plugin (no SeaTunnel page).", ""]
                continue
            rows = status_of(cls)
            refused = [r for r in rows if r.status != "supported"]
            lines += [f"### {cls.name}", "", f"Page: `{cls.seatunnel_page}`. "
                      f"{len(rows) - len(refused)} of {len(rows)} documented options supported"
                      + ("." if not refused else "; the others:"), ""]
            if refused:
                lines += ["| option | status | reason |", "|---|---|---|"]
                lines += [f"| `{r.name}` | {r.status}{_accepts(cls, r.name)} | {r.reason or '-'} |" for r in refused]
                lines.append("")
            lines += ["<details><summary>supported</summary>", "",
                      ", ".join(f"`{r.name}`" for r in rows if r.status == "supported") or "-", "", "</details>", ""]
            lines += cls.seatunnel_notes()
            own = extras(cls)
            if own:
                lines += ["This engine's own options (not on the page): " + ", ".join(f"`{k}`" for k in own) + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in argv:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python -m streaming_engine.compat", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
