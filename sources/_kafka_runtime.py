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

    from sources.kafka import Kafka, Route, TableFilter


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
    topics: list[str] = []
    patterns: list[str] = []
    for unit in _units(source):
        topics.extend(unit.topics)
        patterns.extend([unit.pattern] if unit.pattern else [])
    return list(dict.fromkeys(topics)), list(dict.fromkeys(patterns))


def _units(source: "Kafka") -> list["Route"]:
    """The subscriptions, each with where it starts: the source's own ``topic``
    (a route of the source's settings) and every tables_configs item with a
    topic (its own settings)."""
    from sources.kafka import Route

    o = source.options
    units = [r for r in source.routes() if r.by_topic]
    if o.topic is not None:
        own = Route(
            table="", topics=() if o.pattern else tuple(t.strip() for t in o.topic.split(",") if t.strip()),
            pattern=o.topic if o.pattern else None, format=o.format, way=o.format_error_handle_way,
            include_schema=o.debezium_record_include_schema, delimiter=o.field_delimiter,
            table_filter=o.debezium_record_table_filter, consumer_group=o.consumer_group, start_mode=o.start_mode,
            start_offsets=o.start_mode_offsets, start_timestamp=o.start_mode_timestamp,
        )
        units.insert(0, own)
    return units


def _starting(source: "Kafka", ctx: Any, topics: list[str], patterns: list[str]) -> dict[str, str]:
    """Spark's starting options for ``start_mode`` (used only by a new checkpoint):
    one start for every topic as Spark's options; items of tables_configs that
    start otherwise: every partition's offset resolved here (Admin client)."""
    units = _units(source)
    starts = {u.start() for u in units}
    if len(starts) > 1:
        return {"startingOffsets": json.dumps(_resolved(source, ctx.spark, units))}
    mode, offsets, timestamp, _ = starts.pop()
    if mode in ("earliest", "latest"):
        return {"startingOffsets": mode}
    if mode == "timestamp":
        return {"startingTimestamp": str(timestamp), "startingOffsetsByTimestampStrategy": "latest"}
    if mode == "specific_offsets":
        spec: dict[str, dict[str, int]] = {}
        for key, offset in offsets:
            topic, _, partition = key.rpartition("-")
            spec.setdefault(topic, {})[partition] = offset
        return {"startingOffsets": json.dumps(spec)}
    # group_offsets: what consumer.group committed; other partitions per auto.offset.reset
    return {"startingOffsets": json.dumps(_resolved(source, ctx.spark, units))}


def _admin(source: "Kafka", jvm: Any) -> Any:
    """A Kafka Admin client (JVM, kafka-clients) with the source's consumer settings; close it."""
    o = source.options
    props = jvm.java.util.Properties()
    for key, value in o.kafka_config.items():
        props.setProperty(key, value)
    props.setProperty("bootstrap.servers", o.bootstrap_servers)
    return jvm.org.apache.kafka.clients.admin.Admin.create(props)


