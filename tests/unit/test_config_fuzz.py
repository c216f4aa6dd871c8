"""Fuzzing the compile pipeline: any text either compiles or raises EngineError.

Hypothesis builds job files that look valid (the real plugin names, their own
option keys, wired datasets) in HOCON, YAML and JSON, then mutates them:
truncation, deleted or doubled brackets and quotes, random unicode, syntax
tokens (variables, anchors, aliases, tags, include), deep nesting, huge values,
whole hostile constructions (billion laughs in YAML aliases and in HOCON
self-references, nesting far past the limit, huge lists) and, for files, raw
bytes (invalid UTF-8). ``compile_text`` / ``compile_file``
must return a plan or raise the engine's own EngineError: no other exception,
and no example may take longer than :data:`BUDGET_S` (a SIGALRM timer fails it).

``STREAMING_ENGINE_FUZZ_EXAMPLES`` sets the examples per test and makes them
random (a soak); without it each test runs the same 150 derandomized examples
(the whole module in well under a minute). Nothing here starts Spark.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming_engine.config.loader import MAX_STRING_CHARS
from streaming_engine.errors import EngineError
from streaming_engine.job import compile_file, compile_text
from streaming_engine.plugins.registry import REGISTRIES

SOAK = os.environ.get("STREAMING_ENGINE_FUZZ_EXAMPLES")
EXAMPLES = int(SOAK or 150)
BUDGET_S = 10  # per example; a hang guard, far above the ~10-50 ms an example takes

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the SIGALRM budget below is the time limit
    derandomize=not SOAK,  # CI runs the same examples every time; a soak explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


class Hang(Exception):
    """Not an EngineError: an example over the budget fails the test."""


@contextmanager
def budget(seconds: float = BUDGET_S):
    def alarm(signum, frame):
        raise Hang(f"compiling took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def compiles_or_engine_error(fn, *args, **kwargs) -> None:
    with budget():
        try:
            fn(*args, **kwargs)
        except EngineError as e:
            str(e)  # the message renders too


# --------------------------------------------------------------------------
# valid-looking jobs from the real plugins

DATASETS = ["src", "a", "b", "c", "out"]
WORDS = ["id", "name", "a", "b", "x.y", "", "${v}", "${table_name}", "${v:dflt}", "BATCH", "STREAMING",
         "select * from src", "^a.*$", "(a+)+", "é∂漢😀", "\\", '"', "'", "true", "12", "[a, b]"]
scalars = st.one_of(
    st.sampled_from(WORDS),
    st.integers(-(2**40), 2**40),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.none(),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(WORDS[:5] + ["fields", "schema", "table", "type"]), inner, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def plugin_block(draw, section: str) -> dict:
    registry = REGISTRIES[section]
    name = draw(st.sampled_from(registry.names()))
    keys = sorted(registry.find(name).Options.known_keys())
    options = draw(st.dictionaries(st.sampled_from(keys), values, max_size=5))
    if section != "source" and draw(st.booleans()):
        options["plugin_input"] = draw(st.sampled_from(DATASETS))
    if section != "sink" and draw(st.booleans()):
        options["plugin_output"] = draw(st.sampled_from(DATASETS))
    return {"plugin_name": name, **options}


BASE = {  # a job that compiles: every mutation starts near a valid file
    "env": {"job.mode": "BATCH", "parallelism": 1},
    "source": [{"plugin_name": "FakeSource", "plugin_output": "src", "schema": {"fields": {"id": "bigint", "name": "string"}}}],
    "transform": [{"plugin_name": "Copy", "plugin_input": "src", "plugin_output": "out", "src_field": "name", "dest_field": "n2"}],
    "sink": [{"plugin_name": "Console", "plugin_input": "out"}],
}


@st.composite
def jobs(draw) -> dict:
    job = json.loads(json.dumps(BASE))
    if draw(st.booleans()):
        job["env"].update(draw(st.dictionaries(st.sampled_from(["job.mode", "parallelism", "checkpoint.interval", "spark.x", "job.name"]), values, max_size=3)))
    for section in ("source", "transform", "sink"):
        job[section] += draw(st.lists(plugin_block(section), max_size=3))
    return job


def _hocon_key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_." for c in k) else json.dumps(k)


def to_hocon(v, top: bool = False) -> str:
    if isinstance(v, dict):
        body = "\n".join(f"{_hocon_key(str(k))} = {to_hocon(x)}" for k, x in v.items())
        return body if top else "{\n" + body + "\n}"
    if isinstance(v, list):
        return "[" + ", ".join(to_hocon(x) for x in v) + "]"
    return json.dumps(v)


def render(job: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(job, indent=1)
    if fmt == "yaml":
        return yaml.safe_dump(job, sort_keys=False, allow_unicode=True)
    parts = [f"env {to_hocon(job['env'])}"]
    for section in ("source", "transform", "sink"):
        blocks = [f"  {b['plugin_name']} {to_hocon({k: v for k, v in b.items() if k != 'plugin_name'})}" for b in job[section]]
        parts.append(section + " {\n" + "\n".join(blocks) + "\n}")
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------
# mutations

TOKENS = ["{", "}", "[", "]", '"', '"""', ",", "=", ":", "\n", "#", "//", "\\", "${v}", "${?v}", "${nope}",
          "${table_name}", "&a ", "*a", "<<: *a\n", "!!binary ", "!!python/object:os.system ", "! ", "include \"x.conf\"\n",
          "a.b.c.d.e = 1\n", "- ", "? ", "---\n", "...\n", "\t", "\x00", "\ufeff", "\u2028", "nan", "1e999", "9" * 5000]


