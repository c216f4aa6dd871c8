"""The engine's row envelope: every row carries its table id and row kind.

A source's streaming DataFrame has three metadata columns, then the data:

- ``__table`` (string): the table id (``db.table``), as SeaTunnel's tableId;
- ``__kind`` (string): the row kind ``+I``, ``-U``, ``+U``, ``-D`` (SeaTunnel's RowKind);
- ``__seq`` (bigint): the row's position in its source's order, used to keep
  the last change per key within a batch;

followed, for a single-table source, by the table's columns, and for a
multi-table source by shared *slot* columns (``__c0``, ``__c1``, ...; see
:func:`layout`): per column type, as many slots as the table with the most
columns of that type has, and each table puts its columns into the slots of
their types in order. A row is as wide as the widest table, not as all tables
together (one struct per table made every row carry every table: O(rows x
tables) through Arrow, the shuffle and the cache), and types never clash.
``split_tables`` turns a batch into one flat DataFrame per table.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence, TypeVar

from streaming_engine.schema import (  # noqa: F401  (the envelope's names, re-exported)
    DELETE, INSERT, KIND, KIND_OF_NAME, META, META_DDL, NAME_OF_KIND, ROW_KINDS, SEQ, TABLE, TRUNCATE, UPDATE_AFTER,
    UPDATE_BEFORE, Dataset, TableSchema,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

# A record a source could not decode travels as a row whose REJECT column
# holds its dead letter (every good row: null); the runtime writes those rows
# to the job's dead-letter table and hands only good rows downstream.
REJECT = "__reject"
REJECT_DDL = "payload string, error string, source_table string, topic string, `partition` int, `offset` bigint"

K = TypeVar("K")
T = TypeVar("T")



@dataclass(frozen=True)
class Layout:
    """Where a multi-table envelope keeps each table's columns."""

    slots: tuple[tuple[str, str], ...]  # (slot column, Spark DDL type)
    columns: dict[str, tuple[str, ...]]  # table id -> the slot of each of its columns, in order

    def slot_type(self, slot: str) -> str:
        return dict(self.slots)[slot]


def layout(dataset: Dataset) -> Layout:
    """Slots for ``dataset``'s tables: per type, as many as the widest table needs."""
    types, columns = assign_slots({t.table_id: [c.type for c in t.columns] for t in dataset.tables})
    name = slot_name
    return Layout(
        tuple((name(i), ty) for i, ty in enumerate(types)),
        {tid: tuple(name(i) for i in idx) for tid, idx in columns.items()},
    )


def slot_name(index: int) -> str:
    return f"__c{index}"


def assign_slots(tables: "dict[K, Sequence[T]]") -> "tuple[list[T], dict[K, tuple[int, ...]]]":
    """Shared typed slots for tables given as column type lists (any hashable type
    key): per type, as many slots as the table with most columns of it has; each
    table's columns take the slots of their type in order. Returns the type of
    each slot and, per table, the slot index of each column."""
    types: list = []
    by_type: dict = {}
    columns: dict = {}
    for key, column_types in tables.items():
        used: dict = {}
        mine = []
        for ty in column_types:
            n = used.get(ty, 0)
            used[ty] = n + 1
            of_type = by_type.setdefault(ty, [])
            if n == len(of_type):
                of_type.append(len(types))
                types.append(ty)
            mine.append(of_type[n])
        columns[key] = tuple(mine)
    return types, columns


def table_ddl(table: TableSchema, meta: bool = True) -> str:
    body = table.ddl()
    if not meta:
        return body
    return f"{META_DDL}, {body}" if body else META_DDL


