"""Job file -> RawJob: plain dicts plus where each plugin block is.

HOCON is parsed by pyhocon; YAML by PyYAML; JSON by the json module. What
pyhocon alone gets wrong for SeaTunnel files is fixed by a small lexical pass
over the text (:func:`_scan_hocon`) that understands only strings, comments and
brackets:

- two blocks of the same plugin (``Copy { } Copy { }``) would be merged by
  pyhocon; the pass gives every plugin block a unique key, keeps its order and
  records its line;
- ``${name}`` / ``${name:default}`` variables (SeaTunnel's ``-i name=value``,
  then the environment) are substituted; outside quotes a value that is not a
  number, boolean or list is inserted quoted, as SeaTunnel does;
  SeaTunnel's reserved sink placeholders (``${table_name}`` ...) are left alone.

Dotted keys inside plugin blocks (``row.num = 10``) come out of pyhocon as
nested objects; :mod:`streaming_engine.config.models` flattens them back
against each plugin's known option names.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from streaming_engine.errors import ConfigError, Location, Problem

SECTIONS = ("env", "source", "transform", "sink")
PLUGIN_SECTIONS = ("source", "transform", "sink")

# SeaTunnel's reserved placeholders: never substituted from -i or the environment.
RESERVED_PLACEHOLDERS = frozenset(
    {
        "database_name",
        "schema_name",
        "table_name",
        "schema_full_name",
        "table_full_name",
        "primary_key",
        "unique_key",
        "field_names",
        "comment",
    }
)
_VAR = re.compile(r"\$\{(?P<opt>\?)?(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?::(?P<default>[^}]*))?\}")
_BLOCK_KEY = "__plugin_block_{}__"


@dataclass(frozen=True)
class RawBlock:
    section: str  # source | transform | sink
    index: int  # 1-based position within its section
    plugin: str  # plugin name as written
    options: dict[str, Any]
    line: int | None = None
    file: str | None = None

    @property
    def location(self) -> Location:
        return Location(self.file, self.section, self.index, self.plugin, self.line)


@dataclass(frozen=True)
class RawJob:
    file: str | None
    env: dict[str, Any]
    blocks: tuple[RawBlock, ...]
    warnings: tuple[Problem, ...] = field(default_factory=tuple)

    def section(self, name: str) -> tuple[RawBlock, ...]:
        return tuple(b for b in self.blocks if b.section == name)


# --------------------------------------------------------------------------
# entry points


def load_file(path: str | os.PathLike, variables: Mapping[str, str] | None = None) -> RawJob:
    p = Path(path)
    if not p.is_file():
        raise ConfigError([Problem("CONFIG.FILE_NOT_FOUND", {"path": str(p)}, Location(str(p)))])
    text = p.read_text(encoding="utf-8")
    fmt = _format_of(p)
    return load_text(text, fmt=fmt, variables=variables, file=str(p))


def load_text(
    text: str,
    fmt: str = "hocon",
    variables: Mapping[str, str] | None = None,
    file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RawJob:
    lookup = _Variables(variables or {}, os.environ if environ is None else environ)
    if fmt == "hocon":
        data, lines = _parse_hocon(text, lookup, file)
    elif fmt in ("yaml", "json"):
        data, lines = _parse_yaml_json(text, fmt, lookup, file)
    else:
        raise ConfigError([Problem("CONFIG.UNSUPPORTED_FORMAT", {"path": file, "ext": fmt}, Location(file))])
    if lookup.unset:
        raise ConfigError(
            [Problem("CONFIG.UNSET_VARIABLE", {"name": n}, Location(file, line=ln)) for n, ln in lookup.unset]
        )
    return _to_raw_job(data, lines, file)


def parse_variables(items: list[str] | None) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}`` (SeaTunnel's ``-i``)."""
    out: dict[str, str] = {}
    problems = []
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            problems.append(Problem("CONFIG.BAD_VARIABLE", {"arg": item}))
            continue
        out[name.strip()] = value
    if problems:
        raise ConfigError(problems)
    return out


def _format_of(p: Path) -> str:
    ext = p.suffix.lower()
    if ext in (".conf", ".hocon", ".config", ""):
        return "hocon"
    if ext in (".yaml", ".yml"):
        return "yaml"
    if ext == ".json":
        return "json"
    raise ConfigError([Problem("CONFIG.UNSUPPORTED_FORMAT", {"path": str(p), "ext": ext}, Location(str(p)))])


