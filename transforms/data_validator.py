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
    seatunnel_page = "transform-v2/data-validator.md"
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

    # -- run time ----------------------------------------------------------------
    def apply(self, ctx, df, table, options):
        valid, _, messages = _checks(table, options)
        assert isinstance(options, DataValidatorOptions)
        if options.row_error_handle_way == "FAIL":
            return df.where(_fail_unless(valid, messages, ctx.vertex_id, table.table_id))
        return df.where(valid)

    def apply_frames(self, ctx, frames):
        """FAIL and SKIP filter each table; ROUTE_TO_TABLE also builds the error table(s)."""
        tables = {t.table_id: t for d in ctx.inputs for t in d.tables}
        out = {}
        errors: dict[str, list] = {}
        for table_id, df in frames.items():
            opts = self.options_for(table_id)
            if opts is None:
                out[table_id] = df
                continue
            assert isinstance(opts, DataValidatorOptions)
            table = tables[table_id]
            self.transform_table(table, opts)
            out[table_id] = self.apply(ctx, df, table, opts)
            if opts.row_error_handle_way == "ROUTE_TO_TABLE":
                errors.setdefault(opts.error_table, []).append(_error_rows(df, table, opts))  # type: ignore[arg-type]
        for name, parts in errors.items():
            merged = parts[0]
            for other in parts[1:]:
                merged = merged.unionByName(other)
            out[name] = merged
        return out


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


def _rule_message(c, col_type: str, rule: ValidationRule):
    """A string column: the rule's failure message, or null when the value passes.

    Messages follow SeaTunnel's rules; ``custom_message`` replaces them. Only
    NOT_NULL fails on null values.
    """
    from pyspark.sql import functions as F

    def msg(default):
        return F.lit(rule.custom_message) if rule.custom_message is not None else default

    value = c.cast("string")
    t = rule.rule_type
    if t == "NOT_NULL":
        return F.when(c.isNull(), msg(F.lit("Field cannot be null")))
    if t == "RANGE":
        out = None
        if rule.min_value is not None:
            below = c < F.lit(rule.min_value) if rule.min_inclusive else c <= F.lit(rule.min_value)
            text = F.concat(F.lit("Value "), value, F.lit(f" is below minimum {_num(rule.min_value)}"))
            out = F.when(below, msg(text))
        if rule.max_value is not None:
            above = c > F.lit(rule.max_value) if rule.max_inclusive else c >= F.lit(rule.max_value)
            text = F.concat(F.lit("Value "), value, F.lit(f" exceeds maximum {_num(rule.max_value)}"))
            out = F.when(above, msg(text)) if out is None else out.when(above, msg(text))
        return out
    if t == "LENGTH":
        length = F.length(c) if col_type in ("string", "binary") else F.size(c)
        n = length.cast("string")
        out = None

        def add(cond, text):
            nonlocal out
            out = F.when(cond, msg(text)) if out is None else out.when(cond, msg(text))

        if rule.exact_length is not None:
            add(length != rule.exact_length, F.concat(F.lit(f"Expected length {rule.exact_length} but got "), n))
        if rule.min_length is not None:
            add(length < rule.min_length, F.concat(F.lit("Length "), n, F.lit(f" is below minimum {rule.min_length}")))
        if rule.max_length is not None:
            add(length > rule.max_length, F.concat(F.lit("Length "), n, F.lit(f" exceeds maximum {rule.max_length}")))
        return out
    if t == "REGEX":
        # Java's Matcher.matches(): the whole value must match
        full = ("" if rule.case_sensitive else "(?i)") + f"^(?:{rule.pattern})\\z"
        text = F.concat(F.lit("Value '"), value, F.lit(f"' does not match pattern '{rule.pattern}'"))
        return F.when(~value.rlike(full), msg(text))
    if t == "UDF" and rule.function_name == "EMAIL":
        return _email_message(value, msg)
    raise invalid(f"DataValidator has no run-time check for rule {t} {rule.function_name or ''}".strip())


