"""Job file -> RawJob: plain dicts plus where each plugin block is.

HOCON is parsed by pyhocon; YAML by PyYAML; JSON by the json module. What
pyhocon alone gets wrong for SeaTunnel files is fixed by a small lexical pass
over the text (:func:`_scan_hocon`) that understands only strings, comments and
brackets:

- two blocks of the same plugin (``Copy { } Copy { }``) would be merged by
  pyhocon; the pass gives every plugin block a unique key, keeps its order and
  records its line;
- unquoted ``NULL``, ``True``, ``FALSE`` ... are text, as in HOCON (whose
  keywords are lower case), not null and booleans as pyhocon reads them;
- ``${name}`` / ``${name:default}`` variables (SeaTunnel's ``-i name=value``,
  then the environment, then the default) are substituted; SeaTunnel's reserved
  sink placeholders (``${table_name}`` ...) are left alone.

Variable values are data, never syntax: no value can add or change a key or a
block, in any format. Inside a quoted string a value is escaped into the
string (a value containing ``\"\"\"`` cannot go into a triple-quoted string).
Used as a whole value (HOCON outside quotes; YAML/JSON ``key: ${x}``) a value
is typed by :func:`typed_value`: a number, ``true``/``false``/``null``, a flat
list of such scalars and strings written ``[a, b, 1]`` (parsed by PyYAML as a
flow sequence, then checked to be flat), else a string. A value that starts
with ``[`` and ends with ``]`` but is not such a list is an error; quote the
variable in the file (``"${x}"``) to pass that text as a string. In HOCON the
typed value is spliced as JSON text, which has no way to open a block.

Hostile input fails fast with a ConfigError naming the file, the line where
known and what to change, never a traceback: the file size
(:data:`MAX_FILE_BYTES`), UTF-8 (the byte offset and line of the first bad
byte), nesting depth (:data:`MAX_DEPTH`, checked before the parser sees the
text: braces and dotted key paths in HOCON, brackets in JSON, PyYAML's event
stream in YAML), YAML anchors and aliases (refused: a few hundred bytes of
aliases expand to gigabytes), YAML tags other than the basic ones, the length
of any string or key (:data:`MAX_STRING_CHARS`), keys and list items in the
file (:data:`MAX_ITEMS`) and plugin blocks (:data:`MAX_PLUGINS`). HOCON
``include`` is refused (it would read other files or URLs); a ``${x}`` that no
``-i``, environment or default sets is an unset variable, never a path in the
file, and at most :data:`MAX_PATH_REFERENCES` ``${?x}`` are left to pyhocon to
resolve as paths (each copies what it names: ``b = [${?a}, ${?a}]`` chains grow
exponentially). Names and values quoted in messages are clipped to
:data:`MAX_SHOWN_CHARS`.

Dotted keys inside plugin blocks (``row.num = 10``) come out of pyhocon as
nested objects; :mod:`streaming_engine.config.models` flattens them back
against each plugin's known option names.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping

from streaming_engine.errors import ConfigError, Location, Problem

SECTIONS = ("env", "source", "transform", "sink")
PLUGIN_SECTIONS = ("source", "transform", "sink")

# Limits on what a job file may be. Generous for real jobs (a few hundred
# plugins, SQL text, inline schemas), small enough that any input fails in
# about a second instead of exhausting time, memory or the stack.
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 64  # nested objects/lists (and dotted key parts in HOCON)
MAX_STRING_CHARS = 1024 * 1024  # any string, key or variable value
MAX_ITEMS = 100_000  # keys and list items in the whole file
MAX_PLUGINS = 10_000  # plugin blocks in the job
# ${?x} references pyhocon resolves as paths in the file: each copies what it
# names, so a few levels of [${a}, ${a}] grow exponentially.
MAX_PATH_REFERENCES = 8

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
        # file sinks' file_name_expression / partition_dir_expression
        "now",
        "uuid",
        "transactionId",
    }
)
_RESERVED_PATTERN = re.compile(r"[kv]\d+")  # partition_dir_expression's ${k0}=${v0}
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


MAX_SHOWN_CHARS = 200  # of a name or value quoted in a message
MAX_DETAIL_CHARS = 1000  # of a message's detail: the engine's own words (what to change) with a value or two


def _clip(v: Any, limit: int = MAX_SHOWN_CHARS) -> Any:
    if isinstance(v, str) and len(v) > limit:
        return f"{v[:limit // 2]}...({len(v)} characters)"
    return v


def clipped(p: Problem) -> Problem:
    """``p`` with long names and values from the file shortened: messages stay
    readable, and rendering them (redaction scans every word) stays fast."""
    loc = p.location
    loc = replace(loc, plugin=_clip(loc.plugin), key=_clip(loc.key), file=_clip(loc.file))
    return replace(p, params={k: _clip(v, MAX_DETAIL_CHARS if k == "detail" else MAX_SHOWN_CHARS)
                              for k, v in p.params.items()}, location=loc)


def config_error(problems: list[Problem] | tuple[Problem, ...]) -> ConfigError:
    """A ConfigError of these problems, clipped (see :func:`clipped`)."""
    return ConfigError([clipped(p) for p in problems])


def _fail(condition: str, params: dict[str, Any], file: str | None, line: int | None = None, key: str | None = None):
    raise config_error([Problem(condition, params, Location(file, line=line, key=key))])


# --------------------------------------------------------------------------
# entry points


def load_file(path: str | os.PathLike, variables: Mapping[str, str] | None = None) -> RawJob:
    p = Path(path)
    if not p.is_file():
        raise config_error([Problem("CONFIG.FILE_NOT_FOUND", {"path": str(p)}, Location(str(p)))])
    fmt = _format_of(p)
    with p.open("rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        _fail("CONFIG.TOO_LARGE", {"size": p.stat().st_size, "limit": MAX_FILE_BYTES}, str(p))
    return load_text(_decode(data, str(p)), fmt=fmt, variables=variables, file=str(p))


def load_text(
    text: str,
    fmt: str = "hocon",
    variables: Mapping[str, str] | None = None,
    file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RawJob:
    _check_text(text, file)
    lookup = _Variables(variables or {}, os.environ if environ is None else environ, file)
    if fmt == "hocon":
        data = _parse_hocon(text, lookup, file)
    elif fmt in ("yaml", "json"):
        data = _parse_yaml_json(text, fmt, lookup, file)
    else:
        raise config_error([Problem("CONFIG.UNSUPPORTED_FORMAT", {"path": file, "ext": fmt}, Location(file))])
    lookup.raise_unset()
    _check_tree(data, file)
    return _to_raw_job(data, file)


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
        raise config_error(problems)
    return out


def _format_of(p: Path) -> str:
    ext = p.suffix.lower()
    if ext in (".conf", ".hocon", ".config", ""):
        return "hocon"
    if ext in (".yaml", ".yml"):
        return "yaml"
    if ext == ".json":
        return "json"
    raise config_error([Problem("CONFIG.UNSUPPORTED_FORMAT", {"path": str(p), "ext": ext}, Location(str(p)))])


# --------------------------------------------------------------------------
# limits


def _decode(data: bytes, file: str) -> str:
    """UTF-8 (a BOM is dropped); a bad byte is an error naming its offset and line."""
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        offset = start + e.start
        line = data.count(b"\n", 0, offset) + 1
        _fail("CONFIG.NOT_UTF8", {"path": file, "offset": offset, "line": line}, file, line)
        raise  # unreachable


def _check_text(text: str, file: str | None) -> None:
    if len(text) > MAX_FILE_BYTES:  # every character is at least one byte
        _fail("CONFIG.TOO_LARGE", {"size": len(text.encode("utf-8", "replace")), "limit": MAX_FILE_BYTES}, file)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:  # lone surrogates in a str
        line = text.count("\n", 0, e.start) + 1
        _fail("CONFIG.NOT_UTF8", {"path": file or "<config>", "offset": e.start, "line": line}, file, line)
        raise  # unreachable
    if size > MAX_FILE_BYTES:
        _fail("CONFIG.TOO_LARGE", {"size": size, "limit": MAX_FILE_BYTES}, file)


def _check_tree(data: Any, file: str | None) -> None:
    """Depth, item count and string lengths of the parsed (and substituted) tree."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    items = 0
    while stack:
        value, depth, path = stack.pop()
        items += 1
        if items > MAX_ITEMS:
            _fail("CONFIG.TOO_MANY_ITEMS", {"limit": MAX_ITEMS}, file)
        if depth > MAX_DEPTH:
            _fail("CONFIG.TOO_DEEP", {"what": "values are", "limit": MAX_DEPTH}, file, key=path[:200] or None)
        if isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                _fail("CONFIG.STRING_TOO_LONG", {"length": len(value), "limit": MAX_STRING_CHARS}, file, key=path[:200])
        elif isinstance(value, dict):
            for k, v in value.items():
                if len(str(k)) > MAX_STRING_CHARS:
                    _fail("CONFIG.STRING_TOO_LONG", {"length": len(str(k)), "limit": MAX_STRING_CHARS}, file)
                stack.append((v, depth + 1, f"{path}.{k}" if path else str(k)))
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))


