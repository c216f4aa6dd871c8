"""Run time of the Kafka source: Spark's Kafka reader, then each record decoded
into the row envelope with Spark expressions (no Python pass).

Decoding errors never pass silently: with ``format_error_handle_way = fail``
the query stops with ``raise_error`` naming the record (topic, partition,
offset) and what is wrong; with ``skip`` the record is dropped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from streaming_engine.errors import EngineError
from streaming_engine.runtime import rows
from streaming_engine.schema import TableSchema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from sources.kafka import Kafka, KafkaTableConfig


def read(source: "Kafka", ctx: Any) -> "DataFrame":
    o = source.options
    r = ctx.spark.readStream.format("kafka").option("kafka.bootstrap.servers", o.bootstrap_servers)
    from sources.kafka import CONSUMER_ENGINE

    for key, value in o.kafka_config.items():
        if key not in CONSUMER_ENGINE:  # read by group_offsets / commit_on_checkpoint; Spark refuses them
            r = r.option(f"kafka.{key}", value)
    topics, patterns = _subscription(source)
    if patterns:  # anchored: Spark takes a topic when the pattern is found in its name, Kafka when it matches all of it
        r = r.option("subscribePattern", "^(?:" + "|".join(f"(?:{p})" for p in [*patterns, *(_quote(t) for t in topics)]) + ")$")
    else:
        r = r.option("subscribe", ",".join(topics))
    for key, value in _starting(source, ctx, topics, patterns).items():
        r = r.option(key, value)
    r = r.option("kafkaConsumer.pollTimeoutMs", str(o.poll_timeout))
    if o.max_offsets_per_trigger:
        r = r.option("maxOffsetsPerTrigger", str(o.max_offsets_per_trigger))
    raw = r.load()
    return decode(source, raw, ctx.dataset.tables, uid=ctx.uid)


def _quote(topic: str) -> str:
    import re

    return re.escape(topic)


def _subscription(source: "Kafka") -> tuple[list[str], list[str]]:
    """(topic names, topic patterns) of the source and its tables."""
    o = source.options
    topics: list[str] = []
    patterns: list[str] = []

    def add(topic: str | None, pattern: bool) -> None:
        if topic is None:
            return
        if pattern:
            patterns.append(topic)
        else:
            topics.extend(t.strip() for t in topic.split(",") if t.strip())

    add(o.topic, o.pattern)
    for t in o.tables_configs or ():
        add(t.topic, t.pattern)
    return list(dict.fromkeys(topics)), list(dict.fromkeys(patterns))


def _starting(source: "Kafka", ctx: Any, topics: list[str], patterns: list[str]) -> dict[str, str]:
    """Spark's starting options for ``start_mode`` (used only by a new checkpoint)."""
    o = source.options
    if o.start_mode in ("earliest", "latest"):
        return {"startingOffsets": o.start_mode}
    if o.start_mode == "timestamp":
        return {"startingTimestamp": str(o.start_mode_timestamp), "startingOffsetsByTimestampStrategy": "latest"}
    if o.start_mode == "specific_offsets":
        spec: dict[str, dict[str, int]] = {}
        for key, offset in (o.start_mode_offsets or {}).items():
            topic, _, partition = key.rpartition("-")
            spec.setdefault(topic, {})[partition] = offset
        return {"startingOffsets": json.dumps(spec)}
    # group_offsets: what consumer.group committed; other partitions per auto.offset.reset
    return {"startingOffsets": json.dumps(_group_offsets(source, ctx.spark, topics, patterns))}


def _admin(source: "Kafka", jvm: Any) -> Any:
    """A Kafka Admin client (JVM, kafka-clients) with the source's consumer settings; close it."""
    o = source.options
    props = jvm.java.util.Properties()
    for key, value in o.kafka_config.items():
        props.setProperty(key, value)
    props.setProperty("bootstrap.servers", o.bootstrap_servers)
    return jvm.org.apache.kafka.clients.admin.Admin.create(props)


