"""Delta source: a Delta Lake table read as a (streaming) source.

SeaTunnel has no Delta connector; options follow the naming style of its
lakehouse connectors (snake_case) and map onto Delta's reader options.

Plan time has no Spark and does not open the Delta log, so ``schema`` is
required: it is the schema the plan is checked against (the runtime verifies it
matches the table). Table id: ``schema.table`` > ``table`` > ``plugin_output`` > "default".

Run time (:meth:`Delta.read`): Delta's own streaming source (``readStream``
on the path or table), which keeps the table version and file index of every
micro-batch in the query's checkpoint, so a replayed batch reads exactly the
same rows. BATCH jobs (available-now trigger) read the snapshot present at
start (or the changes from ``starting_version``/``starting_timestamp``) and
stop; STREAMING jobs go on with every new commit. Options map to Delta's
reader options: ``startingVersion``, ``startingTimestamp``, ``readChangeFeed``,
``skipChangeCommits``, ``maxFilesPerTrigger``.

The declared ``schema`` is checked against the table when the query starts:
every declared column must exist (names matched case-insensitively, as Delta
does) with the same type or a type that widens to the declared one (cast);
otherwise the job fails with a SCHEMA error naming the column.

Row envelope: without the change feed every row is ``+I`` (a plain Delta
stream only carries appends; commits that change rows fail the query unless
``skip_change_commits``) and ``__seq`` is 0: Delta's streaming source exposes
no commit version or row position, so rows of one batch are unordered. With
``read_change_feed = true``, ``_change_type`` becomes the row kind (insert +I,
update_preimage -U, update_postimage +U, delete -D) and ``__seq`` is
``_commit_version * 4 + rank`` (rank -U 0, -D 1, +I 2, +U 3): later commits
sort after earlier ones and an update's after-image after its before-image.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from sources._schema_options import SchemaBlock, check_table_path
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import Source, SourceOptions
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset


class DeltaSourceOptions(SourceOptions):
    path: str | None = Field(None, min_length=1, description="Directory of the Delta table (set path or table).")
    table: str | None = Field(None, description='Catalog table name, e.g. "db.orders" (set path or table).')
    schema_: SchemaBlock = Field(
        alias="schema", description="Schema of the table (required: it is not read from the Delta log at plan time)."
    )
    starting_version: int | Literal["latest"] | None = Field(
        None, description='Stream changes from this table version on ("latest": only new commits).'
    )
    starting_timestamp: str | None = Field(None, description='Stream changes committed at or after this time, e.g. "2024-01-31".')
    read_change_feed: bool = Field(False, description="Read the change data feed (updates and deletes become row kinds).")
    skip_change_commits: bool = Field(False, description="Ignore commits that update or delete existing rows.")
    max_files_per_trigger: int | None = Field(None, ge=1, description="At most this many new files per micro-batch.")

    @model_validator(mode="after")
    def _check(self) -> "DeltaSourceOptions":
        if (self.path is None) == (self.table is None):
            raise ValueError("set exactly one of path (a directory) or table (a catalog table name)")
        if self.table is not None:
            check_table_path(self.table)
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise ValueError("set starting_version or starting_timestamp, not both")
        if isinstance(self.starting_version, int) and self.starting_version < 0:
            raise ValueError("starting_version must be >= 0 or \"latest\"")
        if self.read_change_feed and self.skip_change_commits:
            raise ValueError("read_change_feed and skip_change_commits exclude each other; drop one")
        return self


@register
class Delta(Source):
    name: ClassVar[str] = "Delta"
    Options = DeltaSourceOptions
    description = "Reads a Delta Lake table, as a batch snapshot or a stream of new commits."
    boundedness = "both"

    options: DeltaSourceOptions

    def table_id(self) -> str:
        o = self.options
        return o.schema_.table or o.table or o.plugin_output or "default"

    def output(self) -> Dataset:
        return Dataset((self.options.schema_.to_table(self.table_id()),))

    def describe(self) -> str:
        o = self.options
        where = f"path {o.path}" if o.path else f"table {o.table}"
        cdf = ", change data feed" if o.read_change_feed else ""
        return f"Delta ({where}{cdf})"

    # -- run time ------------------------------------------------------------
    def read(self, ctx: Any) -> Any:
        from pyspark.sql import functions as F

        from streaming_engine.runtime import rows as envelope

        o = self.options
        table = ctx.dataset.tables[0]
        r = ctx.spark.readStream.format("delta")
        if o.starting_version is not None:
            r = r.option("startingVersion", str(o.starting_version))
        if o.starting_timestamp is not None:
            r = r.option("startingTimestamp", o.starting_timestamp)
        if o.read_change_feed:
            r = r.option("readChangeFeed", "true")
        if o.skip_change_commits:
            r = r.option("skipChangeCommits", "true")
        if o.max_files_per_trigger:
            r = r.option("maxFilesPerTrigger", str(o.max_files_per_trigger))
        if o.path is not None:
            from delta.tables import DeltaTable

            if not DeltaTable.isDeltaTable(ctx.spark, o.path):
                raise SchemaError("SCHEMA.INVALID", {"detail": f"Delta source: there is no Delta table at path {o.path!r}"})
            df = r.load(o.path)
        else:
            if not ctx.spark.catalog.tableExists(o.table):
                raise SchemaError("SCHEMA.INVALID", {"detail": f"Delta source: table {o.table!r} does not exist"})
            df = r.table(o.table)
        columns = self._columns(df, table)
        if o.read_change_feed:
            change = F.col("_change_type")
            kind = (
                F.when(change == "insert", F.lit(envelope.INSERT))
                .when(change == "update_preimage", F.lit(envelope.UPDATE_BEFORE))
                .when(change == "update_postimage", F.lit(envelope.UPDATE_AFTER))
                .when(change == "delete", F.lit(envelope.DELETE))
            )
            rank = (
                F.when(change == "update_preimage", 0).when(change == "delete", 1).when(change == "insert", 2).otherwise(3)
            )
            seq = F.col("_commit_version").cast("bigint") * F.lit(4) + rank
        else:
            kind, seq = F.lit(envelope.INSERT), F.lit(0)
        return df.select(
            F.lit(table.table_id).alias(envelope.TABLE),
            kind.alias(envelope.KIND),
            seq.cast("bigint").alias(envelope.SEQ),
            *columns,
        )

    def _columns(self, df: Any, table: Any) -> list[Any]:
        """The declared columns out of the table's, checked and cast to the declared types."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import _parse_datatype_string

        o = self.options
        where = f"path {o.path}" if o.path else f"table {o.table}"
        actual = {f.name.lower(): f for f in df.schema.fields if f.name not in _CDF_COLUMNS}
        out = []
        for c in table.columns:
            f = actual.get(c.name.lower())
            if f is None:
                raise SchemaError(
                    "SCHEMA.MISSING_COLUMN",
                    {"column": c.name, "table": f"{table.table_id} (Delta {where})", "available": ", ".join(sorted(f.name for f in actual.values()))},
                )
            want = _parse_datatype_string(c.type)
            col = F.col("`" + f.name.replace("`", "``") + "`")
            if f.dataType.simpleString() != want.simpleString():
                if not _widens(f.dataType, want):
                    raise SchemaError(
                        "SCHEMA.INVALID",
                        {"detail": f"Delta source ({where}): column {c.name!r} is {f.dataType.simpleString()} in the table "
                                   f"but the schema declares {want.simpleString()}; declare {f.dataType.simpleString()}"},
                    )
                col = col.cast(want)
            out.append(col.alias(c.name))
        return out


_CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
_INTEGRAL = ["tinyint", "smallint", "int", "bigint"]


def _widens(have: Any, want: Any) -> bool:
    """Whether every value of type ``have`` converts to ``want`` without loss (integer and float widening)."""
    from pyspark.sql.types import DecimalType

    h, w = have.simpleString(), want.simpleString()
    if h in _INTEGRAL and w in _INTEGRAL:
        return _INTEGRAL.index(h) <= _INTEGRAL.index(w)
    if h in ("tinyint", "smallint", "int", "float") and w == "double":
        return True
    if isinstance(have, DecimalType) and isinstance(want, DecimalType):
        return want.scale >= have.scale and want.precision - want.scale >= have.precision - have.scale
    if h in _INTEGRAL and isinstance(want, DecimalType):
        digits = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}[h]
        return want.precision - want.scale >= digits
    return h == "date" and w in ("timestamp", "timestamp_ntz")
