"""The Kafka source at plan time: options, errors, and what explain shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_engine.job import compile_file
from streaming_engine.plan.render import render
from tests.unit.helpers import problems_of

ROOT = Path(__file__).resolve().parents[2]


def test_the_debezium_example_plans_its_routing_order_and_dead_letters():
    job = compile_file(ROOT / "conf" / "examples" / "kafka_debezium_to_delta.conf", variables={"KAFKA": "k:9092"})
    text = render(job)
    assert "public.customers <- Debezium events of source.schema (or db) = public, source.table = customers" in text
    assert "undecodable -> dead letters" in text
    assert "records it cannot decode -> dead-letter table work/checkpoints/shop_cdc/_dead_letter" in text
    assert ("public.orders -> work/lake/public/orders (upsert by id, newest _lsn, tombstones kept 7d, _lsn = source order, "
            "truncates clear older rows)") in text
    assert ("public.orders -> work/lake/history/orders (upsert by id, newest _lsn, tombstones kept 7d, _lsn = source order, "
            "SCD type 2: __START_AT/__END_AT from _lsn, history of customer_id, total, placed, "
            "truncates end the current versions)") in text
    [read] = [s for s in job.physical.pipelines[0].stages if s.kind == "read"]
    assert read.detail["persist"] is True and read.detail["dead_letter"].endswith("shop_cdc/_dead_letter")


BASE = """
source {{ Kafka {{ plugin_output = k, bootstrap.servers = "h:1", {opts} }} }}
sink {{ Console {{ plugin_input = k }} }}
"""
SCHEMA = 'schema = { fields { id = int } }'


@pytest.mark.parametrize(
    "opts, message",
    [
        (f'topic = t, format = avro, {SCHEMA}', "format 'avro' is not supported"),
        (f'topic = t, format = canal_json, {SCHEMA}', "no Canal JSON decoder"),
        (f'topic = t, start_mode = specific_offsets, {SCHEMA}', "start_mode = specific_offsets needs start_mode.offsets"),
        (f'topic = t, start_mode = timestamp, {SCHEMA}', "needs start_mode.timestamp"),
        (f'topic = t, start_mode = specific_offsets, start_mode.offsets = {{ t = 3 }}, {SCHEMA}', '"<topic>-<partition>"'),
        (f'topic = "a[", pattern = true, {SCHEMA}', "not a valid regular expression"),
        ("topic = t, format = debezium_json", "schema is required"),  # json/text without one: a content column
        (f"{SCHEMA}", "topic is required"),
        ('tables_configs = [ { schema = { table = "a.b", fields { id = int } } } ]', "routes records by topic; set its topic"),
        (f'topic = t, debezium_record_table_filter = {{ table_name = x }}, {SCHEMA}', "only applies to format = debezium_json"),
        (f'topic = t, kafka.config = {{ value.deserializer = x.Y }}, {SCHEMA}', "kafka.config.value.deserializer is not supported"),
        (f'topic = t, kafka.config = {{ interceptor.classes = x.Y }}, {SCHEMA}', "does not run consumer interceptors"),
        (f'topic = t, schema.change.behavior = exception, {SCHEMA}', "applies to format = debezium_json only"),
        (f'topic = t, format = debezium_json, debezium_record_include_schema = false, schema.change.behavior = lenient, '
         f'{SCHEMA}', "set debezium_record_include_schema = true"),
        (f'topic = t, format = debezium_json, schema.change.behavior = evolve, {SCHEMA}', "a rename cannot be told from a drop"),
        ('topic = t, format = debezium_json, tables_configs = [ { schema.change.behavior = try_evolve, schema = '
         '{ table = "a.b", fields { id = int } } } ]', "tables_configs item 'a.b': schema.change.behavior = try_evolve"),
    ],
)
def test_bad_kafka_options_are_config_errors_that_say_what_to_change(opts, message):
    found = [str(p) for p in problems_of(BASE.format(opts=opts))]
    assert any(message in f for f in found), found


def test_specific_offsets_and_nested_kafka_config_are_flattened():
    from tests.unit.helpers import compile_ok

    job = compile_ok(BASE.format(opts=f'topic = orders, start_mode = specific_offsets, '
                                      f'start_mode.offsets = {{ orders-0 = 7, orders-1 = 9 }}, '
                                      f'kafka.config = {{ client.id = c1, max.poll.records = 10 }}, {SCHEMA}'))
    [src] = [v for v in job.dag.vertices if v.kind == "source"]
    o = src.plugin.options
    assert o.start_mode_offsets == {"orders-0": 7, "orders-1": 9}
    assert o.kafka_config == {"client.id": "c1", "max.poll.records": "10"}


CDC = """
source {{ Kafka {{ plugin_output = k, bootstrap.servers = "h:1", topic = "db.public.t", format = debezium_json,
                  truncate_events = {truncates}, schema = {{ table = "public.t", fields {{ id = int, v = string }},
                  primaryKey {{ name = pk, columnNames = [id] }} }} }} }}
{transform}
sink {{ {sink} }}
"""
UPSERT = 'Delta { plugin_input = %s, path = "/w/t", save_mode = upsert, source_order_column = _lsn }'


@pytest.mark.parametrize(
    "truncates, transform, sink, message",
    [
        ("apply", "", 'Delta { plugin_input = k, path = "/w/t" }', "which this sink cannot apply"),
        ("apply", "", 'Delta { plugin_input = k, path = "/w/t", save_mode = upsert, sequence_column = v }',
         "which this sink cannot apply"),
        ("apply", "", "Console { plugin_input = k }", "which this sink cannot apply"),
        ("apply", "transform { Filter { plugin_input = k, plugin_output = f, include_fields = [id, v] } }",
         UPSERT % "f", "which this transform cannot pass on"),
    ],
)
def test_truncate_events_are_refused_where_nothing_applies_them(truncates, transform, sink, message):
    found = [str(p) for p in problems_of(CDC.format(truncates=truncates, transform=transform, sink=sink))]
    assert any(message in f and "'public.t' carries TRUNCATE events" in f and "truncate_events = reject or ignore" in f
               for f in found), found


@pytest.mark.parametrize("truncates, shown", [("apply", True), ("ignore", False), ("reject", False)])
def test_an_upsert_sink_applies_truncates_and_explain_says_so(truncates, shown):
    from tests.unit.helpers import compile_ok

    job = compile_ok(CDC.format(truncates=truncates, transform="", sink=UPSERT % "k"))
    text = render(job)
    assert ("truncates clear older rows" in text) is shown, text
    [src] = [v for v in job.dag.vertices if v.kind == "source"]
    assert src.schema.tables[0].truncates is shown


def test_truncate_events_need_debezium_json():
    found = [str(p) for p in problems_of(BASE.format(opts=f"topic = t, truncate_events = apply, {SCHEMA}"))]
    assert any("truncate_events only applies to format = debezium_json" in f for f in found), found


ITEM = 'schema = { table = "%s", fields { id = int } }'


@pytest.mark.parametrize(
    "items, message",
    [
        # an item routed by its events' source block reads the source's topics: it cannot start elsewhere
        (f'{{ format = debezium_json, start_mode = earliest, {ITEM % "s.a"} }}', "has no topic of its own"),
        (f'{{ topic = x, {ITEM % "s.a"} }}, {{ topic = x, {ITEM % "s.b"} }}', "all read topic 'x'"),
        (f'{{ topic = x, format = debezium_json, debezium_record_table_filter {{ table_name = a }}, {ITEM % "s.a"} }}, '
         f'{{ topic = x, format = debezium_json, start_mode = earliest, debezium_record_table_filter {{ table_name = b }}, '
         f'{ITEM % "s.b"} }}', "start differently"),
        (f'{{ topic = x, debezium_record_table_filter {{ table_name = a }}, {ITEM % "s.a"} }}',
         "debezium_record_table_filter only applies to format = debezium_json"),
        (f'{{ topic = "x.*", pattern = true, schema = {{ fields {{ id = int }} }} }}', "name the table"),
        (f'{{ topic = x, start_mode = timestamp, {ITEM % "s.a"} }}', "needs start_mode.timestamp"),
    ],
)
def test_bad_table_list_items_are_config_errors_naming_the_item(items, message):
    found = [str(p) for p in problems_of(BASE.format(opts=f"table_list = [ {items} ]"))]
    assert any(message in f for f in found), found


def test_a_table_list_item_takes_its_own_options_and_is_named_by_its_table_or_topic():
    """SeaTunnel's page writes the options inside each item: they are read
    there (not unknown-option warnings), and an item without schema.table is
    its topic's table (an item without a schema: one column content)."""
    from tests.unit.helpers import compile_ok

    job = compile_ok(BASE.format(opts=(
        'consumer.group = all, table_list = [ '
        '{ topic = "shop.orders", start_mode = earliest, consumer.group = g1, format = json, '
        '  format_error_handle_way = skip, schema = { fields { id = int } } }, '
        '{ topic = raw, start_mode = timestamp, start_mode.timestamp = 1700000000000 }, '
        '{ topic = cdc, format = debezium_json, debezium_record_include_schema = false, '
        '  debezium_record_table_filter { schema_name = public, table_name = t }, ' + ITEM % "lake.t" + ' } ]')))
    assert not [w for w in job.dag.warnings if w.condition == "CONFIG.UNKNOWN_OPTION"], job.dag.warnings
    [src] = [v for v in job.dag.vertices if v.kind == "source"]
    routes = {r.table: r for r in src.plugin.routes()}
    assert set(routes) == {"shop.orders", "raw", "lake.t"}
    orders, raw, cdc = routes["shop.orders"], routes["raw"], routes["lake.t"]
    assert (orders.start_mode, orders.consumer_group, orders.way, orders.format) == ("earliest", "g1", "skip", "json")
    assert (raw.start_mode, raw.start_timestamp, raw.consumer_group, raw.format) == ("timestamp", 1700000000000, "all", "text")
    assert [c.name for c in src.plugin.output().table("raw").columns] == ["content"]
    assert (cdc.include_schema, cdc.table_filter.label(), cdc.way, cdc.start_mode) == (False, "public.t", "fail", "group_offsets")
    text = render(job)
    assert "shop.orders <- topic shop.orders (json) [start earliest, undecodable -> skipped]" in text, text
    assert "lake.t <- Debezium events of topic cdc (events of public.t)" in text, text