# --------------------------------------------------------------------------
# variables


class _Variables:
    def __init__(self, given: Mapping[str, str], environ: Mapping[str, str], file: str | None = None):
        self.given = dict(given)
        self.environ = environ
        self.file = file
        self.unset: list[tuple[str, int | None]] = []

    def value(self, name: str, default: str | None, line: int | None, record_unset: bool = True) -> str | None:
        """The substitution for ``${name}`` as text; None means leave the text as it is."""
        if name in RESERVED_PLACEHOLDERS or _RESERVED_PATTERN.fullmatch(name):
            return None
        if name in self.given:
            v = self.given[name]
        elif name in self.environ:
            v = self.environ[name]
        elif default is not None:
            v = default
        else:
            if record_unset:
                self.unset.append((name, line))
            return None
        if len(v) > MAX_STRING_CHARS:
            self.bad(name, f"is {len(v)} characters long; the limit is {MAX_STRING_CHARS}", line)
        return v

    def raise_unset(self) -> None:
        if self.unset:
            raise config_error(
                [Problem("CONFIG.UNSET_VARIABLE", {"name": n}, Location(self.file, line=ln)) for n, ln in self.unset]
            )

    def bad(self, name: str, detail: str, line: int | None) -> None:
        _fail("CONFIG.BAD_VARIABLE_VALUE", {"name": name, "detail": detail}, self.file, line)

    def typed(self, name: str, default: str | None, line: int | None, record_unset: bool = True) -> tuple[bool, Any]:
        """(found, value) for a whole-value ``${name}``: the value typed by :func:`typed_value`."""
        v = self.value(name, default, line, record_unset)
        if v is None:
            return False, None
        try:
            return True, typed_value(v)
        except ValueError as e:
            self.bad(name, str(e), line)
            raise  # unreachable

    def substitute_string(self, s: str, line: int | None = None) -> str:
        def repl(m: re.Match) -> str:
            v = self.value(m.group("name"), m.group("default"), line)
            return m.group(0) if v is None else v

        return _VAR.sub(repl, s)


