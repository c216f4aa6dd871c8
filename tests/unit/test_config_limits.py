"""Hostile or accidental input: every limit is a ConfigError naming the file,
the line where it is known and what to change, raised before the parser can
spend minutes, gigabytes or the stack on it."""

import json

import pytest

from streaming_engine.config import loader
from streaming_engine.config.loader import MAX_DEPTH, MAX_FILE_BYTES, MAX_PLUGINS, MAX_STRING_CHARS, load_file, load_text
from streaming_engine.errors import ConfigError

pytestmark = pytest.mark.timeout(60)  # a hang guard only: each case takes well under a second


def problem(text, fmt="hocon", file=None, **kw):
    file = file or f"job.{'conf' if fmt == 'hocon' else fmt}"
    with pytest.raises(ConfigError) as exc:
        load_text(text, fmt=fmt, file=file, **kw)
    p = exc.value.problems[0]
    assert p.location.file == file
    assert str(p)  # renders without a KeyError: every condition has its template
    return p


# --- size and encoding ------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_without_reading_it_all(tmp_path):
    f = tmp_path / "big.conf"
    f.write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ConfigError) as exc:
        load_file(f)
    p = exc.value.problems[0]
    assert (p.condition, p.params["limit"], p.location.file) == ("CONFIG.TOO_LARGE", MAX_FILE_BYTES, str(f))


def test_text_over_the_size_limit_is_refused():
    assert problem("é" * (MAX_FILE_BYTES // 2 + 1)).condition == "CONFIG.TOO_LARGE"  # 2 bytes per character


def test_non_utf8_bytes_name_the_file_offset_and_line(tmp_path):
    f = tmp_path / "latin1.conf"
    f.write_bytes(b'env {\n  job.name = "caf\xe9"\n}\n')
    with pytest.raises(ConfigError) as exc:
        load_file(f)
    p = exc.value.problems[0]
    assert p.condition == "CONFIG.NOT_UTF8"
    assert (p.params["offset"], p.params["line"], p.location.line) == (23, 2, 2)  # the byte after "caf
    assert str(f) in str(p)


def test_a_utf8_bom_is_accepted(tmp_path):
    f = tmp_path / "bom.conf"
    f.write_bytes(b"\xef\xbb\xbfenv { job.name = x }\n")
    assert load_file(f).env == {"job.name": "x"}  # an env key is one key, dotted or not


# --- nesting ----------------------------------------------------------------

DEEP = 100_000


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("hocon", "a = " + "{b = " * DEEP + "1" + "}" * DEEP),
        ("hocon", "a = " + "[" * DEEP + "]" * DEEP),
        ("hocon", "a" + ".a" * DEEP + " = 1"),  # a dotted path nests like braces
        ("json", "[" * DEEP + "]" * DEEP),
        ("json", '{"a":' * DEEP + "1" + "}" * DEEP),
        ("yaml", "[" * DEEP + "]" * DEEP),
        ("yaml", "".join("  " * i + "a:\n" for i in range(MAX_DEPTH + 5))),
    ],
)
def test_deep_nesting_is_refused_before_the_parser_recurses(fmt, text):
    p = problem(text, fmt)
    assert (p.condition, p.params["limit"]) == ("CONFIG.TOO_DEEP", MAX_DEPTH)
    assert p.location.line is not None


@pytest.mark.parametrize("fmt", ["hocon", "json", "yaml"])
def test_nesting_up_to_the_limit_loads(fmt):
    depth = MAX_DEPTH - 2  # the env block and the root object count too
    value = "[" * depth + "1" + "]" * depth
    text = {"hocon": f"env {{ v = {value} }}", "json": f'{{"env": {{"v": {value}}}}}', "yaml": f"env:\n  v: {value}\n"}[fmt]
    v = load_text(text, fmt=fmt).env["v"]
    for _ in range(depth - 1):
        v = v[0]
    assert v == [1]


# --- YAML -----------------------------------------------------------------

LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
)


def test_a_billion_laughs_yaml_is_refused_at_the_first_anchor():
    assert len(LAUGHS) < 700
    p = problem(LAUGHS, "yaml")
    assert (p.condition, p.location.line) == ("CONFIG.YAML_ALIAS", 1)


@pytest.mark.parametrize("text", ["a: *x\n", "base: &b {x: 1}\nsink:\n  - <<: *b\n    plugin_name: X\n"])
def test_aliases_and_merge_keys_are_refused(text):
    assert problem(text, "yaml").condition in ("CONFIG.YAML_ALIAS", "CONFIG.SYNTAX")


