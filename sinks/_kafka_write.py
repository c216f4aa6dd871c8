"""Run time of the Kafka sink: each epoch's records built with Spark
expressions (key, value, topic, partition), then sent by ONE producer on the
driver (``KafkaEpochWriter.java``: a ``toLocalIterator`` pass, no py4j call
per record), in one Kafka transaction with EXACTLY_ONCE. See
:mod:`sinks.kafka` for the protocol."""

from __future__ import annotations

import json
import logging
import time
from functools import reduce
from typing import TYPE_CHECKING, Any

from streaming_engine.errors import CommitError, EngineError
from streaming_engine.runtime import faults, rows
from streaming_engine.schema import Dataset, TableSchema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from sinks.kafka import Kafka

log = logging.getLogger("streaming_engine.sinks.kafka")
WRITER_CLASS = "io.streamingengine.spark.KafkaEpochWriter"
_JSON_OPTIONS = {"ignoreNullFields": "false"}


# -- the producer --------------------------------------------------------------

def _settings(sink: "Kafka") -> str:
    o = sink.options
    settings = dict(o.kafka_config)
    settings["bootstrap.servers"] = o.bootstrap_servers
    if o.semantics == "AT_LEAST_ONCE" and "acks" not in settings and "enable.idempotence" not in settings:
        settings["acks"] = "all"
        settings["enable.idempotence"] = "true"
    return json.dumps(settings)


def _writer_class(spark: Any) -> Any:
    from streaming_engine.jvm import jvm_class

    found = jvm_class(spark._jvm, WRITER_CLASS)  # type: ignore[attr-defined]
    if found is None:
        raise EngineError(
            "RUNTIME.NOT_AVAILABLE",
            {"detail": "the Kafka sink needs the engine's JVM classes (.jars/streaming-engine-spark.jar): "
                       "run scripts/build_jvm.py (needs a JDK)"},
        )
    return found


def _ids(sink: "Kafka", ctx: Any) -> tuple[str, str]:
    """(transactional id, group recording the epochs): the same stable name."""
    txn = sink.transactional_id(ctx.txn_app_id(None))
    return txn, txn


def _new_writer(sink: "Kafka", ctx: Any) -> Any:
    o = sink.options
    txn = _ids(sink, ctx)[0] if o.semantics == "EXACTLY_ONCE" else None
    return _writer_class(ctx.spark)(_settings(sink), txn, o.semantics != "NON")


def fence_and_read_mark(sink: "Kafka", ctx: Any) -> int:
    """EXACTLY_ONCE, when the query starts: the epoch topic exists; every older
    producer of the transactional id is fenced (its open transaction aborted,
    or completed when it was committing); then the epoch the sink's group
    holds (-1: none)."""
    o = sink.options
    txn, group = _ids(sink, ctx)
    try:
        _writer_class(ctx.spark).ensureTopic(_settings(sink), o.epoch_topic)
        writer = _new_writer(sink, ctx)
    except Exception as e:
        raise _failed(sink, txn, "cannot start a transactional producer", e) from e
    try:
        mark = int(writer.initAndReadMark(group, o.epoch_topic))
    except Exception as e:
        writer.closeNow()
        raise _failed(sink, txn, "cannot fence older producers or read the epoch mark", e) from e
    writer.close()
    log.info("Kafka sink opened", extra={"transactional_id": txn, "epoch_held": mark})
    return mark


def write_epoch(sink: "Kafka", ctx: Any, frames: Any, dataset: Dataset) -> list[Any]:
    """Send one epoch; with EXACTLY_ONCE in one transaction that also records the epoch."""
    from streaming_engine.runtime.context import CommitRecord

    o = sink.options
    tables = [t for t in dataset.tables if t.table_id in frames]
    if not tables:
        return []
    exactly_once = o.semantics == "EXACTLY_ONCE"
    txn, group = _ids(sink, ctx)
    records = _records(sink, frames, tables)
    try:
        writer = _new_writer(sink, ctx)
    except Exception as e:
        raise _failed(sink, None, "cannot create the producer", e) from e
    open_txn = False
    try:
        if exactly_once:
            mark = int(writer.initAndReadMark(group, o.epoch_topic))  # fences every other producer of the id
            if mark >= ctx.batch_id:
                # another run committed this epoch since the query started (a zombie or concurrent driver)
                log.warning("Kafka sink: epoch already held, skipped",
                            extra={"transactional_id": txn, "epoch": ctx.batch_id, "held": mark})
                writer.close()
                return [CommitRecord(ctx.sink_uid, t.table_id, sink.target_for(t), 0, None, True) for t in tables]
            writer.begin()
            open_txn = True
        lines = writer.send(records._jdf, o.format == "debezium_json", int(time.time() * 1000))
        counts = {table: int(n) for table, n, _ in (line.split("\t") for line in lines)}
        failed = int(writer.failedSends())
        if failed:
            log.warning("Kafka sink (semantics = NON): records were not written",
                        extra={"failed_sends": failed, "epoch": ctx.batch_id})
        faults.maybe_crash("kafka_records_sent", ctx.batch_id, ctx.sink_uid)
        if exactly_once:
            meta = json.dumps({"epoch": ctx.batch_id, "job": ctx.job_name, "sink": ctx.sink_uid})
            writer.commit(group, o.epoch_topic, ctx.batch_id, meta)
            open_txn = False
        writer.close()
    except Exception as e:
        if open_txn:
            writer.abort()
        writer.closeNow()
        if not _from_kafka(e):
            raise  # the epoch's rows could not be computed: the error as any sink reports it
        raise _failed(sink, txn if exactly_once else None, f"epoch {ctx.batch_id} not written", e) from e
    faults.maybe_crash("sink_table_committed", ctx.batch_id, ctx.sink_uid)
    return [CommitRecord(ctx.sink_uid, t.table_id, sink.target_for(t), counts.get(t.table_id, 0)) for t in tables]


