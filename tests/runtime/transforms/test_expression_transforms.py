"""Column and row-kind transforms at run time, as Spark column expressions.

One job, two pipelines (a job run costs several seconds, so they share it):
- people: Copy -> Replace (literal, regex, replace_first) -> Split -> Filter -> FieldMapper -> FieldRename;
- orders (CDC rows): FilterRowKind (exclude / include) and RowKindExtractor (FULL / SHORT).
"""

JOB = """
env { job.name = expression_transforms }
source {
  FakeSource {
    plugin_output = people
    schema = { table = "hr.people", fields { id = int, name = string, note = string, card = bigint } }
    rows = [
      { kind = INSERT, fields = [1, "Joy Ding", "a.b.c", 123] },
      { kind = INSERT, fields = [2, "May Ding  Lee Kim", "x", 456] },
      { kind = INSERT, fields = [3, null, null, 789] }
    ]
  }
  FakeSource {
    plugin_output = cdc
    schema = { table = "shop.orders", fields { id = bigint, name = string } }
    rows = [
      { kind = INSERT, fields = [1, "A"] },
      { kind = INSERT, fields = [2, "B"] },
      { kind = UPDATE_BEFORE, fields = [1, "A"] },
      { kind = UPDATE_AFTER, fields = [1, "F"] },
      { kind = DELETE, fields = [2, "B"] }
    ]
  }
}
transform {
  Copy { plugin_input = people, plugin_output = copied, fields { name1 = name, card1 = card } }
  Replace { plugin_input = copied, plugin_output = r1, replace_field = note, pattern = ".", replacement = "-" }
  Replace {
    plugin_input = r1, plugin_output = r2, replace_field = name1,
    pattern = "(\\\\w+) (\\\\w+)", replacement = "$2,$1", is_regex = true, replace_first = true
  }
  Replace { plugin_input = r2, plugin_output = r3, replace_field = name, pattern = "\\\\s+", replacement = "_", is_regex = true }
  Split { plugin_input = r3, plugin_output = split, split_field = name, separator = "_", output_fields = [first, rest] }
  Filter { plugin_input = split, plugin_output = filtered, exclude_fields = [card1] }
  FieldMapper {
    plugin_input = filtered, plugin_output = mapped,
    field_mapper = { id = id, rest = last_name, first = first_name, note = note, name1 = swapped, card = card }
  }
  FieldRename { plugin_input = mapped, plugin_output = renamed, convert_case = UPPER, prefix = "F_" }

  FilterRowKind { plugin_input = cdc, plugin_output = no_before, exclude_kinds = [UPDATE_BEFORE] }
  RowKindExtractor { plugin_input = no_before, plugin_output = full, custom_field_name = op, transform_type = FULL }
  # the second extractor sees the kind the first one left: every row is an INSERT now
  RowKindExtractor { plugin_input = full, plugin_output = full2, custom_field_name = kind_after }
  FilterRowKind { plugin_input = cdc, plugin_output = inserts, include_kinds = [INSERT] }
}
sink {
  Delta { plugin_input = renamed, path = "${work}/people" }
  Delta { plugin_input = full2, path = "${work}/kinds" }
  Delta { plugin_input = inserts, path = "${work}/inserts" }
}
"""


def test_column_and_row_kind_transforms(spark, run_job_text):
    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error

    people = ran.delta(spark, "people")
    assert people.columns == ["F_ID", "F_LAST_NAME", "F_FIRST_NAME", "F_NOTE", "F_SWAPPED", "F_CARD"]
    assert [f.dataType.simpleString() for f in people.schema.fields] == ["int", "string", "string", "string", "string", "bigint"]
    assert [r.asDict() for r in people.orderBy("F_ID").collect()] == [
        {"F_ID": 1, "F_LAST_NAME": "Ding", "F_FIRST_NAME": "Joy", "F_NOTE": "a-b-c", "F_SWAPPED": "Ding,Joy", "F_CARD": 123},
        # replace_first swaps only the first pair; \\s+ -> _ also folds the double space;
        # Split with two output fields keeps the rest in the last one
        {"F_ID": 2, "F_LAST_NAME": "Ding_Lee_Kim", "F_FIRST_NAME": "May", "F_NOTE": "x", "F_SWAPPED": "Ding,May  Lee Kim", "F_CARD": 456},
        {"F_ID": 3, "F_LAST_NAME": None, "F_FIRST_NAME": None, "F_NOTE": None, "F_SWAPPED": None, "F_CARD": 789},
    ]  # fmt: skip

    kinds = sorted((r["id"], r["name"], r["op"], r["kind_after"]) for r in ran.rows(spark, "kinds"))
    assert kinds == [
        (1, "A", "INSERT", "+I"), (1, "F", "UPDATE_AFTER", "+I"), (2, "B", "DELETE", "+I"), (2, "B", "INSERT", "+I"),
    ]  # fmt: skip
    assert sorted((r["id"], r["name"]) for r in ran.rows(spark, "inserts")) == [(1, "A"), (2, "B")]
