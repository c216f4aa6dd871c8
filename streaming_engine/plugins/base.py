"""What a plugin is: an options model plus plan-time behaviour.

A plugin class declares
- ``name``: the identifier used in job files (matched case-insensitively);
- ``Options``: a pydantic model of its options (unknown keys are reported by the
  config layer, with a "did you mean");
- its output schema given its input schema(s), per table for multi-table data;
- for transforms, how it executes (``"expression"``: compiles to Spark column
  expressions, no Python; ``"python"``: needs a Python function over Arrow /
  pandas batches) and whether it may be chained with its neighbours; an
  expression transform that only computes columns implements ``columns``
  (composed with its neighbours into one select), others ``apply``;
- for sinks, the commit protocol it takes part in, and whether ``write`` scans
  its input once (``scans_input_once``: else the engine persists the input).

Run-time methods (reading, transforming, writing DataFrames) are added by the
runtime layer; nothing here imports Spark.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from streaming_engine.errors import EngineError, SchemaError
from streaming_engine.redact import redact_options
from streaming_engine.schema import META, Dataset, TableSchema

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from streaming_engine.runtime.context import CommitRecord, EpochContext, SourceContext, TransformContext

PluginKind = Literal["source", "transform", "sink"]
Execution = Literal["expression", "python", "table"]


class PluginOptions(BaseModel):
    """Base of every plugin's options. Keys are the names used in job files."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, arbitrary_types_allowed=True)

    parallelism: int | None = Field(None, ge=1, description="Parallelism of this plugin; defaults to env.parallelism.")

    @classmethod
    def known_keys(cls) -> set[str]:
        return option_keys(cls)

    def public_dict(self) -> dict[str, Any]:
        """Options as written by the user, secrets masked (SecretStr, secret-like
        names also in nested maps, URI user-info): safe for plans and logs."""
        out: dict[str, Any] = {}
        for name, f in type(self).model_fields.items():
            value = getattr(self, name)
            if value is None or name in _WIRING_FIELDS:
                continue
            out[f.alias or name] = value
        return redact_options(out)


def option_keys(model: type[BaseModel]) -> set[str]:
    """Every key a user may write for ``model``: field names, aliases and alias choices."""
    keys: set[str] = set()
    for name, f in model.model_fields.items():
        keys |= option_keys_of_field(name, f)
    return keys


_WIRING_FIELDS = {"plugin_input", "plugin_output", "parallelism"}


# -- documented options this engine cannot honour -----------------------------
class Refused:
    """Field metadata of an option SeaTunnel documents that the engine cannot
    honour (see :func:`refused`)."""

    def __init__(self, reason: str, accepts: tuple[Any, ...] = ()):
        self.reason, self.accepts = reason, accepts


def refused(reason: str, accepts: tuple[Any, ...] = ()) -> Any:
    """The type of an option SeaTunnel documents that this engine cannot honour
    on Spark: known (never "unknown"), refused at plan time with ``reason`` when
    set to anything but a value in ``accepts`` (values meaning what the engine
    does anyway, such as SeaTunnel's default), and listed with its reason on
    docs/seatunnel-compatibility.md. ``x: refused("why") = Field(None, alias=...)``."""
    from typing import Annotated

    from pydantic import AfterValidator

    def check(value: Any) -> Any:
        if value is not None and value not in accepts:
            allowed = f" (only {', '.join(repr(a) for a in accepts)} is accepted)" if accepts else ""
            raise ValueError(f"not supported by this engine{allowed}: {reason}")
        return value

    return Annotated[Any, Refused(reason, accepts), AfterValidator(check)]


def refusal(field: Any) -> "Refused | None":
    """The :class:`Refused` mark of a pydantic field, if it has one."""
    return next((m for m in field.metadata if isinstance(m, Refused)), None)


# -- unknown options: tolerated at every depth (SeaTunnel's rule) -----------
Loc = tuple["str | int", ...]


