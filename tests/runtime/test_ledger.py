"""The commit ledger's table: created empty once (directly, no Spark job), then appended per epoch."""

import json

from streaming_engine.checkpoint import ledger
from streaming_engine.runtime.context import CommitRecord


def _versions(path):
    return sorted(int(p.stem) for p in (path / "_delta_log").glob("*.json"))


def test_ensure_creates_the_empty_ledger_once_and_record_appends(spark, tmp_path):
    path = tmp_path / "job" / "_ledger"
    ledger.ensure(spark, str(path))
    assert _versions(path) == [0]
    commit0 = [json.loads(ln) for ln in (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    assert not [a for a in commit0 if "add" in a]  # metadata only
    schema = json.loads(next(a for a in commit0 if "metaData" in a)["metaData"]["schemaString"])
    assert [f["name"] for f in schema["fields"]] == [
        "job", "pipeline", "epoch", "sink", "table", "target", "delta_version", "rows", "replayed", "committed_at"
    ]
    assert spark.read.format("delta").load(str(path)).count() == 0
    ledger.ensure(spark, str(path))  # there already: no new version
    assert _versions(path) == [0]
    # committed_at is the commit's instant whatever the session's (or host's) time zone
    import time

    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Pacific/Kiritimati")  # UTC+14
    try:
        ledger.record(spark, str(path), "job", "p", 0, [CommitRecord("sink", "db.t", "/x", 5, 3, False)])
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert _versions(path) == [0, 1]
    rows = spark.read.format("delta").load(str(path)).selectExpr("*", "unix_timestamp(committed_at) AS at").collect()
    assert [(r.epoch, r.table, r.delta_version, r.rows) for r in rows] == [(0, "db.t", 3, 5)]
    assert abs(rows[0].at - time.time()) < 120


def test_ledger_appends_carry_statistics_and_operation_metrics(spark, tmp_path):
    path = tmp_path / "job" / "_ledger"
    ledger.ensure(spark, str(path))
    for epoch in (0, 1):
        ledger.record(spark, str(path), "job", "p", epoch, [CommitRecord("s", "db.t", "/x", 5 + epoch, epoch, False)])
    commit = [json.loads(ln) for ln in (path / "_delta_log" / f"{2:020d}.json").read_text().splitlines()]
    [add] = [a["add"] for a in commit if "add" in a]
    stats = json.loads(add["stats"])
    assert stats["numRecords"] == 1 and stats["minValues"]["epoch"] == stats["maxValues"]["epoch"] == 1
    assert stats["nullCount"]["delta_version"] == 0 and stats["minValues"]["rows"] == 6
    [info] = [a["commitInfo"] for a in commit if "commitInfo" in a]
    assert info["operationMetrics"] == {"numFiles": "1", "numOutputRows": "1", "numOutputBytes": str(add["size"])}
    # the committed_at statistics agree with the data (whole milliseconds): a range query finds the row
    [row] = spark.read.format("delta").load(str(path)).where("epoch = 1").collect()
    at = row.committed_at
    found = spark.read.format("delta").load(str(path)).where(f"committed_at >= '{stats['minValues']['committed_at'][:-1]}'")
    assert at.microsecond % 1000 == 0 and found.where("epoch = 1").count() == 1
