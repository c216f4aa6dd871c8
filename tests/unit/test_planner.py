"""The execution-plan rules on hand-built DAGs (SeaTunnel's generator, Flink's chaining)."""

import json

import pytest

from streaming_engine.errors import PlanError
from streaming_engine.plan.execution import ExecutionPlan, ExecutionVertex, Pipeline, check_names
from tests.unit.helpers import compile_ok

MULTI = 'source { TestSource { plugin_output = src, tables = [db.a, db.b] } }\n'
SINGLE = 'source { TestSource { plugin_output = src } }\n'
TWO_SINKS = "sink { TestSink { plugin_input = %s } TestSink { plugin_input = %s } }\n"


def ids(job, pipeline=0):
    return [v.id for v in job.plan.pipelines[pipeline].vertices]


def edges(job, pipeline=0):
    return {(e.src, e.dst) for e in job.plan.pipelines[pipeline].edges}


# --- shuffle by table ---------------------------------------------------------

def test_multi_table_source_feeding_two_sinks_gets_a_shuffle():
    job = compile_ok(MULTI + TWO_SINKS % ("src", "src"))
    assert ids(job) == ["TestSource#1", "Shuffle [TestSource#1]", "TestSink#2", "TestSink#3"]
    assert edges(job) == {
        ("TestSource#1", "Shuffle [TestSource#1]"),
        ("Shuffle [TestSource#1]", "TestSink#2"),
        ("Shuffle [TestSource#1]", "TestSink#3"),
    }


def test_shuffle_goes_after_the_transform_chain_before_the_sinks():
    job = compile_ok(
        MULTI + "transform { TestMap { plugin_input = src, plugin_output = m } TestPy { plugin_output = p } }\n"
        + TWO_SINKS % ("p", "p")
    )
    chain = "TransformChain[TestMap#2->TestPy#3]"
    assert edges(job) == {
        ("TestSource#1", chain),
        (chain, "Shuffle [TestSource#1]"),
        ("Shuffle [TestSource#1]", "TestSink#4"),
        ("Shuffle [TestSource#1]", "TestSink#5"),
    }


@pytest.mark.parametrize(
    "text",
    [
        SINGLE + TWO_SINKS % ("src", "src"),  # one table
        MULTI + "sink { TestSink { plugin_input = src } }",  # one sink
        MULTI + "transform { TestMerge { plugin_input = src, plugin_output = m } }\n" + TWO_SINKS % ("m", "m"),
        # two sources in one pipeline
        MULTI + 'source { TestSource { plugin_output = s2, tables = [x, y] } }\n'
        + "transform { TestJoin { plugin_input = [src, s2], plugin_output = j } }\n" + TWO_SINKS % ("j", "j"),
    ],
    ids=["single-table", "single-sink", "merged-to-one-table", "two-sources"],
)
def test_no_shuffle_otherwise(text):
    job = compile_ok(text)
    assert not [v for p in job.plan.pipelines for v in p.vertices if v.kind == "shuffle"]


# --- chaining -------------------------------------------------------------------

def test_linear_transforms_become_one_chain():
    job = compile_ok(SINGLE + "transform { TestMap { } TestPy { } TestMap { } }\nsink { TestSink { } }")
    assert ids(job) == ["TestSource#1", "TransformChain[TestMap#2->TestPy#3->TestMap#4]", "TestSink#5"]


def test_a_transform_with_two_downstreams_ends_its_chain():
    job = compile_ok(
        SINGLE
        + "transform { TestMap { plugin_input = src, plugin_output = a }\n"
        + "  TestMap { plugin_input = a, plugin_output = b }\n"
        + "  TestMap { plugin_input = b, plugin_output = c }\n"
        + "  TestMap { plugin_input = b, plugin_output = d } }\n"
        + "sink { TestSink { plugin_input = c } TestSink { plugin_input = d } }"
    )
    assert ids(job) == [
        "TestSource#1",
        "TransformChain[TestMap#2->TestMap#3]",
        "TransformChain[TestMap#4]",
        "TransformChain[TestMap#5]",
        "TestSink#6",
        "TestSink#7",
    ]


def test_a_transform_with_two_inputs_starts_a_new_chain():
    job = compile_ok(
        'source { TestSource { plugin_output = a } TestSource { plugin_output = b } }\n'
        "transform { TestMap { plugin_input = a, plugin_output = a1 }\n"
        "  TestJoin { plugin_input = [a1, b], plugin_output = j }\n"
        "  TestMap { plugin_input = j, plugin_output = k } }\n"
        "sink { TestSink { plugin_input = k } }"
    )
    assert "TransformChain[TestMap#3]" in ids(job)
    assert "TransformChain[TestJoin#4->TestMap#5]" in ids(job)


