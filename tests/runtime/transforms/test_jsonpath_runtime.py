"""JsonPath at run time, as Spark column expressions (no Python): the examples of SeaTunnel's
page (its config blocks verbatim, its input and its result tables), rows, maps, arrays and bytes
serialised as SeaTunnel serialises them, every error handling option, dest_type conversions,
and a failing row failing the job with a message naming transform, table, column and value.

Two jobs (a job run costs seconds): one with every case that finishes, one that fails.
"""

import json
import re
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from tests.conformance.doc_examples import config_blocks, data_tables, page_path

PAGE = "transform-v2/jsonpath.md"
BLOCKS = config_blocks(PAGE)
READ_JSON, READ_ROW, SKIP_ROWS, SKIP_COLUMN, SKIP_ROW_FOR_COLUMN = range(5)


def _page_json() -> str:
    """The page's "Read Json Example" input document."""
    text = page_path(PAGE).read_text(encoding="utf-8")
    return re.search(r"```json\n(\{\n  \"data\".*?)```", text, re.S).group(1)


def block(i: int, names: dict[str, str] | None = None, wire: str = "") -> str:
    """The page's i-th config block, its JsonPath block only (one job holds several), verbatim but
    for dataset names (``names``: old -> new) or ``wire`` put first in a block that names none."""
    text = BLOCKS[i].strip()
    body = text[text.index("{") + 1 : text.rindex("}")].strip()
    for old, new in (names or {}).items():
        body = body.replace(f'"{old}"', f'"{new}"')
    return body.replace("JsonPath {", "JsonPath {\n    " + wire, 1) if wire else body


def rows(docs):
    return ", ".join("{ kind = INSERT, fields = [%d, %s] }" % (i, json.dumps(d)) for i, d in enumerate(docs, 1))


F1F2 = ['{"f1": "a1", "f2": "b1"}', '{"f2": "b2"}', '{"f1": null, "f2": "b3"}']  # f2 always there
F1F2_BAD = F1F2 + ['{"f1": "a4"}', "not json"]
CONV = [
    '{"v": 42}', '{"v": "3.7"}', '{"v": 3.7}', '{"v": "2023/02/30"}', '{"v": "2024-01-15 10:30:00"}', '{"v": "AQI="}',
    '{"v": [1, "2", 3.9]}', '{"v": {"k": "1", "j": 2}}', '{"v": null}', '{"v": "16:12:43.459"}', '{"v": true}',
    '{"v": "[1,2]"}', '{"w": 1}',
]  # fmt: skip

# documents that are not strict JSON, which SeaTunnel's Jayway reads with json-smart's permissive parser:
# unquoted keys and string values, single quotes, True (a string there), a trailing comma; a strict one;
# text that is a string to it; one even that parser refuses
LENIENT = [
    "{name: 'Joy', age: 20, ok: True, tags: [a, 'b'], nested: {city: Paris, zip: 75001}}",
    '{"name": "Ann", "age": 31, "ok": false, "tags": ["x", "y"], "nested": {"city": "Oslo"}}',
    "{'name': \"Bo\", age: '7', tags: [1, 2,],}",
    "just words",
    "{name: ",
]

