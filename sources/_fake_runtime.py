"""FakeSource at run time: a replayable Python streaming data source.

Row ``i`` of a table is a pure function of (seed, table index, i): values come
from a NumPy generator seeded per fixed-size chunk of absolute row positions,
so any offset range regenerates exactly the same rows, whatever the batch
boundaries (what exactly-once replay after a crash needs), and the expected
output of a job can be computed without Spark (:func:`generate`).

Offsets are ``{"t<k>": rows emitted so far}`` per table. Each micro-batch admits
up to ``rows.per.batch`` rows per table (default: all of ``row.num``). BATCH
jobs stop at ``row.num`` rows per table (available-now trigger); STREAMING jobs
keep producing ``rows.per.batch`` new rows per trigger (fixed ``rows`` are
emitted once).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import pickle
import re
import string
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from streaming_engine.runtime import rows as envelope
from streaming_engine.schema import TableSchema

CHUNK = 4096
FORMAT = "streaming_engine_fake"
_LETTERS = np.array(list(string.ascii_letters))
_EPOCH = dt.date(1970, 1, 1)
_MIN_DAY, _MAX_DAY = (dt.date(2000, 1, 1) - _EPOCH).days, (dt.date(2030, 12, 31) - _EPOCH).days


@dataclass(frozen=True)
class TableSpec:
    """Everything needed to generate one table; picklable, no Spark."""

    index: int
    schema: TableSchema
    cfg: Any  # FakeDataOptions (pydantic, picklable)
    cdc: Any = None  # FakeCdc options or None
    arrow: pa.Schema | None = None  # metadata + columns; computed on the driver (workers have no JVM)

    def with_arrow(self) -> "TableSpec":
        from dataclasses import replace

        return replace(self, arrow=arrow_schema(self.schema))

    @property
    def fixed(self) -> bool:
        return bool(self.cfg.rows)

    @property
    def total(self) -> int:
        return len(self.cfg.rows) if self.fixed else self.cfg.row_num

    @property
    def per_batch(self) -> int:
        n = getattr(self.cfg, "rows_per_batch", None)
        return int(n) if n else max(self.total, 1)


# ---------------------------------------------------------------------------
# generation (pure, no Spark)


def generate(spec: TableSpec, start: int, end: int) -> pa.RecordBatch:
    """Rows ``start`` (inclusive) to ``end`` of one table, flat: metadata + columns."""
    n = max(0, end - start)
    if spec.fixed:
        return _fixed_rows(spec, start, end)
    parts = []
    pos = start
    while pos < end:
        chunk = pos // CHUNK
        lo = pos - chunk * CHUNK
        hi = min(CHUNK, end - chunk * CHUNK)
        parts.append(_chunk(spec, chunk).slice(lo, hi - lo))
        pos = chunk * CHUNK + hi
    if not parts:
        return pa.RecordBatch.from_pylist([], schema=_arrow(spec))
    table = pa.Table.from_batches(parts).combine_chunks()
    batches = table.to_batches()
    assert sum(b.num_rows for b in batches) == n
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def arrow_schema(table: TableSchema) -> pa.Schema:
    """Needs the JVM (DDL parsing): call on the driver, see TableSpec.with_arrow."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(envelope.table_struct(table), timezone="UTC")


def _arrow(spec: TableSpec) -> pa.Schema:
    return spec.arrow if spec.arrow is not None else arrow_schema(spec.schema)


