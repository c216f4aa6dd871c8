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

Run time (:meth:`Assert.write`, once per epoch): SeaTunnel checks field rules on
every row and row rules when the job ends; we run in micro-batches, so

- field rules (``field_type``, ``field_value`` rules, ``equals_to``) and the
  run-time part of ``catalog_table_rule`` (column types, ``nullable = false``)
  are checked on every epoch's rows, in one aggregation pass per table;
- row rules count rows per table over the whole query: the cumulative count
  after each epoch is kept in a small JSON file per epoch under the pipeline's
  checkpoint (``<checkpoint>/sinks/<sink uid>/assert_rows/<epoch>.json``), so a
  replayed epoch recomputes the same total instead of counting twice, and a
  restarted job continues from its checkpoint's total. MAX_ROW fails as soon as
  the total exceeds it; MIN_ROW can only be decided when the query has finished
  (:meth:`Assert.finish`, called by the engine when a BATCH pipeline ends, or
  when the epoch context says it is the last one: ``extras["final"]``).

A broken rule raises ``ASSERT.FAILED`` (terminal: the job is not restarted)
naming the rule, table, field and an offending value.

SeaTunnel semantics kept: NULL / NOT_NULL; MIN / MAX fail on null and on
non-numeric fields and compare as doubles; MIN_LENGTH / MAX_LENGTH measure the
value as a string (null counts as ""); ``equals_to`` is only compared on
non-null values, and values are written as in FakeSource rows (strings for
dates, timestamps, decimals and bytes; lists for arrays and rows, objects for
maps); ``field_type`` fails only on non-null values of another type.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import spark_type
from sinks._paths import local_path
from streaming_engine.errors import EngineError, SchemaError
from streaming_engine.plugins.base import Sink, SinkOptions, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

log = logging.getLogger("streaming_engine.sinks.assert")

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
    seatunnel_page = "connector-v2/sink/Assert.md"
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
                same = [i for i in ids if i.lower() == name.lower()]
                hint = f"; table names are case-sensitive: did you mean {same[0]!r}?" if same else ""
                raise SchemaError(
                    "SCHEMA.INCOMPATIBLE",
                    {"table": name, "detail": f"the Assert rules expect it, but the input has only {', '.join(ids) or '(no tables)'}{hint}"},
                )
        for table in dataset.tables:
            table_rules = self.rules_for(table.table_id)
            if table_rules is not None:
                _check_table(table, table_rules)

    def targets(self, dataset: Dataset) -> list[str]:
        return [f"{t.table_id} -> assert" for t in dataset.tables if self.rules_for(t.table_id) is not None]

    # -- run time ------------------------------------------------------------
    def __init__(self, options: AssertOptions):
        super().__init__(options)
        self._lock = threading.Lock()
        self._roots: dict[str, str | None] = {}  # pipeline -> checkpoint location (once known)
        self._memory: dict[str, dict[int, dict[str, int]]] = {}  # pipeline -> epoch -> totals (no checkpoint known)

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        """Check the epoch's rows against the field rules and the running row totals against MAX_ROW."""
        from streaming_engine.runtime.context import CommitRecord

        with self._lock:
            totals_store = self._totals(ctx)
            totals = dict(totals_store.before(ctx.batch_id))
            counts: dict[str, int] = {}
            for table in dataset.tables:
                df = frames.get(table.table_id)
                if df is None:
                    continue
                counts[table.table_id] = check_rows(df, table, self.rules_for(table.table_id), ctx.batch_id)
                totals[table.table_id] = totals.get(table.table_id, 0) + counts[table.table_id]
            final = bool(ctx.extras.get("final"))
            for table in dataset.tables:
                check_row_counts(table.table_id, self.rules_for(table.table_id), totals.get(table.table_id, 0), ctx.batch_id, final)
            totals_store.save(ctx.batch_id, totals)
            return [CommitRecord(ctx.sink_uid, t, "assert", n) for t, n in counts.items()]

    def finish(self, ctx: Any, dataset: Dataset) -> None:
        """The query has finished (a BATCH pipeline ran out of input): check MIN_ROW and MAX_ROW on the totals.

        ``ctx`` is the EpochContext of the pipeline's last epoch (its ``batch_id``
        is not used: the newest saved totals count). The totals are found under
        ``ctx.extras["checkpoint_location"]``, else where this instance kept them.
        """
        with self._lock:
            store = self._totals(ctx, running=False)
            if store is None:
                log.warning("Assert: no row totals found; MIN_ROW not checked", extra={"sink": ctx.sink_uid})
                return
            epoch, totals = store.latest()
            for table in dataset.tables:
                check_row_counts(table.table_id, self.rules_for(table.table_id), totals.get(table.table_id, 0), epoch, True)

    def _totals(self, ctx: Any, running: bool = True) -> "_RowTotals | Any":
        root = ctx.extras.get("checkpoint_location") or self._roots.get(ctx.pipeline)
        if root is None and running:
            root = _query_checkpoint(ctx)
        if root is not None:
            self._roots[ctx.pipeline] = root
            local = local_path(root)
            if local is not None:
                from streaming_engine.plan.physical import slug

                return _RowTotals(os.path.join(local, "sinks", slug(ctx.sink_uid), "assert_rows"), None)
        if not running and ctx.pipeline not in self._memory:
            return None
        return _RowTotals(None, self._memory.setdefault(ctx.pipeline, {}))


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


