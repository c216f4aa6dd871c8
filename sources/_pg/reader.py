"""The Postgres-CDC source at run time: a Spark Python streaming data source over the job's slot.

Offsets are epoch ends (:func:`sources._pg.slot.epoch_end`, ``{"lsn": n}``)
with the slot they were read through (``"slot"``: a job that names another
slot is refused, its changes in between would be lost), the tables they cover
(``"tables"``: a table added to table-names since is added to the publication
and, under startup.mode = initial, snapshotted like the first ones, while the
others stream) and, during a snapshot, its progress (``"snapshot"``).
A micro-batch ``(start, end]`` is ONE partition: a task peeks the slot for the
transactions that committed in that range (the WAL is one stream, in commit
order) and turns their changes into the engine's row envelope, values as
PostgreSQL's text, cast to the tables' types by the query. Spark calls
:meth:`Reader.commit` with a batch's end only after the batch has committed
(every sink and the ledger, in the engine's foreachBatch): only then does the
slot move. A restarted query runs its last planned batch again with the same
offsets: the slot still holds those changes.

Row kinds: INSERT ``+I``; UPDATE ``-U`` (the old row, when the server sends
it: REPLICA IDENTITY FULL) and ``+U``, or ``-D`` and ``+I`` when it changed the
primary key (as Debezium emits it: an upsert must remove the old key); DELETE
``-D`` (the old row); ``__seq``
is the change's LSN, so a key's changes order as the server made them. An
unchanged TOASTed value of an UPDATE (not sent) is taken from the old row,
which REPLICA IDENTITY FULL carries. Under ``replica.identity = DEFAULT``
(``TableSchema.by_key``) a DELETE's old row is its key, an UPDATE has none:
an unchanged TOASTed value is then the key's earlier change's in the epoch
(:meth:`_Rows._earlier`), else the row's kind is PARTIAL (``+U~3``: the
sink keeps its table's value of the column at position 3).
"""

from __future__ import annotations

import base64
import pickle
from dataclasses import dataclass, field
from typing import Any, Iterator

from sources._pg.catalog import Connection, engine_type_of_oid
from sources._pg.pgoutput import UNCHANGED_TOAST, Change, Relation, Truncate, lsn_text
from streaming_engine.errors import RuntimeFailure, SchemaError
from streaming_engine.runtime import rows as envelope
from streaming_engine.schema import Dataset, TableSchema, partial_kind, widens

FORMAT = "streaming_engine_pg_cdc"


@dataclass(frozen=True)
class Spec:
    """What a reader needs (pickled into the query's options; the password travels apart, as ``password``)."""

    connection: Connection  # password None
    slot: str
    publication: str
    tables: tuple[TableSchema, ...]
    time_zone: str
    truncate_events: str  # apply, reject, ignore
    struct_json: str = ""  # the data source's schema (text_struct), for Arrow batches on executors
    snapshot: bool = False  # startup.mode = initial: read the tables first (sources/_pg/snapshot.py)
    split_size: int = 8096  # snapshot.split.size
    chunks_per_epoch: int = 32  # snapshot.chunks.per.epoch
    tasks: int = 2  # the Spark tasks an epoch's chunks are dealt to (the session's default parallelism)
    schema_changes: dict = field(default_factory=dict)  # table id -> schema.change.behavior (lenient when absent)
    planned_at: int = 0  # the WAL position when the tables' columns were read (changes before it: older columns)
    type_oids: dict = field(default_factory=dict)  # table id -> {column: pg_type oid} when planned
    # by_key tables: text of the epoch's latest TOASTable values held in memory before they spill to disk (_Latest)
    spill_bytes: int = 64 << 20

    @property
    def dataset(self) -> Dataset:
        return Dataset(self.tables)


def encode(spec: Spec) -> str:
    return base64.b64encode(pickle.dumps(spec)).decode()


def _decode(text: str) -> Spec:
    return pickle.loads(base64.b64decode(text))


def _open(spec: Spec, password: str | None, autocommit: bool = True) -> Any:
    from dataclasses import replace

    conn = replace(spec.connection, password=password).connect("streaming-engine postgres-cdc")
    conn.autocommit = autocommit
    with conn.cursor() as cur:
        # the text of timestamptz, dates and floats as the casts read them
        cur.execute("SELECT set_config('TimeZone', %s, false), set_config('DateStyle', 'ISO, YMD', false), "
                    "set_config('extra_float_digits', '3', false), set_config('bytea_output', 'hex', false)",
                    (spec.time_zone,))
    return conn


