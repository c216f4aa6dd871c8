"""The reader's per-epoch store of TOASTable values under replica.identity = DEFAULT (sources/_pg/reader._Latest):
in memory up to its limit, then in a temporary SQLite file, with the same answers either way."""

from __future__ import annotations

from sources._pg.reader import _Latest


def test_values_spill_to_disk_past_the_limit_and_answer_the_same():
    store = _Latest(limit=1000)
    store.put(("t", ("1",)), {"doc": "a" * 400})
    store.put(("t", ("2",)), {"doc": "b" * 400})
    store.put(("t", ("2",)), {"doc": "c" * 100})  # a replaced value counts once
    assert not store.spilled and store.get(("t", ("2",))) == {"doc": "c" * 100}
    store.pop(("t", ("1",)))
    assert store.get(("t", ("1",))) is None and store.bytes < 1000
    store.put(("t", ("3",)), {"doc": "d" * 2000, "other": None})  # past the limit: everything moves to the file
    assert store.spilled
    assert store.get(("t", ("2",))) == {"doc": "c" * 100} and store.get(("t", ("3",))) == {"doc": "d" * 2000, "other": None}
    store.put(("t", ("2",)), {"doc": "e"})
    store.pop(("t", ("3",)))
    store.put(("u", ("3",)), {"doc": "f"})  # another table, same key text
    assert store.get(("t", ("2",))) == {"doc": "e"} and store.get(("t", ("3",))) is None
    assert store.get(("u", ("3",))) == {"doc": "f"}
    store.close()
    assert store.get(("t", ("2",))) is None and not store.spilled
