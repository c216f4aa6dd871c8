"""SeaTunnel's sink placeholders (``${table_name}`` ...) in paths and table names.

Supported: ``${database_name}``, ``${schema_name}``, ``${table_name}``,
``${table_full_name}`` (the whole table id), ``${primary_key}`` (key columns
joined by ","), ``${field_names}`` (all columns joined by ","). They are rendered
per table of the sink's input; a placeholder whose part the table lacks (no
database in "orders") is a SCHEMA.INCOMPATIBLE error naming the table.

Rendered values must stay names: a table id or column name that would move a
path out of the sink's configured root (``db./../../etc/x``: a slash, a backslash,
NUL, an empty part between dots, ``.`` or ``..``) is a SCHEMA.UNSAFE_TABLE_ID
error naming the table, the placeholder and the offending part (the DAG
builder adds the sink block).

A catalog table name (Delta's ``table``) is rendered by :func:`render_identifier`:
split into one to three parts at dots outside backquotes; a part that is not a
plain identifier (``2024``) is back-quoted for Spark's parser, and a part with
characters the session catalog refuses (``user-shop``) is an error at plan
time. Spark's catalog does not tell names apart by case, so two
tables whose names differ only by case are one target there
(:func:`check_distinct_targets` with ``ignore_case``).
"""

from __future__ import annotations

import re
from typing import Iterable

from streaming_engine.errors import SchemaError
from streaming_engine.schema import TableSchema

PLACEHOLDERS = ("database_name", "schema_name", "table_name", "table_full_name", "primary_key", "field_names")
_PH = re.compile(r"\$\{([^}]*)\}")
TABLE_PLACEHOLDERS = ("table_name", "table_full_name")


def check_template(option: str, value: str) -> str:
    """ValueError for unknown placeholders (``${...}`` not in PLACEHOLDERS)."""
    for name in _PH.findall(value):
        if name not in PLACEHOLDERS:
            raise ValueError(
                f"{option} uses unknown placeholder ${{{name}}}; available: "
                + ", ".join(f"${{{p}}}" for p in PLACEHOLDERS)
            )
    if "${" in _PH.sub("", value):
        raise ValueError(f"{option} has an unclosed '${{'")
    return value


def render(template: str, table: TableSchema, primary_key: Iterable[str] = ()) -> str:
    parts = table.table_id.split(".")
    pk = tuple(primary_key) or table.primary_key
    values = {
        "database_name": parts[0] if len(parts) > 1 else None,
        "schema_name": parts[1] if len(parts) > 2 else None,
        "table_name": parts[-1],
        "table_full_name": table.table_id,
        "primary_key": ",".join(pk) or None,
        "field_names": ",".join(table.names) or None,
    }

    def sub(m: re.Match[str]) -> str:
        value = values[m.group(1)]
        if value is None:
            raise SchemaError(
                "SCHEMA.INCOMPATIBLE",
                {"table": table.table_id, "detail": f"it has no {m.group(1).replace('_', ' ')} to fill ${{{m.group(1)}}}"},
            )
        problem = _unsafe(value, sep="." if m.group(1) == "table_full_name" else ",")
        if problem:
            raise SchemaError("SCHEMA.UNSAFE_TABLE_ID", {"table": table.table_id, "placeholder": m.group(1), "detail": problem})
        return value

    return _PH.sub(sub, template)


def _unsafe(value: str, sep: str) -> str | None:
    """Why ``value`` (names joined by ``sep``) may not go into a path, or None."""
    for part in value.split(sep):
        if part in ("", ".", ".."):
            shown = "it has an empty part" if not part else f"its part {part!r} is a relative directory"
            return f"{shown}; names joined by single dots are expected, so the path stays under the sink's root"
        for bad, what in (("/", "a '/'"), ("\\", "a '\\'"), ("\0", "a NUL character")):
            if bad in part:
                return f"its part {part!r} contains {what}, which would change the directory it is written to"
    return None


def check_distinct_targets(targets: list[tuple[str, str]], option: str, ignore_case: bool = False) -> None:
    """``targets`` = (table id, rendered target); two tables to one target is SCHEMA.INCOMPATIBLE.

    ``ignore_case``: targets are catalog table names, which Spark's catalog
    compares without case (``shop.Orders`` and ``shop.ORDERS`` are one table).
    """
    seen: dict[str, tuple[str, str]] = {}
    for table_id, target in targets:
        key = target.lower() if ignore_case else target
        if key in seen:
            other_id, other = seen[key]
            if other == target:
                detail = f"it would be written to {target!r} like table {other_id!r}; put ${{table_name}} (or ${{table_full_name}}) in {option}"
            else:
                detail = f"the catalog does not tell its table {target!r} apart from {other!r} of {other_id!r} (case differs only); rename one (TableRename)"
            raise SchemaError("SCHEMA.INCOMPATIBLE", {"table": table_id, "detail": detail})
        seen[key] = (table_id, target)


_QUOTED_OR_PLAIN = re.compile(r"`((?:[^`]|``)*)`|([^.`]+)")
_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CATALOG_NAME = re.compile(r"[A-Za-z0-9_]+")  # what Spark's session catalog and Hive's metastore accept


def render_identifier(template: str, table: TableSchema, primary_key: Iterable[str] = ()) -> str:
    """``template`` rendered for ``table`` as a catalog name Spark parses (``shop.`2024```).

    SCHEMA.INCOMPATIBLE when the result is not one to three non-empty names
    joined by dots (a part may be back-quoted in the template), or a name holds
    a character other than letters, digits and ``_``: Spark's session catalog
    refuses those only when the first epoch writes, after creating a directory.
    """
    rendered = render(template, table, primary_key)
    parts = identifier_parts(rendered)
    if parts is None or not 1 <= len(parts) <= 3 or any(not p for p in parts):
        raise SchemaError(
            "SCHEMA.INCOMPATIBLE",
            {"table": table.table_id, "detail": f"table name {rendered!r} is not one to three names joined by dots"},
        )
    bad = next((p for p in parts if not _CATALOG_NAME.fullmatch(p)), None)
    if bad is not None:
        raise SchemaError(
            "SCHEMA.INCOMPATIBLE",
            {"table": table.table_id, "detail": f"catalog names hold only letters, digits and _, not {bad!r}: "
             "replace the rest with TableRename, or write to a path"},
        )
    return ".".join(p if _PLAIN_IDENTIFIER.fullmatch(p) else f"`{p}`" for p in parts)


def identifier_parts(name: str) -> list[str] | None:
    """The names of a dotted catalog name (back-quoted parts unquoted), or None when it is malformed."""
    parts: list[str] = []
    i = 0
    while True:
        m = _QUOTED_OR_PLAIN.match(name, i)
        if m is None:
            return None
        parts.append(m.group(1).replace("``", "`") if m.group(1) is not None else m.group(2))
        i = m.end()
        if i == len(name):
            return parts
        if name[i] != ".":
            return None
        i += 1
