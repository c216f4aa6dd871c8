"""LocalFile sink at run time: staged publish, exactly once per epoch, per-table paths."""

import json
import re
from types import SimpleNamespace

import pytest

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


def _as_driver(monkeypatch, name: str) -> None:
    """Act as another driver process of the job (its own staging directories)."""
    import sinks.local_file as lf

    monkeypatch.setattr(lf, "_DRIVER", name * 32)


def test_two_drivers_of_one_epoch_publish_it_once_whichever_claims_first(spark, tmp_path, monkeypatch):
    """Driver A has staged epoch 4 and is about to claim it when driver B (its successor, A being thought
    dead) writes and publishes the same epoch: A's claim fails, A removes its staging and skips; the
    directory holds B's files of the epoch only (before the fence, both staged into one directory)."""
    import sinks.local_file as lf
    from streaming_engine.runtime import faults

    target = tmp_path / "items"
    sink = LocalFile(LocalFileSinkOptions.model_validate({"path": str(tmp_path / "${table_name}"), "file_format_type": "json"}))
    ds = Dataset((T,))
    b_done, b_started = [], []

    def b_runs_now(point, epoch, sink_uid=None):
        if point == "sink_files_written" and not b_started:  # A's files are staged, its claim not made
            b_started.append(True)
            _as_driver(monkeypatch, "b")
            b_done.extend(sink.write(_ctx(spark, 4), {"db.items": _frame(spark, 4, offset=100)}, ds))
            _as_driver(monkeypatch, "a")

    _as_driver(monkeypatch, "a")
    monkeypatch.setattr(faults, "maybe_crash", b_runs_now)
    a_done = sink.write(_ctx(spark, 4), {"db.items": _frame(spark, 4)}, ds)
    assert [(r.rows, r.skipped) for r in b_done] == [(4, False)]
    assert [(r.rows, r.skipped) for r in a_done] == [(4, True)]
    back = spark.read.json(str(target)).collect()
    assert sorted(r.id for r in back) == list(range(100, 104))  # B's rows, once; none of A's
    assert not (target / "_staging").exists()
    assert json.loads((target / "_published" / f"{lf._tag('j.p.localfile.db.items')}-{4:012d}.json").read_text())[
        "staging"].endswith("b" * 32)
    # a driver still further behind (epoch 4 again, from its own old checkpoint) lands nothing either
    _as_driver(monkeypatch, "c")
    monkeypatch.setattr(faults, "maybe_crash", lambda *a, **k: None)
    late = sink.write(_ctx(spark, 4), {"db.items": _frame(spark, 4, offset=200)}, ds)
    assert [(r.rows, r.skipped) for r in late] == [(4, True)]
    assert sorted(r.id for r in spark.read.json(str(target)).collect()) == list(range(100, 104))