_NUMBER = re.compile(r"-?\d{1,300}(\.\d{1,300})?([eE][+-]?\d{1,4})?")
_SCALARS = (str, bool, int, float, type(None))


def typed_value(v: str) -> Any:
    """A variable's text as a whole value: number, boolean, null, flat list or string.

    ``"[a, b, 1]"`` -> ``["a", "b", 1]`` (PyYAML flow sequence, no anchors,
    aliases or tags, one level only); ValueError when text written as a list is
    not a flat list of scalars.
    """
    s = v.strip()
    if _NUMBER.fullmatch(s):
        number = float(s) if any(c in s for c in ".eE") else int(s)
        return number if math.isfinite(number) else v
    if s in ("true", "false"):
        return s == "true"
    if s == "null":
        return None
    if s.startswith("[") and s.endswith("]"):
        try:
            items = _yaml_load(s, None)[0]
        except ConfigError:
            items = None
        if not isinstance(items, list) or not all(
            isinstance(x, _SCALARS) and not (isinstance(x, float) and not math.isfinite(x)) for x in items
        ):
            raise ValueError(
                "looks like a list but is not a flat list of strings, numbers or booleans such as [a, b]; "
                'to pass the text as a string, quote the variable in the file: "${...}"'
            )
        return items
    return v