class _Rows:
    """Changes -> envelope tuples: (table, kind, seq, values by the envelope's data columns).

    ``progress``: while the snapshot runs, a change is kept only for a key
    whose chunk an earlier epoch read (the others' chunks hold it)."""

    def __init__(self, spec: Spec, progress: dict | None = None) -> None:
        from sources._pg.snapshot import Progress

        self.spec = spec
        self.tables = {t.table_id: t for t in spec.tables}
        self.database = spec.connection.database
        if spec.dataset.is_multi_table:
            lay = envelope.layout(spec.dataset)
            slots = [s for s, _ in lay.slots]
            self.width = len(slots)
            self.places = {tid: tuple(slots.index(s) for s in lay.columns[tid]) for tid in self.tables}
        else:
            (only,) = spec.tables
            self.width = len(only.columns)
            self.places = {only.table_id: tuple(range(self.width))}
        # a column's former names (renamed under evolve): a change from before the rename names it so
        self.aliases = {t.table_id: {was: c.name for c in t.columns for was in c.former} for t in spec.tables}
        self.relations: dict[int, Relation] = {}
        self._checked: dict[int, Relation] = {}  # relation oid -> the Relation message whose columns were checked
        self._seen = _Latest(spec.spill_bytes)  # by_key tables: (table, key) -> its TOASTable values (_remember)
        self._toastable: dict[str, tuple[str, ...]] = {}
        self.progress = Progress(self.tables, progress)
        self._arrow: Any = None
        # values PostgreSQL has and Spark or Delta do not: NUMERIC NaN and +-Infinity, +-infinity dates and times
        self._unrepresentable = {tid: [(i, c.name, c.type) for i, c in enumerate(t.columns) if _beyond(c.type)]
                                 for tid, t in self.tables.items()}

    def chunk_batch(self, table: TableSchema, columns: list, at: int) -> Any:
        """A snapshot chunk's rows (Arrow string columns, the table's order) as an envelope batch: +I at ``at``."""
        import pyarrow as pa

        if self._arrow is None:
            from pyspark.sql.pandas.types import to_arrow_schema
            from pyspark.sql.types import StructType

            self._arrow = to_arrow_schema(StructType.fromJson(__import__("json").loads(self.spec.struct_json)),
                                          timezone="UTC")
        n = len(columns[0]) if columns else 0
        for i, name, type_ in self._unrepresentable.get(table.table_id, ()):
            import pyarrow.compute as pc

            bad = pc.is_in(columns[i], value_set=pa.array(_beyond(type_)))
            if pc.any(bad).as_py():
                first = pc.index(bad, True).as_py()
                key = {k: columns[table.names.index(k)][first].as_py() for k in table.primary_key}
                raise _not_representable(table, name, type_, columns[i][first].as_py(), f"the snapshot's row {key}")
        out: list = [None] * self.width
        for place, column in zip(self.places[table.table_id], columns):
            out[place] = column
        # constant columns by pa.repeat: a list of n Python objects per column cost ~0.35 s per 1 M rows
        arrays = [pa.repeat(pa.scalar(table.table_id, pa.string()), n),
                  pa.repeat(pa.scalar(envelope.INSERT, pa.string()), n), pa.repeat(pa.scalar(at, pa.int64()), n)]
        arrays += [c if c is not None else pa.nulls(n, pa.string()) for c in out]
        arrays.append(pa.nulls(n, pa.int64()))  # COMMIT_TIME: a snapshot row has none
        return pa.RecordBatch.from_arrays(arrays, schema=self._arrow)

    def named(self, table: TableSchema, values: dict | None) -> dict | None:
        """``values`` (a Relation's names) by the table's planned names: a column's former name is its name now."""
        aliases = self.aliases.get(table.table_id)
        if not aliases or values is None:
            return values
        return {aliases.get(k, k): v for k, v in values.items()}

    def table_of(self, relation: Relation) -> TableSchema | None:
        return self.tables.get(f"{self.database}.{relation.namespace}.{relation.name}")

    def rows(self, change: Change | Truncate, lsn: int) -> Iterator[tuple]:
        if isinstance(change, Truncate):
            yield from self._truncate(change, lsn)
            return
        relation = self.relations.get(change.relation_oid)
        if relation is None:
            raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
                f"a change at LSN {lsn_text(lsn)} of relation {change.relation_oid}, which the slot did not describe")})
        table = self.table_of(relation)
        if table is None:
            return  # a table of the publication this job does not read
        old, new = self.named(table, relation.values(change.old)), self.named(table, relation.values(change.new))
        if new is not None and any(v is UNCHANGED_TOAST for v in new.values()):
            if change.old_kind == "O":
                assert old is not None
                new = {k: (old[k] if v is UNCHANGED_TOAST else v) for k, v in new.items()}
            elif table.by_key:
                new = self._earlier(table, old, new)
            else:
                raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
                    f"table {table.table_id}: an UPDATE at LSN {lsn_text(lsn)} left a TOASTed value unchanged and the "
                    "server did not send the old row (REPLICA IDENTITY is no longer FULL); run ALTER TABLE ... "
                    "REPLICA IDENTITY FULL and restart the job, or set replica.identity = DEFAULT (upsert sinks only)")})
        if table.by_key:
            self._remember(table, change.kind, old, new)
        if lsn >= self.spec.planned_at and self._checked.get(relation.oid) is not relation:
            self._check_columns(table, relation, lsn)  # (before: a shape older than the plan, not a change)
        read = self.progress.read  # False: the key's snapshot chunk is still to come and will hold this change
        tid = table.table_id
        if change.kind == "I":
            if read(tid, new):
                yield self._row(table, envelope.INSERT, lsn, new)
        elif change.kind == "U":
            assert new is not None
            if old is not None and any(old.get(k) != new.get(k) for k in table.primary_key):
                # the key changed: the old key's row is gone and a new one exists (as Debezium emits it)
                if read(tid, old):
                    yield self._row(table, envelope.DELETE, lsn, old)
                if read(tid, new):
                    yield self._row(table, envelope.INSERT, lsn, new)
                return
            if not read(tid, new):
                return
            if old is not None and change.old_kind == "O":
                yield self._row(table, envelope.UPDATE_BEFORE, lsn, old)
            yield self._row(table, envelope.UPDATE_AFTER, lsn, new)
        elif read(tid, old):
            yield self._row(table, envelope.DELETE, lsn, old)

    def close(self) -> None:
        self._seen.close()

    def _key(self, table: TableSchema, values: dict) -> tuple:
        return tuple(values.get(k) for k in table.primary_key)

    def _earlier(self, table: TableSchema, old: dict | None, new: dict) -> dict:
        """REPLICA IDENTITY DEFAULT: ``new``'s unchanged TOASTed values from the key's earlier change in this
        epoch (the old key's, when the UPDATE changed it); those still unknown stay UNCHANGED_TOAST (the sink
        keeps its table's value)."""
        known = self._seen.get((table.table_id, self._key(table, old if old is not None else new)))
        if not known:
            return new
        return {k: (known.get(k, v) if v is UNCHANGED_TOAST else v) for k, v in new.items()}

    def _remember(self, table: TableSchema, kind: str, old: dict | None, new: dict | None) -> None:
        """The latest values of a by_key table's TOASTable columns per key, for its later changes in the epoch
        (held until the epoch's partition ends, beyond ``Spec.spill_bytes`` on the task's disk)."""
        toastable = self._toastable.get(table.table_id)
        if toastable is None:
            toastable = self._toastable[table.table_id] = tuple(
                c.name for c in table.columns if c.name not in table.primary_key and _toastable(c.type))
        if not toastable:
            return
        if old is not None:
            self._seen.pop((table.table_id, self._key(table, old)))
        if kind != "D" and new is not None:
            self._seen.put((table.table_id, self._key(table, new)),
                           {c: new[c] for c in toastable if c in new and new[c] is not UNCHANGED_TOAST})

    def _check_columns(self, table: TableSchema, relation: Relation, lsn: int) -> None:
        """A table's columns as the slot describes them now against those the pipeline was planned for
        (once per Relation message, for changes after the plan read the catalog: one before it may show the
        columns of its time, e.g. read again after a restart that planned a column added since, which is
        no change): what ``schema.change.behavior`` says about a difference."""
        names = [c.name for c in relation.columns]
        planned = {c.name for c in table.columns}
        added = [n for n in names if n not in planned]
        dropped = [c.name for c in table.columns if c.name not in set(names)]
        behavior = self.spec.schema_changes.get(table.table_id, "lenient")
        evolves = behavior in ("evolve", "try_evolve")
        retyped = self._retyped(table, relation)
        if retyped and behavior != "ignore":
            said = ", ".join(f"{name} {old} -> {new or 'a type the engine does not map'}" for name, old, new in retyped)
            if behavior != "exception" and all(new and widens(old, new) for _, old, new in retyped):
                raise RuntimeFailure("RUNTIME.SCHEMA_CHANGED", {"detail": (
                    f"table {table.table_id} has wider column types: {said} (its change at LSN {lsn_text(lsn)}); the "
                    "pipeline is planned again to read them")})
            raise SchemaError("SCHEMA.CHANGED", {"detail": (
                f"table {table.table_id}: column types changed while the job ran: {said} (its change at LSN "
                f"{lsn_text(lsn)}); {f'{behavior} applies only widenings (a larger integer, float to double, a decimal of more digits: Delta changes no other type in place); ' if behavior != 'exception' else ''}"
                "set the table's schema.change.behavior = ignore to read the values as the planned types, or stop "
                "the job and change the Delta tables' columns to the new type before starting it again")})
        change = "; ".join(x for x in (f"added: {', '.join(added)}" if added else "",
                                        f"dropped: {', '.join(dropped)}" if dropped else "") if x)
        if change and behavior == "exception":
            raise SchemaError("SCHEMA.CHANGED", {"detail": (
                f"table {table.table_id} changed while the job ran (its change at LSN {lsn_text(lsn)}) - columns "
                f"{change}; schema.change.behavior = exception stops the job: set lenient (new columns reach the "
                "sinks, dropped ones stay, null) or ignore (the planned columns only) in the Postgres-CDC source")})
        if added and behavior == "lenient":
            raise RuntimeFailure("RUNTIME.SCHEMA_CHANGED", {"detail": (
                f"table {table.table_id} has new columns {', '.join(added)} (its change at LSN {lsn_text(lsn)}); "
                "the pipeline is planned again to read them")})
        if change and evolves:
            raise RuntimeFailure("RUNTIME.SCHEMA_CHANGED", {"detail": (
                f"table {table.table_id} changed (its change at LSN {lsn_text(lsn)}) - columns {change}; the pipeline "
                f"is planned again ({behavior}: the sinks rename, drop and add them)")})
        self._checked[relation.oid] = relation

    def _retyped(self, table: TableSchema, relation: Relation) -> list[tuple[str, str, str | None]]:
        """(column, planned type, type now or None: unmapped) of the planned columns whose type changed: as the
        engine maps them (int2 -> int4 is none; numeric(10,2) -> numeric(12,2) is one), else by pg_type oid."""
        planned = {c.name: c.type for c in table.columns}
        oids = self.spec.type_oids.get(table.table_id, {})
        out: list[tuple[str, str, str | None]] = []
        for c in relation.columns:
            if c.name not in planned:
                continue
            now = engine_type_of_oid(c.type_oid, c.type_modifier)
            if now is None and oids.get(c.name, c.type_oid) != c.type_oid or now is not None and now != planned[c.name]:
                out.append((c.name, planned[c.name], now))
        return out

    def _row(self, table: TableSchema, kind: str, lsn: int, values: dict | None) -> tuple:
        if values is not None and table.by_key and any(v is UNCHANGED_TOAST for v in values.values()):
            kept = [i for i, c in enumerate(table.columns) if values.get(c.name) is UNCHANGED_TOAST]
            kind = partial_kind(kind, kept)  # the sink keeps its table's values of these columns
            values = {k: (None if v is UNCHANGED_TOAST else v) for k, v in values.items()}
        for _, name, type_ in self._unrepresentable.get(table.table_id, ()):
            if (values or {}).get(name) in _beyond(type_):
                key = {k: (values or {}).get(k) for k in table.primary_key}
                raise _not_representable(table, name, type_, values[name],  # type: ignore[index]
                                         f"the change at LSN {lsn_text(lsn)} of row {key}")
        out: list = [None] * self.width
        for place, column in zip(self.places[table.table_id], table.columns):
            out[place] = (values or {}).get(column.name)
        return (table.table_id, kind, lsn, *out)

    def _truncate(self, message: Truncate, lsn: int) -> Iterator[tuple]:
        for oid in message.relation_oids:
            relation = self.relations.get(oid)
            table = self.table_of(relation) if relation is not None else None
            if table is None or self.spec.truncate_events == "ignore":
                continue
            if self.spec.truncate_events == "reject":
                raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
                    f"table {table.table_id} was truncated at LSN {lsn_text(lsn)}; set truncate_events = apply (the sink "
                    "clears the table) or ignore in the Postgres-CDC source")})
            yield (table.table_id, envelope.TRUNCATE, lsn, *([None] * self.width))


