"""JSONPath syntax (Jayway JsonPath, as SeaTunnel's JsonPath transform uses) and
what of it the engine evaluates natively.

:func:`compile_path` parses the whole Jayway syntax (so a path that is wrong
is reported as such) and keeps only *definite* paths, the ones Spark can
evaluate with exactly Jayway's result (:mod:`transforms._jsonpath_catalyst`):

- ``$`` the document itself;
- ``.name``, ``['name']``, ``["name"]`` object members;
- ``[n]`` an array element, ``[-n]`` counted from the end.

Everything else is refused at plan time with :class:`UnsupportedJsonPath` (a
``ValueError``, so a config error naming the path and the feature), never
evaluated differently: wildcards ``*`` / ``[*]``, deep scan ``..``, slices
``[a:b]``, unions ``['a','b']`` / ``[0,1]``, filters ``[?(...)]`` and functions
such as ``length()``. (Jayway returns a list for those, built in an order and
with a JSON rendering that Spark's JSON functions do not reproduce exactly.)

Plain data, no Spark import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


class JsonPathSyntaxError(ValueError):
    pass


class UnsupportedJsonPath(ValueError):
    """Valid Jayway syntax the engine does not evaluate natively (refused at plan time)."""


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
    text: str


@dataclass(frozen=True)
class Deep:
    """``..`` followed by a selector."""

    selector: Any


@dataclass(frozen=True)
class Function:
    name: str


@dataclass(frozen=True)
class Path:
    """A definite path: ``steps`` are member names (str) and array indexes (int)."""

    text: str
    steps: tuple[str | int, ...]


_FEATURE = {
    Wildcard: "a wildcard (* / [*])",
    Slice: "an array slice ([start:end])",
    Filter: "a filter ([?(...)])",
    Deep: "a deep scan (..)",
    Function: "a function call",
}


def _refusal(text: str, step: Any) -> UnsupportedJsonPath:
    if isinstance(step, Member):
        feature = f"a union of members [{', '.join(repr(n) for n in step.names)}]"
    elif isinstance(step, Index):
        feature = f"a union of indexes [{', '.join(map(str, step.indexes))}]"
    elif isinstance(step, Function):
        feature = f"the function {step.name}()"
    else:
        feature = _FEATURE[type(step)]
    return UnsupportedJsonPath(
        f"path {text!r} uses {feature}: not evaluated by this engine (definite paths only: $.a, ['a'], [0], [-1]); "
        "extract the enclosing object or array and process it downstream"
    )


# -- parser --------------------------------------------------------------------

_NAME = re.compile(r"[^.\[\]()\s=!<>&|,'\"@$~]+")


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

    def steps(self) -> list[Any]:
        self.i = 1  # after "$"
        out: list[Any] = []
        while self.i < len(self.text):
            if self.peek(".."):
                self.i += 2
                if self.peek("["):
                    out.append(Deep(self.bracket()))
                elif self.peek("*"):
                    self.i += 1
                    out.append(Deep(Wildcard()))
                else:
                    out.append(Deep(Member((self.name(),))))
            elif self.peek("."):
                self.i += 1
                if self.peek("*"):
                    self.i += 1
                    out.append(Wildcard())
                else:
                    name = self.name()
                    if self.peek("("):
                        self.i += 1
                        self.skip_ws()
                        self.expect(")")
                        out.append(Function(name))
                    else:
                        out.append(Member((name,)))
            elif self.peek("["):
                out.append(self.bracket())
            else:
                raise self.error(f"unexpected {self.text[self.i]!r}")
        return out

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
            start = self.i
            depth = 0
            while self.i < len(self.text):  # up to the "]" closing the filter (quotes and brackets balanced)
                c = self.text[self.i]
                if c in "'\"":
                    self.string()
                    continue
                if c in "([":
                    depth += 1
                elif c in ")]":
                    if depth == 0 and c == "]":
                        break
                    depth -= 1
                self.i += 1
            if self.i >= len(self.text):
                raise self.error("unterminated filter")
            self.i += 1
            return Filter(self.text[start : self.i - 1].strip())
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
        start = None if self.peek(":") else self.integer()
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


def parse_steps(text: str) -> list[Any]:
    """Every step of a Jayway path (syntax only); JsonPathSyntaxError when it is not one."""
    text = text.strip()
    if not text.startswith("$"):
        raise JsonPathSyntaxError(f'path {text!r} must start with "$" (the document root), e.g. "$.data.id"')
    return _Parser(text).steps()


def compile_path(text: str) -> Path:
    """A definite path, or JsonPathSyntaxError / UnsupportedJsonPath (both ValueErrors) saying why not."""
    text = text.strip()
    steps: list[str | int] = []
    for step in parse_steps(text):
        if isinstance(step, Member) and len(step.names) == 1:
            steps.append(step.names[0])
        elif isinstance(step, Index) and len(step.indexes) == 1:
            steps.append(step.indexes[0])
        else:
            raise _refusal(text, step)
    return Path(text, tuple(steps))


def render(steps: tuple[str | int, ...]) -> str:
    """Jayway's own rendering of a definite path (``$['a'][0]``), for messages."""
    return "$" + "".join(f"[{s}]" if isinstance(s, int) else "['" + s.replace("'", "\\'") + "']" for s in steps)
