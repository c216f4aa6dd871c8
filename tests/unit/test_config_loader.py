"""Reading SeaTunnel job files the way SeaTunnel does."""

import json

import pytest
import yaml

from streaming_engine.config.loader import load_text, parse_variables
from streaming_engine.errors import ConfigError
from tests.unit.helpers import compile_ok

BASIC = """
env { job.mode = "BATCH" }
source {
  TestSource { result_table_name = "fake", row.num = 100 }
}
transform {
  TestMap { source_table_name = "fake", result_table_name = "fake1" }
}
sink {
  TestSink { source_table_name = "fake1" }
}
"""


def test_two_blocks_of_the_same_plugin_stay_two_ordered_blocks():
    raw = load_text(
        """
        transform {
          Copy { src_field = a, dest_field = b }
          Copy { src_field = c, dest_field = d }
          Copy = { src_field = e, dest_field = f }
        }
        """
    )
    blocks = raw.section("transform")
    assert [b.plugin for b in blocks] == ["Copy", "Copy", "Copy"]
    assert [b.options["src_field"] for b in blocks] == ["a", "c", "e"]
    assert [b.index for b in blocks] == [1, 2, 3]
    assert [b.line for b in blocks] == [3, 4, 5]


def test_dotted_keys_are_plain_option_keys():
    job = compile_ok(BASIC)
    src = job.dag.vertex("TestSource#1")
    assert src.plugin.options.row_num == 100


def test_legacy_and_new_wiring_names_build_the_same_dag():
    new = BASIC.replace("result_table_name", "plugin_output").replace("source_table_name", "plugin_input")
    a, b = compile_ok(BASIC), compile_ok(new)
    assert a.dag.to_dict()["edges"] == b.dag.to_dict()["edges"]
    assert [e.dataset for e in a.dag.edges] == ["fake", "fake1"]


def test_plugin_names_match_case_insensitively():
    job = compile_ok(BASIC.replace("TestMap", "testmap").replace("TestSink", "TESTSINK"))
    assert [v.plugin_name for v in job.dag.vertices] == ["TestSource", "TestMap", "TestSink"]
    assert job.dag.vertices[1].id == "TestMap#2"


def test_unnamed_blocks_read_the_single_upstream_dataset():
    job = compile_ok(
        """
        source { TestSource { } }
        transform { TestMap { } TestPy { } }
        sink { TestSink { } }
        """
    )
    assert [(e.src, e.dst) for e in job.dag.edges] == [
        ("TestSource#1", "TestMap#2"),
        ("TestMap#2", "TestPy#3"),
        ("TestPy#3", "TestSink#4"),
    ]


def test_variables_from_flags_environment_and_defaults():
    text = """
    env { job.name = ${jobName} }
    source {
      TestSource {
        plugin_output = "${resName:fake_test}_table"
        row.num = ${rowNum:50}
        tables = ${tables}
      }
    }
    sink { TestSink { plugin_input = "${resName:fake_test}_table", require = "${col}" } }
    """
    raw = load_text(
        text,
        variables={"jobName": "this_is_a_job_name", "tables": "[a.x, a.y]"},
        environ={"col": "name", "rowNum": "7"},
    )
    assert raw.env["job.name"] == "this_is_a_job_name"
    src = raw.section("source")[0].options
    assert src["plugin_output"] == "fake_test_table"
    assert src["row.num"] == 7
    assert src["tables"] == ["a.x", "a.y"]
    assert raw.section("sink")[0].options["require"] == "name"


def test_variable_values_with_special_characters_are_quoted():
    raw = load_text('sink { X { password = ${pw} } }', variables={"pw": "$a^b%c.d~e0*9("})
    assert raw.section("sink")[0].options["password"] == "$a^b%c.d~e0*9("


def test_reserved_sink_placeholders_are_left_alone():
    raw = load_text('sink { X { path = "/wh/${database_name}/${table_name}" } }', environ={"table_name": "nope"})
    assert raw.section("sink")[0].options["path"] == "/wh/${database_name}/${table_name}"


def test_unset_variables_are_errors_naming_each_variable():
    with pytest.raises(ConfigError) as exc:
        load_text('env { job.name = "${a}" }\nsink { X { p = "${b}" } }', environ={}, file="j.conf")
    assert [(p.condition, p.params["name"], p.location.line) for p in exc.value.problems] == [
        ("CONFIG.UNSET_VARIABLE", "a", 1),
        ("CONFIG.UNSET_VARIABLE", "b", 2),
    ]


