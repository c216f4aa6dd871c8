"""Replace: replace substrings of a string field (SeaTunnel Replace transform).

``pattern`` is a literal (``is_regex = false``, every occurrence is replaced) or
a regex (``is_regex = true``; ``replace_first = true`` replaces only the first
match). Compiles to Spark's regexp_replace / replace. The schema is unchanged;
``replace_field`` must be a string column.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, model_validator

from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import TableSchema
from transforms._common import MultiTableTransformOptions, check_java_regex, invalid


class ReplaceOptions(MultiTableTransformOptions):
    replace_field: str = Field(min_length=1, description="The string field whose value is rewritten.")
    pattern: str = Field(min_length=1, description="The text (or regex with is_regex = true) to replace.")
    replacement: str = Field(description="The text to put in its place.")
    is_regex: bool = Field(False, description="Treat pattern as a regular expression.")
    replace_first: bool = Field(False, description="Replace only the first match; only with is_regex = true.")

    @model_validator(mode="after")
    def _check(self) -> "ReplaceOptions":
        if self.replace_first and not self.is_regex:
            raise ValueError("replace_first only applies when is_regex = true; set is_regex = true or drop replace_first")
        if self.is_regex:
            check_java_regex("pattern", self.pattern)
            _parse_java_replacement(self.replacement)  # $N / ${name} / \\ escapes, as Java's replaceAll
        return self


@register
class Replace(Transform):
    name: ClassVar[str] = "Replace"
    seatunnel_page = "transform-v2/replace.md"
    Options = ReplaceOptions
    description = "Replaces a literal or regex pattern in a string field."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, ReplaceOptions)
        if options.replace_field not in table.names:
            raise missing_column(table, options.replace_field)
        col = table.column(options.replace_field)
        if col.type != "string":
            raise invalid(
                f"Replace needs a string field, but {col.name!r} of table {table.table_id!r} is {col.type}; "
                "cast it first (e.g. with the Sql transform)"
            )
        return table

    def columns(self, ctx, cols, table, options):
        from pyspark.sql import functions as F

        assert isinstance(options, ReplaceOptions)
        self.transform_table(table, options)
        target = cols[options.replace_field]
        if not options.is_regex:
            new = F.replace(target, F.lit(options.pattern), F.lit(options.replacement))
        elif options.replace_first:
            pattern, replacement = first_match_rewrite(options.pattern, options.replacement)
            new = F.regexp_replace(target, F.lit(pattern), F.lit(replacement))
        else:
            new = F.regexp_replace(target, F.lit(options.pattern), F.lit(options.replacement))
        return {c: new if c == options.replace_field else cols[c] for c in table.names}


def first_match_rewrite(pattern: str, replacement: str) -> tuple[str, str]:
    """Java's ``String.replaceFirst`` as a ``regexp_replace`` (which replaces every match).

    ``^((?s:.*?))(?:pattern)`` matches once, from the start of the text up to the
    end of the leftmost match of ``pattern`` (the lazy prefix tries the earliest
    position first, as a regex search does); the prefix is put back as ``$1``.
    Group numbers shift by one: ``\\N`` back references in the pattern and
    ``$N`` references in the replacement are renumbered (named groups are kept).
    """
    shifted = re.sub(r"(?<!\\)((?:\\\\)*)\\(\d+)", lambda m: f"{m.group(1)}\\{int(m.group(2)) + 1}", pattern)
    out = []
    for kind, value in _parse_java_replacement(replacement):
        if kind == "lit":
            out.append(re.sub(r"([\\$0-9])", r"\\\1", value))  # a digit after $N must stay literal
        elif isinstance(value, int):
            out.append(f"${value + 1}")
        else:
            out.append("${" + value + "}")
    return f"^((?s:.*?))(?:{shifted})", "$1" + "".join(out)


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