class _Latest:
    """(table, key) -> the latest TOASTable values an epoch's changes gave the key, for its later changes in
    the epoch: in memory up to ``limit`` bytes of text, then in a SQLite file in the task's temporary
    directory (an epoch after a long stop holds the whole backlog), removed when the epoch's partition ends."""

    def __init__(self, limit: int) -> None:
        self.limit, self.bytes = limit, 0
        self._mem: dict[tuple, dict] = {}
        self._db: Any = None

    @staticmethod
    def _size(values: dict) -> int:
        return sum(len(v) for v in values.values() if isinstance(v, str)) + 64

    def get(self, key: tuple) -> dict | None:
        if self._db is None:
            return self._mem.get(key)
        row = self._db.execute("SELECT v FROM latest WHERE k = ?", (pickle.dumps(key),)).fetchone()
        return pickle.loads(row[0]) if row else None

    def pop(self, key: tuple) -> None:
        if self._db is None:
            gone = self._mem.pop(key, None)
            self.bytes -= self._size(gone) if gone is not None else 0
        else:
            self._db.execute("DELETE FROM latest WHERE k = ?", (pickle.dumps(key),))

    def put(self, key: tuple, values: dict) -> None:
        if self._db is not None:
            self._db.execute("INSERT OR REPLACE INTO latest VALUES (?, ?)", (pickle.dumps(key), pickle.dumps(values)))
            return
        self.pop(key)
        self._mem[key] = values
        self.bytes += self._size(values)
        if self.bytes > self.limit:
            self._spill()

    def _spill(self) -> None:
        import sqlite3

        # SQLite's temporary database (an empty name): a file in the temporary directory, gone once closed
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.execute("CREATE TABLE latest (k BLOB PRIMARY KEY, v BLOB)")
        self._db.executemany("INSERT INTO latest VALUES (?, ?)",
                             ((pickle.dumps(k), pickle.dumps(v)) for k, v in self._mem.items()))
        self._mem.clear()

    @property
    def spilled(self) -> bool:
        return self._db is not None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._mem.clear()


