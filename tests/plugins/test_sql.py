"""Sql: plan-time reading of the query (shape checks, output schema, column checks)."""

import pytest
from pydantic import ValidationError

from streaming_engine.errors import SchemaError
from streaming_engine.plugins.registry import TRANSFORMS
from streaming_engine.schema import Column, Dataset, TableSchema
from transforms.sql import Sql, SqlOptions

ROW = "struct<c_inner_row: struct<c_inner_int: int, c_map_1: map<string,string>>, c_string: string>"
FAKE = TableSchema(
    "fake",
    (Column("id", "int", False), Column("name", "string"), Column("age", "int"), Column("price", "double"),
     Column("c_row", ROW), Column("tags", "array<string>")),
    ("id",),
)  # fmt: skip


def out(query, table=FAKE, **extra):
    t = Sql(SqlOptions.model_validate({"query": query, **extra}))
    (result,) = t.output([Dataset((table,))]).tables
    return result


def cols(table):
    return [(c.name, c.type) for c in table.columns]


def test_traits():
    assert TRANSFORMS.find("sql") is Sql
    assert (Sql.execution, Sql.chainable, Sql.max_inputs) == ("expression", True, 1)


def test_doc_example():
    result = out("select id, concat(name, '_') as name, age+1 as age from fake where id>0")
    assert cols(result) == [("id", "int"), ("name", "string"), ("age", "int")]
    assert result.primary_key == ("id",)
    assert result.column("id").nullable is False


def test_star_expands_and_keeps_key():
    result = out("select * from fake")
    assert result.columns == FAKE.columns and result.primary_key == ("id",)
    assert out("select fake.*, 1 as one from fake").names == FAKE.names + ("one",)


def test_common_options_doc_example_types():
    q = "select id, regexp_replace(name, '.+', 'b') as name, age+1 as age, pi() as pi, tags from fake"
    assert cols(out(q)) == [("id", "int"), ("name", "string"), ("age", "int"), ("pi", "double"), ("tags", "array<string>")]


def test_struct_query_doc_example():
    q = ("select c_row, c_row.c_inner_row, c_row.c_string, c_row.c_inner_row.c_inner_int, "
         "c_row.c_inner_row.c_map_1, c_row.c_inner_row.c_map_1.some_key from fake")  # fmt: skip
    assert cols(out(q)) == [
        ("c_row", ROW),
        ("c_inner_row", "struct<c_inner_int: int, c_map_1: map<string,string>>"),
        ("c_string", "string"),
        ("c_inner_int", "int"),
        ("c_map_1", "map<string,string>"),
        ("some_key", "string"),
    ]
    assert out("select c_row.* from fake").names == ("c_inner_row", "c_string")


def test_casts_literals_and_expressions_are_typed():
    # sql-functions.md: CEIL returns the argument's type (double here), LENGTH a long
    q = ("select cast(age as decimal(10, 2)) a, cast(id as varchar(10)) b, age::bigint c, 1.23 d, 10000000000 e, "
         "price / 2 f, age * 2 g, ceil(price) h, length(name) i, name like 'a%' j, tags[0] k, "
         "case when age > 1 then price else null end l, coalesce(null, age) m, current_date n, md5(name) o from fake")  # fmt: skip
    assert cols(out(q)) == [
        ("a", "decimal(10,2)"), ("b", "string"), ("c", "bigint"), ("d", "decimal(3,2)"), ("e", "bigint"),
        ("f", "double"), ("g", "int"), ("h", "double"), ("i", "bigint"), ("j", "boolean"), ("k", "string"),
        ("l", "double"), ("m", "int"), ("n", "date"), ("o", "string"),
    ]  # fmt: skip


def test_column_names_are_matched_case_insensitively_and_named_as_written():
    result = out("select ID, f.name from fake f")
    assert cols(result) == [("ID", "int"), ("name", "string")]
    assert result.primary_key == ()  # the key column is renamed (ID), so the key is not kept


def test_unaliased_expression_is_named_by_its_text():
    assert out("select upper(name) from fake").names == ("upper(name)",)


@pytest.mark.parametrize(
    "query, column",
    [
        ("select nme from fake", "nme"),
        ("select id from fake where agee > 1", "agee"),
        ("select upper(nmae) as n from fake", "nmae"),
        ("select c_row.nope from fake", "c_row.nope"),
        ("select fake.idd from fake", "idd"),
    ],
)
def test_missing_columns_are_named(query, column):
    with pytest.raises(SchemaError) as e:
        out(query)
    assert e.value.condition == "SCHEMA.MISSING_COLUMN"
    assert e.value.params["column"] == column and e.value.params["table"] == "fake"


def test_keywords_in_function_arguments_are_not_columns():
    q = "select trim(BOTH 'x' FROM name) t, timestampadd(DAY, 1, current_timestamp) ts, extract(year from current_date) y from fake"
    assert cols(out(q)) == [("t", "string"), ("ts", "timestamp"), ("y", "int")]


def test_duplicate_output_column():
    with pytest.raises(SchemaError) as e:
        out("select *, upper(name) as name from fake")
    assert e.value.condition == "SCHEMA.DUPLICATE_COLUMN" and e.value.params["column"] == "name"


@pytest.mark.parametrize(
    "query, message",
    [
        ("update fake set a = 1", "must be a single SELECT statement"),
        ("select 1", "query needs FROM"),
        ("select count(*) from fake", r"aggregate/window function count\(\) is not supported"),
        ("select id from fake group by id", "GROUP BY is not supported"),
        ("select id from fake order by id", "ORDER BY is not supported"),
        ("select id from fake limit 3", "LIMIT is not supported"),
        ("select a.id from fake a join other b on a.id = b.id", "JOIN is not supported"),
        ("select id from fake, other", "implicit JOIN"),
        ("select id from (select id from fake)", "subqueries in FROM are not supported"),
        ("select distinct id from fake", "SELECT DISTINCT is not supported"),
        ("select row_number() over (order by id) from fake", "not supported"),
        ("select 'abc from fake", "unterminated quote"),
        ("select (id from fake", "unbalanced parentheses"),
        ("select id,, name from fake", "empty item in the SELECT list"),
    ],
)
def test_unsupported_or_broken_queries(query, message):
    with pytest.raises(ValidationError, match=message):
        SqlOptions.model_validate({"query": query})


def test_left_function_is_not_a_join():
    assert out("select id from fake where left(name, 1) = 'a'").names == ("id",)


def test_from_name_is_recorded_not_enforced():
    t = Sql(SqlOptions.model_validate({"query": "select * from some_other_name", "plugin_input": "fake"}))
    assert t.query_table == "some_other_name"
    assert "from some_other_name" in t.describe()
    assert t.output([Dataset((FAKE,))]).tables[0].names == FAKE.names


def test_multi_table_applies_per_table():
    other = TableSchema("db.other", (Column("id", "int"), Column("name", "string")))
    t = Sql(SqlOptions.model_validate({"query": "select id, upper(name) as name from t"}))
    result = t.output([Dataset((FAKE, other))])
    assert [tb.table_id for tb in result.tables] == ["fake", "db.other"]
    assert all(tb.names == ("id", "name") for tb in result.tables)