JOB = f"""
env {{ job.name = jsonpath_runtime }}
source {{
  FakeSource {{
    plugin_output = fake
    schema = {{ table = "page.fake", fields {{ data = string }} }}
    rows = [{{ kind = INSERT, fields = [{json.dumps(_page_json())}] }}]
  }}
  FakeSource {{
    plugin_output = rowsrc
    schema = {{ table = "page.rows", fields {{ col = {{ name = string, age = int }}, other = string }} }}
    rows = [{{ kind = INSERT, fields = [["a", 18], "..."] }}]
  }}
  FakeSource {{
    plugin_output = all
    schema = {{ table = "page.all", fields {{ id = int, json_data = string }} }}
    rows = [{rows(F1F2_BAD)}]
  }}
  FakeSource {{
    plugin_output = f2ok
    schema = {{ table = "page.f2ok", fields {{ id = int, json_data = string }} }}
    rows = [{rows(F1F2)}]
  }}
  FakeSource {{
    plugin_output = misc
    schema = {{ table = "t.misc", fields {{
      id = int, col = {{ name = string, tags = "array<string>", addr = {{ city = string }} }},
      m = "map<string, int>", a = "array<string>", b = bytes, doc = string
    }} }}
    rows = [
      {{ kind = INSERT, fields = [1, ["a", ["x", "y"], ["c"]], {{ k = 1, j = 2 }}, ["x", "y", "z"], "eyJxIjogNX0=",
         \"\"\"{{"x.y": 1, "arr": [[1, 2], [3]], "n": null, "q": "it's"}}\"\"\"] }},
      {{ kind = INSERT, fields = [2, null, null, null, null, null] }}
    ]
  }}
  FakeSource {{
    plugin_output = conv
    schema = {{ table = "t.conv", fields {{ id = int, doc = string }} }}
    rows = [{rows(CONV)}]
  }}
  FakeSource {{
    plugin_output = lenient
    schema = {{ table = "t.lenient", fields {{ id = int, doc = string }} }}
    rows = [{rows(LENIENT)}]
  }}
}}
transform {{
  {block(READ_JSON)}
  {block(READ_ROW, {"fake": "rowsrc", "fake1": "rows1"})}
  JsonPath {{ plugin_input = rows1, plugin_output = rows2, columns = [{{ src_field = col, path = "$", dest_field = col_json }}] }}
  {block(SKIP_ROWS, wire="plugin_input = all, plugin_output = skip_rows")}
  {block(SKIP_COLUMN, wire="plugin_input = f2ok, plugin_output = skip_column")}
  {block(SKIP_ROW_FOR_COLUMN, wire="plugin_input = f2ok, plugin_output = skip_row")}
  JsonPath {{
    plugin_input = misc, plugin_output = misc1
    columns = [
      {{ src_field = col, path = "$", dest_field = col_json }},
      {{ src_field = col, path = "$[0]", dest_field = name }},
      {{ src_field = col, path = "$[1][-1]", dest_field = last_tag }},
      {{ src_field = col, path = "$[2].city", dest_field = city }},
      {{ src_field = m, path = "$.j", dest_field = mj, dest_type = bigint }},
      {{ src_field = m, path = "$", dest_field = m_json, dest_type = "map<string, int>" }},
      {{ src_field = a, path = "$[-1]", dest_field = a_last }},
      {{ src_field = a, path = "$[1]", dest_field = a_second }},
      {{ src_field = b, path = "$.q", dest_field = bq, dest_type = int }},
      {{ src_field = doc, path = "$['x.y']", dest_field = xy, dest_type = int }},
      {{ src_field = doc, path = "$.arr[-1][0]", dest_field = arr, dest_type = int }},
      {{ src_field = doc, path = "$.arr", dest_field = arrs, dest_type = "array<array<int>>" }},
      {{ src_field = doc, path = "$.n", dest_field = n }},
      {{ src_field = doc, path = "$.q", dest_field = q }}
    ]
  }}
  JsonPath {{
    plugin_input = conv, plugin_output = conv1
    columns = [
      {{ src_field = doc, path = "$.v", dest_field = s, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = i, dest_type = int, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = t, dest_type = tinyint, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = bo, dest_type = boolean, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = d, dest_type = double, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = dec, dest_type = "decimal(4,2)", column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = dt, dest_type = date, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = ts, dest_type = timestamp, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = tsn, dest_type = timestamp_ntz, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = tm, dest_type = time, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = by, dest_type = bytes, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = ai, dest_type = "array<int>", column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = mp, dest_type = "map<string, int>", column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.v", dest_field = r, dest_type = "struct<k: int, j: string>", column_error_handle_way = SKIP }}
    ]
  }}
  JsonPath {{
    plugin_input = lenient, plugin_output = lenient1
    columns = [
      {{ src_field = doc, path = "$.name", dest_field = name, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.age", dest_field = age, dest_type = int, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.ok", dest_field = ok, dest_type = boolean, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.tags[1]", dest_field = tag, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$.nested", dest_field = nested, column_error_handle_way = SKIP }},
      {{ src_field = doc, path = "$", dest_field = whole, column_error_handle_way = SKIP }}
    ]
  }}
  # the first bad column that does not SKIP decides: a, SKIP_ROW, drops rows 2 and 5 (no $.f1, not JSON),
  # so e, which FAILs on the same rows, never sees them (e is in the second group of 4 columns)
  JsonPath {{
    plugin_input = all, plugin_output = first_decides
    columns = [
      {{ src_field = json_data, path = "$.f1", dest_field = a, column_error_handle_way = SKIP_ROW }},
      {{ src_field = json_data, path = "$.f2", dest_field = b, column_error_handle_way = SKIP }},
      {{ src_field = json_data, path = "$.f2", dest_field = c, column_error_handle_way = SKIP }},
      {{ src_field = json_data, path = "$.f2", dest_field = d, column_error_handle_way = SKIP }},
      {{ src_field = json_data, path = "$.f1", dest_field = e }}
    ]
  }}
}}
sink {{
  Delta {{ plugin_input = fake1, path = "${{work}}/read_json" }}
  Delta {{ plugin_input = rows2, path = "${{work}}/read_row" }}
  Delta {{ plugin_input = skip_rows, path = "${{work}}/skip_rows" }}
  Delta {{ plugin_input = skip_column, path = "${{work}}/skip_column" }}
  Delta {{ plugin_input = skip_row, path = "${{work}}/skip_row" }}
  Delta {{ plugin_input = misc1, path = "${{work}}/misc" }}
  Delta {{ plugin_input = conv1, path = "${{work}}/conv" }}
  Delta {{ plugin_input = first_decides, path = "${{work}}/first_decides" }}
  Delta {{ plugin_input = lenient1, path = "${{work}}/lenient" }}
}}
"""


