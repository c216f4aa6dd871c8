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


def check_distinct_targets(targets: list[tuple[str, str]], option: str) -> None:
    """``targets`` = (table id, rendered target); two tables to one target is SCHEMA.INCOMPATIBLE."""
    seen: dict[str, str] = {}
    for table_id, target in targets:
        if target in seen:
            raise SchemaError(
                "SCHEMA.INCOMPATIBLE",
                {
                    "table": table_id,
                    "detail": f"it would be written to {target!r} like table {seen[target]!r}; "
                    f"put ${{table_name}} (or ${{table_full_name}}) in {option}",
                },
            )
        seen[target] = table_id
