"""Delta sink: options, per-table checks, placeholder targets."""

import pytest
from pydantic import ValidationError

from sinks.delta import Delta, DeltaSinkOptions
from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import SINKS
from streaming_engine.schema import Column, Dataset, TableSchema

ORDERS = TableSchema("db1.orders", (Column("id", "bigint"), Column("amount", "double"), Column("ts", "timestamp")), ("id",))
ITEMS = TableSchema("db1.items", (Column("item_id", "bigint"), Column("ts", "timestamp")))


def make(**options):
    return Delta(DeltaSinkOptions.model_validate(options))


def test_traits():
    assert SINKS.find("delta") is Delta
    assert Delta.commit_protocol == "delta-txn"


def test_append_to_placeholder_path_per_table():
    sink = make(path="/tmp/wh/${database_name}/${table_name}")
    ds = Dataset((ORDERS, ITEMS))
    sink.check_input(ds)
    assert sink.targets(ds) == [
        "db1.orders -> /tmp/wh/db1/orders (append)",
        "db1.items -> /tmp/wh/db1/items (append)",
    ]


def test_upsert_uses_table_key_or_option_and_sequence_column():
    sink = make(path="/tmp/wh/${table_name}", save_mode="UPSERT")
    sink.check_input(Dataset((ORDERS,)))
    assert sink.targets(Dataset((ORDERS,))) == ["db1.orders -> /tmp/wh/orders (upsert by id)"]
    keyed = make(table="lake.${table_name}", write_mode="upsert", primary_key="item_id", sequence_column="ts")
    keyed.check_input(Dataset((ITEMS,)))
    assert keyed.targets(Dataset((ITEMS,))) == ["db1.items -> table lake.items (upsert by item_id, newest ts, tombstones kept 7d)"]


def test_primary_key_placeholder_idiom_means_table_key():
    assert make(path="/x/${table_name}", save_mode="upsert", primary_keys=["${primary_key}"]).options.primary_key is None


def test_upsert_without_any_key_is_incompatible():
    with pytest.raises(SchemaError) as e:
        make(path="/x/${table_name}", save_mode="upsert").check_input(Dataset((ORDERS, ITEMS)))
    assert e.value.condition == "SCHEMA.INCOMPATIBLE" and e.value.params["table"] == "db1.items"
    assert "primary_key" in e.value.params["detail"]


@pytest.mark.parametrize(
    "options, column",
    [
        ({"primary_key": ["order_id"]}, "order_id"),
        ({"sequence_column": "updated_at"}, "updated_at"),
        ({"partition_by": ["day"], "save_mode": "append"}, "day"),
    ],
)
def test_missing_key_sequence_or_partition_column(options, column):
    opts = {"path": "/x/${table_name}", "save_mode": "upsert", **options}
    with pytest.raises(SchemaError) as e:
        make(**opts).check_input(Dataset((ORDERS,)))
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert (e.value.params["column"], e.value.params["table"]) == (column, "db1.orders")


def test_sequence_column_must_be_orderable():
    t = TableSchema("t", (Column("id", "int"), Column("v", "map<string,string>")), ("id",))
    with pytest.raises(SchemaError, match="sequence_column 'v' is map"):
        make(path="/x", save_mode="upsert", sequence_column="v").check_input(Dataset((t,)))


def test_two_tables_to_one_path():
    with pytest.raises(SchemaError) as e:
        make(path="/tmp/wh/all").check_input(Dataset((ORDERS, ITEMS)))
    assert e.value.condition == "SCHEMA.INCOMPATIBLE" and "${table_name}" in e.value.params["detail"]