def _chunk(spec: TableSpec, chunk: int) -> pa.RecordBatch:
    cfg = spec.cfg
    seed = cfg.seed if cfg.seed is not None else 0
    rng = np.random.default_rng([seed & 0xFFFFFFFF, spec.index, chunk])
    n = CHUNK
    schema = _arrow(spec)
    first = chunk * CHUNK
    seq = np.arange(first, first + n, dtype=np.int64)
    columns: dict[str, pa.Array] = {}
    for field in list(schema)[3:]:
        columns[field.name] = _values(rng, field.type, n, cfg, field.name)
    kinds = np.full(n, envelope.INSERT, dtype=object)
    if spec.cdc is not None:
        kinds, key_values = _cdc(rng, spec, n)
        columns[spec.cdc.key_column] = pa.array(key_values, type=schema.field(spec.cdc.key_column).type)
    arrays = [pa.array([spec.schema.table_id] * n, pa.string()), pa.array(kinds, pa.string()), pa.array(seq)]
    arrays += [columns[f.name] for f in list(schema)[3:]]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _cdc(rng: np.random.Generator, spec: TableSpec, n: int) -> tuple[np.ndarray, np.ndarray]:
    c = spec.cdc
    keys = rng.integers(0, c.keys, size=n)
    u = rng.random(n)
    kinds = np.where(u < c.delete_ratio, envelope.DELETE, np.where(u < c.delete_ratio + c.update_ratio, envelope.UPDATE_AFTER, envelope.INSERT))
    return kinds.astype(object), keys


def _template(cfg: Any, name: str) -> list | None:
    t = getattr(cfg, f"{name}_template", None)
    mode = getattr(cfg, f"{name}_fake_mode", "range")
    return t if t and (mode == "template" or name == "string") else None