# --------------------------------------------------------------------------
# HOCON


@dataclass
class _Block:
    section: str
    plugin: str
    line: int


_SPACE = re.compile(r"\s+")
_QUOTED_BODY = re.compile(r'(?:[^"\\\n]++|\\.)*+')
_WORD = re.compile(r'[^\s{}\[\]=:,"#]+')  # a key as this pass reads it
_PLAIN_RUN = re.compile(r'(?:[^\s#/"$,{}\[\]=:]|/(?!/)|\$(?!\{))+')  # nothing for this pass in it
# HOCON's keywords are lower case; pyhocon also reads NULL, True, FALSE ... as
# them, so Assert's ``rule_type = NULL`` would become null. Quoted, they stay text.
_KEYWORD_CASE = re.compile(r"(?<![\w.\-])(?i:true|false|null)(?![\w.\-])")
_INCLUDE_ARG = re.compile(r'\s*("|(url|file|classpath|package|required)\s*\()')


def _scan_hocon(text: str, variables: _Variables, file: str | None = None) -> tuple[str, list[_Block]]:
    """One lexical pass: substitute variables, give plugin blocks unique keys,
    and refuse what would break pyhocon (nesting, dotted paths, item count).

    Returns the rewritten text and the plugin blocks in order.
    """
    out: list[str] = []
    blocks: list[_Block] = []
    stack: list[str] = []  # per open bracket: section name, __plugin__, or the bracket
    i, n, line = 0, len(text), 1
    root_brace = _starts_with_root_brace(text)
    pending_key: tuple[str, int, int] | None = None  # (key text, out index, line)
    at_option_key = False  # directly inside a plugin block, where an option key may start
    items = 0  # separators and brackets: an upper bound of keys and list items
    dots = 0  # dots in the current unquoted token: a.b.c nests like braces
    path_refs = 0

    def depth_base() -> int:
        return 1 if root_brace else 0

    def too_deep(extra: int) -> None:
        if len(stack) + extra > MAX_DEPTH:
            _fail("CONFIG.TOO_DEEP", {"what": "objects, lists and dotted keys are", "limit": MAX_DEPTH}, file, line)

    def check_word(word: str, end: int, dots: int | None = None) -> None:
        """Dotted paths nest like braces; include would read other files or URLs."""
        too_deep(word.count(".") if dots is None else dots)
        too_long(len(word))
        if word == "include" and _INCLUDE_ARG.match(text, end):
            _fail("CONFIG.INCLUDE", {}, file, line)

    def too_long(length: int) -> None:
        if length > MAX_STRING_CHARS:
            _fail("CONFIG.STRING_TOO_LONG", {"length": length, "limit": MAX_STRING_CHARS}, file, line)

    def count_item() -> None:
        nonlocal items
        items += 1
        if items > MAX_ITEMS:
            _fail("CONFIG.TOO_MANY_ITEMS", {"limit": MAX_ITEMS}, file, line)

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
            too_long(len(seg) - 6)
            out.append(f'"{_EMPTY}"' if seg == '""""""' else _substitute_in_triple_quoted(seg, variables, line))
            line += seg.count("\n")
            i = j
            continue
        if ch == '"':
            j = _QUOTED_BODY.match(text, i + 1).end()  # a quoted string ends at its line
            j += 1 if j < n and text[j] == '"' else 0
            too_long(j - i - 2)
            out.append(_quoted_for_pyhocon(_substitute_in_quoted(text[i:j], variables, line)))
            i = j
            continue
        # variables outside quotes
        if ch == "$" and text.startswith("${", i):
            m = _VAR.match(text, i)
            if m:
                found, v = variables.typed(m.group("name"), m.group("default"), line, not m.group("opt"))
                if not found:  # ${?x} or a reserved placeholder: pyhocon looks it up as a path in the file
                    path_refs += 1
                    if path_refs > MAX_PATH_REFERENCES:
                        _fail("CONFIG.TOO_MANY_REFERENCES", {"limit": MAX_PATH_REFERENCES}, file, line)
                out.append(_hocon_value(v) if found else m.group(0))
                i = m.end()
                continue
        if ch.isspace():  # a run of whitespace in one step
            ws = _SPACE.match(text, i).group()
            if "\n" in ws:
                line += ws.count("\n")
                at_option_key = True
                if stack and stack[-1] == "[":  # newline-separated list items
                    count_item()
            dots = 0
            out.append(ws)
            i += len(ws)
            continue
        if ch in "{}[]=:,":
            dots = 0
        if ch == ",":
            at_option_key = True
            count_item()
        # an option key directly in env or a plugin block, or in an object that
        # is an item of a list option (tables_configs, table_list: per-table
        # option blocks): a dotted key is ONE plain key, as SeaTunnel reads it
        # (row.num, row_error_handle_way.error_table); split into a path, a
        # key such as rows.per.batch would collide with the option rows
        depth = len(stack) - depth_base()
        if at_option_key and _in_option_block(stack, depth) and ch not in "{}[]=:,#":
            key = _WORD.match(text, i).group()
            check_word(key, i + len(key))
            out.append(json.dumps(key) if "." in key and "$" not in key else key)
            at_option_key = False
            i += len(key)
            continue
        if ch in "{[":
            too_deep(1)
            count_item()
            section = None
            if ch == "{" and pending_key is not None:
                key, out_at, key_line = pending_key
                depth = len(stack) - depth_base()
                if depth == 0 and key in SECTIONS:
                    section = key
                elif depth == 1 and stack[-1] in PLUGIN_SECTIONS:
                    blocks.append(_Block(stack[-1], key, key_line))
                    if len(blocks) > MAX_PLUGINS:
                        _fail("CONFIG.TOO_MANY_PLUGINS", {"count": f"more than {MAX_PLUGINS}", "limit": MAX_PLUGINS}, file, line)
                    out[out_at] = json.dumps(_BLOCK_KEY.format(len(blocks) - 1))
                    section = "__plugin__"
            stack.append(section or ch)
            pending_key = None
            at_option_key = _in_option_block(stack, len(stack) - depth_base())
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
        if ch in "=:":
            count_item()
        # a key at a depth where we care about keys
        if (depth == 0 or (depth == 1 and stack[-1] in PLUGIN_SECTIONS)) and ch not in "=:,":
            word = _WORD.match(text, i)
            if word:
                check_word(word.group(), word.end())
                pending_key = (word.group(), len(out), line)
                out.append(word.group())
                i = word.end()
                continue
        if ch not in "=:":
            pending_key = None if ch == "," else pending_key
        # a run of characters that mean nothing to this pass, in one step
        run = _PLAIN_RUN.match(text, i)
        if run:
            dots += run.group().count(".")
            check_word(run.group(), run.end(), dots)
            out.append(_KEYWORD_CASE.sub(lambda m: m.group() if m.group().islower() else json.dumps(m.group()), run.group()))
            i = run.end()
            continue
        count_item()  # anything else costs pyhocon a token
        out.append(ch)
        i += 1
    return "".join(out), blocks


