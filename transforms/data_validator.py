"""DataValidator: check field values against rules (SeaTunnel DataValidator transform).

``field_rules`` items are either flat (``{field_name, rule_type, ...}``) or nested
(``{field_name, rules = [{rule_type, ...}, ...]}``). Rule types: NOT_NULL, RANGE
(numeric fields), LENGTH (string, bytes, array, map), REGEX (string) and UDF
(built-in ``EMAIL`` only; SeaTunnel's Java UDF SPI has no equivalent here).

``row_error_handle_way``: FAIL the job, SKIP bad rows, or ROUTE_TO_TABLE them to
``row_error_handle_way.error_table``: the output then has that extra table with
SeaTunnel's fixed error schema. Valid rows keep their table and schema.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import check_table_path
from streaming_engine.plugins.base import PluginOptions, Transform, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Column, Dataset, TableSchema, is_numeric
from transforms._common import MultiTableTransformOptions, check_java_regex, invalid, upper

BUILTIN_UDFS = ("EMAIL",)

ERROR_TABLE_COLUMNS = (
    Column("source_table_id", "string"),
    Column("source_table_path", "string"),
    Column("original_data", "string"),
    Column("validation_errors", "string"),
    Column("create_time", "timestamp"),
)

# rule type -> the parameters it accepts (besides rule_type and custom_message)
_PARAMS = {
    "NOT_NULL": set(),
    "RANGE": {"min_value", "max_value", "min_inclusive", "max_inclusive"},
    "LENGTH": {"min_length", "max_length", "exact_length"},
    "REGEX": {"pattern", "case_sensitive"},
    "UDF": {"function_name"},
}


class ValidationRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rule_type: Literal["NOT_NULL", "RANGE", "LENGTH", "REGEX", "UDF"] = Field(
        description="NOT_NULL, RANGE, LENGTH, REGEX or UDF."
    )
    min_value: float | None = Field(None, description="RANGE: smallest allowed value.")
    max_value: float | None = Field(None, description="RANGE: largest allowed value.")
    min_inclusive: bool = Field(True, description="RANGE: whether min_value itself is allowed.")
    max_inclusive: bool = Field(True, description="RANGE: whether max_value itself is allowed.")
    min_length: int | None = Field(None, ge=0, description="LENGTH: shortest allowed length.")
    max_length: int | None = Field(None, ge=0, description="LENGTH: longest allowed length.")
    exact_length: int | None = Field(None, ge=0, description="LENGTH: the required length.")
    pattern: str | None = Field(None, description="REGEX: the pattern values must match.")
    case_sensitive: bool = Field(True, description="REGEX: case-sensitive matching.")
    function_name: str | None = Field(None, description="UDF: the validation function (built-in: EMAIL).")
    custom_message: str | None = Field(None, description="Message reported when the rule fails.")

    _upper = field_validator("rule_type", "function_name", mode="before")(lambda cls, v: upper(v))

    @model_validator(mode="after")
    def _check(self) -> "ValidationRule":
        t = self.rule_type
        for key in set().union(*_PARAMS.values()) - _PARAMS[t]:
            if key in self.model_fields_set:
                raise ValueError(f"{key} does not apply to rule_type {t}")
        if t == "RANGE":
            if self.min_value is None and self.max_value is None:
                raise ValueError("rule_type RANGE needs min_value and/or max_value")
            if self.min_value is not None and self.max_value is not None and self.min_value > self.max_value:
                raise ValueError(f"RANGE min_value {self.min_value} is greater than max_value {self.max_value}")
        elif t == "LENGTH":
            if self.exact_length is not None and (self.min_length is not None or self.max_length is not None):
                raise ValueError("LENGTH: use exact_length or min_length/max_length, not both")
            if self.exact_length is None and self.min_length is None and self.max_length is None:
                raise ValueError("rule_type LENGTH needs min_length, max_length or exact_length")
            if self.min_length is not None and self.max_length is not None and self.min_length > self.max_length:
                raise ValueError(f"LENGTH min_length {self.min_length} is greater than max_length {self.max_length}")
        elif t == "REGEX":
            if not self.pattern:
                raise ValueError("rule_type REGEX needs a pattern")
            check_java_regex("pattern", self.pattern)
        elif t == "UDF":
            if not self.function_name:
                raise ValueError("rule_type UDF needs function_name")
            if self.function_name not in BUILTIN_UDFS:
                raise ValueError(f"unknown UDF {self.function_name!r}; available: {', '.join(BUILTIN_UDFS)}")
        return self


class FieldRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    field_name: str = Field(min_length=1, description="The field to validate.")
    rules: list[ValidationRule] = Field(description="The rules the field must pass.")

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        """``{field_name, rule_type, ...}`` is shorthand for ``{field_name, rules = [{rule_type, ...}]}``."""
        if isinstance(data, dict) and "rule_type" in data:
            if "rules" in data:
                raise ValueError("a field rule has either rules = [...] or rule_type = ..., not both")
            rule = {k: v for k, v in data.items() if k != "field_name"}
            return {"field_name": data.get("field_name"), "rules": [rule]}
        return data

    @model_validator(mode="after")
    def _nonempty(self) -> "FieldRule":
        if not self.rules:
            raise ValueError(f"field {self.field_name!r} has no rules")
        return self


class DataValidatorOptions(MultiTableTransformOptions):
    row_error_handle_way: Literal["FAIL", "SKIP", "ROUTE_TO_TABLE"] = Field(
        "FAIL", description="On invalid rows: FAIL the job, SKIP them, or ROUTE_TO_TABLE (error_table)."
    )
    error_table: str | None = Field(
        None,
        alias="row_error_handle_way.error_table",
        description="Table receiving invalid rows with row_error_handle_way = ROUTE_TO_TABLE.",
    )
    field_rules: list[FieldRule] = Field(description="Validation rules per field.")

    _upper = field_validator("row_error_handle_way", mode="before")(lambda cls, v: upper(v))

    @model_validator(mode="after")
    def _check(self) -> "DataValidatorOptions":
        if not self.field_rules:
            raise ValueError("field_rules is empty; add at least one {field_name, rule_type}")
        if self.row_error_handle_way == "ROUTE_TO_TABLE":
            if not self.error_table:
                raise ValueError("row_error_handle_way = ROUTE_TO_TABLE needs row_error_handle_way.error_table")
            check_table_path(self.error_table)
        elif self.error_table is not None:
            raise ValueError("row_error_handle_way.error_table only applies with row_error_handle_way = ROUTE_TO_TABLE")
        return self


def _length_type(t: str) -> bool:
    return t in ("string", "binary") or t.startswith(("array<", "map<"))


@register
class DataValidator(Transform):
    name: ClassVar[str] = "DataValidator"
    Options = DataValidatorOptions
    description = "Validates field values (null, range, length, regex, email) and fails, skips or routes bad rows."
    execution = "expression"
    chainable = True
    max_inputs = 1

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        assert isinstance(options, DataValidatorOptions)
        by_name = {c.name: c for c in table.columns}
        for fr in options.field_rules:
            col = by_name.get(fr.field_name)
            if col is None:
                raise missing_column(table, fr.field_name)
            for rule in fr.rules:
                ok = {
                    "RANGE": is_numeric(col.type),
                    "LENGTH": _length_type(col.type),
                    "REGEX": col.type == "string",
                    "UDF": col.type == "string",
                }.get(rule.rule_type, True)
                if not ok:
                    raise invalid(
                        f"rule {rule.rule_type} cannot check field {col.name!r} of table {table.table_id!r}, "
                        f"which is {col.type}"
                    )
        return table

    def output(self, inputs: list[Dataset]) -> Dataset:
        tables: list[TableSchema] = []
        error_tables: list[str] = []
        for dataset in inputs:
            for table in dataset.tables:
                opts = self.options_for(table.table_id)
                if opts is None:
                    tables.append(table)
                    continue
                tables.append(self.transform_table(table, opts))
                assert isinstance(opts, DataValidatorOptions)
                if opts.row_error_handle_way == "ROUTE_TO_TABLE" and opts.error_table not in error_tables:
                    error_tables.append(opts.error_table)  # type: ignore[arg-type]
        ids = {t.table_id for t in tables}
        for name in error_tables:
            if name in ids:
                raise invalid(f"error_table {name!r} is also the name of an input table; choose another name")
            tables.append(TableSchema(name, ERROR_TABLE_COLUMNS))
        return Dataset(tuple(tables))