def _group_offsets(source: "Kafka", spark: Any, topics: list[str], patterns: list[str]) -> dict[str, dict[str, int]]:
    o = source.options
    reset = o.kafka_config.get("auto.offset.reset", "latest").lower()
    if reset not in ("earliest", "latest"):
        raise EngineError(
            "RUNTIME.FAILED",
            {"detail": f"Kafka source: kafka.config.auto.offset.reset = {reset!r} with start_mode = group_offsets; "
                       "use earliest or latest"},
        )
    fallback = -2 if reset == "earliest" else -1
    jvm = spark._jvm  # type: ignore[attr-defined]
    admin = _admin(source, jvm)
    try:
        names = set(topics)
        if patterns:
            import re

            listed = list(admin.listTopics().names().get())
            names |= {t for t in listed if any(re.fullmatch(p, t) for p in patterns)}
        if not names:
            return {}
        jnames = jvm.java.util.ArrayList()
        for n in sorted(names):
            jnames.add(n)
        described = admin.describeTopics(jnames).allTopicNames().get()
        spec: dict[str, dict[str, int]] = {}
        for n in sorted(names):
            for p in described.get(n).partitions():
                spec.setdefault(n, {})[str(p.partition())] = fallback
        committed = admin.listConsumerGroupOffsets(o.consumer_group).partitionsToOffsetAndMetadata().get()
        for entry in committed.entrySet():
            tp, meta = entry.getKey(), entry.getValue()
            if tp.topic() in spec and meta is not None:
                spec[tp.topic()][str(tp.partition())] = int(meta.offset())
        return spec
    finally:
        admin.close()


def commit_offsets(source: "Kafka", spark: Any, progress_sources: list[dict]) -> None:
    """Commit the end offsets of the newest micro-batch (Spark's progress) for
    the source's topics to ``consumer.group``: the next record to read, as a
    Kafka consumer commits. Spark reads with its own group ids; this group
    only mirrors the checkpoint."""
    import re

    o = source.options
    topics, patterns = _subscription(source)
    ends: dict[str, dict[str, int]] = {}
    for entry in progress_sources:
        end = entry.get("endOffset")
        end = json.loads(end) if isinstance(end, str) else end
        if not isinstance(end, dict) or "Kafka" not in str(entry.get("description", "")):
            continue
        for topic, parts in end.items():
            if topic in topics or any(re.fullmatch(p, topic) for p in patterns):
                for partition, offset in (parts or {}).items():
                    if isinstance(offset, int) and offset >= 0:
                        ends.setdefault(topic, {})[partition] = offset
    if not ends:
        return
    jvm = spark._jvm  # type: ignore[attr-defined]
    admin = _admin(source, jvm)
    try:
        offsets = jvm.java.util.HashMap()
        for topic, parts in ends.items():
            for partition, offset in parts.items():
                offsets.put(jvm.org.apache.kafka.common.TopicPartition(topic, int(partition)),
                            jvm.org.apache.kafka.clients.consumer.OffsetAndMetadata(offset))
        admin.alterConsumerGroupOffsets(o.consumer_group, offsets).all().get()
    finally:
        admin.close()


# -- decoding ------------------------------------------------------------------