@pytest.fixture(scope="module")
def ran(spark, tmp_path_factory):
    """The job, run once for the module's tests (run_job_text is per test)."""
    from streaming_engine.job import compile_text
    from streaming_engine.runtime.runner import execute

    work = tmp_path_factory.mktemp("jsonpath")
    defaults = work / "engine.conf"
    defaults.write_text(f'env {{ checkpoint.dir = "{work}/checkpoints", job.retry.times = 0 }}\n')
    mp = pytest.MonkeyPatch()
    mp.setenv("STREAMING_ENGINE_CONF", str(defaults))
    try:
        job = compile_text(JOB, variables={"work": str(work)})
        result = execute(job, spark=spark)
    finally:
        mp.undo()
    assert result.status == "FINISHED", result.error
    assert all(seg["segment"] == "catalyst" for p in job.physical.pipelines for s in p.stages
               for seg in s.detail.get("segments", ()))  # fmt: skip
    return lambda name: spark.read.format("delta").load(str(work / name))


def collect(df, order="id"):
    return [r.asDict(recursive=True) for r in df.orderBy(order).collect()]


def test_page_read_json_example(ran):
    df = ran("read_json")
    [expected] = data_tables(PAGE)[0]
    [row] = df.collect()
    got = row.asDict()
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert [c for c in df.columns if c != "data"] == [c for c in expected if c != "data"]
    assert types == {"data": "string", "c1_string": "string", "c1_boolean": "boolean", "c1_integer": "int", "c1_float": "float",
                     "c1_double": "double", "c1_decimal": "decimal(4,2)", "c1_date": "date", "c1_datetime": "string",
                     "c1_array": "array<string>"}  # fmt: skip
    # the page's result table, cell by cell
    assert got["c1_string"] == expected["c1_string"] == "this is a string"
    assert str(got["c1_boolean"]).lower() == expected["c1_boolean"]
    assert str(got["c1_integer"]) == expected["c1_integer"]
    assert got["c1_float"] == pytest.approx(float(expected["c1_float"])) and got["c1_double"] == float(expected["c1_double"])
    assert got["c1_decimal"] == Decimal(expected["c1_decimal"])
    assert got["c1_date"].isoformat() == expected["c1_date"]
    assert got["c1_datetime"] == expected["c1_datetime"]
    assert got["c1_array"] == json.loads(expected["c1_array"])


