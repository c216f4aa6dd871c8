"""SeaTunnel's ``schema { ... }`` block, shared by FakeSource, LocalFile and Delta.

A schema block declares the columns either as ``fields`` (name -> type, nested
objects are rows) or as ``columns`` (a list of {name, type, nullable,
defaultValue, comment}); optionally a ``primaryKey {name, columnNames}`` and
the ``table`` path ("db.table" or "db.schema.table").

Types are SeaTunnel type names turned into Spark DDL by
:func:`streaming_engine.schema.normalize_type`. On top of that this module
accepts SeaTunnel's inline row notation inside type strings
(``"map<string, {c_int = int, c_string = string}>"``, as in the FakeSource docs).

Table id of a source without an explicit table (see :func:`table_id`):
``schema.table`` if given, else the source's ``plugin_output``, else "default".
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from streaming_engine.errors import SchemaError, render
from streaming_engine.schema import Column, TableSchema, normalize_type, split_top

DEFAULT_TABLE_ID = "default"

# Flink CDC's schema.change.behavior values (CDC sources: what a table's changed columns do to a running job)
SchemaChangeBehavior = Literal["lenient", "exception", "ignore", "evolve", "try_evolve"]


def check_schema_change_behavior(v: str | None, where: str, evolves: str | None = None) -> str | None:
    """``v`` as given; evolve and try_evolve are refused with the reason ``evolves`` (a source that tells a
    rename from a drop and an add, passes None), which must say why the source cannot."""
    if v in ("evolve", "try_evolve") and evolves is not None:
        raise ValueError(f"{where} = {v}: {evolves}; set lenient (new columns reach the sinks, dropped ones stay), "
                         "exception or ignore")
    return v

_VECTOR_TYPES = {"float_vector", "float16_vector", "bfloat16_vector", "binary_vector", "sparse_float_vector"}
_TABLE_PART = re.compile(r"^[^.\s]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def spark_type(spec: Any) -> str:
    """SeaTunnel type (string or nested object) -> Spark DDL; ValueError when unknown."""
    spec = _inline_all(spec)
    try:
        return normalize_type(spec)
    except SchemaError as e:
        raise ValueError(render(e.condition, e.params)) from None


def _inline_all(spec: Any) -> Any:
    """:func:`_inline_rows` in a type string, or in every string of a nested row object."""
    if isinstance(spec, dict):
        return {k: _inline_all(v) for k, v in spec.items()}
    if isinstance(spec, str):
        if spec.strip().lower() in _VECTOR_TYPES:
            raise ValueError(f"type {spec!r} (a vector type) is not supported by this engine; use array<float> instead")
        return _inline_rows(spec)
    return spec


def _unquote(s: str) -> str:
    s = s.strip()
    return s[1:-1].strip() if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"`'" else s


def _inline_rows(t: str) -> str:
    """Rewrite a row inside a type string as ``struct<a: int, b: string>``: SeaTunnel's
    JSON form ``{"a": "int", "b": "string"}`` or HOCON's ``{a = int, b = string}``."""
    start = t.find("{")
    if start < 0:
        return t
    depth = 0
    for i in range(start, len(t)):
        if t[i] == "{":
            depth += 1
        elif t[i] == "}":
            depth -= 1
            if depth == 0:
                body = t[start + 1 : i]
                parts = []
                for part in split_top(body):
                    name, sep, typ = part.partition("=")
                    if not sep:
                        name, sep, typ = part.partition(":")
                    if not sep:
                        raise ValueError(f"row field {part!r} in type {t!r} needs the form name = type")
                    parts.append(f"{_unquote(name)}: {_inline_rows(_unquote(typ))}")
                return t[:start] + f"struct<{', '.join(parts)}>" + _inline_rows(t[i + 1 :])
    raise ValueError(f"unbalanced braces in type {t!r}")


def check_table_path(path: str) -> str:
    parts = path.split(".")
    if not 1 <= len(parts) <= 3 or not all(_TABLE_PART.match(p) for p in parts):
        raise ValueError(f"table {path!r} must look like table, database.table or database.schema.table")
    return path


class ColumnSpec(_Strict):
    name: str = Field(min_length=1, description="Column name.")
    type: str | dict[str, Any] = Field(description="SeaTunnel type name, e.g. int, string, decimal(10,2), array<int>.")
    nullable: bool = Field(True, description="Whether the column may hold nulls.")
    defaultValue: Any = Field(None, description="Value FakeSource generates for this column (CURRENT_TIMESTAMP etc. allowed).")
    comment: str | None = Field(None, description="Free-text comment.")
    columnLength: int | None = Field(None, ge=0, description="Declared length (informational).")
    columnScale: int | None = Field(None, ge=0, description="Declared scale (informational).")


