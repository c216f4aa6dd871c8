"""The commit ledger's table: created at query start (or by the first epoch's record), then appended per epoch (directly, no Spark job)."""

import json

import pytest

from streaming_engine.checkpoint import ledger
from streaming_engine.runtime.context import CommitRecord


def _versions(path):
    return sorted(int(p.stem) for p in (path / "_delta_log").glob("*.json"))


def test_the_first_record_creates_the_ledger_and_concurrent_first_records_all_land(spark, tmp_path):
    """No table before the first epoch; pipelines of one job record their
    first epochs concurrently: the one that loses the race to create the
    table (ProtocolChangedException) appends to the table the other made."""
    import threading

    path = tmp_path / "job" / "_ledger"
    # a replayed first epoch (the run died before the ledger existed) finds no rows and records them
    assert ledger.record(spark, str(path), "job", "p0", 0, [CommitRecord("sink", "db.t", "/x", 1, 0, False)], replay=True)
    assert _versions(path) == [0]
    commit0 = [json.loads(ln) for ln in (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    schema = json.loads(next(a for a in commit0 if "metaData" in a)["metaData"]["schemaString"])
    assert [f["name"] for f in schema["fields"]] == [
        "job", "pipeline", "epoch", "sink", "table", "target", "delta_version", "rows", "replayed", "committed_at"
    ]
    assert len([a for a in commit0 if "add" in a]) == 1  # the epoch's rows, in the creating commit

    racing = tmp_path / "race" / "_ledger"
    # every first attempt waits, after its transaction read "no table", until all
    # four have: the race to create the table is certain, not left to timing
    start, errors, seen = threading.Barrier(4), [], threading.local()

    def after_read() -> None:
        if not getattr(seen, "waited", False):
            seen.waited = True
            start.wait(timeout=60)

    def first(pipeline: str) -> None:
        try:
            ledger.record(spark, str(racing), "job", pipeline, 0, [CommitRecord("sink", "db.t", "/x", 1, 0, False)],
                          before_commit=after_read)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=first, args=(f"p{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = sorted(r.pipeline for r in spark.read.format("delta").load(str(racing)).collect())
    assert got == ["p0", "p1", "p2", "p3"]
    assert _versions(racing) == [0, 1, 2, 3]

    # committed_at is the commit's instant whatever the session's (or host's) time zone
    import time

    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Pacific/Kiritimati")  # UTC+14
    try:
        ledger.record(spark, str(path), "job", "p", 0, [CommitRecord("sink", "db.t", "/x", 5, 3, False)])
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert _versions(path) == [0, 1]
    rows = (spark.read.format("delta").load(str(path)).where("pipeline = 'p'")
            .selectExpr("*", "unix_timestamp(committed_at) AS at").collect())
    assert [(r.epoch, r.table, r.delta_version, r.rows) for r in rows] == [(0, "db.t", 3, 5)]
    assert abs(rows[0].at - time.time()) < 120


def test_pipelines_starting_together_create_one_empty_ledger(spark, tmp_path, monkeypatch):
    """At query start every pipeline of a job creates the ledger if it has
    none (so the first epoch appends, off the creation's requests): of four
    racing, one creates it and the others find it; epochs then append."""
    import threading

    from streaming_engine.checkpoint import delta_log

    path = tmp_path / "job" / "_ledger"
    read, real = threading.Barrier(4), delta_log._new_metadata

    def after_read(*args, **kwargs):  # every creator read "no table" before any commits: a certain race
        read.wait(timeout=60)
        return real(*args, **kwargs)

    monkeypatch.setattr(delta_log, "_new_metadata", after_read)
    created, errors = [], []

    def create() -> None:
        try:
            created.append(ledger.create(spark, str(path)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(created) == [False, False, False, True]
    assert _versions(path) == [0]
    monkeypatch.setattr(delta_log, "_new_metadata", real)
    assert ledger.create(spark, str(path)) is False
    assert spark.read.format("delta").load(str(path)).count() == 0
    assert ledger.record(spark, str(path), "job", "p0", 0, [CommitRecord("sink", "db.t", "/x", 1, 0, False)])
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [(h.version, h.operation) for h in history] == [(0, "CREATE TABLE"), (1, "WRITE")]
    props = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
    assert ("delta.checkpointInterval", "100") in [(r.key, r.value) for r in props]


@pytest.mark.parametrize("engine_jar", [True, False], ids=["engine-jar", "no-engine-jar"])
def test_ledger_appends_carry_statistics_and_operation_metrics(spark, tmp_path, monkeypatch, engine_jar):
    """The same commit whether the engine's jar commits it in one call or py4j does, step by step."""
    from streaming_engine.checkpoint import delta_log

    if not engine_jar:
        monkeypatch.setattr(delta_log, "MULTI_TABLE_CLASS", "io.streamingengine.spark.NotBuilt")
    path = tmp_path / "job" / "_ledger"
    for epoch in (0, 1):
        ledger.record(spark, str(path), "job", "p", epoch, [CommitRecord("s", "db.t", "/x", 5 + epoch, epoch, False)])
    commit = [json.loads(ln) for ln in (path / "_delta_log" / f"{1:020d}.json").read_text().splitlines()]
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


def test_the_ledger_does_not_checkpoint_every_tenth_epoch(spark, tmp_path):
    """A Delta checkpoint is a Spark job inside the commit that reaches the
    table's interval: the ledger's interval is 100, not Delta's 10, so its own
    checkpoint no longer stalls every tenth epoch; readers still see every epoch."""
    path = tmp_path / "job" / "_ledger"
    for epoch in range(12):
        ledger.record(spark, str(path), "job", "p", epoch, [CommitRecord("s", "db.t", "/x", epoch, epoch, False)])
    commit0 = [json.loads(ln) for ln in (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    [meta] = [a["metaData"] for a in commit0 if "metaData" in a]
    assert meta["configuration"] == ledger.LEDGER_PROPERTIES == {"delta.checkpointInterval": "100"}
    assert _versions(path) == list(range(12))
    assert not list((path / "_delta_log").glob("*.checkpoint*.parquet"))
    [row] = ledger.last_committed(spark, str(path))
    assert (row["last_epoch"], row["epochs"], row["total_rows"]) == (11, 12, sum(range(12)))


EMPTY_INPUT = """
env { job.name = empty_run, job.mode = BATCH }
source { LocalFile { plugin_output = src, path = "${work}/in", file_format_type = parquet,
  schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = src, path = "${work}/out" } }
"""


def test_a_run_without_an_epoch_ends_once_its_ledger_is_created(spark, run_job_text, tmp_path, monkeypatch):
    """No new input: the query ends without an epoch, and the job ends only
    after the ledger its start began creating is there (a slow creation is not
    left committing behind a returned job, or a process that exits); a
    creation that fails fails the run, naming the ledger."""
    import time

    from streaming_engine.checkpoint import delta_log

    (tmp_path / "in").mkdir()
    real = ledger.create

    def slow_create(*args, **kwargs):
        time.sleep(2)
        return real(*args, **kwargs)

    monkeypatch.setattr(ledger, "create", slow_create)
    ran = run_job_text(EMPTY_INPUT)
    assert ran.result.status == "FINISHED", ran.result.error
    assert ran.result.committed == []  # no epoch ran
    path = tmp_path / "checkpoints" / "empty_run" / "_ledger"
    assert _versions(path) == [0]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert [h.operation for h in history] == ["CREATE TABLE"]
    assert not (tmp_path / "out" / "_delta_log").exists()

    def failing_create(*args, **kwargs):
        raise OSError("the store refused the write")

    monkeypatch.setattr(ledger, "create", failing_create)
    monkeypatch.setattr(delta_log, "create", failing_create)
    ran = run_job_text(EMPTY_INPUT.replace("empty_run", "empty_run_2"))
    assert ran.result.status == "FAILED"
    assert "commit ledger" in str(ran.result.error) and "the store refused the write" in str(ran.result.error)