def _toastable(engine_type: str) -> bool:
    """Whether a column of ``engine_type`` maps a PostgreSQL type of variable length (which may be TOASTed)."""
    return engine_type in ("string", "binary") or engine_type.startswith(("decimal", "array", "map", "struct"))


_NON_FINITE = ["NaN", "Infinity", "-Infinity"]  # PostgreSQL's text of NUMERIC values that are not numbers
_INFINITE_TIME = ["infinity", "-infinity"]  # of dates and timestamps without a calendar day


def _beyond(engine_type: str) -> list[str]:
    """PostgreSQL's text of the values of a column of ``engine_type`` that Spark and Delta cannot hold."""
    if engine_type.startswith("decimal"):
        return _NON_FINITE
    return _INFINITE_TIME if engine_type in ("date", "timestamp", "timestamp_ntz") else []


def _not_representable(table: TableSchema, column: str, engine_type: str, value: str, where: str) -> RuntimeFailure:
    fix = ("change the column to double precision (or real)" if engine_type.startswith("decimal")
           else "store a real date instead (e.g. UPDATE ... SET col = NULL or a far date)")
    return RuntimeFailure("DATA.NOT_REPRESENTABLE", {"detail": (
        f"table {table.table_id}, column {column} ({engine_type}): {where} holds {value}, which a Spark or Delta "
        f"{engine_type.split('(')[0]} cannot hold; {fix}, or keep such values out of the table, then start the job "
        "again (what was committed before stays)")})