def test_page_read_seatunnel_row_example(ran):
    [expected] = data_tables(PAGE)[1]
    [row] = ran("read_row").collect()
    assert (row["name"], str(row["age"]), row["other"]) == (expected["name"], expected["age"], expected["other"])
    # the row as SeaTunnel serialises it for JsonPath: the array of its field values, as the page shows col
    assert row["col_json"] == expected["col"] == '["a",18]'


def test_page_skip_error_data_rows(ran):
    """row_error_handle_way = SKIP: a row with a bad value in any column is dropped (f1 or f2 missing,
    not JSON); a JSON null is a null value, not an error."""
    assert [(r["id"], r["json_data_f1"], r["json_data_f2"]) for r in collect(ran("skip_rows"))] == [
        (1, "a1", "b1"), (3, None, "b3"),
    ]  # fmt: skip


def test_page_skip_error_data_column(ran):
    """column_error_handle_way = SKIP on f1: a bad f1 is null, the row stays."""
    assert [(r["id"], r["json_data_f1"], r["json_data_f2"]) for r in collect(ran("skip_column"))] == [
        (1, "a1", "b1"), (2, None, "b2"), (3, None, "b3"),
    ]  # fmt: skip


def test_page_skip_the_row_for_a_column(ran):
    """column_error_handle_way = SKIP_ROW on f1: a bad f1 drops the row (row_error_handle_way is FAIL)."""
    assert [(r["id"], r["json_data_f1"], r["json_data_f2"]) for r in collect(ran("skip_row"))] == [
        (1, "a1", "b1"), (3, None, "b3"),
    ]  # fmt: skip


def test_the_first_bad_column_decides(ran):
    got = [(r["id"], r["a"], r["b"], r["e"]) for r in collect(ran("first_decides"))]
    assert got == [(1, "a1", "b1", "a1"), (3, None, "b3", None), (4, "a4", None, "a4")]


def test_rows_maps_arrays_and_bytes_are_read_as_json(ran):
    got = collect(ran("misc"))
    assert [{k: r[k] for k in list(r)[6:]} for r in got] == [
        {
            # a row is the array of its field values; a row inside it is an object
            "col_json": '["a",["x","y"],{"city":"c"}]', "name": "a", "last_tag": "y", "city": "c",
            "mj": 2, "m_json": {"k": 1, "j": 2}, "a_last": "z", "a_second": "y", "bq": 5,
            "xy": 1, "arr": 3, "arrs": [[1, 2], [3]], "n": None, "q": "it's",
        },
        # null sources give nulls, not errors (row_error_handle_way FAIL would have failed the job)
        {"col_json": None, "name": None, "last_tag": None, "city": None, "mj": None, "m_json": None, "a_last": None,
         "a_second": None, "bq": None, "xy": None, "arr": None, "arrs": None, "n": None, "q": None},
    ]  # fmt: skip