def test_different_parallelism_breaks_the_chain():
    job = compile_ok(SINGLE + "transform { TestMap { } TestMap { parallelism = 2 } }\nsink { TestSink { } }")
    assert ids(job)[1:3] == ["TransformChain[TestMap#2]", "TransformChain[TestMap#3]"]
    assert [v.parallelism for v in job.plan.pipelines[0].vertices[1:3]] == [1, 2]


def test_a_non_chainable_transform_stands_alone():
    job = compile_ok(SINGLE + "transform { TestMap { } TestOpaque { } TestMap { } }\nsink { TestSink { } }")
    assert ids(job)[1:4] == ["TransformChain[TestMap#2]", "TransformChain[TestOpaque#3]", "TransformChain[TestMap#4]"]


def test_chaining_can_be_turned_off():
    job = compile_ok("env { chaining = false }\n" + SINGLE + "transform { TestMap { } TestMap { } }\nsink { TestSink { } }")
    assert ids(job)[1:3] == ["TransformChain[TestMap#2]", "TransformChain[TestMap#3]"]
    assert ("chain_transforms", "chaining disabled") in job.plan.phases


# --- pipelines ------------------------------------------------------------------

TWO_PARTS = (
    'source { TestSource { plugin_output = a } TestSource { plugin_output = b } }\n'
    "sink { TestSink { plugin_input = b } TestSink { plugin_input = a } }"
)


def test_unrelated_parts_become_separate_pipelines_named_in_file_order():
    job = compile_ok(TWO_PARTS)
    assert [(p.name, p.key) for p in job.plan.pipelines] == [("pipeline-1", "a"), ("pipeline-2", "b")]
    assert ids(job, 0) == ["TestSource#1", "TestSink#4"]
    assert job.plan.pipelines[1].full_name("TestSource#2") == "pipeline-2/TestSource#2"


def test_duplicate_vertex_names_are_rejected():
    v = ExecutionVertex("X#1", "source", ("X#1",), 1)
    plan = ExecutionPlan("j", (Pipeline("pipeline-1", "k", (v, v), ()),))
    with pytest.raises(PlanError) as exc:
        check_names(plan)
    assert exc.value.condition == "PLAN.DUPLICATE_VERTEX"
    assert exc.value.params["name"] == "pipeline-1/X#1"


def test_checkpoint_locations_come_from_names_not_positions(tmp_path):
    one = compile_ok('env { job.name = shop, checkpoint.dir = "/ck" }\n' + 'source { TestSource { plugin_output = a } }\n'
                     "sink { TestSink { plugin_input = a } }")
    two = compile_ok('env { job.name = shop, checkpoint.dir = "/ck" }\n'
                     'source { TestSource { plugin_output = z } TestSource { plugin_output = a } }\n'
                     "sink { TestSink { plugin_input = z } TestSink { plugin_input = a } }")
    loc_one = one.physical.pipelines[0].checkpoint_location
    [loc_two] = [p.checkpoint_location for p in two.physical.pipelines if p.key == "a"]
    assert loc_one == loc_two == "/ck/shop/a"
    # the same pipeline is pipeline-1 in one job and pipeline-2 in the other
    assert [p.name for p in two.physical.pipelines if p.key == "a"] == ["pipeline-2"]


# --- physical preview -------------------------------------------------------------

def test_physical_plan_separates_catalyst_from_one_fused_python_pass():
    job = compile_ok(SINGLE + "transform { TestMap { } TestPy { } TestPy { } TestMap { } }\nsink { TestSink { } }")
    [chain] = [s for s in job.physical.pipelines[0].stages if s.kind == "transform-chain"]
    segs = [(s["segment"], s["members"]) for s in chain.detail["segments"]]
    assert segs == [
        ("catalyst", ["TestMap#2"]),
        ("python", ["TestPy#3", "TestPy#4"]),
        ("catalyst", ["TestMap#5"]),
    ]


def test_physical_plan_lists_sink_group_commit_protocol_and_txn_ids():
    job = compile_ok('env { job.name = shop }\n' + MULTI + TWO_SINKS % ("src", "src"))
    stages = job.physical.pipelines[0].stages
    assert [s.kind for s in stages] == ["read", "shuffle", "sink-group"]
    sinks = stages[-1].detail["sinks"]
    assert [s["commit"] for s in sinks] == ["delta-txn", "delta-txn"]
    assert sinks[0]["txn_app_id"] == "shop.src.testsink.src.<table>"
    assert sinks[1]["txn_app_id"] == "shop.src.testsink.src-2.<table>"
    assert job.physical.pipelines[0].trigger.startswith("availableNow")


def _persisted(job):
    return {s.vertex: s.detail["persist"] for s in job.physical.pipelines[0].stages if "persist" in s.detail}


def test_a_linear_pipeline_into_a_single_pass_sink_persists_nothing():
    job = compile_ok(SINGLE + "transform { TestMap { } }\nsink { TestSink { single_pass = true } }")
    assert _persisted(job) == {"TestSource#1": False, "TransformChain[TestMap#2]": False}