def register(spark: Any) -> None:
    """Register the data source in ``spark`` (sources._python_source.register)."""
    from sources._python_source import register as register_source

    register_source(spark, FORMAT, _register)


def _register(spark: Any) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    from sources._pg import slot as pgslot
    from sources._pg import snapshot as pgsnap

    class Range(InputPartition):
        """The log part of an epoch: transactions committed in ``(after, upto]``."""

        def __init__(self, after: int, upto: int, progress: dict | None = None):
            self.after, self.upto, self.progress = after, upto, progress

    class Chunks(InputPartition):
        """Snapshot chunks, read one after the other: ``(table, lo, hi)``, the rows of ``table`` with keys in
        ``(lo, hi]`` as they were at ``at``. An epoch's chunks are dealt to ``spec.tasks`` partitions (a
        partition costs PySpark a round trip to its Python worker, ~60 ms: one per chunk made small chunks
        slow)."""

        def __init__(self, chunks: list, at: int, log_after: int):
            self.chunks, self.at, self.log_after = chunks, at, log_after

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, spec: Spec, password: str | None):
            self.spec, self.password = spec, password
            self._conn: Any = None
            self.target: int | None = None  # Trigger.AvailableNow (job.mode = BATCH): read up to here
            self._published = False

        def _cur(self) -> Any:
            if self._conn is None or self._conn.closed:
                self._conn = _open(self.spec, self.password)
            return self._conn.cursor()

        def _tables(self) -> list[str]:
            return sorted(t.table_id for t in self.spec.tables)

        def _publish(self, cur: Any) -> None:
            """The publication holds every table of the job (once per query start: a table added to
            table-names since the checkpoint began is added to it, and its changes are decoded from then on)."""
            if not self._published:
                pgslot.ensure_publication(cur, self.spec.publication, [t.table_id.split(".", 1)[1] for t in self.spec.tables])
                self._published = True

        def initialOffset(self) -> dict:
            with self._cur() as cur:
                self._publish(cur)
                start = pgslot.ensure_slot(cur, self.spec.slot)
            out: dict = {"lsn": start, "slot": self.spec.slot, "tables": self._tables()}
            if self.spec.snapshot:
                out["snapshot"] = pgsnap.initial_state(self.spec.tables)
            return out

        def _same_slot(self, offset: dict) -> None:
            slot = offset.get("slot", self.spec.slot)
            if slot != self.spec.slot:
                raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
                    f"the checkpoint reads replication slot {slot!r} and the job now names slot.name = "
                    f"{self.spec.slot!r}: a new slot starts where it is created, so the changes between the two "
                    f"would be lost. Set slot.name = {slot} again, or start the job on a new checkpoint.dir "
                    "(startup.mode = initial reads the tables again)")})

        def _added(self, start: dict) -> list:
            """The job's tables the checkpoint does not cover yet (added to table-names since it began).
            A checkpoint from before offsets named their tables covers the tables of its snapshot state, or
            else all of them (it cannot tell)."""
            known = start.get("tables")
            if known is None:
                state = start.get("snapshot")
                known = list(state) if state else self._tables()
            known = set(known)
            return [t for t in self.spec.tables if t.table_id not in known]

        def prepareForTriggerAvailableNow(self) -> None:
            with self._cur() as cur:
                self.target = pgslot.epoch_end(cur, timeout_s=60.0)

        def latestOffset(self, start: dict, limit: Any) -> dict:
            """The next epoch: the log up to the WAL position now (or the AvailableNow target) and, while the
            snapshot runs, its next chunks (``snapshot.chunks.per.epoch``; the source admits the snapshot
            itself, whatever ``limit`` Spark passes)."""
            self._same_slot(start)
            added = self._added(start)
            with self._cur() as cur:
                self._publish(cur)  # before the epoch's end: an added table's changes are decoded from here
                end = pgslot.epoch_end(cur)
                if end is None:
                    end = int(start["lsn"])
                if self.target is not None:
                    end = min(end, self.target)
                end = max(end, int(start["lsn"]))
                tables = self._tables()
                progress = {t: p for t, p in (start.get("snapshot") or {}).items() if t in tables}
                if added and self.spec.snapshot:  # snapshot a table added since, as the job's first ones were
                    progress.update(pgsnap.initial_state(tuple(added)))
                if not progress:
                    if end == int(start["lsn"]) and not added and start.get("tables") == tables:
                        return start
                    return {"lsn": end, "slot": self.spec.slot, "tables": tables}
                state, chunks = pgsnap.next_chunks(cur, self.spec.tables, progress, self.spec.split_size,
                                                   self.spec.chunks_per_epoch)
            out: dict = {"lsn": end, "slot": self.spec.slot, "tables": tables, "chunks": chunks}
            out["snapshotted" if pgsnap.finished(state) else "snapshot"] = state
            return out

        def partitions(self, start: dict, end: dict) -> list:
            self._same_slot(end)  # also a batch run again after a restart, before any latestOffset
            after, upto = int(start["lsn"]), int(end["lsn"])
            parts: list = [Range(after, upto, start.get("snapshot"))]
            chunks = list(end.get("chunks", ()))
            tasks = max(1, min(len(chunks), self.spec.tasks))
            parts += [Chunks(chunks[i::tasks], upto, after) for i in range(tasks) if chunks[i::tasks]]
            return parts

        def read(self, part: Any) -> Iterator[Any]:
            if isinstance(part, Chunks):
                shape = _Rows(self.spec)
                data, log = _open(self.spec, self.password), _open(self.spec, self.password)
                window = pgsnap.Window(part.log_after)
                try:
                    yield from pgsnap.read_chunks(self.spec, data, log, window, shape, part.chunks, part.at)
                finally:
                    data.close()
                    log.close()
                return
            if part.upto <= part.after:
                return
            conn = _open(self.spec, self.password, autocommit=False)
            shaper = _Rows(self.spec, part.progress)
            try:
                for tx in pgslot.peek(conn, self.spec.slot, self.spec.publication, part.after, part.upto,
                                      shaper.relations, named=True):  # server-side: the epoch streams
                    ts = int(tx.commit.commit_time.timestamp() * 1000)  # the time lag's event time
                    for lsn, message in zip(tx.lsns, tx.messages):
                        if isinstance(message, (Change, Truncate)):
                            for row in shaper.rows(message, lsn):
                                yield (*row, ts)
                conn.rollback()
            finally:
                conn.close()
                shaper.close()

        def commit(self, end: dict) -> None:
            """The batch ending at ``end`` committed in every sink: the slot may release its WAL. Spark calls
            this only when it plans the next batch; ``PostgresCdc.on_progress`` confirms a batch as soon as
            Spark's commit log holds it."""
            with self._cur() as cur:
                pgslot.advance(cur, self.spec.slot, int(end["lsn"]))

        def stop(self) -> None:
            if self._conn is not None:
                self._conn.close()

    class PostgresCdcSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return FORMAT

        def schema(self) -> str:
            return text_struct(_decode(self.options["spec"]).dataset).simpleString()

        def streamReader(self, schema: Any) -> Reader:
            return Reader(_decode(self.options["spec"]), self.options.get("password"))

    spark.dataSource.register(PostgresCdcSource)


