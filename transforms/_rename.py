"""Name conversion shared by FieldRename (column names) and TableRename (table names).

SeaTunnel's ``convertName`` (FieldRenameTransform, TableRenameTransform), step by step:

1. every rule of ``replacements_with_regex`` is matched against the ORIGINAL name
   (a regex finds every match; ``is_regex = false`` matches the whole name
   exactly); the LAST rule that matched wins, the others are ignored;
2. ``convert_case`` turns the whole name to upper or lower case;
3. the winning rule's ``replace_to`` (trimmed, literal: ``$1`` is two
   characters, not a group) is put in place of each matched range, in the
   case-converted name, so ``replace_to`` keeps its own case;
4. ``prefix`` and ``suffix`` (trimmed; blank ones are ignored) are added.

TableRename also converts the case of the database and schema parts of a
table path; rules, prefix and suffix apply to the table part only.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from transforms._common import MultiTableTransformOptions, upper


class Replacement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    replace_from: str = Field(min_length=1, description="Regex (or exact name with is_regex = false) to replace.")
    replace_to: str = Field(description="Literal text put in place of each match (trimmed; not case-converted).")
    is_regex: bool = Field(True, description="Treat replace_from as a regex (default) or as an exact whole name.")

    @model_validator(mode="after")
    def _compile(self) -> "Replacement":
        if self.is_regex:
            try:
                re.compile(self.replace_from)
            except re.error as e:
                raise ValueError(f"replace_from {self.replace_from!r} is not a valid regex: {e}") from None
        return self

    def matches(self, name: str) -> list[tuple[int, int]]:
        """The (start, end) ranges of ``name`` this rule replaces (empty: no match)."""
        if not self.is_regex:
            return [(0, len(name))] if name == self.replace_from else []
        return [m.span() for m in re.finditer(self.replace_from, name)]


class RenameOptions(MultiTableTransformOptions):
    convert_case: Literal["UPPER", "LOWER"] | None = Field(None, description="Change the case: UPPER or LOWER.")
    prefix: str | None = Field(None, description="Prefix added to the name.")
    suffix: str | None = Field(None, description="Suffix added to the name.")
    replacements_with_regex: list[Replacement] | None = Field(
        None, description="Rules {replace_from, replace_to, is_regex}; the last rule that matches the original name wins."
    )

    _case = field_validator("convert_case", mode="before")(lambda cls, v: upper(v))

    @model_validator(mode="after")
    def _something(self) -> "RenameOptions":
        if self.table_transform is None and not (
            self.convert_case or self.prefix or self.suffix or self.replacements_with_regex
        ):
            raise ValueError("set at least one of convert_case, prefix, suffix or replacements_with_regex")
        return self

    def convert_case_of(self, name: str) -> str:
        if self.convert_case == "UPPER":
            return name.upper()
        if self.convert_case == "LOWER":
            return name.lower()
        return name

    def convert(self, name: str) -> str:
        """``name`` renamed by SeaTunnel's rules (see the module docstring)."""
        ranges: list[tuple[int, int]] = []
        replace_to = ""
        for rule in self.replacements_with_regex or ():
            found = rule.matches(name)
            if found:
                ranges, replace_to = found, rule.replace_to.strip()
        name = self.convert_case_of(name)
        offset = 0
        for start, end in ranges:
            name = name[: start + offset] + replace_to + name[end + offset :]
            offset += len(replace_to) - (end - start)
        prefix, suffix = (self.prefix or "").strip(), (self.suffix or "").strip()
        return f"{prefix}{name}{suffix}"