def test_unquoted_unset_variable_is_reported_not_a_traceback():
    with pytest.raises(ConfigError) as exc:
        load_text("env { job.name = ${nothing_here} }", environ={})
    assert exc.value.problems[0].condition == "CONFIG.UNSET_VARIABLE"
    assert exc.value.problems[0].params["name"] == "nothing_here"


def test_variable_arguments_must_be_key_value():
    assert parse_variables(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError) as exc:
        parse_variables(["novalue"])
    assert exc.value.problems[0].condition == "CONFIG.BAD_VARIABLE"


def _as_structured(fmt):
    doc = {
        "env": {"job.mode": "BATCH"},
        "source": [{"plugin_name": "TestSource", "plugin_output": "fake", "row.num": 100}],
        "transform": [{"plugin_name": "TestMap", "plugin_input": "fake", "plugin_output": "fake1"}],
        "sink": [{"plugin_name": "TestSink", "plugin_input": "fake1"}],
    }
    return json.dumps(doc, indent=2) if fmt == "json" else yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_yaml_and_json_load_into_the_same_model(fmt):
    hocon = compile_ok(BASIC).dag.to_dict()
    other = compile_ok(_as_structured(fmt), fmt=fmt).dag.to_dict()
    for d in (hocon, other):
        for v in d["vertices"]:
            v.pop("location")
    assert other == hocon


def test_yaml_blocks_have_line_numbers():
    raw = load_text(_as_structured("yaml"), fmt="yaml", file="j.yaml")
    assert all(b.line for b in raw.blocks)
    assert raw.section("sink")[0].line > raw.section("source")[0].line


def test_syntax_errors_name_the_line():
    with pytest.raises(ConfigError) as exc:
        load_text("env {\n  job.mode = BATCH\n}\nsource {\n  X { a = [1, 2 }\n}\n", file="bad.conf")
    p = exc.value.problems[0]
    assert p.condition == "CONFIG.SYNTAX"
    assert p.location.file == "bad.conf"
    assert p.location.line is not None


def test_comments_and_strings_do_not_confuse_block_detection():
    raw = load_text(
        """
        # source { Fake { } }
        source {
          // a comment with { braces
          A { s = "B { not a block }", t = \"\"\"multi
          line { \"\"\" }
          B { }
        }
        """
    )
    assert [b.plugin for b in raw.blocks] == ["A", "B"]
    assert raw.blocks[0].options["s"] == "B { not a block }"
    assert raw.blocks[1].line == 7


def test_a_key_and_its_dotted_extension_are_two_options():
    # SeaTunnel's DataValidator: row_error_handle_way and row_error_handle_way.error_table
    raw = load_text(
        """
        transform {
          DataValidator {
            row_error_handle_way = ROUTE_TO_TABLE
            row_error_handle_way.error_table = "errors"
            "quoted.key" = 1, path = /tmp/a.b
          }
        }
        """
    )
    opts = raw.section("transform")[0].options
    assert opts["row_error_handle_way"] == "ROUTE_TO_TABLE"
    assert opts["row_error_handle_way.error_table"] == "errors"
    assert opts["quoted.key"] == 1
    assert opts["path"] == "/tmp/a.b"


def test_dotted_keys_of_an_option_block_in_a_list_are_plain_keys_too():
    # a tables_configs item is a full FakeSource config: its rows.per.batch must not
    # become a path through its rows (HOCON would let the later key replace the earlier)
    raw = load_text(
        """
        source {
          FakeSource {
            tables_configs = [
              { rows.per.batch = 2, rows = [ { kind = INSERT, fields = [1] } ], schema { fields { id = bigint } } },
              { rows = [ { kind = INSERT, fields = [2] } ]
                rows.per.batch = 3
                schema.fields.id = bigint }
            ]
            nested { a.b = 1 }
          }
        }
        """
    )
    opts = raw.section("source")[0].options
    first, second = opts["tables_configs"]
    assert first["rows.per.batch"] == 2 and first["rows"][0]["fields"] == [1]
    assert second["rows.per.batch"] == 3 and second["rows"][0]["fields"] == [2]
    assert second["schema.fields.id"] == "bigint"  # one key at this level, as SeaTunnel reads it
    assert first["schema"]["fields"]["id"] == "bigint"  # deeper objects are HOCON as before
    assert opts["nested"] == {"a": {"b": 1}}


# --------------------------------------------------------------------------
# variable values are data, never syntax

