"""FakeSource at run time, against SeaTunnel's FakeSource page: every type in
``rows`` (written as the page writes them) and in random generation arrives in
its declared Spark type; ranges, templates, lengths and sizes hold; every
reader (parallelism) emits row.num rows / every ``rows`` entry; a STREAMING
job gets the splits one by one, split.read-interval apart, then idles."""

import datetime as dt
import re
import string
from decimal import Decimal

JOB = """
env { job.name = fake_types }
source {
  FakeSource {
    plugin_output = fake
    parallelism = 2
    seed = 7
    tables_configs = [
      # every type, values in SeaTunnel's notation: maps as objects, rows as lists or objects,
      # decimals as strings or numbers, bytes base64, dates/times/timestamps as text
      { schema = { table = "t.all_types", fields {
          c_map = "map<string, string>"
          c_map_int = "map<int, string>"
          c_map_nest = "map<string, {c_int = int, c_string = string}>"
          c_map_array = "map<string, array<int>>"
          c_array = "array<int>"
          c_array_row = "array<{a = int, b = string}>"
          c_string = string
          c_boolean = boolean
          c_tinyint = tinyint
          c_smallint = smallint
          c_int = int
          c_bigint = bigint
          c_float = float
          c_double = double
          c_decimal = "decimal(30, 8)"
          c_decimal_num = "decimal(10, 2)"
          c_null = "null"
          c_bytes = bytes
          c_date = date
          c_time = time
          c_timestamp = timestamp
          c_row = {
            c_map = "map<string, map<string, string>>"
            c_array = "array<int>"
            c_decimal = "decimal(30, 8)"
            c_date = date
            c_inner = { x = int }
          }
        } }
        rows = [
          { kind = INSERT, fields = [
              {a = b, c = d}, {1 = one, 2 = two}, {k1 = {c_int = 1, c_string = x}, k2 = [2, y]}, {k = [1, 2]},
              [101, 102], [{a = 1, b = p}, [2, q]],
              "c_string", true, 117, 15987, 56387395, 7084913402530365000, 1.23, 1.23,
              "2924137191386439303744.39292216", 12.345, null, "bWlJWmo=", "2023-04-22", "23:20:58",
              "2023-04-22T23:20:58",
              {c_map = {k = {a = b}}, c_array = [1], c_decimal = 1.5, c_date = "2023/04/22", c_inner = [7]}
          ] },
          { kind = DELETE, fields = { c_int = 5, c_timestamp = "2023-04-22 23:20:58.123456", c_row = [{}, [], "0.5", "20230422", {x = 8}] } }
        ] },
      # the page's "Customize the data content" rows, verbatim
      { schema = { table = "t.page_rows", fields {
          c_map = "map<string, string>", c_array = "array<int>", c_string = string, c_boolean = boolean
          c_tinyint = tinyint, c_smallint = smallint, c_int = int, c_bigint = bigint, c_float = float
          c_double = double, c_decimal = "decimal(30, 8)", c_null = "null", c_bytes = bytes, c_date = date
          c_timestamp = timestamp } }
        rows = [
          { kind = INSERT
            fields = [{"a": "b"}, [101], "c_string", true, 117, 15987, 56387395, 7084913402530365000, 1.23, 1.23, "2924137191386439303744.39292216", null, "bWlJWmo=", "2023-04-22", "2023-04-22T23:20:58"] }
          { kind = UPDATE_BEFORE
            fields = [{"a": "c"}, [102], "c_string", true, 117, 15987, 56387395, 7084913402530365000, 1.23, 1.23, "2924137191386439303744.39292216", null, "bWlJWmo=", "2023-04-22", "2023-04-22T23:20:58"] }
          { kind = UPDATE_AFTER
            fields = [{"a": "e"}, [103], "c_string", true, 117, 15987, 56387395, 7084913402530365000, 1.23, 1.23, "2924137191386439303744.39292216", null, "bWlJWmo=", "2023-04-22", "2023-04-22T23:20:58"] }
          { kind = DELETE
            fields = [{"a": "f"}, [104], "c_string", true, 117, 15987, 56387395, 7084913402530365000, 1.23, 1.23, "2924137191386439303744.39292216", null, "bWlJWmo=", "2023-04-22", "2023-04-22T23:20:58"] }
        ] },
      # random values: ranges, lengths and sizes (also inside arrays, maps and rows)
      { schema = { table = "t.random", fields {
          c_string = string, c_bytes = bytes, c_tinyint = tinyint, c_smallint = smallint, c_int = int
          c_bigint = bigint, c_float = float, c_double = double, c_decimal = "decimal(6, 2)", c_null = "null"
          c_time = time, c_date = date, c_timestamp = timestamp, c_boolean = boolean
          c_array = "array<int>", c_map = "map<string, array<tinyint>>"
          c_row = { s = string, m = "map<string, string>" } } }
        row.num = 40, map.size = 3, array.size = 4, bytes.length = 7, string.length = 9
        tinyint.min = 1, tinyint.max = 9, smallint.min = 10, smallint.max = 19, int.min = 20, int.max = 29
        bigint.min = 30, bigint.max = 39, float.min = 40.0, float.max = 43.0, double.min = 44.0, double.max = 47.0 },
      # templates (the page's template example; smallint.template without its mode is used too)
      { schema = { table = "t.template", fields {
          c_string = string, c_tinyint = tinyint, c_smallint = smallint, c_int = int, c_bigint = bigint
          c_float = float, c_double = double } }
        row.num = 30
        string.fake.mode = "template", string.template = ["tyrantlucifer", "hailin", "kris", "fanjia", "zongwen", "gaojun"]
        tinyint.fake.mode = "template", tinyint.template = [1, 2, 3, 4, 5, 6, 7, 8, 9]
        smallint.template = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
        int.fake.mode = "template", int.template = [20, 21, 22, 23, 24, 25, 26, 27, 28, 29]
        bigint.fake.mode = "template", bigint.template = [30, 31, 32, 33, 34, 35, 36, 37, 38, 39]
        float.fake.mode = "template", float.template = [40.0, 41.0, 42.0, 43.0]
        double.fake.mode = "template", double.template = [44.0, 45.0, 46.0, 47.0] },
      # the page's defaultValue case: columns with defaultValue (random generation) ...
      { schema = { table = "t.defaults", columns = [
          { name = book_publication_time, type = timestamp, defaultValue = "2024-09-12 15:45:30" },
          { name = book_publication_time2, type = timestamp, defaultValue = CURRENT_TIMESTAMP },
          { name = book_publication_time3, type = time, defaultValue = "15:45:30" },
          { name = book_publication_time4, type = time, defaultValue = CURRENT_TIME },
          { name = book_publication_time5, type = date, defaultValue = "2024-09-12" },
          { name = book_publication_time6, type = date, defaultValue = CURRENT_DATE },
          { name = id, type = bigint, defaultValue = 0 },
          { name = free, type = string } ] }
        row.num = 3, string.length = 4 },
      # ... and CURRENT_TIMESTAMP / CURRENT_TIME / CURRENT_DATE in rows
      { schema = { table = "t.now_rows", fields { pk_id = bigint, name = string, score = int, time1 = timestamp, time2 = time, time3 = date } }
        rows = [ { kind = INSERT, fields = [1, "A", 100, CURRENT_TIMESTAMP, CURRENT_TIME, CURRENT_DATE] } ] }
    ]
  }
}
sink { Delta { plugin_input = fake, path = "${work}/out/${table_name}" } }
"""