def test_dest_type_conversions(ran):
    df = ran("conv")
    df = df.withColumn("ts", F.col("ts").cast("string")).withColumn("tsn", F.col("tsn").cast("string")).withColumn("by", F.hex("by"))
    got = {r["id"]: r for r in collect(df)}

    def at(i, *cols):
        return tuple(got[i][c] for c in cols)

    # 42: a JSON number; not a date, time or timestamp; bytes of a non-string are null (no error)
    assert at(1, "s", "i", "t", "bo", "d", "dec", "dt", "ts", "tm", "by", "ai", "mp") == (
        "42", 42, 42, False, 42.0, Decimal("42.00"), None, None, None, None, [], {})
    # "3.7", a string: not an int (Integer.parseInt); 3.7, a number: truncated (Jackson's asInt)
    assert at(2, "s", "i", "t", "d", "dec") == ("3.7", None, None, 3.7, Decimal("3.70"))
    assert at(3, "s", "i", "t", "d", "dec") == ("3.7", 3, None, 3.7, Decimal("3.70"))
    # dates: SeaTunnel's shapes, a day past the month's end is its last day (Java's SMART resolver)
    assert at(4, "dt", "ts", "i") == (__import__("datetime").date(2023, 2, 28), None, None)
    assert at(5, "ts", "tsn", "dt") == ("2024-01-15 10:30:00", "2024-01-15 10:30:00", None)
    assert at(6, "by", "s") == ("0102", "AQI=")
    # arrays element by element; a row from an array by position, from an object by name
    assert at(7, "s", "ai", "mp", "r") == ('[1,"2",3.9]', [1, 2, 3], {}, {"k": 1, "j": "2"})
    assert at(8, "s", "mp", "r", "ai") == ('{"k":"1","j":2}', {"k": 1, "j": 2}, {"k": 1, "j": "2"}, [None, None])
    assert set(got[9].values()) == {9, '{"v": null}', None}  # a JSON null is null everywhere
    assert at(10, "tm", "s", "ts") == ("16:12:43.459", "16:12:43.459", None)
    assert at(11, "bo", "s", "i") == (True, "true", None)
    # a string holding JSON is a string: not an array
    assert at(12, "ai", "s") == ([], "[1,2]")
    # no $.v at all: every column SKIPs to null
    assert set(got[13].values()) == {13, '{"w": 1}', None}


FAILING = f"""
env {{ job.name = jsonpath_fails }}
source {{
  FakeSource {{
    plugin_output = f2
    schema = {{ table = "page.fails", fields {{ id = int, json_data = string }} }}
    rows = [{rows(['{"f1": "a1", "f2": "b1"}', '{"f1": "a2"}'])}]
  }}
}}
transform {{
  {block(SKIP_COLUMN, wire="plugin_input = f2, plugin_output = out")}
}}
sink {{ Delta {{ plugin_input = out, path = "${{work}}/never" }} }}
"""


def test_a_bad_value_with_fail_fails_the_job_naming_transform_table_column_and_value(spark, run_job_text):
    ran = run_job_text(FAILING)
    assert ran.result.status == "FAILED"
    error = ran.result.error
    assert (
        "JsonPath#2 on table page.fails: column 'json_data_f2' (path '$.f2' of field 'json_data'): "
        'no results for path $.f2; value: {"f1": "a2"}'
    ) in error, error


def test_documents_that_are_not_strict_json_are_read_as_seatunnels_jayway_reads_them(ran):
    """json-smart's permissive mode (SeaTunnel's JsonPath: Jayway's default provider), natively (a Java
    function in the JVM): what each column gets from documents strict JSON refuses."""
    got = {r["id"]: r for r in collect(ran("lenient"))}
    assert (got[1]["name"], got[1]["age"], got[1]["ok"], got[1]["tag"]) == ("Joy", 20, True, "b")
    assert got[1]["nested"] == '{"city":"Paris","zip":75001}'  # compact JSON, in the document's order
    assert (got[2]["name"], got[2]["age"], got[2]["ok"], got[2]["tag"]) == ("Ann", 31, False, "y")  # strict: as before
    assert (got[3]["name"], got[3]["age"], got[3]["tag"]) == ("Bo", 7, "2")
    assert got[3]["whole"] == '{"name":"Bo","age":"7","tags":[1,2]}'
    # a bare text is a JSON string to the permissive parser: $ is that text, $.name is not there (SKIP: null)
    assert (got[4]["whole"], got[4]["name"]) == ("just words", None)
    assert all(got[5][c] is None for c in ("name", "age", "ok", "tag", "nested", "whole"))  # refused even there
