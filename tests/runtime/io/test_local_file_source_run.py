"""LocalFile source at run time: json, csv, parquet and text files, new files picked up by a rerun."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

JOB = """
env { job.name = files_in }
source {
  LocalFile {
    plugin_output = j, path = "${work}/in/json", file_format_type = json
    schema = { table = "in.people", fields { id = bigint, name = string, born = date } }
  }
  LocalFile {
    plugin_output = c, path = "${work}/in/csv", file_format_type = csv, field_delimiter = ";"
    skip_header_row_number = 1, null_format = "NA"
    schema = { table = "in.scores", fields { id = bigint, score = double, note = string } }
  }
  LocalFile { plugin_output = p, path = "${work}/in/parquet", file_format_type = parquet, read_columns = [v, id] }
  LocalFile {
    plugin_output = t, path = "${work}/in/text/lines.txt", file_format_type = text
    skip_header_row_number = 2, field_delimiter = "|"
    schema = { table = "in.lines", fields { k = string, v = int } }
  }
}
sink {
  Delta { plugin_input = j, path = "${work}/out/people" }
  Delta { plugin_input = c, path = "${work}/out/scores" }
  Delta { plugin_input = p, path = "${work}/out/parquet" }
  Delta { plugin_input = t, path = "${work}/out/lines" }
}
"""


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")  # hidden until renamed
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _json_lines(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_files_of_each_format_are_read_and_a_rerun_reads_only_new_files(spark, run_job_text, tmp_path):
    inp = tmp_path / "in"
    _write(f"{inp}/json/a.json", _json_lines([{"id": 1, "name": "Ann", "born": "1990-01-02"}, {"id": 2, "name": "Bob"}]))
    _write(f"{inp}/json/b.json", _json_lines([{"id": 3, "name": "Cy", "born": "2001-12-31"}]))
    _write(f"{inp}/csv/s1.csv", "id;score;note\n1;1.5;ok\n2;NA;NA\n")
    (inp / "parquet").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([10, 11], pa.int64()), "v": ["x", "y"], "extra": [1.0, 2.0]}), inp / "parquet/part1.parquet")
    _write(f"{inp}/text/lines.txt", "# header\n# second header\nalpha|1\nbeta|2\ngamma|oops\n")
    _write(f"{inp}/text/other.txt", "not|read\n")  # the text source reads one file

    first = run_job_text(JOB)
    assert first.result.status == "FINISHED", first.result.error
    people = {r["id"]: r for r in first.rows(spark, "out/people")}
    assert {i: (r["name"], str(r["born"])) for i, r in people.items()} == {
        1: ("Ann", "1990-01-02"), 2: ("Bob", "None"), 3: ("Cy", "2001-12-31")}  # fmt: skip
    assert [(r["id"], r["score"], r["note"]) for r in first.rows(spark, "out/scores", "id")] == [(1, 1.5, "ok"), (2, None, None)]
    parquet = first.rows(spark, "out/parquet", "id")
    assert parquet == [{"v": "x", "id": 10}, {"v": "y", "id": 11}]  # projected and ordered by read_columns
    assert [(r["k"], r["v"]) for r in first.rows(spark, "out/lines", "k")] == [("alpha", 1), ("beta", 2), ("gamma", None)]

    # new files arrive; the rerun (same checkpoint) reads only them
    _write(f"{inp}/json/c.json", _json_lines([{"id": 4, "name": "Dee", "born": "1985-05-05"}]))
    _write(f"{inp}/csv/s2.csv", "id;score;note\n3;3.25;new\n")
    second = run_job_text(JOB)
    assert second.result.status == "FINISHED", second.result.error
    assert sorted(r["id"] for r in second.rows(spark, "out/people")) == [1, 2, 3, 4]
    assert sorted(r["id"] for r in second.rows(spark, "out/scores")) == [1, 2, 3]
    assert len(second.rows(spark, "out/parquet")) == 2 and len(second.rows(spark, "out/lines")) == 3
    epochs = {(e.pipeline, e.epoch) for e in second.events if type(e).__name__ == "EpochCommitted"}
    assert len(epochs) == 2  # only the json and csv pipelines had new files


def test_a_missing_path_fails_the_start_with_the_path_named(tmp_path):
    from types import SimpleNamespace

    import pytest

    from sources.local_file import LocalFile, LocalFileSourceOptions
    from streaming_engine.errors import EngineError

    plugin = LocalFile(LocalFileSourceOptions.model_validate({"path": str(tmp_path / "nope"), "file_format_type": "text"}))
    with pytest.raises(EngineError, match="LocalFile source: path '.*nope' does not exist"):
        plugin.read(SimpleNamespace(spark=None, dataset=plugin.output(), streaming=False))


def test_a_parquet_scan_reads_row_positions_only_when_something_reads_the_order(spark, tmp_path):
    """The source's order (``__seq``: file time and row position) costs a
    per-row metadata read that Spark cannot prune from a streaming file scan;
    the source leaves it null when the pipeline says nothing reads it."""
    from streaming_engine.job import compile_text
    from streaming_engine.runtime import rows
    from streaming_engine.runtime.context import SourceContext

    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": list(range(5))}), str(tmp_path / "in/part-0.parquet"))
    dag = compile_text(f"""