# ---------------------------------------------------------------------------
# run time: row totals kept per epoch


class _RowTotals:
    """Cumulative rows per table after each epoch: one JSON file per epoch (or a dict in memory).

    A replayed epoch reads the totals of the epoch before it and overwrites its
    own file with the same numbers, so it is never counted twice.
    """

    KEEP = 8  # epochs kept; Spark replays at most the last uncommitted one

    def __init__(self, directory: str | None, memory: dict[int, dict[str, int]] | None):
        self.directory = directory
        self.memory = memory

    def _epochs(self) -> list[int]:
        if self.memory is not None:
            return sorted(self.memory)
        try:
            names = os.listdir(self.directory)  # type: ignore[arg-type]
        except FileNotFoundError:
            return []
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def _load(self, epoch: int) -> dict[str, int]:
        if self.memory is not None:
            return dict(self.memory[epoch])
        with open(os.path.join(self.directory, f"{epoch}.json"), encoding="utf-8") as f:  # type: ignore[arg-type]
            return {k: int(v) for k, v in json.load(f)["totals"].items()}

    def before(self, epoch: int) -> dict[str, int]:
        earlier = [e for e in self._epochs() if e < epoch]
        return self._load(earlier[-1]) if earlier else {}

    def latest(self) -> tuple[int, dict[str, int]]:
        epochs = self._epochs()
        return (epochs[-1], self._load(epochs[-1])) if epochs else (-1, {})

    def save(self, epoch: int, totals: dict[str, int]) -> None:
        stale = [e for e in self._epochs() if e > epoch or e < epoch - self.KEEP]
        if self.memory is not None:
            self.memory[epoch] = dict(totals)
            for e in stale:
                self.memory.pop(e, None)
            return
        d = self.directory
        assert d is not None
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f".{epoch}.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"epoch": epoch, "totals": totals}, f)
        os.replace(tmp, os.path.join(d, f"{epoch}.json"))
        for e in stale:
            try:
                os.remove(os.path.join(d, f"{e}.json"))
            except FileNotFoundError:
                pass


def _query_checkpoint(ctx: Any) -> str | None:
    """The checkpoint of the running query of ``ctx``'s pipeline (the engine names it ``<job>.<pipeline>``)."""
    from streaming_engine.plan.physical import slug

    name = f"{slug(ctx.job_name)}.{slug(ctx.pipeline)}"
    try:
        for q in ctx.spark.streams.active:
            if q.name == name:
                return str(q._jsq.streamingQuery().resolvedCheckpointRoot())
    except Exception:  # not a classic (JVM) session: keep the totals in memory
        log.debug("cannot find the query's checkpoint", exc_info=True)
    return None


# ---------------------------------------------------------------------------
# run time: the checks


def _failed(rule: str, table: str, field: str, detail: str) -> EngineError:
    return EngineError("ASSERT.FAILED", {"detail": f"{rule} failed for table {table}, field {field}: {detail}"})


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def check_row_counts(table: str, rules: TableRules | None, total: int, epoch: int, final: bool) -> None:
    """MAX_ROW against the running total; MIN_ROW too when ``final`` (the query has finished)."""
    for r in (rules.row_rules if rules else None) or ():
        if r.rule_type == "MAX_ROW" and total > r.rule_value:
            raise _failed("MAX_ROW", table, "(row count)", f"value {total} rows is above the maximum {r.rule_value} (rows so far, after epoch {epoch})")
        if final and r.rule_type == "MIN_ROW" and total < r.rule_value:
            raise _failed("MIN_ROW", table, "(row count)", f"value {total} rows is below the minimum {r.rule_value} (rows of the whole query, last epoch {epoch})")