def test_catalog_names_as_spark_reads_them():
    """Catalog names: quoted where Spark's parser needs it, refused where its catalog would, one table whatever the case."""
    def table(tid):
        return TableSchema(tid, (Column("id", "bigint"),))

    sink = make(table="lake.${table_name}")
    ds = Dataset((table("shop.2024"), table("shop.Orders")))
    sink.check_input(ds)
    assert sink.targets(ds) == ["shop.2024 -> table lake.`2024` (append)", "shop.Orders -> table lake.Orders (append)"]
    assert make(table="`lake`.${table_name}").target_for(table("s.t")) == "lake.t"
    with pytest.raises(SchemaError, match="does not tell its table 'lake.ORDERS' apart from 'lake.Orders' of 'shop.Orders'"):
        sink.check_input(Dataset((table("shop.Orders"), table("shop.ORDERS"))))
    with pytest.raises(SchemaError, match="only letters, digits and _, not 'user-shop'.*TableRename"):
        sink.check_input(Dataset((table("shop.user-shop"),)))
    with pytest.raises(SchemaError, match="not one to three names"):
        make(table="a.b.${table_full_name}").check_input(Dataset((table("shop.t"),)))
    # paths are case-sensitive: two targets
    make(path="/x/${table_name}").check_input(Dataset((table("shop.Orders"), table("shop.ORDERS"))))


def test_placeholder_the_table_cannot_fill():
    with pytest.raises(SchemaError) as e:
        make(path="/wh/${database_name}/${table_name}").check_input(Dataset((TableSchema("orders", ORDERS.columns),)))
    assert e.value.params["table"] == "orders" and "${database_name}" in e.value.params["detail"]


def test_column_names_delta_rejects():
    t = TableSchema("t", (Column("order id", "int"),))
    with pytest.raises(SchemaError, match="column name 'order id'"):
        make(path="/x").check_input(Dataset((t,)))


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "exactly one of path"),
        ({"path": "/a", "table": "b"}, "exactly one of path"),
        ({"path": "/a/${tabel_name}"}, r"unknown placeholder \$\{tabel_name\}"),
        ({"path": "/a", "save_mode": "overwrite"}, "save_mode"),
        ({"path": "/a", "primary_key": ["id"]}, "primary_key only applies to save_mode = upsert"),
        ({"path": "/a", "sequence_column": "ts"}, "sequence_column only applies to save_mode = upsert"),
        ({"path": "/a", "save_mode": "upsert", "primary_key": []}, "primary_key is empty"),
        ({"path": "/a", "save_mode": "upsert", "primary_key": ["id", "id"]}, "primary_key lists a column twice"),
        ({"path": "/a", "stored_as_scd_type": 2}, "stored_as_scd_type = 2 applies changes: set save_mode = upsert"),
        ({"path": "/a", "save_mode": "upsert", "stored_as_scd_type": 2}, "set sequence_column .* or source_order_column"),
        ({"path": "/a", "save_mode": "upsert", "stored_as_scd_type": 3}, "stored_as_scd_type"),
        ({"path": "/a", "save_mode": "upsert", "track_history_column_list": ["ts"]}, "only applies to stored_as_scd_type = 2"),
        ({"path": "/a", "save_mode": "upsert", "sequence_column": "ts", "stored_as_scd_type": 2,
          "track_history_column_list": "a", "track_history_except_column_list": "b"}, "not both"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValidationError, match=message):
        DeltaSinkOptions.model_validate(options)


def test_scd_type_2_tracks_the_listed_columns_and_never_the_key_or_sequence():
    base = {"path": "/w/${table_name}", "save_mode": "upsert", "sequence_column": "ts", "stored_as_scd_type": "2"}
    sink = make(**base)
    assert sink.tracked(ORDERS) == ["amount"]
    assert not sink.applies_truncates()
    assert "SCD type 2: __START_AT/__END_AT from ts, history of amount" in sink.targets(Dataset((ORDERS,)))[0]
    assert make(**base, track_history_except_column_list=["amount"]).tracked(ORDERS) == []
    with pytest.raises(SchemaError, match="column 'nope' does not exist"):
        make(**base, track_history_column_list=["nope"]).check_input(Dataset((ORDERS,)))
    clash = TableSchema("db1.h", (Column("id", "bigint"), Column("__END_AT", "bigint"), Column("ts", "bigint")), ("id",))
    with pytest.raises(SchemaError, match="SCD type 2 validity column"):
        sink.check_input(Dataset((clash,)))
