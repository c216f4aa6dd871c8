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
- ``format_error_handle_way``: ``fail`` (SeaTunnel's default: the query
  stops with an error naming the topic, partition and offset of the record),
  ``skip``, or ``dead_letter`` (ours: the record, its error, its table if
  known and its topic, partition and offset go to the job's dead-letter Delta
  table in the same epoch; a run whose EVERY record went there ends FAILED
  unless ``env { dead_letter.allow_all = true }``);
- ``schema`` (one table) or ``tables_configs`` (``table_list``, SeaTunnel's
  older name) = ``[{ topic, schema { table = ... }, ... }, ...]``: several
  tables. As SeaTunnel reads an item: every record of the item's topic (or
  pattern) is the item's table, named by its ``schema.table`` or else by the
  topic (an item without a schema: one column ``content``); an item may set
  ``pattern``, ``consumer.group``, ``start_mode`` (and its offsets or
  timestamp), ``format``, ``field_delimiter``, ``format_error_handle_way``,
  ``debezium_record_include_schema`` and ``debezium_record_table_filter`` (it
  keeps that table's events of the topic, so several items may share one
  Debezium topic), else the source's value applies. Items that start
  differently: every partition's start is resolved when a new checkpoint
  begins. Ours: a debezium_json item WITHOUT a topic reads the source's
  ``topic`` and takes the events its ``source`` block names (one topic
  pattern for a whole database);
- ``max_offsets_per_trigger`` (ours: at most this many records per
  micro-batch, Spark's ``maxOffsetsPerTrigger``); ``poll.timeout``
  (Spark's ``kafkaConsumer.pollTimeoutMs``);
- ``commit_on_checkpoint`` (default true): after each committed epoch its end
  offsets are committed to ``consumer.group`` (Admin client), so lag tools see
  the job and a NEW checkpoint with ``group_offsets`` starts where it stopped;
  the query itself always resumes from its checkpoint (an item's topics: to
  the item's ``consumer.group``).

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
error). A column holding Debezium's ``unavailable.value.placeholder`` (ours:
``debezium_unavailable_value_placeholder``, Debezium's default) is a format
error naming the column: PostgreSQL did not log the value (a TOASTed value an
UPDATE left unchanged, under REPLICA IDENTITY DEFAULT), and applied it would
overwrite the stored one; set the table's REPLICA IDENTITY FULL. A TRUNCATE event (``op = t``; PostgreSQL's connector emits them with
``skipped.operations = none``) follows ``truncate_events`` (ours):
``reject`` (default: a decoding error naming the table, so a dead letter, or
the query stops with ``format_error_handle_way = fail``; never lost
silently), ``apply`` (a TRUNCATE control row at the event's ``__seq``: the
sink clears the table of every older row; the planner accepts it only where
the rows reach a sink that applies truncates without a transform between) or
``ignore`` (dropped: the target keeps the rows the source deleted).

Schema changes (Debezium sends no DDL; a table's changed columns show in its
events): ``schema.change.behavior`` (Flink CDC's names; per tables_configs
item too) compares the columns of each insert's and update's new row with
the table's declared ones. ``ignore`` (default here, unlike Postgres-CDC: a
declared schema is often a subset on purpose) reads the declared columns;
``exception`` fails the job naming the columns added and dropped and the
record; ``lenient`` plans the pipeline again with the added columns, typed
from the event's schema (so it needs ``debezium_record_include_schema``;
Kafka Connect's int8..int64, float32/64, boolean, string, bytes, and
Debezium's Date, MicroTimestamp and ZonedTimestamp; another logical type is
an error naming it), and the Delta sinks add them; the epoch in flight is
read again with them, and the checkpoint keeps them for later runs. A
dropped column stays, null from then on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from sources._schema_options import (SchemaBlock, SchemaChangeBehavior, check_schema_change_behavior,
                                     flatten_dotted, table_id)
from streaming_engine.plugins.base import Source, SourceOptions, refused
from streaming_engine.config.keys import dotted_map
from streaming_engine.plugins.registry import register
from streaming_engine.schema import Dataset

# why a Debezium event stream cannot drive evolve: its schema names the columns, nothing says which is which
_NO_EVOLVE = ("a Debezium event's schema lists the columns by name only, so a rename cannot be told from a drop and "
              "an add (whose rows would lose the column's values); use a Postgres-CDC source for evolve")

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


