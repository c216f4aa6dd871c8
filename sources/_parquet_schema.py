"""Plan-time schema of existing Parquet files, read from a file footer with pyarrow (no Spark).

Columns come from the footer of the first data file; Hive-style partition
directories (``key=value``) between the root and that file add columns, as
Spark's partition discovery does.
"""

from __future__ import annotations

import os
import re

from streaming_engine.errors import SchemaError
from streaming_engine.schema import Column, TableSchema


def find_parquet_file(path: str, file_filter_pattern: str | None = None) -> str | None:
    """``path`` itself if it is a file, else the first data file under it (sorted, recursive).

    Hidden files and Spark/Hadoop bookkeeping files ("_SUCCESS", ".crc") are skipped.
    """
    if os.path.isfile(path):
        return path
    try:
        pattern = re.compile(file_filter_pattern) if file_filter_pattern else None
    except re.error:  # Java-only syntax: Python cannot apply it, so do not filter here
        pattern = None
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for f in sorted(files):
            if f.startswith((".", "_")) or f.endswith(".crc"):
                continue
            if pattern is not None and not pattern.search(f):
                continue
            return os.path.join(root, f)
    return None


def read_parquet_table(table_id: str, path: str, file_filter_pattern: str | None = None) -> TableSchema:
    file = find_parquet_file(path, file_filter_pattern)
    if file is None:
        raise SchemaError(
            "SCHEMA.INVALID",
            {"detail": f"no Parquet file under {path!r} to read the schema from; declare `schema` in the LocalFile source"},
        )
    import pyarrow.parquet as pq  # only needed when a schema is inferred

    try:
        arrow_schema = pq.read_schema(file)
    except Exception as e:  # corrupt or not Parquet
        raise SchemaError("SCHEMA.INVALID", {"detail": f"cannot read the Parquet schema of {file!r}: {e}"}) from None
    cols = [Column(f.name, arrow_to_ddl(f.type), f.nullable) for f in arrow_schema]
    names = {c.name for c in cols}
    cols += [c for c in partition_columns(path, file) if c.name not in names]
    return TableSchema(table_id, tuple(cols))


def partition_columns(root: str, file: str) -> list[Column]:
    """Hive-style ``key=value`` directories between ``root`` and ``file``, typed as Spark infers them
    (int/bigint for integers, double for other numbers, else string)."""
    if os.path.isfile(root):
        return []
    rel = os.path.relpath(os.path.dirname(file), root)
    cols = []
    for part in rel.split(os.sep):
        key, sep, value = part.partition("=")
        if sep and key:
            cols.append(Column(key, _infer_partition_type(value)))
    return cols


def _infer_partition_type(value: str) -> str:
    if re.fullmatch(r"-?\d+", value):
        return "int" if -(2**31) <= int(value) < 2**31 else "bigint"
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?", value):
        return "double"
    return "string"


def arrow_to_ddl(t) -> str:  # noqa: ANN001 - a pyarrow DataType
    import pyarrow.types as pt

    simple = [
        (pt.is_boolean, "boolean"), (pt.is_int8, "tinyint"), (pt.is_int16, "smallint"), (pt.is_int32, "int"),
        (pt.is_int64, "bigint"), (pt.is_uint8, "smallint"), (pt.is_uint16, "int"), (pt.is_uint32, "bigint"),
        (pt.is_uint64, "decimal(20,0)"), (pt.is_float16, "float"), (pt.is_float32, "float"),
        (pt.is_float64, "double"), (pt.is_string, "string"), (pt.is_large_string, "string"),
        (pt.is_binary, "binary"), (pt.is_large_binary, "binary"), (pt.is_fixed_size_binary, "binary"),
        (pt.is_date, "date"), (pt.is_time, "string"), (pt.is_null, "string"),
    ]  # fmt: skip
    for test, ddl in simple:
        if test(t):
            return ddl
    if pt.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pt.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pt.is_dictionary(t):
        return arrow_to_ddl(t.value_type)
    if pt.is_map(t):
        return f"map<{arrow_to_ddl(t.key_type)},{arrow_to_ddl(t.item_type)}>"
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return f"array<{arrow_to_ddl(t.value_type)}>"
    if pt.is_struct(t):
        inner = ", ".join(f"{_q(t.field(i).name)}: {arrow_to_ddl(t.field(i).type)}" for i in range(t.num_fields))
        return f"struct<{inner}>"
    raise SchemaError("SCHEMA.INVALID", {"detail": f"Parquet type {t} has no Spark equivalent; declare `schema`"})


def _q(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{name}`"
