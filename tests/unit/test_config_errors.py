"""One test per config error class: its condition, its parameters and where it is."""

import pytest

from streaming_engine.config.loader import load_file
from streaming_engine.errors import ConfigError
from tests.unit.helpers import compile_ok, one_problem, problems_of

SRC = 'source { TestSource { plugin_output = "src" } }\n'
SINK = 'sink { TestSink { plugin_input = "src" } }\n'


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_file(tmp_path / "nope.conf")
    assert exc.value.problems[0].condition == "CONFIG.FILE_NOT_FOUND"


def test_unsupported_extension(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text("x")
    with pytest.raises(ConfigError) as exc:
        load_file(f)
    assert exc.value.problems[0].condition == "CONFIG.UNSUPPORTED_FORMAT"


@pytest.mark.parametrize("missing", ["source", "sink"])
def test_empty_job(missing):
    text = {"source": SINK, "sink": SRC}[missing]
    p = one_problem(text, "CONFIG.EMPTY_JOB")
    assert p.params["section"] == missing


def test_completely_empty_file_reports_both_sections():
    conds = [p.params.get("section") for p in problems_of("env { }") if p.condition == "CONFIG.EMPTY_JOB"]
    assert conds == ["source", "sink"]


def test_unknown_plugin_lists_available_names_sorted():
    p = one_problem(SRC + "transform { NoSuchThing { } }\n" + SINK, "CONFIG.UNKNOWN_PLUGIN")
    assert p.params["name"] == "NoSuchThing"
    assert p.location.section == "transform" and p.location.index == 1 and p.location.line == 2
    names = p.params["available"].split(", ")
    assert names == sorted(names, key=str.lower) and "TestMap" in names


def test_unknown_option_is_a_warning_with_did_you_mean():
    job = compile_ok('source { TestSource { plugin_output = "src", row.numb = 3 } }\n' + SINK)
    [w] = [w for w in job.dag.warnings if w.condition == "CONFIG.UNKNOWN_OPTION"]
    assert w.severity == "warning"
    assert w.params["key"] == "row.numb"
    assert "row.num" in w.params["hint"]
    assert w.location.plugin == "TestSource" and w.location.key == "row.numb"


def test_unknown_option_is_an_error_with_strict():
    p = one_problem('source { TestSource { plugin_output = "src", rownum = 3 } }\n' + SINK,
                    "CONFIG.UNKNOWN_OPTION", strict=True)
    assert p.severity == "error"


NESTED = """
source { FakeSource { plugin_output = f, row.num = 3, schema { table = "db.a", fields { id = int, name = string } } } }
transform { FieldRename { plugin_input = f, plugin_output = g, convert_case = UPPER,
  table_transform = [ { table_path = "db.a", convert_case = LOWER, prefx = "p_" } ] } }
sink { Assert { plugin_input = g, rules {
  row_rules = [ { rule_type = MIN_ROW, rule_value = 3, colour = red } ]
  tables_configs = [ { table_path = "db.a", catalog_table_rule {
    primary_key_rulez { primary_key_columns = [id] }, column_rule = [ { name = id, type = int, nulable = true } ] } } ]
} } }
"""


def test_unknown_options_at_any_depth_are_warnings_with_did_you_mean():
    """SeaTunnel tolerates unknown keys inside rule objects and list items as
    it does at the top: the same rule everywhere, named by their full path."""
    job = compile_ok(NESTED)
    found = {w.params["key"]: w for w in job.dag.warnings if w.condition == "CONFIG.UNKNOWN_OPTION"}
    assert set(found) == {
        "table_transform[0].prefx",
        "rules.row_rules[0].colour",
        "rules.tables_configs[0].catalog_table_rule.primary_key_rulez",
        "rules.tables_configs[0].catalog_table_rule.column_rule[0].nulable",
    }
    assert all(w.severity == "warning" for w in found.values())
    assert "'prefix'" in found["table_transform[0].prefx"].params["hint"]
    assert "'primary_key_rule'" in found["rules.tables_configs[0].catalog_table_rule.primary_key_rulez"].params["hint"]
    assert "'nullable'" in found["rules.tables_configs[0].catalog_table_rule.column_rule[0].nulable"].params["hint"]
    assert found["rules.row_rules[0].colour"].location.plugin == "Assert"
    # the known options next to them still count
    [sink] = [v for v in job.dag.vertices if v.plugin.name == "Assert"]
    assert sink.plugin.options.rules.row_rules[0].rule_value == 3


def test_unknown_options_at_any_depth_are_errors_with_strict():
    problems = [p for p in problems_of(NESTED, strict=True) if p.condition == "CONFIG.UNKNOWN_OPTION"]
    assert len(problems) == 4 and all(p.severity == "error" for p in problems)


def test_a_nested_value_error_still_names_its_full_path():
    text = NESTED.replace("rule_value = 3, colour = red", "rule_value = -1")
    p = one_problem(text, "CONFIG.INVALID_OPTION")
    assert p.location.key == "rules.row_rules[0].rule_value"


def test_invalid_option_value_names_the_key():
    p = one_problem('source { TestSource { plugin_output = "src", row.num = "many" } }\n' + SINK,
                    "CONFIG.INVALID_OPTION")
    assert p.location.key == "row.num"
    assert p.location.plugin == "TestSource"


def test_invalid_env_value_names_the_key():
    p = one_problem("env { job.mode = SOMETIMES }\n" + SRC + SINK, "CONFIG.INVALID_OPTION")
    assert p.location.section == "env" and p.location.key == "job.mode"


def test_dangling_input_suggests_the_closest_name():
    p = one_problem(SRC + 'sink { TestSink { plugin_input = "srx" } }', "CONFIG.DANGLING_INPUT")
    assert p.params["input"] == "srx"
    assert "'src'" in p.params["hint"]
    assert p.location.key == "plugin_input" and p.location.section == "sink"


def test_duplicate_output_names_both_blocks():
    p = one_problem(
        SRC + 'transform { TestMap { plugin_input = src, plugin_output = src } }\n' + SINK, "CONFIG.DUPLICATE_OUTPUT"
    )
    assert p.params == {"output": "src", "other": "TestSource#1"}
    assert p.location.plugin == "TestMap"


def test_ambiguous_default_input_names_the_candidates():
    p = one_problem(
        'source { TestSource { plugin_output = a }\n TestSource { plugin_output = b } }\n'
        "transform { TestMap { } }\n"
        "sink { TestSink { plugin_input = a } }",
        "CONFIG.AMBIGUOUS_INPUT",
    )
    assert p.params["candidates"] == "a, b"
    assert p.location.plugin == "TestMap"


def test_cycle_is_named():
    text = (
        SRC
        + "transform {\n"
        + "  TestMap { plugin_input = y, plugin_output = x }\n"
        + "  TestMap { plugin_input = x, plugin_output = y }\n"
        + "}\n"
        + 'sink { TestSink { plugin_input = "y" } TestSink { plugin_input = "src" } }\n'
    )
    probs = problems_of(text)
    cycle = [p for p in probs if p.condition == "CONFIG.CYCLE"]
    assert [p.params["cycle"] for p in cycle] == ["TestMap#2 -> TestMap#3 -> TestMap#2"]
    unreachable = [p for p in probs if p.condition == "CONFIG.UNREACHABLE_SINK"]
    assert [p.location.index for p in unreachable] == [1]


def test_self_cycle():
    p = one_problem(SRC + "transform { TestMap { plugin_input = me, plugin_output = me } }\n" + SINK, "CONFIG.CYCLE")
    assert p.params["cycle"] == "TestMap#2 -> TestMap#2"


def test_unread_source_is_a_warning():
    job = compile_ok(SRC + 'source { TestSource { plugin_output = "lonely" } }\n' + SINK)
    [w] = [w for w in job.dag.warnings if w.condition == "CONFIG.UNREAD_SOURCE"]
    assert w.params["output"] == "lonely" and w.severity == "warning"


def test_table_rules_that_match_no_input_table_are_warnings():
    """After a case conversion, a table_path written in the old case selects nothing: said, with the name it meant."""
    job = compile_ok(
        'source { FakeSource { plugin_output = s, tables_configs = ['
        ' { schema = { table = "db.abc", fields { id = int } } }, { schema = { table = "db.xyz", fields { id = int } } } ] } }\n'
        'transform { TableRename { plugin_input = s, plugin_output = r, convert_case = UPPER }\n'
        '  FieldRename { plugin_input = r, plugin_output = f, convert_case = UPPER,'
        '    table_transform = [ { table_path = "DB.ABC", prefix = p_ }, { table_path = "db.xyz", prefix = q_ } ] }\n'
        '  Copy { plugin_input = f, plugin_output = c, table_match_regex = "db\\\\..*", src_field = ID, dest_field = id2 } }\n'
        'sink { Console { plugin_input = c } }'
    )
    found = {w.location.key: str(w) for w in job.dag.warnings if w.condition == "CONFIG.UNMATCHED_TABLE"}
    assert set(found) == {"table_transform[2].table_path", "table_match_regex"}, found
    assert "did you mean 'DB.XYZ'?" in found["table_transform[2].table_path"]
    assert "table_match_regex 'db\\\\..*' matches no table of the input (DB.ABC, DB.XYZ)" in found["table_match_regex"]


def test_too_many_inputs_for_a_one_input_transform():
    p = one_problem(
        'source { TestSource { plugin_output = a } TestSource { plugin_output = b } }\n'
        "transform { TestMap { plugin_input = [a, b] } }\n"
        'sink { TestSink { } }',
        "CONFIG.TOO_MANY_INPUTS",
    )
    assert p.params["count"] == 2


def test_transform_naming_a_missing_column_fails_at_plan_time():
    p = one_problem(SRC + 'transform { TestMap { plugin_input = src, column = nope } }\nsink { TestSink { } }',
                    "SCHEMA.MISSING_COLUMN")
    assert p.params["column"] == "nope" and p.params["table"] == "t"
    assert p.location.plugin == "TestMap" and p.location.section == "transform"


def test_sink_fed_an_incompatible_schema_fails_at_plan_time():
    p = one_problem(SRC + 'sink { TestSink { plugin_input = src, require = amount } }', "SCHEMA.MISSING_COLUMN")
    assert p.params["column"] == "amount"
    assert p.location.section == "sink"


def test_all_problems_of_a_file_are_reported_at_once():
    text = (
        "env { job.mode = NEVER }\n"
        'source { TestSource { plugin_output = "src" } }\n'
        "transform { Nope { } \n TestMap { plugin_input = missing } }\n"
        'sink { TestSink { plugin_input = "src", require = zzz } }\n'
    )
    conds = sorted(p.condition for p in problems_of(text))
    assert conds == sorted(
        ["CONFIG.INVALID_OPTION", "CONFIG.UNKNOWN_PLUGIN", "CONFIG.DANGLING_INPUT", "SCHEMA.MISSING_COLUMN"]
    )


def test_error_text_names_file_block_and_key():
    with pytest.raises(ConfigError) as exc:
        compile_ok(SRC + 'sink { TestSink { plugin_input = "srx" } }')
    text = str(exc.value)
    assert "job.conf:2" in text and "sink[1] TestSink" in text and "key 'plugin_input'" in text


def test_env_keys_override_engine_defaults_one_by_one(tmp_path, monkeypatch):
    defaults = tmp_path / "engine.conf"
    defaults.write_text('env { checkpoint.dir = "/ck", checkpoint.interval = 5000 }')
    monkeypatch.setenv("STREAMING_ENGINE_CONF", str(defaults))
    job = compile_ok("env { checkpoint.interval = 1000 }\n" + SRC + SINK)
    assert job.dag.env.checkpoint_dir == "/ck"
    assert job.dag.env.checkpoint_interval == 1000