@pytest.mark.parametrize("tag", ["!!binary aGk=", "!!python/object:os.system x", "!!set {a}", "!custom x", "!!timestamp 2020-01-01"])
def test_yaml_tags_beyond_the_basic_ones_are_refused(tag):
    p = problem(f"env:\n  v: {tag}\n", "yaml")
    assert (p.condition, p.location.line) == ("CONFIG.YAML_TAG", 2)


def test_basic_yaml_tags_and_non_string_keys_load():
    raw = load_text("env:\n  v: !!str 12\n  2: two\n  true: x\n  2024-01-02: d\n", fmt="yaml")
    assert raw.env == {"v": "12", "2": "two", "true": "x", "2024-01-02": "d"}


# --- sizes of values ----------------------------------------------------------

BIG = "x" * (MAX_STRING_CHARS + 1)


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("hocon", f'env {{ v = "{BIG}" }}'),
        ("hocon", f"env {{ v = {BIG} }}"),
        ("hocon", f'env {{ v = """{BIG}""" }}'),
        ("json", f'{{"env": {{"v": "{BIG}"}}}}'),
        ("yaml", f"env:\n  v: {BIG}\n"),
        ("yaml", f"env:\n  {BIG}: 1\n"),
    ],
)
def test_huge_strings_and_keys_are_refused(fmt, text):
    p = problem(text, fmt)
    assert (p.condition, p.params["limit"]) == ("CONFIG.STRING_TOO_LONG", MAX_STRING_CHARS)


def test_a_huge_variable_value_is_refused_naming_the_variable():
    p = problem('env { v = "${v}" }', variables={"v": BIG})
    assert (p.condition, p.params["name"]) == ("CONFIG.BAD_VARIABLE_VALUE", "v")


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("hocon", "env { v = [" + ",".join(["1"] * 200_000) + "] }"),
        ("hocon", "env { v = [\n" + "\n".join(["1"] * 200_000) + "\n] }"),
        ("json", '{"env": {"v": [' + ",".join(["1"] * 200_000) + "]}}"),
        ("yaml", "env:\n  v: [" + ",".join(["1"] * 200_000) + "]\n"),
    ],
)
def test_huge_lists_are_refused(fmt, text):
    assert problem(text, fmt).condition == "CONFIG.TOO_MANY_ITEMS"


@pytest.mark.parametrize("fmt", ["hocon", "json"])
def test_too_many_plugin_blocks_are_refused(fmt):
    n = MAX_PLUGINS + 1
    if fmt == "hocon":
        text = "transform {\n" + "Copy { }\n" * n + "}"
    else:
        text = json.dumps({"transform": [{"plugin_name": "Copy"}] * n})
    p = problem(text, fmt)
    assert (p.condition, p.params["limit"]) == ("CONFIG.TOO_MANY_PLUGINS", MAX_PLUGINS)


# --- HOCON features that reach outside the file or multiply it -----------------


@pytest.mark.parametrize("text", ['include "/etc/passwd"', 'env { include url("http://169.254.169.254/") }',
                                  "include required(file(\"x.conf\"))"])
def test_hocon_include_is_refused(text):
    p = problem(text)
    assert (p.condition, p.location.line) == ("CONFIG.INCLUDE", 1)


def test_hocon_self_references_cannot_multiply_the_tree():
    text = "a = [1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{b} = [{', '.join(['${?' + a + '}'] * 8)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
    )
    p = problem(text)
    assert (p.condition, p.params["limit"]) == ("CONFIG.TOO_MANY_REFERENCES", loader.MAX_PATH_REFERENCES)


def test_a_few_optional_references_still_resolve():
    raw = load_text("base = 7\nenv { v = ${?base}, w = ${?nothing} }", environ={})
    assert raw.env == {"v": 7}


def test_syntax_errors_are_short_and_name_the_line():
    p = problem("env {\n  a = 1\n  b = = 2\n}\n")
    assert p.condition == "CONFIG.SYNTAX"
    assert p.location.line == 3
    assert len(p.params["detail"]) < 120  # not pyparsing's whole grammar


def test_long_names_from_the_file_are_shortened_in_messages():
    from tests.unit.helpers import problems_of

    long = "x" * 100_000
    problems = problems_of(f'source {{ TestSource {{ plugin_output = src, {long}password = 1 }} }}\n'
                           f'sink {{ TestSink {{ plugin_input = "{long}" }} }}\n')
    assert {"CONFIG.UNKNOWN_OPTION", "CONFIG.DANGLING_INPUT"} <= {p.condition for p in problems}
    for p in problems:
        assert len(str(p)) < 1000
    long_ones = [p for p in problems if p.condition in ("CONFIG.UNKNOWN_OPTION", "CONFIG.DANGLING_INPUT")]
    assert all("characters)" in str(p) for p in long_ones)