ALL_TYPES = {
    "c_map": "map<string,string>",
    "c_map_int": "map<int,string>",
    "c_map_nest": "map<string,struct<c_int:int,c_string:string>>",
    "c_map_array": "map<string,array<int>>",
    "c_array": "array<int>",
    "c_array_row": "array<struct<a:int,b:string>>",
    "c_string": "string",
    "c_boolean": "boolean",
    "c_tinyint": "tinyint",
    "c_smallint": "smallint",
    "c_int": "int",
    "c_bigint": "bigint",
    "c_float": "float",
    "c_double": "double",
    "c_decimal": "decimal(30,8)",
    "c_decimal_num": "decimal(10,2)",
    "c_null": "string",
    "c_bytes": "binary",
    "c_date": "date",
    "c_time": "string",
    "c_timestamp": "timestamp",
    "c_row": "struct<c_map:map<string,map<string,string>>,c_array:array<int>,c_decimal:decimal(30,8),"
    "c_date:date,c_inner:struct<x:int>>",
}

FIRST = {
    "c_map": {"a": "b", "c": "d"},
    "c_map_int": {1: "one", 2: "two"},
    "c_map_nest": {"k1": {"c_int": 1, "c_string": "x"}, "k2": {"c_int": 2, "c_string": "y"}},
    "c_map_array": {"k": [1, 2]},
    "c_array": [101, 102],
    "c_array_row": [{"a": 1, "b": "p"}, {"a": 2, "b": "q"}],
    "c_string": "c_string",
    "c_boolean": True,
    "c_tinyint": 117,
    "c_smallint": 15987,
    "c_int": 56387395,
    "c_bigint": 7084913402530365000,
    "c_float": 1.2300000190734863,  # 1.23 as a float (32 bit)
    "c_double": 1.23,
    "c_decimal": Decimal("2924137191386439303744.39292216"),
    "c_decimal_num": Decimal("12.35"),  # 12.345 at scale 2 (half up, as Spark's cast)
    "c_null": None,
    "c_bytes": bytearray(b"miIZj"),  # "bWlJWmo=" is base64 for miIZj
    "c_date": dt.date(2023, 4, 22),
    "c_time": "23:20:58",
    "c_timestamp": dt.datetime(2023, 4, 22, 23, 20, 58),
    "c_row": {"c_map": {"k": {"a": "b"}}, "c_array": [1], "c_decimal": Decimal("1.50000000"),
              "c_date": dt.date(2023, 4, 22), "c_inner": {"x": 7}},
}  # fmt: skip
SECOND = {**{k: None for k in ALL_TYPES}, "c_int": 5, "c_timestamp": dt.datetime(2023, 4, 22, 23, 20, 58, 123456),
          "c_row": {"c_map": {}, "c_array": [], "c_decimal": Decimal("0.50000000"), "c_date": dt.date(2023, 4, 22),
                    "c_inner": {"x": 8}}}  # fmt: skip


