"""Delta sink: write each input table to a Delta Lake table, exactly once per epoch.

Target: ``path`` (a directory, on any Hadoop file system) or ``table`` (a
catalog name), either may use the placeholders of :mod:`sinks._placeholders`,
e.g. ``path = "/wh/${database_name}/${table_name}"``, so one sink can write a
multi-table input; two tables must not share a target.

``save_mode`` (alias ``write_mode``): ``append`` inserts the rows; ``upsert``
merges them by key: UPDATE_AFTER/INSERT rows replace the row with the same key,
DELETE rows remove it, UPDATE_BEFORE rows are ignored. The key is
``primary_key`` if set, else the table's own primary key; ``sequence_column``
(upsert only) orders versions of a key: within an epoch the newest wins, and
across epochs a change applies only when it is newer than the row in the table.
``source_order_column`` (upsert only) does the same with the source's own
order (the envelope's ``__seq``: a Debezium event's LSN, a Kafka offset, ...),
stored by the sink in that added bigint column. With either, deletes leave a
tombstone (the key and the delete's sequence, in the hidden Delta table
``<table>/_cdc_tombstones``, kept ``tombstone_retention``): an insert or update
older than the delete that arrives later does not bring the row back.
Upserts apply a source's TRUNCATE events (Kafka ``truncate_events = apply``):
the table loses every row older than the truncate (with
``source_order_column``: by stored source position, and a later-arriving
older change is ignored too); not with a ``sequence_column`` of the data,
which cannot be compared with a truncate's position (refused at plan time).

``stored_as_scd_type = 2`` (upsert with a sequence): the table keeps every
version of a row, with ``__START_AT``/``__END_AT`` from the sequence (null
end: the current version); a delete ends the current version. Only changes of
the tracked columns (``track_history_column_list``, or all but
``track_history_except_column_list``; never the key or the sequence
column) open a new version, others update the current one in
place (``checkpoint/delta_scd2.py``); a TRUNCATE ends every current version.

Each epoch commits one Delta transaction per table that records the sink's
stable transaction id and the epoch (``commit_protocol = "delta-txn"``). When a
query starts, :meth:`Delta.open` reads the epoch each table holds, so the
runtime skips epochs already committed (a replay after a crash) and stops when
the checkpoint is behind the tables. Appends are written by Delta's own writer
(per-file statistics, constraints) and committed by the engine without a per
epoch transaction lookup (``checkpoint.delta_log``); tables it does not commit
itself go through Delta's DataFrameWriter.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from sinks._placeholders import check_distinct_targets, check_template, render, render_identifier
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import Sink, SinkOptions, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import KIND, SEQ, Dataset, TableSchema, is_numeric, widens

SCD_START, SCD_END = "__START_AT", "__END_AT"  # = checkpoint.delta_scd2's (no Spark import at plan time)

log = logging.getLogger("streaming_engine.sinks.delta")
# STREAMING_ENGINE_DELTA_WRITER=dataframe: append every table through Delta's
# DataFrameWriter (txnAppId/txnVersion) instead of delta_log.append; the same
# guarantees, slower (a transaction lookup per epoch). For diagnostics and the
# benchmark's general-path row.
WRITER_ENV = "STREAMING_ENGINE_DELTA_WRITER"
# STREAMING_ENGINE_DELTA_MERGE=per_table: upsert every table with its own Delta
# MERGE instead of the one-job MERGE of a multi-table batch; the same results,
# slower. For diagnostics and the benchmark's baseline of the same job.
MERGE_ENV = "STREAMING_ENGINE_DELTA_MERGE"
_BAD_NAME_CHARS = re.compile(r"[ ,;{}()\n\t=]")
_ORDERABLE = ("date", "timestamp", "timestamp_ntz", "string")


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.I)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}


def _duration_ms(v: str) -> int:
    m = _DURATION.match(v)
    if not m:
        raise ValueError(f'{v!r} is not a duration; write e.g. "7d", "12h", "30m" or "90s"')
    return int(m.group(1)) * _UNIT_MS[m.group(2).lower() if m.group(2) else None]


def _list(v: Any) -> Any:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


class DeltaSinkOptions(SinkOptions):
    path: str | None = Field(None, min_length=1, description="Directory of the Delta table; placeholders like ${table_name} allowed.")
    table: str | None = Field(None, min_length=1, description="Catalog table name (instead of path); placeholders allowed.")
    save_mode: Literal["append", "upsert"] = Field(
        "append",
        validation_alias=AliasChoices("save_mode", "write_mode"),
        description="append: insert rows; upsert: merge by primary key (alias write_mode).",
    )
    primary_key: list[str] | None = Field(
        None,
        validation_alias=AliasChoices("primary_key", "primary_keys"),
        description="Key columns for upsert; default: the table's own primary key.",
    )
    sequence_column: str | None = Field(None, description="Upsert only: column ordering versions of a key (newest wins).")
    source_order_column: str | None = Field(
        None,
        description="Upsert only: a bigint column the sink adds to the table holding each row's source position "
        "(the source's order, e.g. a Debezium event's LSN), used as the sequence: a change older than the row "
        "in the table is ignored, in any epoch.",
    )
    tombstone_retention: str = Field(
        "7d",
        description="Upsert with a sequence: how long a deleted key's tombstone (the delete's sequence) is kept, "
        'so a late, older insert or update cannot bring the row back; e.g. "7d", "12h".',
    )
    partition_by: list[str] | None = Field(None, description="Columns to partition new tables by.")
    compact_min_files: int = Field(
        50, ge=0,
        description="Compact a table (Delta's OPTIMIZE, between two epochs, one table at a time) once this many "
        "files were added since its last compaction; 0: never. Bounds the files per table whatever the job's age.",
    )
    vacuum_interval: str = Field(
        "1d",
        description='VACUUM each table (with the table\'s own retention, delta.deletedFileRetentionDuration) '
        'between two epochs at most this often; e.g. "1d", "6h"; "0": never.',
    )
    schema_evolution: Literal["add_columns", "none"] = Field(
        "add_columns",
        description="An existing table lacking columns of the input (e.g. added in a CDC source while the job ran): "
        "add_columns adds them (nullable; rows written before read null) and widens a column the input holds as a "
        "wider type where Delta's type widening allows (int to bigint, float to double, a decimal of more digits; "
        "enables the table feature typeWidening), none fails the pipeline naming them.",
    )
    stored_as_scd_type: Literal[1, 2] = Field(
        1,
        description="Upsert: 1 keeps the latest row per key; 2 keeps every version with __START_AT/__END_AT from "
        "the sequence (sequence_column or source_order_column), like Databricks' STORED AS SCD TYPE 2.",
    )
    track_history_column_list: list[str] | None = Field(
        None, description="SCD type 2: only changes of these columns make a new version (others update in place)."
    )
    track_history_except_column_list: list[str] | None = Field(
        None, description="SCD type 2: changes of these columns update the current version in place."
    )

    _lists = field_validator(
        "primary_key", "partition_by", "track_history_column_list", "track_history_except_column_list", mode="before"
    )(lambda cls, v: _list(v))

    @field_validator("stored_as_scd_type", mode="before")
    @classmethod
    def _scd(cls, v: Any) -> Any:
        return int(v) if isinstance(v, str) and v.strip().isdigit() else v

    @field_validator("save_mode", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("primary_key")
    @classmethod
    def _pk(cls, v: list[str] | None) -> list[str] | None:
        if v == ["${primary_key}"]:  # SeaTunnel idiom: the table's own key
            return None
        if v is not None:
            if not v:
                raise ValueError("primary_key is empty; list the key columns or remove the option")
            if len(set(v)) != len(v):
                raise ValueError("primary_key lists a column twice")
        return v

    @field_validator("tombstone_retention", "vacuum_interval")
    @classmethod
    def _retention(cls, v: str) -> str:
        _duration_ms(v)
        return v

    @model_validator(mode="after")
    def _check(self) -> "DeltaSinkOptions":
        if self.sequence_column is not None and self.source_order_column is not None:
            raise ValueError("set sequence_column (a column of the data) or source_order_column (added by the sink), not both")
        if (self.path is None) == (self.table is None):
            raise ValueError("set exactly one of path (a directory) or table (a catalog table name)")
        for key in ("path", "table"):
            value = getattr(self, key)
            if value is not None:
                check_template(key, value)
        if self.save_mode != "upsert":
            for key in ("primary_key", "sequence_column", "source_order_column"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} only applies to save_mode = upsert; set save_mode = upsert or remove {key}")
            if self.stored_as_scd_type == 2:
                raise ValueError("stored_as_scd_type = 2 applies changes: set save_mode = upsert")
        history = ("track_history_column_list", "track_history_except_column_list")
        if self.stored_as_scd_type == 2:
            if self.sequence_column is None and self.source_order_column is None:
                raise ValueError("stored_as_scd_type = 2 takes each version's __START_AT/__END_AT from a sequence: "
                                 "set sequence_column (a column of the data) or source_order_column")
            if all(getattr(self, k) is not None for k in history):
                raise ValueError("set track_history_column_list or track_history_except_column_list, not both")
        else:
            for key in history:
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} only applies to stored_as_scd_type = 2")
        return self


@register
class Delta(Sink):
    name: ClassVar[str] = "Delta"
    Options = DeltaSinkOptions
    description = "Appends or upserts each table into a Delta Lake table, exactly once per micro-batch."
    commit_protocol = "delta-txn"
    # what the rows in the targets mean: a restore cannot change it under them
    restore_fixed = frozenset({"save_mode", "primary_key", "sequence_column", "source_order_column", "stored_as_scd_type"})

    options: DeltaSinkOptions

    @classmethod
    def restore_refusals(cls, old: dict, new: dict) -> list[str]:
        """Also the primary key of each table an upsert sink MERGEs by."""
        out = super().restore_refusals(old, new)
        if new["options"].get("save_mode") == "upsert" and not new["options"].get("primary_key"):
            keys = lambda v: {t["table"]: t.get("primary_key") for t in v["schema"]}  # noqa: E731
            before, after = keys(old), keys(new)
            out += [f"the primary key of table {t!r} changed from {before[t]} to {after[t]}"
                    for t in sorted(set(before) & set(after)) if before[t] != after[t]]
        return out

    def key_for(self, table: TableSchema) -> tuple[str, ...]:
        return tuple(self.options.primary_key or table.primary_key)

    def target_for(self, table: TableSchema) -> str:
        o = self.options
        if o.path is not None:
            return render(o.path, table, self.key_for(table))
        return render_identifier(o.table or "", table, self.key_for(table))

    def check_input(self, dataset: Dataset) -> None:
        o = self.options
        targets = []
        for table in dataset.tables:
            for c in table.columns:
                if _BAD_NAME_CHARS.search(c.name):
                    raise _incompatible(
                        table, f"column name {c.name!r} has a character Delta does not allow (space or one of ,;{{}}()=)"
                    )
            for col in o.partition_by or ():
                if col not in table.names:
                    raise missing_column(table, col)
            if o.save_mode == "upsert":
                key = self.key_for(table)
                if not key:
                    raise _incompatible(
                        table, "save_mode = upsert needs a key: set primary_key = [...] or declare a primary key in the source schema"
                    )
                for col in key:
                    if col not in table.names:
                        raise missing_column(table, col)
                if table.by_key and set(key) != set(table.primary_key):
                    raise _incompatible(table, (
                        f"its changes hold by the source's key ({', '.join(table.primary_key)}: REPLICA IDENTITY "
                        f"DEFAULT sends a delete's key alone), not by primary_key {list(key)}; remove primary_key"))
                if o.source_order_column is not None and o.source_order_column in table.names:
                    raise _incompatible(
                        table, f"source_order_column {o.source_order_column!r} is a column of the data; name a new column"
                    )
                if o.stored_as_scd_type == 2:
                    for col in (SCD_START, SCD_END):
                        if col in table.names:
                            raise _incompatible(table, f"column {col!r} is the SCD type 2 validity column the sink adds")
                    for col in (*(o.track_history_column_list or ()), *(o.track_history_except_column_list or ())):
                        if col not in table.names:
                            raise missing_column(table, col)
                if o.sequence_column is not None:
                    if o.sequence_column not in table.names:
                        raise missing_column(table, o.sequence_column)
                    t = table.column(o.sequence_column).type
                    if not (is_numeric(t) or t in _ORDERABLE):
                        raise _incompatible(table, f"sequence_column {o.sequence_column!r} is {t}; use a number, date, timestamp or string")
            targets.append((table.table_id, self.target_for(table)))
        check_distinct_targets(targets, "path" if o.path else "table", ignore_case=o.path is None)

    def targets(self, dataset: Dataset) -> list[str]:
        o = self.options
        out = []
        for table in dataset.tables:
            target = self.target_for(table)
            where = target if o.path else f"table {target}"
            mode = "append"
            if o.save_mode == "upsert":
                mode = f"upsert by {', '.join(self.key_for(table)) or '?'}"
                if o.sequence_column or o.source_order_column:
                    mode += f", newest {o.sequence_column or o.source_order_column}"
                    mode += f", tombstones kept {o.tombstone_retention}"
                if o.source_order_column:
                    mode += f", {o.source_order_column} = source order"
                if o.stored_as_scd_type == 2:
                    tracked = self.tracked(table)
                    mode += (f", SCD type 2: {SCD_START}/{SCD_END} from {o.sequence_column or o.source_order_column}, "
                             f"history of {', '.join(tracked) if tracked else 'no column'}")
                if table.truncates:
                    mode += (", truncates end the current versions" if o.stored_as_scd_type == 2 else
                             ", truncates clear older rows" if o.source_order_column else ", truncates clear the table")
                if table.by_key:
                    mode += ", a column the source left unchanged (TOAST) keeps the table's value"
            if table.evolution:
                mode += (f", columns renamed or dropped in the source are here too ({table.evolution}: column "
                         "mapping, delta.columnMapping.mode = name, set at the first such change; it cannot be undone)")
            out.append(f"{table.table_id} -> {where} ({mode})")
        return out

    def describe(self) -> str:
        return f"Delta ({self.options.save_mode})"

    def applies_truncates(self) -> bool:
        # a data sequence_column cannot be compared with a truncate's source position
        o = self.options
        return o.save_mode == "upsert" and o.sequence_column is None and (
            o.stored_as_scd_type == 1 or o.source_order_column is not None)

    def applies_by_key(self) -> bool:
        # SCD type 2 would copy an unchanged column into a new version from a row it does not read
        return self.options.save_mode == "upsert" and self.options.stored_as_scd_type == 1

    def tracked(self, table: TableSchema) -> list[str]:
        """SCD type 2: the columns whose changes make a new version (never the
        key, nor the sequence: it changes with every change)."""
        o = self.options
        names = [n for n in table.names if n not in (*self.key_for(table), o.sequence_column)]
        if o.track_history_column_list is not None:
            names = [n for n in names if n in o.track_history_column_list]
        names = [n for n in names if n not in (o.track_history_except_column_list or ())]
        return names

    def scans_input_once(self) -> bool:
        return self.options.save_mode != "upsert"  # MERGE scans its source more than once

    def reads_metadata(self) -> frozenset[str]:
        # an append writes the table's columns; a MERGE reads row kinds and the order of changes
        return frozenset({KIND, SEQ}) if self.options.save_mode == "upsert" else frozenset()

    def open(self, ctx: Any, dataset: Dataset) -> dict[str, int]:
        """Per table, the epoch its target holds for this sink's txn id, read
        once per query start; also decides once per table how appends write
        it: ``delta_log.append`` (Delta's writer + one commit with the txn
        action) where it may, else Delta's DataFrameWriter (the reason is logged)."""
        from streaming_engine.checkpoint import delta_log, delta_txn
        from streaming_engine.runtime import rows
        from streaming_engine.runtime.parallel import map_concurrently

        o = self.options
        opening = int(time.time() * 1000)  # a table state read from the log after this is fresh

        def inspect(t: TableSchema) -> tuple[int, str | None]:
            target = self._target(t)
            location = delta_txn.location(ctx.spark, target)
            if location is None:  # a catalog table that does not exist yet: saveAsTable creates it
                return -1, None
            if t.evolution and target.exists(ctx.spark):
                self._follow_source(ctx, t, target, location)
            struct = rows.table_struct(t, meta=False)
            state = delta_log.inspect(
                ctx.spark, location, ctx.txn_app_id(t.table_id), struct, o.partition_by or (), read_since_ms=opening,
            )
            if state.incompatible is not None and self._evolve(ctx, t, target):  # not the data's schema: new columns?
                state = delta_log.inspect(ctx.spark, location, ctx.txn_app_id(t.table_id), struct, o.partition_by or ())
            if o.save_mode == "upsert" or os.environ.get(WRITER_ENV) == "dataframe":
                return state.epoch, None  # MERGE; or every append through the DataFrameWriter (diagnostics, benchmarks)
            if state.incompatible is not None:
                log.info("Delta table written by Delta's DataFrameWriter",
                         extra={"target": target.name, "reason": state.incompatible})
                return state.epoch, None
            return state.epoch, location

        found = map_concurrently(inspect, list(dataset.tables), ctx.log_parallelism)
        self._engine_writes = {t.table_id: loc for t, (_, loc) in zip(dataset.tables, found) if loc is not None}
        self._locations = [loc for t in dataset.tables if (loc := delta_txn.location(ctx.spark, self._target(t)))]
        return {t.table_id: epoch for t, (epoch, _) in zip(dataset.tables, found)}

    def _follow_source(self, ctx: Any, t: TableSchema, target: Any, location: str) -> None:
        """A source under evolve renamed or dropped columns of ``t``: rename and drop them in the table (and
        a renamed key column in its tombstone table), under column mapping. Under try_evolve a change Delta
        refuses is logged and left: the table keeps the column as lenient would (not written from then on)."""
        from streaming_engine.checkpoint import delta_txn

        have = delta_txn.column_names(ctx.spark, target)
        lower = {n.lower() for n in have}
        renames = []
        for c in t.columns:
            if c.former and c.name.lower() not in lower:
                was = next((f for f in reversed(c.former) if f.lower() in lower), None)
                if was is not None:
                    renames.append((next(n for n in have if n.lower() == was.lower()), c.name))
        inputs = {n.lower() for n in t.names}
        drops = [n for n in have if n.lower() in {d.lower() for d in t.dropped} and n.lower() not in inputs]
        if not renames and not drops:
            return
        said = "; ".join(x for x in (", ".join(f"{a} renamed to {b}" for a, b in renames),
                                      f"dropped {', '.join(drops)}" if drops else "") if x)
        try:
            delta_txn.rename_and_drop_columns(ctx.spark, target, renames, drops)
            tombs = delta_txn.tombstones_location(location)
            keys = [(a, b) for a, b in renames if b in self.key_for(t)]
            if keys and delta_txn.Target(tombs).exists(ctx.spark):
                delta_txn.rename_and_drop_columns(ctx.spark, delta_txn.Target(tombs), keys, [])
        except Exception as e:  # noqa: BLE001 - Delta's refusal, said (evolve) or logged (try_evolve)
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:400]
            if t.evolution != "try_evolve":
                raise _incompatible(t, f"Delta table {target.name} could not follow the source ({said}): {why}; "
                                       "set schema.change.behavior = try_evolve (the table keeps such columns) or "
                                       "lenient in the source") from None
            log.warning("Delta table: the source's schema change not applied (try_evolve)",
                        extra={"target": target.name, "table": t.table_id, "change": said, "reason": why})
            return
        log.warning("Delta table: columns renamed or dropped as in the source (column mapping)",
                    extra={"target": target.name, "table": t.table_id, "change": said})

    def _evolve(self, ctx: Any, t: TableSchema, target: Any) -> bool:
        """Columns of the input the existing table lacks: added (``schema_evolution = add_columns``; True), else
        an error."""
        from streaming_engine.checkpoint import delta_txn
        from streaming_engine.runtime import rows

        struct = rows.table_struct(t, meta=False)
        fields = delta_txn.new_columns(ctx.spark, target, struct)
        wider = [f for f, was in delta_txn.retyped_columns(ctx.spark, target, struct)
                 if widens(was, f.dataType.simpleString())]
        if not fields and not wider:
            return False
        names = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in fields)
        widened = ", ".join(f"{f.name} to {f.dataType.simpleString()}" for f in wider)
        if self.options.schema_evolution == "none":
            said = "; ".join(x for x in (f"lacks the input's columns {names}" if fields else "",
                                         f"holds narrower types of {widened}" if wider else "") if x)
            raise _incompatible(t, f"Delta table {target.name} {said}; change the table, or set schema_evolution = "
                                   "add_columns in the Delta sink")
        if wider:
            delta_txn.widen_columns(ctx.spark, target, wider)
            log.warning("Delta table: column types widened", extra={"target": target.name, "table": t.table_id,
                                                                    "columns": widened})
        if fields:
            delta_txn.add_columns(ctx.spark, target, fields)
            log.warning("Delta table: columns added", extra={"target": target.name, "table": t.table_id, "columns": names})
        return True

    def maintained(self) -> list[tuple[str, Any]]:
        """Each table (a catalog table once it exists), and its tombstone table
        when the upsert keeps one."""
        from streaming_engine.checkpoint import delta_txn
        from streaming_engine.checkpoint.maintenance import Policy

        o = self.options
        policy = Policy(o.compact_min_files, _duration_ms(o.vacuum_interval))
        out = []
        for location in getattr(self, "_locations", []):
            out.append((location, policy))
            if o.save_mode == "upsert" and (o.sequence_column or o.source_order_column):  # (once it exists)
                out.append((delta_txn.tombstones_location(location), policy))
        return out

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        """Commit the epoch per table, each in its own Delta transaction;
        different tables (appends and MERGEs alike: each MERGE runs in a
        session of its own txn id, ``delta_txn.as_txn``) commit concurrently,
        ``env.commit.parallelism`` at a time."""
        from streaming_engine.runtime.parallel import map_concurrently

        tables = [t for t in dataset.tables if t.table_id in frames]
        done = self._write_in_one_job(ctx, tables)
        rest = [t for t in tables if t.table_id not in done]
        return [*done.values(),
                *map_concurrently(lambda t: self._write_table(ctx, frames[t.table_id], t), rest, ctx.commit_parallelism)]

    def _write_in_one_job(self, ctx: Any, tables: list[TableSchema]) -> dict[str, Any]:
        """Appends of several tables of ONE multi-table source batch: one Spark
        job writes all their files (``delta_log.append_tables``), each table
        commits in its own transaction; the same files, statistics, commits
        and txn actions as one ``delta_log.append`` per table. Tables it does
        not take are written one by one (returned: those it wrote)."""
        from streaming_engine.checkpoint import delta_log
        from streaming_engine.runtime import rows

        o = self.options
        if ctx.envelope is None or o.partition_by or not delta_log.one_job_available(ctx.spark):
            return {}
        if o.save_mode == "upsert":
            return self._merge_in_one_job(ctx, tables)
        batch, ordinals = ctx.envelope
        engine = getattr(self, "_engine_writes", {})
        slices = [
            delta_log.TableSlice(t.table_id, engine[t.table_id], ctx.txn_app_id(t.table_id), ordinals[t.table_id],
                                 rows.table_struct(t, meta=False))
            for t in tables if t.table_id in engine and t.table_id in ordinals
        ]
        if len(slices) < 2:
            return {}
        return self._one_job(ctx, tables, delta_log.append_tables, slices, "Delta table written on its own")

    def _one_job(self, ctx: Any, tables: list[TableSchema], write: Any, slices: list, refused_as: str) -> dict[str, Any]:
        """Run a one-job write (``write(spark, batch, slices, epoch, parallelism,
        before_commit, after_commit)``: ``delta_log.append_tables`` or
        ``delta_merge.merge_tables``) with the sink's fault points; the commit
        record of each table it wrote (the others are logged and written one by one)."""
        from streaming_engine.runtime import faults
        from streaming_engine.runtime.context import CommitRecord

        written, refused = write(
            ctx.spark, ctx.envelope[0], slices, ctx.batch_id, ctx.log_parallelism,
            before_commit=lambda: faults.maybe_crash("sink_files_written", ctx.batch_id, ctx.sink_uid),
            after_commit=lambda: faults.maybe_crash("sink_table_committed", ctx.batch_id, ctx.sink_uid),
        )
        for table_id, reason in refused.items():
            log.info(refused_as, extra={"table": table_id, "reason": reason})
        return {
            t.table_id: CommitRecord(ctx.sink_uid, t.table_id, self.target_for(t), done.rows, done.version,
                                     done.skipped, done.seconds)
            for t in tables if (done := written.get(t.table_id)) is not None
        }

    def _merge_in_one_job(self, ctx: Any, tables: list[TableSchema]) -> dict[str, Any]:
        """Upserts of the tables of ONE multi-table source batch: one Spark job
        applies every table's changes (``delta_merge.merge_tables``), each table
        commits in its own transaction, as its MERGE would. Tables it does not
        take (written one by one, each by Delta's MERGE): catalog targets,
        SCD type 2, and what ``merge_tables`` refuses."""
        from pyspark.sql.types import LongType, StructField, StructType

        from streaming_engine.checkpoint import delta_merge
        from streaming_engine.runtime import rows

        o = self.options
        if (o.path is None or o.stored_as_scd_type != 1 or not delta_merge.available(ctx.spark)
                or os.environ.get(MERGE_ENV) == "per_table"):
            return {}
        batch, ordinals = ctx.envelope
        seq_at = batch.columns.index(rows.SEQ)
        slices = []
        for t in tables:
            if t.table_id not in ordinals:
                continue
            schema, at = rows.table_struct(t, meta=False), ordinals[t.table_id]
            if o.source_order_column is not None:
                schema = StructType([*schema.fields, StructField(o.source_order_column, LongType())])
                at = (*at, seq_at)
            keys = self.key_for(t)
            reason = delta_merge.key_refusal(ctx.spark, schema, keys)
            if reason is not None:
                log.info("Delta table merged on its own", extra={"table": t.table_id, "reason": reason})
                continue
            slices.append(delta_merge.MergeSlice(
                t.table_id, self.target_for(t), ctx.txn_app_id(t.table_id), at, schema, keys,
                o.sequence_column or o.source_order_column, _duration_ms(o.tombstone_retention),
                source_order=o.source_order_column is not None, partial=t.by_key,
            ))
        if not slices:
            return {}
        return self._one_job(ctx, tables, delta_merge.merge_tables, slices, "Delta table merged on its own")

    def _target(self, table: TableSchema) -> Any:
        from streaming_engine.checkpoint import delta_txn

        return delta_txn.Target(self.target_for(table), is_path=self.options.path is not None)

    def _write_table(self, ctx: Any, df: Any, table: TableSchema) -> Any:
        from streaming_engine.checkpoint import delta_log, delta_txn
        from streaming_engine.runtime import faults
        from streaming_engine.runtime.context import CommitRecord

        o = self.options
        began = time.monotonic()
        target = self._target(table)
        app_id = ctx.txn_app_id(table.table_id)
        files_written = lambda: faults.maybe_crash("sink_files_written", ctx.batch_id, ctx.sink_uid)  # noqa: E731
        if o.save_mode == "upsert":
            columns, sequence = list(table.names), o.sequence_column
            if o.source_order_column is not None:
                from streaming_engine.runtime import rows

                df = df.withColumn(o.source_order_column, df[rows.SEQ])
                columns, sequence = [*columns, o.source_order_column], o.source_order_column
            if o.stored_as_scd_type == 2:
                from streaming_engine.checkpoint import delta_scd2

                assert sequence is not None
                commit = delta_scd2.apply(
                    ctx.spark, df, target, self.key_for(table), columns, self.tracked(table), app_id, ctx.batch_id,
                    sequence, _duration_ms(o.tombstone_retention), truncates=table.truncates,
                )
            else:
                commit = delta_txn.upsert(
                    ctx.spark, df, target, self.key_for(table), columns, app_id, ctx.batch_id, sequence,
                    tombstones=sequence is not None, tombstone_retention_ms=_duration_ms(o.tombstone_retention),
                    truncates=table.truncates, source_order=o.source_order_column is not None, by_key=table.by_key,
                )
        else:
            data = df.select(*[f"`{c.replace('`', '``')}`" for c in table.names])
            location = getattr(self, "_engine_writes", {}).get(table.table_id)
            commit = None
            if location is not None:
                recent = delta_log.recent_first()
                try:
                    done = delta_txn.with_retries(
                        f"append to {target.name}",
                        lambda: delta_log.append(
                            ctx.spark, location, data, app_id, ctx.batch_id, o.partition_by or (), files_written,
                            recent=recent(),
                        ),
                        also=("ProtocolChangedException",),
                    )
                    commit = delta_txn.DeltaCommit(done.version, done.skipped, done.rows)
                except delta_log.Incompatible as e:  # the table changed during the run
                    log.info("Delta table written by Delta's DataFrameWriter from now on",
                             extra={"target": target.name, "reason": str(e)})
                    self._engine_writes.pop(table.table_id, None)
            if commit is None:
                commit = delta_txn.append_with_writer(
                    ctx.spark, data, target, app_id, ctx.batch_id, partition_by=o.partition_by or ()
                )
        seconds = None if commit.skipped else time.monotonic() - began
        faults.maybe_crash("sink_table_committed", ctx.batch_id, ctx.sink_uid)
        return CommitRecord(
            ctx.sink_uid, table.table_id, target.name, commit.rows, commit.version, commit.skipped, seconds
        )


def _incompatible(table: TableSchema, detail: str) -> SchemaError:
    return SchemaError("SCHEMA.INCOMPATIBLE", {"table": table.table_id, "detail": detail})
