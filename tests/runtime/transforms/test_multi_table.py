"""Multi-table rules at run time: table_match_regex and table_transform (Copy, FieldRename),
TableMerge and TableRename, with ``__table`` following the new table ids."""

JOB = """
env { job.name = multi_table }
source {
  FakeSource {
    plugin_output = fake
    tables_configs = [
      { schema = { table = "test.abc", fields { id = int, name = string, age = int } }, rows = [{ kind = INSERT, fields = [1, "a1", 10] }] },
      { schema = { table = "test.abcd", fields { id = int, name = string, age = int } }, rows = [{ kind = INSERT, fields = [2, "a2", 20] }] },
      { schema = { table = "test.xyz", fields { id = int, name = string, age = int } }, rows = [{ kind = INSERT, fields = [3, "x", 30] }] },
      { schema = { table = "test.www", fields { id = int, name = string, age = int } }, rows = [{ kind = INSERT, fields = [4, "w", 40] }] }
    ]
  }
}
transform {
  # SeaTunnel's multi-table example: test.a* copy name to name1, test.xyz to name2, test.www untouched
  Copy {
    plugin_input = fake, plugin_output = copied
    table_match_regex = "test.a.*"
    src_field = name, dest_field = name1
    table_transform = [{ table_path = "test.xyz", src_field = name, dest_field = name2 }]
  }
  TableMerge { plugin_input = copied, plugin_output = merged, table_match_regex = "test\\\\.abc.*", table = a_all }
  TableRename { plugin_input = merged, plugin_output = renamed, table_match_regex = "test\\\\.xyz", convert_case = UPPER, suffix = "_t" }
  FieldRename { plugin_input = renamed, plugin_output = fields, table_match_regex = "test\\\\.www", convert_case = UPPER }
  Python {
    plugin_input = fields, plugin_output = tagged
    function = "tests.runtime.transforms.udfs:tag_table"
    output_schema = { src_table = string }
  }
}
sink {
  Delta { plugin_input = tagged, path = "${work}/out/${table_name}" }
}
"""


def test_multi_table_rules_merge_and_rename(spark, run_job_text):
    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    assert {r["table"] for r in ran.result.committed} == {"test.a_all", "TEST.XYZ_t", "test.www"}  # convert_case reaches the database part (SeaTunnel)
    assert ran.rows(spark, "out/a_all", order_by="id") == [
        {"id": 1, "name": "a1", "age": 10, "name1": "a1", "src_table": "test.a_all"},
        {"id": 2, "name": "a2", "age": 20, "name1": "a2", "src_table": "test.a_all"},
    ]
    assert ran.rows(spark, "out/XYZ_t") == [{"id": 3, "name": "x", "age": 30, "name2": "x", "src_table": "TEST.XYZ_t"}]
    assert ran.rows(spark, "out/www") == [{"ID": 4, "NAME": "w", "AGE": 40, "src_table": "test.www"}]
