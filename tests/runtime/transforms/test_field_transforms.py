"""Copy, Replace, Split, Filter, FieldMapper and FieldRename at run time: one chain, one job."""

JOB = """
env { job.name = field_transforms }
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
}
sink {
  Delta { plugin_input = renamed, path = "${work}/out/${table_name}" }
}
"""


def test_field_transforms_chain(spark, run_job_text):
    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    df = ran.delta(spark, "out/people")
    assert df.columns == ["F_ID", "F_LAST_NAME", "F_FIRST_NAME", "F_NOTE", "F_SWAPPED", "F_CARD"]
    assert [f.dataType.simpleString() for f in df.schema.fields] == ["int", "string", "string", "string", "string", "bigint"]
    got = [r.asDict() for r in df.orderBy("F_ID").collect()]
    assert got == [
        {"F_ID": 1, "F_LAST_NAME": "Ding", "F_FIRST_NAME": "Joy", "F_NOTE": "a-b-c", "F_SWAPPED": "Ding,Joy", "F_CARD": 123},
        # replace_first swaps only the first pair; \s+ -> _ also folds the double space;
        # Split with two output fields keeps the rest in the last one
        {"F_ID": 2, "F_LAST_NAME": "Ding_Lee_Kim", "F_FIRST_NAME": "May", "F_NOTE": "x", "F_SWAPPED": "Ding,May  Lee Kim", "F_CARD": 456},
        {"F_ID": 3, "F_LAST_NAME": None, "F_FIRST_NAME": None, "F_NOTE": None, "F_SWAPPED": None, "F_CARD": 789},
    ]
