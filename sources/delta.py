"""Delta source: a Delta Lake table read as a (streaming) source.

SeaTunnel has no Delta connector; options follow the naming style of its
lakehouse connectors (snake_case) and map onto Delta's reader options.

Plan time has no Spark and does not open the Delta log, so ``schema`` is
required: it is the schema the plan is checked against (the runtime verifies it
matches the table). Table id: ``schema.table`` > ``table`` > ``plugin_output`` > "default".
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from sources._schema_options import SchemaBlock, check_table_path
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