env {{ job.name = order_or_not }}
source {{ LocalFile {{ plugin_output = p, path = "{tmp_path}/in", file_format_type = parquet }} }}
sink {{ Console {{ plugin_input = p }} }}
""").dag
    lv = next(v for v in dag.vertices if v.kind == "source")

    def executed_plan(unread: tuple[str, ...]) -> tuple[str, list]:
        ctx = SourceContext(spark, dag.job_name, "p", lv.id, lv.uid, lv.schema, False, 1, 1000, unread)
        df = rows.drop_metadata(lv.plugin.read(ctx), unread)
        name = f"order_{len(unread)}"
        q = (df.writeStream.format("memory").queryName(name).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ck" / name)).start())
        q.awaitTermination()
        plan = q._jsq.streamingQuery().lastExecution().executedPlan().toString()
        return plan, spark.table(name).collect()

    pruned, got = executed_plan((rows.SEQ,))
    assert "row_index" not in pruned and "file_modification_time" not in pruned, pruned
    assert sorted(r.id for r in got) == list(range(5)) and rows.SEQ not in got[0].asDict()
    ordered, got = executed_plan(())
    assert "row_index" in ordered, ordered  # the order is read when it is needed
    assert len({r[rows.SEQ] for r in got}) == 5  # one position per row


# -- SeaTunnel's options, through a job --------------------------------------------------------------

OPTIONS = """
env { job.name = files_options }
source {
  LocalFile { plugin_output = files, tables_configs = [
    { path = "${work}/in/part", file_format_type = json, schema = { table = "in.part", fields { id = bigint, t = time } } },
    { path = "${work}/in/part", file_format_type = json, parse_partition_from_path = false
      schema = { table = "in.flat", fields { id = bigint } } },
    { path = "${work}/in/part", file_format_type = json, schema = { table = "in.typed", fields { id = bigint, dt = int } } },
    { path = "${work}/in/csv", file_format_type = csv, field_delimiter = ";", time_format = "HH:mm:ss.SSS"
      schema = { table = "in.times", fields { id = bigint, t = time, note = string } } },
    { path = "${work}/in/xml", file_format_type = xml, xml_row_tag = ROW, xml_use_attr_format = true
      schema = { table = "in.attrs", fields { id = bigint, name = string } } },
    { path = "${work}/in/xml", file_format_type = xml, xml_row_tag = ROW, xml_use_attr_format = false
      schema = { table = "in.elems", fields { id = bigint, name = string } } },
    { path = "${work}/in/mixed", file_format_type = text, filename_extension = txt, schema = { table = "in.ext" } },
    { path = "${work}/in/lzo", file_format_type = text, compress_codec = lzo, schema = { table = "in.lzo" } },
    { path = "${work}/in/gz", file_format_type = json, archive_compress_codec = GZ
      schema = { table = "in.gz", fields { id = bigint } } },
    { path = "${work}/in/parquet", file_format_type = parquet, schema = { table = "in.p" } },
    { path = "${work}/in/orc", file_format_type = orc, schema = { table = "in.o" }, read_columns = [b] }
  ] }
}
sink { LocalFile { plugin_input = files, path = "${work}/out/${table_name}", file_format_type = json } }
"""


def _rows(spark, directory, order_by=None):
    """The rows the LocalFile (json) sink wrote to ``directory``, as dicts."""
    df = spark.read.json(str(directory))
    return [r.asDict() for r in (df.orderBy(order_by) if order_by else df).collect()]


def test_seatunnel_options_choose_and_parse_the_files(spark, run_job_text, tmp_path):
    import gzip

    import pyarrow.orc as po

    inp = tmp_path / "in"
    _write(f"{inp}/part/dt=2024/region=eu/a.json", _json_lines([{"id": 1, "t": "10:20:30"}]))
    _write(f"{inp}/part/dt=2025/region=us/b.json", _json_lines([{"id": 2, "t": "10:20"}]))  # json times: as written
    _write(f"{inp}/csv/a.csv", '1;10:20:30.123;"x;""y"""\n2;10:20:30;a\\b\n3;25:00:00.000;\n')
    xml = '<ROWS><ROW id="1" name="a"><name>x</name></ROW><ROW id="2"><id>7</id><name>b</name></ROW></ROWS>'
    _write(f"{inp}/xml/a.xml", xml)
    _write(f"{inp}/mixed/a.txt", "kept\n")
    _write(f"{inp}/mixed/b.csv", "skipped\n")
    (inp / "gz").mkdir(parents=True)
    with gzip.open(inp / "gz/a.json.gz", "wt") as f:
        f.write(_json_lines([{"id": 1}, {"id": 2}]))
    _write(f"{inp}/gz/b.json", _json_lines([{"id": 3}]))  # not a .gz file: not read
    # lzop files as SeaTunnel writes them (Spark with aircompressor's codec)
    spark.createDataFrame([("packed",)], "value string").coalesce(1).write.option(
        "compression", "io.airlift.compress.lzo.LzopCodec").text(str(tmp_path / "lzo_out"))
    (inp / "lzo").mkdir(parents=True)
    for f in (tmp_path / "lzo_out").glob("part-*"):
        os.replace(f, inp / "lzo" / "a.txt.lzo")
    _write(f"{inp}/lzo/b.txt", "plain\n")  # not .lzo: not read
    (inp / "parquet").mkdir(parents=True)
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int64())}), inp / "parquet/p.parquet")
    (inp / "orc").mkdir(parents=True)
    po.write_table(pa.table({"b": ["x"], "c": [1.5]}), str(inp / "orc/o.orc"))

    ran = run_job_text(OPTIONS)
    assert ran.result.status == "FINISHED", ran.result.error
    # the partition directories are string columns after the declared ones
    assert _rows(spark, tmp_path / "out/part", "id") == [
        {"id": 1, "t": "10:20:30", "dt": "2024", "region": "eu"}, {"id": 2, "t": "10:20", "dt": "2025", "region": "us"}]
    assert _rows(spark, tmp_path / "out/flat", "id") == [{"id": 1}, {"id": 2}]  # parse_partition_from_path = false
    # a declared partition column keeps its declared type, its value from each file's path
    assert _rows(spark, tmp_path / "out/typed", "id") == [
        {"id": 1, "dt": 2024, "region": "eu"}, {"id": 2, "dt": 2025, "region": "us"}]
    times = [(r["id"], r["t"], r["note"]) for r in _rows(spark, tmp_path / "out/times", "id")]
    assert times == [(1, "10:20:30.123", 'x;"y"'), (2, None, "a\\b"), (3, None, None)]  # csv quotes as RFC 4180
    # xml: fields from the row element's attributes, or from its child elements
    assert [(r["id"], r["name"]) for r in _rows(spark, tmp_path / "out/attrs", "id")] == [(1, "a"), (2, None)]
    assert [(r["id"], r["name"]) for r in _rows(spark, tmp_path / "out/elems", "name")] == [(7, "b"), (None, "x")]
    assert _rows(spark, tmp_path / "out/ext") == [{"content": "kept"}]
    assert _rows(spark, tmp_path / "out/lzo") == [{"content": "packed"}]
    assert sorted(r["id"] for r in _rows(spark, tmp_path / "out/gz")) == [1, 2]
    assert _rows(spark, tmp_path / "out/p", "a") == [{"a": 1}, {"a": 2}]  # footer schemas
    assert _rows(spark, tmp_path / "out/o") == [{"b": "x"}]


