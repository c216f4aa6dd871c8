"""The initial snapshot of a Postgres-CDC job: tables read in primary-key chunks, lock-free, while changes go on.

Incremental, as DBLog (Flink CDC, SeaTunnel) reads a table: in key chunks,
without a lock, interleaved with the change stream, and resumable chunk by
chunk. The engine's form fits its epochs: epoch ``k`` reads the log range
``(L[k-1], L[k]]`` AND a few chunks, each chunk giving its rows **as they were
at ``L[k]``**, the epoch's end. Then every key has one history: its chunk's
row at ``L[k]``, then every change after ``L[k]`` (the log of an epoch keeps a
change only for keys whose chunk was read in an EARLIER epoch; the others'
changes are in their chunk's row). A replayed epoch reads its chunks again and
gets the same rows: the state at ``L[k]`` does not depend on when it is read.

How a partition's chunks get their rows at ``L[k]`` (:func:`read_chunks`, on an executor):

1. a REPEATABLE READ transaction takes its snapshot ``S`` (no lock beyond a
   plain SELECT's); ``H`` = the WAL position after it (:func:`slot.epoch_end`),
   so every transaction ``S`` sees committed before ``H``;
2. the slot is peeked (it never moves) ONCE for ``(L[k-1], H]``: every
   transaction that committed by ``L[k]`` must be visible to ``S`` (one still
   finishing its commit is waited for: the snapshot is taken again; one ``S``
   missed that committed after ``L[k]`` is no reason to, see
   :meth:`Window.settled`), and for each key of a chunk changed after ``L[k]``
   its FIRST change there tells its row at ``L[k]``: the change's old row
   (REPLICA IDENTITY FULL sends it whole) for an UPDATE or DELETE of that key,
   none for an INSERT (or an UPDATE that gave a row this key);
3. each chunk's rows under ``S`` stream out with ``COPY ... TO STDOUT`` (CSV,
   parsed by Arrow), except those of changed keys, whose rows at ``L[k]`` come
   from step 2. Memory: Arrow blocks of the stream and the partition's
   changes after ``L[k]`` (decoded once per table), whatever the chunks' size.

All of a partition's chunks share ``S``, ``H`` and the one peek: a peek makes
the server decode the slot from its restart position, and under steady writes
a peek per chunk made every chunk pay for the whole epoch's WAL again (2 M rows
while a writer made ~350 changes/s: ~1-3 s a chunk, growing with the epoch).

Chunks: a table whose key columns are all integers is cut at every
``snapshot.split.size``-th key (:func:`next_chunks`, on the driver: an index
scan of that many keys per chunk; the last chunk is open above, so rows added
meanwhile are in it); another table is one chunk. An epoch takes up to
``snapshot.chunks.per.epoch`` chunks, dealt to the session's default parallelism
of Spark partitions (``Spec.tasks``). Progress is in
the offsets: ``{"lsn": L, "snapshot": {table: {"after": key} | {"done": true}},
"chunks": [[table, lo, hi], ...]}``; a restart reads the last planned epoch's
chunks again and goes on after them.

Under ``replica.identity = DEFAULT`` (``TableSchema.by_key``) the server sends
no old row, so step 2 cannot tell a changed key's row at ``L[k]``: a chunk
gives its rows as ``S`` sees them, and the changes in ``(L[k], H]`` come again
in the next epoch's log. Applied by key, as the planner requires of such a
table, they bring every row where PostgreSQL has it (a change applied over its
own result leaves it, and an unchanged TOASTed value finds its row).

A TRUNCATE of a table while one of its chunks is read: the rows it removed
are not in that chunk (the truncate reaches the targets in the next epoch).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Iterator

from sources._pg import slot as pgslot
from sources._pg.pgoutput import TIMESTAMP_OID, UNCHANGED_TOAST, Change, lsn_text
from streaming_engine.errors import RuntimeFailure
from streaming_engine.schema import TableSchema

INT_TYPES = frozenset({"int", "bigint", "smallint", "tinyint"})


def chunkable(table: TableSchema) -> bool:
    """Whether ``table`` is cut into key chunks (every key column an integer), else read as one chunk."""
    types = {c.name: c.type for c in table.columns}
    return bool(table.primary_key) and all(types.get(k) in INT_TYPES for k in table.primary_key)


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _select(name: str, type_oid: int | None) -> str:
    """A chunk's column as COPY writes it: a dropped one as NULL; a ``timestamp without time zone`` as UTC with
    ``+00`` (Spark's cast would read text without an offset in its session's time zone)."""
    if type_oid is None:
        return f"NULL AS {ident(name)}"
    if type_oid == TIMESTAMP_OID:
        c = ident(name)  # the text a change of it has (Relation.values): the same key text either way
        return f"CASE WHEN isfinite({c}) THEN {c}::text || '+00' ELSE {c}::text END AS {c}"
    return ident(name)


def relation(table_id: str) -> str:
    """``db.schema.table`` -> the quoted ``schema.table``."""
    _, schema, table = table_id.split(".", 2)
    return f"{ident(schema)}.{ident(table)}"


def literal(sql: str) -> str:
    """SQL text (quoted names) inside a statement run with parameters: its ``%`` doubled (a name may hold one)."""
    return sql.replace("%", "%%")


def _key_sql(table: TableSchema) -> str:
    return literal("(" + ", ".join(ident(k) for k in table.primary_key) + ")")


def _range_sql(table: TableSchema, lo: list | None, hi: list | None) -> tuple[str, list]:
    """``WHERE`` text (for a statement with parameters) and its parameters, of the chunk ``(lo, hi]`` (None: open)."""
    key, where, params = _key_sql(table), [], []
    if lo is not None:
        where.append(f"{key} > ({', '.join(['%s'] * len(lo))})")
        params += lo
    if hi is not None:
        where.append(f"{key} <= ({', '.join(['%s'] * len(hi))})")
        params += hi
    return (" WHERE " + " AND ".join(where)) if where else "", params


def initial_state(tables: tuple[TableSchema, ...]) -> dict:
    return {t.table_id: {"after": None} for t in tables}


def next_chunks(cur: Any, tables: tuple[TableSchema, ...], state: dict, split: int, budget: int) -> tuple[dict, list]:
    """The next ``budget`` chunks after ``state`` and the state after them (:func:`finished` once every
    table is done).

    A table's state also counts its chunks (``read``, in the epochs up to this
    one) and estimates their number (``total``: ``pg_class.reltuples`` over
    the split size, kept above ``read`` until the last chunk), for metrics."""
    state = {k: dict(v) for k, v in state.items()}
    chunks: list = []
    for table in tables:
        tid = table.table_id
        progress = state.get(tid)
        if progress is None or progress.get("done"):
            continue
        if "total" not in progress:
            progress["total"] = _estimate(cur, table, split)
        lo = progress.get("after")
        while budget > 0:
            hi = _bound(cur, table, lo, split) if chunkable(table) else None
            chunks.append([tid, lo, hi])
            budget -= 1
            progress["read"] = progress.get("read", 0) + 1
            if hi is None:
                progress.update(done=True, total=progress["read"])
                break
            lo = progress["after"] = hi
            progress["total"] = max(progress["total"], progress["read"] + 1)
        if budget == 0:
            break
    return state, chunks


def finished(state: dict) -> bool:
    return all(p.get("done") for p in state.values())


def _estimate(cur: Any, table: TableSchema, split: int) -> int:
    if not chunkable(table):
        return 1
    cur.execute("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass", (relation(table.table_id),))
    rows = cur.fetchone()[0]
    return max(1, -(-int(rows) // split))


def _bound(cur: Any, table: TableSchema, lo: list | None, split: int) -> list | None:
    """The ``split``-th key after ``lo`` (None: fewer keys are left, the chunk is the last)."""
    where, params = _range_sql(table, lo, None)
    keys = literal(", ".join(ident(k) for k in table.primary_key))
    cur.execute(f"SELECT {keys} FROM {literal(relation(table.table_id))}{where} ORDER BY {keys} OFFSET %s LIMIT 1",
                [*params, split - 1])
    row = cur.fetchone()
    return None if row is None else [int(v) for v in row]


def gauges(state: dict) -> list[tuple[str, str, float]]:
    """Per table of a snapshot state: chunks read and their estimated number (runtime.events.SOURCE_GAUGES)."""
    out: list[tuple[str, str, float]] = []
    for tid, progress in state.items():
        read = progress.get("read", 0)
        out += [("snapshot_chunks_done", tid, read), ("snapshot_chunks_total", tid, progress.get("total", max(read, 1)))]
    return out


class Progress:
    """Which keys' changes the log part of an epoch keeps: those whose chunk an earlier epoch read."""

    def __init__(self, tables: dict[str, TableSchema], state: dict | None) -> None:
        self.state = state or {}
        self.keys = {tid: tuple(t.primary_key) for tid, t in tables.items()}

    def read(self, table_id: str, row: dict | None) -> bool:
        progress = self.state.get(table_id)
        if progress is None or progress.get("done"):
            return True
        after = progress.get("after")
        if after is None or row is None:
            return False
        return key_of(row, self.keys[table_id]) <= tuple(after)


