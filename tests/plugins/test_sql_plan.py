"""Sql at plan time, without Spark: the exported function table, explain, plan-time errors with
positions, and the Spark SQL SeaTunnel's functions compile to."""

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from streaming_engine.errors import ConfigError, SchemaError
from streaming_engine.job import compile_text
from streaming_engine.plan.render import render
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms._sql_compile import compile_query, parse_query
from transforms._sql_functions import FUNCTIONS
from transforms.sql import Sql, SqlOptions

PAGE = Path(__file__).parents[2] / "docs/seatunnel/transform-v2/sql-functions.md"
FAKE = TableSchema(
    "fake",
    (Column("id", "int", False), Column("name", "string"), Column("d", "double"), Column("ts", "timestamp"),
     Column("b", "boolean")),
)  # fmt: skip


def out(query: str) -> TableSchema:
    (result,) = Sql(SqlOptions.model_validate({"query": query})).output([Dataset((FAKE,))]).tables
    return result


def spark_sql(expression: str) -> str:
    return compile_query(parse_query(f"select {expression} as x from fake"), FAKE).items[0]


def test_function_table_lists_every_function_of_the_page_in_order():
    page = PAGE.read_text()
    headings = re.findall(r"^### (.+)$", page, re.M)
    names = [n.strip() for h in headings for n in h.split(" / ")]
    assert [n for n in FUNCTIONS if n != "TRUNCATE"] == names  # TRUNCATE: TRUNC's alias in its signature
    for name, f in FUNCTIONS.items():
        assert f.name == name and name == name.upper()
        assert f.signature in page, f"{name}: {f.signature!r} is not on the page"
        assert f.section in headings
        assert f.supported is True and f.reason == ""
    assert FUNCTIONS["LENGTH"].signature == FUNCTIONS["CHAR_LENGTH"].signature == "CHAR_LENGTH | LENGTH (string)"
    assert FUNCTIONS["TRUNCATE"].section == "TRUNC"


def test_explain_shows_seatunnel_functions_run_as_catalyst_expressions():
    job = compile_text("""
    source { FakeSource { plugin_output = fake, row.num = 1, schema = { fields { id = int, name = string, ts = timestamp, b = boolean } } } }
    transform {
      Sql {
        plugin_input = fake
        query = "select id, TO_CHAR(b) as b, DAY_OF_WEEK(ts) as dow, DATEADD(ts, 1, 'MONTH') as next, CONCAT(name, '_') as n, INSERT(name, 1, 1, 'x') as i, SOUNDEX(name) as s from fake"
      }
    }
    sink { Console { } }
    """)
    text = render(job, "text")
    assert "transform chain of 1: 1 segment(s), 0 Python pass(es)" in text
    assert re.search(r"- Spark column expressions \(Catalyst, no Python\): Sql#2 Sql \(from fake\)", text), text
    assert "Python UDF" not in text and "mapInArrow" not in text
    assert "schema: fake(id int, b string, dow int, next timestamp, n string, i string, s string)" in text


@pytest.mark.parametrize(
    "expression, spark",
    [
        ("TO_CHAR(b)", "CAST(b AS STRING)"),  # one argument: the value as a string (Spark's to_char needs two)
        ("DAY_OF_WEEK(ts)", "(WEEKDAY(ts) + 1)"),  # Monday = 1 (Spark's dayofweek: Sunday = 1)
        ("DATE_TRUNC(ts, 'DAY')", "DATE_TRUNC('DAY', ts)"),  # Spark's argument order
        ("CONCAT(name, '_')", "CONCAT_WS('', name, '_')"),  # NULLs ignored
        ("name || '_'", "CONCAT(name, '_')"),  # NULL when a part is NULL
        ("REGEXP_REPLACE(name, 'w+', 'W', 'i')", "REGEXP_REPLACE(name, '(?iu)w+', 'W')"),  # flags, not a position
        ("REGEXP_SUBSTR(name, '\\d{4}')", "REGEXP_SUBSTR(name, '\\\\d{4}')"),  # a backslash is a backslash
        ("DAYNAME(ts)", "DATE_FORMAT(ts, 'EEEE')"),  # the full name (Spark's dayname: 'Mon')
        ("FORMATDATETIME(ts, 'uuuu-MM-dd')", "DATE_FORMAT(ts, 'yyyy-MM-dd')"),
        ("id / 2", "CAST(id DIV 2 AS INT)"),  # int / int is an int
        ("DAY_OF_WEEK(ts) * 2", "(WEEKDAY(ts) + 1) * 2"),
    ],
)
def test_seatunnel_functions_compile_to_spark_sql(expression, spark):
    assert spark_sql(expression) == f"{spark} AS `x`"


def _validation_error(query: str) -> str:
    with pytest.raises(ValidationError) as e:
        SqlOptions.model_validate({"query": query})
    return str(e.value)


def test_unknown_function_is_named_with_its_position():
    message = _validation_error("select id,\n  my_udf(name) as u from fake")
    assert "function my_udf() is not supported" in message
    assert "neither a SeaTunnel SQL function (sql-functions.md) nor a Spark built-in" in message
    assert "at line 2, column 3 of the query" in message


