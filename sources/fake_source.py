"""FakeSource: generated test data, as SeaTunnel's FakeSource connector.

Output tables (one TableSchema each, primary key when ``schema.primaryKey`` is declared):

- ``tables_configs = [{...}, ...]``: one table per item; each item is a full
  FakeSource config (its own ``schema`` with a ``table`` name, ``row.num``, ...).
- ``table-names = [...]``: one table per name, all with the same ``schema``.
- otherwise one table, named ``schema.table`` if given, else the block's
  ``plugin_output``, else "default".

What arrives, as SeaTunnel's FakeSource (connector-v2/source/FakeSource.md):

- every one of the ``parallelism`` readers emits ``row.num`` random rows, or
  every ``rows`` entry once, in ``split.num`` splits of ``ceil(row.num /
  split.num)`` rows. BATCH: all of them. STREAMING: one split per reader per
  micro-batch, ``split.read-interval`` ms apart, then nothing more (the job
  idles until stopped); the engine's own ``rows.per.batch`` makes random rows
  endless instead (that many new rows every trigger);
- ``rows`` values are written as SeaTunnel writes them and arrive in the
  declared Spark type (sources._fake_types): maps ``{k = v}``, rows as lists or
  objects, decimals as strings or numbers, bytes base64, dates, times and
  timestamps as text, CURRENT_DATE / CURRENT_TIME / CURRENT_TIMESTAMP; a value
  that does not read as its type is a plan-time error naming the row and column;
- random values: ``<type>.min``..``<type>.max`` (inclusive), or picked from
  ``<type>.template`` whenever that is set (``<type>.fake.mode = template``
  requires it); ``string.length``, ``bytes.length``, ``array.size`` and
  ``map.size`` (a key drawn twice keeps one entry), also inside arrays, maps
  and rows; a column's ``defaultValue`` (``columns`` form) instead of random
  values; ``null`` columns are null, ``time`` columns ``HH:MM:SS`` strings.

``seed`` (ours, not SeaTunnel's) makes the generated values reproducible; at the
top level it is also the default for every ``tables_configs`` item.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import SchemaBlock, flatten_dotted, table_id
from streaming_engine.plugins.base import Source, SourceOptions, option_keys, refused
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset

RowKind = Literal["INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"]
FakeMode = Literal["range", "template"]

# type -> (lowest allowed, highest allowed, default max); the default min is 0.
_RANGES: dict[str, tuple[float, float, float]] = {
    "tinyint": (-(2**7), 2**7 - 1, 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1, 2**15 - 1),
    "int": (-(2**31), 2**31 - 1, 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1, 2**63 - 1),
    "float": (-3.4028234663852886e38, 3.4028234663852886e38, 3.4028234663852886e38),
    "double": (-sys.float_info.max, sys.float_info.max, sys.float_info.max),
}


VECTORS = "vector types (float_vector, binary_vector, ...) are not supported by this engine; declare array<float>"


def _mode(t: str) -> Any:
    return Field(
        "range",
        alias=f"{t}.fake.mode",
        description=f"How {t} values are generated: range ({t}.min..{t}.max) or template (pick from {t}.template).",
    )


def _bound(t: str, which: str) -> Any:
    default = 0 if which == "min" else _RANGES[t][2]
    if t in ("float", "double"):
        default = float(default)
    return Field(default, alias=f"{t}.{which}", description=f"The {which} value of generated {t} data.")


def _template(t: str) -> Any:
    return Field(None, alias=f"{t}.template", description=f"Values to pick {t} data from (with {t}.fake.mode = template).")


class FakeRow(BaseModel):
    """One entry of ``rows``: the row kind and one value per schema column."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: RowKind = Field(description="Row kind: INSERT, UPDATE_BEFORE, UPDATE_AFTER or DELETE.")
    fields: list[Any] | dict[str, Any] = Field(
        description="The row's values: a list with one value per schema column in schema order, "
        "or an object by column name (a missing column is null)."
    )

    @field_validator("kind", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v


class FakeCdc(BaseModel):
    """Random changes to a bounded set of keys, so upserts, updates and deletes happen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_column: str = Field(description="Integer column that holds the key (usually the primary key).")
    keys: int = Field(1000, ge=1, description="Number of distinct keys.")
    update_ratio: float = Field(0.3, ge=0, le=1, description="Share of rows that are UPDATE_AFTER (+U).")
    delete_ratio: float = Field(0.1, ge=0, le=1, description="Share of rows that are DELETE (-D).")

    @model_validator(mode="after")
    def _ratios(self) -> "FakeCdc":
        if self.update_ratio + self.delete_ratio > 1:
            raise ValueError("cdc.update_ratio + cdc.delete_ratio must be at most 1")
        return self


class FakeDataOptions(BaseModel):
    """Everything that describes one generated table (top level or a tables_configs item)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: SchemaBlock | None = Field(None, alias="schema", description="Schema of the generated table.")
    rows: list[FakeRow] | None = Field(None, description="Exact rows to emit (per parallelism) instead of random ones.")
    row_num: int = Field(5, alias="row.num", ge=0, description="Number of rows generated per parallelism.")
    split_num: int = Field(1, alias="split.num", ge=1, description="Number of splits per parallelism.")
    split_read_interval: int = Field(
        1, alias="split.read-interval", ge=0, description="Interval in milliseconds between two split reads."
    )
    map_size: int = Field(5, alias="map.size", ge=0, description="Size of generated map values.")
    array_size: int = Field(5, alias="array.size", ge=0, description="Size of generated array values.")
    bytes_length: int = Field(5, alias="bytes.length", ge=0, description="Length of generated bytes values.")
    string_length: int = Field(5, alias="string.length", ge=0, description="Length of generated string values.")
    vector_dimension: refused(VECTORS) = Field(None, alias="vector.dimension", description="Vector types: not supported.")
    binary_vector_dimension: refused(VECTORS) = Field(
        None, alias="binary.vector.dimension", description="Vector types: not supported."
    )
    vector_float_min: refused(VECTORS) = Field(None, alias="vector.float.min", description="Vector types: not supported.")
    vector_float_max: refused(VECTORS) = Field(None, alias="vector.float.max", description="Vector types: not supported.")
    string_fake_mode: FakeMode = _mode("string")
    string_template: list[str] | None = Field(
        None, alias="string.template", description="Strings to pick from (used whenever set, as in SeaTunnel)."
    )
    tinyint_fake_mode: FakeMode = _mode("tinyint")
    tinyint_min: int = _bound("tinyint", "min")
    tinyint_max: int = _bound("tinyint", "max")
    tinyint_template: list[int] | None = _template("tinyint")
    smallint_fake_mode: FakeMode = _mode("smallint")
    smallint_min: int = _bound("smallint", "min")
    smallint_max: int = _bound("smallint", "max")
    smallint_template: list[int] | None = _template("smallint")
    int_fake_mode: FakeMode = _mode("int")
    int_min: int = _bound("int", "min")
    int_max: int = _bound("int", "max")
    int_template: list[int] | None = _template("int")
    bigint_fake_mode: FakeMode = _mode("bigint")
    bigint_min: int = _bound("bigint", "min")
    bigint_max: int = _bound("bigint", "max")
    bigint_template: list[int] | None = _template("bigint")
    float_fake_mode: FakeMode = _mode("float")
    float_min: float = _bound("float", "min")
    float_max: float = _bound("float", "max")
    float_template: list[float] | None = _template("float")
    double_fake_mode: FakeMode = _mode("double")
    double_min: float = _bound("double", "min")
    double_max: float = _bound("double", "max")
    double_template: list[float] | None = _template("double")
    seed: int | None = Field(None, description="Random seed for reproducible data (not a SeaTunnel option).")
    rows_per_batch: int | None = Field(
        None,
        alias="rows.per.batch",
        ge=1,
        description="Rows per micro-batch (ours). BATCH: the rows in batches of this size; "
        "STREAMING: random rows never end, this many new rows every trigger (without it a STREAMING "
        "job gets row.num rows per parallelism, split by split, as SeaTunnel's, then idles).",
    )
    cdc: FakeCdc | None = Field(
        None, description="Ours: generate CDC-like changes (+I/+U/-D) over a bounded key space of the primary key."
    )

    @field_validator("*", mode="before")
    @classmethod
    def _lower_modes(cls, v: Any, info: Any) -> Any:
        if info.field_name.endswith("_fake_mode") and isinstance(v, str):
            return v.lower()
        return v

    @model_validator(mode="after")
    def _check_values(self) -> "FakeDataOptions":
        for t, (lo, hi, _) in _RANGES.items():
            vmin, vmax = getattr(self, f"{t}_min"), getattr(self, f"{t}_max")
            if not (lo <= vmin <= hi and lo <= vmax <= hi):
                raise ValueError(f"{t}.min/{t}.max must lie within {lo}..{hi}")
            if vmin > vmax:
                raise ValueError(f"{t}.min ({vmin}) is greater than {t}.max ({vmax}); swap them")
            template = getattr(self, f"{t}_template")
            if getattr(self, f"{t}_fake_mode") == "template" and not template:
                raise ValueError(f"{t}.fake.mode = template needs a non-empty {t}.template list")
            if template and any(not lo <= x <= hi for x in template):
                raise ValueError(f"{t}.template has values outside the {t} range {lo}..{hi}")
        if self.string_fake_mode == "template" and not self.string_template:
            raise ValueError("string.fake.mode = template needs a non-empty string.template list")
        if self.cdc is not None and self.schema_ is not None:
            cols = {c.name: c for c in self.schema_.column_list()}
            col = cols.get(self.cdc.key_column)
            if col is None:
                raise ValueError(f"cdc.key_column {self.cdc.key_column!r} is not a schema column")
            if col.type not in ("tinyint", "smallint", "int", "bigint"):
                raise ValueError(f"cdc.key_column {self.cdc.key_column!r} must be an integer column")
        if self.schema_ is not None:
            self._check_schema_values()
        return self

    def _check_schema_values(self) -> None:
        """Every ``rows`` value and column ``defaultValue`` must read as its column's
        type (SeaTunnel's notation, see sources._fake_types), here, not in a Spark task."""
        from sources._fake_types import coerce_fields, check_type, column_types, default_value

        columns = column_types(self.schema_)
        for name, t, default in columns:
            check_type(t, f"column {name!r}")
            if default is not None:
                try:
                    default_value(default, t, self)
                except ValueError as e:
                    raise ValueError(f"column {name!r} ({t}): defaultValue {default!r}: {e}") from None
        typed = [(n, t) for n, t, _ in columns]
        for i, row in enumerate(self.rows or (), 1):
            if isinstance(row.fields, list) and len(row.fields) != len(typed):
                raise ValueError(
                    f"rows[{i}] ({row.kind}) has {len(row.fields)} values but the schema has {len(typed)} columns"
                )
            try:
                values = coerce_fields(row.fields, typed)
            except ValueError as e:
                raise ValueError(f"rows[{i}] ({row.kind}) {e}") from None
            for column, value in zip(self.schema_.column_list(), values):  # type: ignore[union-attr]
                if value is None and not column.nullable:
                    raise ValueError(f"rows[{i}] ({row.kind}) {column.name}: null in a column declared nullable = false")


class FakeTableConfig(FakeDataOptions):
    """One item of ``tables_configs``: needs its own schema with a table name."""

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        return flatten_dotted(data, option_keys(cls)) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _needs_table(self) -> "FakeTableConfig":
        if self.schema_ is None or not self.schema_.table:
            raise ValueError('each tables_configs item needs schema { table = "db.table", fields { ... } }')
        return self


# Top-level keys that only make sense for a single table: not allowed next to tables_configs.
_PER_TABLE = set(FakeDataOptions.model_fields) - {"seed"}


class FakeSourceOptions(SourceOptions, FakeDataOptions):
    tables_configs: list[FakeTableConfig] | None = Field(
        None, description="Several tables: each item is a full FakeSource config with its own schema.table."
    )
    table_names: list[str] | None = Field(
        None, alias="table-names", description="Generate one table per name, all with the same schema."
    )

    @model_validator(mode="after")
    def _check_tables(self) -> "FakeSourceOptions":
        if self.tables_configs is not None:
            misplaced = sorted(
                (FakeDataOptions.model_fields[n].alias or n) for n in self.model_fields_set & _PER_TABLE
            )
            if misplaced:
                raise ValueError(
                    f"with tables_configs, move {', '.join(misplaced)} into each tables_configs item"
                )
            if self.table_names is not None:
                raise ValueError("use either tables_configs or table-names, not both")
            if not self.tables_configs:
                raise ValueError("tables_configs is empty; add at least one table config")
            _no_duplicates([t.schema_.table for t in self.tables_configs])  # type: ignore[union-attr]
            return self
        if self.schema_ is None:
            raise ValueError("schema is required: add schema { fields { name = type, ... } } (or use tables_configs)")
        if self.table_names is not None:
            if not self.table_names:
                raise ValueError("table-names is empty; list at least one table name")
            if self.schema_.table:
                raise ValueError("set either schema.table or table-names, not both")
            _no_duplicates(self.table_names)
        return self


def _no_duplicates(names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"table {n!r} is declared twice; give each table a unique name")
        seen.add(n)


@register
class FakeSource(Source):
    name: ClassVar[str] = "FakeSource"
    seatunnel_page = "connector-v2/source/FakeSource.md"
    seatunnel_errata = {
        "int.fake.template": "a typo on the page for int.fake.mode (SeaTunnel's FakeSource reads int.fake.mode): "
        "an unknown option here too (a warning); write int.fake.mode",
    }
    restore_tunable = frozenset({"rows.per.batch", "split.read-interval"})  # the pace, not the rows
    Options = FakeSourceOptions
    description = "Generates random or fixed rows from a declared schema (SeaTunnel FakeSource)."
    boundedness = "both"

    options: FakeSourceOptions

    def table_configs(self) -> list[tuple[str, FakeDataOptions]]:
        """(table id, generation options) per output table; the runtime generates from these."""
        o = self.options
        if o.tables_configs:
            return [
                (t.schema_.table, t if t.seed is not None or o.seed is None else t.model_copy(update={"seed": o.seed}))
                for t in o.tables_configs
            ]  # type: ignore[union-attr, misc]
        if o.table_names:
            return [(name, o) for name in o.table_names]
        return [(table_id(o.schema_, o.plugin_output), o)]

    def output(self) -> Dataset:
        return Dataset(tuple(cfg.schema_.to_table(tid) for tid, cfg in self.table_configs()))  # type: ignore[union-attr]

    def read(self, ctx: Any) -> Any:
        from sources._fake_runtime import TableSpec, read_stream

        tables = {t.table_id: t for t in ctx.dataset.tables}
        specs = [
            TableSpec(i, tables[tid], cfg, cfg.cdc) for i, (tid, cfg) in enumerate(self.table_configs())
        ]
        return read_stream(specs, ctx)

    def describe(self) -> str:
        parts = []
        for tid, cfg in self.table_configs():
            n = f"{len(cfg.rows)} fixed rows" if cfg.rows else f"{cfg.row_num} rows"
            parts.append(f"{tid}: {n} x {cfg.split_num} split(s)")
        return f"FakeSource ({'; '.join(parts)} per parallelism)"