def key_of(row: dict, key: tuple[str, ...]) -> tuple:
    return tuple(int(row[k]) for k in key)


# -- the chunk, on an executor ------------------------------------------------


def _visible(xid: int, xmin: int, xmax: int, xip: set[int]) -> bool:
    """Whether a transaction id (32 bits, from the log) is committed-visible to a snapshot (xid8 values)."""
    def before(a: int, b: int) -> bool:  # a precedes b, modulo 2^32 as PostgreSQL compares xids
        return ((a - b) & 0xFFFFFFFF) >= 0x80000000
    xmin32, xmax32 = xmin & 0xFFFFFFFF, xmax & 0xFFFFFFFF
    if before(xid, xmin32):
        return True
    return before(xid, xmax32) and xid not in {x & 0xFFFFFFFF for x in xip}


def _snapshot(cur: Any) -> tuple[int, int, set[int]]:
    cur.execute("SELECT pg_current_snapshot()::text")
    xmin, xmax, xip = cur.fetchone()[0].split(":")
    return int(xmin), int(xmax), {int(x) for x in xip.split(",") if x}


class Window:
    """A partition's view of the slot: its transactions from ``after`` (the epoch's start) to the high
    position of the partition's snapshot, peeked ONCE for all the partition's chunks (a peek makes the
    server decode the slot from its restart position, and the chunks share one snapshot), and each
    table's changes in it decoded once (:meth:`changes`), not once per chunk."""

    def __init__(self, after: int) -> None:
        self.upto = after
        self.transactions: list = []
        self.relations: dict = {}
        self._changes: dict[tuple, list] = {}

    def until(self, spec: Any, log: Any, high: int) -> list:
        if high > self.upto:
            self.transactions += pgslot.peek(log, spec.slot, spec.publication, self.upto, high, self.relations)
            self.upto = high
        return [tx for tx in self.transactions if tx.commit.end_lsn <= high]

    def settled(self, spec: Any, log: Any, at: int, high: int, snap: tuple[int, int, set[int]],
                finishing: set[int]) -> bool:
        """Whether the snapshot ``snap`` (high position ``high``) sees every transaction committed by ``at``.

        ``finishing``: the transactions the snapshot does not see that had committed before ``high`` was
        read (their commit records precede it). One the window holds is judged by its commit position: by
        ``at`` it must be visible (False: it was finishing its commit, read again), after it the chunks
        take its keys' old rows, which are the rows the snapshot sees. One the window does not hold either
        changed none of the publication's tables, or committed before the window's start (a backend
        stalled between its commit record and leaving the running transactions for a whole epoch): not
        told apart, so False. Under steady writes most snapshots see some transaction finishing: judged by
        its position, they do not make the chunks read again and again."""
        unseen = {x & 0xFFFFFFFF for x in finishing}
        for tx in self.until(spec, log, high):
            unseen.discard(tx.begin.xid)
            if tx.commit.end_lsn <= at and not _visible(tx.begin.xid, *snap):
                return False
        return not unseen

    def changes(self, spec: Any, table: TableSchema, at: int, high: int) -> list[tuple]:
        """``table``'s changes that committed in ``(at, high]``, in order: (old key, old row, new key, new
        row), a key None where the row is; keys as integers for a chunked table, else as text."""
        found = self._changes.get((table.table_id, at, high))
        if found is not None:
            return found
        keys, as_int = tuple(table.primary_key), chunkable(table)

        def key(row: dict | None) -> tuple | None:
            if row is None:
                return None
            return tuple(int(row[c]) for c in keys) if as_int else tuple(row[c] for c in keys)

        found = []
        aliases = {former: c.name for c in table.columns for former in c.former}  # renamed under evolve

        def named(values: dict | None) -> dict | None:
            return {aliases.get(k, k): v for k, v in values.items()} if aliases and values is not None else values

        for tx in self.transactions:
            if not at < tx.commit.end_lsn <= high:
                continue
            for message in tx.messages:
                if not isinstance(message, Change):
                    continue
                rel = self.relations.get(message.relation_oid)
                if rel is None or f"{spec.connection.database}.{rel.namespace}.{rel.name}" != table.table_id:
                    continue
                old, new = named(rel.values(message.old)), named(rel.values(message.new))
                if message.kind in ("U", "D") and message.old_kind != "O":
                    raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
                        f"table {table.table_id}: a change at {lsn_text(tx.commit.end_lsn)} came without the whole "
                        "old row (REPLICA IDENTITY is no longer FULL); the snapshot needs it: run ALTER TABLE ... "
                        "REPLICA IDENTITY FULL and restart the job")})
                if old is not None and any(v is UNCHANGED_TOAST for v in old.values()):
                    raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
                        f"table {table.table_id}: an old row at {lsn_text(tx.commit.end_lsn)} lacks a TOASTed value")})
                found.append((key(old), old, key(new), new))
        self._changes = {k: v for k, v in self._changes.items() if k[1:] == (at, high)}  # a retry: a new high
        self._changes[(table.table_id, at, high)] = found
        return found