# pyhocon drops "" from lists (it reads it as a trailing comma) and decodes
# neither \uXXXX nor \/, \b, \f: the pass hands it empty strings as a mark
# (turned back into "" by _plain) and these escapes decoded.
_EMPTY = "\ue000\ue001"
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}(?:\\u[0-9a-fA-F]{4})?|.)")
_PYHOCON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _in_option_block(stack: list[str], depth: int) -> bool:
    """Whether the innermost open object is the env block, a plugin block, or
    an object item of a list directly in a plugin block: where a dotted key is
    one key (``spark.hadoop.fs.s3a.endpoint`` and
    ``spark.hadoop.fs.s3a.endpoint.region`` are two settings, not a string
    replaced by an object)."""
    return (depth == 1 and stack[-1] == "env") or (depth == 2 and stack[-1] == "__plugin__") or (
        depth == 4 and stack[-1] == "{" and stack[-2] == "[" and stack[-3] == "__plugin__")


def _quoted_for_pyhocon(seg: str) -> str:
    """A quoted string as pyhocon reads it right (JSON's escapes; "" kept)."""
    if seg == '""':
        return f'"{_EMPTY}"'

    def repl(m: re.Match) -> str:
        e = m.group(0)
        if e[1] == "u":
            try:
                return "".join(_PYHOCON_ESCAPES.get(c, c) for c in json.loads(f'"{e}"'))
            except ValueError:  # not JSON's escape after all: left to pyhocon as written
                return e
        return {"\\/": "/", "\\b": "\b", "\\f": "\f"}.get(e, e)

    return _ESCAPE.sub(repl, seg) if "\\" in seg else seg


