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


def test_table_frames_are_built_once_on_first_use_and_views_share_the_build():
    from streaming_engine.runtime.rows import TableFrames, subset

    built = []

    def build():
        built.append(1)
        return {"a": "frame-a", "b": "frame-b", "c": "frame-c"}

    frames = TableFrames(["a", "b", "c"], build)
    view = frames.subset(["c", "a"])
    narrower = subset(view, ["a"])
    # keys, membership and sizes never build
    assert list(frames) == ["a", "b", "c"] and list(view) == ["c", "a"] and len(narrower) == 1
    assert "b" in frames and "b" not in view
    assert built == []
    assert narrower["a"] == "frame-a"
    assert dict(view.items()) == {"c": "frame-c", "a": "frame-a"}
    assert frames["b"] == "frame-b"
    assert built == [1]  # one build for the mapping and all its views
    import pytest

    with pytest.raises(KeyError):
        view["b"]
    with pytest.raises(KeyError):
        frames.subset(["z"])
    assert subset({"a": 1, "b": 2}, ["b"]) == {"b": 2}