def test_a_directory_without_hard_links_fails_the_commit_naming_it(spark, tmp_path, monkeypatch):
    import os

    from streaming_engine.errors import CommitError

    sink = LocalFile(LocalFileSinkOptions.model_validate({"path": str(tmp_path / "${table_name}"), "file_format_type": "json"}))

    def refused(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", refused)  # as a mount that has no hard links answers
    with pytest.raises(CommitError, match=r"refused a hard link \(Operation not permitted\)"):
        sink.write(_ctx(spark, 0), {"db.items": _frame(spark, 2)}, Dataset((T,)))
    assert not (tmp_path / "items" / "_published").exists() or not any((tmp_path / "items" / "_published").glob("*.json"))


def test_a_crash_between_the_claim_and_the_moves_is_finished_by_the_next_start(spark, tmp_path, monkeypatch):
    import sinks.local_file as lf

    target = tmp_path / "items"
    sink = LocalFile(LocalFileSinkOptions.model_validate({"path": str(tmp_path / "${table_name}"), "file_format_type": "json"}))
    ds = Dataset((T,))
    real = lf._publish

    def crash(root, claim):
        raise SystemExit("killed after the claim")

    _as_driver(monkeypatch, "a")
    monkeypatch.setattr(lf, "_publish", crash)
    with pytest.raises(SystemExit):
        sink.write(_ctx(spark, 0), {"db.items": _frame(spark, 3)}, ds)
    assert not any(p.is_file() for p in target.iterdir())  # claimed, nothing moved yet
    monkeypatch.setattr(lf, "_publish", real)
    _as_driver(monkeypatch, "b")  # the next driver: its query start finishes A's epoch
    assert sink.open(_ctx(spark, 1), ds) == {"db.items": 0}
    assert sorted(r.id for r in spark.read.json(str(target)).collect()) == [0, 1, 2]
    assert not (target / "_staging").exists()


def test_old_markers_are_folded_and_a_zombie_of_a_folded_epoch_lands_nothing(spark, tmp_path, monkeypatch):
    """Markers of all but the newest KEEP_MARKERS epochs fold into one file (so _published stays bounded over
    thousands of epochs); a driver far behind, whose epoch's marker was folded, skips it: whether it looked
    after the fold, or before it and created the marker anew (it looks again after its claim)."""
    import sinks.local_file as lf
    from streaming_engine.runtime import faults

    monkeypatch.setattr(lf, "KEEP_MARKERS", 3)
    target = tmp_path / "items"
    sink = LocalFile(LocalFileSinkOptions.model_validate({"path": str(tmp_path / "${table_name}"), "file_format_type": "json"}))
    ds = Dataset((T,))
    tag = lf._tag("j.p.localfile.db.items")
    _as_driver(monkeypatch, "a")
    for e in (0, 1, 2, 4, 5, 7):  # epochs 3 and 6 had no rows for the table: no commit there
        sink.write(_ctx(spark, e), {"db.items": _frame(spark, 2, offset=10 * e)}, ds)
    markers = sorted(p.name for p in (target / "_published").iterdir())
    assert markers == [f"{tag}-{e:012d}.json" for e in (4, 5, 7)] + [f"{tag}-folded.json"], markers  # at 5: <= 2
    assert sink.open(_ctx(spark, 8), ds) == {"db.items": 7}

    _as_driver(monkeypatch, "z")  # a zombie at epoch 2 (folded): nothing
    assert [(r.rows, r.skipped) for r in sink.write(_ctx(spark, 2), {"db.items": _frame(spark, 2, offset=900)}, ds)] == [(0, True)]

    def live_driver_goes_on(point, epoch, sink_uid=None):  # a driver at epoch 10 staged it, then paused before its claim
        if point == "sink_files_written" and epoch == 10 and not b_ran:
            b_ran.append(True)
            _as_driver(monkeypatch, "a")  # its successor publishes 8 to 15 (folds at 8, 11, 14)
            for e in range(8, 16):
                sink.write(_ctx(spark, e), {"db.items": _frame(spark, 2, offset=10 * e)}, ds)
            _as_driver(monkeypatch, "z")

    b_ran: list = []
    monkeypatch.setattr(faults, "maybe_crash", live_driver_goes_on)
    late = sink.write(_ctx(spark, 10), {"db.items": _frame(spark, 2, offset=950)}, ds)  # its claim makes 10's marker anew
    assert b_ran and [(r.rows, r.skipped) for r in late] == [(0, True)]
    assert not (target / "_published" / f"{tag}-{10:012d}.json").exists() and not (target / "_staging").exists()
    assert lf._folded(str(target), tag) == 11  # folds at 5 (<= 2), 8 (<= 5), 11 (<= 8), 14 (<= 11)
    assert sorted(r.id for r in spark.read.json(str(target)).collect()) == sorted(
        10 * e + i for e in (*range(16),) if e not in (3, 6) for i in range(2))  # every epoch once, nothing of the zombies'


# -- SeaTunnel's options, through a job --------------------------------------------------------------

OPTIONS = """
env { job.name = file_options }
source {
  FakeSource {
    plugin_output = src, table-names = [t], rows.per.batch = 3
    schema = { fields { id = bigint, name = string, day = string, ts = timestamp } }
    rows = [
      { kind = INSERT, fields = [1, "a;b", "d1", "2024-01-02T03:04:05"] },
      { kind = INSERT, fields = [2, " sp \\"q\\" ", "d1", "2024-01-02T03:04:05"] },
      { kind = INSERT, fields = [3, null, "d2", "2024-01-02T03:04:05"] },
      { kind = INSERT, fields = [4, "e", "d2", "2024-01-02T03:04:05"] }
    ]
  }
}
transform { Sql { plugin_input = src, plugin_output = nothing, query = "select * from src where id < 0" } }
sink {
  LocalFile { plugin_input = src, path = "${work}/out/csv_all", file_format_type = csv, sink_columns = [id, name]
    field_delimiter = ";", row_delimiter = "\\r\\n", csv_string_quote_mode = ALL, enable_header_write = true
    single_file_mode = true }
  LocalFile { plugin_input = src, path = "${work}/out/csv_min", sink_columns = [id, name], field_delimiter = ";"
    batch_size = 1 }
  LocalFile { plugin_input = src, path = "${work}/out/text", file_format_type = text, sink_columns = [id, name, day]
    row_delimiter = "|", single_file_mode = true }
  LocalFile { plugin_input = src, path = "${work}/out/json", file_format_type = json, sink_columns = [id, name]
    row_delimiter = "\\r\\n", compress_codec = lzo, single_file_mode = true }
  LocalFile { plugin_input = src, path = "${work}/out/xml_attr", file_format_type = xml, sink_columns = [id, name]
    xml_use_attr_format = true, xml_root_tag = ROWS, xml_row_tag = ROW, single_file_mode = true }
  LocalFile { plugin_input = src, path = "${work}/out/xml_el", file_format_type = xml, sink_columns = [id, day]
    xml_use_attr_format = false, single_file_mode = true }
  LocalFile { plugin_input = src, path = "${work}/out/named", file_format_type = csv, sink_columns = [id, day]
    have_partition = true, partition_by = [day], partition_dir_expression = "part_${v0}/x"
    is_partition_field_write_in_file = true, custom_filename = true
    file_name_expression = "out_${now}", filename_time_format = "yyyy'y'MM", filename_extension = dat
    single_file_mode = true }
  LocalFile { plugin_input = src, path = "${work}/out/hive", file_format_type = json, sink_columns = [id, day]
    have_partition = true, partition_by = [day], custom_filename = true }
  LocalFile { plugin_input = src, path = "${work}/out/int96", file_format_type = parquet
    parquet_avro_write_timestamp_as_int96 = true, single_file_mode = true }
  LocalFile { plugin_input = src, path = "${work}/out/micros", file_format_type = parquet, single_file_mode = true
    schema_save_mode = RECREATE_SCHEMA }
  LocalFile { plugin_input = src, path = "${work}/out/orc", file_format_type = orc, compress_codec = zlib
    data_save_mode = DROP_DATA }
  LocalFile { plugin_input = nothing, path = "${work}/out/empty", enable_header_write = true
    create_empty_file_when_no_data = true }
  LocalFile { plugin_input = nothing, path = "${work}/out/none" }
}
"""


# the job loader substitutes ${name} variables in every string and does not reserve the file sink's
# name placeholders (yet): hand them through as variables whose value is the placeholder itself
PASS_THROUGH = {"now": "${now}", "v0": "${v0}"}


def _texts(directory, suffix=""):
    return {p: p.read_bytes() for p in map(lambda f: directory / f, _data_files(directory)) if p.name.endswith(suffix)}


def test_seatunnel_options_shape_the_files(spark, run_job_text, tmp_path):
    import pyarrow.parquet as pq

    for kept in ("micros", "orc"):  # RECREATE_SCHEMA, DROP_DATA: what a fresh start finds there is deleted
        (tmp_path / "out" / kept / "old").mkdir(parents=True)
        (tmp_path / "out" / kept / "old/stale.txt").write_text("stale")
    ran = run_job_text(OPTIONS, variables=PASS_THROUGH)
    assert ran.result.status == "FINISHED", ran.result.error
    out = tmp_path / "out"

    # csv: ALL quotes every field, ";" and "\r\n" as written, one file per epoch with its header (single_file_mode)
    files = sorted(_texts(out / "csv_all").items())
    assert [p.name[:13] for p, _ in files] == ["part-000000-0", "part-000001-0"], files
    assert files[0][1] == b'"id";"name"\r\n"1";"a;b"\r\n"2";" sp ""q"" "\r\n"3";""\r\n', files[0][1]
    assert files[1][1] == b'"id";"name"\r\n"4";"e"\r\n'
    # MINIMAL: only what needs it is quoted, spaces kept; batch_size = 1: one row per file
    rows = sorted(_texts(out / "csv_min").values())
    assert rows == sorted([b'1;"a;b"\n', b'2;" sp ""q"" "\n', b"3;\n", b"4;e\n"]), rows
    # text: \001 between fields (the default), null as nothing, "|" after every row
    assert sorted(_texts(out / "text").values()) == [b"1\x01a;b\x01d1|2\x01 sp \"q\" \x01d1|3\x01\x01d2|", b"4\x01e\x01d2|"]
    # json with lzo (lzop, as SeaTunnel's): Spark reads it back with the codec
    lzo = _texts(out / "json")
    assert all(p.name.endswith(".json.lzo") and b.startswith(b"\x89LZO") for p, b in lzo.items()), lzo
    back = spark.read.option("io.compression.codecs", "io.airlift.compress.lzo.LzopCodec").schema("id bigint, name string")
    assert sorted(r.id for r in back.json(str(out / "json")).collect()) == [1, 2, 3, 4]
    # xml: attributes or child elements, under the root and row tags
    attr = b"".join(sorted(_texts(out / "xml_attr").values())).decode()
    assert "<ROWS>" in attr and '<ROW id="1" name="a;b"/>' in attr and "<RECORD" not in attr, attr
    element = b"".join(sorted(_texts(out / "xml_el").values())).decode()
    assert "<RECORDS>" in element and "<RECORD>" in element and "<id>1</id>" in element and "<day>d1</day>" in element
    # custom names and partition directories; the partition column stays in the file
    named = _data_files(out / "named")
    stamp = __import__("datetime").datetime.now().strftime("%Yy%m")
    assert len(named) == 3 and all(re.fullmatch(rf"part_d[12]/x/T_\w+_00000[01]_out_{stamp}\.dat", f) for f in named), named
    assert sorted((out / "named").glob("part_d1/x/*"))[0].read_text() == "1,d1\n2,d1\n"
    hive = _data_files(out / "hive")  # SeaTunnel's default layout and file_name_expression ${transactionId}
    assert all(re.fullmatch(r"day=d[12]/T_\w+_00000[01]_0\.json", f) for f in hive) and len(hive) == 3, hive
    # parquet timestamps: INT64 micros by default, INT96 on request
    [micros] = (out / "micros").glob("part-000000-*")
    [int96] = (out / "int96").glob("part-000000-*")
    assert pq.ParquetFile(micros).schema.column(3).physical_type == "INT64"
    assert pq.ParquetFile(int96).schema.column(3).physical_type == "INT96"
    assert all(f.endswith(".zlib.orc") for f in _data_files(out / "orc")) and spark.read.orc(str(out / "orc")).count() == 4
    assert not (out / "orc/old").exists() and not (out / "micros/old").exists()
    # an epoch with no row: an empty file (its header) with create_empty_file_when_no_data, else nothing
    assert sorted(_texts(out / "empty").values()) == [b"id,name,day,ts\n"] * 2
    assert _data_files(out / "none") == []

    # a BATCH run that reads nothing: one more empty file there; a resumed query keeps the data (no DROP_DATA)
    again = run_job_text(OPTIONS, variables=PASS_THROUGH)
    assert again.result.status == "FINISHED", again.result.error
    assert sorted(_texts(out / "empty").values()) == [b"id,name,day,ts\n"] * 3
    assert _data_files(out / "none") == [] and spark.read.orc(str(out / "orc")).count() == 4
    assert len(_data_files(out / "micros")) == 2


@pytest.mark.parametrize(
    "mode, prepare, message",
    [
        ("data_save_mode = ERROR_WHEN_DATA_EXISTS", lambda d: (d.mkdir(parents=True), (d / "x.csv").write_text("1\n")),
         "holds data"),
        ("schema_save_mode = ERROR_WHEN_SCHEMA_NOT_EXIST", lambda d: None, "does not exist"),
    ],
)
def test_save_modes_stop_a_fresh_start(run_job_text, tmp_path, mode, prepare, message):
    prepare(tmp_path / "out")
    ran = run_job_text(f"""
env {{ job.name = save_modes }}
source {{ FakeSource {{ plugin_output = src, row.num = 3, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ LocalFile {{ plugin_input = src, path = "${{work}}/out", {mode} }} }}
""")
    assert ran.result.status == "FAILED" and message in str(ran.result.error), ran.result.error
    assert _data_files(tmp_path / "out") == ([] if "SCHEMA" in mode else ["x.csv"])  # nothing written