INJECT = "[a] } Console { x = [b]"  # would close the block and open a new one if spliced as text
HOCON_JOB = "source { TestSource { plugin_output = ${IN} } }\nsink { TestSink { plugin_input = src } }\n"


@pytest.mark.parametrize("value", [INJECT, "x } Console { y = 1", 'x" } Console { y = "1', "a\n}\nConsole {\n"])
def test_a_hocon_variable_value_cannot_add_blocks(value):
    try:
        raw = load_text(HOCON_JOB, variables={"IN": value}, file="j.conf")
    except ConfigError as e:  # refused as a value: fine, as long as it names the variable
        assert e.problems[0].condition == "CONFIG.BAD_VARIABLE_VALUE"
        assert e.problems[0].params["name"] == "IN"
        return
    assert [(b.section, b.plugin) for b in raw.blocks] == [("source", "TestSource"), ("sink", "TestSink")]
    assert raw.section("source")[0].options == {"plugin_output": value}


def test_the_list_injection_is_refused_naming_the_variable_and_line():
    with pytest.raises(ConfigError) as exc:
        load_text("\n" + HOCON_JOB, variables={"IN": INJECT}, file="j.conf")
    p = exc.value.problems[0]
    assert (p.condition, p.params["name"], p.location.file, p.location.line) == ("CONFIG.BAD_VARIABLE_VALUE", "IN", "j.conf", 2)


@pytest.mark.parametrize("where", ["variables", "environ"])
def test_a_variable_inside_quotes_stays_one_string(where):
    value = 'a", b = "c\n} Console { '
    kw = {"variables": {"v": value}} if where == "variables" else {"environ": {"v": value}}
    raw = load_text('sink { X { p = "${v}", q = """${w:x}""" } }', **kw)
    assert [b.plugin for b in raw.blocks] == ["X"]
    assert raw.blocks[0].options == {"p": value, "q": "x"}


def test_a_quote_cannot_end_a_triple_quoted_string():
    with pytest.raises(ConfigError) as exc:
        load_text('sink { X { q = """${v}""" } }', variables={"v": 'a""" } Console { z = """b'})
    assert exc.value.problems[0].condition == "CONFIG.BAD_VARIABLE_VALUE"


@pytest.mark.parametrize(
    "value, expected",
    [("[a, b]", ["a", "b"]), ("[1, true, x.y]", [1, True, "x.y"]), ("[]", []), ("12", 12), ("-1.5", -1.5),
     ("false", False), ("plain text", "plain text"), ("1e999", "1e999"), ('{"a": 1}', '{"a": 1}')],
)
@pytest.mark.parametrize("fmt", ["hocon", "yaml", "json"])
def test_whole_values_are_typed_the_same_in_every_format(fmt, value, expected):
    text = {
        "hocon": "sink { X { v = ${v} } }",
        "yaml": "sink:\n  - plugin_name: X\n    v: ${v}\n",
        "json": '{"sink": [{"plugin_name": "X", "v": "${v}"}]}',
    }[fmt]
    raw = load_text(text, fmt=fmt, variables={"v": value})
    assert raw.blocks[0].options == {"v": expected}


@pytest.mark.parametrize("value", ["[a, [b]]", "[{a: 1}]", "[a: 1]", "[*x]", "[&x a]", "[!!binary aGk=]", INJECT])
@pytest.mark.parametrize("fmt", ["hocon", "yaml"])
def test_a_list_value_must_be_a_flat_list_of_scalars(fmt, value):
    text = "sink { X { v = ${v} } }" if fmt == "hocon" else "sink:\n  - plugin_name: X\n    v: ${v}\n"
    with pytest.raises(ConfigError) as exc:
        load_text(text, fmt=fmt, variables={"v": value})
    assert exc.value.problems[0].condition == "CONFIG.BAD_VARIABLE_VALUE"


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_structured_variable_values_cannot_add_keys(fmt):
    text = "sink:\n  - plugin_name: X\n    v: ${v}\n" if fmt == "yaml" else '{"sink": [{"plugin_name": "X", "v": "${v}"}]}'
    raw = load_text(text, fmt=fmt, variables={"v": '{"plugin_name": "Console", "w": 1}\nsink: []'})
    assert [b.plugin for b in raw.blocks] == ["X"]
    assert set(raw.blocks[0].options) == {"v"}
    assert isinstance(raw.blocks[0].options["v"], str)


