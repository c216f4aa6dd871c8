"""Delta sink: write each input table to a Delta Lake table, exactly once per epoch.

Target: ``path`` (a directory) or ``table`` (a catalog name), either may use the
placeholders of :mod:`sinks._placeholders`, e.g. ``path = "/wh/${database_name}/${table_name}"``,
so one sink can write a multi-table input; two tables must not share a target.

``save_mode`` (alias ``write_mode``): ``append`` inserts the rows; ``upsert``
merges them by key: UPDATE_AFTER/INSERT rows replace the row with the same key,
DELETE rows remove it, UPDATE_BEFORE rows are ignored. The key is
``primary_key`` if set, else the table's own primary key; ``sequence_column``
(upsert only) orders versions of a key so an older row never overwrites a newer
one. Each micro-batch commits as one Delta transaction keyed by the query id and
batch id (``commit_protocol = "delta-txn"``), so a replayed batch is skipped.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from sinks._placeholders import check_distinct_targets, check_template, render
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import Sink, SinkOptions, missing_column
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset, TableSchema, is_numeric

_BAD_NAME_CHARS = re.compile(r"[ ,;{}()\n\t=]")
_ORDERABLE = ("date", "timestamp", "timestamp_ntz", "string")


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
    partition_by: list[str] | None = Field(None, description="Columns to partition new tables by.")

    _lists = field_validator("primary_key", "partition_by", mode="before")(lambda cls, v: _list(v))

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

    @model_validator(mode="after")
    def _check(self) -> "DeltaSinkOptions":
        if (self.path is None) == (self.table is None):
            raise ValueError("set exactly one of path (a directory) or table (a catalog table name)")
        for key in ("path", "table"):
            value = getattr(self, key)
            if value is not None:
                check_template(key, value)
        if self.save_mode != "upsert":
            for key in ("primary_key", "sequence_column"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} only applies to save_mode = upsert; set save_mode = upsert or remove {key}")
        return self


@register
class Delta(Sink):
    name: ClassVar[str] = "Delta"
    Options = DeltaSinkOptions
    description = "Appends or upserts each table into a Delta Lake table, exactly once per micro-batch."
    commit_protocol = "delta-txn"

    options: DeltaSinkOptions

    def key_for(self, table: TableSchema) -> tuple[str, ...]:
        return tuple(self.options.primary_key or table.primary_key)

    def target_for(self, table: TableSchema) -> str:
        o = self.options
        return render(o.path or o.table or "", table, self.key_for(table))

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
                if o.sequence_column is not None:
                    if o.sequence_column not in table.names:
                        raise missing_column(table, o.sequence_column)
                    t = table.column(o.sequence_column).type
                    if not (is_numeric(t) or t in _ORDERABLE):
                        raise _incompatible(table, f"sequence_column {o.sequence_column!r} is {t}; use a number, date, timestamp or string")
            target = self.target_for(table)
            if o.table is not None and not re.fullmatch(r"[^.\s]+(\.[^.\s]+){0,2}", target):
                raise _incompatible(table, f"table name {target!r} is not a valid table name")
            targets.append((table.table_id, target))
        check_distinct_targets(targets, "path" if o.path else "table")

    def targets(self, dataset: Dataset) -> list[str]:
        o = self.options
        out = []
        for table in dataset.tables:
            target = self.target_for(table)
            where = target if o.path else f"table {target}"
            mode = "append"
            if o.save_mode == "upsert":
                mode = f"upsert by {', '.join(self.key_for(table)) or '?'}"
                if o.sequence_column:
                    mode += f", newest {o.sequence_column}"
            out.append(f"{table.table_id} -> {where} ({mode})")
        return out

    def describe(self) -> str:
        return f"Delta ({self.options.save_mode})"

    def scans_input_once(self) -> bool:
        return self.options.save_mode != "upsert"  # MERGE scans its source more than once

    def writes_batch_in_one_pass(self, ctx: Any, dataset: Dataset) -> bool:
        """Appends whose every table takes the direct path read a multi-table
        batch once (``delta_direct.write_split_files``)."""
        return self.options.save_mode == "append" and all(self._direct_directory(ctx, t) is not None for t in dataset.tables)

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        """Commit the epoch per table. Appends to plain tables on a local file
        system write all their files in one Spark job and commit each table
        with its own Delta transaction (``checkpoint.delta_direct``); other
        appends run concurrently through Delta's writer (different tables never
        conflict); upserts run one by one, because MERGE takes its transaction
        id from session settings."""
        from streaming_engine.runtime.parallel import map_concurrently

        tables = [t for t in dataset.tables if t.table_id in frames]
        if self.options.save_mode == "upsert":
            return map_concurrently(lambda t: self._write_table(ctx, frames[t.table_id], t), tables, 1)
        direct = [t for t in tables if self._direct_directory(ctx, t) is not None]
        done = self._write_direct(ctx, frames, direct) if direct else {}
        rest = [t for t in tables if t.table_id not in done]
        for t, record in zip(rest, map_concurrently(lambda t: self._write_table(ctx, frames[t.table_id], t), rest, ctx.commit_parallelism)):
            done[t.table_id] = record
        return [done[t.table_id] for t in tables]

    def _direct_directory(self, ctx: Any, table: TableSchema) -> str | None:
        """The local directory of a table the direct path may append to, else None."""
        from streaming_engine.checkpoint import delta_direct

        o = self.options
        if o.path is None or o.partition_by:
            return None
        target = self.target_for(table)
        key = (target, table.ddl())
        if key not in _DIRECT:
            ok = delta_direct.qualifies(ctx.spark, target)
            _DIRECT[key] = delta_direct.local_directory(ctx.spark, target) if ok else None
        return _DIRECT[key]

    def _write_direct(self, ctx: Any, frames: dict[str, Any], tables: list[TableSchema]) -> dict[str, Any]:
        from streaming_engine.checkpoint import delta_direct, delta_txn
        from streaming_engine.runtime import rows
        from streaming_engine.runtime.context import CommitRecord
        from streaming_engine.runtime.parallel import map_concurrently

        dirs = {t.table_id: self._direct_directory(ctx, t) for t in tables}
        splits = {t.table_id: rows.split_of(frames[t.table_id]) for t in tables}
        if all(sp is not None and sp.table == t for t, sp in zip(tables, splits.values())) and (
            len({id(sp.envelope) for sp in splits.values()}) == 1  # type: ignore[union-attr]
        ):
            # unchanged splits of one multi-table batch: one pass over the batch
            files = delta_direct.write_split_files(ctx.spark, {k: (dirs[k], sp) for k, sp in splits.items()}, ctx.batch_id)  # type: ignore[misc]
            schemas = {t.table_id: rows.table_struct(t, meta=False) for t in tables}
        else:
            data = {t.table_id: frames[t.table_id].select(*[f"`{c}`" for c in t.names]) for t in tables}
            files = delta_direct.write_files(ctx.spark, data, dirs, ctx.batch_id)
            schemas = {k: df.schema for k, df in data.items()}

        def commit(t: TableSchema) -> Any:
            target = self.target_for(t)
            try:
                c = delta_txn.with_retries(
                    f"append to {target}",
                    lambda: delta_direct.commit_files(
                        ctx.spark, target, schemas[t.table_id], files[t.table_id],
                        ctx.txn_app_id(t.table_id), ctx.batch_id, check_txn=ctx.replay,
                    ),
                )
            except delta_direct.NotPlain:
                # the table changed (properties, schema): Delta's writer decides
                _DIRECT.pop((target, t.ddl()), None)
                delta_direct.remove(dirs[t.table_id], files[t.table_id])
                return self._write_table(ctx, frames[t.table_id], t)
            if c.version is None:
                delta_direct.remove(dirs[t.table_id], files[t.table_id])
            return CommitRecord(ctx.sink_uid, t.table_id, target, c.rows, c.version, c.version is None)

        return dict(zip([t.table_id for t in tables], map_concurrently(commit, tables, ctx.commit_parallelism)))

    def _write_table(self, ctx: Any, df: Any, table: TableSchema) -> Any:
        from streaming_engine.checkpoint import delta_txn
        from streaming_engine.runtime.context import CommitRecord

        o = self.options
        target = delta_txn.Target(self.target_for(table), is_path=o.path is not None)
        app_id = ctx.txn_app_id(table.table_id)
        if o.save_mode == "upsert":
            commit = delta_txn.upsert(
                ctx.spark, df, target, self.key_for(table), table.names, app_id, ctx.batch_id, o.sequence_column
            )
        else:
            commit = delta_txn.append(
                ctx.spark, df.select(*[f"`{c}`" for c in table.names]), target, app_id, ctx.batch_id,
                partition_by=o.partition_by or (),
            )
        return CommitRecord(ctx.sink_uid, table.table_id, target.name, commit.rows, commit.version, commit.skipped)


# (target, table DDL) -> local directory when the direct append path applies, else None
_DIRECT: dict[tuple[str, str], str | None] = {}


def _incompatible(table: TableSchema, detail: str) -> SchemaError:
    return SchemaError("SCHEMA.INCOMPATIBLE", {"table": table.table_id, "detail": detail})