StartMode = Literal["earliest", "group_offsets", "latest", "specific_offsets", "timestamp"]
ErrorWay = Literal["dead_letter", "fail", "skip"]
# what an item of tables_configs may set for its own topic(s), else the source's value applies
PER_TOPIC = ("consumer_group", "start_mode", "start_mode_offsets", "start_mode_timestamp", "debezium_record_include_schema")
START = ("consumer_group", "start_mode", "start_mode_offsets", "start_mode_timestamp")


def _lower(v: Any) -> Any:
    return v.strip().lower() if isinstance(v, str) else v


def _offsets_map(v: Any) -> Any:
    return {k: int(x) for k, x in dotted_map(v).items()} if isinstance(v, dict) else v


def _start_problem(mode: str, offsets: dict[str, int] | None, timestamp: int | None) -> str | None:
    if mode == "specific_offsets" and not offsets:
        return 'start_mode = specific_offsets needs start_mode.offsets = { "topic-0" = 42, ... }'
    if mode == "timestamp" and timestamp is None:
        return "start_mode = timestamp needs start_mode.timestamp (epoch milliseconds)"
    for key in offsets or {}:
        if not re.fullmatch(r".+-\d+", key):
            return f'start_mode.offsets key {key!r} must be "<topic>-<partition>", e.g. "orders-0"'
    return None


