"""The multi-table envelope's slot layout (runtime/rows.layout): pure data, no Spark."""

from streaming_engine.runtime.rows import layout
from streaming_engine.schema import Dataset, schema_from_fields


def _ds(*tables):
    return Dataset(tuple(schema_from_fields(tid, fields) for tid, fields in tables))


def test_tables_share_slots_by_type_so_a_row_is_as_wide_as_the_widest_table():
    ds = _ds(*[(f"t{i}", {"id": "bigint", "v": "double", "s": "string"}) for i in range(100)])
    lay = layout(ds)
    assert lay.slots == (("__c0", "bigint"), ("__c1", "double"), ("__c2", "string"))
    assert set(lay.columns.values()) == {("__c0", "__c1", "__c2")}


def test_each_type_gets_as_many_slots_as_the_table_with_most_columns_of_it():
    ds = _ds(
        ("a", {"id": "bigint", "name": "string"}),
        ("b", {"code": "string", "label": "string", "n": "bigint", "m": "bigint", "at": "timestamp"}),
        ("c", {"x": "decimal(10,2)", "y": "decimal(12,2)", "note": "string"}),
    )
    lay = layout(ds)
    types = [t for _, t in lay.slots]
    assert sorted(types) == sorted(["bigint", "bigint", "string", "string", "timestamp", "decimal(10,2)", "decimal(12,2)"])
    for t in ds.tables:
        slots = lay.columns[t.table_id]
        assert len(set(slots)) == len(slots) == len(t.columns)  # no two columns of a table share a slot
        assert [lay.slot_type(s) for s in slots] == [c.type for c in t.columns]  # a slot holds one type only