# -- file_filter_pattern: SeaTunnel's rule (whole name, or whole path from `path` on) ------------------

FILTERED = """
env { job.name = files_filtered }
source {
  LocalFile { plugin_output = files, tables_configs = [
    # the page's example 1 and 4: patterns that start with `path` match the path from there on
    { path = "${work}/data/seatunnel", file_format_type = text, schema = { table = "f.txt" }
      file_filter_pattern = "${work}/data/seatunnel/20241001/.*\\\\.txt" },
    { path = "${work}/data/seatunnel", file_format_type = text, schema = { table = "f.csv" }
      file_filter_pattern = "${work}/data/seatunnel/202410\\\\d*/.*\\\\.csv" },
    # other patterns match the whole file name (not a part of it: "bc.*" matches none)
    { path = "${work}/data/seatunnel", file_format_type = text, schema = { table = "f.abc" }, file_filter_pattern = "abc[h,g].*" },
    { path = "${work}/data/seatunnel", file_format_type = text, schema = { table = "f.part" }, file_filter_pattern = "bc.*" },
    { path = "${work}/data/seatunnel", file_format_type = text, schema = { table = "f.space" }, file_filter_pattern = "my file\\\\+1\\\\.csv" }
  ] }
}
sink { LocalFile { plugin_input = files, path = "${work}/out/${table_name}", file_format_type = json } }
"""