def decode(source: "Kafka", raw: "DataFrame", tables: tuple[TableSchema, ...], uid: str | None = None) -> "DataFrame":
    """Kafka records (key, value, topic, partition, offset, ...) -> the row envelope.

    ``uid``: the source's; with it a Debezium source reports the newest event
    time (``source.ts_ms``, else the envelope's ``ts_ms``) of the changes each
    micro-batch applies (:func:`rows.observe_event_time`: Spark's observed
    metrics, in the query's progress), for the time lag of the metrics."""
    from pyspark.sql import functions as F

    o = source.options
    configs = dict(source.tables())
    fmt_of = {t.table_id: (configs.get(t.table_id).format if configs.get(t.table_id) else None) or o.format for t in tables}
    formats = set(fmt_of.values())
    where = F.concat(F.lit("Kafka record topic "), F.col("topic"), F.lit(" partition "), F.col("partition").cast("string"),
                     F.lit(" offset "), F.col("offset").cast("string"), F.lit(": "))
    df = raw.where(F.col("value").isNotNull())  # tombstones (a delete's compaction marker) carry no row
    df = df.select("topic", "partition", "offset", F.col("value").cast("string").alias("__v"))
    if formats == {"debezium_json"}:
        df, image = _debezium(source, df, tables)
    elif "debezium_json" in formats:
        raise EngineError(
            "RUNTIME.FAILED",
            {"detail": "Kafka source: debezium_json cannot be mixed with other formats in one source; use two sources"},
        )
    else:
        df = df.withColumn(rows.TABLE, _table_by_topic(source, tables)).withColumn("__src_table", F.col(rows.TABLE))
        df = df.withColumn("__err", F.when(F.col(rows.TABLE).isNull(), F.lit("no declared table reads this topic")))
        df = df.withColumn(rows.KIND, F.lit(rows.INSERT)).withColumn(rows.SEQ, F.col("offset"))
        image = F.col("__v")

    typed: dict[str, Any] = {}
    errors = [F.col("__err")]
    for t in tables:
        cfg = configs.get(t.table_id)
        fmt = fmt_of[t.table_id]
        mine = F.col(rows.TABLE) == F.lit(t.table_id)
        if fmt == "text":
            delim = (cfg.field_delimiter if cfg and cfg.field_delimiter else None) or o.field_delimiter
            values, bad = _text_columns(image, t, delim)
        else:
            values, bad = _json_columns(image, t, debezium=fmt == "debezium_json")
        typed[t.table_id] = values
        errors.append(F.when(mine & F.col("__err").isNull() & ~F.col(rows.KIND).eqNullSafe(rows.TRUNCATE), bad))
    df = df.withColumn("__err", F.coalesce(*errors))
    extra = []
    if o.format_error_handle_way == "skip":
        df = df.where(F.col("__err").isNull())
    elif o.format_error_handle_way == "dead_letter":
        extra = [F.when(F.col("__err").isNotNull(), rows.reject(
            F.col("__v"), F.col("__err"), F.col("__src_table"), F.col("topic"), F.col("partition"), F.col("offset"),
        )).alias(rows.REJECT)]
    else:  # a filter, so no pruning of unread columns can drop the check
        df = df.where(F.when(F.col("__err").isNotNull(), F.raise_error(F.concat(where, F.col("__err")))).otherwise(F.lit(True)))
    if uid is not None and formats == {"debezium_json"}:  # decoding errors are not applied changes
        ts_ms = F.coalesce(F.col("__e.source.ts_ms"), F.col("__e.ts_ms"))
        df = rows.observe_event_time(df, uid, F.when(F.col("__err").isNull(), ts_ms))
    meta = [F.col(rows.TABLE), F.col(rows.KIND).cast("string").alias(rows.KIND), F.col(rows.SEQ).cast("bigint").alias(rows.SEQ)]
    if len(tables) == 1:
        t = tables[0]
        return df.select(*meta, *[typed[t.table_id][c.name].alias(c.name) for c in t.columns], *extra)
    from streaming_engine.schema import Dataset

    layout = rows.layout(Dataset(tables))
    per_slot: dict[str, list[tuple[str, Any]]] = {}
    for t in tables:
        for slot, c in zip(layout.columns[t.table_id], t.columns):
            per_slot.setdefault(slot, []).append((t.table_id, typed[t.table_id][c.name]))
    slots = []
    for slot, ddl in layout.slots:
        expr = None
        for tid, value in per_slot.get(slot, []):
            cond = F.col(rows.TABLE) == F.lit(tid)
            expr = F.when(cond, value) if expr is None else expr.when(cond, value)
        slots.append((expr if expr is not None else F.lit(None)).cast(ddl).alias(slot))
    return df.select(*meta, *slots, *extra)


def _table_by_topic(source: "Kafka", tables: tuple[TableSchema, ...]) -> "Column":
    """json/text: the table of a record is the table whose topic (or pattern) it came from."""
    from pyspark.sql import functions as F

    configs = dict(source.tables())
    if len(tables) == 1 and configs.get(tables[0].table_id) is None:
        return F.lit(tables[0].table_id)
    expr = None
    for t in tables:
        cfg = configs[t.table_id]
        assert cfg is not None and cfg.topic is not None
        if cfg.pattern:
            cond = F.col("topic").rlike(f"^(?:{cfg.topic})$")
        else:
            cond = F.col("topic").isin([x.strip() for x in cfg.topic.split(",") if x.strip()])
        expr = F.when(cond, F.lit(t.table_id)) if expr is None else expr.when(cond, F.lit(t.table_id))
    return expr