class PrimaryKeySpec(_Strict):
    name: str | None = Field(None, description="Name of the primary key constraint.")
    columnNames: list[str] = Field(min_length=1, description="Columns forming the primary key.")


class SchemaBlock(_Strict):
    """SeaTunnel's ``schema`` option."""

    fields: dict[str, Any] | None = Field(None, description="Columns as name = type; a nested object declares a row.")
    columns: list[ColumnSpec] | None = Field(None, description="Columns as a list of {name, type, nullable, defaultValue, comment}.")
    primaryKey: PrimaryKeySpec | None = Field(None, description="Primary key: {name, columnNames = [...]}.")
    constraintKeys: list[dict[str, Any]] | None = Field(
        None, description="Constraint keys (accepted for compatibility; not used at plan time)."
    )
    table: str | None = Field(None, description='Table path of this schema, e.g. "db.table".')
    comment: str | None = Field(None, description="Table comment.")

    @model_validator(mode="after")
    def _check(self) -> "SchemaBlock":
        if (self.fields is None) == (self.columns is None):
            raise ValueError("schema needs exactly one of `fields` or `columns`")
        if self.fields is not None and not self.fields:
            raise ValueError("schema.fields is empty; declare at least one column")
        if self.columns is not None and not self.columns:
            raise ValueError("schema.columns is empty; declare at least one column")
        if self.table is not None:
            check_table_path(self.table)
        cols = self.column_list()  # raises ValueError on bad types / duplicates
        if self.primaryKey:
            names = {c.name for c in cols}
            for k in self.primaryKey.columnNames:
                if k not in names:
                    raise ValueError(f"primaryKey column {k!r} is not a declared column; columns: {', '.join(sorted(names))}")
        return self

    def column_list(self) -> tuple[Column, ...]:
        if self.fields is not None:
            cols = [Column(str(n), _typed(n, t)) for n, t in self.fields.items()]
        else:
            cols = [Column(c.name, _typed(c.name, c.type), c.nullable) for c in self.columns or ()]
        seen: set[str] = set()
        for c in cols:
            if c.name in seen:
                raise ValueError(f"column {c.name!r} is declared twice in schema")
            seen.add(c.name)
        return tuple(cols)

    def to_table(self, table_id: str) -> TableSchema:
        pk = tuple(self.primaryKey.columnNames) if self.primaryKey else ()
        return TableSchema(table_id, self.column_list(), pk)


def _typed(name: Any, spec: Any) -> str:
    try:
        return spark_type(spec)
    except ValueError as e:
        raise ValueError(f"column {name!r}: {e}") from None


def table_id(schema: SchemaBlock | None, plugin_output: str | None) -> str:
    """The id of a single-table source: schema.table > plugin_output > "default"."""
    if schema is not None and schema.table:
        return schema.table
    return plugin_output or DEFAULT_TABLE_ID


def flatten_dotted(options: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """Flatten nested dicts back into dotted keys, for items nested in lists
    (``tables_configs``) that the config loader hands over as written."""
    from streaming_engine.config.keys import flatten_options

    return flatten_options(options, known)


# The character sets Spark 4's csv, json and xml readers and writers accept
# (CharsetProvider.VALID_CHARSETS), by Python's codec name -> Spark's spelling.
_SPARK_CHARSETS = {
    "utf-8": "utf-8", "utf-16": "utf-16", "utf-16-be": "utf-16be", "utf-16-le": "utf-16le", "utf-32": "utf-32",
    "iso8859-1": "iso-8859-1", "ascii": "us-ascii",
}


def spark_charset(value: str) -> str:
    """``encoding`` in the spelling Spark accepts; ValueError naming the ones it
    reads and writes when Spark cannot (it would fail only at run time)."""
    import codecs

    try:
        name = codecs.lookup(value).name
    except LookupError:
        raise ValueError(f"encoding {value!r} is not a known character set") from None
    if name not in _SPARK_CHARSETS:
        raise ValueError(
            f"encoding {value!r}: Spark reads and writes files only in "
            f"{', '.join(sorted(set(_SPARK_CHARSETS.values())))}; convert the files (e.g. iconv) or use one of these"
        )
    return _SPARK_CHARSETS[name]


def file_format(v: Any, formats: tuple[str, ...], refused: dict[str, str]) -> Any:
    """``file_format_type`` of a file source or sink: one of ``formats``; a
    format SeaTunnel has and this engine refuses says why (``refused``)."""
    if v is None or v in formats:
        return v
    if v in refused:
        raise ValueError(f"file_format_type {v} is not supported by this engine: {refused[v]}")
    raise ValueError(f"file_format_type {v!r} is not a file format; use one of {', '.join(formats)}")


def one_of(option: str, v: str, allowed: tuple[str, ...]) -> str:
    if v not in allowed:
        raise ValueError(f"{option} {v!r}: use one of {', '.join(allowed)}")
    return v
