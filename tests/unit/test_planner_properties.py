"""Property-based tests of the planner over random DAGs (hypothesis)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming_engine.plan.render import render
from tests.unit.helpers import compile_ok


@st.composite
def random_jobs(draw) -> str:
    """A random valid job (as JSON, the quickest format to parse): sources,
    transforms reading earlier datasets, sinks reading any dataset."""
    sources, transforms, sinks = [], [], []
    datasets: list[str] = []
    for i in range(draw(st.integers(1, 3))):
        tables = draw(st.sampled_from([["t"], ["d.a", "d.b"], ["x.p", "x.q", "x.r"]]))
        sources.append({"plugin_name": "TestSource", "plugin_output": f"s{i}", "tables": tables})
        datasets.append(f"s{i}")
    for i in range(draw(st.integers(0, 7))):
        plugin = draw(st.sampled_from(["TestMap", "TestPy", "TestOpaque", "TestJoin", "TestMerge"]))
        n_inputs = draw(st.integers(1, min(2, len(datasets)))) if plugin == "TestJoin" else 1
        inputs = draw(st.lists(st.sampled_from(datasets), min_size=n_inputs, max_size=n_inputs, unique=True))
        par = draw(st.sampled_from([1, 1, 1, 2]))
        transforms.append(
            {"plugin_name": plugin, "plugin_input": inputs, "plugin_output": f"t{i}", "parallelism": par}
        )
        datasets.append(f"t{i}")
    for _ in range(draw(st.integers(1, 5))):
        sinks.append({"plugin_name": "TestSink", "plugin_input": draw(st.sampled_from(datasets))})
    return json.dumps({"env": {"job.name": "prop"}, "source": sources, "transform": transforms, "sink": sinks})


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(random_jobs())
def test_every_vertex_lands_in_exactly_one_pipeline_and_one_execution_vertex(text):
    job = compile_ok(text, 'json')
    members = [m for p in job.plan.pipelines for v in p.vertices for m in v.members]
    assert sorted(members) == sorted(v.id for v in job.dag.vertices)
    names = [p.full_name(v.id) for p in job.plan.pipelines for v in p.vertices]
    assert len(names) == len(set(names))


@SETTINGS
@given(random_jobs())
def test_chains_are_simple_paths_of_transforms(text):
    job = compile_ok(text, 'json')
    dag = job.dag
    for p in job.plan.pipelines:
        for v in p.vertices:
            if v.kind != "transform_chain":
                continue
            assert all(dag.vertex(m).kind == "transform" for m in v.members)
            for a, b in zip(v.members, v.members[1:]):
                assert dag.upstream(b) == (a,), "a chained transform has exactly one input: its predecessor"
                assert dag.downstream(a) == (b,), "a chain continues only through a single downstream"
                assert dag.vertex(a).parallelism == dag.vertex(b).parallelism
                assert dag.vertex(a).chainable and dag.vertex(b).chainable


@SETTINGS
@given(random_jobs())
def test_no_edge_is_lost_or_invented(text):
    job = compile_ok(text, 'json')
    owner = {m: v.id for p in job.plan.pipelines for v in p.vertices for m in v.members}
    expected = {(owner[e.src], owner[e.dst]) for e in job.dag.edges if owner[e.src] != owner[e.dst]}
    # contract shuffle vertices: X -> Shuffle -> Y becomes X -> Y
    got = set()
    for p in job.plan.pipelines:
        kinds = {v.id: v.kind for v in p.vertices}
        for e in p.edges:
            assert e.src in kinds and e.dst in kinds, "edges stay inside their pipeline"
            if kinds[e.src] == "shuffle":
                continue
            if kinds[e.dst] == "shuffle":
                got |= {(e.src, x.dst) for x in p.edges if x.src == e.dst}
            else:
                got.add((e.src, e.dst))
    assert got == expected


@SETTINGS
@given(random_jobs())
def test_shuffles_only_sit_between_one_multi_table_producer_and_several_sinks(text):
    job = compile_ok(text, 'json')
    for p in job.plan.pipelines:
        kinds = {v.id: v.kind for v in p.vertices}
        for v in p.vertices:
            if v.kind != "shuffle":
                continue
            ins = [e.src for e in p.edges if e.dst == v.id]
            outs = [e.dst for e in p.edges if e.src == v.id]
            assert len(ins) == 1 and len(outs) >= 2
            assert all(kinds[o] == "sink" for o in outs)
            assert v.schema.is_multi_table
            assert sum(1 for x in p.vertices if x.kind == "source") == 1


@SETTINGS
@given(random_jobs())
def test_planning_is_deterministic(text):
    assert render(compile_ok(text, 'json'), "json") == render(compile_ok(text, 'json'), "json")
    json.loads(render(compile_ok(text, 'json'), "json"))