def test_outputs_read_more_than_once_are_persisted_once():
    # a sink that scans its input several times: the chain output it reads is persisted
    job = compile_ok(SINGLE + "transform { TestMap { } }\nsink { TestSink { } }")
    assert _persisted(job) == {"TestSource#1": False, "TransformChain[TestMap#2]": True}
    # a multi-table batch is split per table: the source batch is persisted
    job = compile_ok(MULTI + "sink { TestSink { single_pass = true } }")
    assert _persisted(job) == {"TestSource#1": True}
    # two readers of one chain: the chain output is computed once
    job = compile_ok(SINGLE + "transform { TestMap { plugin_output = m } }\n"
                     + "sink { TestSink { plugin_input = m, single_pass = true } TestSink { plugin_input = m, single_pass = true } }")
    assert _persisted(job) == {"TestSource#1": False, "TransformChain[TestMap#2]": True}
    from streaming_engine.plan.render import render

    assert "TransformChain[TestMap#2]: transform chain of 1: 1 segment(s), 0 Python pass(es)  (output persisted" in render(job, "text")


def test_streaming_trigger_uses_checkpoint_interval():
    job = compile_ok("env { job.mode = streaming, checkpoint.interval = 2500 }\n" + SINGLE + "sink { TestSink { } }")
    assert job.physical.pipelines[0].trigger == "processingTime(2500 ms)"


def test_renderings_show_all_three_plans():
    from streaming_engine.plan.render import render

    job = compile_ok(MULTI + "transform { TestMap { } TestPy { } }\n" + TWO_SINKS % ("\"TestPy#3\"", "\"TestPy#3\""))
    text = render(job, "text")
    for needle in ("== Logical DAG ==", "== Execution plan ==", "== Physical plan ==",
                   "Shuffle [TestSource#1]", "TransformChain[TestMap#2->TestPy#3]", "pipeline-1"):
        assert needle in text
    data = json.loads(render(job, "json"))
    assert set(data) == {"logical", "execution", "physical"}
    assert render(job, "json") == render(compile_ok(
        MULTI + "transform { TestMap { } TestPy { } }\n" + TWO_SINKS % ("\"TestPy#3\"", "\"TestPy#3\"")), "json")
    dot = render(job, "dot")
    assert dot.startswith("digraph") and '"pipeline-1/Shuffle [TestSource#1]"' in dot
    mermaid = render(job, "mermaid")
    assert mermaid.startswith("flowchart LR") and "Shuffle [TestSource#1]" in mermaid


# -- metadata no block reads is left null at the source (Plugin.reads_metadata) --

_META_JOB = """
source { FakeSource { plugin_output = src, row.num = 3, schema = { fields { id = bigint, s = string } } %s } }
%s
sink { %s }
"""


def _unread(source_extra: str, transforms: str, sinks: str) -> list[str]:
    job = compile_ok(_META_JOB % (source_extra, transforms, sinks))
    [read] = [s for s in job.physical.pipelines[0].stages if s.kind == "read"]
    return read.detail.get("unread_metadata", [])


@pytest.mark.parametrize(
    "transforms, sinks, unread",
    [
        # appends and projections read none of it: nothing is computed
        ("", 'Delta { path = "/tmp/t" }', ["__table", "__kind", "__seq"]),
        ('transform { Copy { fields { t = s } } }', 'Delta { path = "/tmp/t" }', ["__table", "__kind", "__seq"]),
        # a MERGE reads row kinds and the order of changes
        ("", 'Delta { path = "/tmp/t", save_mode = upsert, primary_key = [id] }', ["__table"]),
        # a transform reading row kinds
        ('transform { FilterRowKind { exclude_kinds = [DELETE] } }', 'Delta { path = "/tmp/t" }', ["__table", "__seq"]),
        # a block that does not declare what it reads is assumed to read everything
        ("", "Console { }", []),
        ('transform { Sql { query = "select id from dual" } }', 'Delta { path = "/tmp/t" }', []),
        # one reader in the pipeline is enough
        ("", 'Delta { path = "/tmp/t" }\nConsole { }', []),
    ],
)
def test_metadata_no_block_reads_is_left_null_at_the_source(transforms, sinks, unread):
    assert _unread("", transforms, sinks) == unread


def test_a_multi_table_batch_keeps_its_table_column():
    job = compile_ok(
        'source { FakeSource { plugin_output = src, row.num = 3, table-names = [a, b], schema = { fields { id = bigint } } } }\n'
        'sink { Delta { path = "/tmp/${table_name}" } }'
    )
    [read] = [s for s in job.physical.pipelines[0].stages if s.kind == "read"]
    assert read.detail["unread_metadata"] == ["__kind", "__seq"]
    from streaming_engine.plan.render import render

    assert "not read downstream, left null: __kind, __seq" in render(job, "text")