# --------------------------------------------------------------------------
# variables


class _Variables:
    def __init__(self, given: Mapping[str, str], environ: Mapping[str, str]):
        self.given = dict(given)
        self.environ = environ
        self.unset: list[tuple[str, int | None]] = []

    def value(self, name: str, default: str | None, line: int | None, record_unset: bool = True) -> str | None:
        """The substitution for ``${name}``; None means leave the text as it is."""
        if name in RESERVED_PLACEHOLDERS:
            return None
        if name in self.given:
            return self.given[name]
        if name in self.environ:
            return self.environ[name]
        if default is not None:
            return default
        if record_unset:
            self.unset.append((name, line))
        return None

    def substitute_string(self, s: str, line: int | None = None) -> str:
        def repl(m: re.Match) -> str:
            v = self.value(m.group("name"), m.group("default"), line)
            return m.group(0) if v is None else v

        return _VAR.sub(repl, s)


_LITERAL = re.compile(r"^\s*(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null|\[.*\])\s*$", re.S)


def _hocon_value(v: str) -> str:
    """Text to splice into HOCON outside quotes: literals as-is, the rest quoted."""
    return v if _LITERAL.match(v) else json.dumps(v)


# --------------------------------------------------------------------------
# HOCON


@dataclass
class _Block:
    section: str
    plugin: str
    line: int


def _scan_hocon(text: str, variables: _Variables) -> tuple[str, list[_Block]]:
    """One lexical pass: substitute variables, give plugin blocks unique keys.

    Returns the rewritten text and the plugin blocks in order.
    """
    out: list[str] = []
    blocks: list[_Block] = []
    stack: list[str | None] = []  # per open bracket: section name for section braces
    i, n, line = 0, len(text), 1
    root_brace = _starts_with_root_brace(text)
    pending_key: tuple[str, int, int] | None = None  # (key text, out index, line)
    at_option_key = False  # directly inside a plugin block, where an option key may start

    def depth_base() -> int:
        return 1 if root_brace else 0

    while i < n:
        ch = text[i]
        # comments
        if ch == "#" or text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j == -1 else j
            out.append(text[i:j])
            i = j
            continue
        # strings
        if text.startswith('"""', i):
            j = text.find('"""', i + 3)
            j = n if j == -1 else j + 3
            while j < n and text[j] == '"':  # """...""""" : extra quotes belong to the string
                j += 1
            seg = text[i:j]
            out.append(variables.substitute_string(seg, line))
            line += seg.count("\n")
            i = j
            continue
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            seg = text[i:j]
            out.append(_substitute_in_quoted(seg, variables, line))
            i = j
            continue
        # variables outside quotes
        if ch == "$" and text.startswith("${", i):
            m = _VAR.match(text, i)
            if m and not m.group("opt"):
                # left unset here, pyhocon may still resolve it (a path in the file)
                v = variables.value(m.group("name"), m.group("default"), line, record_unset=False)
                out.append(m.group(0) if v is None else _hocon_value(v))
                i = m.end()
                continue
        if ch == "\n":
            line += 1
            at_option_key = True
        if ch == "," :
            at_option_key = True
        # an option key directly in a plugin block: a dotted key is ONE plain
        # key, as SeaTunnel reads it (row.num, row_error_handle_way.error_table)
        depth = len(stack) - depth_base()
        if at_option_key and depth == 2 and stack[-1] == "__plugin__" and not ch.isspace() and ch not in "{}[]=:,#":
            j = i
            while j < n and not text[j].isspace() and text[j] not in '{}[]=:,"#':
                j += 1
            key = text[i:j]
            out.append(json.dumps(key) if "." in key and "$" not in key else key)
            at_option_key = False
            i = j
            continue
        if ch in "{[":
            section = None
            if ch == "{" and pending_key is not None:
                key, out_at, key_line = pending_key
                depth = len(stack) - depth_base()
                if depth == 0 and key in SECTIONS:
                    section = key
                elif depth == 1 and stack[-1] in PLUGIN_SECTIONS:
                    blocks.append(_Block(stack[-1], key, key_line))
                    out[out_at] = json.dumps(_BLOCK_KEY.format(len(blocks) - 1))
                    section = "__plugin__"
            stack.append(section)
            pending_key = None
            at_option_key = section == "__plugin__"
            out.append(ch)
            i += 1
            continue
        if ch in "}]":
            if stack:
                stack.pop()
            pending_key = None
            out.append(ch)
            i += 1
            continue
        # a key at a depth where we care about keys
        depth = len(stack) - depth_base()
        if (depth == 0 or (depth == 1 and stack[-1] in PLUGIN_SECTIONS)) and not ch.isspace() and ch not in "=:,":
            j = i
            while j < n and not text[j].isspace() and text[j] not in '{}[]=:,"#':
                j += 1
            if j > i:
                pending_key = (text[i:j], len(out), line)
                out.append(text[i:j])
                i = j
                continue
        if not ch.isspace() and ch not in "=:":
            pending_key = None if ch == "," else pending_key
        out.append(ch)
        i += 1
    return "".join(out), blocks


