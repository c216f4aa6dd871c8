"""Kafka sink: each table's rows as records of a Kafka topic, SeaTunnel's options.

Options (SeaTunnel's names and meanings):

- ``topic``: the topic; may use the placeholders of :mod:`sinks._placeholders`
  (``${table_name}``, ``${database_name}``, ...), rendered per table, so one
  sink writes a topic per table; tables may also share one topic (Debezium
  events name their table). SeaTunnel's ``${<column>}`` (a topic per row
  value) is not supported: an unknown placeholder is a config error.
- ``bootstrap.servers``; ``kafka.config``: producer settings, passed through
  (HOCON's ``a.b = x`` nesting is flattened back to ``a.b``). The sink owns
  ``key.serializer``, ``value.serializer`` and ``transactional.id``.
- ``semantics``: ``EXACTLY_ONCE``, ``AT_LEAST_ONCE`` (the default here) or
  ``NON`` (SeaTunnel's documented default: not taken, see ``seatunnel_defaults``
  below), see below.
- ``partition_key_fields``: the record key is the JSON object of these
  columns (``{"id":7}``, SeaTunnel's key format); default: the table's
  primary key when it has one, else no key (null keys).
- ``partition``: every record goes to this partition (else the producer's
  partitioner: by key hash, or spread when there is no key).
- ``format``: ``json`` (default), ``text`` or ``debezium_json``;
  ``canal_json``, ``ogg_json``, ``maxwell_json``, ``avro``, ``protobuf`` and
  ``native`` are refused at plan time with the reason. ``field_delimiter``
  (text: ``","``). ``transaction_prefix``: see below. ``assign_partitions``
  is refused (not supported). Unknown options are reported like any
  plugin's (a warning, an error in strict mode).

Formats:

- ``json``: each row is one JSON object of the table's columns (Spark's
  ``to_json``, null columns written as ``null``). As in SeaTunnel, whose json
  serializer ignores the row kind (its Kafka sink does not claim the "cdc"
  feature), the row kind is not written and EVERY row becomes a record:
  an UPDATE_BEFORE or DELETE row is written like an insert. Use
  ``debezium_json`` to carry changes. The same holds for ``text``.
- ``text``: the columns' text joined by ``field_delimiter``, a null as an
  empty field (arrays, maps and rows are refused at plan time).
- ``debezium_json``: each change becomes a Debezium event (without the
  ``schema`` wrapper) ``{"before", "after", "op", "source": {"db", "schema",
  "table"}, "ts_ms"}``: +I is ``c``; a -U directly followed by the +U of the
  same table and key is ONE ``u`` with both images; a +U alone a ``u`` with
  ``before = null``; -D, and a -U alone, a ``d`` with the before image (as
  SeaTunnel writes -U). The table id ``a.b`` fills ``db = a``; ``a.b.c``
  fills ``db = a, schema = b``. Dates are written as days since 1970-01-01
  and timestamps as microseconds since the epoch, as Debezium does, so the
  engine's own Kafka source (``format = debezium_json``,
  ``debezium_record_include_schema = false``) reads back the same rows.
  Records are sent in the order of the epoch's rows, a table after another.

Semantics:

- ``EXACTLY_ONCE``: every epoch's records of the sink, all tables, are
  written in ONE Kafka transaction by a transactional producer whose
  ``transactional.id`` is ``<transaction_prefix>-<job>.<pipeline>.<sink uid>``
  (default prefix ``streaming-engine``; the second part is the sink's stable
  id, also used for Delta transaction ids): stable across restarts, so a
  restarted driver fences the producer of a crashed or zombie one. The epoch
  is recorded INSIDE the same transaction: ``sendOffsetsToTransaction`` makes
  it the committed offset of the consumer group named like the transactional
  id on partition 0 of ``epoch_topic`` (ours, default
  ``_streaming_engine_sink_epochs``: a one-partition topic the sink creates
  when missing and never writes records to; the broker only accepts offsets
  of a partition that exists). Records and mark become visible together, or
  not at all. :meth:`Kafka.open` fences older producers (their open
  transaction is aborted, or completed if it was committing) and then reads
  the mark (``requireStable``): the runtime skips epochs at or below it (a
  replay after a crash) and stops when it is ahead of the checkpoint. Every
  epoch again fences, re-reads the mark and skips an epoch already held
  before it begins its transaction, so two drivers of one job never write
  an epoch twice: the older one's commit fails (fenced; the error is final,
  not retried). Consumers must read with ``isolation.level =
  read_committed``. Limits: exactly-once writes go through ONE producer on
  the driver (each epoch's records are read with ``toLocalIterator``), so
  they are limited by one producer's throughput; an epoch must finish within
  the producer's ``transaction.timeout.ms`` (Kafka's default 60 s; raise it in
  ``kafka.config`` for big epochs, up to the broker's
  ``transaction.max.timeout.ms``); the mark lives as long as the broker keeps
  the group's offsets (``offsets.retention.minutes``, 7 days after the last
  commit): a pipeline stopped longer than that after a crash may write the
  epoch it was in again.
- ``AT_LEAST_ONCE``: an idempotent producer (``acks = all`` unless
  ``kafka.config`` says otherwise); the epoch returns only after every record
  is acknowledged (flush); a failed send fails the epoch, which is retried:
  records of a replayed epoch may be written twice.
- ``NON``: the same producer settings as given, failed sends are counted and
  logged, never fail the epoch: records may be lost or duplicated.

The same single producer sends the records with every semantics (a
``toLocalIterator`` pass over the epoch, then one flush): one producer per
sink per epoch, created and closed within the epoch (with EXACTLY_ONCE each
epoch also pays ``initTransactions``, an offset fetch and the commit: about
0.3 s against a local broker).

Fault points (``streaming_engine.runtime.faults``): ``kafka_records_sent``
(every record sent and flushed, the transaction not committed) and
``sink_table_committed`` (the epoch committed).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sinks._placeholders import check_template, render
from sources.kafka import PROTOBUF
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.base import Sink, SinkOptions, missing_column, refused
from streaming_engine.config.keys import dotted_map
from streaming_engine.plugins.registry import register
from streaming_engine.schema import KIND, Dataset, TableSchema

Format = Literal["json", "text", "debezium_json"]
Semantics = Literal["EXACTLY_ONCE", "AT_LEAST_ONCE", "NON"]
DEFAULT_PREFIX = "streaming-engine"
DEFAULT_EPOCH_TOPIC = "_streaming_engine_sink_epochs"
_UNSUPPORTED_FORMATS = {
    "canal_json": "no Canal JSON encoder is built in yet",
    "maxwell_json": "no Maxwell JSON encoder is built in yet",
    "ogg_json": "no Oracle GoldenGate JSON encoder is built in yet",
    "compatible_debezium_json": "it re-sends records read by SeaTunnel's CDC sources, which this engine does not have; "
    "use format = debezium_json",
    "avro": "Avro needs a schema registry client this engine does not ship",
    "protobuf": "Protobuf encoding is not built in",
    "native": "native (SeaTunnel's own Kafka record rows) has no meaning outside SeaTunnel",
}
# producer settings the sink sets itself
_OWNED = {
    "key.serializer": "records are sent as bytes (UTF-8 text)",
    "value.serializer": "records are sent as bytes (UTF-8 text)",
    "transactional.id": "set transaction_prefix instead (with semantics = EXACTLY_ONCE)",
}
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _format(v: Any) -> Any:
    if isinstance(v, str):
        low = v.strip().lower()
        if low in _UNSUPPORTED_FORMATS:
            raise ValueError(f"format {low!r} is not supported: {_UNSUPPORTED_FORMATS[low]}; use json, text or debezium_json")
        return low
    return v


def _list(v: Any) -> Any:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    return v


class KafkaSinkOptions(SinkOptions):
    topic: str = Field(min_length=1, description="Topic to write; placeholders like ${table_name} give a topic per table.")
    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=1, description="Comma-separated Kafka brokers.")
    kafka_config: dict[str, Any] = Field(
        default_factory=dict, alias="kafka.config", description="Kafka producer settings, passed through."
    )
    semantics: Semantics = Field(
        "AT_LEAST_ONCE",
        description="EXACTLY_ONCE (one Kafka transaction per epoch), AT_LEAST_ONCE (flush per epoch) or NON.",
    )
    partition_key_fields: list[str] | None = Field(
        None, description="Columns whose JSON object is the record key; default: the table's primary key, else no key."
    )
    partition: int | None = Field(None, ge=0, description="Send every record to this partition.")
    assign_partitions: list[str] | None = Field(
        None, description="SeaTunnel's content-based partitions (not supported: setting it is refused)."
    )
    transaction_prefix: str | None = Field(
        None, min_length=1,
        description="EXACTLY_ONCE: prefix of the transactional id (and of the group recording epochs); "
        f"default {DEFAULT_PREFIX!r}.",
    )  # fmt: skip
    format: Format = Field("json", description="json, text or debezium_json.")
    field_delimiter: str = Field(",", min_length=1, description="text format: the field separator.")
    protobuf_message_name: refused(PROTOBUF) = Field(None, description="format protobuf: not supported.")
    protobuf_schema: refused(PROTOBUF) = Field(None, description="format protobuf: not supported.")
    epoch_topic: str = Field(
        DEFAULT_EPOCH_TOPIC, min_length=1,
        description="EXACTLY_ONCE (ours): one-partition topic whose consumer-group offsets record each sink's "
        "committed epoch (created when missing; no records are written to it).",
    )  # fmt: skip

    _fmt = field_validator("format", mode="before")(lambda cls, v: _format(v))
    _lists = field_validator("partition_key_fields", "assign_partitions", mode="before")(lambda cls, v: _list(v))

    @field_validator("semantics", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v

    @field_validator("kafka_config", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        flat = dotted_map(v)
        for key, why in _OWNED.items():
            if key in flat:
                raise ValueError(f"kafka.config.{key} is set by the sink: {why}")
        return flat

    @field_validator("topic")
    @classmethod
    def _template(cls, v: str) -> str:
        return check_template("topic", v)

    @field_validator("assign_partitions")
    @classmethod
    def _refused(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            raise ValueError(
                "assign_partitions is not supported (no content-based partitioner is built in); "
                "remove it, or use partition_key_fields or partition"
            )
        return v

    @field_validator("partition_key_fields")
    @classmethod
    def _key_fields(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            if not v:
                raise ValueError("partition_key_fields is empty; list columns or remove the option")
            if len(set(v)) != len(v):
                raise ValueError("partition_key_fields lists a column twice")
        return v

    @field_validator("epoch_topic")
    @classmethod
    def _epoch_topic(cls, v: str) -> str:
        if not _TOPIC.fullmatch(v) or v in (".", ".."):
            raise ValueError(f"epoch_topic {v!r} is not a valid topic name (letters, digits, '.', '_', '-')")
        return v

    @model_validator(mode="after")
    def _check(self) -> "KafkaSinkOptions":
        if self.format != "text" and "field_delimiter" in self.model_fields_set:
            raise ValueError("field_delimiter only applies to format = text")
        if self.semantics == "EXACTLY_ONCE":
            cfg = {k: v.strip().lower() for k, v in self.kafka_config.items()}
            if cfg.get("enable.idempotence") == "false":
                raise ValueError("semantics = EXACTLY_ONCE needs an idempotent producer; remove kafka.config.enable.idempotence = false")
            if cfg.get("acks", "all") not in ("all", "-1"):
                raise ValueError("semantics = EXACTLY_ONCE needs acks = all; remove kafka.config.acks or set it to all")
        elif self.transaction_prefix is not None:
            raise ValueError("transaction_prefix only applies to semantics = EXACTLY_ONCE")
        return self


@register
class Kafka(Sink):
    name: ClassVar[str] = "Kafka"
    seatunnel_page = "connector-v2/sink/Kafka.md"
    seatunnel_defaults = {
        "semantics": "AT_LEAST_ONCE here, not the page's NON: with NON a job whose broker is unreachable loses "
                     "every record and still ends FINISHED, the silent loss the engine never defaults to; "
                     "semantics = NON stays available, said in explain",
    }
    Options = KafkaSinkOptions
    description = "Writes each table's rows to a Kafka topic (json, text, Debezium events); exactly once on request."

    options: KafkaSinkOptions

    @property  # type: ignore[misc]  # an instance property: it depends on the semantics
    def commit_protocol(self) -> str:  # type: ignore[override]
        return {"EXACTLY_ONCE": "kafka-txn", "AT_LEAST_ONCE": "flush"}.get(self.options.semantics, "none")

    def key_for(self, table: TableSchema) -> tuple[str, ...]:
        return tuple(self.options.partition_key_fields or table.primary_key)

    def target_for(self, table: TableSchema) -> str:
        return render(self.options.topic, table, table.primary_key)

    def check_input(self, dataset: Dataset) -> None:
        o = self.options
        for table in dataset.tables:
            for col in o.partition_key_fields or ():
                if col not in table.names:
                    raise missing_column(table, col)
            if not table.columns:
                raise _incompatible(table, "it has no columns to write")
            if o.format == "text":
                for c in table.columns:
                    if c.type.lower().startswith(("array<", "map<", "struct<")):
                        raise _incompatible(table, f"format = text cannot write column {c.name!r} of type {c.type}; use json")
            topic = self.target_for(table)
            if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
                raise _incompatible(
                    table, f"topic {topic!r} is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_', '-')"
                )

    def targets(self, dataset: Dataset) -> list[str]:
        o = self.options
        out = []
        for t in dataset.tables:
            key = self.key_for(t)
            where = f"partition {o.partition}" if o.partition is not None else f"key {', '.join(key)}" if key else "no key"
            out.append(f"{t.table_id} -> topic {self.target_for(t)} ({o.format}, {where})")
        if o.semantics == "EXACTLY_ONCE":
            out.append(
                f"one transaction per epoch: transactional.id {self.transactional_id('<job>.<pipeline>.<sink uid>')}, "
                f"epoch recorded as that group's offset of {o.epoch_topic}-0"
            )
        if o.semantics == "NON":  # SeaTunnel's default: say what it means
            out.append("semantics NON: failed sends are logged, not retried; set semantics = AT_LEAST_ONCE or "
                       "EXACTLY_ONCE for a guarantee")
        return out

    def describe(self) -> str:
        o = self.options
        tx = f", transactional.id {self.transactional_id('<job>.<pipeline>.<sink uid>')}" if o.semantics == "EXACTLY_ONCE" else ""
        return f"Kafka (topic {o.topic}, {o.format}, {o.semantics}{tx})"

    def transactional_id(self, sink_id: str) -> str:
        """The producer's transactional id (and the group recording epochs) for the sink's stable id."""
        return f"{self.options.transaction_prefix or DEFAULT_PREFIX}-{sink_id}"

    def reads_metadata(self) -> frozenset[str]:
        # json/text write every row whatever its kind; Debezium events are built from the kinds
        return frozenset({KIND}) if self.options.format == "debezium_json" else frozenset()

    def scans_input_once(self) -> bool:
        return True  # one toLocalIterator pass over the epoch's records

    # -- run time ------------------------------------------------------------
    def open(self, ctx: Any, dataset: Dataset) -> dict[str, int]:
        """EXACTLY_ONCE: fence older producers of the sink's transactional id,
        then the epoch its group holds, for every table (one transaction holds
        every table's records of an epoch). Other semantics: nothing."""
        if self.options.semantics != "EXACTLY_ONCE":
            return {}
        from sinks import _kafka_write

        mark = _kafka_write.fence_and_read_mark(self, ctx)
        return {t.table_id: mark for t in dataset.tables}

    def write(self, ctx: Any, frames: dict[str, Any], dataset: Dataset) -> list[Any]:
        from sinks import _kafka_write

        return _kafka_write.write_epoch(self, ctx, frames, dataset)


def _incompatible(table: TableSchema, detail: str) -> SchemaError:
    return SchemaError("SCHEMA.INCOMPATIBLE", {"table": table.table_id, "detail": detail})