def _resolved(source: "Kafka", spark: Any, units: list["Route"]) -> dict[str, dict[str, int]]:
    """Every partition of the subscribed topics -> its starting offset (-2
    earliest, -1 latest), by the start of the unit that reads its topic (an
    item of tables_configs before the source's own topic)."""
    import re

    o = source.options
    reset = o.kafka_config.get("auto.offset.reset", "latest").lower()
    if reset not in ("earliest", "latest") and any(u.start_mode == "group_offsets" for u in units):
        raise EngineError(
            "RUNTIME.FAILED",
            {"detail": f"Kafka source: kafka.config.auto.offset.reset = {reset!r} with start_mode = group_offsets; "
                       "use earliest or latest"},
        )
    jvm = spark._jvm  # type: ignore[attr-defined]
    admin = _admin(source, jvm)
    try:
        listed = list(admin.listTopics().names().get()) if any(u.pattern for u in units) else []
        owner: dict[str, "Route"] = {}
        for unit in sorted(units, key=lambda u: u.table == ""):  # items first: the source's topic is the fallback
            names = set(unit.topics) | ({t for t in listed if re.fullmatch(unit.pattern, t)} if unit.pattern else set())
            for name in names:
                other = owner.get(name)
                if other is not None and unit.table and other.start() != unit.start():  # two items (not the source)
                    raise EngineError("RUNTIME.FAILED", {"detail": (
                        f"Kafka source: topic {name!r} is read by tables {other.table!r} and {unit.table!r}, which "
                        "start differently (consumer.group, start_mode): make their starts equal")})
                owner.setdefault(name, unit)
        if not owner:
            return {}
        jnames = jvm.java.util.ArrayList()
        for n in sorted(owner):
            jnames.add(n)
        described = admin.describeTopics(jnames).allTopicNames().get()
        spec: dict[str, dict[str, int]] = {}
        stamps: dict[int, list[Any]] = {}
        for n in sorted(owner):
            unit = owner[n]
            given = dict(unit.start_offsets or {})
            for p in described.get(n).partitions():
                part = p.partition()
                if unit.start_mode == "specific_offsets":
                    if f"{n}-{part}" not in given:
                        raise EngineError("RUNTIME.FAILED", {"detail": (
                            f"Kafka source: start_mode.offsets of table {unit.table or '(the source)'!r} has no offset "
                            f'for partition {part} of topic {n!r}; set "{n}-{part}" too (every partition needs one)')})
                    offset = int(given[f"{n}-{part}"])
                elif unit.start_mode == "timestamp":
                    stamps.setdefault(int(unit.start_timestamp or 0), []).append(
                        jvm.org.apache.kafka.common.TopicPartition(n, part))
                    offset = -1
                elif unit.start_mode == "group_offsets":
                    offset = -2 if reset == "earliest" else -1
                else:
                    offset = -2 if unit.start_mode == "earliest" else -1
                spec.setdefault(n, {})[str(part)] = offset
        for ts, parts in stamps.items():  # the first offset at or after the time; none: the end (latest)
            request = jvm.java.util.HashMap()
            for tp in parts:
                request.put(tp, jvm.org.apache.kafka.clients.admin.OffsetSpec.forTimestamp(ts))
            found = admin.listOffsets(request).all().get()
            for tp in parts:
                info = found.get(tp)
                if info is not None and int(info.offset()) >= 0:
                    spec[tp.topic()][str(tp.partition())] = int(info.offset())
        for group in {u.consumer_group for u in owner.values() if u.start_mode == "group_offsets"}:
            committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
            for entry in committed.entrySet():
                tp, meta = entry.getKey(), entry.getValue()
                unit = owner.get(tp.topic())
                if unit is not None and unit.start_mode == "group_offsets" and unit.consumer_group == group \
                        and meta is not None:
                    spec[tp.topic()][str(tp.partition())] = int(meta.offset())
        return spec
    finally:
        admin.close()


def commit_offsets(source: "Kafka", spark: Any, progress_sources: list[dict]) -> None:
    """Commit the end offsets of the newest micro-batch (Spark's progress) for
    the source's topics to ``consumer.group``: the next record to read, as a
    Kafka consumer commits. Spark reads with its own group ids; this group
    only mirrors the checkpoint. An item of tables_configs with its own
    ``consumer.group`` has its topics' offsets committed there."""
    units = _units(source)
    ends: dict[str, dict[str, dict[str, int]]] = {}  # group -> topic -> partition -> offset
    for entry in progress_sources:
        end = entry.get("endOffset")
        end = json.loads(end) if isinstance(end, str) else end
        if not isinstance(end, dict) or "Kafka" not in str(entry.get("description", "")):
            continue
        for topic, parts in end.items():
            unit = _unit_of(units, topic)
            if unit is None:
                continue
            for partition, offset in (parts or {}).items():
                if isinstance(offset, int) and offset >= 0:
                    ends.setdefault(unit.consumer_group, {}).setdefault(topic, {})[partition] = offset
    if not ends:
        return
    jvm = spark._jvm  # type: ignore[attr-defined]
    admin = _admin(source, jvm)
    try:
        for group, topics in ends.items():
            offsets = jvm.java.util.HashMap()
            for topic, parts in topics.items():
                for partition, offset in parts.items():
                    offsets.put(jvm.org.apache.kafka.common.TopicPartition(topic, int(partition)),
                                jvm.org.apache.kafka.clients.consumer.OffsetAndMetadata(offset))
            admin.alterConsumerGroupOffsets(group, offsets).all().get()
    finally:
        admin.close()


