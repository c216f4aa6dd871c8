"""FakeSource at run time: a replayable Python streaming data source.

Row ``i`` of a table is a pure function of (seed, table index, i): values come
from a NumPy generator seeded per fixed-size chunk of absolute row positions,
so any offset range regenerates exactly the same rows, whatever the batch
boundaries (what exactly-once replay after a crash needs), and the expected
output of a job can be computed without Spark (:func:`generate`).

As SeaTunnel's FakeSource, every one of the ``parallelism`` readers emits
``row.num`` random rows (or every ``rows`` entry once), in ``split.num``
splits of ``ceil(row.num / split.num)`` rows. Positions are ordered split by
split: round ``k`` holds split ``k`` of every reader, so a round is one
contiguous range that ``partitions`` deals out one split per reader.

Offsets are ``{"t<k>": rows emitted so far}`` per table (plus ``"ms"``, the
admission time CURRENT_DATE/TIME/TIMESTAMP read, when a table uses them, so
a replay reads the same clock). BATCH jobs get every row (in batches of
``rows.per.batch`` when set, else one batch). STREAMING jobs get one round per
micro-batch, ``split.read-interval`` ms at least after the previous one, then
nothing more (SeaTunnel's streaming FakeSource idles too); with the engine's own
``rows.per.batch`` random rows never end: that many new rows every trigger.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import json
import math
import pickle
import string
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from sources._fake_types import Clock, SType, coerce_fields, column_types, default_value, parse_type, uses_clock
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
    readers: int = 1  # the source's parallelism: each reader emits row.num rows (or every `rows` entry)
    zone: str = "UTC"  # Spark's session time zone: local date-times (and CURRENT_*) are read in it

    def with_arrow(self, readers: int = 1, zone: str = "UTC") -> "TableSpec":
        from dataclasses import replace

        return replace(self, arrow=arrow_schema(self.schema), readers=max(1, readers), zone=zone)

    @property
    def fixed(self) -> bool:
        return bool(self.cfg.rows)

    @property
    def per_reader(self) -> int:
        return len(self.cfg.rows) if self.fixed else self.cfg.row_num

    @property
    def total(self) -> int:
        return self.per_reader * self.readers

    @property
    def split_rows(self) -> int:
        """Rows of one split: ceil(row.num / split.num), as SeaTunnel's enumerator."""
        return max(1, math.ceil(self.per_reader / max(1, self.cfg.split_num)))

    def round_end(self, pos: int) -> int:
        """End of the round (split k of every reader) that position ``pos`` is in."""
        size = self.split_rows * self.readers
        return min(self.total, (pos // size + 1) * size)

    @property
    def per_batch(self) -> int:
        n = getattr(self.cfg, "rows_per_batch", None)
        return int(n) if n else max(self.total, 1)

    @property
    def endless(self) -> bool:
        """STREAMING with rows.per.batch (ours): random rows never end."""
        return not self.fixed and bool(getattr(self.cfg, "rows_per_batch", None))

    @functools.cached_property
    def columns(self) -> list[tuple[str, SType, Any]]:
        """(name, declared SeaTunnel type, defaultValue) per column."""
        if self.cfg.schema_ is None:  # not from FakeSourceOptions: the Spark types only
            return [(c.name, parse_type(c.type), None) for c in self.schema.columns]
        return column_types(self.cfg.schema_)

    @functools.cached_property
    def clocked(self) -> bool:
        return uses_clock(self.cfg)


# ---------------------------------------------------------------------------
# generation (pure, no Spark)


def generate(spec: TableSpec, start: int, end: int, now_ms: int | None = None) -> pa.RecordBatch:
    """Rows ``start`` (inclusive) to ``end`` of one table, flat: metadata + columns.
    ``now_ms`` is what CURRENT_DATE/TIME/TIMESTAMP read (default: the wall clock)."""
    n = max(0, end - start)
    clock = Clock(int(time.time() * 1000) if now_ms is None else int(now_ms), spec.zone)
    if spec.fixed:
        return _fixed_rows(spec, start, end, clock)
    parts = []
    pos = start
    while pos < end:
        chunk = pos // CHUNK
        lo = pos - chunk * CHUNK
        hi = min(CHUNK, end - chunk * CHUNK)
        parts.append(_chunk(spec, chunk, clock).slice(lo, hi - lo))
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


def _chunk(spec: TableSpec, chunk: int, clock: Clock) -> pa.RecordBatch:
    cfg = spec.cfg
    seed = cfg.seed if cfg.seed is not None else 0
    rng = np.random.default_rng([seed & 0xFFFFFFFF, spec.index, chunk])
    n = CHUNK
    schema = _arrow(spec)
    first = chunk * CHUNK
    seq = np.arange(first, first + n, dtype=np.int64)
    columns: dict[str, pa.Array] = {}
    declared = {name: (st, default) for name, st, default in spec.columns}
    for field in list(schema)[3:]:
        st, default = declared[field.name]
        if default is not None:  # SeaTunnel: the column's defaultValue instead of a random value
            columns[field.name] = pa.array([default_value(default, st, cfg, clock)] * n, field.type)
        else:
            columns[field.name] = _values(rng, st, field.type, n, cfg)
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
    """The type's template when set: SeaTunnel (and the page's `*.template` rows) pick
    from it whenever it is configured; `*.fake.mode = template` only requires it."""
    return getattr(cfg, f"{name}_template", None) or None


_INTS = {"tinyint": np.int8, "smallint": np.int16, "int": np.int32, "bigint": np.int64}


def _values(rng: np.random.Generator, st: SType, t: pa.DataType, n: int, cfg: Any) -> pa.Array:
    """``n`` random values of declared type ``st`` (Arrow type ``t``)."""
    kind = st.kind
    if kind == "null":
        return pa.nulls(n, t)
    if kind == "string":
        tmpl = _template(cfg, "string")
        if tmpl:
            return pa.array(np.asarray(tmpl, dtype=object)[rng.integers(0, len(tmpl), n)], t)
        return pa.array(_letters(rng, n, cfg.string_length), t)
    if kind == "time":  # SeaTunnel's time: a time of day, whole seconds (Spark: a string HH:MM:SS)
        secs = rng.integers(0, 86_400, n)
        return pa.array([f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" for s in secs.tolist()], t)
    if kind == "boolean":
        return pa.array(rng.random(n) < 0.5, t)
    if kind in _INTS:
        tmpl = _template(cfg, kind)
        if tmpl:
            return pa.array(np.asarray(tmpl, dtype=np.int64)[rng.integers(0, len(tmpl), n)], t)
        lo, hi = getattr(cfg, f"{kind}_min"), getattr(cfg, f"{kind}_max")
        return pa.array(rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64), t)
    if kind in ("float", "double"):
        tmpl = _template(cfg, kind)
        if tmpl:
            return pa.array(np.asarray(tmpl, dtype=float)[rng.integers(0, len(tmpl), n)], t)
        return pa.array(_uniform(rng, n, getattr(cfg, f"{kind}_min"), getattr(cfg, f"{kind}_max"), kind == "float"), t)
    if kind == "decimal":  # SeaTunnel: precision - scale random digits, the point, scale random digits
        digits = rng.integers(0, 10, size=(n, st.precision), dtype=np.int64).tolist()
        return pa.array([decimal.Decimal((0, tuple(d), -st.scale)) for d in digits], t)
    if kind == "date":
        return pa.array(rng.integers(_MIN_DAY, _MAX_DAY, n).astype("int32"), pa.int32()).cast(t)
    if kind in ("timestamp", "timestamp_ntz"):
        lo, hi = _MIN_DAY * 86_400_000_000, _MAX_DAY * 86_400_000_000
        return pa.array(rng.integers(lo, hi, n, dtype=np.int64), pa.int64()).cast(t)
    if kind == "binary":  # SeaTunnel: bytes.length random letters
        return pa.array([s.encode() for s in _letters(rng, n, cfg.bytes_length)], t)
    if kind == "array":
        size = cfg.array_size
        inner = _values(rng, st.args[0], t.value_type, n * size, cfg)
        offsets = pa.array(np.arange(0, n * size + 1, size, dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, inner).cast(t)
    if kind == "map":
        size = cfg.map_size
        keys = _values(rng, st.args[0], t.key_type, n * size, cfg)
        items = _values(rng, st.args[1], t.item_type, n * size, cfg)
        return _map_array(keys, items, n, size, t)
    if kind == "row":
        children = [_values(rng, fst, t.field(i).type, n, cfg) for i, (_, fst) in enumerate(st.fields)]
        return pa.StructArray.from_arrays(children, fields=list(t))
    raise ValueError(f"FakeSource cannot generate values of type {st}")


def _letters(rng: np.random.Generator, n: int, length: int) -> list[str]:
    letters = _LETTERS[rng.integers(0, len(_LETTERS), size=(n, max(length, 0)))]
    return ["".join(r) for r in letters]


def _uniform(rng: np.random.Generator, n: int, lo: float, hi: float, single: bool) -> np.ndarray:
    """Uniform in [lo, hi], also for ranges as wide as the type (hi - lo would overflow)."""
    u = rng.random(n)
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.clip(lo * (1 - u) + hi * u, lo, hi)
    if not single:
        return v
    v32 = v.astype(np.float32)
    v32 = np.where(v32.astype(np.float64) > hi, np.nextafter(v32, np.float32(-np.inf)), v32)
    return np.where(v32.astype(np.float64) < lo, np.nextafter(v32, np.float32(np.inf)), v32)


def _map_array(keys: pa.Array, items: pa.Array, n: int, size: int, t: pa.DataType) -> pa.Array:
    """``size`` entries per map; a key drawn twice keeps its last value (SeaTunnel's
    HashMap.put), so a map may have fewer entries than map.size."""
    offsets = np.arange(0, n * size + 1, size, dtype=np.int32)
    if size > 1:
        flat = keys.to_pylist()
        keep: list[int] = []
        bounds = [0]
        for r in range(n):
            last: dict[Any, int] = {}
            for i in range(r * size, (r + 1) * size):
                k = flat[i]
                try:
                    hash(k)
                except TypeError:
                    k = json.dumps(k, sort_keys=True, default=str)
                last[k] = i
            keep += sorted(last.values())
            bounds.append(len(keep))
        if len(keep) != n * size:
            idx = pa.array(keep, pa.int64())
            keys, items = keys.take(idx), items.take(idx)
            offsets = np.asarray(bounds, dtype=np.int32)
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items).cast(t)


def _fixed_rows(spec: TableSpec, start: int, end: int, clock: Clock) -> pa.RecordBatch:
    """Positions ``start``..``end`` of the fixed rows: each reader's split ``k``
    holds entries ``k * split_rows`` onwards (see the module doc for the order)."""
    schema = _arrow(spec)
    typed = [(name, st) for name, st, _ in spec.columns]
    per, size, readers = spec.per_reader, spec.split_rows, spec.readers
    wanted = [[n for n, _ in typed].index(f.name) for f in list(schema)[3:]]
    values = [[row[i] for i in wanted] for row in (coerce_fields(r.fields, typed, clock) for r in spec.cfg.rows)]
    meta: dict[str, list] = {envelope.TABLE: [], envelope.KIND: [], envelope.SEQ: []}
    cols: list[list] = [[] for _ in wanted]
    for pos in range(start, end):
        k, q = divmod(pos, size * readers)
        count = min(size, per - k * size)
        entry = k * size + q % count
        meta[envelope.TABLE].append(spec.schema.table_id)
        meta[envelope.KIND].append(envelope.KIND_OF_NAME[spec.cfg.rows[entry].kind])
        meta[envelope.SEQ].append(pos)
        for c, v in zip(cols, values[entry]):
            c.append(v)
    fields = list(schema)
    arrays = [pa.array(meta[f.name], f.type) for f in fields[:3]]
    arrays += [pa.array(c, f.type) for c, f in zip(cols, fields[3:])]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ---------------------------------------------------------------------------
# the Spark streaming data source


def encode(specs: list[TableSpec], streaming: bool, partitions: int) -> str:
    return base64.b64encode(pickle.dumps((specs, streaming, partitions))).decode()


def _decode(text: str) -> tuple[list[TableSpec], bool, int]:
    return pickle.loads(base64.b64decode(text))


def register(spark: Any) -> None:
    """Register the fake data source in ``spark`` (sources._python_source.register)."""
    from sources._python_source import register as register_source

    register_source(spark, FORMAT, _register)


def _register(spark: Any) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    class Slice(InputPartition):
        """One reader's share: row ranges ``(table index, start, end)``, of one or many
        tables, and the clock CURRENT_* read (the batch's admission time)."""

        def __init__(self, ranges: list[tuple[int, int, int]], now_ms: int | None = None):
            self.ranges, self.now_ms = ranges, now_ms

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, specs: list[TableSpec], streaming: bool, partitions: int):
            self.specs, self.streaming, self.partitions_per_table = specs, streaming, partitions
            self.clocked = any(s.clocked for s in specs)
            self.admitted: dict[int, float] = {}  # table index -> when its last split was admitted (monotonic s)

        def initialOffset(self) -> dict:
            out: dict = {f"t{s.index}": 0 for s in self.specs}
            if self.clocked:
                out["ms"] = int(time.time() * 1000)
            return out

        def _cap(self, spec: TableSpec, start: int, now: float) -> int:
            if not self.streaming:
                return spec.total  # BATCH: every row
            if spec.endless:
                return start + spec.per_batch
            if start >= spec.total:
                return start  # every split read: idle, as SeaTunnel's streaming FakeSource
            last = self.admitted.get(spec.index)
            if last is not None and (now - last) * 1000 < spec.cfg.split_read_interval:
                return start  # split.read-interval: not yet
            return spec.round_end(start)  # the next split of every reader

        def prepareForTriggerAvailableNow(self) -> None:
            pass  # bounded caps are fixed by row.num already

        def getDefaultReadLimit(self) -> Any:
            return ReadMaxRows(max(s.per_batch for s in self.specs))

        def latestOffset(self, start: dict, limit: Any = None) -> dict:
            """BATCH: up to rows.per.batch rows per table (all that is left if the
            trigger says so). STREAMING: the next round of splits once
            split.read-interval has passed (or rows.per.batch new rows)."""
            now = time.monotonic()
            out: dict = {}
            moved = False
            for s in self.specs:
                pos = int(start.get(f"t{s.index}", 0))
                cap = self._cap(s, pos, now)
                step = cap - pos if isinstance(limit, ReadAllAvailable) else min(s.per_batch, cap - pos)
                out[f"t{s.index}"] = pos + max(0, step)
                if step > 0:
                    moved = True
                    if self.streaming and out[f"t{s.index}"] >= s.round_end(pos):
                        self.admitted[s.index] = now
            if self.clocked:
                out["ms"] = int(time.time() * 1000) if moved else int(start.get("ms") or time.time() * 1000)
            return out

        def partitions(self, start: dict, end: dict) -> list:
            """``parallelism`` readers, as SeaTunnel's: each table's new rows cut into
            up to that many ranges (a round: one split per reader), and the ranges
            of all tables dealt out to the readers by row count (100 small tables
            are a few tasks, not 100)."""
            readers = self.partitions_per_table
            now_ms = end.get("ms")
            ranges = []
            for s in self.specs:
                a, b = int(start.get(f"t{s.index}", 0)), int(end[f"t{s.index}"])
                if b <= a:
                    continue
                k = max(1, min(readers, b - a))
                bounds = np.linspace(a, b, k + 1, dtype=np.int64)
                ranges += [(s.index, int(x), int(y)) for x, y in zip(bounds[:-1], bounds[1:]) if y > x]
            return [Slice(r, now_ms) for r in _deal(ranges, readers)] or [Slice([], now_ms)]

        def read(self, part: Slice) -> Iterator[pa.RecordBatch]:
            for table, start, end in part.ranges:
                spec = self.specs[table]
                for a in range(start, end, 50_000):
                    yield _envelope(generate(spec, a, min(end, a + 50_000), part.now_ms), spec, self.specs)

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


def session_zone(spark: Any) -> str:
    """Spark's session time zone as an id Python reads (Java's short ids such as PST resolved)."""
    from sources._fake_types import zone

    name = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    try:
        zone(name)
        return name
    except Exception:
        jvm = spark._jvm
        return str(jvm.java.time.ZoneId.of(name, jvm.java.time.ZoneId.SHORT_IDS).getId())


def read_stream(specs: list[TableSpec], ctx: Any) -> Any:
    zone = session_zone(ctx.spark)
    specs = [s.with_arrow(max(1, ctx.parallelism), zone) for s in specs]
    register(ctx.spark)
    schema = envelope.envelope_struct(_dataset(specs))
    return (
        ctx.spark.readStream.format(FORMAT)
        .schema(schema)
        .option("spec", encode(specs, ctx.streaming, max(1, ctx.parallelism)))
        .load()
    )