def table_struct(table: TableSchema, meta: bool = True) -> "StructType":
    """What parsing :func:`table_ddl` gives (every field nullable), built from
    the columns' types (:func:`data_type`)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    fields = [StructField(TABLE, StringType(), True), StructField(KIND, StringType(), True),
              StructField(SEQ, LongType(), True)] if meta else []
    return StructType(fields + [StructField(c.name, data_type(c.type), True) for c in table.columns])


# DDL type names whose Spark type no session setting changes (``string`` may
# carry a session's default collation, ``timestamp`` is ``spark.sql.timestampType``):
# built here; any other type is parsed by the JVM, once per process.
_FIXED_TYPES = {
    "bigint": "LongType", "long": "LongType", "int": "IntegerType", "integer": "IntegerType",
    "smallint": "ShortType", "short": "ShortType", "tinyint": "ByteType", "byte": "ByteType",
    "double": "DoubleType", "float": "FloatType", "real": "FloatType", "boolean": "BooleanType",
    "date": "DateType", "binary": "BinaryType",
}
_DECIMAL = re.compile(r"(?:decimal|dec|numeric)\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def data_type(ddl: str) -> "DataType":
    """The Spark type of a DDL type string, as the JVM's parser gives it. A
    driver asks for every table's types when it plans (a query start of 20
    tables parsed ~40 DDL strings in a cold JVM: ~3 s); fixed types are built
    without the JVM, the others parsed once per process."""
    import pyspark.sql.types as T

    key = ddl.strip().lower()
    fixed = _FIXED_TYPES.get(key)
    if fixed is not None:
        return getattr(T, fixed)()
    m = _DECIMAL.fullmatch(key)
    if m is not None and int(m[2]) <= int(m[1]) and 1 <= int(m[1]) <= 38:  # else the JVM says what is wrong
        return T.DecimalType(int(m[1]), int(m[2]))
    return T._parse_datatype_json_value(_type_json(ddl))


@functools.lru_cache(maxsize=4096)
def _type_json(ddl: str) -> "dict | str":
    """A DDL type parsed by the JVM (one py4j call), once per process."""
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(ddl).jsonValue()


def envelope_struct(dataset: Dataset) -> "StructType":
    """The streaming schema a source produces for ``dataset``."""
    from pyspark.sql.types import StructField, StructType

    if not dataset.is_multi_table:
        return table_struct(dataset.tables[0])
    fields = list(table_struct(dataset.tables[0]).fields[:3])
    for slot, ddl in layout(dataset).slots:
        fields.append(StructField(slot, data_type(ddl), True))
    return StructType(fields)


class TableFrames(Mapping[str, "DataFrame"]):
    """Per-table frames of one batch, built when a frame is first asked for,
    all at once (one py4j call for a multi-table batch): a batch whose tables
    are all written from the envelope itself (the one-job fan-out) never
    builds them. Views made by :meth:`subset` share the one build."""

    def __init__(self, keys: Iterable[str], build: "Callable[[], Mapping[str, DataFrame]]") -> None:
        self._keys = tuple(keys)
        self._build: "Callable[[], Mapping[str, DataFrame]] | None" = build
        self._built: "Mapping[str, DataFrame] | None" = None
        self._parent: TableFrames | None = None

    def _frames(self) -> "Mapping[str, DataFrame]":
        if self._parent is not None:
            return self._parent._frames()
        if self._built is None:
            assert self._build is not None
            self._built, self._build = self._build(), None
        return self._built

    def __getitem__(self, key: str) -> "DataFrame":
        if key not in self._keys:
            raise KeyError(key)
        return self._frames()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def subset(self, keys: Iterable[str]) -> "TableFrames":
        """The frames of ``keys`` (in that order; each must be here), unbuilt."""
        keys = tuple(keys)
        missing = [k for k in keys if k not in self._keys]
        if missing:
            raise KeyError(missing[0])
        view = TableFrames(keys, lambda: {})
        view._build, view._parent = None, self
        return view


def subset(frames: "Mapping[str, DataFrame]", keys: Iterable[str]) -> "Mapping[str, DataFrame]":
    """``frames`` restricted to ``keys``, without building lazy frames."""
    if isinstance(frames, TableFrames):
        return frames.subset(keys)
    return {k: frames[k] for k in keys}


def lazy_split(
    df: "DataFrame", dataset: Dataset, coalesce: bool = False, before: "Callable[[], object] | None" = None
) -> TableFrames:
    """:func:`split_tables`, built on first use; ``coalesce``: each frame in
    one partition; ``before`` runs first (once)."""

    def build() -> "dict[str, DataFrame]":
        if before is not None:
            before()
        frames = split_tables(df, dataset)
        return {t: f.coalesce(1) for t, f in frames.items()} if coalesce else frames

    return TableFrames([t.table_id for t in dataset.tables], build)


def split_tables(df: "DataFrame", dataset: Dataset) -> dict[str, "DataFrame"]:
    """One flat DataFrame (metadata + table columns) per table of a source batch."""
    from pyspark.sql import functions as F

    if not dataset.is_multi_table:
        t = dataset.tables[0]
        if df.columns == [*META, *t.names]:
            return {t.table_id: df}  # the source's frame is the table's already
        return {t.table_id: df.select(*META, *[F.col(_q(c)) for c in t.names])}
    slots = layout(dataset).columns
    built = _split_in_jvm(df, dataset, slots)
    out = {}
    for i, t in enumerate(dataset.tables):
        if built is not None:
            frame = built[i]
        else:
            frame = df.where(F.col(TABLE) == t.table_id).select(
                *META, *[F.col(slot).alias(c) for slot, c in zip(slots[t.table_id], t.names)]
            )
        out[t.table_id] = frame
    return out


def _split_in_jvm(df: "DataFrame", dataset: Dataset, slots: dict[str, tuple[str, ...]]) -> "list[DataFrame] | None":
    """The per-table frames built by the engine's JVM helper (Envelope.java) in
    one py4j call; None when its jar is not on the class path."""
    from pyspark.sql.classic.dataframe import DataFrame

    from streaming_engine.jvm import jvm_class

    helper = jvm_class(df.sparkSession._jvm, ENVELOPE_CLASS)  # type: ignore[attr-defined]
    if helper is None:
        return None
    if any("\x01" in x or "\x02" in x for t in dataset.tables for x in (t.table_id, *t.names)):
        return None  # a name holding a separator of the spec: build the frames here
    records = ["\x02".join((TABLE, *META))]
    for t in dataset.tables:
        records.append("\x02".join((t.table_id, *[x for pair in zip(slots[t.table_id], t.names) for x in pair])))
    jframes = helper.split(df._jdf, "\x01".join(records))
    return [DataFrame(jframes[i], df.sparkSession) for i in range(len(dataset.tables))]


ENVELOPE_CLASS = "io.streamingengine.spark.Envelope"


def join_tables(frames: "Sequence[DataFrame]", dataset: Dataset, target: Layout) -> "DataFrame":
    """The inverse of :func:`split_tables`: per-table frames (the envelope's
    metadata, then the table's columns; one per table of ``dataset``, in its
    order) in ONE multi-table envelope laid out as ``target``, each frame one
    partition (``coalesce(1)``) and each row's table id its frame's. One py4j
    call (``Envelope.join``) when the engine's classes are there; built column
    by column otherwise."""
    from pyspark.sql import functions as F
    from pyspark.sql.classic.dataframe import DataFrame

    from streaming_engine.jvm import jvm_class

    spark = frames[0].sparkSession
    helper = jvm_class(spark._jvm, ENVELOPE_CLASS)  # type: ignore[attr-defined]
    names = (*META, *(x for pair in target.slots for x in pair), *(x for t in dataset.tables for x in (t.table_id, *t.names)))
    if helper is not None and not any("\x01" in x or "\x02" in x for x in names):
        records = ["\x02".join(META), "\x02".join(x for pair in target.slots for x in pair)]
        for t in dataset.tables:
            records.append("\x02".join((t.table_id, *[x for pair in zip(t.names, target.columns[t.table_id]) for x in pair])))
        gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
        jframes = gateway.new_array(spark._jvm.org.apache.spark.sql.Dataset, len(frames))  # type: ignore[attr-defined]
        for i, f in enumerate(frames):
            jframes[i] = f._jdf
        return DataFrame(helper.join(jframes, "\x01".join(records)), spark)
    out = None
    for t, f in zip(dataset.tables, frames):
        mine = dict(zip(target.columns[t.table_id], t.names))
        cols = [F.lit(t.table_id).alias(TABLE), *(column(c) for c in META[1:])]
        cols += [(column(mine[slot]) if slot in mine else F.lit(None).cast(ddl)).alias(slot) for slot, ddl in target.slots]
        framed = f.select(*cols).coalesce(1)
        out = framed if out is None else out.union(framed)
    assert out is not None
    return out


def blank_metadata(df: "DataFrame", names: "Sequence[str]") -> "DataFrame":
    """``df`` with the metadata columns ``names`` as typed nulls, in the
    envelope's column order, whether ``df`` has them or not (see
    :func:`drop_metadata`)."""
    if not names:
        return df
    meta = [_typed_null(c) if c in names else column(c) for c in META]
    return df.select(*meta, *[column(c) for c in df.columns if c not in META])


def _typed_null(name: str) -> "Column":
    """The metadata column ``name`` as a typed null, built once per JVM (like :func:`column`)."""
    from pyspark import SparkContext
    from pyspark.sql import functions as F

    sc = SparkContext._active_spark_context
    key = (id(sc._gateway) if sc is not None else 0, "\0null", name)
    found = _COLUMNS.get(key)
    if found is None:
        types = dict(part.split() for part in META_DDL.split(", "))
        found = _COLUMNS[key] = F.lit(None).cast(types[name]).alias(name)
    return found


def drop_metadata(df: "DataFrame", names: "Sequence[str]") -> "DataFrame":
    """``df`` without the metadata columns ``names``. The streaming query then
    never computes nor carries them (every row of a micro-batch handed to
    foreachBatch is materialized, null columns too: 3 of 6 columns at 10 M
    rows cost ~6 % of a whole job); :func:`blank_metadata` puts them back as
    nulls inside the epoch, where Spark prunes them again."""
    if not names:
        return df
    return df.select(*[column(c) for c in df.columns if c not in names])


def reject(payload: "Column", error: "Column", source_table: "Column", topic: "Column | None" = None,
           partition: "Column | None" = None, offset: "Column | None" = None) -> "Column":
    """The REJECT struct of a record (build it under ``when(error is not null)``)."""
    from pyspark.sql import functions as F

    def typed(c: "Column | None", t: str) -> "Column":
        return (c if c is not None else F.lit(None)).cast(t)

    return F.struct(
        typed(payload, "string").alias("payload"), typed(error, "string").alias("error"),
        typed(source_table, "string").alias("source_table"), typed(topic, "string").alias("topic"),
        typed(partition, "int").alias("partition"), typed(offset, "bigint").alias("offset"),
    )


# A source whose records carry an event time (Debezium's ``source.ts_ms``)
# reports the newest one each batch holds through Spark's observed metrics
# (Dataset.observe, one per source uid); the runtime reads them from the
# query's progress into ``SourceProgress.event_time_ms``.
EVENT_TIME_PREFIX = "source_time:"
EVENT_TIME_FIELD = "max_ts_ms"


def observe_event_time(df: "DataFrame", uid: str, ts_ms: "Column") -> "DataFrame":
    """``df`` reporting per micro-batch the largest ``ts_ms`` (epoch
    milliseconds; null values are ignored) of its rows under the source's uid."""
    from pyspark.sql import functions as F

    return df.observe(EVENT_TIME_PREFIX + uid, F.max(ts_ms.cast("bigint")).alias(EVENT_TIME_FIELD))