def _changed_rows(changes: list[tuple], table: TableSchema, lo: list | None, hi: list | None) -> dict[tuple, dict | None]:
    """The chunk's keys changed after the epoch's end, each with its row then (its FIRST change's old row;
    None: the key had no row), the keys as text (as COPY writes them)."""
    low, top = (tuple(lo) if lo is not None else None), (tuple(hi) if hi is not None else None)
    ranged = chunkable(table)

    def inside(k: tuple | None) -> bool:
        return k is not None and not (ranged and ((low is not None and k <= low) or (top is not None and k > top)))

    names = tuple(table.primary_key)
    rows: dict[tuple, dict | None] = {}
    for k_old, old, k_new, new in changes:
        if inside(k_old):
            rows.setdefault(tuple(old[c] for c in names), old)
        if inside(k_new) and k_new != k_old:
            rows.setdefault(tuple(new[c] for c in names), None)
    return rows


def _copy_batches(conn: Any, sql: str, params: list, width: int) -> Iterator[Any]:
    """The rows of ``sql`` (all columns as text) as Arrow record batches, streamed.

    COPY's output goes through an OS pipe: psycopg2 calls ``write`` once per
    row, and a C-level buffered writer takes those calls without running
    Python code per row (a Python ``write`` cost ~0.35 us a row more: 2 M rows
    2.6-3.1 -> 1.8-1.9 CPU-s); Arrow's CSV reader parses the other end in
    4 MB blocks. Memory: the two buffers (1 MB each) and the pipe's.
    A failed COPY raises here, after the rows read so far: the task fails,
    so none of them is counted (the partition is read again)."""
    import pyarrow as pa
    from pyarrow import csv

    with conn.cursor() as cur:
        statement = cur.mogrify(sql, params).decode()
    read_fd, write_fd = os.pipe()
    sink = open(write_fd, "wb", buffering=1 << 20)
    source = open(read_fd, "rb", buffering=1 << 20)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with conn.cursor() as cur:
                cur.copy_expert(f"COPY ({statement}) TO STDOUT WITH (FORMAT csv)", sink)
        except BaseException as e:  # noqa: BLE001 - raised by the reader
            failed.append(e)
        finally:
            try:
                sink.close()  # the reader's end of file
            except OSError:  # the reader stopped (a broken pipe)
                pass

    def raise_failure() -> None:
        thread.join()
        if failed:
            raise failed[0]

    names = [f"c{i}" for i in range(width)]
    thread = threading.Thread(target=run, name="pg-snapshot-copy", daemon=True)
    thread.start()
    try:
        if not source.peek(1):  # nothing written (the last chunk of a table whose keys ended at the bound)
            raise_failure()
            return
        try:  # (opening reads the first block: a COPY failing inside it is a cut row there)
            reader = csv.open_csv(
                source,
                read_options=csv.ReadOptions(column_names=names, block_size=4 << 20),
                parse_options=csv.ParseOptions(newlines_in_values=True),
                convert_options=csv.ConvertOptions(column_types={n: pa.string() for n in names}, null_values=[""],
                                                   strings_can_be_null=True, quoted_strings_can_be_null=False),
            )
            for batch in reader:
                yield batch
        except pa.ArrowInvalid:  # a row cut short: COPY failed midway (its error says why), else the text itself
            conn.cancel()
            source.close()
            thread.join(timeout=30)
            if failed and not isinstance(failed[0], BrokenPipeError):
                raise failed[0] from None
            raise
        raise_failure()
    finally:
        if thread.is_alive():
            conn.cancel()
        source.close()  # a COPY still writing gets a broken pipe and ends
        thread.join(timeout=30)


