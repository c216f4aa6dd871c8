"""One small exception hierarchy for the whole engine.

Every error carries a stable ``condition`` (for example ``CONFIG.UNKNOWN_PLUGIN``)
and ``params``; the message is rendered from one catalogue, so tests assert on
condition and params, never on wording (pyspark's error-condition design).
Configuration problems are collected and raised together as one ConfigError so a
user sees every problem of a file at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streaming_engine.redact import redact_text

# condition -> message template. Templates name what to change.
MESSAGES: dict[str, str] = {
    "CONFIG.FILE_NOT_FOUND": "config file {path} does not exist",
    "CONFIG.UNSUPPORTED_FORMAT": "config file {path} has extension {ext!r}; use .conf/.hocon, .yaml/.yml or .json",
    "CONFIG.SYNTAX": "cannot parse the file: {detail}",
    "CONFIG.NOT_AN_OBJECT": "{what} must be an object, got {got}",
    "CONFIG.UNKNOWN_SECTION": "unknown top-level section {section!r}; expected env, source, transform, sink",
    "CONFIG.MISSING_PLUGIN_NAME": "plugin block has no plugin_name",
    "CONFIG.UNSET_VARIABLE": "variable ${{{name}}} is not set; pass -i {name}=<value> or export {name}",
    "CONFIG.BAD_VARIABLE": "variable argument {arg!r} must look like key=value",
    "CONFIG.EMPTY_JOB": "the job has no {section} plugin; add at least one block to the {section} {{ }} section",
    "CONFIG.UNKNOWN_PLUGIN": "unknown {kind} plugin {name!r}; available: {available}",
    "CONFIG.UNKNOWN_OPTION": "unknown option {key!r}{hint}",
    "CONFIG.INVALID_OPTION": "{detail}",
    "CONFIG.DANGLING_INPUT": "input {input!r} is not produced by any source or transform{hint}",
    "CONFIG.AMBIGUOUS_INPUT": "no plugin_input given and {count} upstream datasets are available: {candidates}; set plugin_input to one of them",
    "CONFIG.NO_INPUT": "no plugin_input given and there is no upstream dataset to read",
    "CONFIG.DUPLICATE_OUTPUT": "plugin_output {output!r} is already produced by {other}; give each dataset a unique name",
    "CONFIG.CYCLE": "the transforms form a cycle: {cycle}",
    "CONFIG.UNREACHABLE_SINK": "no source reaches this sink (its input {input!r} depends on a cycle or a missing dataset)",
    "CONFIG.UNREAD_SOURCE": "nothing reads the output {output!r} of this source",
    "CONFIG.UNMATCHED_TABLE": "{what} matches no table of the input ({tables}), so it changes nothing{hint}",
    "CONFIG.TOO_MANY_INPUTS": "this plugin reads one dataset, but plugin_input names {count}: {inputs}",
    "SCHEMA.MISSING_COLUMN": "column {column!r} does not exist in table {table!r}; available: {available}",
    "SCHEMA.DUPLICATE_COLUMN": "column {column!r} would appear twice in table {table!r}",
    "SCHEMA.INVALID": "{detail}",
    "SCHEMA.INCOMPATIBLE": "table {table!r} is not compatible with this sink: {detail}",
    "SCHEMA.TRUNCATES": "table {table!r} carries TRUNCATE events (its source applies them), which this {kind} "
    "cannot {verb}; {hint}",
    "SCHEMA.BY_KEY": "table {table!r} is read under REPLICA IDENTITY DEFAULT (replica.identity = DEFAULT): its "
    "deletes carry the key alone and its updates may leave TOASTed columns as the target's row has them, which "
    "only an upsert by key applies, not this {kind}; {hint}, or set REPLICA IDENTITY FULL on the table and "
    "replica.identity = FULL",
    "SCHEMA.UNSAFE_TABLE_ID": "table id {table!r} cannot fill ${{{placeholder}}}: {detail}; "
    "rename the table (TableRename) or do not use ${{{placeholder}}} here",
    "CONFIG.RESTRICTED": "restricted mode forbids {capability}: {reason} "
    "(restricted by {switch}; see README, Security)",
    "PLUGIN.DUPLICATE": "{kind} plugin {name!r} is registered twice ({first} and {second})",
    "PLUGIN.LOAD_FAILED": "cannot load {kind} plugin entry point {entry!r}: {detail}",
    "PLAN.DUPLICATE_VERTEX": "execution plan has two vertices named {name!r}",
    "PLAN.INVALID": "{detail}",
    "RUNTIME.NOT_AVAILABLE": "{detail}",
    "DATA.ALL_DEAD_LETTERS": "{pipeline}: every record of this run ({count}) went to the dead-letter table {path} "
    "(they are kept there); the first error: {error}. Check the source's format and schema against the records, "
    "or set env {{ dead_letter.allow_all = true }} when that is expected",
    "RUNTIME.FAILED": "{detail}",
    "DATA.NOT_REPRESENTABLE": "{detail}",
    # a source read a table whose columns changed while the job ran: the pipeline is planned again and restarted
    "RUNTIME.SCHEMA_CHANGED": "{detail}",
    "SCHEMA.CHANGED": "{detail}",
    "RUNTIME.DRAINED": "{pipeline} stopped for a savepoint before epoch {epoch} (nothing of it written; the next "
    "run starts with it)",
    "CLI.USAGE": "{detail}",
    "CLI.UNSUPPORTED_DEPLOY_MODE": "deploy mode {mode!r} needs spark-submit, which starts the driver on the "
    "cluster: use ./spark-submit.sh -e {mode} (or -e client here: the driver runs where you start the job)",
    "CONFIG.PYTHON_FILE_NOT_FOUND": "python.files names {path}, which does not exist (relative paths are relative "
    "to the job file's folder)",
    "ASSERT.FAILED": "Assert rule failed: {detail}",
    "CHECKPOINT.BEHIND_TARGETS": "the checkpoint {checkpoint} is behind its targets: it has started epochs up to "
    "{epoch}, but {targets}. The checkpoint was lost, reset or moved; running on would write those epochs again "
    "(or lose new rows). Restore the checkpoint to resume exactly once; to run the job from its start into new "
    "tables, point the sinks at new targets or change env.job.name (new transaction ids); or set "
    "env {{ checkpoint.behind_targets = skip }} to treat the epochs each table holds as written (right only when "
    "the source replays the same rows in the same epochs)",
    # limits on hostile or accidental input (config/loader.py)
    "CONFIG.TOO_LARGE": "the config is {size} bytes; the limit is {limit} bytes: split the job into several files",
    "CONFIG.NOT_UTF8": "{path} is not UTF-8: invalid byte at offset {offset} (line {line}); save the file as UTF-8",
    "CONFIG.TOO_DEEP": "{what} nested more than {limit} levels deep; flatten the structure",
    "CONFIG.TOO_MANY_ITEMS": "the config has more than {limit} keys and list items; split the job into several files",
    "CONFIG.TOO_MANY_PLUGINS": "the job has {count} plugin blocks; the limit is {limit}: split it into several jobs",
    "CONFIG.STRING_TOO_LONG": "a string or key of {length} characters exceeds the limit of {limit}; "
    "shorten it or move the content into a file the plugin reads",
    "CONFIG.YAML_ALIAS": "YAML {what} are not supported in job files; write the value out in full",
    "CONFIG.YAML_TAG": "YAML tag {tag} is not supported in job files; remove it (plain strings, numbers, "
    "booleans, lists and mappings only)",
    "CONFIG.BAD_VARIABLE_VALUE": "the value of variable ${{{name}}} {detail}",
    "CONFIG.TOO_MANY_REFERENCES": "more than {limit} ${{?...}} or placeholder references outside quotes "
    "resolve to paths in the file; pass the values with -i or write them out",
    "JOB.ILLEGAL_TRANSITION": "{entity} cannot move from {old} to {new} (allowed: {allowed}); this is a bug in the "
    "engine's control plane: please report it with the job's history (streaming-engine history)",
    "JOB.ALREADY_RUNNING": "job {job!r} is running already: its checkpoint {lease} is held by {holder} "
    "(host {host}, pid {pid}, job id {job_id}) since {since}, renewed {renewed}; stop that run first "
    "(streaming-engine stop, or end its driver): if its driver died, the hold lapses at {expires}",
    "JOB.NOT_RUNNING": "job {job!r} is not running: no live run holds {lease}{last}",
    "JOB.SAVEPOINT_NOT_FOUND": "no savepoint of job id {job_id} at {path}; 'streaming-engine history' lists the "
    "jobs that ended SAVEPOINT_DONE",
    "JOB.RESTORE_REFUSED": "cannot restore job {job!r} from the savepoint of job id {job_id}: {reasons}",
    "JOB.LEASE_LOST": "job {job!r} lost its hold on {lease} to {holder} (job id {job_id}): another run of the job "
    "started while this one was unreachable for longer than job.lease.seconds = {ttl}; this run stops",
    "CONFIG.INCLUDE": "HOCON include is not supported in job files (it reads other files or URLs); "
    "put the content into the job file",
    # the REST API (streaming_engine/api)
    "API.UNAUTHORIZED": "missing or wrong API token (send the header 'Authorization: Bearer <the token>' with the "
    "content of the server's token file, named when 'streaming-engine serve' starts; default "
    "<checkpoint.dir>/_api/token)",
    "API.BODY_TOO_LARGE": "the request body is {size}; the limit is {limit} bytes (serve --max-body)",
    "API.BAD_REQUEST": "{detail}",
    "API.READ_ONLY": "this endpoint serves one attached run read-only: it does not {what}; {instead}",
    "API.BAD_PARAMETER": "{name} {detail}",
    "API.BAD_CONFIG": "{count} problem{s} in the job config: {problems}",
    "API.UNKNOWN_JOB": "no job with id {job_id} on this server or in its history table",
    "API.JOB_NOT_RUNNING": "job {job_id} is not running: it is {state}{detail}",
    "API.JOB_ID_TAKEN": "job id {job_id} is taken: another job of this server or its history has it; "
    "leave jobId out to get a new one",
    "API.JOB_NAME_RUNNING": "a job named {name!r} is running on this server already (job id {job_id}): jobs of one "
    "name share a checkpoint; stop it first or submit under another jobName",
    "API.SESSION_LACKS": "the job needs the {extras} jar set, which the server's Spark session was started without: "
    "name that file system in the server's engine defaults (checkpoint.dir) and restart it, or run the job with "
    "'streaming-engine run'",
    "API.SHUTTING_DOWN": "the server is shutting down: submit the job again once it is back",
    "API.INTERNAL": "the server failed to answer ({detail}); its log has the details",
    "API.TOKEN_FILE": "cannot use the API token file {path}: {detail}",
    "API.TLS": "TLS: {detail}",
    "API.BIND": "cannot serve on {host}:{port}: {detail}",
    "API.NO_SERVER": "no streaming-engine server answers at {server} ({detail})",
    "API.BAD_JOB_NAME": "job name {name!r} cannot be served: a job's name is a folder under the checkpoint root, so "
    "it must start with a letter or digit and hold only letters, digits and _ . + - (at most 128)",
    "API.UNSET_VARIABLE": "variable ${{{name}}} is not set: a job submitted to the server gets no variables (neither "
    "-i nor the server's environment); write the value into the config, or give a default: ${{{name}:value}}",
}


@dataclass(frozen=True)
class Location:
    """Where in a job file a problem is: file, section, plugin block and key."""

    file: str | None = None
    section: str | None = None  # env | source | transform | sink
    index: int | None = None  # 1-based position of the block within its section
    plugin: str | None = None  # plugin name as written
    line: int | None = None
    key: str | None = None

    def with_key(self, key: str | None) -> "Location":
        return Location(self.file, self.section, self.index, self.plugin, self.line, key)

    def __str__(self) -> str:
        head = self.file or "<config>"
        if self.line:
            head += f":{self.line}"
        parts = [head]
        if self.section and self.plugin:
            parts.append(f"{self.section}[{self.index}] {self.plugin}")
        elif self.section:
            parts.append(self.section)
        if self.key:
            parts.append(f"key '{self.key}'")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def render(condition: str, params: dict[str, Any]) -> str:
    """The message of ``condition``, secrets in ``params`` redacted."""
    template = MESSAGES.get(condition, "{detail}")
    try:
        return redact_text(template.format(**params))
    except (KeyError, IndexError):
        return redact_text(f"{condition}: {params}")


@dataclass(frozen=True)
class Problem:
    """One finding about a job: an error or a warning, with where it is."""

    condition: str
    params: dict[str, Any] = field(default_factory=dict)
    location: Location = field(default_factory=Location)
    severity: str = "error"  # error | warning

    @property
    def message(self) -> str:
        return render(self.condition, self.params)

    def __str__(self) -> str:
        return f"{self.severity}: {self.location}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "condition": self.condition,
            "params": {k: redact_text(str(v)) for k, v in self.params.items()},
            "location": self.location.to_dict(),
            "message": self.message,
        }


class EngineError(Exception):
    """Base of every error the engine raises on purpose."""

    transient = False  # the runner may retry transient errors

    def __init__(self, condition: str, params: dict[str, Any] | None = None, location: Location | None = None):
        self.condition = condition
        self.params = dict(params or {})
        self.location = location
        super().__init__(self._text())

    def _text(self) -> str:
        msg = f"[{self.condition}] {render(self.condition, self.params)}"
        return f"{self.location}: {msg}" if self.location else msg

    def __reduce__(self):  # stay picklable across Python workers
        return (self.__class__, (self.condition, self.params, self.location))


class ConfigError(EngineError):
    """All problems found in a job file, raised together."""

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]):
        self.problems = tuple(problems)
        first = self.problems[0] if self.problems else Problem("CONFIG.INVALID_OPTION", {"detail": "invalid config"})
        Exception.__init__(self, self._summary())
        self.condition = first.condition
        self.params = first.params
        self.location = first.location

    def _summary(self) -> str:
        n = len(self.problems)
        lines = [f"{n} problem{'s' if n != 1 else ''} in the job config:"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)

    def __reduce__(self):
        return (self.__class__, (self.problems,))


class PluginError(EngineError):
    """A plugin registry problem (duplicate registration, broken entry point)."""


class SchemaError(EngineError):
    """Raised by a plugin when its options do not fit its input schema.

    ``params`` should name the column/table; the DAG builder adds the block location.
    """


class PlanError(EngineError):
    """The planner found an inconsistency (a bug or an unsupported topology)."""


class RuntimeFailure(EngineError):
    """A pipeline failed while running; wraps the cause with job/pipeline/batch."""


class CommitError(RuntimeFailure):
    """A sink could not commit an epoch."""


class CheckpointError(RuntimeFailure):
    """Checkpoint state is missing, corrupt or incompatible."""
