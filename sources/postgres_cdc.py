"""Postgres-CDC: a PostgreSQL database's changes, read directly (SeaTunnel's Postgres-CDC source).

What it reads: the tables of ``table-names`` (``database.schema.table``; the
database is ``base-url``'s), their columns, types and primary keys taken from
PostgreSQL's catalog when the job is planned (``check``/``explain``/``run``
connect to the database). Table ids are ``database.schema.table``, so
``${database_name}``, ``${schema_name}`` and ``${table_name}`` fill a sink's
names as SeaTunnel's do.

How: logical replication with ``pgoutput`` through a slot (``slot.name``,
default ``seatunnel`` as SeaTunnel's) and a publication of the same name, both
created by the job when missing (a publication lacking a table gets it added).
Each epoch reads the transactions committed since the last one
(sources/_pg/slot.py); the slot moves only after the epoch has committed in
every sink, so a crash anywhere re-reads, and the sinks' exactly-once commit
applies nothing twice. ``max_slot_wal_keep_size`` on the server bounds the WAL
a stopped job's slot can hold; drop the slot (``SELECT
pg_drop_replication_slot('<slot.name>')``) when a job is retired.

``startup.mode = initial`` (SeaTunnel's default) first reads the tables as
they are, in key chunks, without a lock, while their changes go on
(sources/_pg/snapshot.py: a DBLog-style incremental snapshot whose progress is
in the checkpoint's offsets, so a restart reads only unfinished chunks again),
then streams; ``latest`` streams from the slot's position (a new slot starts
at its creation); ``earliest`` is refused (the server keeps no changes from
before the slot). A table added to ``table-names`` later (restart the job
with the longer list) is added to the publication at the restart and, under
``initial``, snapshotted then while the other tables stream (PostgreSQL decodes
no change a table saw before it joined the publication: the snapshot brings
its rows); under ``latest`` its changes arrive from the restart on. A job that
names another ``slot.name`` than its checkpoint was read through is refused
(the new slot would start where it is created). Tables need ``REPLICA IDENTITY FULL`` (as the page asks), so updates
and deletes carry the whole old row and an unchanged TOASTed value is never
written as null; a table without it is a plan-time error saying the statement
to run. ``replica.identity = DEFAULT`` (ours) also accepts tables with REPLICA
IDENTITY DEFAULT and a primary key (``TableSchema.by_key``): a delete carries
the key alone, an update no old row, and an unchanged TOASTed value is taken
from the key's earlier change in the same epoch or else left to the sink,
which keeps its table's value (``schema.PARTIAL`` kinds); the planner lets such
tables reach only sinks that upsert by key, through no transform. An UPDATE
that changes the key and leaves a TOASTed value unchanged has that value
nowhere but the old key's row: the sink's MERGE then fails naming the key. A table's columns changed while the job runs follow
``schema.change.behavior`` (Flink CDC's names; per table in
``table-names-config``): ``lenient`` (default) plans the pipeline again with
the new columns, without a restart of the job: the epoch in flight is read
again with them and the Delta sinks add them to their tables; a dropped
column stays in the plan, null from then on (a renamed one is both: the old
name stays, the new is added, as Flink CDC's lenient takes a rename); ``exception`` fails the job
naming the change; ``ignore`` keeps the planned columns; ``evolve`` plans
the pipeline again with the catalog's columns exactly: a column is known by
its number (attnum, which a RENAME keeps), so the sinks rename it
(``Column.former``: a change from before the rename, read again, is named by
its new name) and drop a dropped one (``TableSchema.dropped``); on Delta that
takes column mapping (``delta.columnMapping.mode = name``, which cannot be
undone), said in ``explain``. ``try_evolve`` is evolve where a sink cannot
apply a change: its table then stays as lenient leaves it. pgoutput sends no
DDL: a change is seen in the Relation message before the table's next row
change. A TRUNCATE follows ``truncate_events`` (ours,
as the Kafka source's: reject, apply or ignore). ``job.mode = BATCH``: a run
applies what the slot holds up to when it started, then finishes (the next run
goes on from there). ``connect.max-retries``: a failed connection is tried
again that many times, a second apart; a ``password`` parameter of
``base-url`` is the password when the option is not set (other JDBC-only
parameters are dropped, libpq's such as ``sslmode`` are passed on).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from sources._schema_options import SchemaChangeBehavior, check_schema_change_behavior
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import Source, SourceOptions, refused
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema

_EXACT_CHUNKS = ("Accepted: chunks are cut at every snapshot.split.size-th key (an index scan), so neither a "
                 "distribution factor nor sampling is needed.")
# replica.identity = DEFAULT: bytes of an epoch's TOASTable values a reader task keeps in memory before it
# spills them to a temporary SQLite file (sources/_pg/reader._Latest); tests set it small
SPILL_ENV = "STREAMING_ENGINE_PG_SPILL_BYTES"
NO_DEBEZIUM = "this engine reads the slot itself (pgoutput); there is no Debezium engine to pass properties to"


class TableNameConfig(BaseModel):
    """A ``table-names-config`` item: the key of a table that has no primary key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str = Field(min_length=1, description="database.schema.table")
    primaryKeys: list[str] | None = Field(None, description="Key columns of a table without a primary key.")
    snapshotSplitColumn: str | None = Field(
        None, description="Not supported: chunks are cut by the primary key (or primaryKeys); leave unset.")
    schema_change_behavior: "SchemaChangeBehavior | None" = Field(
        None, alias="schema.change.behavior", description="This table's schema.change.behavior (the source's if unset).")

    @model_validator(mode="after")
    def _split_column(self) -> "TableNameConfig":
        check_schema_change_behavior(self.schema_change_behavior, f"schema.change.behavior of {self.table!r}")
        if self.snapshotSplitColumn is not None:
            raise ValueError(f"snapshotSplitColumn of {self.table!r}: the snapshot cuts chunks by the table's key "
                             "(primaryKeys here for a table without one); remove snapshotSplitColumn")
        return self