def _hocon_value(v: Any) -> str:
    """A typed variable value as HOCON text (a quoted string, number, list ...)."""

    def mark(x: Any) -> Any:
        return _EMPTY if x == "" else [mark(y) for y in x] if isinstance(x, list) else x

    return _quoted_for_pyhocon(json.dumps(mark(v), ensure_ascii=False))


def _substitute_in_quoted(seg: str, variables: _Variables, line: int) -> str:
    """Substitute ``${x}`` inside a quoted string; the value is JSON-escaped."""

    def repl(m: re.Match) -> str:
        v = variables.value(m.group("name"), m.group("default"), line)
        return m.group(0) if v is None else json.dumps(v, ensure_ascii=False)[1:-1]

    return _VAR.sub(repl, seg)


def _substitute_in_triple_quoted(seg: str, variables: _Variables, line: int) -> str:
    """Substitute ``${x}`` inside a triple-quoted string (no escapes there)."""

    def repl(m: re.Match) -> str:
        v = variables.value(m.group("name"), m.group("default"), line)
        if v is None:
            return m.group(0)
        if '"' in v:
            variables.bad(m.group("name"), 'contains a quote, which cannot go into a """ string; use "${...}"', line)
        return v

    return _VAR.sub(repl, seg)


def _starts_with_root_brace(text: str) -> bool:
    for raw in text.splitlines():
        s = raw.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        return s.startswith("{")
    return False


