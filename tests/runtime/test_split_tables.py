"""rows.split_tables: one flat frame per table of a multi-table batch, built by
the engine's JVM helper (Envelope.java) in one call, or here in Python when the
helper is not loaded. Both must give the same frames."""

import pytest

from streaming_engine.runtime import rows
from streaming_engine.schema import Dataset, schema_from_fields


def _batch(spark):
    ds = Dataset((
        schema_from_fields("db.a", {"id": "bigint", "odd name.x`y": "string"}),
        schema_from_fields("db.b", {"n": "bigint", "m": "bigint", "at": "date"}),
    ))
    lay = rows.layout(ds)
    slots = [s for s, _ in lay.slots]
    data = [
        ("db.a", "+I", 0, *[{"__c0": 1, lay.columns["db.a"][1]: "x"}.get(s) for s in slots]),
        ("db.b", "-D", 1, *[{lay.columns["db.b"][0]: 7, lay.columns["db.b"][1]: 8}.get(s) for s in slots]),
        ("db.a", "+U", 2, *[{"__c0": 2, lay.columns["db.a"][1]: "z"}.get(s) for s in slots]),
    ]
    struct = rows.envelope_struct(ds)
    return spark.createDataFrame(data, struct), ds


def _collect(frames):
    return {t: (df.columns, sorted(tuple(r) for r in df.collect())) for t, df in frames.items()}


@pytest.mark.spark
def test_jvm_and_python_splits_agree(spark, monkeypatch):
    from streaming_engine import jvm

    df, ds = _batch(spark)
    assert jvm.jvm_class(spark._jvm, rows.ENVELOPE_CLASS) is not None, "the engine jar is on the class path (bootstrap builds it)"
    jvm_frames = rows.split_tables(df, ds)
    # as on a JVM without the engine's jar
    monkeypatch.setitem(jvm._JVM_CONSTANTS, (id(spark._jvm), rows.ENVELOPE_CLASS), None)
    py_frames = rows.split_tables(df, ds)
    got = _collect(jvm_frames)
    assert got == _collect(py_frames)
    assert got["db.a"] == (["__table", "__kind", "__seq", "id", "odd name.x`y"], [("db.a", "+I", 0, 1, "x"), ("db.a", "+U", 2, 2, "z")])
    assert got["db.b"][1] == [("db.b", "-D", 1, 7, 8, None)]


@pytest.mark.spark
def test_joining_the_split_frames_gives_the_batch_back_in_the_jvm_and_in_python(spark, monkeypatch):
    """rows.join_tables (the sinks' envelope of per-table frames after transforms)
    undoes split_tables: the same rows in the same slots, each row's table id
    its frame's (a frame whose rows say another table, as after a renaming
    transform, is labelled by the frame), each table in one partition."""
    from pyspark.sql import functions as F

    from streaming_engine import jvm

    df, ds = _batch(spark)
    df = df.repartition(3, rows.SEQ)  # each table's rows over several partitions
    frames = rows.split_tables(df, ds)
    frames["db.b"] = frames["db.b"].withColumn(rows.TABLE, F.lit("db.old_b"))
    lay = rows.layout(ds)
    joined = {}
    for way in ("jvm", "python"):
        if way == "python":  # as on a JVM without the engine's jar
            monkeypatch.setitem(jvm._JVM_CONSTANTS, (id(spark._jvm), rows.ENVELOPE_CLASS), None)
        batch = rows.join_tables([frames["db.a"], frames["db.b"]], ds, lay)
        assert batch.columns == df.columns, way
        assert batch.rdd.getNumPartitions() == 2, way
        per_partition = batch.rdd.glom().map(lambda part: sorted({r[0] for r in part})).collect()
        assert sorted(per_partition) == [["db.a"], ["db.b"]], (way, per_partition)
        joined[way] = sorted(tuple(r) for r in batch.collect())
    assert joined["jvm"] == joined["python"] == sorted(tuple(r) for r in df.collect())


@pytest.mark.spark
def test_types_built_without_the_jvm_equal_the_jvm_parse(spark):
    """rows.data_type builds the fixed types in Python and parses the others in
    the JVM: every one equals Spark's own parse, and a table's struct equals the
    parse of its DDL (the envelope's metadata first, every field nullable)."""
    from pyspark.sql.types import _parse_datatype_string

    names = ["bigint", "long", "INT", "integer", "smallint", "short", "tinyint", "byte", "double", "float", "real",
             "boolean", "date", "binary", "decimal(12,2)", "DECIMAL(38, 0)", "numeric(5,5)", "dec(1,0)", "string",
             "timestamp", "timestamp_ntz", "array<string>", "map<string,bigint>", "struct<a:int,`b c`:string>"]
    for name in names:
        assert rows.data_type(name) == _parse_datatype_string(name), name
    with pytest.raises(Exception, match="(?i)decimal"):
        rows.data_type("decimal(40,2)")  # as Spark refuses it
    table = schema_from_fields("db.t", {"id": "bigint", "odd name.x`y": "string", "amount": "decimal(12,2)",
                                        "at": "timestamp", "tags": "array<string>"})
    assert rows.table_struct(table) == _parse_datatype_string(rows.table_ddl(table))
    assert rows.table_struct(table, meta=False) == _parse_datatype_string(rows.table_ddl(table, meta=False))