def read_chunks(spec: Any, data: Any, log: Any, window: Window, shape: Any, chunks: list, at: int) -> Iterator[Any]:
    """The chunks ``[(table_id, lo, hi), ...]`` of a partition as they were at ``at`` (an epoch end), in Arrow
    batches of ``shape``: all read in ONE REPEATABLE READ snapshot (one high position, one peek; it holds
    back VACUUM's horizon while the partition reads); ``data`` and ``log``: two connections (autocommit,
    the reader's session settings), left as they came."""
    for attempt in range(600):
        data.autocommit = False
        data.set_session(isolation_level="REPEATABLE READ", readonly=True)
        try:
            with data.cursor() as cur:
                snap = _snapshot(cur)  # the transaction's snapshot is taken here
            with log.cursor() as cur:
                # committed since the snapshot was taken (invisible to it), before H: see Window.settled
                cur.execute("SELECT x FROM unnest(%s::text[]) x WHERE pg_xact_status(x::xid8) = 'committed'",
                            ([str(x) for x in snap[2]],))
                finishing = {int(x) for (x,) in cur.fetchall()}
                high = pgslot.epoch_end(cur, timeout_s=60.0)
                if high is None:
                    raise RuntimeFailure("RUNTIME.FAILED", {"detail": "the server did not flush its WAL in 60 s"})
            if not window.settled(spec, log, at, high, snap, finishing):
                data.rollback()
                time.sleep(min(0.5, 0.02 * (attempt + 1)))
                continue
            present: dict[str, dict] = {}
            for table_id, lo, hi in chunks:
                yield from _chunk(spec, data, window, shape, table_id, lo, hi, at, high, present)
            data.rollback()
            return
        finally:
            if not data.closed:  # the connection serves the partition's next epoch's chunks
                data.rollback()
                data.set_session(isolation_level="DEFAULT", readonly="DEFAULT")
                data.autocommit = True
    raise RuntimeFailure("RUNTIME.FAILED", {"detail": (
        f"tables {', '.join(sorted({c[0] for c in chunks}))}: a snapshot of their chunks never saw every transaction "
        f"committed by {lsn_text(at)}")})


