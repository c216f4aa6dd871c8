"""FakeSource: options (SeaTunnel doc examples), table ids, output schemas."""

import datetime as dt
from decimal import Decimal

import pytest
from pydantic import ValidationError

from sources.fake_source import FakeSource, FakeSourceOptions
from streaming_engine.plugins.registry import SOURCES

ALL_TYPES = {
    "c_map": "map<string, string>",
    "c_array": "array<int>",
    "c_string": "string",
    "c_boolean": "boolean",
    "c_tinyint": "tinyint",
    "c_smallint": "smallint",
    "c_int": "int",
    "c_bigint": "bigint",
    "c_float": "float",
    "c_double": "double",
    "c_decimal": "decimal(30, 8)",
    "c_null": "null",
    "c_bytes": "bytes",
    "c_date": "date",
    "c_timestamp": "timestamp",
}


def make(**options):
    return FakeSource(FakeSourceOptions.model_validate(options))


def test_registered_under_seatunnel_name():
    assert SOURCES.find("fakesource") is FakeSource
    assert FakeSource.boundedness == "both"


def test_doc_random_generation_example():
    src = make(**{"row.num": 16, "schema": {"fields": ALL_TYPES}, "result_table_name": "fake"})
    assert src.options.row_num == 16
    (table,) = src.output().tables
    assert table.table_id == "fake"  # no schema.table: the plugin_output names the table
    types = {c.name: c.type for c in table.columns}
    assert types["c_map"] == "map<string,string>"
    assert types["c_decimal"] == "decimal(30,8)"
    assert types["c_bytes"] == "binary"
    assert types["c_null"] == "string"
    assert table.names == tuple(ALL_TYPES)


def test_doc_simple_example_with_inline_row_types():
    fields = {
        "c_map_nest": "map<string, {c_int = int, c_string = string}>",
        "c_row": {"c_int": "int", "c_array": "array<int>", "c_decimal": "decimal(30, 8)"},
    }
    (table,) = make(schema={"fields": fields}).output().tables
    assert table.column("c_map_nest").type == "map<string,struct<c_int: int, c_string: string>>"
    assert table.column("c_row").type == "struct<c_int: int, c_array: array<int>, c_decimal: decimal(30,8)>"


def test_row_types_in_json_form_and_inside_nested_rows():
    """SeaTunnel parses a row inside a type string as JSON ({"a": "int"}); the
    HOCON form works too, also inside a nested row object's field types."""
    fields = {
        "c_map_json": 'map<string, {"c_int": "int", "c_dec": "decimal(10, 2)"}>',
        "c_row": {"c_inner": "{x = int}", "c_deeper": {"m": 'map<string, {"y": "bigint"}>'}},
    }
    (table,) = make(schema={"fields": fields}).output().tables
    assert table.column("c_map_json").type == "map<string,struct<c_int: int, c_dec: decimal(10,2)>>"
    assert table.column("c_row").type == "struct<c_inner: struct<x: int>, c_deeper: struct<m: map<string,struct<y: bigint>>>>"


def test_default_table_id_without_table_or_plugin_output():
    assert make(schema={"fields": {"a": "int"}}).output().table_ids == ("default",)


def test_schema_table_wins_over_plugin_output():
    src = make(plugin_output="fake", schema={"table": "db.t", "fields": {"a": "int"}})
    assert src.output().table_ids == ("db.t",)


def test_doc_rows_example_and_kinds():
    row = [{"a": "b"}, [101], "c_string", True, 117, 15987, 56387395, 7084913402530365000, 1.23, 1.23,
           "2924137191386439303744.39292216", None, "bWlJWmo=", "2023-04-22", "2023-04-22T23:20:58"]  # fmt: skip
    rows = [{"kind": k, "fields": row} for k in ("INSERT", "UPDATE_BEFORE", "update_after", "DELETE")]
    src = make(schema={"fields": ALL_TYPES}, rows=rows)
    assert [r.kind for r in src.options.rows] == ["INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"]


def test_row_with_wrong_number_of_values():
    with pytest.raises(ValidationError, match=r"rows\[2\] \(DELETE\) has 2 values but the schema has 3 columns"):
        make(schema={"fields": {"a": "int", "b": "string", "c": "int"}},
             rows=[{"kind": "INSERT", "fields": [1, "A", 100]}, {"kind": "DELETE", "fields": [1, "A"]}])  # fmt: skip


