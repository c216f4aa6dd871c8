"""Python (pandas and arrow api) and JsonPath at run time: Python, JsonPath, Python in a row
are three segments of one chain (Python pass, Catalyst expressions, Python pass), as the
physical plan says: JsonPath runs as Spark expressions between the two Python passes."""

from pyspark.sql import functions as F

from streaming_engine.job import compile_text

JOB = """
env { job.name = python_chain }
source {
  FakeSource {
    plugin_output = events
    schema = { table = "shop.events", fields { id = int, qty = int, label = string, payload = string } }
    rows = [
      { kind = INSERT, fields = [1, 2, "a", \"\"\"{"user": {"name": "ann", "tags": ["x", "y"]}, "extra": 5, "price": "3.25", "when": "2024-01-15 10:30:00"}\"\"\"] },
      { kind = INSERT, fields = [2, 3, "b", \"\"\"{"user": {"name": "bob", "tags": []}, "extra": "oops", "price": 1, "when": null}\"\"\"] },
      { kind = INSERT, fields = [3, 4, "c", null] },
      { kind = INSERT, fields = [4, 5, "d", "not json"] }
    ]
  }
}
transform {
  Python {
    plugin_input = events, plugin_output = scored
    module = tests.runtime.transforms.udfs, function = score
    output_schema = { score = double, label = string }
  }
  JsonPath {
    plugin_input = scored, plugin_output = extracted
    row_error_handle_way = SKIP
    columns = [
      { src_field = payload, path = "$.user.name", dest_field = user_name },
      { src_field = payload, path = "$.user.tags[0]", dest_field = first_tag, column_error_handle_way = SKIP },
      { src_field = payload, path = "$.extra", dest_field = extra, dest_type = int, column_error_handle_way = SKIP },
      { src_field = payload, path = "$.price", dest_field = price, dest_type = "decimal(6,2)" },
      { src_field = payload, path = "$.user.tags", dest_field = tags, dest_type = "array<string>" },
      { src_field = payload, path = "$.when", dest_field = seen, dest_type = timestamp },
      { src_field = payload, path = "$.user", dest_field = user }
    ]
  }
  Python {
    plugin_input = extracted, plugin_output = totals
    function = "tests.runtime.transforms.udfs:add_total", api = arrow
    output_schema = { total = int }
  }
}
sink {
  Delta { plugin_input = totals, path = "${work}/events" }
}
"""


def test_jsonpath_between_python_transforms_is_a_catalyst_segment(tmp_path):
    job = compile_text(JOB, variables={"work": str(tmp_path)})
    [pipeline] = job.physical.pipelines
    [chain] = [s for s in pipeline.stages if s.kind == "transform-chain"]
    segments = chain.detail["segments"]
    assert [(s["segment"], s["members"]) for s in segments] == [
        ("python", ["Python#2"]), ("catalyst", ["JsonPath#3"]), ("python", ["Python#4"]),
    ]  # fmt: skip
    assert segments[0]["operator"] == "ONE fused mapInArrow pass"
    assert "2 Python pass(es)" in chain.operator


def test_python_and_jsonpath_results(spark, run_job_text):
    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    df = ran.delta(spark, "events")
    assert df.columns == [
        "id", "qty", "label", "payload", "score", "user_name", "first_tag", "extra", "price", "tags", "seen", "user", "total",
    ]  # fmt: skip
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert (types["score"], types["extra"], types["price"], types["tags"], types["seen"], types["total"]) == (
        "double", "int", "decimal(6,2)", "array<string>", "timestamp", "int",
    )  # fmt: skip
    got = [
        r.asDict()
        for r in df.withColumn("seen", F.date_format("seen", "yyyy-MM-dd HH:mm:ss"))
        .withColumn("price", F.col("price").cast("string"))
        .drop("payload")
        .orderBy("id")
        .collect()
    ]
    assert got == [
        {"id": 1, "qty": 2, "label": "A", "score": 3.0, "user_name": "ann", "first_tag": "x", "extra": 5, "price": "3.25",
         "tags": ["x", "y"], "seen": "2024-01-15 10:30:00", "user": '{"name":"ann","tags":["x","y"]}', "total": 7},
        # no tags[0] and "oops" is no int: bad values, the columns' SKIP gives nulls and the row stays
        {"id": 2, "qty": 3, "label": "B", "score": 4.5, "user_name": "bob", "first_tag": None, "extra": None, "price": "1.00",
         "tags": [], "seen": None, "user": '{"name":"bob","tags":[]}', "total": 3},
        # id 3: dropped by the pandas function (no payload); id 4: not JSON, the row-level SKIP drops it
    ]  # fmt: skip


FAILING_JOB = """
env { job.name = python_fails }
source {
  FakeSource {
    plugin_output = events
    schema = { table = "shop.events", fields { id = int } }
    rows = [{ kind = INSERT, fields = [1] }]
  }
}
transform {
  Python { plugin_input = events, plugin_output = out, function = "tests.runtime.transforms.udfs:explode" }
}
sink {
  Delta { plugin_input = out, path = "${work}/never" }
}
"""


def test_a_failing_user_function_fails_the_job_naming_the_transform(spark, run_job_text):
    ran = run_job_text(FAILING_JOB)
    assert ran.result.status == "FAILED"
    error = ran.result.error
    assert "Python#2 on table shop.events: tests.runtime.transforms.udfs:explode raised RuntimeError: boom" in error, error