class TableFilter(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    database_name: str | None = Field(None, description="The event's source.db (null if the database has none).")
    schema_name: str | None = Field(None, description="The event's source.schema (null if the database has none).")
    table_name: str = Field(description="The event's source.table.")

    def label(self) -> str:
        return ".".join(p for p in (self.database_name, self.schema_name, self.table_name) if p)


class KafkaTableConfig(BaseModel):
    """One item of ``tables_configs`` (``table_list``): a table, and the topic(s)
    holding its records, with the options SeaTunnel reads per item. What an
    item leaves out, the source's option of the same name gives."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    topic: str | None = Field(
        None, description="Topic(s) of this table's records: every record of them is this table's (json/text: "
        "required; debezium_json without it: events go to the table their source block names).",
    )  # fmt: skip
    pattern: bool = Field(False, description="topic is a Java regular expression.")
    consumer_group: str | None = Field(None, alias="consumer.group", description="This item's consumer group.")
    start_mode: StartMode | None = Field(None, description="Where a new checkpoint starts reading this item's topics.")
    start_mode_offsets: dict[str, int] | None = Field(None, alias="start_mode.offsets", description="specific_offsets.")
    start_mode_timestamp: int | None = Field(None, alias="start_mode.timestamp", ge=0, description="timestamp (ms).")
    format: Format | None = Field(None, description="Format of this table's records; default: the source's format.")
    field_delimiter: str | None = Field(None, description="text format: the field separator; default: the source's.")
    format_error_handle_way: ErrorWay | None = Field(None, description="This table's undecodable records.")
    debezium_record_include_schema: bool | None = Field(None, description="debezium_json: events carry a schema.")
    debezium_record_table_filter: TableFilter | None = Field(
        None, description="debezium_json: keep only this table's events of the item's topic."
    )
    schema_change_behavior: SchemaChangeBehavior | None = Field(
        None, alias="schema.change.behavior", description="debezium_json: this table's schema.change.behavior "
        "(the source's if unset).")
    schema_: SchemaBlock | None = Field(
        None, alias="schema", description='The table: schema { table = "db.table", fields { ... } } (no schema: '
        "one column content, the record's text; no table: the topic's name).",
    )  # fmt: skip

    _fmt = field_validator("format", mode="before")(lambda cls, v: _format(v))
    _mode = field_validator("start_mode", "format_error_handle_way", mode="before")(lambda cls, v: _lower(v))
    _offs = field_validator("start_mode_offsets", mode="before")(lambda cls, v: _offsets_map(v))

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = {k for n, f in cls.model_fields.items() for k in (n, f.alias) if k}
        data = flatten_dotted(data, known)
        if "schema" not in data and "schema_" not in data and data.get("topic") is not None:
            # as SeaTunnel: an item without a schema reads each record's text as one column `content`
            data = {**data, "schema": {"fields": {"content": "string"}}, "format": "text", "field_delimiter": "\u0002"}
        return data

    @model_validator(mode="after")
    def _needs_table(self) -> "KafkaTableConfig":
        if self.schema_ is None:
            raise ValueError('each tables_configs item needs a topic, or schema { table = "db.table", fields { ... } }')
        if not self.schema_.table and (self.topic is None or self.pattern or "," in self.topic):
            raise ValueError('name the table of this tables_configs item: schema { table = "db.table", ... } (only an '
                             "item of one topic, not a pattern, is named by its topic)")
        if not self.schema_.table:
            from sources._schema_options import check_table_path

            check_table_path(self.topic.strip())  # type: ignore[union-attr]
        problem = _start_problem(self.start_mode or "", self.start_mode_offsets, self.start_mode_timestamp)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def table(self) -> str:
        """The table id: ``schema.table``, else the topic's name (SeaTunnel's ``TablePath.of(topic)``)."""
        assert self.schema_ is not None
        return self.schema_.table or (self.topic or "").strip()


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
    format_error_handle_way: ErrorWay = Field(
        "fail",
        description="A record that cannot be decoded: fail (SeaTunnel's default: stop, naming its offset), skip "
        "it, or dead_letter (ours: into the job's dead-letter table, with its error and offset).",
    )
    field_delimiter: str = Field(",", min_length=1, description="text format: the field separator.")
    start_mode: StartMode = Field(
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
    debezium_unavailable_value_placeholder: str = Field(
        "__debezium_unavailable_value", min_length=1,
        description="debezium_json: Debezium's unavailable.value.placeholder (hex:... for octets), the value it "
        "sends for a column the database did not log (an unchanged TOASTed value under PostgreSQL's REPLICA "
        "IDENTITY DEFAULT). An event carrying it is a decoding error naming the column (per "
        "format_error_handle_way), never written as the column's value.",
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
    schema_change_behavior: SchemaChangeBehavior = Field(
        "ignore", alias="schema.change.behavior",
        description="debezium_json: an event whose table has other columns than the declared ones (Flink CDC's "
        "names): ignore (default: the declared columns only, as a declared subset means), exception (the job fails "
        "naming the columns added or dropped and the record), lenient (columns beyond the declared ones reach the "
        "sinks with the types of the event's schema, the pipeline planned again; needs "
        "debezium_record_include_schema). evolve/try_evolve: refused (" + _NO_EVOLVE + ").")

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

    _mode = field_validator("start_mode", "format_error_handle_way", mode="before")(lambda cls, v: _lower(v))
    _offs = field_validator("start_mode_offsets", mode="before")(lambda cls, v: _offsets_map(v))

    def of(self, item: "KafkaTableConfig | None", name: str) -> Any:
        """The option ``name`` for a tables_configs item: its own value, else the source's."""
        own = getattr(item, name, None) if item is not None else None
        return own if own is not None else getattr(self, name)

    @model_validator(mode="after")
    def _check(self) -> "KafkaSourceOptions":
        if self.tables_configs is not None:
            if self.schema_ is not None:
                raise ValueError("set either schema (one table) or tables_configs (several), not both")
            if not self.tables_configs:
                raise ValueError("tables_configs is empty; add at least one table")
            names = [t.table for t in self.tables_configs]
            dup = next((n for n in names if names.count(n) > 1), None)
            if dup is not None:
                raise ValueError(f"table {dup!r} is declared twice in tables_configs")
            for t in self.tables_configs:
                fmt = self.of(t, "format")
                if fmt != "debezium_json" and t.topic is None:
                    raise ValueError(f"tables_configs item {t.table!r}: format {fmt} routes records by topic; set its topic")
                if fmt != "debezium_json" and t.debezium_record_table_filter is not None:
                    raise ValueError(f"tables_configs item {t.table!r}: debezium_record_table_filter only applies to "
                                     "format = debezium_json")
                own = [n for n in PER_TOPIC if getattr(t, n) is not None]
                if t.topic is None and own:
                    names_ = ", ".join(KafkaTableConfig.model_fields[n].alias or n for n in own)
                    raise ValueError(f"tables_configs item {t.table!r} has no topic of its own, so it reads the source's "
                                     f"topics: set {names_} on the source, or give the item its topic")
            if self.topic is None and any(t.topic is None for t in self.tables_configs):
                raise ValueError("set topic (the topics of every table) or a topic in each tables_configs item")
            self._shared_topics()
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
        problem = _start_problem(self.start_mode, self.start_mode_offsets, self.start_mode_timestamp)
        if problem:
            raise ValueError(problem)
        if self.truncate_events != "reject" and self.format != "debezium_json" and not any(
            self.of(t, "format") == "debezium_json" for t in self.tables_configs or ()
        ):
            raise ValueError("truncate_events only applies to format = debezium_json")
        if self.debezium_record_table_filter is not None and self.format != "debezium_json" and not any(
            self.of(t, "format") == "debezium_json" for t in self.tables_configs or ()
        ):
            raise ValueError("debezium_record_table_filter only applies to format = debezium_json")
        self._schema_changes()
        return self

    def _schema_changes(self) -> None:
        """schema.change.behavior: Debezium events only; lenient takes the new columns' types from the events'
        schema, so it needs them to carry one."""
        items: list[KafkaTableConfig | None] = list(self.tables_configs or [None])
        for item in items:
            behavior = self.of(item, "schema_change_behavior")
            where = f"tables_configs item {item.table!r}: " if item is not None else ""
            check_schema_change_behavior(behavior, f"{where}schema.change.behavior", _NO_EVOLVE)
            if behavior == "ignore":
                continue
            if self.of(item, "format") != "debezium_json":
                if item is not None and item.schema_change_behavior is None:
                    continue  # the source's setting is for its Debezium tables
                raise ValueError(f"{where}schema.change.behavior = {behavior} applies to format = debezium_json only "
                                 "(json and text records carry no schema to compare)")
            if behavior == "lenient" and not self.of(item, "debezium_record_include_schema"):
                raise ValueError(f"{where}schema.change.behavior = lenient takes a new column's type from the event's "
                                 "schema: set debezium_record_include_schema = true (Debezium's JSON converter with "
                                 "schemas.enable), or use exception")

    def _shared_topics(self) -> None:
        """Items naming the same topic: SeaTunnel keys its items by topic, so one
        topic's records are one item's, unless debezium_record_table_filter
        tells each item's events apart; the items must then start alike."""
        by_topic: dict[str, list[KafkaTableConfig]] = {}
        for t in self.tables_configs or ():
            if t.topic is not None and not t.pattern:
                for name in {x.strip() for x in t.topic.split(",") if x.strip()}:
                    by_topic.setdefault(name, []).append(t)
        for topic, items in by_topic.items():
            if len(items) < 2:
                continue
            tables = ", ".join(repr(t.table) for t in items)
            filters = [self.of(t, "debezium_record_table_filter") for t in items]
            if any(f is None for f in filters) or len(set(filters)) < len(filters):
                raise ValueError(f"tables_configs items {tables} all read topic {topic!r}: give each its own "
                                 "debezium_record_table_filter to tell their events apart, or leave topic out of them "
                                 "(events then go to the table their source block names)")
            starts = {tuple(str(self.of(t, n)) for n in START) for t in items}
            if len(starts) > 1:
                raise ValueError(f"tables_configs items {tables} read topic {topic!r} but start differently "
                                 "(consumer.group, start_mode): one topic starts at one place; make them equal")