def test_row_kind_must_be_known():
    with pytest.raises(ValidationError, match="kind"):
        make(schema={"fields": {"a": "int"}}, rows=[{"kind": "UPSERT", "fields": [1]}])


def test_doc_template_example():
    src = make(**{
        "row.num": 5,
        "string.fake.mode": "template",
        "string.template": ["tyrantlucifer", "hailin", "kris"],
        "tinyint.fake.mode": "template", "tinyint.template": [1, 2, 3],
        "smallint.template": [10, 11],
        "int.fake.mode": "template", "int.template": [20, 21],
        "bigint.fake.mode": "template", "bigint.template": [30, 31],
        "float.fake.mode": "template", "float.template": [40.0, 41.0],
        "double.fake.mode": "template", "double.template": [44.0, 45.0],
        "schema": {"fields": {"c_string": "string", "c_int": "int"}},
    })  # fmt: skip
    assert src.options.int_fake_mode == "template"
    assert src.options.string_template == ["tyrantlucifer", "hailin", "kris"]


def test_doc_template_example_typo_is_reported_by_key():
    # the SeaTunnel page writes "smalling.fake.mode"; an unknown key must be named as written
    with pytest.raises(ValidationError, match="smalling.fake.mode"):
        make(**{"smalling.fake.mode": "template", "schema": {"fields": {"a": "int"}}})


def test_doc_range_example_and_defaults():
    src = make(**{"row.num": 5, "tinyint.min": 1, "tinyint.max": 9, "float.min": 40.0, "float.max": 43.0,
                  "schema": {"fields": {"c_tinyint": "tinyint"}}})  # fmt: skip
    o = src.options
    assert (o.tinyint_min, o.tinyint_max, o.float_max) == (1, 9, 43.0)
    assert (o.split_num, o.split_read_interval, o.map_size, o.string_length) == (1, 1, 5, 5)
    assert o.int_max == 2**31 - 1 and o.bigint_max == 2**63 - 1


@pytest.mark.parametrize(
    "options, message",
    [
        ({"int.min": 5, "int.max": 1}, r"int.min \(5\) is greater than int.max \(1\)"),
        ({"tinyint.max": 300}, "tinyint.min/tinyint.max must lie within -128..127"),
        ({"int.fake.mode": "template"}, "int.fake.mode = template needs a non-empty int.template"),
        ({"string.fake.mode": "template"}, "string.fake.mode = template needs a non-empty string.template"),
        ({"string.fake.mode": "random"}, "string.fake.mode"),
        ({"row.num": -1}, "row.num"),
        ({"split.num": 0}, "split.num"),
    ],
)
def test_bad_value_options(options, message):
    with pytest.raises(ValidationError, match=message):
        make(schema={"fields": {"a": "int"}}, **options)


def test_schema_is_required():
    with pytest.raises(ValidationError, match="schema is required"):
        make(**{"row.num": 3})


def test_schema_needs_exactly_one_of_fields_and_columns():
    with pytest.raises(ValidationError, match="exactly one of `fields` or `columns`"):
        make(schema={"fields": {"a": "int"}, "columns": [{"name": "a", "type": "int"}]})


def test_unknown_and_vector_types_are_rejected_with_the_column_name():
    with pytest.raises(ValidationError, match="column 'a': unknown type 'integerr'"):
        make(schema={"fields": {"a": "integerr"}})
    with pytest.raises(ValidationError, match="column 'v'.*vector type"):
        make(schema={"columns": [{"name": "v", "type": "float_vector", "columnScale": 4}]})


def test_columns_form_with_nullable_default_value_and_primary_key():
    src = make(schema={
        "table": "simple_example",
        "columns": [
            {"name": "book_id", "type": "bigint", "nullable": False, "defaultValue": 0, "comment": "primary key id"},
            {"name": "published", "type": "timestamp", "defaultValue": "CURRENT_TIMESTAMP"},
            {"name": "t", "type": "time", "defaultValue": "15:45:30"},
        ],
        "primaryKey": {"name": "pk", "columnNames": ["book_id"]},
    })  # fmt: skip
    (table,) = src.output().tables
    assert table.table_id == "simple_example"
    assert table.primary_key == ("book_id",)
    assert [(c.name, c.type, c.nullable) for c in table.columns] == [
        ("book_id", "bigint", False), ("published", "timestamp", True), ("t", "string", True),
    ]  # fmt: skip