class _Check:
    """One rule on one field: a Spark boolean that is true on rows breaking it."""

    def __init__(self, rule: str, field: str, violation: "SparkColumn", explain: str):
        self.rule, self.field, self.violation, self.explain = rule, field, violation, explain


def check_rows(df: "DataFrame", table: TableSchema, rules: TableRules | None, epoch: int) -> int:
    """Apply the field rules of ``rules`` to one epoch's rows of ``table``; the number of rows."""
    from pyspark.sql import functions as F

    checks = _checks(df, table, rules) if rules is not None else []
    if not checks:
        return df.count()
    aggs = [F.count(F.lit(1)).alias("__n")]
    for i, c in enumerate(checks):
        shown = F.when(c.violation, F.coalesce(_col(c.field).cast("string"), F.lit("null")))
        aggs += [F.count_if(c.violation).alias(f"__v{i}"), F.first(shown, ignorenulls=True).alias(f"__x{i}")]
    row = df.agg(*aggs).first()
    n = int(row["__n"])
    for i, c in enumerate(checks):
        bad = int(row[f"__v{i}"] or 0)
        if bad:
            value = str(row[f"__x{i}"])
            if len(value) > 200:
                value = value[:197] + "..."
            raise _failed(c.rule, table.table_id, c.field, f"value {value} {c.explain} ({bad} of {n} rows in epoch {epoch})")
    return n


def _col(name: str) -> "SparkColumn":
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _checks(df: "DataFrame", table: TableSchema, rules: TableRules) -> list[_Check]:
    from pyspark.sql.types import NumericType, _parse_datatype_string

    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in df.schema.fields}
    checks: list[_Check] = []
    catalog = rules.catalog_table_rule
    for cr in (catalog.column_rule if catalog else None) or ():
        actual = types[cr.name]
        if cr.type is not None:
            expected = _parse_datatype_string(spark_type(cr.type))
            if not _same_type(actual, expected):
                raise _failed("column_rule", table.table_id, cr.name, f"type {actual.simpleString()}, expected {expected.simpleString()}")
        if cr.nullable is False:
            checks.append(_Check("column_rule (nullable = false)", cr.name, _col(cr.name).isNull(), "in a column that must not be null"))
    for fr in rules.field_rules or ():
        name = fr.field_name
        c, actual = _col(name), types[name]
        if isinstance(fr.field_type, str) and fr.field_type.strip().lower() == "null":
            checks.append(_Check("field_type", name, c.isNotNull(), "is not null, but the field's type is null"))
        elif fr.field_type is not None:
            expected = _parse_datatype_string(fr.spark_type())  # type: ignore[arg-type]
            if not _same_type(actual, expected):
                checks.append(_Check("field_type", name, c.isNotNull(), f"has type {actual.simpleString()}, expected {expected.simpleString()}"))
        for r in fr.field_value or ():
            t, v = r.rule_type, r.rule_value
            numeric = isinstance(actual, NumericType)
            if t == "NOT_NULL":
                checks.append(_Check(t, name, c.isNull(), "but the field must not be null"))
            elif t == "NULL":
                checks.append(_Check(t, name, c.isNotNull(), "but the field must be null"))
            elif t in ("MIN", "MAX"):
                if not numeric:
                    checks.append(_Check(t, name, F.lit(True), f"is not a number ({actual.simpleString()} field, {t} {_num(v)})"))  # type: ignore[arg-type]
                else:
                    out = c.cast("double") < float(v) if t == "MIN" else c.cast("double") > float(v)  # type: ignore[arg-type]
                    word = "below the minimum" if t == "MIN" else "above the maximum"
                    checks.append(_Check(t, name, c.isNull() | out, f"is {word} {_num(v)} (or null)"))  # type: ignore[arg-type]
            elif t in ("MIN_LENGTH", "MAX_LENGTH"):
                length = F.length(F.coalesce(c.cast("string"), F.lit("")))
                out = length < int(v) if t == "MIN_LENGTH" else length > int(v)  # type: ignore[arg-type]
                word = "shorter than" if t == "MIN_LENGTH" else "longer than"
                checks.append(_Check(t, name, out, f"is {word} {int(v)} characters"))  # type: ignore[arg-type]
            if r.equals_to is not None:
                try:
                    expected_value = _literal(r.equals_to, actual)
                except (ValueError, TypeError) as e:
                    raise _failed("equals_to", table.table_id, name, f"value {r.equals_to!r} cannot be read as {actual.simpleString()}: {e}") from None
                same = _normalized(c, actual).eqNullSafe(_normalized(expected_value, actual))
                checks.append(_Check("equals_to", name, c.isNotNull() & ~same, f"does not equal {json.dumps(r.equals_to, default=str)}"))
    return checks


