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

    pq.write_table(pa.table({"id": list(range(5))}), str(tmp_path / "part-0.parquet"))
    dag = compile_text(f"""
env {{ job.name = order_or_not }}
source {{ LocalFile {{ plugin_output = p, path = "{tmp_path}", file_format_type = parquet }} }}
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