def test_primary_key_must_name_declared_columns():
    with pytest.raises(ValidationError, match="primaryKey column 'id' is not a declared column"):
        make(schema={"fields": {"pk_id": "bigint"}, "primaryKey": {"name": "pk", "columnNames": ["id"]}})


def test_duplicate_column_in_columns_form():
    with pytest.raises(ValidationError, match="column 'a' is declared twice"):
        make(schema={"columns": [{"name": "a", "type": "int"}, {"name": "a", "type": "string"}]})


def test_doc_multiple_tables_example():
    def item(n, table):
        fields = {"c_string": "string", "c_int": "int"}
        return {"row.num": n, "schema": {"table": table, "fields": fields}}

    src = make(tables_configs=[item(16, "test.table1"), item(17, "test.table2")])
    ds = src.output()
    assert ds.table_ids == ("test.table1", "test.table2")
    assert [cfg.row_num for _, cfg in src.table_configs()] == [16, 17]
    assert ds.tables[0].names == ("c_string", "c_int")


def test_tables_configs_items_may_arrive_with_nested_dotted_keys():
    # HOCON parses `row.num = 16` inside a list item as {"row": {"num": 16}}
    src = make(tables_configs=[{"row": {"num": 16}, "string": {"fake": {"mode": "template"}, "template": ["x"]},
                                "schema": {"table": "t1", "fields": {"a": "string"}}}])  # fmt: skip
    (_, cfg), = src.table_configs()
    assert cfg.row_num == 16 and cfg.string_fake_mode == "template"
    with pytest.raises(ValidationError, match="row.nmu"):
        make(tables_configs=[{"row": {"nmu": 1}, "schema": {"table": "t1", "fields": {"a": "int"}}}])


def test_tables_configs_item_needs_table_name_and_unique_names():
    with pytest.raises(ValidationError, match="each tables_configs item needs schema"):
        make(tables_configs=[{"schema": {"fields": {"a": "int"}}}])
    same = {"schema": {"table": "t", "fields": {"a": "int"}}}
    with pytest.raises(ValidationError, match="table 't' is declared twice"):
        make(tables_configs=[same, same])


def test_top_level_table_options_next_to_tables_configs_are_rejected():
    with pytest.raises(ValidationError, match="move row.num, schema into each tables_configs item"):
        make(**{"row.num": 3, "schema": {"fields": {"a": "int"}},
                "tables_configs": [{"schema": {"table": "t", "fields": {"a": "int"}}}]})  # fmt: skip


def test_top_level_seed_is_the_default_for_tables_configs_items():
    src = make(seed=7, tables_configs=[
        {"schema": {"table": "a", "fields": {"x": "int"}}},
        {"seed": 1, "schema": {"table": "b", "fields": {"x": "int"}}},
    ])  # fmt: skip
    assert [cfg.seed for _, cfg in src.table_configs()] == [7, 1]


def test_doc_table_names_example():
    src = make(**{"table-names": ["test.table1", "test.table2", "test.table3"], "parallelism": 1,
                  "schema": {"fields": {"name": "string", "age": "int"}}})  # fmt: skip
    ds = src.output()
    assert ds.table_ids == ("test.table1", "test.table2", "test.table3")
    assert all(t.names == ("name", "age") for t in ds.tables)


def test_table_names_conflicts_with_schema_table():
    with pytest.raises(ValidationError, match="either schema.table or table-names"):
        make(**{"table-names": ["a"], "schema": {"table": "b", "fields": {"x": "int"}}})


def test_describe_mentions_row_counts():
    assert "16 rows" in make(**{"row.num": 16, "schema": {"fields": {"a": "int"}}}).describe()


# -- rows values: SeaTunnel's notation, read at plan time -------------------

TYPED = {
    "c_tinyint": "tinyint", "c_bytes": "bytes", "c_date": "date", "c_map": "map<int, string>",
    "c_row": {"c_inner": {"x": "int"}, "c_decimal": "decimal(5, 2)"}, "c_ts": "timestamp", "c_bool": "boolean",
    "c_time": "time",
}  # fmt: skip
GOOD = [1, "bWlJWmo=", "2023-04-22", {"1": "a"}, [{"x": 1}, "1.5"], "2023-04-22T23:20:58", True, "23:20:58"]