def _unit_of(units: list["Route"], topic: str) -> "Route | None":
    """The subscription a topic belongs to: an item naming it, else the source's topic."""
    import re

    for unit in sorted(units, key=lambda u: u.table == ""):
        if topic in unit.topics or (unit.pattern and re.fullmatch(unit.pattern, topic)):
            return unit
    return None


# -- decoding ------------------------------------------------------------------

def decode(source: "Kafka", raw: "DataFrame", tables: tuple[TableSchema, ...], uid: str | None = None) -> "DataFrame":
    """Kafka records (key, value, topic, partition, offset, ...) -> the row envelope.

    Each record's table, format and error handling come from its route
    (:meth:`Kafka.routes`): the tables_configs item naming its topic, else
    the source's own settings (Debezium events of the source's topics go to
    the table their source block names).

    ``uid``: the source's; with it a Debezium source reports the newest event
    time (``source.ts_ms``, else the envelope's ``ts_ms``) of the changes each
    micro-batch applies (:func:`rows.observe_event_time`: Spark's observed
    metrics, in the query's progress), for the time lag of the metrics."""
    from pyspark.sql import functions as F

    o = source.options
    routes = {r.table: r for r in source.routes()}
    mine = [routes[t.table_id] for t in tables]
    by_topic = [r for r in mine if r.by_topic]
    # records of topics no item names: the source's format (Debezium when tables go by source block)
    rest_fmt = next((r.format for r in mine if not r.by_topic), o.format if source.unclaimed_records() else mine[0].format)
    formats = {r.format for r in mine} | {rest_fmt}
    where = F.concat(F.lit("Kafka record topic "), F.col("topic"), F.lit(" partition "), F.col("partition").cast("string"),
                     F.lit(" offset "), F.col("offset").cast("string"), F.lit(": "))
    df = raw.where(F.col("value").isNotNull())  # tombstones (a delete's compaction marker) carry no row
    df = df.select("topic", "partition", "offset", F.col("value").cast("string").alias("__v"))
    claimed = F.lit(False)
    for r in by_topic:
        claimed = claimed | _on_topic(r)
    df = df.withColumn("__claimed", claimed)
    fmt = _by_topic(by_topic, lambda r: r.format, rest_fmt)
    if "debezium_json" in formats:
        df, image = _debezium(source, df, mine, fmt)
    else:
        df = df.withColumn(rows.TABLE, _table_by_topic(source, tables)).withColumn("__src_table", F.col(rows.TABLE))
        df = df.withColumn("__err", F.when(F.col(rows.TABLE).isNull(), F.lit("no declared table reads this topic")))
        df = df.withColumn(rows.KIND, F.lit(rows.INSERT)).withColumn(rows.SEQ, F.col("offset"))
        image = F.col("__v")

    typed: dict[str, Any] = {}
    errors = [F.col("__err")]
    for t, r in zip(tables, mine):
        mine_ = F.col(rows.TABLE) == F.lit(t.table_id)
        if r.format == "text":
            values, bad = _text_columns(image, t, r.delimiter)
        else:
            debezium = r.format == "debezium_json"
            values, bad = _json_columns(image, t, debezium=debezium,
                                        placeholder=o.debezium_unavailable_value_placeholder if debezium else None)
        typed[t.table_id] = values
        errors.append(F.when(mine_ & F.col("__err").isNull() & ~F.col(rows.KIND).eqNullSafe(rows.TRUNCATE), bad))
    df = df.withColumn("__err", F.coalesce(*errors))
    for t, r in zip(tables, mine):
        if r.format == "debezium_json" and r.schema_changes != "ignore":
            df = df.where(_schema_check(t, r.schema_changes, image, where))
    ways = source.error_ways()
    way = None  # a record's table decides; a record of no table: the source's way
    for r in mine if len(ways) > 1 else ():
        cond = F.col(rows.TABLE) == F.lit(r.table)
        way = F.when(cond, F.lit(r.way)) if way is None else way.when(cond, F.lit(r.way))
    if way is not None:
        way = way.otherwise(F.lit(o.format_error_handle_way))

    def handled(name: str) -> "Column":
        bad = F.col("__err").isNotNull()
        return bad if way is None else bad & (way == F.lit(name))

    extra = []
    if "skip" in ways:
        df = df.where(~handled("skip"))
    if "dead_letter" in ways:
        extra = [F.when(handled("dead_letter"), rows.reject(
            F.col("__v"), F.col("__err"), F.col("__src_table"), F.col("topic"), F.col("partition"), F.col("offset"),
        )).alias(rows.REJECT)]
    if "fail" in ways:  # a filter, so no pruning of unread columns can drop the check
        df = df.where(F.when(handled("fail"), F.raise_error(F.concat(where, F.col("__err")))).otherwise(F.lit(True)))
    if uid is not None and "debezium_json" in formats:  # decoding errors are not applied changes
        df = rows.observe_event_time(df, uid, F.when(F.col("__err").isNull(), F.col("__ts")))
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


