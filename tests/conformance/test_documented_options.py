"""Every option SeaTunnel's pages document for a plugin we ship is supported,
or refused at plan time with a reason (never accepted and ignored); the
compatibility page is generated from the same data and is current."""

from __future__ import annotations

import pytest

from streaming_engine import compat
from tests.components.fixtures import postgres_db_module  # noqa: F401
from tests.unit.helpers import compile_ok, problems_of

PLUGINS = [c for kind in ("source", "transform", "sink") for c in compat.shipped(kind) if c.seatunnel_page]

# a minimal valid block per plugin with refused options, to set each refused option in
BASE = {
    ("source", "FakeSource"): 'FakeSource { plugin_output = src, row.num = 1, schema { fields { id = int } }\n%s }',
    ("source", "Kafka"): 'Kafka { plugin_output = src, topic = t, bootstrap.servers = "127.0.0.1:9", '
                         'schema { fields { id = int } }\n%s }',
    ("source", "LocalFile"): 'LocalFile { plugin_output = src, path = "/tmp/in", file_format_type = json, '
                             'schema { fields { id = int } }\n%s }',
    ("sink", "Kafka"): 'Kafka { plugin_input = src, topic = t, bootstrap.servers = "127.0.0.1:9"\n%s }',
    ("sink", "LocalFile"): 'LocalFile { plugin_input = src, path = "/tmp/out", file_format_type = json\n%s }',
    # plans read the database's catalog: {pg} is a real server's address (started only for these cases)
    ("source", "Postgres-CDC"): 'Postgres-CDC { plugin_output = src, base-url = "jdbc:postgresql://{pg}/postgres", '
                                'username = postgres, table-names = ["postgres.public.refused_t"], startup.mode = latest\n%s }',
}
SOURCE = 'FakeSource { plugin_output = src, row.num = 1, schema { fields { id = int } } }'
SINK = "Console { plugin_input = src }"


def _job(kind: str, block: str) -> str:
    source = block if kind == "source" else SOURCE
    sink = block if kind == "sink" else SINK
    transform = f"transform {{ {block} }}\n" if kind == "transform" else ""
    return f"env {{ job.mode = BATCH }}\nsource {{ {source} }}\n{transform}sink {{ {sink} }}\n"


def test_the_pages_list_options_at_all():
    """The page reader finds the option tables (a reader finding nothing would pass everything)."""
    assert {"row.num", "string.fake.mode", "rows", "split.read-interval"} <= set(
        compat.documented_options("connector-v2/source/FakeSource.md"))
    assert "rules.field_rules.field_value.rule_type" in compat.documented_options("connector-v2/sink/Assert.md")
    assert len(PLUGINS) >= 20


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda c: f"{c.kind}-{c.name}")
def test_every_documented_option_is_supported_or_refused_with_a_reason(plugin):
    rows = compat.status_of(plugin)
    assert rows, f"no options read from {plugin.seatunnel_page}"
    missing = [f"{r.name} ({r.page})" for r in rows if r.status == "missing"]
    assert not missing, f"{plugin.kind} {plugin.name}: documented options neither supported nor refused: {missing}"
    assert all(r.reason for r in rows if r.status in ("refused", "erratum"))


REFUSED = [(c, r) for c in PLUGINS for r in compat.status_of(c) if r.status == "refused"]


@pytest.mark.parametrize("plugin,row", REFUSED, ids=lambda x: getattr(x, "name", None))
def test_a_refused_option_is_a_plan_time_error_naming_it_and_why(plugin, row, request):
    base = BASE.get((plugin.kind, plugin.name))
    assert base, f"add a minimal {plugin.kind} {plugin.name} block to BASE"
    if "{pg}" in base:
        pg = request.getfixturevalue("postgres_db_module")
        pg.execute("CREATE TABLE IF NOT EXISTS public.refused_t (id int PRIMARY KEY); "
                   "ALTER TABLE public.refused_t REPLICA IDENTITY FULL")
        base = base.replace("{pg}", f"{pg.host}:{pg.port}")
    compile_ok(_job(plugin.kind, base % ""))  # the base itself is valid
    problems = problems_of(_job(plugin.kind, base % f'{row.name} = "something else"'))
    [p] = [p for p in problems if p.condition == "CONFIG.INVALID_OPTION"]
    assert p.location.key == row.name and p.location.plugin == plugin.name
    assert row.reason[:40] in str(p)


def test_a_refused_option_set_to_what_the_engine_does_anyway_is_accepted():
    job = compile_ok(_job("source", BASE[("source", "Kafka")] % "is_native = false"))
    assert not [w for w in job.dag.warnings if "is_native" in str(w)]


def test_an_erratum_of_the_page_is_an_unknown_option_with_the_right_name():
    job = compile_ok(_job("source", BASE[("source", "FakeSource")] % "int.fake.template = range"))
    [w] = [w for w in job.dag.warnings if w.condition == "CONFIG.UNKNOWN_OPTION"]
    assert w.params["key"] == "int.fake.template" and w.severity == "warning"
    assert "int.fake.mode" in compat.PAGE.read_text(encoding="utf-8")  # the erratum says what to write


def test_older_option_names_of_the_pages_still_work():
    text = BASE[("source", "Kafka")].replace("schema { fields { id = int } }", "") % (
        'table_list = [ { topic = t, schema { table = "db.t", fields { id = int } } } ]')
    job = compile_ok(_job("source", text))
    [src] = [v for v in job.dag.vertices if v.plugin.name == "Kafka"]
    assert [t.table_id for t in src.schema.tables] == ["db.t"]


def test_the_compatibility_page_is_generated_and_current():
    assert compat.main(["--check"]) == 0, "run: .venv/bin/python -m streaming_engine.compat"
    text = compat.PAGE.read_text(encoding="utf-8")
    for plugin, row in REFUSED:
        assert f"`{row.name}`" in text and row.reason in text
    from transforms._sql_functions import FUNCTIONS

    assert len(FUNCTIONS) >= 90 and all(f"| `{name}` |" in text for name in FUNCTIONS)


def test_the_defaults_reader_reads_the_pages_default_columns():
    """The page reader finds the Default cells (escaped pipes inside a cell
    included), so the comparison below compares something."""
    kafka = compat.documented_defaults("connector-v2/source/Kafka.md")
    assert kafka["format_error_handle_way"] == "fail" and kafka["consumer.group"] == "SeaTunnel-Consumer-Group"
    assert compat.documented_defaults("connector-v2/sink/Assert.md")["rules.field_rules.field_name"] == "-"
    assert compat.page_default('"\\n"') == "\n" and compat.page_default("'\\001'") == "\x01"
    assert compat.page_default("0x7fffffff") == 2**31 - 1 and compat.page_default("-") is None
    compared = [r for c in PLUGINS for r in compat.status_of(c) if r.status == "supported"
                and compat.page_default(compat.documented_defaults(r.page).get(r.name, "-")) is not None]
    assert len(compared) >= 60, len(compared)


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda c: f"{c.kind}-{c.name}")
def test_every_documented_default_is_seatunnels(plugin):
    """An option the page gives a default for has that default here; the few
    whose page writes it as prose (or per format) say so in seatunnel_defaults."""
    mismatches = compat.default_mismatches(plugin)
    undeclared = [m for m in mismatches if m[0] not in plugin.seatunnel_defaults]
    assert not undeclared, f"{plugin.kind} {plugin.name}: (option, page default, ours): {undeclared}"
    stale = set(plugin.seatunnel_defaults) - {m[0] for m in mismatches}
    assert not stale, f"{plugin.kind} {plugin.name}: seatunnel_defaults names options whose default matches: {stale}"