def test_file_filter_pattern_matches_whole_names_or_paths_from_the_source_path(spark, run_job_text, tmp_path):
    base = tmp_path / "data/seatunnel"
    for name in ("20241001/report.txt", "20241007/abch202410.csv", "20241002/abcg202410.csv",
                 "20241005/old_data.csv", "20241012/logo.png", "2023/my file+1.csv"):
        _write(f"{base}/{name}", name + "\n")
    ran = run_job_text(FILTERED)
    assert ran.result.status == "FINISHED", ran.result.error

    def lines(table):
        files = (tmp_path / "out" / table).glob("part-*.json")
        return sorted(json.loads(line)["content"] for f in files for line in f.read_text().splitlines())

    assert lines("txt") == ["20241001/report.txt"]
    assert lines("csv") == ["20241002/abcg202410.csv", "20241005/old_data.csv", "20241007/abch202410.csv"]
    assert lines("abc") == ["20241002/abcg202410.csv", "20241007/abch202410.csv"]
    assert lines("part") == []
    assert lines("space") == ["2023/my file+1.csv"]  # names are matched decoded (a space, a literal '+')


def test_partition_values_of_a_relative_path_with_dot_dot(spark, run_job_text, tmp_path):
    """`path` relative to the working directory (here with ..): each file's
    key=value folders are found under it all the same."""
    _write(f"{tmp_path}/in/part/dt=2024/a.json", _json_lines([{"id": 1}]))
    rel = os.path.relpath(tmp_path / "in/part")
    assert rel.startswith("..")
    ran = run_job_text(f"""
env {{ job.name = files_relative }}
source {{ LocalFile {{ plugin_output = files, path = "{rel}", file_format_type = json,
  schema = {{ table = "in.rel", fields {{ id = bigint }} }} }} }}
sink {{ LocalFile {{ plugin_input = files, path = "${{work}}/out/${{table_name}}", file_format_type = json }} }}
""")
    assert ran.result.status == "FINISHED", ran.result.error
    assert _rows(spark, tmp_path / "out/rel") == [{"id": 1, "dt": "2024"}]
