"""Raw dicts -> validated models: the env block and each plugin's options.

Problems are returned, not raised, so the DAG builder can report every problem
of a file at once. Unknown keys are warnings naming the closest known key
(SeaTunnel ignores them silently); with ``strict`` they are errors.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from streaming_engine.config.keys import did_you_mean, flatten_options
from streaming_engine.config.loader import RawBlock, RawJob
from streaming_engine.errors import ConfigError, Location, Problem
from streaming_engine.plugins.base import Plugin, option_keys, render_loc, validate_options
from streaming_engine.plugins.registry import REGISTRIES

_KIND_NAMES = {"source": "source", "transform": "transform", "sink": "sink"}


class EnvConfig(BaseModel):
    """The ``env { }`` block. Keys are SeaTunnel's; ``spark.*`` keys pass through to Spark."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    job_name: str | None = Field(None, alias="job.name", description="Job name; stable ids derive from it.")
    job_mode: Literal["BATCH", "STREAMING"] = Field("BATCH", alias="job.mode", description="BATCH or STREAMING.")
    parallelism: int = Field(1, ge=1, description="Default parallelism of every plugin.")
    checkpoint_interval: int = Field(
        10_000, ge=1, alias="checkpoint.interval", description="Milliseconds between checkpoints (micro-batches)."
    )
    checkpoint_timeout: int = Field(600_000, ge=1, alias="checkpoint.timeout", description="Checkpoint timeout, ms.")
    checkpoint_dir: str = Field(
        "work/checkpoints",
        validation_alias=AliasChoices("checkpoint.dir", "checkpoint_dir"),
        alias="checkpoint.dir",
        description="Root directory of checkpoints; each pipeline gets <root>/<job>/<pipeline-key>.",
    )
    job_retry_times: int = Field(3, ge=0, alias="job.retry.times", description="Restarts before the job fails.")
    job_retry_interval_seconds: int = Field(
        3, ge=0, alias="job.retry.interval.seconds", description="Seconds between restarts."
    )
    restart_strategy: Literal["fixed-delay", "exponential-delay", "failure-rate", "none"] = Field(
        "fixed-delay", alias="restart.strategy",
        description="How a failed pipeline restarts from its checkpoint: fixed-delay (job.retry.times restarts, "
        "job.retry.interval.seconds apart), exponential-delay (restart.backoff.*), failure-rate "
        "(restart.failure_rate.*), none.",
    )
    restart_backoff_initial_seconds: float = Field(1.0, ge=0, alias="restart.backoff.initial.seconds",
                                                   description="exponential-delay: the first delay.")
    restart_backoff_max_seconds: float = Field(300.0, ge=0, alias="restart.backoff.max.seconds",
                                               description="exponential-delay: the longest delay.")
    restart_backoff_multiplier: float = Field(2.0, ge=1, alias="restart.backoff.multiplier",
                                              description="exponential-delay: the factor between two delays.")
    restart_backoff_jitter: float = Field(0.1, ge=0, le=1, alias="restart.backoff.jitter",
                                          description="exponential-delay: each delay varies by +- this fraction.")
    restart_backoff_reset_seconds: float = Field(
        3600.0, ge=0, alias="restart.backoff.reset.seconds",
        description="exponential-delay: a pipeline this long without a failure starts its backoff over.")
    restart_failure_rate_max_failures: int = Field(
        3, ge=0, alias="restart.failure_rate.max_failures",
        description="failure-rate: restarts go on while at most this many failures fall in the interval.")
    restart_failure_rate_interval_seconds: float = Field(
        300.0, gt=0, alias="restart.failure_rate.interval.seconds", description="failure-rate: the interval.")
    job_lease_seconds: float = Field(
        30.0, ge=1, alias="job.lease.seconds",
        description="A run holds its job's checkpoint with a lease renewed every third of this; a second run is "
        "refused while the lease is live, and a driver that died without releasing it (on another host) blocks "
        "a new run for at most this long.",
    )
    history_path: str | None = Field(
        None, alias="history.path",
        description="Delta table of job states and their changes (default: <checkpoint.dir>/_history).",
    )
    maintenance_compact_min_files: int = Field(
        50, ge=0, alias="maintenance.compact.min_files",
        description="The engine's own tables (the commit ledger, the dead-letter table): compacted between two "
        "epochs once this many files were added since the last compaction (0: never). Delta sinks have "
        "compact_min_files of their own.",
    )
    maintenance_vacuum_interval_seconds: float = Field(
        86400.0, ge=0, alias="maintenance.vacuum.interval.seconds",
        description="The engine's own tables: VACUUM (with the table's retention) between two epochs at most this "
        "often (0: never). Delta sinks have vacuum_interval of their own.",
    )
    ledger_keep_epochs: int = Field(
        1000, ge=0, alias="ledger.keep.epochs",
        description="The commit ledger keeps each pipeline's rows of its newest epochs (between this many and twice "
        "as many); older ones are folded, every this many epochs, into one row per sink and table of "
        "<ledger>_rollup, which `status` adds up (0: keep every row).",
    )
    chaining: bool = Field(True, description="Chain consecutive transforms into one stage.")
    commit_parallelism: int = Field(
        4, ge=1, le=64, alias="commit.parallelism",
        description="Tables of one sink written concurrently per epoch, each by a Spark job of its own "
        "(Delta MERGEs, and appends Delta's writer makes table by table).",
    )
    commit_log_parallelism: int = Field(
        32, ge=1, le=128, alias="commit.log.parallelism",
        description="Delta log operations of one sink run concurrently: reading each table's state when a query "
        "starts, and per epoch the commits of files one Spark job wrote for many tables. They wait on the file "
        "system's round trips (S3: about 20 requests per commit), not on the CPU.",
    )
    checkpoint_behind_targets: Literal["fail", "skip"] = Field(
        "fail", alias="checkpoint.behind_targets",
        description="A target holds epochs the checkpoint never started (checkpoint lost, reset or moved): "
        "fail (default), or skip the epochs each table holds.",
    )
    metrics_enabled: bool = Field(
        False, alias="metrics.enabled", description="Serve Prometheus metrics while the job runs."
    )
    metrics_port: int = Field(
        9250, ge=0, le=65535, alias="metrics.port", description="Port of the Prometheus endpoint (0: any free port)."
    )
    metrics_table_limit: int = Field(
        100, ge=1, alias="metrics.table.limit",
        description="Tables of the job with metric series of their own (in the order they first commit); "
        "the others share one series per sink, table=\"_other\".",
    )
    security_restricted: bool = Field(
        False, alias="security.restricted",
        description="Refuse plugins that run code or read local files (see README, Security).",
    )
    dead_letter_path: str | None = Field(
        None, alias="dead_letter.path",
        description="Delta table of records sources could not decode (default: <checkpoint.dir>/<job>/_dead_letter).",
    )
    dead_letter_allow_all: bool = Field(
        False, alias="dead_letter.allow_all",
        description="A run whose every record went to the dead-letter table ends FINISHED (default: FAILED, naming "
        "the first error: a wrong format or schema looks like that).",
    )
    python_files: tuple[str, ...] = Field(
        (), alias="python.files",
        description="User Python modules the job imports (.py, .zip or folders; relative to the job file's folder), "
        "shipped to the executors: by spark-submit.sh as --py-files, by a local run with SparkContext.addPyFile.",
    )
    spark: dict[str, str] = Field(default_factory=dict, description="spark.* settings passed to Spark as-is.")

    @field_validator("python_files", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("job_mode", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @classmethod
    def known_keys(cls) -> set[str]:
        return option_keys(cls)

    @property
    def streaming(self) -> bool:
        return self.job_mode == "STREAMING"


def _split_known(
    flat: dict[str, Any], known: set[str], loc: Location, strict: bool
) -> tuple[dict[str, Any], list[Problem]]:
    problems = []
    kept = {}
    for key, value in flat.items():
        if key in known:
            kept[key] = value
        else:
            problems.append(unknown_option(key, did_you_mean(key, known), loc, strict))
    return kept, problems


def unknown_option(key: str, hint: str, loc: Location, strict: bool) -> Problem:
    """An option nothing reads, at any depth: a warning (SeaTunnel tolerates
    it), an error under ``--strict``."""
    return Problem("CONFIG.UNKNOWN_OPTION", {"key": key, "hint": hint}, loc.with_key(key), "error" if strict else "warning")


def validation_problems(e: Exception, loc: Location) -> list[Problem]:
    if not isinstance(e, ValidationError):
        return [Problem("CONFIG.INVALID_OPTION", {"detail": str(e)}, loc)]
    out = []
    for err in e.errors():
        key = render_loc(tuple(err["loc"])) or None
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err["type"] == "missing":
            msg = "required option is missing"
        out.append(Problem("CONFIG.INVALID_OPTION", {"detail": msg}, loc.with_key(key)))
    return out


# ---------------------------------------------------------------------------
# env


def parse_env(raw_env: dict[str, Any], file: str | None, strict: bool) -> tuple[EnvConfig, list[Problem]]:
    loc = Location(file, "env")
    defaults = engine_defaults()
    # env keys are all scalars: flatten fully, then let the job override defaults key by key
    flat = {**flatten_options(defaults, set()), **flatten_options(raw_env, set())}
    spark = {k: _spark_str(v) for k, v in flat.items() if k.startswith("spark.")}
    rest = {k: v for k, v in flat.items() if not k.startswith("spark.")}
    known = EnvConfig.known_keys() - {"spark"}
    kept, problems = _split_known(rest, known, loc, strict)
    if file and "job.name" not in kept:
        kept["job.name"] = Path(file).stem
    if file and isinstance(kept.get("python.files"), (list, tuple)):  # relative to the job file's folder
        kept["python.files"] = [str((Path(file).parent / str(f)).resolve()) if "://" not in str(f) else f
                                for f in kept["python.files"]]
    try:
        env = EnvConfig.model_validate({**kept, "spark": spark})
    except ValidationError as e:
        problems += validation_problems(e, loc)
        env = EnvConfig.model_validate({"spark": spark})
    return env, problems


def python_files_of(raw: RawJob) -> list[Path]:
    """The job's ``env.python.files``, each checked to exist (ConfigError naming the missing ones)."""
    env, _ = parse_env(raw.env, raw.file, strict=False)
    missing = [f for f in env.python_files if not Path(f).exists()]
    if missing:
        raise ConfigError([Problem("CONFIG.PYTHON_FILE_NOT_FOUND", {"path": f}, Location(raw.file, "env", key="python.files"))
                           for f in missing])
    return [Path(f) for f in env.python_files]


def _spark_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def engine_defaults() -> dict[str, Any]:
    """``env`` defaults from ``conf/engine.conf`` (or $STREAMING_ENGINE_CONF)."""
    path = os.environ.get("STREAMING_ENGINE_CONF")
    candidate = Path(path) if path else Path(__file__).resolve().parents[2] / "conf" / "engine.conf"
    if not candidate.is_file():
        return {}
    stat = candidate.stat()
    key = (str(candidate.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _DEFAULTS:  # parsed once per process and version of the file
        from streaming_engine.config.loader import load_text

        _DEFAULTS.clear()
        _DEFAULTS[key] = load_text(candidate.read_text(encoding="utf-8"), file=str(candidate)).env
    return copy.deepcopy(_DEFAULTS[key])


_DEFAULTS: dict[tuple[str, int, int], dict[str, Any]] = {}


# ---------------------------------------------------------------------------
# plugin blocks


def resolve_plugin_class(block: RawBlock) -> tuple[type[Plugin] | None, list[Problem]]:
    registry = REGISTRIES[block.section]
    cls = registry.find(block.plugin)
    if cls is None:
        return None, [
            Problem(
                "CONFIG.UNKNOWN_PLUGIN",
                {"kind": _KIND_NAMES[block.section], "name": block.plugin, "available": ", ".join(registry.names())},
                block.location,
            )
        ]
    return cls, []


def validate_block(block: RawBlock, strict: bool = False) -> tuple[Plugin | None, list[Problem]]:
    """Look the plugin up and validate its options; never raises on bad input."""
    cls, problems = resolve_plugin_class(block)
    if cls is None:
        return None, problems
    flat = flatten_options(block.options, cls.Options.known_keys())
    options, unknown, error = validate_options(cls.Options, flat)
    problems += [unknown_option(render_loc(loc), hint, block.location, strict) for loc, hint in unknown]
    if error is not None:
        return None, problems + validation_problems(error, block.location)
    return cls(options), problems  # type: ignore[arg-type]


def wiring_of(block: RawBlock) -> tuple[list[str] | None, str | None]:
    """plugin_input / plugin_output as written (legacy names too), without validation.

    Used so wiring is checked even for blocks whose other options are invalid.
    """
    o = block.options
    inp = o.get("plugin_input", o.get("source_table_name"))
    out = o.get("plugin_output", o.get("result_table_name"))
    if isinstance(inp, str):
        inp = [p.strip() for p in inp.split(",") if p.strip()]
    elif isinstance(inp, list):
        inp = [str(p) for p in inp]
    else:
        inp = None
    return inp or None, (str(out) if out is not None and block.section != "sink" else None)
