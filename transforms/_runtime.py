"""Run-time helpers shared by the built-in transforms (Spark is imported lazily).

Frames are flat DataFrames: the metadata columns ``__table``, ``__kind``,
``__seq`` first, then the table's columns exactly as the plan-time schema says
(names, order, Spark types). The helpers here build such frames from column
expressions and convert Arrow batches to the plan-time Arrow schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from streaming_engine.runtime import rows
from streaming_engine.schema import TableSchema

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

# Put in a run-time failure message, it tells the runner that a restart cannot
# help (the same input fails the same way again): see runtime/runner.py.
TERMINAL = "[terminal]"


col = rows.column  # a cached, always-quoted column reference


def meta() -> list["SparkColumn"]:
    return [col(c) for c in rows.META]


def project(df: "DataFrame", columns: Iterable["SparkColumn"]) -> "DataFrame":
    """``df`` with the metadata columns first, then ``columns``."""
    return df.select(*meta(), *columns)


def with_metadata(df: "DataFrame", table: str | None = None, kind: str | None = None) -> "DataFrame":
    """``df`` with ``__table`` and/or ``__kind`` replaced by constants, column order kept."""
    from pyspark.sql import functions as F

    out = []
    for name in df.columns:
        if name == rows.TABLE and table is not None:
            out.append(F.lit(table).alias(rows.TABLE))
        elif name == rows.KIND and kind is not None:
            out.append(F.lit(kind).alias(rows.KIND))
        else:
            out.append(col(name))
    return df.select(*out)


def arrow_schema(table: TableSchema, ctx: Any = None) -> "pa.Schema":
    """The Arrow schema Spark expects from a mapInArrow producing ``table`` (driver only: parses DDL).

    Timestamps are UTC instants (any time zone is the same instant to Spark);
    strings and binaries are large types when the session asks for them.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    large = False
    if ctx is not None:
        try:
            large = str(ctx.spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower() == "true"
        except Exception:  # pragma: no cover
            large = False
    return to_arrow_schema(rows.table_struct(table), timezone="UTC", prefers_large_types=large)


def session_time_zone(ctx: Any) -> str:
    try:
        return ctx.spark.conf.get("spark.sql.session.timeZone") or "UTC"
    except Exception:  # pragma: no cover - a session always has one
        return "UTC"


class TransformFailure(Exception):
    """A transform rejected a row at run time (raised inside Python workers).

    The message starts with the terminal marker and names the transform vertex
    and table, so the job's error says which transform and rule failed.
    """


def failure(vertex_id: str, table_id: str, detail: str) -> TransformFailure:
    return TransformFailure(f"{TERMINAL} {vertex_id} on table {table_id}: {detail}")


def to_schema(columns: dict[str, "pa.Array"], schema: "pa.Schema", what: str) -> "pa.RecordBatch":
    """A RecordBatch of exactly ``schema`` from arrays by name (cast where the type differs)."""
    import pyarrow as pa

    arrays = []
    for field in schema:
        if field.name not in columns:
            raise KeyError(field.name)
        arr = columns[field.name]
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if not arr.type.equals(field.type):
            try:
                arr = arr.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise TypeError(f"{what}: column {field.name!r} of type {arr.type} cannot be cast to {field.type}: {e}") from None
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
