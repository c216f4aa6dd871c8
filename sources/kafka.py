"""Kafka source: records of Kafka topics as (multi-table) rows, with SeaTunnel's options.

Reading is Spark's own Kafka connector (``spark-sql-kafka-0-10``, pinned in
pyproject.toml): the offsets of every micro-batch live in the pipeline's
checkpoint, so a replayed epoch reads exactly the same records. ``start_mode``
only decides where a NEW checkpoint starts; a restarted query resumes where
its checkpoint stands.

Options (SeaTunnel's names and meanings):

- ``topic`` (one, or a comma-separated list; with ``pattern = true`` a Java
  regular expression the whole topic name matches, as Kafka's consumer does;
  Spark alone would take any topic containing a match), ``bootstrap.servers``,
  ``kafka.config`` (consumer settings, passed through as Spark's
  ``kafka.<name>``; ``auto.offset.reset`` serves ``group_offsets`` below and
  ``commit_on_checkpoint`` decides instead of ``enable.auto.commit``, so neither
  reaches Spark, which refuses them; deserializers and interceptors are
  refused: the engine decodes records by ``format``);
- ``start_mode``: ``earliest``, ``latest``, ``group_offsets`` (the offsets
  ``consumer.group`` committed; partitions without one start at
  ``kafka.config.auto.offset.reset``, default ``latest``), ``specific_offsets``
  (``start_mode.offsets = { "topic-0" = 70, ... }``: every partition of the
  topics), ``timestamp`` (``start_mode.timestamp``, epoch milliseconds);
- ``format``: ``json`` (each value one JSON object, columns by name),
  ``text`` (values split by ``field_delimiter``, columns by position),
  ``debezium_json`` (Debezium change events, see below); Spark has no reader
  for canal_json, maxwell_json, ogg_json, avro, protobuf and native here: those
  are refused at plan time;
- ``format_error_handle_way``: ``dead_letter`` (default, ours: the record, its
  error, its table if known and its topic, partition and offset go to the
  job's dead-letter Delta table in the same epoch), ``fail`` (SeaTunnel's
  default: the query stops with an error naming the topic, partition and
  offset of the record) or ``skip``;
- ``schema`` (one table) or ``tables_configs = [{ topic, schema { table = ... } }, ...]``
  (several tables: json/text records are routed by topic; debezium_json
  records by the table named in the event);
- ``max_offsets_per_trigger`` (ours: at most this many records per
  micro-batch, Spark's ``maxOffsetsPerTrigger``); ``poll.timeout``
  (Spark's ``kafkaConsumer.pollTimeoutMs``);
- ``commit_on_checkpoint`` (default true): after each committed epoch its end
  offsets are committed to ``consumer.group`` (Admin client), so lag tools see
  the job and a NEW checkpoint with ``group_offsets`` starts where it stopped;
  the query itself always resumes from its checkpoint.

Debezium (``format = debezium_json``, ``debezium_record_include_schema``
default true: events wrapped in ``{"schema", "payload"}``): ``c`` and ``r``
(snapshot reads) become ``+I``, ``u`` becomes ``-U`` (when the event has a
before image) and ``+U``, ``d`` becomes ``-D`` (the before image: under
PostgreSQL's default replica identity only its key columns are set);
tombstones (null values after a delete) are skipped. The table of an event is
its ``source`` block (``db``, ``schema``, ``table``) matched against the
declared table ids (``table``, ``schema.table`` or ``db.schema.table``); a
source with one table whose ``schema`` names none takes every event as that
table's (SeaTunnel's single-table reading);
``debezium_record_table_filter`` keeps one table's events only. ``__seq`` is
the event's ``source.lsn`` (PostgreSQL's WAL position: a global order of every
change) when the event has one, else the record's Kafka offset (an order
within one partition). Values arrive as Debezium writes them by default:
dates as days since 1970-01-01, timestamps as microseconds (or ISO text),
decimals as text or numbers (Debezium's ``decimal.handling.mode = string`` or
``double``; the binary default cannot be read as a decimal and is a format
error). A TRUNCATE event (``op = t``; PostgreSQL's connector emits them with
``skipped.operations = none``) follows ``truncate_events`` (ours):
``reject`` (default: a decoding error naming the table, so a dead letter, or
the query stops with ``format_error_handle_way = fail``; never lost
silently), ``apply`` (a TRUNCATE control row at the event's ``__seq``: the
sink clears the table of every older row; the planner accepts it only where
the rows reach a sink that applies truncates without a transform between) or
``ignore`` (dropped: the target keeps the rows the source deleted).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import SchemaBlock, flatten_dotted, table_id
from streaming_engine.plugins.base import Source, SourceOptions, refused
from streaming_engine.config.keys import dotted_map
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset

Format = Literal["json", "text", "debezium_json"]
PROTOBUF = (
    "format protobuf needs a compiled descriptor (Spark's from_protobuf), not a .proto text, and no protobuf "
    "compiler ships with the engine; use format json or debezium_json"
)
_UNSUPPORTED_FORMATS = {
    "canal_json": "no Canal JSON decoder is built in yet",
    "maxwell_json": "no Maxwell JSON decoder is built in yet",
    "ogg_json": "no Oracle GoldenGate JSON decoder is built in yet",
    "compatible_debezium_json": "use format = debezium_json",
    "avro": "Avro needs a schema registry client this engine does not ship",
    "protobuf": "Protobuf decoding is not built in",
    "native": "native (SeaTunnel's own serialized rows) has no meaning outside SeaTunnel",
}


def _format(v: Any) -> Any:
    if isinstance(v, str):
        low = v.strip().lower()
        if low in _UNSUPPORTED_FORMATS:
            raise ValueError(f"format {low!r} is not supported: {_UNSUPPORTED_FORMATS[low]}; use json, text or debezium_json")
        return low
    return v


# consumer settings Spark's Kafka reader refuses: what the engine does instead
CONSUMER_REFUSED = {
    "key.deserializer": "records are read as bytes and decoded by `format`",
    "value.deserializer": "records are read as bytes and decoded by `format`",
    "interceptor.classes": "Spark's Kafka reader does not run consumer interceptors",
}
# consumer settings the engine reads itself and does not hand to Spark
CONSUMER_ENGINE = ("auto.offset.reset", "enable.auto.commit")


class KafkaTableConfig(BaseModel):
    """One item of ``tables_configs``: a table, and the topic(s) holding its records."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    topic: str | None = Field(None, description="Topic(s) of this table's records (json/text: required).")
    pattern: bool = Field(False, description="topic is a Java regular expression.")
    format: Format | None = Field(None, description="Format of this table's records; default: the source's format.")
    field_delimiter: str | None = Field(None, description="text format: the field separator; default: the source's.")
    schema_: SchemaBlock = Field(alias="schema", description='The table: schema { table = "db.table", fields { ... } }.')

    _fmt = field_validator("format", mode="before")(lambda cls, v: _format(v))

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        known = {k for n, f in cls.model_fields.items() for k in (n, f.alias) if k}
        return flatten_dotted(data, known) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _needs_table(self) -> "KafkaTableConfig":
        if not self.schema_.table:
            raise ValueError('each tables_configs item needs schema { table = "db.table", fields { ... } }')
        return self