@contextlib.contextmanager
def _stack_for_pyhocon() -> Iterator[None]:
    """pyparsing spends ~35 Python frames per nesting level: MAX_DEPTH levels
    need more than the default recursion limit."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 50 * MAX_DEPTH + 1000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _parse_hocon(text: str, variables: _Variables, file: str | None) -> dict:
    from pyhocon import ConfigFactory  # imported here: only HOCON files need it

    rewritten, blocks = _scan_hocon(text, variables, file)
    variables.raise_unset()  # before pyhocon: it would look unset names up as paths
    try:
        with _stack_for_pyhocon():
            tree = ConfigFactory.parse_string(rewritten, resolve=True)
    except ConfigError:
        raise
    except RecursionError:
        _fail("CONFIG.TOO_DEEP", {"what": "values (after substitutions) are", "limit": MAX_DEPTH}, file)
    except Exception as e:  # pyhocon and pyparsing errors carry a line number
        raise config_error([_hocon_problem(e, file)]) from None
    data = _plain(tree, file)
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
    return data


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
    text = str(e).strip()
    msg = text.splitlines()[0] if text else type(e).__name__
    line = getattr(e, "lineno", None)
    m = re.search(r"\(line:?\s*(\d+)", text) or re.search(r"line:?\s*(\d+)", msg)
    if line is None and m:
        line = int(m.group(1))
    unresolved = re.search(r"Cannot resolve variable \$\{(.+?)\}", text)
    if unresolved:
        return Problem("CONFIG.UNSET_VARIABLE", {"name": unresolved.group(1)[:200]}, Location(file, line=line))
    found = re.search(r"found (.{0,60}?)\s+\(at char \d+\), \(line:\d+, col:(\d+)\)", text)
    if found:  # pyparsing spells out its whole grammar; what it found is the useful part
        msg = f"unexpected {found.group(1)} at column {found.group(2)}"
    elif len(msg) > 200:
        msg = msg[:200] + "..."
    return Problem("CONFIG.SYNTAX", {"detail": msg}, Location(file, line=line))


def _unquote(key: str) -> str:
    """pyhocon keeps the quotes of a quoted key ("a.b"); the key is a.b."""
    if len(key) >= 2 and key[0] == key[-1] == '"':
        try:
            return json.loads(key)
        except ValueError:
            return key[1:-1]
    return key


def _plain(tree: Any, file: str | None, depth: int = 0, budget: list[int] | None = None) -> Any:
    """pyhocon's tree as dicts and lists; depth and size checked on the way,
    since substitutions (``b = [${a}, ${a}]``) can grow a tree the text did not show."""
    from pyhocon import ConfigTree

    budget = [MAX_ITEMS] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        _fail("CONFIG.TOO_MANY_ITEMS", {"limit": MAX_ITEMS}, file)
    if depth > MAX_DEPTH:
        _fail("CONFIG.TOO_DEEP", {"what": "values (after substitutions) are", "limit": MAX_DEPTH}, file)
    if isinstance(tree, ConfigTree):
        return {_unquote(k).replace(_EMPTY, ""): _plain(v, file, depth + 1, budget) for k, v in tree.items()}
    if isinstance(tree, dict):
        return {k: _plain(v, file, depth + 1, budget) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_plain(v, file, depth + 1, budget) for v in tree]
    if isinstance(tree, str) and _EMPTY in tree:
        return tree.replace(_EMPTY, "")
    return tree


# --------------------------------------------------------------------------
# YAML / JSON


def _parse_yaml_json(text: str, fmt: str, variables: _Variables, file: str | None) -> Any:
    if fmt == "json":
        _check_json_shape(text, file)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise config_error([Problem("CONFIG.SYNTAX", {"detail": e.msg}, Location(file, line=e.lineno))]) from None
        except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4300 digits
            raise config_error([Problem("CONFIG.SYNTAX", {"detail": str(e)[:200]}, Location(file))]) from None
        lines: dict[tuple[str, int], int] = {}
    else:
        data, lines = _yaml_load(text, file)
    if data is None:
        data = {}
    data = _substitute_tree(data, variables)
    if isinstance(data, dict):
        for section in PLUGIN_SECTIONS:
            sec = data.get(section)
            if isinstance(sec, list):
                data[section] = _blocks_from_list(sec, {i: ln for (s, i), ln in lines.items() if s == section})
            elif isinstance(sec, dict):  # mapping style: {FakeSource: {...}}
                data[section] = [{"__plugin__": k, "__line__": None, "__value__": v} for k, v in sec.items()]
    return data


_JSON_TOKEN = re.compile(r'["\[\]{},:]')
_JSON_STRING_REST = re.compile(r'(?:[^"\\]++|\\.)*+"', re.S)


def _check_json_shape(text: str, file: str | None) -> None:
    """Depth and item count from the brackets, before json.loads recurses."""
    depth = items = pos = 0
    while m := _JSON_TOKEN.search(text, pos):
        c, pos = m.group(), m.end()
        if c == '"':
            s = _JSON_STRING_REST.match(text, pos)
            if s is None:
                return  # unterminated string: json.loads reports it
            pos = s.end()
            continue
        items += 1
        if items > MAX_ITEMS:
            _fail("CONFIG.TOO_MANY_ITEMS", {"limit": MAX_ITEMS}, file, text.count("\n", 0, pos) + 1)
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, pos) + 1
                _fail("CONFIG.TOO_DEEP", {"what": "objects and lists are", "limit": MAX_DEPTH}, file, line)
        elif c in "]}":
            depth -= 1


# Explicit tags a job file may use; others (!!binary, !!set, !!timestamp, !foo) are refused.
_YAML_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map"))


def _yaml_load(text: str, file: str | None) -> tuple[Any, dict[tuple[str, int], int]]:
    """PyYAML's safe loader (C when available), after checking its event stream:
    no anchors or aliases, basic tags only, depth, item count, scalar length.

    Returns the data and the line of each item of the source/transform/sink lists.
    """
    import yaml

    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_yaml_events(yaml.parse(text, Loader=loader_cls), file)
        loader = loader_cls(text)
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        detail = getattr(e, "problem", None) or str(e)
        raise config_error(
            [Problem("CONFIG.SYNTAX", {"detail": str(detail)[:200]}, Location(file, line=mark.line + 1 if mark else None))]
        ) from None
    except (ValueError, TypeError) as e:  # e.g. an integer of more than 4300 digits
        raise config_error([Problem("CONFIG.SYNTAX", {"detail": str(e)[:200]}, Location(file))]) from None
    lines: dict[tuple[str, int], int] = {}
    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            if getattr(k, "value", None) in PLUGIN_SECTIONS and isinstance(v, yaml.SequenceNode):
                for idx, item in enumerate(v.value):
                    lines[(k.value, idx)] = item.start_mark.line + 1
    return _str_keys(data), lines


def _check_yaml_events(events: Iterator[Any], file: str | None) -> None:
    import yaml

    depth = items = 0
    for ev in events:
        line = ev.start_mark.line + 1 if ev.start_mark else None
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            _fail("CONFIG.YAML_ALIAS", {"what": "anchors (&name) and aliases (*name)"}, file, line)
        tag = getattr(ev, "tag", None)
        if tag and tag not in _YAML_TAGS and not (isinstance(ev, yaml.ScalarEvent) and tag == "!"):
            _fail("CONFIG.YAML_TAG", {"tag": tag[:100]}, file, line)
        if isinstance(ev, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            items += 1
            if items > MAX_ITEMS:
                _fail("CONFIG.TOO_MANY_ITEMS", {"limit": MAX_ITEMS}, file, line)
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                _fail("CONFIG.TOO_DEEP", {"what": "mappings and lists are", "limit": MAX_DEPTH}, file, line)
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(ev, yaml.ScalarEvent) and len(ev.value) > MAX_STRING_CHARS:
            _fail("CONFIG.STRING_TOO_LONG", {"length": len(ev.value), "limit": MAX_STRING_CHARS}, file, line)


def _str_keys(value: Any) -> Any:
    """Keys are strings in every format (YAML also allows numbers, booleans, dates)."""
    if isinstance(value, dict):
        return {_key_text(k): _str_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_str_keys(v) for v in value]
    return value


def _key_text(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, bool) or k is None:
        return json.dumps(k)
    return str(k)


def _substitute_tree(value: Any, variables: _Variables) -> Any:
    if isinstance(value, str):
        m = _VAR.fullmatch(value)
        if m and not m.group("opt"):  # a whole-value variable is typed (number, boolean, flat list)
            found, v = variables.typed(m.group("name"), m.group("default"), None)
            return v if found else value
        return variables.substitute_string(value)
    if isinstance(value, dict):
        return {k: _substitute_tree(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_tree(v, variables) for v in value]
    return value


# --------------------------------------------------------------------------
# common


def _to_raw_job(data: Any, file: str | None) -> RawJob:
    problems: list[Problem] = []
    warnings: list[Problem] = []
    if not isinstance(data, dict):
        raise config_error(
            [Problem("CONFIG.NOT_AN_OBJECT", {"what": "the job file", "got": type(data).__name__}, Location(file))]
        )
    for key in data:
        if key not in SECTIONS:
            warnings.append(Problem("CONFIG.UNKNOWN_SECTION", {"section": str(key)[:200]}, Location(file), "warning"))
    env = data.get("env") or {}
    if not isinstance(env, dict):
        problems.append(Problem("CONFIG.NOT_AN_OBJECT", {"what": "env", "got": type(env).__name__}, Location(file, "env")))
        env = {}
    count = sum(len(data[s]) for s in PLUGIN_SECTIONS if isinstance(data.get(s), (list, dict)))
    if count > MAX_PLUGINS:
        _fail("CONFIG.TOO_MANY_PLUGINS", {"count": count, "limit": MAX_PLUGINS}, file)
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
            loc = Location(file, section, idx, name if name is None else str(name), line)
            if name is None or name == "":
                problems.append(Problem("CONFIG.MISSING_PLUGIN_NAME", {}, loc))
                continue
            if not isinstance(value, dict):
                problems.append(
                    Problem("CONFIG.NOT_AN_OBJECT", {"what": f"plugin block {name}", "got": type(value).__name__}, loc)
                )
                continue
            blocks.append(RawBlock(section, idx, str(name), value, line, file))
    if problems:
        raise config_error(problems)
    return RawJob(file, env, tuple(blocks), tuple(warnings))