def _chunk(spec: Any, data: Any, window: Window, shape: Any, table_id: str, lo: list | None, hi: list | None,
           at: int, high: int, present: dict[str, dict]) -> Iterator[Any]:
    """The chunk ``(lo, hi]`` of ``table_id`` at ``at``, inside the partition's snapshot: its rows there,
    except those of keys changed after ``at``, whose rows at ``at`` are their first change's old rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = next(t for t in spec.tables if t.table_id == table_id)
    names = [c.name for c in table.columns]
    # REPLICA IDENTITY DEFAULT (by_key) sends no old row: a changed key's row at `at` is unknown, so the chunk
    # gives every row as its snapshot sees it (newer than `at`); the keys' changes since come again in the next
    # epochs' logs and, applied by key (the only sinks such a table reaches), bring each row where PostgreSQL has it
    changed = {} if table.by_key else _changed_rows(window.changes(spec, table, at, high), table, lo, hi)
    where, params = _range_sql(table, lo, hi)
    if table_id not in present:  # a planned column dropped since (schema.change.behavior = lenient): null
        with data.cursor() as cur:
            cur.execute("SELECT attname, atttypid FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                        "AND NOT attisdropped", (relation(table_id),))
            present[table_id] = dict(cur.fetchall())
    columns = literal(", ".join(_select(n, present[table_id].get(n)) for n in names))
    skip = pa.array(["\x00".join(k) for k in changed], pa.string()) if changed else None
    for batch in _copy_batches(data, f"SELECT {columns} FROM {literal(relation(table_id))}{where}", params, len(names)):
        if skip is not None:
            keys = [batch.column(names.index(k)) for k in table.primary_key]
            joined = keys[0] if len(keys) == 1 else pc.binary_join_element_wise(*keys, "\x00")
            batch = batch.filter(pc.invert(pc.is_in(joined, value_set=skip)))
        if batch.num_rows:
            yield shape.chunk_batch(table, [batch.column(i) for i in range(len(names))], at)
    before = [row for row in changed.values() if row is not None]
    if before:
        yield shape.chunk_batch(table, [pa.array([r.get(n) for r in before], pa.string()) for n in names], at)
