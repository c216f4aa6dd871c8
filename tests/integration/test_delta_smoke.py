"""Smoke tests of the local runtime: Delta Lake and the Kafka source are on the classpath.

The idempotent-append test pins down the mechanism the engine's exactly-once
sinks rely on: a Delta write carrying (txnAppId, txnVersion) that the table has
already seen is skipped.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, name STRING"


def test_delta_write_read_roundtrip(spark, tmp_path):
    path = str(tmp_path / "roundtrip")
    rows = [(1, "a"), (2, "b"), (3, None)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").save(path)

    back = spark.read.format("delta").load(path)
    assert back.schema.simpleString() == "struct<id:bigint,name:string>"
    assert sorted(tuple(r) for r in back.collect()) == sorted(rows, key=lambda r: r[0])
    assert (tmp_path / "roundtrip" / "_delta_log").is_dir()
    assert (tmp_path / "roundtrip" / "_delta_log" / "00000000000000000000.json").is_file()


def test_delta_append_with_same_txn_version_is_skipped(spark, tmp_path):
    from delta.tables import DeltaTable

    path = str(tmp_path / "idempotent")
    spark.createDataFrame([(0, "seed")], SCHEMA).write.format("delta").save(path)

    def append(batch_id: int, rows):
        (
            spark.createDataFrame(rows, SCHEMA)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "test-query")
            .option("txnVersion", batch_id)
            .save(path)
        )

    def count() -> int:
        return spark.read.format("delta").load(path).count()

    append(7, [(1, "x"), (2, "y")])
    assert count() == 3
    versions = DeltaTable.forPath(spark, path).history().count()

    append(7, [(1, "x"), (2, "y")])  # a replayed batch: must be a no-op
    assert count() == 3
    assert DeltaTable.forPath(spark, path).history().count() == versions  # no new commit

    append(6, [(9, "old")])  # an older batch of the same writer is skipped too
    assert count() == 3

    append(8, [(3, "z")])  # the next batch is written
    assert count() == 4


def test_kafka_source_is_available(spark):
    df = (
        spark.readStream.format("kafka")
        .option("subscribe", "x")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .load()
    )  # building the streaming DataFrame does not connect
    assert df.isStreaming
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