def _on_topic(r: "Route") -> "Column":
    """Records of a route's own topics (a pattern matches the whole name, as Kafka's consumer)."""
    from pyspark.sql import functions as F

    if r.pattern is not None:
        return F.col("topic").rlike(f"^(?:{r.pattern})$")
    return F.col("topic").isin(list(r.topics))


def _by_topic(by_topic: list["Route"], value: Any, rest: Any) -> Any:
    """A setting per record, by the route of its topic: the value itself when
    every route and the rest agree, else a Column choosing it per record."""
    from pyspark.sql import functions as F

    values = {value(r) for r in by_topic} | {rest}
    if len(values) == 1:
        return rest
    expr = None
    for r in by_topic:
        expr = F.when(_on_topic(r), F.lit(value(r))) if expr is None else expr.when(_on_topic(r), F.lit(value(r)))
    return expr.otherwise(F.lit(rest))  # type: ignore[union-attr]


def _table_by_topic(source: "Kafka", tables: tuple[TableSchema, ...]) -> "Column":
    """json/text: the table of a record is the table whose topic (or pattern) it came from."""
    from pyspark.sql import functions as F

    routes = {r.table: r for r in source.routes()}
    if len(tables) == 1 and not routes[tables[0].table_id].by_topic:
        return F.lit(tables[0].table_id)
    expr = None
    for t in tables:
        cond = _on_topic(routes[t.table_id])
        expr = F.when(cond, F.lit(t.table_id)) if expr is None else expr.when(cond, F.lit(t.table_id))
    return expr


def _filter(f: "TableFilter", s: "Column") -> "Column":
    from pyspark.sql import functions as F

    keep = s["table"] == F.lit(f.table_name)
    if f.schema_name is not None:
        keep = keep & (s["schema"] == F.lit(f.schema_name))
    if f.database_name is not None:
        keep = keep & (s["db"] == F.lit(f.database_name))
    return keep