def _debezium(source: "Kafka", df: "DataFrame", tables: tuple[TableSchema, ...]) -> tuple["DataFrame", "Column"]:
    """Debezium envelopes -> one row per change image, with its kind, table and sequence."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    o = source.options
    src = StructType([StructField(n, StringType()) for n in ("db", "schema", "table")]
                     + [StructField("lsn", LongType()), StructField("ts_ms", LongType())])
    body = StructType([
        StructField("before", StringType()), StructField("after", StringType()),
        StructField("op", StringType()), StructField("source", src), StructField("ts_ms", LongType()),
    ])
    shape = StructType([StructField("payload", body)]) if o.debezium_record_include_schema else body
    parsed = _from_json(F.col("__v"), StructType([*shape.fields, StructField(_CORRUPT, StringType())]))
    e = parsed["payload"] if o.debezium_record_include_schema else parsed
    df = df.withColumn("__e", F.when(parsed[_CORRUPT].isNull(), e))
    s = F.col("__e.source")
    f = o.debezium_record_table_filter
    if f is not None:
        keep = F.col("__e.source.table") == F.lit(f.table_name)
        if f.schema_name is not None:
            keep = keep & (s["schema"] == F.lit(f.schema_name))
        if f.database_name is not None:
            keep = keep & (s["db"] == F.lit(f.database_name))
        df = df.where(keep | F.col("__e.op").isNull())
    table = None
    if not o.tables_configs and (o.schema_ is None or o.schema_.table is None):
        # one table the job does not name: every event is its change (SeaTunnel's
        # single-table reading; debezium_record_table_filter picks a table)
        table = F.lit(tables[0].table_id)
    for t in tables if table is None else ():
        cond = _matches(t.table_id, s)
        table = F.when(cond, F.lit(t.table_id)) if table is None else table.when(cond, F.lit(t.table_id))
    op = F.col("__e.op")
    name = F.concat_ws(".", s["db"], s["schema"], s["table"])
    err = (
        F.when(F.col("__e").isNull() | op.isNull(), F.lit("not a Debezium change event (no op)"))
        .when((op == "t") & F.lit(o.truncate_events == "reject"),
              F.concat(F.lit("TRUNCATE of "), name, F.lit(" rejected (set the source's truncate_events = apply "
                                                          "to clear the table, or ignore)")))
        .when(~op.isin("c", "r", "u", "d", "t"), F.concat(F.lit("unknown Debezium op "), op))
        .when(table.isNull(), F.concat(F.lit("event of table "), name, F.lit(" which the source does not declare "
                                                                            "(add it to tables_configs)")))
        .when(op.isin("c", "r", "u") & F.col("__e.after").isNull(), F.lit("event without an after image"))
        .when((op == "d") & F.col("__e.before").isNull(), F.lit("delete without a before image"))
    )
    change = F.struct(F.lit(None).cast("string").alias("k"), F.lit(None).cast("string").alias("img"))

    def img(kind: str, column: str) -> "Column":
        return F.struct(F.lit(kind).alias("k"), F.col(f"__e.{column}").alias("img"))

    changes = (
        F.when(F.col("__err").isNotNull(), F.array(change))
        .when(op == "t", F.array(*([img(rows.TRUNCATE, "after")] if o.truncate_events == "apply" else [])))
        .when(op.isin("c", "r"), F.array(img(rows.INSERT, "after")))
        .when((op == "u") & F.col("__e.before").isNotNull(), F.array(img(rows.UPDATE_BEFORE, "before"), img(rows.UPDATE_AFTER, "after")))
        .when(op == "u", F.array(img(rows.UPDATE_AFTER, "after")))
        .otherwise(F.array(img(rows.DELETE, "before")))
    )
    df = df.withColumn(rows.TABLE, table).withColumn("__err", err)
    df = df.withColumn("__src_table", F.coalesce(table, F.nullif(name, F.lit(""))))
    df = df.withColumn("__c", F.explode(changes))
    df = df.withColumn(rows.KIND, F.col("__c.k")).withColumn(rows.SEQ, F.coalesce(s["lsn"], F.col("offset")))
    return df, F.col("__c.img")


def _matches(table_id: str, source: "Column") -> "Column":
    """A declared table id (table, schema.table or db.schema.table) against an event's source block."""
    from pyspark.sql import functions as F

    parts = table_id.split(".")
    cond = source["table"] == F.lit(parts[-1])
    if len(parts) == 2:  # schema.table (PostgreSQL), or db.table (MySQL: no schema)
        cond = cond & (F.coalesce(source["schema"], source["db"]) == F.lit(parts[0]))
    elif len(parts) == 3:
        cond = cond & (source["db"] == F.lit(parts[0])) & (source["schema"] == F.lit(parts[1]))
    return cond