def validate_options(model: type[BaseModel], data: Any, context: dict[str, Any] | None = None) -> tuple[
    "BaseModel | None", list[tuple[Loc, str]], "Exception | None"
]:
    """Validate ``data`` as ``model``, tolerating keys it does not know at ANY
    depth (nested rule objects, list items): such keys are dropped and returned
    as ``(location, did-you-mean hint)``, for the caller to report as warnings
    (errors under ``--strict``). Returns (the options or None, unknown keys,
    the ValidationError of what else is wrong or None). Validators that validate
    nested data themselves call :func:`validate_nested` with their ``info``, so
    their unknown keys are collected here too."""
    import copy

    from pydantic import ValidationError

    data = copy.deepcopy(data)
    unknown: list[tuple[Loc, str]] = []
    for _ in range(64):  # each round drops what pydantic reported; nested data may need a few
        nested: list[tuple[Loc, str]] = []
        ctx = {**(context or {}), "unknown": nested}
        try:
            return model.model_validate(data, context=ctx), unknown + nested, None
        except ValidationError as e:
            extra = [tuple(err["loc"]) for err in e.errors() if err["type"] == "extra_forbidden"]
            dropped = [loc for loc in extra if _drop(data, loc)]
            if not dropped:
                return None, unknown + nested, e
            unknown += [(loc, did_you_mean_at(model, loc)) for loc in dropped]
    return None, unknown, ValueError("options nested too deeply")


def validate_nested(model: type[BaseModel], data: Any, info: Any, where: Loc) -> BaseModel:
    """For a validator that validates part of its options itself (as ``model``):
    unknown keys there are reported like any other (at ``where`` + their path),
    through the validation context :func:`validate_options` passed in."""
    obj, unknown, error = validate_options(model, data)
    sink = (getattr(info, "context", None) or {}).get("unknown")
    if sink is not None:
        sink.extend((where + loc, hint) for loc, hint in unknown)
    if error is not None:
        raise error
    return obj  # type: ignore[return-value]


def render_loc(loc: Loc) -> str:
    """``("rules", "tables_configs", 0, "x")`` -> ``rules.tables_configs[0].x``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _drop(data: Any, loc: Loc) -> bool:
    *path, last = loc
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(data, dict) and last in data:
        del data[last]
        return True
    return False


def did_you_mean_at(model: type[BaseModel], loc: Loc) -> str:
    """The "did you mean" for an unknown key at ``loc``, from the options model
    found there (walking fields, list items and map values)."""
    from streaming_engine.config.keys import did_you_mean

    here: Any = model
    for part in loc[:-1]:
        here = _step(here, part)
        if here is None:
            return ""
    models = [t for t in _alternatives(here) if _is_model(t)]
    if not models:
        return ""
    # suggest the names users write (aliases), not the Python names behind them
    spelled = {(f.alias or name) for name, f in models[0].model_fields.items()}
    return did_you_mean(str(loc[-1]), spelled)


def _step(tp: Any, part: "str | int") -> Any:
    import typing

    for t in _alternatives(tp):
        if _is_model(t) and isinstance(part, str):
            for name, f in t.model_fields.items():
                if part in option_keys_of_field(name, f):
                    return f.annotation
        origin = typing.get_origin(t)
        args = typing.get_args(t)
        if isinstance(part, int) and origin in (list, tuple) and args:
            return args[0]
        if isinstance(part, str) and origin is dict and len(args) == 2:
            return args[1]
    return None


def _alternatives(tp: Any) -> list[Any]:
    import types
    import typing

    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def option_keys_of_field(name: str, f: Any) -> set[str]:
    keys = {name}
    if f.alias:
        keys.add(f.alias)
    va = f.validation_alias
    if isinstance(va, str):
        keys.add(va)
    elif isinstance(va, AliasChoices):
        keys.update(c for c in va.choices if isinstance(c, str))
    return keys


def _as_list(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        return [p for p in parts if p]
    return value


class SourceOptions(PluginOptions):
    plugin_output: str | None = Field(
        None,
        validation_alias=AliasChoices("plugin_output", "result_table_name"),
        description="Name of the dataset this source produces (legacy: result_table_name).",
    )


class TransformOptions(PluginOptions):
    plugin_input: list[str] | None = Field(
        None,
        validation_alias=AliasChoices("plugin_input", "source_table_name"),
        description="Dataset(s) this transform reads (legacy: source_table_name).",
    )
    plugin_output: str | None = Field(
        None,
        validation_alias=AliasChoices("plugin_output", "result_table_name"),
        description="Name of the dataset this transform produces (legacy: result_table_name).",
    )
    table_match_regex: str | None = Field(
        ".*", description="Regex over upstream table paths this transform applies to (default: all tables)."
    )
    table_transform: list[dict[str, Any]] | None = Field(
        None, description="Per-table option overrides: a list of {table_path = ..., <options>}."
    )

    @field_validator("plugin_input", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _as_list(v)

    @field_validator("table_match_regex")
    @classmethod
    def _valid_regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"not a valid regular expression: {e}") from None
        return v


class SinkOptions(PluginOptions):
    plugin_input: list[str] | None = Field(
        None,
        validation_alias=AliasChoices("plugin_input", "source_table_name"),
        description="Dataset(s) this sink writes (legacy: source_table_name).",
    )

    @field_validator("plugin_input", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _as_list(v)


class Plugin:
    kind: ClassVar[PluginKind]
    name: ClassVar[str]
    Options: ClassVar[type[PluginOptions]] = PluginOptions
    description: ClassVar[str] = ""
    # SeaTunnel's documentation page of the plugin of the same name (relative to
    # docs/seatunnel/): its options are this plugin's contract, checked by the
    # conformance tests and listed on docs/seatunnel-compatibility.md
    seatunnel_page: ClassVar[str | None] = None
    # options the page lists by mistake (option -> what SeaTunnel really does)
    seatunnel_errata: ClassVar[dict[str, str]] = {}
    # documented options whose default the page writes in a form the conformance
    # test cannot compare (prose, a per-format choice) or that its Default column
    # gets wrong: option -> what the default is here, and why it is SeaTunnel's
    seatunnel_defaults: ClassVar[dict[str, str]] = {}

    @classmethod
    def seatunnel_notes(cls) -> list[str]:
        """More of docs/seatunnel-compatibility.md for this plugin (Markdown
        lines, e.g. the Sql transform's function table). Default: none."""
        return []

    def __init__(self, options: PluginOptions):
        self.options = options

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options.public_dict()})"

    def capabilities(self) -> dict[str, str]:
        """What this block does beyond moving rows, with its options: capability
        (``runs_code``, ``reads_local_files``, ``writes_local_files``; see
        :mod:`streaming_engine.security`) -> why, naming the option. Restricted
        mode refuses the first two. Default: nothing."""
        return {}

    def reads_metadata(self) -> frozenset[str]:
        """The envelope's metadata columns (``__table``, ``__kind``, ``__seq``)
        this block READS, not merely carries along. Where no block of a
        pipeline reads one, the runtime leaves it null at the source, so Spark
        never computes it (``plan.physical.unread_metadata``). Default: all of
        them (a block that says nothing is assumed to read everything)."""
        return frozenset(META)