def _types(df) -> dict:
    return {f.name: f.dataType.simpleString() for f in df.schema.fields}


def _rows(ran, spark, table) -> list[dict]:
    return [r.asDict(recursive=True) for r in ran.delta(spark, f"out/{table}").collect()]


def test_rows_and_random_values_arrive_in_their_declared_types(spark, run_job_text, record_property):
    before = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    ran = run_job_text(JOB)
    after = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    assert ran.result.status == "FINISHED", ran.result.error

    # every type of `rows`, exact values, two readers: every entry twice
    df = ran.delta(spark, "out/all_types")
    assert _types(df) == ALL_TYPES
    rows = [r.asDict(recursive=True) for r in df.collect()]
    assert sorted(rows, key=lambda r: r["c_int"]) == [SECOND, SECOND, FIRST, FIRST]

    # the page's own rows example
    page = ran.delta(spark, "out/page_rows")
    assert _types(page) == {k: v for k, v in ALL_TYPES.items() if k in _types(page)} and len(_types(page)) == 15
    got = sorted((r.asDict(recursive=True) for r in page.collect()), key=lambda r: r["c_array"])
    assert [(r["c_map"], r["c_array"]) for r in got] == [
        ({"a": "b"}, [101]), ({"a": "b"}, [101]), ({"a": "c"}, [102]), ({"a": "c"}, [102]),
        ({"a": "e"}, [103]), ({"a": "e"}, [103]), ({"a": "f"}, [104]), ({"a": "f"}, [104]),
    ]  # fmt: skip
    assert {(r["c_decimal"], bytes(r["c_bytes"]), r["c_date"], r["c_timestamp"], r["c_null"]) for r in got} == {
        (Decimal("2924137191386439303744.39292216"), b"miIZj", dt.date(2023, 4, 22), dt.datetime(2023, 4, 22, 23, 20, 58), None)
    }

    # random values: row.num per reader, ranges, lengths, sizes, also nested
    rnd = ran.delta(spark, "out/random")
    assert _types(rnd) == {
        "c_string": "string", "c_bytes": "binary", "c_tinyint": "tinyint", "c_smallint": "smallint", "c_int": "int",
        "c_bigint": "bigint", "c_float": "float", "c_double": "double", "c_decimal": "decimal(6,2)", "c_null": "string",
        "c_time": "string", "c_date": "date", "c_timestamp": "timestamp", "c_boolean": "boolean",
        "c_array": "array<int>", "c_map": "map<string,array<tinyint>>", "c_row": "struct<s:string,m:map<string,string>>",
    }  # fmt: skip
    rows = [r.asDict(recursive=True) for r in rnd.collect()]
    assert len(rows) == 80  # row.num = 40 per reader, parallelism = 2
    letters = set(string.ascii_letters)
    for r in rows:
        assert len(r["c_string"]) == 9 and set(r["c_string"]) <= letters
        assert len(r["c_bytes"]) == 7 and set(bytes(r["c_bytes"]).decode()) <= letters
        assert 1 <= r["c_tinyint"] <= 9 and 10 <= r["c_smallint"] <= 19 and 20 <= r["c_int"] <= 29
        assert 30 <= r["c_bigint"] <= 39 and 40.0 <= r["c_float"] <= 43.0 and 44.0 <= r["c_double"] <= 47.0
        assert abs(r["c_decimal"]) < 10_000 and r["c_decimal"].as_tuple().exponent == -2
        assert r["c_null"] is None and re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d", r["c_time"])
        assert isinstance(r["c_date"], dt.date) and isinstance(r["c_timestamp"], dt.datetime)
        assert len(r["c_array"]) == 4 and all(20 <= x <= 29 for x in r["c_array"])
        assert len(r["c_map"]) == 3 and all(len(k) == 9 for k in r["c_map"])
        assert all(len(v) == 4 and all(1 <= x <= 9 for x in v) for v in r["c_map"].values())
        assert len(r["c_row"]["s"]) == 9 and len(r["c_row"]["m"]) == 3
    assert len({r["c_string"] for r in rows}) == 80  # the readers' rows differ
    assert {r["c_boolean"] for r in rows} == {True, False}

    # templates: values only from the template lists (smallint's without a mode too)
    rows = _rows(ran, spark, "template")
    assert len(rows) == 60
    assert {r["c_string"] for r in rows} <= {"tyrantlucifer", "hailin", "kris", "fanjia", "zongwen", "gaojun"}
    assert {r["c_tinyint"] for r in rows} <= set(range(1, 10)) and {r["c_smallint"] for r in rows} <= set(range(10, 20))
    assert {r["c_int"] for r in rows} <= set(range(20, 30)) and {r["c_bigint"] for r in rows} <= set(range(30, 40))
    assert {r["c_float"] for r in rows} <= {40.0, 41.0, 42.0, 43.0} and {r["c_double"] for r in rows} <= {44.0, 45.0, 46.0, 47.0}
    assert len({r["c_int"] for r in rows}) > 1

    # defaultValue: every generated row holds the column's default; CURRENT_* read the clock
    df = ran.delta(spark, "out/defaults")
    assert [t for t in _types(df).values()] == ["timestamp", "timestamp", "string", "string", "date", "date", "bigint", "string"]
    rows = [r.asDict(recursive=True) for r in df.collect()]
    assert len(rows) == 6
    for r in rows:
        assert r["book_publication_time"] == dt.datetime(2024, 9, 12, 15, 45, 30)
        assert before <= r["book_publication_time2"] <= after
        assert r["book_publication_time3"] == "15:45:30"
        assert re.fullmatch(r"\d\d:\d\d:\d\d", r["book_publication_time4"])
        assert r["book_publication_time5"] == dt.date(2024, 9, 12)
        assert before.date() <= r["book_publication_time6"] <= after.date()
        assert r["id"] == 0 and len(r["free"]) == 4
    assert len({r["book_publication_time2"] for r in rows}) == 1  # one clock per batch
    (row, _) = _rows(ran, spark, "now_rows")
    assert (row["pk_id"], row["name"], row["score"]) == (1, "A", 100)
    assert before <= row["time1"] <= after and row["time3"] == row["time1"].date()
    assert row["time2"] == row["time1"].time().replace(microsecond=0).isoformat()
    record_property("ran", f"FakeSource -> Delta: 6 tables, {sum(c['total_rows'] for c in ran.result.committed)} rows")