def observed_event_times(observed: "Mapping | None") -> "list[tuple[str, int]]":
    """(source uid, epoch ms) from a progress' ``observedMetrics`` (its JSON's
    objects, or PySpark's Rows); a batch without an event time (no rows, or
    none with one) reports null: left out."""
    out = []
    for name, row in (observed or {}).items():
        if hasattr(row, "asDict"):  # pyspark.sql.Row
            row = row.asDict()
        if isinstance(name, str) and name.startswith(EVENT_TIME_PREFIX) and isinstance(row, Mapping):
            value = row.get(EVENT_TIME_FIELD)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((name[len(EVENT_TIME_PREFIX):], int(value)))
    return out




def column(name: str) -> "Column":
    """A column reference that is safe for any name (dots, spaces, backquotes).

    Cached per name and JVM: a reference is unresolved, so the same Column
    serves every DataFrame, and building one costs py4j round trips (chains
    are rebuilt every epoch).
    """
    from pyspark import SparkContext
    from pyspark.sql import functions as F

    sc = SparkContext._active_spark_context
    key = (id(sc._gateway) if sc is not None else 0, name)
    found = _COLUMNS.get(key)
    if found is None:
        if len(_COLUMNS) > 10_000:
            _COLUMNS.clear()
        found = _COLUMNS[key] = F.col("`" + name.replace("`", "``") + "`")
    return found


_COLUMNS: dict[tuple, "Column"] = {}


def select_columns(df: "DataFrame", columns: "dict[str, Column]") -> "DataFrame":
    """``df`` as the metadata columns, then ``columns`` (name -> expression) in order."""
    return df.select(*[column(c) for c in META], *[expr.alias(name) for name, expr in columns.items()])


def _q(name: str) -> str:
    return f"`{name}`" if not name.isidentifier() else name
