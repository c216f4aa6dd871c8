"""Sql (Spark SQL with WHERE) and DataValidator (ROUTE_TO_TABLE, SKIP, FAIL) at run time."""

import json

SOURCE = """
source {
  FakeSource {
    plugin_output = users
    schema = { table = "shop.users", fields { id = int, name = string, age = int, email = string } }
    rows = [
      { kind = INSERT, fields = [1, "Joy Ding", 20, "joy@example.com"] },
      { kind = INSERT, fields = [2, null, 200, "bad-email"] },
      { kind = INSERT, fields = [3, "May", 30, "may@example.org"] },
      { kind = INSERT, fields = [4, "K", -1, "k@x.io"] }
    ]
  }
}
"""

# YAML: in HOCON, SeaTunnel's `row_error_handle_way = ROUTE_TO_TABLE` next to
# `row_error_handle_way.error_table = ...` is a parse error (a string and an object under one key).
JOB = """
env:
  job.name: sql_and_validation
source:
  - plugin_name: FakeSource
    plugin_output: users
    schema:
      table: shop.users
      fields: {id: int, name: string, age: int, email: string}
    rows:
      - {kind: INSERT, fields: [1, "Joy Ding", 20, "joy@example.com"]}
      - {kind: INSERT, fields: [2, null, 200, "bad-email"]}
      - {kind: INSERT, fields: [3, "May", 30, "may@example.org"]}
      - {kind: INSERT, fields: [4, "K", -1, "k@x.io"]}
transform:
  - plugin_name: Sql
    plugin_input: users
    plugin_output: adults
    query: "select *, concat(name, '_') as name2, age + 1 as older from users where age < 100 and id > 1"
  - plugin_name: DataValidator
    plugin_input: adults
    plugin_output: checked
    row_error_handle_way: SKIP
    field_rules:
      - {field_name: email, rule_type: REGEX, pattern: '[A-Z]+@EXAMPLE\\.(COM|ORG)', case_sensitive: false}
  - plugin_name: DataValidator
    plugin_input: users
    plugin_output: validated
    row_error_handle_way: ROUTE_TO_TABLE
    row_error_handle_way.error_table: shop.user_errors
    field_rules:
      - field_name: name
        rules:
          - {rule_type: NOT_NULL}
          - {rule_type: LENGTH, min_length: 2, custom_message: "Name too short"}
      - {field_name: age, rule_type: RANGE, min_value: 0, max_value: 150}
      - {field_name: email, rule_type: UDF, function_name: EMAIL}
sink:
  - {plugin_name: Delta, plugin_input: checked, path: "${work}/adults"}
  - {plugin_name: Delta, plugin_input: validated, path: "${work}/out/${table_name}"}
"""


def test_sql_where_and_validator_routing(spark, run_job_text):
    ran = run_job_text(JOB, fmt="yaml")
    assert ran.result.status == "FINISHED", ran.result.error

    # WHERE drops ids 1 (id > 1) and 2 (age < 100); the SKIP validator drops id 4 (email pattern)
    adults = ran.delta(spark, "adults")
    assert adults.columns == ["id", "name", "age", "email", "name2", "older"]
    assert [r.asDict() for r in adults.collect()] == [
        {"id": 3, "name": "May", "age": 30, "email": "may@example.org", "name2": "May_", "older": 31}
    ]

    assert sorted(r["id"] for r in ran.rows(spark, "out/users")) == [1, 3]
    errors = {json.loads(r["original_data"])["id"]: r for r in ran.rows(spark, "out/user_errors")}
    assert sorted(errors) == [2, 4]
    bad = errors[2]
    assert (bad["source_table_id"], bad["source_table_path"]) == ("shop.users", "shop.users")
    assert json.loads(bad["original_data"]) == {"id": 2, "name": None, "age": 200, "email": "bad-email"}
    assert json.loads(bad["validation_errors"]) == [
        {"field_name": "name", "error_message": "Field cannot be null"},
        {"field_name": "age", "error_message": "Value 200 exceeds maximum 150"},
        {"field_name": "email", "error_message": "Email must contain exactly one @ symbol: bad-email"},
    ]
    assert bad["create_time"] is not None
    assert json.loads(errors[4]["validation_errors"]) == [
        {"field_name": "name", "error_message": "Name too short"},
        {"field_name": "age", "error_message": "Value -1 is below minimum 0"},
    ]


FAILING_JOB = (
    """
env { job.name = validation_fails }
"""
    + SOURCE
    + """
transform {
  DataValidator {
    plugin_input = users, plugin_output = validated
    field_rules = [{ field_name = age, rule_type = RANGE, min_value = 0, max_value = 150 }]
  }
}
sink {
  Delta { plugin_input = validated, path = "${work}/never" }
}
"""
)


def test_validator_in_fail_mode_fails_the_job_naming_transform_and_rule(spark, run_job_text):
    ran = run_job_text(FAILING_JOB)
    assert ran.result.status == "FAILED"
    error = ran.result.error
    assert "DataValidator#2 on table shop.users: Validation failed" in error, error
    assert "Validation failed: age: Value " in error and ("200 exceeds maximum 150" in error or "-1 is below minimum 0" in error), error
    assert not list(ran.work.glob("never/_delta_log/*.json")), "no epoch may commit"