@pytest.mark.parametrize(
    "query, message",
    [
        ("select a.id from fake a join other b on a.id = b.id", "JOIN is not supported: .*at line 1, column 25"),
        ("select id from fake group by id", "GROUP BY is not supported: .*at line 1, column 21"),
        ("select id from fake\norder by id", "ORDER BY is not supported: .*at line 2, column 1"),
        ("select id, count(*) as n from fake", r"aggregate/window function count\(\) is not supported: .*at line 1, column 12"),
        ("select explode(array(1)) from fake", r"generator function explode\(\) is not supported: .*at line 1, column 8"),
        ("select id from fake where id in (select id from other)", "subqueries are not supported: .*at line 1, column 41"),
        ("select LOCATE('a') from fake", r"LOCATE\(\) takes 2 to 3 argument\(s\) \(LOCATE\(searchString, string\[, startInit\]\)\), got 1 \(at line 1, column 8"),
        ("select REGEXP_SUBSTR(name, 'a', 1) from fake", r"REGEXP_SUBSTR\(\): takes 2 arguments, or 6"),
    ],
)
def test_unsupported_constructs_are_named_with_their_position(query, message):
    if "REGEXP_SUBSTR" in query:  # a rule's own check: at schema time
        with pytest.raises(SchemaError) as e:
            out(query)
        assert re.search(message, e.value.params["detail"]), e.value.params["detail"]
        return
    assert re.search(message, _validation_error(query)), _validation_error(query)


@pytest.mark.parametrize(
    "query, message",
    [
        ("select REGEXP_LIKE(name, 'a', 'x') from fake", r"REGEXP_LIKE\(\): flags may only contain 'i', 'c', 'n', 'm', got 'x' \(at line 1, column 8"),
        ("select REGEXP_LIKE(name, 'a', name) from fake", r"REGEXP_LIKE\(\): the flags must be a constant"),
        ("select FORMATDATETIME(ts, 'YYYY-ww') from fake", r"FORMATDATETIME\(\): pattern letter 'Y' \(week-based year\) in 'YYYY-ww' has no Spark equivalent"),
        ("select id,  DATEADD(ts, 1, name) from fake", r"DATEADD\(\): the datetime field must be a constant \(at line 1, column 13"),
        ("select DATEDIFF(ts, ts, 'FORTNIGHT') from fake", r"DATEDIFF\(\): unsupported datetime field 'FORTNIGHT'; use one of YEAR, MONTH"),
        ("select ROUND(d, id) from fake", r"ROUND\(\): the number of digits must be a constant"),
        ("select TO_DATE(name, 'HH') from fake", r"TO_DATE\(\): the format 'HH' has neither a year \(yy\) nor minutes \(mm\)"),
        ("select EXTRACT(CENTURY FROM ts) from fake", r"EXTRACT\(CENTURY FROM ...\): unsupported field; use one of YEAR"),
    ],
)
def test_function_arguments_are_checked_at_plan_time(query, message):
    with pytest.raises(SchemaError) as e:
        out(query)
    assert e.value.condition == "SCHEMA.INVALID"
    assert re.search(message, e.value.params["detail"]), e.value.params["detail"]


def test_plan_time_errors_reach_the_job_with_the_block():
    with pytest.raises(ConfigError) as e:
        compile_text("""
        source { FakeSource { plugin_output = fake, row.num = 1, schema = { fields { id = int } } } }
        transform { Sql { query = "select DAYNAME(id, 1) as d from fake" } }
        sink { Console { } }
        """)
    assert "DAYNAME() takes 1 argument(s) (DAYNAME(dateAndTime)), got 2" in str(e.value)
    assert "Sql" in str(e.value)


def test_result_types_follow_seatunnel():
    result = out("select LENGTH(name) a, CEIL(d) b, MOD(d, 2) c, id / 2 e, d / 2 f, SIGN(d) g, DATEADD(ts, 1, 'DAY') h, "
                 "TO_DATE(name, 'yyyy-MM-dd') i, PARSEDATETIME(name, 'yyyy-MM-dd HH:mm') j, CAST(id AS TIME) k, "
                 "EXTRACT(EPOCH FROM ts) l, CURRENT_TIME m, COALESCE(NULL, id, d) n, NULL o from fake")  # fmt: skip
    assert [(c.name, c.type) for c in result.columns] == [
        ("a", "bigint"), ("b", "double"), ("c", "int"), ("e", "int"), ("f", "double"), ("g", "int"), ("h", "timestamp"),
        ("i", "date"), ("j", "timestamp"), ("k", "string"), ("l", "decimal(18,6)"), ("m", "string"), ("n", "double"),
        ("o", "string"),
    ]  # fmt: skip


def test_spark_form_of_a_function_with_a_unit_keyword_still_works():
    result = out("select timestampadd(HOUR, 1, ts) a, DATEDIFF(DAY, ts, ts) b, DATE_TRUNC('MONTH', ts) c from fake")
    assert [c.type for c in result.columns] == ["timestamp", "bigint", "timestamp"]
    with pytest.raises(SchemaError) as e:
        out("select day from fake")  # a unit word is not a column
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"


def test_a_nested_map_cannot_be_read_with_dots_as_on_sql_md():
    table = TableSchema("fake", (Column("c_row", "struct<c_map_1: map<string,string>, c_map_2: map<string,map<string,string>>>"),))
    parsed = parse_query("select c_row.c_map_1.some_key, c_row.c_map_2.some_key from fake")
    assert [c.type for c in compile_query(parsed, table).columns] == ["string", "map<string,string>"]
    with pytest.raises(ValueError, match=r"c_row.c_map_2.some_key.inner_map_key: a map's value can only end the path .*line 1, column 8"):
        compile_query(parse_query("select c_row.c_map_2.some_key.inner_map_key from fake"), table)
