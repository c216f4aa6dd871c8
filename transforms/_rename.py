"""Name conversion shared by FieldRename (column names) and TableRename (table names).

Order, as SeaTunnel applies it: ``replacements_with_regex`` (in list order), then
``convert_case``, then ``prefix`` and ``suffix``. Replacements use Java regex
replacement syntax (``$1``, ``${name}``, ``\\$`` for a literal dollar), evaluated
with Python's ``re``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from transforms._common import MultiTableTransformOptions, upper


class Replacement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    replace_from: str = Field(min_length=1, description="Regex (or exact name with is_regex = false) to replace.")
    replace_to: str = Field(description="Replacement; $1 / ${name} refer to groups.")
    is_regex: bool = Field(True, description="Treat replace_from as a regex (default) or as an exact whole name.")

    @model_validator(mode="after")
    def _compile(self) -> "Replacement":
        if self.is_regex:
            try:
                re.compile(self.replace_from)
            except re.error as e:
                raise ValueError(f"replace_from {self.replace_from!r} is not a valid regex: {e}") from None
            _parse_java_replacement(self.replace_to)
        return self

    def apply(self, name: str) -> str:
        if not self.is_regex:
            return self.replace_to if name == self.replace_from else name
        return java_replace(self.replace_from, self.replace_to, name)


class RenameOptions(MultiTableTransformOptions):
    convert_case: Literal["UPPER", "LOWER"] | None = Field(None, description="Change the case: UPPER or LOWER.")
    prefix: str | None = Field(None, description="Prefix added to the name.")
    suffix: str | None = Field(None, description="Suffix added to the name.")
    replacements_with_regex: list[Replacement] | None = Field(
        None, description="Rules {replace_from, replace_to} applied in order before the case change."
    )

    _case = field_validator("convert_case", mode="before")(lambda cls, v: upper(v))

    @model_validator(mode="after")
    def _something(self) -> "RenameOptions":
        if self.table_transform is None and not (
            self.convert_case or self.prefix or self.suffix or self.replacements_with_regex
        ):
            raise ValueError("set at least one of convert_case, prefix, suffix or replacements_with_regex")
        return self

    def convert(self, name: str) -> str:
        for r in self.replacements_with_regex or ():
            name = r.apply(name)
        if self.convert_case == "UPPER":
            name = name.upper()
        elif self.convert_case == "LOWER":
            name = name.lower()
        return f"{self.prefix or ''}{name}{self.suffix or ''}"


def _parse_java_replacement(repl: str) -> list[tuple[str, Any]]:
    """Split a Java replacement string into ("lit", text) and ("group", int|str) parts."""
    parts: list[tuple[str, Any]] = []
    i, lit = 0, ""
    while i < len(repl):
        ch = repl[i]
        if ch == "\\":
            if i + 1 >= len(repl):
                raise ValueError(f"replacement {repl!r} ends with a lone backslash")
            lit += repl[i + 1]
            i += 2
        elif ch == "$":
            m = re.match(r"\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}", repl[i:])
            if not m:
                raise ValueError(f"replacement {repl!r}: '$' must be followed by a group number or {{name}}; write \\$ for a dollar")
            if lit:
                parts.append(("lit", lit))
                lit = ""
            parts.append(("group", int(m.group(1)) if m.group(1) else m.group(2)))
            i += m.end()
        else:
            lit += ch
            i += 1
    if lit:
        parts.append(("lit", lit))
    return parts


def java_replace(pattern: str, repl: str, text: str, first: bool = False) -> str:
    """Java's String.replaceAll / replaceFirst."""
    parts = _parse_java_replacement(repl)

    def sub(m: re.Match[str]) -> str:
        return "".join(v if kind == "lit" else (m.group(v) or "") for kind, v in parts)

    return re.sub(pattern, sub, text, count=1 if first else 0)
