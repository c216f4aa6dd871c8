"""JsonPath: extract values from JSON fields with JSONPath (SeaTunnel JsonPath transform).

Each entry of ``columns`` reads ``src_field`` (a JSON string, bytes, or an
array/map/row which is first turned into JSON), evaluates ``path`` and appends
``dest_field`` of type ``dest_type`` (default string). Runs as a Python function
over Arrow batches (execution "python").
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import spark_type
from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, TableSchema
from transforms._common import MultiTableTransformOptions, append_columns, invalid, upper

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
    Options = JsonPathOptions
    description = "Extracts values from JSON fields into new fields with JSONPath."
    execution = "python"
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