STREAMING = """
env { job.name = fake_splits, job.mode = STREAMING, checkpoint.interval = 200, checkpoint.dir = "${work}/checkpoints" }
source {
  FakeSource {
    plugin_output = fake, parallelism = 2, seed = 3
    row.num = 5, split.num = 3, split.read-interval = 1000
    schema = { columns = [ { name = id, type = int }, { name = read_at, type = timestamp, defaultValue = CURRENT_TIMESTAMP } ] }
  }
}
sink { Delta { plugin_input = fake, path = "${work}/out/splits" } }
"""


def test_streaming_job_reads_one_split_per_reader_per_interval(spark, run_job_text):
    ran = run_job_text(STREAMING, stop_after_epochs=3, timeout_s=120)
    assert ran.result.status == "FINISHED", ran.result.error
    # row.num = 5 in split.num = 3 splits of ceil(5/3) = 2 rows, for each of the 2 readers: a micro-batch per split
    per_epoch = [c.rows for e in ran.events if type(e).__name__ == "EpochCommitted" for c in e.commits]
    assert per_epoch == [4, 4, 2]
    # CURRENT_TIMESTAMP reads the time each split was admitted: split.read-interval apart
    reads = sorted(r["read_at"] for r in ran.delta(spark, "out/splits").collect())
    assert len(reads) == 10 and len(set(reads)) == 3
    first, second, third = sorted(set(reads))
    assert (second - first).total_seconds() >= 1.0 and (third - second).total_seconds() >= 1.0