COMMIT_TIME = "__commit_ms"  # the change's commit time (epoch ms), observed for the time lag, then dropped


def text_struct(dataset: Dataset) -> Any:
    """The envelope with every data column as text (PostgreSQL's output), before the casts, and the
    commit time."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    typed = envelope.envelope_struct(dataset)
    return StructType(typed.fields[:3] + [StructField(f.name, StringType(), True) for f in typed.fields[3:]]
                      + [StructField(COMMIT_TIME, LongType(), True)])


def read_stream(spec: Spec, password: str | None, ctx: Any) -> Any:
    """The streaming DataFrame in the envelope: the data source's text columns cast to the tables' types."""
    from dataclasses import replace

    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    register(ctx.spark)
    struct = text_struct(spec.dataset)
    spec = replace(spec, struct_json=struct.json(), tasks=ctx.spark.sparkContext.defaultParallelism)
    df = (ctx.spark.readStream.format(FORMAT).schema(struct)
          .option("spec", encode(spec)).option("password", password or "").load())
    if getattr(ctx, "uid", None):
        df = envelope.observe_event_time(df, ctx.uid, F.col(COMMIT_TIME))  # streaming_engine_source_lag_seconds
    typed = envelope.envelope_struct(spec.dataset)
    columns = [F.col(f.name) for f in typed.fields[:3]]
    for f in typed.fields[3:]:
        c = F.col(f.name)
        if isinstance(f.dataType, BinaryType):  # bytea_output = hex: \x0aff
            columns.append(F.unhex(F.substring(c, 3, 1 << 30)).alias(f.name))
        else:
            columns.append(c.cast(f.dataType).alias(f.name))
    return df.select(*columns)