def _same_type(a: "DataType", b: "DataType") -> bool:
    """Equal Spark types, ignoring nullability."""
    return a.simpleString() == b.simpleString()


def _has_map(t: "DataType") -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(t, MapType):
        return True
    if isinstance(t, ArrayType):
        return _has_map(t.elementType)
    if isinstance(t, StructType):
        return any(_has_map(f.dataType) for f in t.fields)
    return False


def _normalized(c: "SparkColumn", t: "DataType") -> "SparkColumn":
    """Maps cannot be compared in Spark: turn them into sorted arrays of (key, value) entries."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if not _has_map(t):
        return c
    if isinstance(t, MapType):
        return F.array_sort(
            F.transform(
                F.map_entries(c),
                lambda e: F.struct(_normalized(e["key"], t.keyType).alias("k"), _normalized(e["value"], t.valueType).alias("v")),
            )
        )
    if isinstance(t, ArrayType):
        return F.transform(c, lambda x: _normalized(x, t.elementType))
    assert isinstance(t, StructType)
    return F.struct(*[_normalized(c[f.name], f.dataType).alias(f.name) for f in t.fields])


def _literal(v: Any, t: "DataType") -> "SparkColumn":
    """``equals_to`` as a Spark literal of type ``t``; values are written as in FakeSource rows."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, DecimalType, MapType, StructType

    if v is None:
        return F.lit(None).cast(t)
    if isinstance(t, ArrayType):
        if not isinstance(v, list):
            raise ValueError("an array is written as a list [...]")
        return F.array(*[_literal(x, t.elementType) for x in v]).cast(t) if v else F.array().cast(t)
    if isinstance(t, MapType):
        if isinstance(v, str):
            v = _parse_object(v)
        if not isinstance(v, dict):
            raise ValueError("a map is written as an object { key = value }")
        pairs = [p for k, x in v.items() for p in (_literal(k, t.keyType), _literal(x, t.valueType))]
        return F.create_map(*pairs).cast(t) if pairs else F.create_map().cast(t)
    if isinstance(t, StructType):
        if isinstance(v, dict):
            values = [v.get(f.name) for f in t.fields]
        elif isinstance(v, list):
            if len(v) != len(t.fields):
                raise ValueError(f"a row of {len(t.fields)} fields needs {len(t.fields)} values, got {len(v)}")
            values = v
        else:
            raise ValueError("a row is written as a list of its field values")
        return F.struct(*[_literal(x, f.dataType).alias(f.name) for x, f in zip(values, t.fields)])
    if isinstance(t, BinaryType):
        if isinstance(v, str):  # base64, as FakeSource rows and SeaTunnel's Assert write bytes
            try:
                return F.lit(bytearray(base64.b64decode(v, validate=True)))
            except (binascii.Error, ValueError):
                raise ValueError(f"bytes are written in base64; {v!r} is not base64") from None
        if isinstance(v, list):
            return F.lit(bytearray(v))
        raise ValueError("bytes are written as a string")
    if isinstance(t, DecimalType):
        return F.lit(str(v)).try_cast(t)
    if isinstance(v, (dict, list)):
        raise ValueError(f"a {t.simpleString()} value cannot be a list or an object")
    return F.lit(v).try_cast(t)


def _parse_object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        from pyhocon import ConfigFactory

        try:
            return ConfigFactory.parse_string(text).as_plain_ordered_dict()
        except Exception as e:
            raise ValueError(f"cannot parse {text!r} as an object: {e}") from None