def _failed(sink: "Kafka", txn: str | None, what: str, e: Exception) -> CommitError:
    text = _java_message(e)
    fenced = any(m in text for m in ("ProducerFencedException", "InvalidProducerEpochException"))
    detail = f"Kafka sink: {what}: {text}"
    if fenced and txn:
        detail = (f"Kafka sink: transactional.id {txn} was fenced by a newer producer: another run of this job, or a "
                  f"sink with the same transaction_prefix and id, writes with it; this run stops ({text}) [terminal]")
    return CommitError("RUNTIME.FAILED", {"detail": detail})


def _from_kafka(e: Exception) -> bool:
    """The error is Kafka's (the producer, the broker), not the epoch's computation."""
    return "org.apache.kafka." in _java_message(e) or "a Kafka send failed" in str(e)


def _java_message(e: Exception) -> str:
    """The innermost Java exception line of a py4j error (else the Python text)."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None and cause.getCause() is not cause:
                cause = cause.getCause()
            return f"{cause.getClass().getName()}: {cause.getMessage()}"
        except Exception:  # the gateway may be gone
            pass
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


# -- the records ---------------------------------------------------------------

def _records(sink: "Kafka", frames: Any, tables: list[TableSchema]) -> "DataFrame":
    """Every table's rows as (table, topic, partition, key, value, kind, source), one DataFrame."""
    parts = [_table_records(sink, frames[t.table_id], t) for t in tables]
    return reduce(lambda a, b: a.unionAll(b), parts)


def _table_records(sink: "Kafka", df: "DataFrame", table: TableSchema) -> "DataFrame":
    from pyspark.sql import functions as F

    o = sink.options
    key_cols = sink.key_for(table)
    key = (F.to_json(F.struct(*[rows.column(c).alias(c) for c in key_cols]), _JSON_OPTIONS) if key_cols
           else F.lit(None).cast("string"))
    partition = F.lit(o.partition).cast("int") if o.partition is not None else F.lit(None).cast("int")
    kind = F.lit(None).cast("string")
    source = F.lit(None).cast("string")
    if o.format == "json":
        value = F.to_json(F.struct(*[rows.column(c).alias(c) for c in table.names]), _JSON_OPTIONS)
    elif o.format == "text":
        value = F.concat_ws(o.field_delimiter, *[F.coalesce(rows.column(c.name).cast("string"), F.lit("")) for c in table.columns])
    else:  # debezium_json: the row's image; the envelope is built by the writer
        value = F.to_json(F.struct(*[_debezium_value(rows.column(c.name), c.type).alias(c.name) for c in table.columns]),
                          _JSON_OPTIONS)
        kind = rows.column(rows.KIND)
        source = F.lit(json.dumps(_source_block(table), separators=(",", ":")))
    return df.select(
        F.lit(table.table_id).alias("table"), F.lit(sink.target_for(table)).alias("topic"), partition.alias("partition"),
        key.alias("key"), value.alias("value"), kind.alias("kind"), source.alias("source"),
    )


def _debezium_value(col: "Column", type_: str) -> "Column":
    """A column as Debezium writes it by default: dates as days since
    1970-01-01, timestamps as microseconds since the epoch (what the engine's
    Kafka source reads back); everything else as to_json writes it."""
    from pyspark.sql import functions as F

    low = type_.strip().lower()
    if low == "date":
        return F.unix_date(col)
    if low == "timestamp":
        return F.unix_micros(col)
    if low == "timestamp_ntz":
        return F.unix_micros(col.cast("timestamp"))
    return col


def _source_block(table: TableSchema) -> dict[str, Any]:
    """Debezium's ``source``: ``db``/``schema``/``table`` from the table id
    (``t``; ``db.t``; ``db.schema.t``), as the engine's Kafka source matches them."""
    parts = table.table_id.split(".")
    db = parts[0] if len(parts) > 1 else None
    schema = parts[1] if len(parts) > 2 else None
    return {"connector": "streaming-engine", "db": db, "schema": schema, "table": parts[-1]}