class PostgresCdcOptions(SourceOptions):
    base_url: str = Field(alias="base-url", min_length=1, description="jdbc:postgresql://host:5432/database")
    username: str = Field(min_length=1, description="The user the job connects as (needs REPLICATION).")
    password: SecretStr | None = Field(None, description="The user's password.")
    database_names: list[str] | None = Field(None, alias="database-names", description="The database (base-url's).")
    schema_names: list[str] | None = Field(None, alias="schema-names", description="Schemas of the tables (informative).")
    table_names: list[str] = Field(alias="table-names", min_length=1, description="Tables: database.schema.table, ...")
    table_names_config: list[TableNameConfig] | None = Field(
        None, alias="table-names-config", description="Per table: primaryKeys for a table without a primary key.")
    startup_mode: Literal["initial", "earliest", "latest"] = Field(
        "initial", alias="startup.mode",
        description="initial: a lock-free snapshot of the tables, then their changes; latest: changes from the "
                    "slot's position only. earliest is refused (PostgreSQL keeps no changes from before the slot).")
    snapshot_split_size: int = Field(8096, alias="snapshot.split.size", ge=1,
                                     description="Rows per snapshot chunk (tables with integer keys; others: one chunk).")
    snapshot_fetch_size: int = Field(1024, alias="snapshot.fetch.size", ge=1,
                                     description="Accepted; a chunk streams with COPY, so no fetch size is needed.")
    snapshot_chunks_per_epoch: int = Field(
        32, alias="snapshot.chunks.per.epoch", ge=1, le=4096,
        description="Snapshot chunks an epoch reads (ours): each a Spark task; the epoch commits them together.")
    slot_name: str | None = Field(None, alias="slot.name", description="Replication slot (and publication) name; default seatunnel.")
    decoding_plugin_name: refused(
        "the engine decodes pgoutput, PostgreSQL's built-in logical decoding plugin", accepts=("pgoutput",)
    ) = Field("pgoutput", alias="decoding.plugin.name", description="Only pgoutput.")
    server_time_zone: str = Field("UTC", alias="server-time-zone", description="Time zone timestamptz text is read in.")
    connect_timeout_ms: int = Field(30000, alias="connect.timeout.ms", ge=1000, description="Connection timeout, ms.")
    connect_max_retries: int = Field(3, alias="connect.max-retries", ge=0, le=100,
                                     description="Retries of a failed connection, a second apart.")
    connection_pool_size: int = Field(20, alias="connection.pool.size", ge=1, description="Accepted; each snapshot task opens its own two connections.")
    chunk_key_upper: float = Field(100.0, alias="chunk-key.even-distribution.factor.upper-bound",
                                   description=_EXACT_CHUNKS)
    chunk_key_lower: float = Field(0.05, alias="chunk-key.even-distribution.factor.lower-bound",
                                   description=_EXACT_CHUNKS)
    sample_sharding_threshold: int = Field(1000, alias="sample-sharding.threshold", description=_EXACT_CHUNKS)
    inverse_sampling_rate: int = Field(1000, alias="inverse-sampling.rate", description=_EXACT_CHUNKS)
    exactly_once: bool = Field(False, description="Accepted: every epoch commits exactly once whatever its value.")
    format: refused("only the engine's row envelope (DEFAULT) is produced", accepts=("DEFAULT", "default")) = Field(
        "DEFAULT", description="Only DEFAULT.")
    debezium: refused(NO_DEBEZIUM) = Field(None, description="Not supported (see the reason).")
    schema_change_behavior: SchemaChangeBehavior = Field(
        "lenient", alias="schema.change.behavior",
        description="A table's columns changed while the job runs (Flink CDC's names): lenient (new columns reach "
                    "the sinks, the pipeline planned again; dropped columns stay, null from then on), exception (the "
                    "job fails naming the change), ignore (the planned columns only), evolve (the catalog's "
                    "columns: renames and drops reach the sinks too; Delta tables get column mapping) or try_evolve "
                    "(evolve; a change a sink cannot apply leaves its table as lenient does).")
    replica_identity: Literal["FULL", "DEFAULT"] = Field(
        "FULL", alias="replica.identity",
        description="The REPLICA IDENTITY the tables may have (ours): FULL (required: updates and deletes carry the "
                    "whole old row) or DEFAULT (DEFAULT or FULL accepted: a delete carries the key alone, an "
                    "unchanged TOASTed value keeps the sink's value; the tables reach only upsert sinks).")
    truncate_events: Literal["reject", "apply", "ignore"] = Field(
        "reject", description="TRUNCATE: reject (the job fails), apply (the sink clears the table) or ignore.")

    @field_validator("replica_identity", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("table_names", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        from sources._pg.catalog import split_table_names

        if isinstance(v, str):
            v = [v]
        return split_table_names(v) if isinstance(v, list) and all(isinstance(x, str) for x in v) else v

    @model_validator(mode="after")
    def _check(self) -> "PostgresCdcOptions":
        from sources._pg.slot import check_slot_name

        if self.startup_mode == "earliest":
            raise ValueError(
                "startup.mode = earliest: PostgreSQL keeps no changes from before the job's slot was created; set "
                "startup.mode = initial (the tables as they are, then their changes) or latest (changes from now)")
        if self.slot_name is not None:
            check_slot_name(self.slot_name)
        check_schema_change_behavior(self.schema_change_behavior, "schema.change.behavior")
        listed = set(self.table_names)
        for item in self.table_names_config or ():
            if item.schema_change_behavior is not None and item.table not in listed:
                raise ValueError(f"table-names-config sets schema.change.behavior of {item.table!r}, which table-names "
                                 "does not list")
        db = self.connection().database
        for name in self.database_names or ():
            if name != db:
                raise ValueError(f"database-names lists {name!r}, but base-url connects to {db!r}; one database per source")
        return self

    def connection(self) -> Any:
        from sources._pg.catalog import Connection

        pw = self.password.get_secret_value() if self.password is not None else None
        return Connection.from_url(self.base_url, self.username, pw, self.connect_timeout_ms, self.connect_max_retries)

    @property
    def slot(self) -> str:
        return self.slot_name or "seatunnel"

    def schema_changes(self) -> dict[str, str]:
        """table id -> its schema.change.behavior."""
        own = {c.table: c.schema_change_behavior for c in self.table_names_config or () if c.schema_change_behavior}
        return {t: own.get(t, self.schema_change_behavior) for t in self.table_names}


@register
class PostgresCdc(Source):
    name: ClassVar[str] = "Postgres-CDC"
    seatunnel_page = "connector-v2/source/Postgres-CDC.md"
    Options = PostgresCdcOptions
    description = "Reads a PostgreSQL database's changes through a logical replication slot (pgoutput)."
    boundedness = "unbounded"
    restore_identity = frozenset({"base-url", "table-names", "slot.name"})
    restore_table_option = "table-names"

    options: PostgresCdcOptions

    def output(self) -> Dataset:
        found = self.__dict__.get("_dataset")
        if found is None:
            found = self.__dict__["_dataset"] = self._discover()
        return found

    def output_after(self, planned: Dataset) -> Dataset:
        """Planned again while the job runs (a table has new columns): the catalog's columns now, and under
        lenient a column dropped since stays where it was (nullable: null from the drop on), so the changes
        still to apply from before the drop keep their values and the sinks' tables keep the column."""
        from dataclasses import replace

        from streaming_engine.schema import Column

        now = self.output()
        behaviors = self.options.schema_changes()
        before = {t.table_id: t for t in planned.tables}
        tables = []
        for t in now.tables:
            old = before.get(t.table_id)
            if old is not None and t.evolution:
                tables.append(_evolved(old, t))
                continue
            if old is None or behaviors.get(t.table_id) != "lenient":
                tables.append(t)
                continue
            names = set(t.names)
            kept = [c if c.name in names else Column(c.name, c.type, True) for c in old.columns]
            kept_names = {c.name for c in kept}
            current = {c.name: c for c in t.columns}
            columns = [current.get(c.name, c) for c in kept] + [c for c in t.columns if c.name not in kept_names]
            tables.append(replace(t, columns=tuple(columns)))
        found = self.__dict__["_dataset"] = Dataset(tuple(tables))
        return found

    def _discover(self) -> Dataset:
        from dataclasses import replace

        from sources._pg.catalog import discover

        o = self.options
        conn = o.connection()
        try:
            db = conn.connect("streaming-engine plan")
        except Exception as e:  # psycopg2.OperationalError: its message names host and cause, never the password
            raise SchemaError("SCHEMA.INVALID", {"detail": (
                f"Postgres-CDC cannot connect to {conn.where()} as {conn.user!r}: "
                f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")}) from None
        try:
            with db.cursor() as cur:
                # the WAL position before the catalog is read: a change before it may show a table's older columns
                # (the insert position: past every record already made; the write position may lag behind it)
                cur.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
                self.__dict__["_planned_at"] = int(cur.fetchone()[0])
                keys = {c.table: list(c.primaryKeys or ()) for c in o.table_names_config or ()}
                infos = discover(cur, conn.database, list(o.table_names), keys)
        except ValueError as e:
            raise SchemaError("SCHEMA.INVALID", {"detail": f"Postgres-CDC: {e}"}) from None
        finally:
            db.close()
        self.__dict__["_type_oids"] = {i.schema.table_id: dict(i.type_oids) for i in infos}
        evolving = {t: b for t, b in o.schema_changes().items() if b in ("evolve", "try_evolve")}
        infos = [i if i.schema.table_id not in evolving else replace(i, schema=replace(
            i.schema, evolution=evolving[i.schema.table_id],
            columns=tuple(replace(c, origin=dict(i.attnums)[c.name]) for c in i.schema.columns))) for i in infos]
        by_key = o.replica_identity == "DEFAULT"
        accepted = ("f", "d") if by_key else ("f",)
        not_full = [i.schema.table_id for i in infos if i.replica_identity not in accepted]
        if not_full:
            first = not_full[0].split(".", 1)[1]
            raise SchemaError("SCHEMA.INVALID", {"detail": (
                f"Postgres-CDC needs REPLICA IDENTITY FULL (updates and deletes then carry the whole old row)"
                f"{' or DEFAULT (replica.identity = DEFAULT)' if by_key else ''} on {', '.join(not_full)}; run "
                f"ALTER TABLE {first} REPLICA IDENTITY FULL (and for each)"
                f"{'' if by_key else ', or set replica.identity = DEFAULT to accept DEFAULT (upsert sinks only)'}")})
        keyless = [i.schema.table_id for i in infos if i.replica_identity == "d" and not i.own_key]
        if keyless:
            raise SchemaError("SCHEMA.INVALID", {"detail": (
                f"Postgres-CDC: {', '.join(keyless)} has no primary key, so under REPLICA IDENTITY DEFAULT its "
                "updates and deletes carry no old key (table-names-config's primaryKeys cannot stand in for one); "
                f"run ALTER TABLE {keyless[0].split('.', 1)[1]} REPLICA IDENTITY FULL")})
        if o.startup_mode == "initial":
            keyless = [i.schema.table_id for i in infos if not i.schema.primary_key]
            if keyless:
                raise SchemaError("SCHEMA.INVALID", {"detail": (
                    f"Postgres-CDC's snapshot (startup.mode = initial) needs a key of {', '.join(keyless)}: give it in "
                    "table-names-config (primaryKeys), or set startup.mode = latest")})
        apply = o.truncate_events == "apply"
        return Dataset(tuple(replace(i.schema, truncates=apply, by_key=by_key) for i in infos))

    def describe(self) -> str:
        o = self.options
        start = (f"snapshot first: chunks of {o.snapshot_split_size} keys, {o.snapshot_chunks_per_epoch} per epoch"
                 if o.startup_mode == "initial" else "changes from the slot's position")
        changes = sorted(set(o.schema_changes().values()))
        evolving = ", renames and drops reach the sinks" if {"evolve", "try_evolve"} & set(changes) else ""
        identity = ("REPLICA IDENTITY FULL" if o.replica_identity == "FULL" else
                    "REPLICA IDENTITY DEFAULT accepted: deletes carry the key alone, unchanged TOASTed values keep "
                    "the sinks' values, upsert sinks only")
        return (f"Postgres-CDC {o.connection().where()} slot {o.slot} ({len(self.output().tables)} tables, {start}; "
                f"{identity}; schema changes: {'/'.join(changes)}{evolving})")

    # -- run time ------------------------------------------------------------
    def _metadata_conn(self) -> Any:
        """The driver's own connection for confirmations and gauges (kept open between epochs)."""
        conn = self.__dict__.get("_metrics_conn")
        if conn is None or conn.closed:
            conn = self.__dict__["_metrics_conn"] = self.options.connection().connect("streaming-engine metrics")
        return conn

    def on_progress(self, spark: Any, sources: list[dict]) -> None:
        """Spark's commit log holds the batch: confirm its end in the slot now. Spark itself confirms a batch
        (the reader's ``commit``) only when it plans the next one, which needs new WAL: on an idle server the
        last epoch's WAL would stay retained, and the slot lag reported, until something writes. Only this
        source's slot (the offset names it); a slot in use by a task's peek is left to the next epoch."""
        from sources._pg import slot as pgslot

        ends = [int(end["lsn"]) for end in _end_offsets(sources) if end.get("slot") == self.options.slot]
        if ends:
            with self._metadata_conn().cursor() as cur:
                pgslot.advance(cur, self.options.slot, max(ends), wait_s=0.5)

    def gauges(self, spark: Any, sources: list[dict]) -> list[tuple[str, str, float]]:
        """The slot's backlog (WAL it keeps: current WAL end minus its confirmed position) and, while the
        snapshot runs, each table's chunks read and estimated, from the epoch's end offset."""
        from sources._pg import slot as pgslot
        from sources._pg import snapshot as pgsnap

        out: list[tuple[str, str, float]] = []
        for end in _end_offsets(sources):
            if end.get("slot", self.options.slot) == self.options.slot:
                out += pgsnap.gauges(end.get("snapshot") or end.get("snapshotted") or {})
        with self._metadata_conn().cursor() as cur:
            behind = pgslot.lag_bytes(cur, self.options.slot)
        if behind is not None:
            out.append(("backlog_bytes", "", behind))
        return out

    def read(self, ctx: Any) -> Any:
        from dataclasses import replace

        from sources._pg.reader import Spec, read_stream

        o = self.options
        conn = o.connection()
        spec = Spec(replace(conn, password=None), o.slot, o.slot, ctx.dataset.tables, o.server_time_zone,
                    o.truncate_events, snapshot=o.startup_mode == "initial", split_size=o.snapshot_split_size,
                    chunks_per_epoch=o.snapshot_chunks_per_epoch, schema_changes=o.schema_changes(),
                    planned_at=self.__dict__.get("_planned_at", 0), type_oids=self.__dict__.get("_type_oids", {}),
                    spill_bytes=int(os.environ.get(SPILL_ENV) or 64 << 20))
        return read_stream(spec, conn.password, ctx)


def _evolved(old: "TableSchema", now: "TableSchema") -> "TableSchema":
    """A table under evolve planned again: the catalog's columns ``now``, each with the names it had
    (``former``: renamed since ``old``, matched by attnum) and the columns dropped since (``dropped``). A name
    that meant another column before (dropped or renamed, then added again) is refused: the changes still to
    apply from before could not be told from the new column's."""
    from dataclasses import replace

    by_origin = {c.origin: c for c in old.columns if c.origin is not None}
    by_name = {c.name: c for c in old.columns}
    columns = []
    for c in now.columns:
        was = by_origin.get(c.origin) or (by_name.get(c.name) if by_name.get(c.name, c).origin is None else None)
        former = () if was is None else was.former + ((was.name,) if was.name != c.name else ())
        columns.append(replace(c, former=former))
    kept = {c.origin for c in now.columns}
    dropped = [c.name for c in old.columns if c.origin is not None and c.origin not in kept]
    reused = [c.name for c in columns
              if (c.name in by_name and by_name[c.name].origin not in (None, c.origin))
              or c.name in old.dropped or any(c.name in o.former for o in columns if o is not c)]
    if reused:
        raise SchemaError("SCHEMA.CHANGED", {"detail": (
            f"table {now.table_id}: column {reused[0]} is a new column with the name of one renamed or dropped before "
            f"(schema.change.behavior = {now.evolution}); the changes of the old one still to apply could not be told "
            "from the new one's: rename the new column in PostgreSQL, or stop the job, drop the old column from "
            "the sinks' tables and start the job on a new checkpoint")})
    return replace(now, columns=tuple(columns),
                   dropped=tuple(dict.fromkeys((*old.dropped, *(d for d in dropped if d not in old.dropped)))))


def _end_offsets(sources: list[dict]) -> list[dict]:
    """The end offsets of Spark's progress entries that are Postgres-CDC offsets."""
    import json

    out = []
    for s in sources:
        end = s.get("endOffset")
        try:
            end = json.loads(end) if isinstance(end, str) else end
        except ValueError:
            continue
        if isinstance(end, dict) and "lsn" in end:
            out.append(end)
    return out