class TableFilter(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    database_name: str | None = Field(None, description="The event's source.db (null if the database has none).")
    schema_name: str | None = Field(None, description="The event's source.schema (null if the database has none).")
    table_name: str = Field(description="The event's source.table.")


class KafkaSourceOptions(SourceOptions):
    topic: str | None = Field(None, min_length=1, description="Topic name(s), comma-separated; a regex with pattern = true.")
    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=1, description="Comma-separated Kafka brokers.")
    pattern: bool = Field(False, description="topic is a Java regular expression of topic names.")
    consumer_group: str = Field(
        "SeaTunnel-Consumer-Group", alias="consumer.group",
        description="Consumer group whose committed offsets start_mode = group_offsets starts from.",
    )  # fmt: skip
    commit_on_checkpoint: bool = Field(
        True,
        description="After each committed epoch, commit its end offsets to consumer.group (for lag tools and "
        "start_mode = group_offsets of a new checkpoint; the query itself resumes from its checkpoint).",
    )
    poll_timeout: int = Field(10000, alias="poll.timeout", ge=1, description="Milliseconds a poll waits for records.")
    kafka_config: dict[str, Any] = Field(
        default_factory=dict, alias="kafka.config", description="Kafka consumer settings, passed through."
    )
    schema_: SchemaBlock | None = Field(None, alias="schema", description="The table of a single-table source.")
    format: Format = Field("json", description="json, text or debezium_json.")
    format_error_handle_way: Literal["dead_letter", "fail", "skip"] = Field(
        "dead_letter",
        description="A record that cannot be decoded: dead_letter (into the job's dead-letter table, with its "
        "error and offset), fail (stop, naming its offset) or skip it.",
    )
    field_delimiter: str = Field(",", min_length=1, description="text format: the field separator.")
    start_mode: Literal["earliest", "group_offsets", "latest", "specific_offsets", "timestamp"] = Field(
        "group_offsets", description="Where a new checkpoint starts reading."
    )
    start_mode_offsets: dict[str, int] | None = Field(
        None, alias="start_mode.offsets", description='specific_offsets: {"topic-partition" = offset, ...}.'
    )
    start_mode_timestamp: int | None = Field(
        None, alias="start_mode.timestamp", ge=0, description="timestamp: epoch milliseconds to start from."
    )
    partition_discovery_interval_millis: int = Field(
        -1, alias="partition-discovery.interval-millis",
        description="Accepted for compatibility: Spark looks for new partitions at every micro-batch.",
    )  # fmt: skip
    debezium_record_include_schema: bool = Field(
        True, description='debezium_json: events are wrapped in {"schema": ..., "payload": ...}.'
    )
    debezium_record_table_filter: TableFilter | None = Field(
        None, description="debezium_json: keep only the events of this table."
    )
    tables_configs: list[KafkaTableConfig] | None = Field(
        None, validation_alias=AliasChoices("tables_configs", "table_list"),
        description="Several tables: [{ topic, schema { table = ..., fields { ... } } }, ...] "
        "(table_list: SeaTunnel's older name).",
    )
    protobuf_message_name: refused(PROTOBUF) = Field(None, description="format protobuf: not supported.")
    protobuf_schema: refused(PROTOBUF) = Field(None, description="format protobuf: not supported.")
    reader_cache_queue_size: refused(
        "SeaTunnel's reader queue has no counterpart in Spark's Kafka source, which reads each partition's "
        "offset range of a micro-batch in a task; bound a batch with max_offsets_per_trigger, tune the consumer "
        "cache with env { spark.kafka.consumer.cache.capacity = ... }"
    ) = Field(None, description="Not supported (see the reason).")
    is_native: refused(
        "native records (key, headers, topic, partition, offset as columns) are not produced; the offsets of a "
        "record that cannot be decoded are kept in the dead-letter table", accepts=(False,),
    ) = Field(None, description="Only false (the default) is supported.")
    truncate_events: Literal["reject", "apply", "ignore"] = Field(
        "reject",
        description="debezium_json TRUNCATE events: reject (a decoding error, per format_error_handle_way), "
        "apply (the sink clears the table of older rows; needs a sink that applies truncates) or ignore.",
    )
    max_offsets_per_trigger: int | None = Field(
        None, ge=1, description="At most this many records per micro-batch (Spark's maxOffsetsPerTrigger)."
    )

    _fmt = field_validator("format", mode="before")(lambda cls, v: _format(v))

    @model_validator(mode="before")
    @classmethod
    def _simple_text(cls, data: Any) -> Any:
        """No schema (and no tables_configs): as SeaTunnel, each record's value is
        the text of ONE column ``content`` (its text reader, delimiter \\u0002)."""
        if not isinstance(data, dict) or "schema" in data or "schema_" in data:
            return data
        if any(k in data for k in ("tables_configs", "table_list")):
            return data
        if str(data.get("format", "json")).strip().lower() not in ("json", "text"):
            return data
        return {**data, "schema": {"fields": {"content": "string"}}, "format": "text", "field_delimiter": "\u0002"}

    @field_validator("kafka_config", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        return dotted_map(v) if isinstance(v, dict) else v

    @field_validator("kafka_config")
    @classmethod
    def _consumer_settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key in CONSUMER_REFUSED:
                raise ValueError(f"kafka.config.{key} is not supported by this engine: {CONSUMER_REFUSED[key]}")
        return v

    @field_validator("start_mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("start_mode_offsets", mode="before")
    @classmethod
    def _offsets(cls, v: Any) -> Any:
        return {k: int(x) for k, x in dotted_map(v).items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _check(self) -> "KafkaSourceOptions":
        if self.tables_configs is not None:
            if self.schema_ is not None:
                raise ValueError("set either schema (one table) or tables_configs (several), not both")
            if not self.tables_configs:
                raise ValueError("tables_configs is empty; add at least one table")
            names = [t.schema_.table for t in self.tables_configs]
            dup = next((n for n in names if names.count(n) > 1), None)
            if dup is not None:
                raise ValueError(f"table {dup!r} is declared twice in tables_configs")
            for t in self.tables_configs:
                fmt = t.format or self.format
                if fmt != "debezium_json" and t.topic is None:
                    raise ValueError(
                        f"tables_configs item {t.schema_.table!r}: format {fmt} routes records by topic; set its topic"
                    )
            if self.topic is None and any(t.topic is None for t in self.tables_configs):
                raise ValueError("set topic (the topics of every table) or a topic in each tables_configs item")
        else:
            if self.topic is None:
                raise ValueError("topic is required: the topic name(s), or a regex with pattern = true")
            if self.schema_ is None:
                raise ValueError("schema is required: add schema { fields { name = type, ... } } (or use tables_configs)")
        if self.pattern and self.topic is not None:
            _check_regex(self.topic)
        for t in self.tables_configs or ():
            if t.pattern and t.topic is not None:
                _check_regex(t.topic)
        if self.start_mode == "specific_offsets" and not self.start_mode_offsets:
            raise ValueError('start_mode = specific_offsets needs start_mode.offsets = { "topic-0" = 42, ... }')
        if self.start_mode == "timestamp" and self.start_mode_timestamp is None:
            raise ValueError("start_mode = timestamp needs start_mode.timestamp (epoch milliseconds)")
        for key in self.start_mode_offsets or {}:
            if not re.fullmatch(r".+-\d+", key):
                raise ValueError(f'start_mode.offsets key {key!r} must be "<topic>-<partition>", e.g. "orders-0"')
        if self.truncate_events != "reject" and self.format != "debezium_json" and not any(
            t.format == "debezium_json" for t in self.tables_configs or ()
        ):
            raise ValueError("truncate_events only applies to format = debezium_json")
        if self.debezium_record_table_filter is not None and self.format != "debezium_json":
            raise ValueError("debezium_record_table_filter only applies to format = debezium_json")
        return self


def _debezium_match(table_id: str) -> str:
    parts = table_id.split(".")
    names = {1: ["table"], 2: ["schema (or db)", "table"], 3: ["db", "schema", "table"]}[len(parts)]
    return ", ".join(f"source.{n} = {p}" for n, p in zip(names, parts))


def _check_regex(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"topic pattern {pattern!r} is not a valid regular expression: {e}") from None


@register
class Kafka(Source):
    name: ClassVar[str] = "Kafka"
    seatunnel_page = "connector-v2/source/Kafka.md"
    Options = KafkaSourceOptions
    description = "Reads Kafka topics (json, text, Debezium change events), offsets in the checkpoint."
    boundedness = "both"
    # the topics and brokers the checkpoint's offsets belong to; consumer
    # settings, credentials and rate limits may change on a restore
    restore_identity = frozenset({"topic", "pattern", "bootstrap.servers"})
    restore_table_option = "tables_configs"

    @classmethod
    def restore_tables(cls, old: dict, new: dict) -> tuple[list[str], list[str]]:
        """A table added with topics of its own starts from their beginning:
        Spark's Kafka source reads partitions its checkpoint does not know
        from the earliest offset (Flink CDC's scan.newly-added-table). The
        other tables' topics may not change, nor may a table go (its topics'
        offsets would stay in the checkpoint)."""
        def topics(v: dict) -> dict[str, tuple[frozenset[str], bool]]:
            out = {}
            for entry in v["options"].get("tables_configs") or []:
                table = (entry.get("schema_") or {}).get("table")
                spec = entry.get("topic") or ""
                out[table] = (frozenset(t.strip() for t in spec.split(",") if t.strip()), bool(entry.get("pattern")))
            return out

        before, after = topics(old), topics(new)
        subscribed = set().union(*(t for t, _ in before.values())) | set((old["options"].get("topic") or "").split(","))
        allowed, refused = [], []
        for table in sorted(set(before) | set(after)):
            if table not in after:
                refused.append(f"table {table!r} is gone from tables_configs: its topics' offsets stay in the "
                               "checkpoint; restore with it, or run the remaining tables under a new job name")
            elif table not in before:
                own, pattern = after[table]
                if pattern or not own or own & subscribed:
                    refused.append(f"table {table!r} is new but reads {'a pattern' if pattern else 'no topic of its own' if not own else sorted(own & subscribed)}"
                                   ", which the checkpoint has read past: it cannot start from its beginning; give it "
                                   "topics of its own, or run it as a job of its own")
                else:
                    allowed.append(f"table {table!r} added: its topics {sorted(own)} are read from their beginning, "
                                   "the other tables continue where they were")
            elif before[table] != after[table]:
                refused.append(f"table {table!r} reads other topics now ({sorted(before[table][0])} -> "
                               f"{sorted(after[table][0])}): the checkpoint's offsets belong to the old ones")
        return allowed, refused

    options: KafkaSourceOptions

    @classmethod
    def seatunnel_notes(cls) -> list[str]:
        """Values of supported options this engine refuses or reads itself."""
        lines = ["Values: `format` json, text and debezium_json are decoded; refused at plan time:", ""]
        lines += [f"- `format = {k}`: {v}" for k, v in _UNSUPPORTED_FORMATS.items()]
        lines += [f"- `kafka.config.{k}`: {v}" for k, v in CONSUMER_REFUSED.items()]
        lines += ["- `kafka.config.auto.offset.reset` is read by the engine (where start_mode = group_offsets starts "
                  "partitions the group has no offset for), not handed to Spark's reader",
                  "- `kafka.config.enable.auto.commit` is not handed to Spark's reader: commit_on_checkpoint decides "
                  "whether the group's offsets are committed (SeaTunnel overrides it the same way)"]
        lines += ["- `topic` with `pattern = true` must match a whole topic name (Kafka's consumer rule)", ""]
        return lines

    def tables(self) -> list[tuple[str, KafkaTableConfig | None]]:
        o = self.options
        if o.tables_configs:
            return [(t.schema_.table, t) for t in o.tables_configs]  # type: ignore[misc]
        return [(table_id(o.schema_, o.plugin_output), None)]

    def output(self) -> Dataset:
        from dataclasses import replace

        o = self.options
        out = []
        for tid, cfg in self.tables():
            block = cfg.schema_ if cfg is not None else o.schema_
            assert block is not None
            fmt = (cfg.format if cfg else None) or o.format
            out.append(replace(block.to_table(tid), truncates=fmt == "debezium_json" and o.truncate_events == "apply"))
        return Dataset(tuple(out))

    def dead_letters(self) -> bool:
        return self.options.format_error_handle_way == "dead_letter"

    def describe(self) -> str:
        o = self.options
        what = f"pattern {o.topic!r}" if o.pattern else f"topic {o.topic}" if o.topic else "topics per table"
        rate = f", <= {o.max_offsets_per_trigger} records/epoch" if o.max_offsets_per_trigger else ""
        errors = {"dead_letter": "undecodable -> dead letters", "fail": "undecodable -> fail", "skip": "undecodable -> skipped"}
        routes = []
        for tid, cfg in self.tables():
            fmt = (cfg.format if cfg else None) or o.format
            if fmt == "debezium_json":
                routes.append(f"{tid} <- Debezium events of {_debezium_match(tid)}")
            elif cfg is not None and cfg.topic is not None:
                routes.append(f"{tid} <- {'pattern ' if cfg.pattern else 'topic '}{cfg.topic} ({fmt})")
            else:
                routes.append(f"{tid} <- every record ({fmt})")
        return (f"Kafka ({what}, {o.format}, start {o.start_mode}{rate}, {errors[o.format_error_handle_way]}; "
                f"routing: {'; '.join(routes)})")

    # -- run time ------------------------------------------------------------
    def read(self, ctx: Any) -> Any:
        from sources import _kafka_runtime

        return _kafka_runtime.read(self, ctx)

    def on_progress(self, spark: Any, sources: list[dict]) -> None:
        if self.options.commit_on_checkpoint:
            from sources import _kafka_runtime

            _kafka_runtime.commit_offsets(self, spark, sources)
