"""JsonPath: extract values from JSON fields with JSONPath (SeaTunnel JsonPath transform).

Each entry of ``columns`` reads ``src_field`` (a JSON string, bytes, or an
array/map/row which is first turned into JSON), evaluates ``path`` and appends
``dest_field`` of type ``dest_type`` (default string). Runs as a Python function
over Arrow batches (execution "python"); paths use Jayway's syntax
(:mod:`transforms._jsonpath`).

At run time, as SeaTunnel: a null source gives null; text that is not JSON, a
definite path that matches nothing, or a value that does not convert to
``dest_type`` is a bad value, handled by the column's
``column_error_handle_way`` (SKIP: null in that column, SKIP_ROW: drop the row,
FAIL) or else by ``row_error_handle_way`` (SKIP: drop the row, FAIL: fail the
job naming the transform, table, column and value). A string destination
receives text as is and other JSON as compact JSON text.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import spark_type
from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions, append_columns, invalid, upper
from transforms._jsonpath import Path, PathNotFound, compile_path
from transforms._runtime import arrow_schema, failure, session_time_zone, to_schema

_JSON_SOURCE_TYPES = ("string", "binary")
_JSON_SOURCE_PREFIXES = ("array<", "map<", "struct<")


class JsonPathColumn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    src_field: str = Field(min_length=1, description="Field holding the JSON (string, bytes, array, map or row).")
    dest_field: str = Field(min_length=1, description="Name of the new field.")
    path: str = Field(min_length=1, description='JSONPath expression, starting with "$".')
    dest_type: str = Field("string", description="Type of the new field (SeaTunnel type name), default string.")
    column_error_handle_way: Literal["FAIL", "SKIP", "SKIP_ROW"] | None = Field(
        None, description="On a bad value in this column: FAIL, SKIP (null) or SKIP_ROW; overrides row_error_handle_way."
    )

    _upper = field_validator("column_error_handle_way", mode="before")(lambda cls, v: upper(v))

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("$"):
            raise ValueError(f'path {v!r} must start with "$" (the document root), e.g. "$.data.id"')
        compile_path(v)  # syntax errors are config errors
        return v

    @field_validator("dest_type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> str:
        return spark_type(v)


class JsonPathOptions(MultiTableTransformOptions):
    columns: list[JsonPathColumn] = Field(description="Fields to extract: {src_field, path, dest_field, dest_type}.")
    row_error_handle_way: Literal["FAIL", "SKIP"] = Field(
        "FAIL", description="On a bad value: FAIL the job or SKIP the row."
    )

    _upper = field_validator("row_error_handle_way", mode="before")(lambda cls, v: upper(v))

    @model_validator(mode="after")
    def _check(self) -> "JsonPathOptions":
        if not self.columns:
            raise ValueError("columns is empty; add at least one {src_field, path, dest_field}")
        dests = [c.dest_field for c in self.columns]
        for d in dests:
            if dests.count(d) > 1:
                raise ValueError(f"two columns write dest_field {d!r}; dest fields must be unique")
        return self


@register
class JsonPath(Transform):
    name: ClassVar[str] = "JsonPath"
    seatunnel_page = "transform-v2/jsonpath.md"
    Options = JsonPathOptions
    description = "Extracts values from JSON fields into new fields with JSONPath."
    execution = "python"

    def reads_metadata(self) -> frozenset[str]:
        return frozenset()  # reads its source fields only
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, JsonPathOptions)
        by_name = {c.name: c for c in table.columns}
        for col in options.columns:
            src = by_name.get(col.src_field)
            if src is None:
                raise missing_column(table, col.src_field)
            if src.type not in _JSON_SOURCE_TYPES and not src.type.startswith(_JSON_SOURCE_PREFIXES):
                raise invalid(
                    f"JsonPath reads JSON from string, bytes, array, map or row fields; "
                    f"{src.name!r} of table {table.table_id!r} is {src.type}"
                )
        return append_columns(table, [Column(c.dest_field, c.dest_type) for c in options.columns])

    def arrow_function(self, ctx, table, options):
        """One function per table: evaluates every column's path on each row.

        Everything the workers need (compiled paths, Arrow types, the session
        time zone for timestamps) is computed here, on the driver.
        """
        assert isinstance(options, JsonPathOptions)
        out = self.transform_table(table, options)
        schema = arrow_schema(out, ctx)
        specs = tuple(
            _Spec(c.src_field, c.dest_field, compile_path(c.path), schema.field(c.dest_field).type, c.column_error_handle_way)
            for c in options.columns
        )  # fmt: skip
        return JsonPathFunction(ctx.vertex_id, table.table_id, specs, options.row_error_handle_way, schema, session_time_zone(ctx))


class BadValue(Exception):
    """A value the JsonPath transform cannot read or convert (handled by the error ways)."""


@dataclass(frozen=True)
class _Spec:
    src: str
    dest: str
    path: Path
    type: Any  # pyarrow DataType of dest
    way: str | None  # column_error_handle_way


@dataclass(frozen=True)
class JsonPathFunction:
    """RecordBatch -> RecordBatch: the input columns, then one new column per spec."""

    vertex_id: str
    table_id: str
    specs: tuple[_Spec, ...]
    row_way: str
    schema: Any  # output pyarrow Schema
    time_zone: str

    def __call__(self, batch):
        import pyarrow as pa

        n = batch.num_rows
        sources = {}
        for src in dict.fromkeys(s.src for s in self.specs):
            column = batch.column(batch.schema.get_field_index(src))
            sources[src] = (column.to_pylist(), column.type)
        values: dict[str, list] = {s.dest: [None] * n for s in self.specs}
        keep = [True] * n
        for i in range(n):
            documents: dict[str, Any] = {}
            for s in self.specs:
                try:
                    if s.src not in documents:
                        source_values, source_type = sources[s.src]
                        documents[s.src] = _document(source_values[i], source_type)
                    doc = documents[s.src]
                    if isinstance(doc, BadValue):
                        raise doc
                    if doc is not None:
                        try:
                            found = s.path.read(doc)
                        except PathNotFound as e:
                            raise BadValue(str(e)) from None
                        values[s.dest][i] = _convert(found, s.type, self.time_zone)
                except BadValue as e:
                    documents.setdefault(s.src, e)
                    way = s.way or self.row_way
                    if way == "FAIL":
                        raise failure(
                            self.vertex_id, self.table_id,
                            f"column {s.dest!r} (path {s.path.text!r} of field {s.src!r}): {e}",
                        ) from None  # fmt: skip
                    if way == "SKIP" and s.way == "SKIP":
                        values[s.dest][i] = None  # column-level SKIP: null in this column
                    else:
                        keep[i] = False  # SKIP_ROW, or row-level SKIP
        columns = {f.name: batch.column(j) for j, f in enumerate(batch.schema)}
        for s in self.specs:
            try:
                columns[s.dest] = pa.array(values[s.dest], type=s.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:  # pragma: no cover - _convert checks
                raise failure(self.vertex_id, self.table_id, f"column {s.dest!r}: {e}") from None
        out = to_schema(columns, self.schema, f"{self.vertex_id} (JsonPath)")
        if not all(keep):
            out = out.filter(pa.array(keep))
        return out


def _document(value: Any, arrow_type: Any) -> Any:
    """The JSON document of a source value: parsed text, or the value as JSON data.

    As SeaTunnel: strings and bytes are parsed; arrays and maps are taken as JSON
    arrays and objects; a row (struct) becomes the array of its field values.
    """
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return _parse(value)
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        try:
            return _parse(bytes(value).decode("utf-8"))
        except UnicodeDecodeError as e:
            raise BadValue(f"the bytes are not UTF-8 text: {e}") from None
    data = _jsonable(value, arrow_type)
    if pa.types.is_struct(arrow_type):
        return list(data.values())
    return data


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        short = text if len(text) <= 80 else text[:77] + "..."
        raise BadValue(f"not valid JSON ({e.args[0] if e.args else e}): {short!r}") from None


def _jsonable(value: Any, t: Any) -> Any:
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(k).name: _jsonable(value.get(t.field(k).name), t.field(k).type) for k in range(t.num_fields)}
    if pa.types.is_map(t):
        return {str(k): _jsonable(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_jsonable(v, t.value_type) for v in value]
    if isinstance(value, decimal.Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _convert(v: Any, t: Any, tz: str) -> Any:
    """A JSONPath result as a Python value of Arrow type ``t``; BadValue when it does not fit."""
    import pyarrow as pa

    if v is None:
        return None
    try:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return _text(v)
        if pa.types.is_boolean(t):
            return v if isinstance(v, bool) else _text(v).strip().lower() == "true"  # Boolean.parseBoolean
        if pa.types.is_integer(t):
            if isinstance(v, bool) or isinstance(v, (dict, list)):
                raise BadValue(f"cannot convert {_text(v)} to {t}")
            n = int(v) if isinstance(v, (int, float)) else int(str(v).strip())
            bits = t.bit_width - 1
            if not -(2**bits) <= n < 2**bits:
                raise BadValue(f"{n} is out of range for {t}")
            return n
        if pa.types.is_floating(t):
            if isinstance(v, bool) or isinstance(v, (dict, list)):
                raise BadValue(f"cannot convert {_text(v)} to {t}")
            return float(v) if isinstance(v, (int, float)) else float(str(v).strip())
        if pa.types.is_decimal(t):
            if isinstance(v, bool) or isinstance(v, (dict, list)):
                raise BadValue(f"cannot convert {_text(v)} to {t}")
            d = decimal.Decimal(str(v).strip()).quantize(decimal.Decimal(1).scaleb(-t.scale), rounding=decimal.ROUND_HALF_UP)
            if len(d.as_tuple().digits) > t.precision:
                raise BadValue(f"{v} does not fit decimal({t.precision},{t.scale})")
            return d
        if pa.types.is_date(t):
            return dt.date.fromisoformat(str(v).strip())
        if pa.types.is_timestamp(t):
            ts = dt.datetime.fromisoformat(str(v).strip())
            if t.tz is None:  # timestamp_ntz
                return ts.replace(tzinfo=None) if ts.tzinfo else ts
            if ts.tzinfo is None:
                from zoneinfo import ZoneInfo

                ts = ts.replace(tzinfo=ZoneInfo(tz))  # a local time of the session time zone, as Spark reads it
            return ts.astimezone(dt.timezone.utc)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return base64.b64decode(str(v), validate=True)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            if not isinstance(v, list):
                raise BadValue(f"{_text(v)} is not a JSON array")
            return [_convert(x, t.value_type, tz) for x in v]
        if pa.types.is_map(t):
            if not isinstance(v, dict):
                raise BadValue(f"{_text(v)} is not a JSON object")
            return [(_convert(k, t.key_type, tz), _convert(x, t.item_type, tz)) for k, x in v.items()]
        if pa.types.is_struct(t):
            if not isinstance(v, dict):
                raise BadValue(f"{_text(v)} is not a JSON object")
            return {t.field(k).name: _convert(v.get(t.field(k).name), t.field(k).type, tz) for k in range(t.num_fields)}
    except BadValue:
        raise
    except (ValueError, TypeError, ArithmeticError) as e:
        raise BadValue(f"cannot convert {_text(v)!s:.80} to {t}: {e}") from None
    raise BadValue(f"unsupported destination type {t}")  # pragma: no cover