def _values(rng: np.random.Generator, t: pa.DataType, n: int, cfg: Any, column: str) -> pa.Array:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        tmpl = _template(cfg, "string")
        if tmpl:
            return pa.array(np.asarray(tmpl, dtype=object)[rng.integers(0, len(tmpl), n)], t)
        length = cfg.string_length
        letters = _LETTERS[rng.integers(0, len(_LETTERS), size=(n, max(length, 0)))]
        return pa.array(["".join(r) for r in letters], t)
    if pa.types.is_boolean(t):
        return pa.array(rng.random(n) < 0.5, t)
    for name, check in (("tinyint", pa.types.is_int8), ("smallint", pa.types.is_int16), ("int", pa.types.is_int32), ("bigint", pa.types.is_int64)):
        if check(t):
            tmpl = _template(cfg, name)
            if tmpl:
                return pa.array(np.asarray(tmpl)[rng.integers(0, len(tmpl), n)], t)
            lo, hi = getattr(cfg, f"{name}_min"), getattr(cfg, f"{name}_max")
            return pa.array(rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64), t)
    for name, check in (("float", pa.types.is_float32), ("double", pa.types.is_float64)):
        if check(t):
            tmpl = _template(cfg, name)
            if tmpl:
                return pa.array(np.asarray(tmpl, dtype=float)[rng.integers(0, len(tmpl), n)], t)
            lo, hi = getattr(cfg, f"{name}_min"), getattr(cfg, f"{name}_max")
            hi = min(hi, 1e6) if lo < 1e6 else hi  # SeaTunnel's default max is the type's max: keep values readable
            return pa.array(rng.uniform(lo, hi, n), t)
    if pa.types.is_decimal(t):
        scale = t.scale
        digits = min(t.precision - scale, 9)
        ints = rng.integers(0, 10**digits, n)
        frac = rng.integers(0, 10 ** min(scale, 9), n) if scale else np.zeros(n, dtype=np.int64)
        q = decimal.Decimal(1).scaleb(-scale)
        vals = [decimal.Decimal(f"{a}.{str(b).zfill(min(scale, 9))}").quantize(q) if scale else decimal.Decimal(int(a)) for a, b in zip(ints, frac)]
        return pa.array(vals, t)
    if pa.types.is_date32(t):
        return pa.array(rng.integers(_MIN_DAY, _MAX_DAY, n).astype("int32"), pa.int32()).cast(t)
    if pa.types.is_timestamp(t):
        lo, hi = _MIN_DAY * 86_400_000_000, _MAX_DAY * 86_400_000_000
        return pa.array(rng.integers(lo, hi, n, dtype=np.int64), pa.int64()).cast(t)
    if pa.types.is_binary(t):
        raw = rng.integers(0, 256, size=(n, cfg.bytes_length), dtype=np.uint8)
        return pa.array([r.tobytes() for r in raw], t)
    if pa.types.is_list(t):
        size = cfg.array_size
        inner = _values(rng, t.value_type, n * size, cfg, column)
        offsets = pa.array(np.arange(0, n * size + 1, size, dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, inner).cast(t)
    if pa.types.is_map(t):
        size = cfg.map_size
        keys = _values(rng, t.key_type, n * size, cfg, column)
        items = _values(rng, t.item_type, n * size, cfg, column)
        offsets = pa.array(np.arange(0, n * size + 1, size, dtype=np.int32))
        return pa.MapArray.from_arrays(offsets, keys, items).cast(t)
    if pa.types.is_struct(t):
        children = [_values(rng, t.field(i).type, n, cfg, t.field(i).name) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(t))
    return pa.nulls(n, t)


def _fixed_rows(spec: TableSpec, start: int, end: int) -> pa.RecordBatch:
    schema = _arrow(spec)
    data = {f.name: [] for f in schema}
    for i, row in enumerate(spec.cfg.rows[start:end], start=start):
        data[envelope.TABLE].append(spec.schema.table_id)
        data[envelope.KIND].append(envelope.KIND_OF_NAME[row.kind])
        data[envelope.SEQ].append(i)
        for f, value in zip(list(schema)[3:], row.fields):
            data[f.name].append(_coerce(value, f.type))
    return pa.RecordBatch.from_pydict(data, schema=schema)


def _coerce(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_date32(t) and isinstance(value, str):
        return dt.date.fromisoformat(value)
    if pa.types.is_timestamp(t) and isinstance(value, str):
        return dt.datetime.fromisoformat(re.sub(r"\s+", "T", value.strip()))
    if pa.types.is_decimal(t):
        return decimal.Decimal(str(value))
    if pa.types.is_binary(t) and isinstance(value, str):
        return value.encode()
    return value


# ---------------------------------------------------------------------------
# the Spark streaming data source


def encode(specs: list[TableSpec], streaming: bool, partitions: int) -> str:
    return base64.b64encode(pickle.dumps((specs, streaming, partitions))).decode()


def _decode(text: str) -> tuple[list[TableSpec], bool, int]:
    return pickle.loads(base64.b64decode(text))


def register(spark: Any) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    class Slice(InputPartition):
        """One reader's share: row ranges ``(table index, start, end)``, of one or many tables."""

        def __init__(self, ranges: list[tuple[int, int, int]]):
            self.ranges = ranges

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, specs: list[TableSpec], streaming: bool, partitions: int):
            self.specs, self.streaming, self.partitions_per_table = specs, streaming, partitions

        def initialOffset(self) -> dict:
            return {f"t{s.index}": 0 for s in self.specs}

        def _cap(self, spec: TableSpec, start: int) -> int:
            if self.streaming and not spec.fixed:
                return start + spec.per_batch
            return spec.total

        def prepareForTriggerAvailableNow(self) -> None:
            pass  # bounded caps are fixed by row.num already

        def getDefaultReadLimit(self) -> Any:
            return ReadMaxRows(max(s.per_batch for s in self.specs))

        def latestOffset(self, start: dict, limit: Any = None) -> dict:
            """Admit up to rows.per.batch rows per table (all that is left if the trigger says so)."""
            out = {}
            for s in self.specs:
                pos = int(start.get(f"t{s.index}", 0))
                cap = self._cap(s, pos)
                step = cap - pos if isinstance(limit, ReadAllAvailable) else min(s.per_batch, cap - pos)
                out[f"t{s.index}"] = pos + max(0, step)
            return out

        def partitions(self, start: dict, end: dict) -> list:
            """``parallelism`` readers, as SeaTunnel's: each table's new rows cut into
            up to that many ranges, and the ranges of all tables dealt out to the
            readers by row count (100 small tables are a few tasks, not 100)."""
            readers = self.partitions_per_table
            ranges = []
            for s in self.specs:
                a, b = int(start.get(f"t{s.index}", 0)), int(end[f"t{s.index}"])
                if b <= a:
                    continue
                k = max(1, min(readers, b - a))
                bounds = np.linspace(a, b, k + 1, dtype=np.int64)
                ranges += [(s.index, int(x), int(y)) for x, y in zip(bounds[:-1], bounds[1:]) if y > x]
            return [Slice(r) for r in _deal(ranges, readers)] or [Slice([])]

        def read(self, part: Slice) -> Iterator[pa.RecordBatch]:
            for table, start, end in part.ranges:
                spec = self.specs[table]
                for a in range(start, end, 50_000):
                    yield _envelope(generate(spec, a, min(end, a + 50_000)), spec, self.specs)

        def commit(self, end: dict) -> None:
            pass

    class FakeDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return FORMAT

        def schema(self) -> str:
            specs, _, _ = _decode(self.options["spec"])
            return envelope.envelope_struct(_dataset(specs)).simpleString()

        def streamReader(self, schema: Any) -> Reader:
            return Reader(*_decode(self.options["spec"]))

    spark.dataSource.register(FakeDataSource)


def _deal(ranges: list[tuple[int, int, int]], readers: int) -> list[list[tuple[int, int, int]]]:
    """Ranges in order into at most ``readers`` groups of about equal row counts."""
    total = sum(e - s for _, s, e in ranges)
    groups: list[list[tuple[int, int, int]]] = [[]]
    filled = 0
    for r in ranges:
        if groups[-1] and filled >= total * len(groups) / readers:
            groups.append([])
        groups[-1].append(r)
        filled += r[2] - r[1]
    return [g for g in groups if g]


def _dataset(specs: list[TableSpec]):
    from streaming_engine.schema import Dataset

    return Dataset(tuple(s.schema for s in specs))


def _envelope(flat: pa.RecordBatch, spec: TableSpec, specs: list[TableSpec]) -> pa.RecordBatch:
    """Single-table: the flat batch. Multi-table: metadata + the shared slot columns
    (``rows.layout``), this table's columns in its slots, the other slots null."""
    if len(specs) == 1:
        return flat
    slots, columns = _slots(specs)
    mine = dict(zip(columns[spec.schema.table_id], flat.columns[3:]))
    arrays = [flat.column(0), flat.column(1), flat.column(2)]
    arrays += [mine[slot] if slot in mine else pa.nulls(flat.num_rows, t) for slot, t in slots]
    return pa.RecordBatch.from_arrays(arrays, names=[*envelope.META, *(slot for slot, _ in slots)])


def _slots(specs: list[TableSpec]) -> tuple[list[tuple[str, pa.DataType]], dict[str, tuple[str, ...]]]:
    """The envelope's slots with their Arrow types, and each table's slots (cached per spec list)."""
    key = id(specs)
    found = _SLOTS.get(key)
    if found is None or found[0] is not specs:
        lay = envelope.layout(_dataset(specs))
        types: dict[str, pa.DataType] = {}
        for s in specs:
            for slot, field in zip(lay.columns[s.schema.table_id], list(_arrow(s))[3:]):
                types.setdefault(slot, field.type)
        found = _SLOTS[key] = (specs, [(slot, types[slot]) for slot, _ in lay.slots], lay.columns)
    return found[1], found[2]


_SLOTS: dict[int, tuple[list[TableSpec], list[tuple[str, pa.DataType]], dict[str, tuple[str, ...]]]] = {}


def read_stream(specs: list[TableSpec], ctx: Any) -> Any:
    specs = [s.with_arrow() for s in specs]
    register(ctx.spark)
    schema = envelope.envelope_struct(_dataset(specs))
    return (
        ctx.spark.readStream.format(FORMAT)
        .schema(schema)
        .option("spec", encode(specs, ctx.streaming, max(1, ctx.parallelism)))
        .load()
    )