@dataclass(frozen=True)
class Route:
    """One table of the source: where its records come from and how they are
    decoded. ``topics``/``pattern`` set: every record of those topics is this
    table's (SeaTunnel's tables_configs item), narrowed by ``table_filter``
    for Debezium events; neither: Debezium events of the source's topics go
    here by their source block (or all of them, for a single unnamed table)."""

    table: str
    topics: tuple[str, ...]
    pattern: str | None
    format: str
    way: str
    include_schema: bool
    delimiter: str
    table_filter: TableFilter | None
    consumer_group: str
    start_mode: str
    start_offsets: dict[str, int] | None
    start_timestamp: int | None
    schema_changes: str = "ignore"  # debezium_json: schema.change.behavior

    @property
    def by_topic(self) -> bool:
        return bool(self.topics) or self.pattern is not None

    def start(self) -> tuple:
        """Where a new checkpoint starts this route's topics (equal tuples: equal starts)."""
        offsets = tuple(sorted((self.start_offsets or {}).items()))
        group = self.consumer_group if self.start_mode == "group_offsets" else None
        return self.start_mode, offsets, self.start_timestamp, group


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
                table = (entry.get("schema_") or {}).get("table") or (entry.get("topic") or "").strip()
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
            return [(t.table, t) for t in o.tables_configs]
        return [(table_id(o.schema_, o.plugin_output), None)]

    def routes(self) -> list["Route"]:
        """How each table's records are found and decoded (see :class:`Route`)."""
        o = self.options
        out = []
        for tid, cfg in self.tables():
            topics: tuple[str, ...] = ()
            pattern = None
            if cfg is not None and cfg.topic is not None:
                if cfg.pattern:
                    pattern = cfg.topic
                else:
                    topics = tuple(dict.fromkeys(x.strip() for x in cfg.topic.split(",") if x.strip()))
            fmt = o.of(cfg, "format")
            out.append(Route(
                table=tid, topics=topics, pattern=pattern, format=fmt, way=o.of(cfg, "format_error_handle_way"),
                include_schema=o.of(cfg, "debezium_record_include_schema"),
                delimiter=o.of(cfg, "field_delimiter"), table_filter=o.of(cfg, "debezium_record_table_filter"),
                consumer_group=o.of(cfg, "consumer_group"), start_mode=o.of(cfg, "start_mode"),
                start_offsets=o.of(cfg, "start_mode_offsets"), start_timestamp=o.of(cfg, "start_mode_timestamp"),
                schema_changes=o.of(cfg, "schema_change_behavior") if fmt == "debezium_json" else "ignore",
            ))
        return out

    def output(self) -> Dataset:
        from dataclasses import replace

        o = self.options
        out = []
        for tid, cfg in self.tables():
            block = cfg.schema_ if cfg is not None else o.schema_
            assert block is not None
            fmt = o.of(cfg, "format")
            out.append(replace(block.to_table(tid), truncates=fmt == "debezium_json" and o.truncate_events == "apply"))
        return Dataset(tuple(out))

    def output_after(self, planned: Dataset) -> Dataset:
        """Planned again for a schema change (or a restart of a job that went through one): a table under
        lenient keeps the columns it was planned with beyond the declared ones (those its events brought:
        the runner adds them to ``planned``), after the declared ones; the others read the declared columns."""
        from dataclasses import replace

        now = self.output()
        lenient = {r.table for r in self.routes() if r.schema_changes == "lenient"}
        before = {t.table_id: t for t in planned.tables}
        tables = []
        for t in now.tables:
            old = before.get(t.table_id)
            names = set(t.names)
            extra = tuple(c for c in old.columns if c.name not in names) if old is not None and t.table_id in lenient else ()
            tables.append(replace(t, columns=t.columns + extra) if extra else t)
        return Dataset(tuple(tables))

    def unclaimed_records(self) -> bool:
        """Records may come from topics no tables_configs item names (the source's own ``topic``)."""
        return self.options.topic is not None or not all(r.by_topic for r in self.routes())

    def error_ways(self) -> set[str]:
        """The format_error_handle_way of every record this source may read."""
        ways = {r.way for r in self.routes()}
        return ways | {self.options.format_error_handle_way} if self.unclaimed_records() else ways

    def dead_letters(self) -> bool:
        return "dead_letter" in self.error_ways()

    def describe(self) -> str:
        o = self.options
        what = f"pattern {o.topic!r}" if o.pattern else f"topic {o.topic}" if o.topic else "topics per table"
        rate = f", <= {o.max_offsets_per_trigger} records/epoch" if o.max_offsets_per_trigger else ""
        errors = {"dead_letter": "undecodable -> dead letters", "fail": "undecodable -> fail", "skip": "undecodable -> skipped"}
        routes = []
        for r in self.routes():
            own = [f"start {r.start_mode}"] if r.by_topic and r.start_mode != o.start_mode else []
            own += [errors[r.way]] if r.way != o.format_error_handle_way else []
            own += [f"schema changes: {r.schema_changes}"] if r.schema_changes != "ignore" else []
            extra = f" [{', '.join(own)}]" if own else ""
            where = f"{'pattern ' if r.pattern else 'topic '}{r.pattern or ','.join(r.topics)}" if r.by_topic else ""
            if r.format == "debezium_json":
                match = f"{where} (events of {r.table_filter.label()})" if r.by_topic and r.table_filter else where
                routes.append(f"{r.table} <- Debezium events of {match or _debezium_match(r.table)}{extra}")
            elif r.by_topic:
                routes.append(f"{r.table} <- {where} ({r.format}){extra}")
            else:
                routes.append(f"{r.table} <- every record ({r.format}){extra}")
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