_CORRUPT = "__corrupt_record"


def _from_json(text: "Column", shape: Any) -> "Column":
    """``from_json`` that keeps a malformed text in ``_CORRUPT`` (PERMISSIVE
    mode gives all-null fields for it, indistinguishable from nulls)."""
    from pyspark.sql import functions as F

    return F.from_json(text, shape, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})


# Debezium's default representations of types JSON has no form for
_AS_READ = {"date": "int", "timestamp": "string", "timestamp_ntz": "string"}


def _json_columns(image: "Column", table: TableSchema, debezium: bool) -> tuple[dict[str, "Column"], "Column"]:
    """The table's columns from a JSON object text, and an error message column (null when fine)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType, _parse_datatype_string

    read_types = {}
    for c in table.columns:
        low = c.type.lower()
        if debezium and (low in _AS_READ or low.startswith("decimal")):
            read_types[c.name] = _AS_READ.get(low, "string")
        else:
            read_types[c.name] = c.type
    ddl = ", ".join(f"`{n.replace('`', '``')}` {t}" for n, t in read_types.items())
    shape = _parse_datatype_string(f"{ddl}, {_CORRUPT} string")
    assert isinstance(shape, StructType)
    parsed = _from_json(image, shape)
    values: dict[str, Any] = {}
    bad = F.when(
        image.isNull() | parsed.isNull() | parsed[_CORRUPT].isNotNull(),
        F.lit("the value is not a JSON object of the table's columns"),
    )
    for c in table.columns:
        raw = parsed[c.name]
        low = c.type.lower()
        if read_types[c.name] == c.type:
            values[c.name] = raw
            continue
        if low == "date":
            value = F.date_from_unix_date(raw)
        elif low in ("timestamp", "timestamp_ntz"):
            value = F.when(raw.rlike(r"^-?\d+$"), F.timestamp_micros(raw.cast("bigint"))).otherwise(F.to_timestamp(raw))
            if low == "timestamp_ntz":
                value = value.cast("timestamp_ntz")
        else:  # decimal from text or a number
            value = raw.try_cast(c.type)
        values[c.name] = value
        bad = bad.when(raw.isNotNull() & value.isNull(), F.lit(f"column {c.name}: {c.type} expected"))
    return values, bad


def _text_columns(image: "Column", table: TableSchema, delimiter: str) -> tuple[dict[str, "Column"], "Column"]:
    """The table's columns from delimited text, by position, and an error message column."""
    import re

    from pyspark.sql import functions as F

    parts = F.split(image, re.escape(delimiter), -1)
    n = len(table.columns)
    values = {}
    bad = F.when(F.size(parts) != n, F.concat(F.lit(f"expected {n} fields separated by {delimiter!r}, found "),
                                              F.size(parts).cast("string")))
    for i, c in enumerate(table.columns):
        text = parts.getItem(i)
        value = text if c.type.lower() == "string" else text.try_cast(c.type)
        values[c.name] = value
        if c.type.lower() != "string":
            bad = bad.when((text != "") & value.isNull(), F.lit(f"column {c.name}: {c.type} expected"))
            values[c.name] = F.when(text != "", value)
    return values, bad