@pytest.mark.parametrize(
    "column, value, message",
    [
        (0, 300, r"rows\[2\] \(INSERT\) c_tinyint: 300 is out of the tinyint range -128..127"),
        (0, "12a", r"c_tinyint: expected a whole number for tinyint, got '12a'"),
        (1, "not base64!", r"c_bytes: expected a base64 string for bytes"),
        (2, "22/04/2023", r"c_date: expected a date such as 2023-04-22"),
        (2, "2023-02-30", r"c_date: '2023-02-30' is not a date"),
        (3, [[1, "a"]], r"c_map: expected an object \{key = value, ...\} for map<int, string>"),
        (3, {"one": "a"}, r"c_map\.one: expected a whole number for int, got 'one'"),
        (4, {"c_inner": {"y": 1}}, r"c_row\.c_inner: no field 'y'; the fields are x"),
        (4, [{"x": 1}, "12345.6"], r"c_row\.c_decimal: 12345.6 does not fit decimal\(5,2\)"),
        (4, [{"x": 1}], r"c_row: expected 2 values \(c_inner, c_decimal\), got 1"),
        (5, "2023-04-22 23:20", r"c_ts: expected a timestamp such as 2023-04-22T23:20:58"),
        (6, "yes", r"c_bool: expected true or false for boolean, got 'yes'"),
        (7, "25:00:00", r"c_time: '25:00:00' is not a time of day"),
    ],
)
def test_rows_values_that_do_not_read_as_their_type_fail_at_plan_time(column, value, message):
    fields = list(GOOD)
    fields[column] = value
    make(schema={"fields": TYPED}, rows=[{"kind": "INSERT", "fields": list(GOOD)}])  # the good row passes
    with pytest.raises(ValidationError, match=message):
        make(schema={"fields": TYPED}, rows=[{"kind": "INSERT", "fields": list(GOOD)}, {"kind": "INSERT", "fields": fields}])


def test_rows_values_in_seatunnel_notation_become_typed_values():
    from sources._fake_types import coerce_fields, column_types

    src = make(schema={"fields": TYPED}, rows=[
        {"kind": "INSERT", "fields": GOOD},
        # by name, nested objects as written; missing columns are null
        {"kind": "DELETE", "fields": {"c_row": {"c_inner": {"x": 2}}, "c_map": "{\"2\": \"b\"}", "c_ts": "20230422232058"}},
    ])  # fmt: skip
    columns = [(n, t) for n, t, _ in column_types(src.options.schema_)]
    first, second = (coerce_fields(r.fields, columns) for r in src.options.rows)
    assert first == [
        1, b"miIZj", dt.date(2023, 4, 22), [(1, "a")], {"c_inner": {"x": 1}, "c_decimal": Decimal("1.50")},
        dt.datetime(2023, 4, 22, 23, 20, 58, tzinfo=dt.timezone.utc), True, "23:20:58",
    ]  # fmt: skip
    assert second == [
        None, None, None, [(2, "b")], {"c_inner": {"x": 2}, "c_decimal": None},
        dt.datetime(2023, 4, 22, 23, 20, 58, tzinfo=dt.timezone.utc), None, None,
    ]  # fmt: skip


def test_map_and_row_values_are_taken_as_written():
    """Keys are data: one holding dots is one key (the loader no longer turns
    nested objects into dotted keys, so nothing is regrouped)."""
    from sources._fake_types import coerce, parse_type

    nest = parse_type("map<string, {c_int = int, c_string = string}>")
    assert coerce({"k1": {"c_int": 1, "c_string": "x"}, "k.2": {"c_int": 3}}, nest) == [
        ("k1", {"c_int": 1, "c_string": "x"}), ("k.2", {"c_int": 3, "c_string": None}),
    ]  # fmt: skip
    assert coerce({"a.b": {"c": "d"}}, parse_type("map<string, map<string, string>>")) == [("a.b", [("c", "d")])]
    assert coerce({"a.b": "c"}, parse_type("map<string, string>")) == [("a.b", "c")]
    with pytest.raises(ValueError, match="no field 'c_inner.x'"):
        coerce({"c_inner.x": 1}, parse_type("{c_inner = {x = int}}"))
    assert coerce({"a": 1, "a ": 2}, parse_type("map<string, int>")) == [("a", 1), ("a ", 2)]
    assert coerce({"1": "x", "01": "y"}, parse_type("map<int, string>")) == [(1, "y")]  # one key: the last value