TWO_SESSIONS_JOB = """
env { job.name = two_sessions_${n}, checkpoint.dir = "${work}/ck-${n}", job.retry.times = 0 }
source { FakeSource { plugin_output = fake, row.num = 3, schema = { fields { id = bigint } } } }
sink { Delta { plugin_input = fake, path = "${work}/out-${n}" } }
"""


def test_a_job_reads_the_fake_source_while_another_session_that_registered_it_is_active(spark, tmp_path):
    """Spark resolves a Python data source through the thread's ACTIVE session
    and refuses to register a name that session knows: with another session
    of the process active (one that read the fake source, then ran user code:
    createDataFrame makes a session active), every later FakeSource job failed
    with DATA_SOURCE_ALREADY_EXISTS (each pipeline runs on a new session)."""
    from sources._fake_runtime import register
    from streaming_engine.job import compile_text
    from streaming_engine.runtime.runner import execute

    other = spark.newSession()
    for n in range(2):
        register(other)
        other.createDataFrame([(n,)], "n int").collect()  # the other session is the thread's active one now
        job = compile_text(TWO_SESSIONS_JOB, variables={"work": str(tmp_path), "n": str(n)})
        result = execute(job, spark=spark)
        assert result.status == "FINISHED", result.error
        assert spark.read.format("delta").load(str(tmp_path / f"out-{n}")).count() == 3