def _email_message(value, msg):
    """SeaTunnel's built-in EMAIL UDF (EmailValidator) as column expressions."""
    from pyspark.sql import functions as F

    email = F.regexp_replace(value, r"^[\x00-\x20]+|[\x00-\x20]+$", "")  # Java String.trim()
    at = F.instr(email, "@") - 1
    ats = F.length(email) - F.length(F.replace(email, F.lit("@"), F.lit("")))
    local = F.substring(email, 1, at)
    domain = F.substring(email, at + 2, 1 << 30)

    def fail(text):
        return msg(F.concat(F.lit(text), email))

    return (
        F.when(email == "", None)
        .when(F.length(email) > 254, fail("Email too long (max 254 characters): "))
        .when((at <= 0) | (ats != 1), fail("Email must contain exactly one @ symbol: "))
        .when(F.length(local) > 63, fail("Email local part too long (max 63 characters): "))
        .when(email.rlike("[\"'`\\x00]"), fail("Email contains dangerous characters: "))
        .when(~domain.rlike("^[a-zA-Z0-9.-]+\\z"), fail("Email domain contains invalid characters: "))
        .when(~domain.contains("."), fail("Email domain must contain at least one dot: "))
    )


def _checks(table: TableSchema, options: PluginOptions):
    """(valid: boolean column, errors: array<struct<field_name, error_message>>, messages: [(field, msg)])."""
    from pyspark.sql import functions as F

    from transforms._runtime import col

    assert isinstance(options, DataValidatorOptions)
    by_name = {c.name: c for c in table.columns}
    messages = []
    for fr in options.field_rules:
        column = by_name[fr.field_name]
        for rule in fr.rules:
            messages.append((fr.field_name, _rule_message(col(column.name), column.type, rule)))
    valid = F.coalesce(*[m for _, m in messages]).isNull() if len(messages) > 1 else messages[0][1].isNull()
    errors = F.filter(
        F.array(*[
            F.when(m.isNotNull(), F.struct(F.lit(f).alias("field_name"), m.alias("error_message")))
            for f, m in messages
        ]),
        lambda e: e.isNotNull(),
    )  # fmt: skip
    return valid, errors, messages


def _fail_unless(valid, messages, vertex_id: str, table_id: str):
    """A filter condition that is true for valid rows and raises an error on the first invalid one."""
    from pyspark.sql import functions as F

    from transforms._runtime import TERMINAL

    detail = F.concat_ws("; ", *[F.concat(F.lit(f"{field}: "), m) for field, m in messages])
    # On a line of its own, shaped "<Name>Failure: message", so the pipeline's error summary
    # (which keeps the last such line of a failure) reports it rather than Spark's wrapper.
    head = f"\nDataValidatorFailure: {TERMINAL} {vertex_id} on table {table_id}: Validation failed: "
    return F.coalesce(F.when(~valid, F.raise_error(F.concat(F.lit(head), detail))).cast("boolean"), F.lit(True))


def _error_rows(df, table: TableSchema, options: DataValidatorOptions):
    """The invalid rows of ``df`` in the error table's fixed schema (row kind INSERT)."""
    from pyspark.sql import functions as F

    from streaming_engine.runtime import rows
    from transforms._runtime import col

    valid, errors, _ = _checks(table, options)
    original = F.to_json(F.struct(*[col(c) for c in table.names]), {"ignoreNullFields": "false"})
    return df.where(~valid).select(
        F.lit(options.error_table).alias(rows.TABLE),
        F.lit(rows.INSERT).alias(rows.KIND),
        col(rows.SEQ),
        F.lit(table.table_id).alias("source_table_id"),
        F.lit(table.table_id).alias("source_table_path"),
        original.alias("original_data"),
        F.to_json(errors).alias("validation_errors"),
        F.current_timestamp().alias("create_time"),
    )