def _substitute_in_quoted(seg: str, variables: _Variables, line: int) -> str:
    """Substitute ``${x}`` inside a quoted string; the value is JSON-escaped."""

    def repl(m: re.Match) -> str:
        v = variables.value(m.group("name"), m.group("default"), line)
        return m.group(0) if v is None else json.dumps(v)[1:-1]

    return _VAR.sub(repl, seg)


def _starts_with_root_brace(text: str) -> bool:
    for raw in text.splitlines():
        s = raw.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        return s.startswith("{")
    return False


def _parse_hocon(text: str, variables: _Variables, file: str | None) -> tuple[dict, dict[str, list[_Block]]]:
    from pyhocon import ConfigFactory  # imported here: only HOCON files need it
    from pyhocon.exceptions import ConfigException

    rewritten, blocks = _scan_hocon(text, variables)
    try:
        tree = ConfigFactory.parse_string(rewritten, resolve=True)
    except ConfigException as e:
        raise ConfigError([_hocon_problem(e, file)]) from None
    except Exception as e:  # pyparsing errors carry a line number
        raise ConfigError([_hocon_problem(e, file)]) from None
    data = _plain(tree)
    if isinstance(data, dict):
        # map unique block keys back to (plugin, line)
        for section in PLUGIN_SECTIONS:
            sec = data.get(section)
            if isinstance(sec, dict):
                items = []
                for key, value in sec.items():
                    m = re.fullmatch(r"__plugin_block_(\d+)__", key)
                    b = blocks[int(m.group(1))] if m else None
                    items.append({"__plugin__": b.plugin if b else key, "__line__": b.line if b else None, "__value__": value})
                data[section] = items
            elif isinstance(sec, list):
                data[section] = _blocks_from_list(sec, {})
    return data, {}


def _blocks_from_list(items: list, lines: dict[int, int]) -> list[dict]:
    """JSON/YAML style: ``[{plugin_name: X, ...}, ...]``."""
    out = []
    for idx, item in enumerate(items):
        if isinstance(item, dict):
            item = dict(item)
            name = item.pop("plugin_name", None)
            out.append({"__plugin__": name, "__line__": lines.get(idx), "__value__": item})
        else:
            out.append({"__plugin__": None, "__line__": lines.get(idx), "__value__": item})
    return out


def _hocon_problem(e: Exception, file: str | None) -> Problem:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    line = getattr(e, "lineno", None)
    m = re.search(r"line:?\s*(\d+)", msg)
    if line is None and m:
        line = int(m.group(1))
    unresolved = re.search(r"Cannot resolve variable \$\{(.+?)\}", str(e))
    if unresolved:
        return Problem("CONFIG.UNSET_VARIABLE", {"name": unresolved.group(1)}, Location(file, line=line))
    return Problem("CONFIG.SYNTAX", {"detail": msg}, Location(file, line=line))


def _unquote(key: str) -> str:
    """pyhocon keeps the quotes of a quoted key ("a.b"); the key is a.b."""
    if len(key) >= 2 and key[0] == key[-1] == '"':
        try:
            return json.loads(key)
        except ValueError:
            return key[1:-1]
    return key