def test_seatunnels_default_for_undecodable_records_is_fail():
    from tests.unit.helpers import compile_ok

    job = compile_ok(BASE.format(opts=f"topic = t, {SCHEMA}"))
    [src] = [v for v in job.dag.vertices if v.kind == "source"]
    assert src.plugin.options.format_error_handle_way == "fail" and not src.plugin.dead_letters()
    assert "undecodable -> fail" in render(job)


def test_schema_change_behavior_is_shown_per_debezium_table_and_a_lenient_restart_keeps_found_columns():
    """explain names each Debezium table's schema.change.behavior where it is not ignore; planned again
    (the runner adds the columns a schema-change report found), a lenient table keeps them after its
    declared ones, an exception/ignore table reads its declared columns."""
    from streaming_engine.job import compile_text
    from streaming_engine.runtime import restart

    text = BASE.format(opts='topic = "p\\\\..*", pattern = true, format = debezium_json, schema.change.behavior = lenient, '
                            'tables_configs = [ { schema = { table = "s.a", fields { id = int } } }, '
                            '{ schema.change.behavior = exception, schema = { table = "s.b", fields { id = int } } } ]')
    job = compile_text(text)
    shown = render(job)
    assert "s.a <- Debezium events of source.schema (or db) = s, source.table = a [schema changes: lenient]" in shown
    assert "[schema changes: exception]" in shown
    message = ('[USER_RAISED_EXCEPTION] [RUNTIME.SCHEMA_CHANGED] table s.a has new columns c (string) (Kafka record '
               'topic p.s.a partition 0 offset 9); the pipeline is planned again to read them [columns {"s.a":[["c",'
               '"string"],["d","date"]],"s.b":[["e","int"]]}] SQLSTATE: P0001')
    found = restart.found_columns(message)
    assert found == {"s.a": [("c", "string"), ("d", "date")], "s.b": [("e", "int")]}
    planned = {v.id: v.schema.with_found(found) for v in job.dag.vertices if v.kind == "source"}
    again = job.recompile(planned)
    [source] = [v for v in again.dag.vertices if v.kind == "source"]
    assert [(c.name, c.type) for c in source.schema.table("s.a").columns] == [("id", "int"), ("c", "string"), ("d", "date")]
    assert source.schema.table("s.b").names == ("id",)
    assert restart.found_columns("[RUNTIME.SCHEMA_CHANGED] table x has new columns") == {}