def test_an_unset_variable_outside_quotes_is_not_looked_up_as_a_path():
    # pyhocon would resolve ${a} against the file itself; only -i, the environment and defaults count
    with pytest.raises(ConfigError) as exc:
        load_text("a = [1]\nsink { X { v = ${a} } }", environ={})
    assert exc.value.problems[0].condition == "CONFIG.UNSET_VARIABLE"


def test_hocon_keywords_are_lower_case_other_spellings_are_text():
    """HOCON (and SeaTunnel's Typesafe Config) know true/false/null only in
    lower case; Assert's ``rule_type = NULL`` is the text NULL, not null."""
    raw = load_text(
        "source { FakeSource { a = NULL, b = null, c = true, d = False, e = [Null, 1], f = nullable, g = x.NULL } }\n"
        "sink { Console {} }"
    )
    assert raw.blocks[0].options == {
        "a": "NULL", "b": None, "c": True, "d": "False", "e": ["Null", 1], "f": "nullable", "g": "x.NULL",
    }


def test_file_name_placeholders_are_not_job_variables():
    """SeaTunnel's file sinks render ${transactionId}, ${now}, ${uuid} and ${k0}/${v0}
    themselves: they are not -i variables (and not 'unset')."""
    raw = load_text(
        'source { FakeSource { } }\n'
        'sink { LocalFile { file_name_expression = "${transactionId}_${now}_${uuid}", '
        'partition_dir_expression = "${k0}=${v0}/${k1}" } }'
    )
    assert raw.blocks[1].options == {
        "file_name_expression": "${transactionId}_${now}_${uuid}", "partition_dir_expression": "${k0}=${v0}/${k1}",
    }


def test_values_inside_list_items_are_kept_as_written():
    """Items of a top-level list option (tables_configs) are options and have
    their dotted keys undone; what is inside an item (a FakeSource row's map
    values, whose keys may hold dots) is data and stays as written."""
    from streaming_engine.job import compile_text

    job = compile_text(
        """
        source { FakeSource {
          plugin_output = fake
          tables_configs = [{
            row.num = 1
            schema = { table = "t.m", fields { m = "map<string, map<string, int>>" } }
            rows = [
              { kind = INSERT, fields = [{ "a.b" = { c = 1 }, d = { "e.f" = 2 } }] }
              { kind = DELETE, fields = { m = { "x.y" = { z = 3 } } } }
            ]
          }]
        } }
        sink { Console { plugin_input = fake } }
        """
    )
    [source] = [v for v in job.dag.vertices if v.kind == "source"]
    [table] = source.plugin.options.tables_configs
    assert table["row.num"] == 1 if isinstance(table, dict) else table.row_num == 1
    rows = table["rows"] if isinstance(table, dict) else table.rows
    assert rows[0].fields == [{"a.b": {"c": 1}, "d": {"e.f": 2}}]
    assert rows[1].fields == {"m": {"x.y": {"z": 3}}}  # a row by column name: an object, as written


def test_hocon_strings_read_as_json_reads_them():
    """pyhocon alone drops "" from lists (positional FakeSource fields would
    shift) and leaves \\uXXXX, \\/ undecoded; variable values keep non-ASCII text."""
    raw = load_text(
        r'''source { FakeSource {
          plugin_output = ${N}, x = "a ${N}", y = "\u00e9\/\"\\u0041", emoji = "\ud83d\ude00", empty = ""
          z = ["", "b", """""", ${E}, "${E}"], w = ${L}
        } }''',
        variables={"N": "café", "E": "", "L": '[a, ""]'},
    )
    opts = raw.section("source")[0].options
    assert (opts["plugin_output"], opts["x"], opts["y"], opts["emoji"], opts["empty"]) == (
        "café", "a café", 'é/"\\u0041', "\U0001F600", "")
    assert opts["z"] == ["", "b", "", "", ""]
    assert opts["w"] == ["a", ""]


def test_an_env_setting_and_its_dotted_extension_are_two_settings():
    # S3A's endpoint and endpoint.region: HOCON would replace the endpoint string by an object
    job = compile_ok(
        """
        env {
          job.mode = BATCH
          spark.hadoop.fs.s3a.endpoint = "http://127.0.0.1:9000"
          spark.hadoop.fs.s3a.endpoint.region = us-east-1
        }
        source { TestSource { plugin_output = fake } }
        sink { TestSink { plugin_input = fake } }
        """
    )
    assert job.dag.env.spark["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert job.dag.env.spark["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert job.dag.env.job_mode == "BATCH"
