"""Assert: check the data against rules and fail the job when they break (SeaTunnel Assert sink).

``rules`` holds ``row_rules`` (MIN_ROW / MAX_ROW with ``rule_value``),
``field_rules`` (per ``field_name``: optional ``field_type`` and ``field_value``
rules NOT_NULL, NULL, MIN, MAX, MIN_LENGTH, MAX_LENGTH, each optionally with
``equals_to``), ``catalog_table_rule`` (primary key, constraint keys, columns),
``table-names`` (tables that must be present) and ``tables_configs`` (the same
rules per ``table_path``). Top-level rules apply to every input table that has no
``tables_configs`` entry.

Plan time (:meth:`Assert.check_input`) checks what the plan knows exactly: the
listed tables exist, every named field / column exists, and the primary key
matches ``primary_key_rule``. Values, row counts, ``field_type`` and the column
types / nullability of ``column_rule`` are checked on the real data at run time
(plan-time types of computed Sql columns are approximate). ``constraint_key_rule``
is accepted but not checked: plan schemas carry no constraint keys.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import spark_type
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import Sink, SinkOptions, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema


def _upper(v: Any) -> Any:
    return v.strip().upper() if isinstance(v, str) else v


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RowRule(_Model):
    rule_type: Literal["MIN_ROW", "MAX_ROW"] = Field(description="MIN_ROW or MAX_ROW.")
    rule_value: int = Field(ge=0, description="The row-count bound.")

    _u = field_validator("rule_type", mode="before")(lambda cls, v: _upper(v))


class FieldValueRule(_Model):
    rule_type: Literal["NOT_NULL", "NULL", "MIN", "MAX", "MIN_LENGTH", "MAX_LENGTH"] | None = Field(
        None, description="NOT_NULL, NULL, MIN, MAX, MIN_LENGTH or MAX_LENGTH."
    )
    rule_value: float | None = Field(None, description="The bound for MIN, MAX, MIN_LENGTH and MAX_LENGTH.")
    equals_to: Any = Field(None, description="Every value must equal this (written as in FakeSource rows).")

    _u = field_validator("rule_type", mode="before")(lambda cls, v: _upper(v))

    @model_validator(mode="after")
    def _check(self) -> "FieldValueRule":
        t = self.rule_type
        if t is None and "equals_to" not in self.model_fields_set:
            raise ValueError("a field_value rule needs rule_type and/or equals_to")
        if t in ("MIN", "MAX", "MIN_LENGTH", "MAX_LENGTH") and self.rule_value is None:
            raise ValueError(f"rule_type {t} needs rule_value")
        if t in ("NOT_NULL", "NULL", None) and self.rule_value is not None:
            raise ValueError(f"rule_value does not apply to rule_type {t or '(none)'}")
        if t in ("MIN_LENGTH", "MAX_LENGTH") and (self.rule_value < 0 or self.rule_value != int(self.rule_value)):  # type: ignore[operator]
            raise ValueError(f"{t} rule_value must be a whole number >= 0")
        if t == "NULL" and self.equals_to is not None:
            raise ValueError("rule_type NULL cannot have equals_to; a value cannot be null and equal something")
        return self


class FieldRule(_Model):
    field_name: str = Field(min_length=1, description="The field the rules check.")
    field_type: str | dict[str, Any] | None = Field(None, description="Expected type of the field (checked at run time).")
    field_value: list[FieldValueRule] | None = Field(None, description="Rules on the field's values.")

    @model_validator(mode="after")
    def _check(self) -> "FieldRule":
        if self.field_type is not None:
            spark_type(self.field_type)  # ValueError on an unknown type
        lo = {r.rule_type: r.rule_value for r in self.field_value or () if r.rule_type in ("MIN", "MIN_LENGTH")}
        hi = {r.rule_type: r.rule_value for r in self.field_value or () if r.rule_type in ("MAX", "MAX_LENGTH")}
        for a, b in (("MIN", "MAX"), ("MIN_LENGTH", "MAX_LENGTH")):
            if a in lo and b in hi and lo[a] > hi[b]:  # type: ignore[operator]
                raise ValueError(f"field {self.field_name!r}: {a} {lo[a]} is greater than {b} {hi[b]}; no value can pass")
        return self

    def spark_type(self) -> str | None:
        return None if self.field_type is None else spark_type(self.field_type)


class PrimaryKeyRule(_Model):
    primary_key_name: str | None = Field(None, description="Name of the primary key (informational).")
    primary_key_columns: list[str] = Field(min_length=1, description="The expected key columns, in order.")


class ConstraintKeyColumn(_Model):
    constraint_key_column_name: str = Field(description="Column of the constraint key.")
    constraint_key_sort_type: Literal["ASC", "DESC"] | None = Field(None, description="ASC or DESC.")

    _u = field_validator("constraint_key_sort_type", mode="before")(lambda cls, v: _upper(v))


class ConstraintKeyRule(_Model):
    constraint_key_name: str | None = Field(None, description="Name of the constraint key.")
    constraint_key_type: Literal["INDEX_KEY", "UNIQUE_KEY", "FOREIGN_KEY", "VECTOR_INDEX_KEY"] | None = Field(
        None, description="INDEX_KEY, UNIQUE_KEY, FOREIGN_KEY or VECTOR_INDEX_KEY."
    )
    constraint_key_columns: list[ConstraintKeyColumn] | None = Field(None, description="Columns of the key.")

    _u = field_validator("constraint_key_type", mode="before")(lambda cls, v: _upper(v))


class ColumnRule(_Model):
    name: str = Field(min_length=1, description="Column that must exist.")
    type: str | dict[str, Any] | None = Field(None, description="Expected type (checked at run time).")
    column_length: int | None = Field(None, ge=0, description="Expected length (informational).")
    nullable: bool | None = Field(None, description="Expected nullability (checked at run time).")
    default_value: Any = Field(None, description="Expected default value (informational).")
    comment: str | None = Field(None, description="Expected comment (informational).")

    @field_validator("type")
    @classmethod
    def _type(cls, v: Any) -> Any:
        if v is not None:
            spark_type(v)
        return v


class CatalogTableRule(_Model):
    primary_key_rule: PrimaryKeyRule | None = Field(None, description="The table's primary key must be this.")
    constraint_key_rule: list[ConstraintKeyRule] | None = Field(None, description="Constraint keys (not checked).")
    column_rule: list[ColumnRule] | None = Field(None, description="Columns the table must have.")


class TableRules(_Model):
    row_rules: list[RowRule] | None = Field(None, description="Row-count rules: MIN_ROW / MAX_ROW.")
    field_rules: list[FieldRule] | None = Field(None, description="Per-field type and value rules.")
    catalog_table_rule: CatalogTableRule | None = Field(None, description="Rules on the table's schema.")

    @model_validator(mode="after")
    def _rows(self) -> "TableRules":
        bounds = {r.rule_type: r.rule_value for r in self.row_rules or ()}
        if "MIN_ROW" in bounds and "MAX_ROW" in bounds and bounds["MIN_ROW"] > bounds["MAX_ROW"]:
            raise ValueError(f"MIN_ROW {bounds['MIN_ROW']} is greater than MAX_ROW {bounds['MAX_ROW']}")
        return self

    def has_rules(self) -> bool:
        return bool(self.row_rules or self.field_rules or self.catalog_table_rule)


class TableConfig(TableRules):
    table_path: str = Field(min_length=1, description="The table these rules apply to.")


class Rules(TableRules):
    table_names: list[str] | None = Field(None, alias="table-names", description="Tables that must be in the input.")
    tables_configs: list[TableConfig] | None = Field(None, description="Rules per table: {table_path, row_rules, ...}.")

    @model_validator(mode="after")
    def _any(self) -> "Rules":
        if not (self.has_rules() or self.table_names or self.tables_configs):
            raise ValueError(
                "rules is empty; add row_rules, field_rules, catalog_table_rule, table-names or tables_configs"
            )
        paths = [t.table_path for t in self.tables_configs or ()]
        for p in paths:
            if paths.count(p) > 1:
                raise ValueError(f"tables_configs has two entries for table_path {p!r}; merge them")
        return self


class AssertOptions(SinkOptions):
    rules: Rules = Field(description="What the data must satisfy: row_rules, field_rules, catalog_table_rule, ...")


@register
class Assert(Sink):
    name: ClassVar[str] = "Assert"
    Options = AssertOptions
    description = "Fails the job when the data breaks the given row, field or schema rules."
    commit_protocol = "none"

    options: AssertOptions

    def rules_for(self, table_id: str) -> TableRules | None:
        """The rules that apply to one table: its tables_configs entry, else the top-level rules."""
        rules = self.options.rules
        for cfg in rules.tables_configs or ():
            if cfg.table_path == table_id:
                return cfg
        return rules if rules.has_rules() else None

    def check_input(self, dataset: Dataset) -> None:
        rules = self.options.rules
        ids = dataset.table_ids
        expected = list(rules.table_names or ()) + [c.table_path for c in rules.tables_configs or ()]
        for name in expected:
            if name not in ids:
                raise SchemaError(
                    "SCHEMA.INCOMPATIBLE",
                    {"table": name, "detail": f"the Assert rules expect it, but the input has only {', '.join(ids) or '(no tables)'}"},
                )
        for table in dataset.tables:
            table_rules = self.rules_for(table.table_id)
            if table_rules is not None:
                _check_table(table, table_rules)

    def targets(self, dataset: Dataset) -> list[str]:
        return [f"{t.table_id} -> assert" for t in dataset.tables if self.rules_for(t.table_id) is not None]


def _check_table(table: TableSchema, rules: TableRules) -> None:
    for fr in rules.field_rules or ():
        if fr.field_name not in table.names:
            raise missing_column(table, fr.field_name)
    catalog = rules.catalog_table_rule
    if catalog is None:
        return
    for cr in catalog.column_rule or ():
        if cr.name not in table.names:
            raise missing_column(table, cr.name)
    if catalog.primary_key_rule is not None:
        want = tuple(catalog.primary_key_rule.primary_key_columns)
        if table.primary_key != want:
            have = ", ".join(table.primary_key) or "none"
            raise SchemaError(
                "SCHEMA.INCOMPATIBLE",
                {"table": table.table_id, "detail": f"primary_key_rule expects key ({', '.join(want)}) but the table's key is ({have})"},
            )
