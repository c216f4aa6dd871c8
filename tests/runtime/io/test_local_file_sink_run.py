"""LocalFile sink at run time: staged publish, exactly once per epoch, per-table paths."""

import json
from types import SimpleNamespace

from sinks.local_file import LocalFile, LocalFileSinkOptions
from streaming_engine.schema import Column, Dataset, TableSchema

JOB = """
env { job.name = files_job }
source {
  FakeSource {
    plugin_output = fake
    seed = 5
    tables_configs = [
      { schema = { table = "shop.orders", fields { id = bigint, amount = double } }, row.num = 40 },
      { schema = { table = "shop.users", fields { id = bigint, name = string } }, row.num = 10 }
    ]
  }
}
sink {
  LocalFile { plugin_input = fake, path = "${work}/out/${table_name}", file_format_type = csv, enable_header_write = true }
}
"""


def _data_files(directory):
    """Published data files (relative paths), without the _staging/_published bookkeeping."""
    return sorted(
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() and not any(part.startswith(("_", ".")) for part in p.relative_to(directory).parts)
    )


def test_job_publishes_each_epoch_once_and_replays_publish_nothing(spark, run_job_text):
    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    orders, users = ran.work / "out/orders", ran.work / "out/users"
    files = _data_files(orders)
    assert files and all(f.startswith("part-000000-") and f.endswith(".csv") for f in files), files
    assert len(list((orders / "_published").iterdir())) == 1 and not (orders / "_staging").exists()
    orders_df = spark.read.option("header", "true").schema("id bigint, amount double").csv(str(orders))
    assert orders_df.count() == 40 and orders_df.where("amount is null").count() == 0
    assert spark.read.option("header", "true").csv(str(users)).count() == 10

    # a crash after the files were published but before Spark logged the epoch as committed:
    # the rerun replays epoch 0 from the same checkpoint; the sink finds it published and skips it
    [commit] = list(ran.work.glob("checkpoints/files_job/*/commits/0"))
    commit.unlink()
    (commit.parent / ".0.crc").unlink(missing_ok=True)  # the local file system's checksum of it
    again = run_job_text(JOB)
    assert again.result.status == "FINISHED", again.result.error
    assert _data_files(orders) == files
    assert spark.read.option("header", "true").csv(str(orders)).count() == 40
    assert commit.exists()  # the replayed epoch completed
    [replay] = [e for e in again.events if type(e).__name__ == "EpochCommitted"]
    assert replay.epoch == 0 and {(c.table, c.skipped) for c in replay.commits} == {("shop.orders", True), ("shop.users", True)}
    assert [c.rows for c in replay.commits if c.table == "shop.orders"] == [0]  # nothing written again


T = TableSchema("db.items", (Column("id", "bigint"), Column("name", "string"), Column("day", "date")))


def _ctx(spark, epoch):
    return SimpleNamespace(
        spark=spark, job_name="j", pipeline="p", sink_uid="localfile.items", vertex_id="LocalFile#1", batch_id=epoch,
        txn_app_id=lambda t: f"j.p.localfile.{t}", extras={},
    )


def _frame(spark, n, offset=0):
    return spark.createDataFrame(
        [("db.items", "+I", i, i, f"n{i}", None) for i in range(offset, offset + n)],
        "__table string, __kind string, __seq bigint, id bigint, name string, day date",
    )


def test_open_reports_the_published_epoch_and_half_written_staging_is_redone(spark, tmp_path):
    for fmt in ("parquet", "json"):
        target = tmp_path / fmt / "items"
        sink = LocalFile(LocalFileSinkOptions.model_validate({"path": str(tmp_path / fmt / "${table_name}"), "file_format_type": fmt}))
        ds = Dataset((T,))
        # a crashed attempt left a half-written staging directory for epoch 3
        first = sink.write(_ctx(spark, 2), {"db.items": _frame(spark, 3)}, ds)
        tag = json.loads(next((target / "_published").iterdir()).read_text())["files"][0].split("-")[-1].split(".")[0]
        junk = target / "_staging" / f"{tag}-{3:012d}"
        junk.mkdir(parents=True)
        (junk / f"part-00000-junk.{fmt}").write_text("garbage")
        assert sink.open(_ctx(spark, 3), ds) == {"db.items": 2}
        published = sink.write(_ctx(spark, 3), {"db.items": _frame(spark, 5, offset=3)}, ds)
        assert [(r.rows, r.skipped) for r in first + published] == [(3, False), (5, False)]
        # a restarted query learns that epoch 3 is published: the runtime will not hand it over again
        assert sink.open(_ctx(spark, 4), ds) == {"db.items": 3}
        assert not junk.exists()
        names = [p.name for p in target.iterdir() if p.is_file()]
        assert all(n.startswith(("part-000002-", "part-000003-")) and tag in n for n in names), names
        back = spark.read.format(fmt).schema("id bigint, name string, day date").load(str(target))
        assert sorted(r.id for r in back.collect()) == list(range(8))  # epoch 3 once, no garbage