class Source(Plugin):
    kind: ClassVar[PluginKind] = "source"
    Options: ClassVar[type[PluginOptions]] = SourceOptions
    # "streaming" sources keep producing in STREAMING mode; "bounded" ones end.
    boundedness: ClassVar[Literal["bounded", "unbounded", "both"]] = "both"
    # Restoring a job from a savepoint (control/restore.py): the options that
    # say WHAT the source reads (its offsets in the checkpoint mean nothing for
    # anything else); None = every option except ``restore_tunable``.
    restore_identity: ClassVar[frozenset[str] | None] = None
    # options a restore may change (rate limits, poll settings)
    restore_tunable: ClassVar[frozenset[str]] = frozenset()
    # the option that lists the source's tables, compared per table by ``restore_tables``
    restore_table_option: ClassVar[str | None] = None

    @classmethod
    def restore_tables(cls, old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(allowed, refused) changes of the source's table set on a restore
        (plan vertices as ``explain --format json`` shows them). Default: a
        changed table set is refused (the checkpoint's offsets cover the old
        tables only, and a source cannot start one table from its beginning)."""
        before = {t["table"] for t in old["schema"]}
        after = {t["table"] for t in new["schema"]}
        if before == after:
            return [], []
        return [], [f"its tables changed (added {sorted(after - before) or 'none'}, removed "
                    f"{sorted(before - after) or 'none'}); {new['plugin']} cannot change its table set on a restore: "
                    "run the new tables as a job of their own"]

    def output(self) -> Dataset:
        raise NotImplementedError

    def output_after(self, planned: Dataset) -> Dataset:
        """The output when the running job is planned again because a table's
        columns changed (the runner, on ``[RUNTIME.SCHEMA_CHANGED]``), given
        what this source was planned to produce before. Default: :meth:`output`."""
        return self.output()

    def describe(self) -> str:
        """One line for the physical plan: what Spark will read."""
        return self.name

    def dead_letters(self) -> bool:
        """True when :meth:`read` adds the ``__reject`` column (``rows.REJECT``):
        records it could not decode go to the job's dead-letter table instead
        of stopping the job."""
        return False

    def on_progress(self, spark: "Any", sources: list[dict]) -> None:
        """After each micro-batch Spark finished (the epoch is committed): the
        ``sources`` entries of Spark's progress for the pipeline (start and end
        offsets). For bookkeeping outside the checkpoint (Kafka: the consumer
        group's offsets); it must not change what the query reads. Default: nothing."""

    def gauges(self, spark: "Any", sources: list[dict]) -> "list[tuple[str, str, float]]":
        """After each micro-batch, like :meth:`on_progress`: what the source
        reports of itself as (name, table or "", value), names from
        ``runtime.events.SOURCE_GAUGES``. Default: nothing."""
        return []

    # -- run time ------------------------------------------------------------
    def read(self, ctx: "SourceContext") -> "DataFrame":
        """A streaming DataFrame in the engine's row envelope (runtime/rows.py).

        It must be replayable: the rows of a batch depend only on its offsets,
        so a restarted query re-reads exactly what it read before.
        """
        raise _not_runnable(self)


class Transform(Plugin):
    kind: ClassVar[PluginKind] = "transform"
    Options: ClassVar[type[PluginOptions]] = TransformOptions
    execution: ClassVar[Execution] = "expression"
    chainable: ClassVar[bool] = True
    max_inputs: ClassVar[int] = 1
    # True only for a transform that keeps TRUNCATE control rows (schema.TRUNCATE)
    # of its tables as they are and keeps their tables' ``truncates`` mark; the
    # planner refuses a truncating table on any other.
    passes_truncates: ClassVar[bool] = False

    # -- per-table option resolution (SeaTunnel multi-table transforms) -------
    def options_for(self, table_id: str) -> PluginOptions | None:
        """Options that apply to ``table_id``: table_transform > table_match_regex > none."""
        opts = self.options
        for entry in opts.table_transform or ():  # type: ignore[attr-defined]
            if entry.get("table_path") == table_id:
                merged = {k: v for k, v in entry.items() if k != "table_path"}
                found, _, error = validate_options(type(opts), merged)  # unknown keys: reported by the config layer
                if error is not None:
                    raise error
                return found  # type: ignore[return-value]
        regex = getattr(opts, "table_match_regex", None)
        if regex is None or re.fullmatch(regex, table_id):
            return opts
        return None

    def all_options(self) -> list[PluginOptions]:
        """The options and every ``table_transform`` entry's (for :meth:`capabilities`)."""
        entries = self.options.table_transform or ()  # type: ignore[attr-defined]
        return [self.options, *(o for e in entries if (o := self.options_for(e.get("table_path"))) is not None)]

    def output(self, inputs: list[Dataset]) -> Dataset:
        """Output dataset given the input datasets. Default: per-table mapping."""
        tables: list[TableSchema] = []
        for dataset in inputs:
            for table in dataset.tables:
                opts = self.options_for(table.table_id)
                tables.append(table if opts is None else self.transform_table(table, opts))
        return Dataset(tuple(tables))

    def transform_table(self, table: TableSchema, options: PluginOptions) -> TableSchema:
        return table

    def describe(self) -> str:
        return self.name

    # -- run time ------------------------------------------------------------
    # execution == "expression": implement ``apply`` (Spark column expressions).
    # execution == "python": implement ``arrow_function``; the engine fuses
    #   consecutive Python transforms into ONE mapInArrow pass per table.
    # execution == "table": override ``apply_frames`` (works on whole tables).
    # Frames always keep the metadata columns __table, __kind, __seq first.
    # An expression transform that only computes its output columns from its
    # input columns (no row filter, no metadata) implements ``columns``
    # instead of ``apply``: the chain runner composes consecutive such
    # transforms into ONE select per table.
    def apply(self, ctx: "TransformContext", df: "DataFrame", table: TableSchema, options: PluginOptions) -> "DataFrame":
        if not self.is_projection():
            raise _not_runnable(self)
        from streaming_engine.runtime import rows

        return rows.select_columns(df, self.columns(ctx, {n: rows.column(n) for n in table.names}, table, options))

    def columns(
        self, ctx: "TransformContext", cols: "dict[str, Column]", table: TableSchema, options: PluginOptions
    ) -> "dict[str, Column]":
        """The output data columns, in order, as expressions over ``cols``
        (the input table's data columns by name)."""
        raise _not_runnable(self)

    def reads_metadata(self) -> frozenset[str]:
        # a projection computes its columns from data columns only
        return frozenset() if self.is_projection() else frozenset(META)

    @classmethod
    def is_projection(cls) -> bool:
        return cls.columns is not Transform.columns

    def arrow_function(
        self, ctx: "TransformContext", table: TableSchema, options: PluginOptions
    ) -> "Callable[[pa.RecordBatch], pa.RecordBatch]":
        raise _not_runnable(self)

    def apply_frames(self, ctx: "TransformContext", frames: dict[str, "DataFrame"]) -> dict[str, "DataFrame"]:
        """Per-table application with SeaTunnel's multi-table option rules."""
        tables = {t.table_id: t for d in ctx.inputs for t in d.tables}
        out = {}
        for table_id, df in frames.items():
            opts = self.options_for(table_id)
            out[table_id] = df if opts is None else self.apply(ctx, df, tables[table_id], opts)
        return out


class Sink(Plugin):
    kind: ClassVar[PluginKind] = "sink"
    Options: ClassVar[type[PluginOptions]] = SinkOptions
    # How the sink takes part in the epoch commit:
    #   "delta-txn"      idempotent Delta transaction keyed by (txnAppId, batch id)
    #   "staged-publish" writes to staging, publishes atomically at commit
    #   "none"           side-effect only (console, assert, no-op)
    commit_protocol: ClassVar[str] = "none"
    # Restoring a job from a savepoint: options a restore may not change
    # (what the written rows mean: keys, ordering, the write mode)
    restore_fixed: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def restore_refusals(cls, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        """Why a restore from a savepoint may not change this sink from
        ``old`` to ``new`` (plan vertices as ``explain --format json`` shows
        them). Default: a changed ``restore_fixed`` option."""
        return [
            f"option {k!r} changed from {old['options'].get(k)!r} to {new['options'].get(k)!r}"
            for k in sorted(cls.restore_fixed) if old["options"].get(k) != new["options"].get(k)
        ]

    def scans_input_once(self) -> bool:
        """True when :meth:`write` reads each table's frame in ONE Spark job.

        The planner then lets the sink read its upstream directly; otherwise
        the upstream output is persisted first, so a sink that looks at its
        input several times (counts, rules, MERGE) never recomputes the batch.
        """
        return False

    def open(self, ctx: "EpochContext", dataset: Dataset) -> dict[str, int]:
        """Called when the pipeline's query starts (and restarts), before any
        epoch: per table id, the newest epoch the sink's target already holds
        for this sink (-1: none). The runtime never writes a table an epoch at
        or below its mark, and stops when a mark is ahead of the checkpoint
        (``checkpoint.resume``). Sinks that commit exactly once must answer
        from the target itself (Delta: the txn id's version; files: published
        markers); side-effect sinks answer nothing (the default)."""
        return {}

    def check_input(self, dataset: Dataset) -> None:
        """Raise SchemaError when the sink cannot accept ``dataset``."""

    def maintained(self) -> "list[tuple[str, Any]]":
        """Delta tables this sink writes that the engine maintains between
        epochs (compaction, VACUUM: ``checkpoint/maintenance.py``), as
        (location, ``maintenance.Policy``) pairs; asked after :meth:`open`.
        Default: none."""
        return []

    def applies_truncates(self) -> bool:
        """True when :meth:`write` applies TRUNCATE control rows (schema.TRUNCATE)
        of tables marked ``truncates``; the planner refuses them elsewhere."""
        return False

    def applies_by_key(self) -> bool:
        """True when :meth:`write` applies changes by key with PARTIAL kinds (schema.PARTIAL: columns kept from
        the target's row) of tables marked ``by_key``; the planner refuses them elsewhere."""
        return False

    def targets(self, dataset: Dataset) -> list[str]:
        """Where each table goes, for the physical plan (paths, table names)."""
        return []

    def target_for(self, table: TableSchema) -> str:
        """Where ``table`` goes (a path or table name; the ledger's target)."""
        return table.table_id

    def describe(self) -> str:
        return self.name

    # -- run time ------------------------------------------------------------
    def write(self, ctx: "EpochContext", frames: dict[str, "DataFrame"], dataset: Dataset) -> list["CommitRecord"]:
        """Commit one epoch: one flat DataFrame per table (metadata columns first).

        Must be idempotent for a given ``ctx.batch_id``: a replayed epoch after
        a crash must not write twice (Delta: txnAppId/txnVersion; files:
        staging + atomic publish).
        """
        raise _not_runnable(self)

    def finish(self, ctx: "EpochContext", dataset: Dataset) -> None:
        """The pipeline's query finished without error (a BATCH job ran out of
        input): checks over the whole run (e.g. Assert's MIN_ROW) go here.
        Raising an EngineError fails the job."""


def _not_runnable(plugin: Plugin) -> EngineError:
    return EngineError(
        "RUNTIME.NOT_AVAILABLE", {"detail": f"{plugin.kind} plugin {plugin.name} has no run-time implementation yet"}
    )


def missing_column(table: TableSchema, column: str) -> SchemaError:
    return SchemaError(
        "SCHEMA.MISSING_COLUMN",
        {"column": column, "table": table.table_id, "available": ", ".join(table.names) or "(none)"},
    )