def _laughs(fmt: str, levels: int = 9) -> str:
    names = "abcdefghij"[: levels + 1]
    if fmt == "yaml":
        lines = ["l0: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        lines += [f"l{i + 1}: &{b} [{', '.join(['*' + a] * 9)}]" for i, (a, b) in enumerate(zip(names, names[1:]))]
    else:
        lines = ["a = [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
        lines += [f"{b} = [{', '.join(['${?' + a + '}'] * 9)}]" for a, b in zip(names, names[1:])]
    return "\n".join(lines) + "\n"


# whole constructions no byte-level mutation would stumble on: exponential
# aliases and self-references, nesting beyond the limit, huge lists
PRELUDES = {
    "laughs-yaml": _laughs("yaml"),
    "laughs-hocon": _laughs("hocon"),
    "deep-list": "deep = " + "[" * 5000 + "]" * 5000 + "\n",
    "deep-json": '{"deep": ' + "[" * 5000 + "]" * 5000 + "}\n",
    "deep-object": "deep = " + "{a = " * 300 + "1" + "}" * 300 + "\n",
    "dotted": "a" + ".a" * 5000 + " = 1\n",
    "long-list": "long = [" + ", ".join(["1"] * 150_000) + "]\n",
}


@st.composite
def mutation(draw):
    kind = draw(st.sampled_from(["truncate", "delete", "double", "token", "text", "nest", "huge", "repeat", "prelude"]))
    at = draw(st.floats(0, 1))
    if kind == "prelude":
        return kind, at, draw(st.sampled_from(sorted(PRELUDES)))
    if kind == "token":
        return kind, at, draw(st.sampled_from(TOKENS))
    if kind == "text":
        return kind, at, draw(st.text(max_size=20))
    if kind == "nest":
        return kind, at, draw(st.sampled_from([10, 63, 70, 500, 5000]))
    if kind == "huge":
        return kind, at, draw(st.sampled_from([1000, 70_000, MAX_STRING_CHARS + 1]))
    if kind == "repeat":
        return kind, at, draw(st.integers(2, 50))
    return kind, at, None


def mutate(text: str, kind: str, at: float, arg) -> str:
    i = int(at * len(text))
    if kind == "truncate":
        return text[:i]
    if kind in ("delete", "double"):  # aimed at structure: brackets, quotes and separators
        marks = [j for j, c in enumerate(text) if c in '{}[]":,=\n-']
        if not marks:
            return text
        j = marks[int(at * (len(marks) - 1))]
        return text[:j] + text[j + 1 :] if kind == "delete" else text[:j] + text[j] + text[j:]
    if kind in ("token", "text"):
        return text[:i] + arg + text[i:]
    if kind == "nest":
        return text[:i] + "[" * arg + "1" + "]" * arg + text[i:]
    if kind == "huge":
        return text[:i] + "x" * arg + text[i:]
    if kind == "prelude":  # at the start of a line, so it parses as written
        start = text.rfind("\n", 0, i) + 1
        return text[:start] + PRELUDES[arg] + text[start:]
    if kind == "repeat":  # a line many times: duplicate keys, blocks, anchors
        start = text.rfind("\n", 0, i) + 1
        end = text.find("\n", i)
        line = text[start : end if end != -1 else len(text)]
        return text[:start] + (line + "\n") * arg + text[start:]
    raise AssertionError(kind)


VARIABLES = st.dictionaries(
    st.sampled_from(["v", "w", "table_name"]),
    st.one_of(st.sampled_from(["[a] } Console { x = [b]", "[a, b]", "1", "true", '"', '"""', "${v}", "a\n}\n", "[[1]]", "*a", "&a"]),
              st.text(max_size=10)),
    max_size=2,
)


# --------------------------------------------------------------------------
# the properties


@pytest.mark.parametrize("fmt", ["hocon", "yaml", "json"])
def test_base_job_compiles_in_every_format(fmt):
    job = compile_text(render(BASE, fmt), fmt=fmt)
    assert [v.plugin_name for v in job.dag.vertices] == ["FakeSource", "Copy", "Console"]


@pytest.mark.parametrize("fmt", ["hocon", "yaml", "json"])
@FUZZ
@given(job=jobs(), mutations=st.lists(mutation(), max_size=3), variables=VARIABLES)
def test_mutated_jobs_compile_or_raise_engine_errors(fmt, job, mutations, variables):
    text = render(job, fmt)
    for m in mutations:
        text = mutate(text, *m)
    compiles_or_engine_error(compile_text, text, fmt=fmt, variables=variables)


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config")


@FUZZ
@given(
    fmt=st.sampled_from(["conf", "yaml", "json"]),
    job=jobs(),
    at=st.floats(0, 1),
    junk=st.binary(min_size=1, max_size=8),
)
def test_files_with_raw_bytes_compile_or_raise_engine_errors(fuzz_dir, fmt, job, at, junk):
    data = render(job, "hocon" if fmt == "conf" else fmt).encode("utf-8")
    i = int(at * len(data))
    path = fuzz_dir / f"job.{fmt}"
    path.write_bytes(data[:i] + junk + data[i:])
    compiles_or_engine_error(compile_file, path)


@pytest.fixture(scope="module", autouse=True)
def no_spark_session():
    """Compiling a job never starts Spark: while this module runs, getting a
    SparkSession raises (the guard works whether or not an earlier test of the
    suite already started one)."""
    from pyspark.sql.session import SparkSession

    original = SparkSession.Builder.getOrCreate

    def refuse(self):  # noqa: ANN001
        raise AssertionError("compiling a fuzzed job asked for a SparkSession")

    SparkSession.Builder.getOrCreate = refuse
    try:
        yield
    finally:
        SparkSession.Builder.getOrCreate = original


def test_the_spark_guard_is_active():
    from pyspark.sql import SparkSession

    with pytest.raises(AssertionError, match="asked for a SparkSession"):
        SparkSession.builder.getOrCreate()
