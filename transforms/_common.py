"""Helpers shared by the built-in transforms."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pydantic import ValidationError, ValidationInfo, field_validator, model_validator

from sources._schema_options import flatten_dotted
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import TransformOptions, option_keys, validate_nested
from streaming_engine.schema import Column, TableSchema

# ``max_inputs`` of transforms that accept any number of input datasets.
UNLIMITED_INPUTS = 1_000_000


class MultiTableTransformOptions(TransformOptions):
    """TransformOptions whose ``table_transform`` entries are checked when the options are.

    The base class validates an entry only when a table reaches it
    (``Transform.options_for``); here every entry is validated up front, so a bad
    entry is reported as a config problem naming its ``table_path``.
    """

    @field_validator("table_transform", mode="before")
    @classmethod
    def _flatten_entries(cls, v: Any) -> Any:
        if isinstance(v, list):
            keys = option_keys(cls) | {"table_path"}
            return [flatten_dotted(e, keys) if isinstance(e, dict) else e for e in v]
        return v

    @model_validator(mode="after")
    def _check_table_transform(self, info: ValidationInfo) -> "MultiTableTransformOptions":
        seen: set[str] = set()
        for i, entry in enumerate(self.table_transform or (), 1):
            path = entry.get("table_path")
            if not isinstance(path, str) or not path:
                raise ValueError(f'table_transform[{i}] needs table_path = "database.table"')
            if path in seen:
                raise ValueError(f"table_transform lists table_path {path!r} twice; merge the two entries")
            seen.add(path)
            rest = {k: v for k, v in entry.items() if k != "table_path"}
            for key in ("table_transform", "table_match_regex", "plugin_input", "plugin_output"):
                if key in rest:
                    raise ValueError(f"table_transform[{i}] ({path}): {key} is not allowed inside table_transform")
            try:
                validate_nested(type(self), rest, info, ("table_transform", i - 1))
            except ValidationError as e:
                raise ValueError(f"table_transform[{i}] (table_path {path!r}): {summarize(e)}") from None
        return self


def summarize(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        loc = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def upper(v: Any) -> Any:
    return v.strip().upper() if isinstance(v, str) else v


def as_list(v: Any) -> Any:
    """Accept "a, b" as well as [a, b] for list options."""
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


def no_duplicates(option: str, values: list[str]) -> None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{option} lists {v!r} twice")
        seen.add(v)


def invalid(detail: str) -> SchemaError:
    return SchemaError("SCHEMA.INVALID", {"detail": detail})


def duplicate_column(table: TableSchema, column: str) -> SchemaError:
    return SchemaError("SCHEMA.DUPLICATE_COLUMN", {"column": column, "table": table.table_id})


def append_columns(table: TableSchema, new: list[Column]) -> TableSchema:
    """``table`` plus ``new`` columns at the end; a name clash is SCHEMA.DUPLICATE_COLUMN."""
    names = set(table.names)
    for c in new:
        if c.name in names:
            raise duplicate_column(table, c.name)
        names.add(c.name)
    return replace(table, columns=table.columns + tuple(new))


def renamed_columns(table: TableSchema, columns: list[Column], renames: dict[str, str]) -> TableSchema:
    """``table`` with ``columns`` (old name -> new name in ``renames``), primary key renamed along.

    The key survives only when all its columns are kept; a clash is SCHEMA.DUPLICATE_COLUMN.
    """
    seen: set[str] = set()
    for c in columns:
        if c.name in seen:
            raise duplicate_column(table, c.name)
        seen.add(c.name)
    pk = tuple(renames.get(k, k) for k in table.primary_key if k in renames)
    if len(pk) != len(table.primary_key):
        pk = ()
    return replace(table, columns=tuple(columns), primary_key=pk)


# Python `re` errors that Java's regex engine (used by Spark at run time) reports too.
_STRUCTURAL_REGEX_ERRORS = (
    "missing )", "unbalanced parenthesis", "unterminated character set", "nothing to repeat",
    "multiple repeat", "bad escape (end of pattern)", "min repeat greater than max repeat",
)  # fmt: skip


def check_java_regex(option: str, pattern: str) -> str:
    """ValueError for a regex that Spark (Java regex) would also reject.

    Patterns are compiled with Python's ``re`` as a stand-in; only structural
    errors are reported, since Java accepts syntax Python does not (``\\p{L}``,
    ``[\\w-\\.]``, ``\\Q...\\E``): those are left to Spark at run time.
    """
    try:
        re.compile(pattern)
    except re.error as e:
        if any(s in e.msg for s in _STRUCTURAL_REGEX_ERRORS):
            raise ValueError(f"{option} {pattern!r} is not a valid regular expression: {e}") from None
    return pattern
