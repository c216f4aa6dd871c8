"""The plan diff before a restore from a savepoint: what may change, what is refused and why (no Spark)."""

from __future__ import annotations

from streaming_engine.control.master import plans
from streaming_engine.control.restore import diff
from streaming_engine.job import compile_text

BASE = dict(
    source='Kafka { plugin_output = src, bootstrap.servers = "b:9092", topic = orders, format = json, '
           'max_offsets_per_trigger = 100, schema = { fields { id = bigint, qty = bigint } } }',
    transform='Sql { plugin_input = src, plugin_output = kept, query = "select * from src where qty > 1" }',
    sink='Delta { plugin_input = kept, path = "/w/t", save_mode = upsert, primary_key = [id] }',
)


def _plans(**parts) -> dict:
    p = {**BASE, **parts}
    text = (f"env {{ job.name = j, job.mode = STREAMING }}\nsource {{ {p['source']} }}\n"
            f"transform {{ {p['transform']} }}\nsink {{ {p['sink']} }}\n")
    return plans(compile_text(text))


def test_the_same_job_has_no_changes():
    d = diff(_plans(), _plans())
    assert d.allowed == [] and d.refused == []


def test_a_changed_filter_and_rate_limit_and_sink_path_are_allowed_and_reported():
    d = diff(_plans(), _plans(
        transform='Sql { plugin_input = src, plugin_output = kept, query = "select * from src where qty > 5" }',
        source=BASE["source"].replace("max_offsets_per_trigger = 100", "max_offsets_per_trigger = 500"),
        sink=BASE["sink"].replace("/w/t", "/w/t2"),
    ))
    assert d.refused == []
    assert "transform 'kept' (Sql): options changed" in d.allowed
    assert any("'max_offsets_per_trigger' changed from 100 to 500" in a for a in d.allowed), d.allowed
    assert any("'path' changed" in a for a in d.allowed), d.allowed


def test_another_source_is_refused_with_what_to_do():
    d = diff(_plans(), _plans(source="FakeSource { plugin_output = src, schema = { fields { id = bigint, qty = bigint } } }"))
    assert len(d.refused) == 1 and "another source now (Kafka -> FakeSource)" in d.refused[0]
    assert "new job name" in d.refused[0]


def test_a_changed_source_identity_is_refused():
    d = diff(_plans(), _plans(source=BASE["source"].replace("topic = orders", "topic = payments")))
    assert any("option 'topic' changed" in r for r in d.refused), d.refused


def test_a_changed_write_mode_or_key_of_an_upsert_sink_is_refused():
    mode = diff(_plans(), _plans(sink='Delta { plugin_input = kept, path = "/w/t" }'))
    assert any("'save_mode' changed from 'upsert' to 'append'" in r for r in mode.refused), mode.refused
    key = diff(_plans(), _plans(sink='Delta { plugin_input = kept, path = "/w/t", save_mode = upsert, primary_key = [qty] }'))
    assert any("'primary_key' changed" in r for r in key.refused), key.refused


def test_a_new_independent_pipeline_starts_from_its_beginning():
    two = 'Kafka { plugin_output = src, bootstrap.servers = "b:9092", topic = orders, format = json, ' \
          'max_offsets_per_trigger = 100, schema = { fields { id = bigint, qty = bigint } } }\n' \
          'FakeSource { plugin_output = more, schema = { fields { id = bigint } } }'
    d = diff(_plans(), _plans(source=two, sink=BASE["sink"] + '\nConsole { plugin_input = more }'))
    assert d.refused == []
    assert any("source 'more' (FakeSource) is new: its pipeline starts from its beginning" in a for a in d.allowed)


def test_a_changed_table_set_is_refused():
    one = 'FakeSource { plugin_output = src, table-names = ["a.t1"], schema = { fields { id = bigint, qty = bigint } } }'
    two = 'FakeSource { plugin_output = src, table-names = ["a.t1", "a.t2"], schema = { fields { id = bigint, qty = bigint } } }'
    sink = 'Delta { plugin_input = kept, path = "/w/${table_name}" }'
    d = diff(_plans(source=one, sink=sink), _plans(source=two, sink=sink))
    assert any("its tables changed (added ['a.t2']" in r for r in d.refused), d.refused


def _kafka(*entries: str) -> dict:
    source = ('Kafka { plugin_output = src, bootstrap.servers = "b:9092", format = json, tables_configs = [ '
              + ", ".join(entries) + " ] }")
    return _plans(source=source, transform='FieldRename { plugin_input = src, plugin_output = kept, convert_case = LOWER }',
                  sink='Delta { plugin_input = kept, path = "/w/${table_name}" }')


A = '{ topic = ta, schema = { table = "db.a", fields { id = bigint, qty = bigint } } }'
B = '{ topic = tb, schema = { table = "db.b", fields { id = bigint, qty = bigint } } }'


def test_a_kafka_table_with_topics_of_its_own_may_be_added_and_starts_from_its_beginning():
    d = diff(_kafka(A), _kafka(A, B))
    assert d.refused == [], d.refused
    assert any("table 'db.b' added: its topics ['tb'] are read from their beginning" in a for a in d.allowed), d.allowed


def test_a_kafka_table_on_a_topic_already_read_or_a_changed_topic_or_a_removed_table_is_refused():
    # one Debezium topic of several tables, told apart by each item's table filter
    dbz = ('{ topic = ta, format = debezium_json, debezium_record_table_filter { table_name = %s }, '
           'schema = { table = "db.%s", fields { id = bigint, qty = bigint } } }')
    refused = diff(_kafka(dbz % ("a", "a")), _kafka(dbz % ("a", "a"), dbz % ("c", "c"))).refused
    assert any("'db.c' is new but reads ['ta']" in r for r in refused), refused
    moved = A.replace("topic = ta", "topic = tz")
    assert any("'db.a' reads other topics now" in r for r in diff(_kafka(A), _kafka(moved)).refused)
    assert any("'db.b' is gone" in r for r in diff(_kafka(A, B), _kafka(A)).refused)


def test_a_changed_ordering_of_an_upsert_sink_is_refused():
    seq = diff(_plans(), _plans(sink=BASE["sink"].replace("primary_key = [id]", "primary_key = [id], sequence_column = qty")))
    assert any("'sequence_column' changed from None to 'qty'" in r for r in seq.refused), seq.refused
    order = diff(_plans(), _plans(sink=BASE["sink"].replace("primary_key = [id]",
                                                            "primary_key = [id], source_order_column = __order")))
    assert any("'source_order_column' changed" in r for r in order.refused), order.refused


def test_columns_added_or_removed_at_a_sink_are_allowed_and_reported():
    fewer = diff(_plans(), _plans(
        transform='Sql { plugin_input = src, plugin_output = kept, query = "select id from src where qty > 1" }'))
    assert fewer.refused == []
    assert any("columns ['id', 'qty'] -> ['id']" in a for a in fewer.allowed), fewer.allowed
    more = diff(_plans(), _plans(
        transform='Sql { plugin_input = src, plugin_output = kept, query = "select *, qty * 2 as q2 from src" }'))
    assert more.refused == [] and any("-> ['id', 'qty', 'q2']" in a for a in more.allowed), more.allowed