def test_scalar_notations_follow_seatunnel():
    from sources._fake_types import Clock, coerce, parse_type

    def c(v, t, clock=Clock()):
        return coerce(v, parse_type(t), clock)

    assert c("2023/04/22", "date") == c("2023.04.22", "date") == c(20230422, "date") == dt.date(2023, 4, 22)
    assert c("2023-04-22 23:20:58.1234567", "timestamp_ntz") == dt.datetime(2023, 4, 22, 23, 20, 58, 123456)
    assert c("2023/04/22 23:20:58", "timestamp_ntz") == dt.datetime(2023, 4, 22, 23, 20, 58)
    assert c("2023-04-22T23:20:58", "timestamp", Clock(0, "+08:00")).utcoffset() == dt.timedelta(hours=8)
    assert c("23:20:58.500", "time") == "23:20:58.5" and c(12.345, "decimal(10, 2)") == Decimal("12.35")
    assert c("7084913402530365000", "bigint") == 7084913402530365000 and c(117.0, "tinyint") == 117
    assert c("1.5", "float") == 1.5 and c(1, "double") == 1.0 and c("TRUE", "boolean") is True
    assert c({"a": [1]}, "string") == '{"a":[1]}' and c(True, "string") == "true" and c("x", "null") is None
    noon = Clock(12 * 3600 * 1000, "UTC")  # 1970-01-01 12:00 UTC
    assert c("CURRENT_TIMESTAMP", "timestamp_ntz", noon) == dt.datetime(1970, 1, 1, 12)
    assert (c("CURRENT_DATE", "date", noon), c("CURRENT_TIME", "time", noon)) == (dt.date(1970, 1, 1), "12:00:00")
    assert c("CURRENT_DATE", "date", Clock(23 * 3600 * 1000, "Asia/Tokyo")) == dt.date(1970, 1, 2)


def test_type_tree_gives_the_schema_spark_types():
    from sources._fake_types import column_types

    fields = {
        **ALL_TYPES, "c_time": "time", "c_map_nest": "map<string, {c_int = int, c_string = string}>",
        "c_struct": "struct<a: int, `b c`: string>",
        "c_row": {"c_map": "map<string, map<string, string>>", "c_array": "array<int>", "c_decimal": "decimal"},
    }  # fmt: skip
    src = make(schema={"fields": fields})
    spark_types = [c.type for c in src.output().tables[0].columns]
    assert [t.ddl() for _, t, _ in column_types(src.options.schema_)] == spark_types


def test_rows_null_in_a_not_nullable_column_is_refused():
    columns = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "s", "type": "string"}]
    make(schema={"columns": columns}, rows=[{"kind": "INSERT", "fields": [1, None]}])
    with pytest.raises(ValidationError, match=r"rows\[1\] \(INSERT\) id: null in a column declared nullable = false"):
        make(schema={"columns": columns}, rows=[{"kind": "INSERT", "fields": {"s": "x"}}])


def test_map_keys_of_type_null_are_refused():
    with pytest.raises(ValidationError, match=r"column 'm': map keys cannot be of type null"):
        make(schema={"fields": {"m": "map<null, int>"}})


def test_default_values_must_read_as_their_column_type():
    with pytest.raises(ValidationError, match=r"column 'n' \(int\): defaultValue 'abc': expected a whole number"):
        make(schema={"columns": [{"name": "n", "type": "int", "defaultValue": "abc"}]})
    with pytest.raises(ValidationError, match=r"column 't' \(time\): defaultValue '25:00'"):
        make(schema={"columns": [{"name": "t", "type": "time", "defaultValue": "25:00"}]})


def test_default_values_as_seatunnel_reads_them():
    from sources._fake_types import default_value, parse_type

    cfg = make(**{"array.size": 3, "schema": {"fields": {"a": "int"}}}).options
    assert default_value("abc", parse_type("bytes"), cfg) == b"abc"  # text bytes, not base64 (SeaTunnel's getBytes)
    assert default_value("15:45", parse_type("time"), cfg) == "15:45:00"
    assert default_value(5, parse_type("array<int>"), cfg) == [5, 5, 5]
    assert default_value("2024-09-12", parse_type("map<date, string>"), cfg) == [(dt.date(2024, 9, 12), "2024-09-12")]


def test_template_options_and_fake_mode():
    src = make(**{"smallint.template": [10, 11], "schema": {"fields": {"a": "smallint"}}})
    assert src.options.smallint_fake_mode == "range" and src.options.smallint_template == [10, 11]
    with pytest.raises(ValidationError, match="tinyint.template has values outside the tinyint range"):
        make(**{"tinyint.template": [1, 300], "schema": {"fields": {"a": "tinyint"}}})
