"""A small JSONPath evaluator (Jayway JsonPath syntax, as SeaTunnel's JsonPath transform uses).

Supported: ``$`` root; ``.name`` / ``['name']`` / ``["name"]`` members;
``['a','b']`` several members (gives an object of those present); ``[n]`` /
``[-n]`` / ``[n,m]`` indexes; ``[start:end]`` slices; ``*`` / ``[*]``
wildcards; ``..`` deep scan; filters ``[?(<expr>)]`` with ``@`` (current
item) and ``$`` paths, literals (numbers, 'strings', true, false, null, [lists]),
``== != < <= > >= =~ /regex/[i] in nin``, ``&&``, ``||``, ``!`` and
parentheses; a bare path in a filter tests that it exists. Functions such as
``length()`` are not supported.

As Jayway's default configuration (which SeaTunnel uses): a definite path
(members and single indexes only) gives its value and raises PathNotFound when
nothing is there; any other path gives the list of matches (possibly empty).

Pure Python with no Spark import: compiled paths are plain picklable objects
evaluated inside Python workers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MISSING = object()


class JsonPathSyntaxError(ValueError):
    pass


class PathNotFound(LookupError):
    """A definite path that matches nothing (Jayway's PathNotFoundException)."""


# -- path model --------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    names: tuple[str, ...]  # one name, or several (['a','b'])


@dataclass(frozen=True)
class Index:
    indexes: tuple[int, ...]


@dataclass(frozen=True)
class Slice:
    start: int | None
    end: int | None


@dataclass(frozen=True)
class Wildcard:
    pass


@dataclass(frozen=True)
class Filter:
    expr: Any


@dataclass(frozen=True)
class Deep:
    """``..`` followed by a selector: the selector applied to every node below (and at) the current one."""

    selector: Any


@dataclass(frozen=True)
class Path:
    text: str
    root: str  # "$" or "@"
    steps: tuple[Any, ...]

    @property
    def definite(self) -> bool:
        for n, s in enumerate(self.steps):
            if isinstance(s, Member) and (len(s.names) == 1 or n == len(self.steps) - 1):
                continue  # several members as the last step merge into one object (Jayway)
            if isinstance(s, Index) and len(s.indexes) == 1:
                continue
            return False
        return True

    def read(self, document: Any) -> Any:
        """Jayway ``read``: the value (definite path; PathNotFound if none) or the list of matches."""
        nodes = self.nodes(document, document)
        if self.definite:
            if not nodes:
                raise PathNotFound(f"no results for path {self.text}")
            return nodes[0]
        return nodes

    def nodes(self, current: Any, root: Any) -> list[Any]:
        nodes = [current]
        for step in self.steps:
            out: list[Any] = []
            for node in nodes:
                _apply(step, node, root, out)
            nodes = out
        return nodes


def _apply(step: Any, node: Any, root: Any, out: list[Any]) -> None:
    if isinstance(step, Member):
        if isinstance(node, dict):
            if len(step.names) == 1:
                if step.names[0] in node:
                    out.append(node[step.names[0]])
            else:
                picked = {n: node[n] for n in step.names if n in node}
                if picked:
                    out.append(picked)
    elif isinstance(step, Index):
        if isinstance(node, list):
            for i in step.indexes:
                if -len(node) <= i < len(node):
                    out.append(node[i])
    elif isinstance(step, Slice):
        if isinstance(node, list):
            out.extend(node[step.start : step.end])
    elif isinstance(step, Wildcard):
        if isinstance(node, dict):
            out.extend(node.values())
        elif isinstance(node, list):
            out.extend(node)
    elif isinstance(step, Filter):
        items = node if isinstance(node, list) else [node] if isinstance(node, dict) else []
        for item in items:
            if _truthy(step.expr, item, root):
                out.append(item)
    elif isinstance(step, Deep):
        for sub in _descendants(node):
            if isinstance(step.selector, Filter):
                # Jayway applies a deep-scan filter to the items of every array found
                if isinstance(sub, list):
                    _apply(step.selector, sub, root, out)
            else:
                _apply(step.selector, sub, root, out)


def _descendants(node: Any):
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _descendants(v)
    elif isinstance(node, list):
        for v in node:
            yield from _descendants(v)


# -- filter expressions --------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class Regex:
    pattern: str
    flags: int


@dataclass(frozen=True)
class Compare:
    op: str
    left: Any
    right: Any


@dataclass(frozen=True)
class BoolOp:
    op: str  # && || !
    args: tuple[Any, ...]


def _value(operand: Any, item: Any, root: Any) -> Any:
    if isinstance(operand, Literal):
        return operand.value
    if isinstance(operand, Path):
        nodes = operand.nodes(item if operand.root == "@" else root, root)
        if operand.definite:
            return nodes[0] if nodes else MISSING
        return nodes
    return operand


def _truthy(expr: Any, item: Any, root: Any) -> bool:
    if isinstance(expr, BoolOp):
        if expr.op == "!":
            return not _truthy(expr.args[0], item, root)
        if expr.op == "&&":
            return all(_truthy(a, item, root) for a in expr.args)
        return any(_truthy(a, item, root) for a in expr.args)
    if isinstance(expr, Compare):
        return _compare(expr, item, root)
    v = _value(expr, item, root)  # a bare path: does it exist?
    if isinstance(expr, Path) and not expr.definite:
        return bool(v)
    return v is not MISSING and (not isinstance(expr, Literal) or bool(v))


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _compare(e: Compare, item: Any, root: Any) -> bool:
    left = _value(e.left, item, root)
    if e.op == "=~":
        assert isinstance(e.right, Regex)
        return isinstance(left, str) and re.fullmatch(e.right.pattern, left, e.right.flags) is not None
    right = _value(e.right, item, root)
    if left is MISSING or right is MISSING:
        return e.op == "!=" and not (left is MISSING and right is MISSING)
    if e.op in ("in", "nin"):
        found = isinstance(right, list) and any(_equal(left, r) for r in right)
        return found if e.op == "in" else not found
    if e.op == "==":
        return _equal(left, right)
    if e.op == "!=":
        return not _equal(left, right)
    if _num(left) and _num(right) or isinstance(left, str) and isinstance(right, str):
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[e.op]
    return False


def _equal(a: Any, b: Any) -> bool:
    if _num(a) and _num(b):
        return float(a) == float(b)
    return type(a) is type(b) and a == b


# -- parser --------------------------------------------------------------------

_NAME = re.compile(r"[^.\[\]()\s=!<>&|,'\"@$~]+")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.i = 0

    def error(self, what: str) -> JsonPathSyntaxError:
        return JsonPathSyntaxError(f"invalid JSONPath {self.text!r} at position {self.i}: {what}")

    def peek(self, s: str) -> bool:
        return self.text.startswith(s, self.i)

    def skip_ws(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def expect(self, s: str) -> None:
        self.skip_ws()
        if not self.peek(s):
            raise self.error(f"expected {s!r}")
        self.i += len(s)

    # path := ('$' | '@') step*
    def path(self, in_filter: bool = False) -> Path:
        start = self.i
        root = self.text[self.i]
        self.i += 1
        steps: list[Any] = []
        while self.i < len(self.text):
            if self.peek(".."):
                self.i += 2
                if self.peek("["):
                    steps.append(Deep(self.bracket()))
                elif self.peek("*"):
                    self.i += 1
                    steps.append(Deep(Wildcard()))
                else:
                    steps.append(Deep(Member((self.name(),))))
            elif self.peek("."):
                self.i += 1
                if self.peek("*"):
                    self.i += 1
                    steps.append(Wildcard())
                else:
                    name = self.name()
                    if self.peek("("):
                        raise self.error(f"functions such as {name}() are not supported")
                    steps.append(Member((name,)))
            elif self.peek("["):
                steps.append(self.bracket())
            elif in_filter:
                break
            else:
                raise self.error(f"unexpected {self.text[self.i]!r}")
        return Path(self.text[start : self.i], root, tuple(steps))

    def name(self) -> str:
        m = _NAME.match(self.text, self.i)
        if not m:
            raise self.error("expected a member name")
        self.i = m.end()
        return m.group()

    def string(self) -> str:
        quote = self.text[self.i]
        self.i += 1
        out = []
        while self.i < len(self.text) and self.text[self.i] != quote:
            if self.text[self.i] == "\\" and self.i + 1 < len(self.text):
                self.i += 1
            out.append(self.text[self.i])
            self.i += 1
        if self.i >= len(self.text):
            raise self.error("unterminated string")
        self.i += 1
        return "".join(out)

    def integer(self) -> int:
        m = re.compile(r"-?\d+").match(self.text, self.i)
        if not m:
            raise self.error("expected an integer")
        self.i = m.end()
        return int(m.group())

    def bracket(self) -> Any:
        self.expect("[")
        self.skip_ws()
        if self.peek("?"):
            self.i += 1
            self.expect("(")
            expr = self.or_expr()
            self.expect(")")
            self.expect("]")
            return Filter(expr)
        if self.peek("*"):
            self.i += 1
            self.expect("]")
            return Wildcard()
        if self.peek("'") or self.peek('"'):
            names = [self.string()]
            self.skip_ws()
            while self.peek(","):
                self.i += 1
                self.skip_ws()
                if not (self.peek("'") or self.peek('"')):
                    raise self.error("expected a quoted member name")
                names.append(self.string())
                self.skip_ws()
            self.expect("]")
            return Member(tuple(names))
        if self.peek(":"):
            start = None
        else:
            start = self.integer()
        self.skip_ws()
        if self.peek(":"):
            self.i += 1
            self.skip_ws()
            end = None if self.peek("]") else self.integer()
            self.expect("]")
            return Slice(start, end)
        indexes = [start]
        while self.peek(","):
            self.i += 1
            self.skip_ws()
            indexes.append(self.integer())
            self.skip_ws()
        self.expect("]")
        return Index(tuple(i for i in indexes if i is not None))

    # filter expressions
    def or_expr(self) -> Any:
        args = [self.and_expr()]
        while True:
            self.skip_ws()
            if not self.peek("||"):
                break
            self.i += 2
            args.append(self.and_expr())
        return args[0] if len(args) == 1 else BoolOp("||", tuple(args))

    def and_expr(self) -> Any:
        args = [self.unary()]
        while True:
            self.skip_ws()
            if not self.peek("&&"):
                break
            self.i += 2
            args.append(self.unary())
        return args[0] if len(args) == 1 else BoolOp("&&", tuple(args))

    def unary(self) -> Any:
        self.skip_ws()
        if self.peek("!") and not self.peek("!="):
            self.i += 1
            return BoolOp("!", (self.unary(),))
        if self.peek("("):
            self.i += 1
            e = self.or_expr()
            self.expect(")")
            return e
        left = self.operand()
        self.skip_ws()
        for op in ("==", "!=", "<=", ">=", "=~", "<", ">", " in ", " nin "):
            probe = op.strip()
            if self.peek(probe) and (probe.isalpha() is False or self._word(probe)):
                self.i += len(probe)
                self.skip_ws()
                if probe == "=~":
                    return Compare(probe, left, self.regex())
                return Compare(probe, left, self.operand())
        return left

    def _word(self, w: str) -> bool:
        end = self.i + len(w)
        return end >= len(self.text) or not self.text[end].isalnum()

    def regex(self) -> Regex:
        if not self.peek("/"):
            raise self.error("expected /regex/ after =~")
        end = self.i + 1
        while end < len(self.text) and self.text[end] != "/":
            end += 2 if self.text[end] == "\\" else 1
        if end >= len(self.text):
            raise self.error("unterminated /regex/")
        pattern = self.text[self.i + 1 : end]
        self.i = end + 1
        flags = 0
        while self.i < len(self.text) and self.text[self.i].isalpha():
            if self.text[self.i] == "i":
                flags |= re.IGNORECASE
            self.i += 1
        try:
            re.compile(pattern)
        except re.error as e:
            raise self.error(f"bad regex: {e}") from None
        return Regex(pattern, flags)

    def operand(self) -> Any:
        self.skip_ws()
        if self.peek("@") or self.peek("$"):
            return self.path(in_filter=True)
        if self.peek("'") or self.peek('"'):
            return Literal(self.string())
        if self.peek("["):
            self.i += 1
            items = []
            self.skip_ws()
            while not self.peek("]"):
                item = self.operand()
                if not isinstance(item, Literal):
                    raise self.error("lists in filters may only hold literals")
                items.append(item.value)
                self.skip_ws()
                if self.peek(","):
                    self.i += 1
                    self.skip_ws()
                elif not self.peek("]"):
                    raise self.error("expected ',' or ']'")
            self.i += 1
            return Literal(items)
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.peek(word) and self._word(word):
                self.i += len(word)
                return Literal(value)
        m = _NUMBER.match(self.text, self.i)
        if m:
            self.i = m.end()
            text = m.group()
            return Literal(float(text) if any(ch in text for ch in ".eE") else int(text))
        raise self.error("expected a value, @path or $path")


def compile_path(text: str) -> Path:
    """Parse a JSONPath; JsonPathSyntaxError (a ValueError) says what is wrong."""
    text = text.strip()
    if not text.startswith("$"):
        raise JsonPathSyntaxError(f'path {text!r} must start with "$" (the document root), e.g. "$.data.id"')
    p = _Parser(text)
    path = p.path()
    if p.i != len(text):  # pragma: no cover - path() consumes everything or raises
        raise p.error("unexpected trailing text")
    return path