def _debezium(source: "Kafka", df: "DataFrame", mine: list["Route"], dbz: Any) -> tuple["DataFrame", "Column"]:
    """Debezium envelopes -> one row per change image, with its kind, table and
    sequence. ``dbz``: the records' format, or a Column of it per record (the
    records not Debezium events, json/text of other tables, pass as one image each)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    o = source.options
    src = StructType([StructField(n, StringType()) for n in ("db", "schema", "table")]
                     + [StructField("lsn", LongType()), StructField("ts_ms", LongType())])
    body = StructType([
        StructField("before", StringType()), StructField("after", StringType()),
        StructField("op", StringType()), StructField("source", src), StructField("ts_ms", LongType()),
    ])
    by_topic = [r for r in mine if r.by_topic]
    include = _by_topic([r for r in by_topic if r.format == "debezium_json"], lambda r: r.include_schema,
                        o.debezium_record_include_schema)
    # the event's own schema, as text: read only to type the new columns of a schema change (lenient)
    schema = [StructField("schema", StringType())] if any(r.schema_changes == "lenient" for r in mine) else []
    if include is True:
        parsed = _from_json(F.col("__v"), StructType([*schema, StructField("payload", body),
                                                      StructField(_CORRUPT, StringType())]))
        e = parsed["payload"]
    elif include is False:
        parsed = _from_json(F.col("__v"), StructType([*body.fields, StructField(_CORRUPT, StringType())]))
        e = parsed
    else:  # items of tables_configs differ: both shapes, each record read as its topic's item says
        parsed = _from_json(F.col("__v"), StructType([*schema, StructField("payload", body), *body.fields,
                                                      StructField(_CORRUPT, StringType())]))
        e = F.when(include, parsed["payload"]).otherwise(F.struct(*[parsed[f.name].alias(f.name) for f in body.fields]))
    is_dbz = F.lit(dbz == "debezium_json") if isinstance(dbz, str) else dbz == F.lit("debezium_json")
    df = df.withColumn("__dbz", is_dbz).withColumn("__e", F.when(F.col("__dbz") & parsed[_CORRUPT].isNull(), e))
    if schema:  # lenient is refused without include_schema: ``include`` is True, or a Column when items differ
        wrapped = F.lit(True) if include is True else include
        df = df.withColumn("__schema", F.when(F.col("__e").isNotNull() & wrapped, parsed["schema"]))
    s = F.col("__e.source")
    op = F.col("__e.op")
    # the records of an item's own topics are its table's (narrowed by its table filter); the others go by source block
    table = None
    for r in by_topic:
        cond = _on_topic(r)
        if r.format == "debezium_json" and r.table_filter is not None:
            cond = cond & (op.isNull() | _filter(r.table_filter, s))
        table = F.when(cond, F.lit(r.table)) if table is None else table.when(cond, F.lit(r.table))
    rest = None
    block = [r for r in mine if not r.by_topic]
    if not o.tables_configs and (o.schema_ is None or o.schema_.table is None):
        # one table the job does not name: every event is its change (SeaTunnel's
        # single-table reading; debezium_record_table_filter picks a table)
        rest = F.lit(mine[0].table)
    for r in block if rest is None else ():
        cond = _matches(r.table, s)
        rest = F.when(cond, F.lit(r.table)) if rest is None else rest.when(cond, F.lit(r.table))
    rest = rest if rest is not None else F.lit(None).cast("string")
    table = F.when(F.col("__claimed"), table if table is not None else F.lit(None).cast("string")).otherwise(rest)
    # filtered out: events an item's table filter (or the source's, for the other topics) does not keep
    dropped = F.col("__claimed") & table.isNull()
    f = o.debezium_record_table_filter
    if f is not None:
        dropped = dropped | (~F.col("__claimed") & ~_filter(f, s))
    df = df.where(~(F.col("__dbz") & op.isNotNull() & F.coalesce(dropped, F.lit(False))))
    name = F.concat_ws(".", s["db"], s["schema"], s["table"])
    err = (
        F.when(~F.col("__dbz"), F.when(table.isNull(), F.lit("no declared table reads this topic")))
        .when(F.col("__e").isNull() | op.isNull(), F.lit("not a Debezium change event (no op)"))
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
        F.when(~F.col("__dbz"), F.array(F.struct(F.lit(rows.INSERT).alias("k"), F.col("__v").alias("img"))))
        .when(F.col("__err").isNotNull(), F.array(change))
        .when(op == "t", F.array(*([img(rows.TRUNCATE, "after")] if o.truncate_events == "apply" else [])))
        .when(op.isin("c", "r"), F.array(img(rows.INSERT, "after")))
        .when((op == "u") & F.col("__e.before").isNotNull(), F.array(img(rows.UPDATE_BEFORE, "before"), img(rows.UPDATE_AFTER, "after")))
        .when(op == "u", F.array(img(rows.UPDATE_AFTER, "after")))
        .otherwise(F.array(img(rows.DELETE, "before")))
    )
    df = df.withColumn(rows.TABLE, table).withColumn("__err", err)
    df = df.withColumn("__src_table", F.coalesce(table, F.nullif(name, F.lit(""))))
    # what the rows need of the event, before the explode (nested fields of a struct read after a Generate
    # can be pruned below it by Spark's optimizer: INTERNAL_ERROR_ATTRIBUTE_NOT_FOUND)
    df = df.withColumn(rows.SEQ, F.coalesce(s["lsn"], F.col("offset")))
    df = df.withColumn("__ts", F.coalesce(F.col("__e.source.ts_ms"), F.col("__e.ts_ms")))
    df = df.withColumn("__c", F.explode(changes))
    df = df.withColumn(rows.KIND, F.col("__c.k"))
    return df, F.col("__c.img")


# Debezium's JSON converter schema: the envelope's fields, "after" among them with the table's columns
_EVENT_SCHEMA = ("struct<fields: array<struct<field: string, fields: array<struct<field: string, type: string, "
                 "name: string>>>>>")
# Kafka Connect types -> the engine's; logical types (a schema name) only where the decoder reads them
_CONNECT_TYPES = {"int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint", "float32": "float",
                  "float64": "double", "boolean": "boolean", "string": "string", "bytes": "binary"}
_LOGICAL_TYPES = {"io.debezium.time.Date": "date", "io.debezium.time.MicroTimestamp": "timestamp",
                  "io.debezium.time.ZonedTimestamp": "timestamp"}
_PLAIN_LOGICAL = ("io.debezium.data.Json", "io.debezium.data.Uuid", "io.debezium.data.Xml", "io.debezium.data.Enum",
                  "io.debezium.data.EnumSet")


def _connect_type(field: "Column") -> "Column":
    """The engine's type of a field of a Debezium event schema; null for one the decoder cannot read (a
    logical type such as Kafka Connect's Decimal as bytes: Debezium's decimal.handling.mode = string reads)."""
    from pyspark.sql import functions as F

    name, kind = field["name"], field["type"]
    out = None
    for logical, engine in _LOGICAL_TYPES.items():
        out = F.when(name == F.lit(logical), F.lit(engine)) if out is None else out.when(name == F.lit(logical), F.lit(engine))
    assert out is not None
    out = out.when(name.isNotNull() & ~name.isin(*_PLAIN_LOGICAL), F.lit(None).cast("string"))
    for connect, engine in _CONNECT_TYPES.items():
        out = out.when(kind == F.lit(connect), F.lit(engine))
    return out


def _schema_check(table: TableSchema, behavior: str, image: "Column", where: "Column") -> "Column":
    """A filter that keeps every row and raises for the first change of ``table`` (an insert or an
    update's new row) whose image has other columns than the planned ones: under exception
    ``[SCHEMA.CHANGED]`` naming the columns added and dropped; under lenient, for added columns,
    ``[RUNTIME.SCHEMA_CHANGED]`` with their names and the types of the event's schema (the runner
    plans the pipeline again with them: ``restart.found_columns``); a dropped column stays, null."""

    from pyspark.sql import functions as F

    keys = F.json_object_keys(image)
    declared = F.array(*[F.lit(c.name) for c in table.columns])
    added, dropped = F.array_except(keys, declared), F.array_except(declared, keys)
    applies = ((F.col(rows.TABLE) == F.lit(table.table_id)) & F.col("__err").isNull()
               & F.col(rows.KIND).isin(rows.INSERT, rows.UPDATE_AFTER))
    said = F.concat(F.lit(" ("), F.regexp_replace(where, ": $", ""), F.lit(")"))
    tid = table.table_id
    if behavior == "exception":
        changed = applies & ((F.size(added) > 0) | (F.size(dropped) > 0))
        error = F.concat(
            F.lit(f"[SCHEMA.CHANGED] table {tid} changed while the job ran: its Debezium event has columns "),
            F.concat_ws("; ", F.when(F.size(added) > 0, F.concat(F.lit("added: "), F.array_join(added, ", "))),
                        F.when(F.size(dropped) > 0, F.concat(F.lit("dropped: "), F.array_join(dropped, ", ")))),
            said, F.lit("; schema.change.behavior = exception stops the job: set lenient (new columns reach the sinks; "
                        "needs debezium_record_include_schema) or ignore (the declared columns only), or declare the "
                        "columns in the table's schema"))
        return F.when(changed, F.raise_error(error)).otherwise(F.lit(True))
    after = F.filter(F.from_json(F.col("__schema"), _EVENT_SCHEMA)["fields"], lambda f: f["field"] == F.lit("after"))
    found = F.transform(F.filter(F.element_at(after, 1)["fields"], lambda f: F.array_contains(added, f["field"])),
                        lambda f: F.struct(f["field"].alias("name"), _connect_type(f).alias("type"),
                                           F.concat_ws(" ", f["type"], f["name"]).alias("debezium")))
    unmapped = F.filter(found, lambda f: f["type"].isNull())
    listed = F.array_join(F.transform(found, lambda f: F.concat(f["name"], F.lit(" ("), f["type"], F.lit(")"))), ", ")
    refused = F.concat(
        F.lit(f"[SCHEMA.CHANGED] table {tid} has new columns the engine cannot read from Debezium events: "),
        F.array_join(F.transform(unmapped, lambda f: F.concat(f["name"], F.lit(" (Debezium type "), f["debezium"],
                                                             F.lit(")"))), ", "),
        said, F.lit("; a decimal needs Debezium's decimal.handling.mode = string, a time its time.precision.mode = "
                    "adaptive_time_microseconds; or set the table's schema.change.behavior = ignore"))
    replan = F.concat(
        F.lit(f"[RUNTIME.SCHEMA_CHANGED] table {tid} has new columns "), listed, said,
        F.lit("; the pipeline is planned again to read them [columns "),
        F.to_json(F.create_map(F.lit(tid), F.transform(found, lambda f: F.array(f["name"], f["type"])))), F.lit("]"))
    changed = applies & (F.size(added) > 0)
    missing = F.size(found) < F.size(added)  # a field without a schema entry: no type to read it as
    return F.when(changed, F.raise_error(
        F.when(missing | (F.size(unmapped) > 0), F.when(missing, F.concat(
            F.lit(f"[SCHEMA.CHANGED] table {tid} has new columns "), F.array_join(added, ", "), said,
            F.lit(" but its event carries no schema for them (debezium_record_include_schema: Debezium's JSON "
                  "converter with schemas.enable = true)"))).otherwise(refused)).otherwise(replan)
    )).otherwise(F.lit(True))


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


def _placeholder_bytes(placeholder: str) -> bytes:
    """Debezium's ``unavailable.value.placeholder`` as octets (``hex:...``, else the text's UTF-8)."""
    return bytes.fromhex(placeholder[4:]) if placeholder.startswith("hex:") else placeholder.encode()


def _json_columns(image: "Column", table: TableSchema, debezium: bool,
                  placeholder: str | None = None) -> tuple[dict[str, "Column"], "Column"]:
    """The table's columns from a JSON object text, and an error message column (null when fine).
    ``placeholder``: Debezium's value for a column the database did not log; a column holding it is an
    error naming it (written as a value, it would overwrite the stored one: the TOASTed text an update
    left unchanged under REPLICA IDENTITY DEFAULT)."""
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
    unavailable = {"string": F.lit(placeholder), "binary": F.lit(_placeholder_bytes(placeholder))} if placeholder else {}
    for c in table.columns:
        raw = parsed[c.name]
        low = c.type.lower()
        sent = unavailable.get(read_types[c.name].lower())
        if sent is not None:
            bad = bad.when(raw == sent, F.lit(
                f"column {c.name}: Debezium sent no value (its placeholder {placeholder!r}: the database did not "
                "log it, as PostgreSQL does not for a TOASTed value an UPDATE left unchanged unless the table has "
                "REPLICA IDENTITY FULL); applying it would overwrite the stored value. Run ALTER TABLE ... "
                "REPLICA IDENTITY FULL on the source table; format_error_handle_way = dead_letter keeps such "
                "events for replay"))
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