def _plain(tree: Any) -> Any:
    from pyhocon import ConfigTree

    if isinstance(tree, ConfigTree):
        return {_unquote(k): _plain(v) for k, v in tree.items()}
    if isinstance(tree, dict):
        return {k: _plain(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_plain(v) for v in tree]
    return tree


# --------------------------------------------------------------------------
# YAML / JSON


def _parse_yaml_json(text: str, fmt: str, variables: _Variables, file: str | None) -> tuple[dict, dict]:
    import yaml

    try:
        data = json.loads(text) if fmt == "json" else yaml.load(text, Loader=_yaml_loader())
    except json.JSONDecodeError as e:
        raise ConfigError([Problem("CONFIG.SYNTAX", {"detail": e.msg}, Location(file, line=e.lineno))]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        detail = getattr(e, "problem", None) or str(e)
        raise ConfigError(
            [Problem("CONFIG.SYNTAX", {"detail": detail}, Location(file, line=mark.line + 1 if mark else None))]
        ) from None
    if data is None:
        data = {}
    lines = _yaml_block_lines(text)
    data = _substitute_tree(data, variables)
    if isinstance(data, dict):
        for section in PLUGIN_SECTIONS:
            sec = data.get(section)
            if isinstance(sec, list):
                data[section] = _blocks_from_list(sec, {i: ln for (s, i), ln in lines.items() if s == section})
            elif isinstance(sec, dict):  # mapping style: {FakeSource: {...}}
                data[section] = [{"__plugin__": k, "__line__": None, "__value__": v} for k, v in sec.items()]
    return data, {}


def _yaml_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_block_lines(text: str) -> dict[tuple[str, int], int]:
    """Line of each item of the source/transform/sink lists (JSON is YAML here)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=_yaml_loader())
    except yaml.YAMLError:
        return {}
    out: dict[tuple[str, int], int] = {}
    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            if getattr(k, "value", None) in PLUGIN_SECTIONS and isinstance(v, yaml.SequenceNode):
                for idx, item in enumerate(v.value):
                    out[(k.value, idx)] = item.start_mark.line + 1
    return out


def _substitute_tree(value: Any, variables: _Variables) -> Any:
    if isinstance(value, str):
        m = _VAR.fullmatch(value)
        if m:  # a whole-value variable keeps the type of what it names
            v = variables.value(m.group("name"), m.group("default"), None)
            if v is None:
                return value
            try:
                return json.loads(v)
            except ValueError:
                return v
        return variables.substitute_string(value)
    if isinstance(value, dict):
        return {k: _substitute_tree(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_tree(v, variables) for v in value]
    return value


# --------------------------------------------------------------------------
# common


def _to_raw_job(data: Any, _lines: dict, file: str | None) -> RawJob:
    problems: list[Problem] = []
    warnings: list[Problem] = []
    if not isinstance(data, dict):
        raise ConfigError(
            [Problem("CONFIG.NOT_AN_OBJECT", {"what": "the job file", "got": type(data).__name__}, Location(file))]
        )
    for key in data:
        if key not in SECTIONS:
            warnings.append(Problem("CONFIG.UNKNOWN_SECTION", {"section": key}, Location(file), "warning"))
    env = data.get("env") or {}
    if not isinstance(env, dict):
        problems.append(Problem("CONFIG.NOT_AN_OBJECT", {"what": "env", "got": type(env).__name__}, Location(file, "env")))
        env = {}
    blocks: list[RawBlock] = []
    for section in PLUGIN_SECTIONS:
        items = data.get(section) or []
        if isinstance(items, dict):  # pyhocon gave a non-block section
            items = [{"__plugin__": k, "__line__": None, "__value__": v} for k, v in items.items()]
        if not isinstance(items, list):
            problems.append(
                Problem("CONFIG.NOT_AN_OBJECT", {"what": section, "got": type(items).__name__}, Location(file, section))
            )
            continue
        for idx, item in enumerate(items, start=1):
            name, line, value = item["__plugin__"], item["__line__"], item["__value__"]
            loc = Location(file, section, idx, name, line)
            if not name:
                problems.append(Problem("CONFIG.MISSING_PLUGIN_NAME", {}, loc))
                continue
            if not isinstance(value, dict):
                problems.append(
                    Problem("CONFIG.NOT_AN_OBJECT", {"what": f"plugin block {name}", "got": type(value).__name__}, loc)
                )
                continue
            blocks.append(RawBlock(section, idx, str(name), value, line, file))
    if problems:
        raise ConfigError(problems)
    return RawJob(file, env, tuple(blocks), tuple(warnings))
