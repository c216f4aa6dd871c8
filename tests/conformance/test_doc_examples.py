"""Every config example of SeaTunnel's pages for the plugins we ship, run
through the engine with the documented result (Flink CDC's YAML test specs
in spirit: the data lives in tests/conformance/examples/<page>.yaml).

A spec case names a config block of its page by position (``config: 2``) and
says what the page documents for it:

- ``input: {table: N, schema: {col: type, ...}}`` for a transform fragment: the
  page's N-th data table becomes a FakeSource's ``rows`` feeding the fragment
  (under the fragment's input name); ``rows: [[...], ...]`` instead of ``table``
  gives them inline, ``tables: [id, ...]`` feeds the same rows as several tables;
- ``expect: {fails: text}``: the job fails, its error saying ``text``;
- ``expect: {table: N}``: the rows the fragment's output (or the job's sink
  input) must hold, as the page's N-th data table, compared as text, in any
  order, columns in the page's order; ``expect: {rows: [...]}`` likewise inline;
- ``expect: {finished: true}``: a complete job (its own Assert sinks checking
  the data) runs to FINISHED;
- ``expect: {plans: true}``: it compiles with no error (examples that need a
  broker or database are planned, not run);
- ``expect: {same_as: M}``: with ``variables`` (the page's ``-i``), the
  example plans exactly like the page's config block M;
- ``expect: {error: CONDITION, contains: text}``: the documented (or the
  engine's deliberate) refusal.

``swap_source: <block>`` replaces the source section of an example whose
source this engine does not ship (MySQL-CDC, Jdbc, ...) by data of the same
shape, ``swap_sink: true`` its sink section by a Delta sink per table
(``out/<table id>``, checked with ``expect: {tables: {id: rows or count}}``)
and ``swap_sink: <block>`` by the spec's own sinks (Assert rules, say),
so the example's transform still runs as written. ``capture: true`` adds a Delta sink beside a complete job's own sink (same
input; ``capture: <dataset>`` names which), so ``expect`` can check what that sink received; ``values: {col: [..]}``
(with ``count``) checks random input's every value, ``all: [condition, ...]``
Spark SQL conditions every row meets, ``types: {col: type}`` the Spark types. ``rename`` maps a column
the page's table spells unlike its config. ``then: <transform block>`` adds a transform after a source example (the
query a page gives in prose). ``files: {rel: {text, encoding}}`` and ``parquet: {rel: {schema, rows}}`` write
a file source example's input under the work directory (``${work}``, which
``replace`` puts in place of the page's paths); ``expect: {files: {glob, format,
columns, count, text, names}}`` checks what a file sink example wrote. ``note`` says where the page itself
is wrong and what the case checks instead.
``kafka: {produce: {topic: [value, ...]}}`` runs the example against a real
broker (started once per module): ``${kafka}`` is its address (``replace`` puts
it in place of the page's), the topics are created and the values produced
before the run (``group: {name: {topic: offset}}`` commits a consumer group's
offsets first); ``expect: {kafka: {topic, count, keys}}`` checks the records a
sink example wrote (JSON objects with those keys).
A failing case names its page and example.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming_engine.errors import EngineError
from streaming_engine.job import compile_text
from tests.conformance.doc_examples import config_blocks, data_tables
from tests.runtime.conftest import run_job_text  # noqa: F401  (fixture)

SPECS = sorted((Path(__file__).parent / "examples").glob("*.yaml"))
_IN = re.compile(r"\b(?:source_table_name|plugin_input)\s*=\s*\"?([\w.\-]+)\"?")
_OUT = re.compile(r"\b(?:result_table_name|plugin_output)\s*=\s*\"?([\w.\-]+)\"?")


def _cases() -> list[Any]:
    out = []
    for spec in SPECS:
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
        for i, case in enumerate(data["cases"], 1):
            case = {**case, "page": data["page"]}
            out.append(pytest.param(case, id=f"{data['page']}#{case.get('config', '-')}:{case.get('name', i)}"))
    return out


def test_every_page_with_examples_has_a_spec():
    """Pages of shipped plugins whose config examples have no spec yet would pass unnoticed."""
    from streaming_engine import compat

    pages = {c.seatunnel_page for kind in ("source", "transform", "sink") for c in compat.shipped(kind) if c.seatunnel_page}
    specced = {yaml.safe_load(s.read_text(encoding="utf-8"))["page"] for s in SPECS}
    unspecced = sorted(p for p in pages if config_blocks(p) and p not in specced)
    assert not unspecced, f"pages with config examples and no spec in tests/conformance/examples/: {unspecced}"
    for spec in SPECS:
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
        covered = {c.get("config") for c in data["cases"]}
        blocks = len(config_blocks(data["page"]))
        assert covered >= set(range(1, blocks + 1)), (
            f"{spec.name}: config examples {sorted(set(range(1, blocks + 1)) - covered)} of {data['page']} have no case"
        )


def _literal(value: Any, spark_type: str) -> str:
    if isinstance(value, (list, dict)):  # an array, map or row value, written as the YAML spec gives it
        return json.dumps(value)
    if value.lower() == "null":
        return "null"
    if spark_type in ("string",) or spark_type.startswith(("date", "timestamp", "decimal")):
        return json.dumps(value)
    return value


def _wrap(case: dict[str, Any], block: str) -> str:
    """A fragment of a job completed around it. ``section: transform`` (the
    default): between a FakeSource holding the input and a Delta sink capturing
    its output; ``section: sink``: the sink fed by that FakeSource;
    ``section: source``: the source feeding the capturing Delta sink."""
    section = case.get("section", "transform")
    ins, outs = _IN.findall(block), _OUT.findall(block)
    capture = f'sink {{ Delta {{ {f"plugin_input = {chr(34)}{outs[-1]}{chr(34)}, " if outs else ""}'
    capture += 'path = "${work}/out/${table_full_name}" } }\n'
    if section == "source":
        body = block if re.search(r"^\s*source\s*\{", block, re.M) else f"source {{\n{block}\n}}"
        if "then" in case:  # a transform the page applies to this source in prose (its SQL, say)
            then = _OUT.findall(case["then"])
            capture = capture.replace(f'plugin_input = "{outs[-1]}", ' if outs else "", "")
            capture = capture.replace("Delta { ", f'Delta {{ plugin_input = "{then[-1]}", ', 1)
            body += f"\ntransform {{\n{case['then']}\n}}"
        return f"env {{ job.mode = BATCH }}\n{body}\n{capture}"
    spec = case["input"]
    schema: dict[str, str] = spec["schema"]
    if "table" in spec:  # the page's data table, cells as text
        data = [[r[c] for c in schema] for r in data_tables(case["page"])[spec["table"] - 1]]
    else:  # inline rows (null for null)
        data = [["null" if v is None else v if isinstance(v, (list, dict)) else str(v) for v in r] for r in spec["rows"]]
    rows = ", ".join(
        "{ kind = INSERT, fields = [" + ", ".join(_literal(v, t) for v, t in zip(r, schema.values())) + "] }" for r in data
    )
    fields = ", ".join(f"{c} = {json.dumps(t)}" for c, t in schema.items())
    key = f', primaryKey {{ name = pk, columnNames = {json.dumps(spec["primary_key"])} }}' if "primary_key" in spec else ""
    ids = spec.get("tables") or [spec.get("table_id", "default")]
    configs = ", ".join(f'{{ schema = {{ table = "{t}", fields {{ {fields} }}{key} }}, rows = [ {rows} ] }}' for t in ids)
    source_name = f'plugin_output = "{ins[0]}", ' if ins else ""
    source = f"source {{ FakeSource {{ {source_name}tables_configs = [ {configs} ] }} }}\n"
    if section == "sink":
        body = block if re.search(r"^\s*sink\s*\{", block, re.M) else f"sink {{\n{block}\n}}"
        return f"env {{ job.mode = BATCH }}\n{source}{body}\n"
    body = block if re.search(r"^\s*transform\s*\{", block, re.M) else f"transform {{\n{block}\n}}"
    return f"env {{ job.mode = BATCH }}\n{source}{body}\n{capture}"


def _section(text: str, name: str) -> str:
    """The body of the top-level ``name { ... }`` section (balanced braces)."""
    m = re.search(rf"^\s*{name}\s*\{{", text, re.M)
    assert m, f"no {name} section"
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end() : i - 1]


def _swap_section(text: str, name: str, body: str) -> str:
    old = _section(text, name)
    return text.replace(old, f"\n  {body}\n", 1)


def _text(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


@pytest.fixture(scope="module")
def kafka_for_examples(tmp_path_factory):
    from tests.components.kafka import KafkaBroker

    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture(scope="module")
def postgres_for_examples(tmp_path_factory):
    from tests.components.postgres import PostgresServer

    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


def _pg_setup(server, spec: dict) -> None:
    """``postgres: {database, sql}``: the page's database, created (again) with the case's tables."""
    import psycopg2

    admin = psycopg2.connect(server.dsn)
    admin.autocommit = True
    with admin.cursor() as cur:
        db = spec["database"]
        cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = %s", (db,))
        cur.execute(f'DROP DATABASE IF EXISTS "{db}"')
        cur.execute(f'CREATE DATABASE "{db}"')
    admin.close()
    conn = psycopg2.connect(host=server.host, port=server.port, user="postgres", dbname=db)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(spec["sql"])
    conn.close()


def _produce(broker, topics: dict[str, list[str]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all"})
    for topic, values in topics.items():
        if topic not in broker.topics():
            broker.create_topic(topic)
        for v in values:
            p.produce(topic, value=v.encode())
    assert p.flush(30) == 0


def _consume(broker, topic: str) -> list[bytes]:
    """Every committed record of ``topic`` (read_committed: transaction markers
    and aborted records are skipped, so positions, not record offsets, say when
    the end is reached)."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "conformance", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    parts = [TopicPartition(topic, p, 0) for p in c.list_topics(topic, timeout=10).topics[topic].partitions]
    c.assign(parts)
    ends = [c.get_watermark_offsets(tp, timeout=10)[1] for tp in parts]
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            out.append(m.value())
        elif m is None and all(tp.offset >= end for tp, end in zip(c.position(parts), ends)):
            break
    c.close()
    return out


def _commit_group(broker, groups: dict[str, dict[str, int]]) -> None:
    """Commit ``{group: {topic: offset}}`` (partition 0), as an earlier consumer of the group would have."""
    from confluent_kafka import Consumer, TopicPartition

    for group, offsets in groups.items():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(t, 0, o) for t, o in offsets.items()], asynchronous=False)
        c.close()


@pytest.mark.parametrize("case", _cases())
def test_a_documented_example(case, run_job_text, spark, tmp_path, request):
    page, n = case["page"], case["config"]
    blocks = config_blocks(page)
    assert 1 <= n <= len(blocks), f"{page} has {len(blocks)} config examples, the spec names #{n}"
    block = blocks[n - 1]
    for old, new in (case.get("replace") or {}).items():  # e.g. a broker address; said in the spec
        assert old in block, f"{page} example {n}: {old!r} not in the example any more"
        block = block.replace(old, new)
    expect = case["expect"]
    if "swap_source" in case:  # a source this engine does not ship, replaced by data of the same shape
        block = _swap_section(block, "source", case["swap_source"])
    if isinstance(case.get("swap_sink"), str):  # a sink this engine does not ship, replaced by the spec's
        block = _swap_section(block, "sink", case["swap_sink"])
    elif case.get("swap_sink"):  # a sink this engine does not ship: capture what it would receive
        name = _IN.findall(_section(block, "sink"))
        into = f'plugin_input = "{name[-1]}", ' if name else ""
        block = _swap_section(block, "sink", f'Delta {{ {into}path = "${{work}}/out/${{table_full_name}}" }}')
    text = _wrap(case, block) if "input" in case or "section" in case else block
    if case.get("capture"):  # a complete job: also capture what its sink reads
        name = [case["capture"]] if isinstance(case["capture"], str) else _IN.findall(_section(block, "sink"))
        into = f'plugin_input = "{name[-1]}", ' if name else ""
        text = re.sub(r"^(\s*sink\s*\{)", lambda m: m.group(1) + f'\n  Delta {{ {into}path = "${{work}}/out/${{table_name}}" }}',
                      text, count=1, flags=re.M)
    where = f"{page}, config example {n} ({case.get('name', '')})"
    variables = {"work": str(tmp_path), **(case.get("variables") or {})}  # -i name=value, as the page passes them
    broker = request.getfixturevalue("kafka_for_examples") if "kafka" in case or "kafka" in expect else None
    if broker is not None:
        variables["kafka"] = broker.bootstrap
        _produce(broker, (case.get("kafka") or {}).get("produce") or {})
        _commit_group(broker, (case.get("kafka") or {}).get("group") or {})
    if "postgres" in case:  # a CDC example's database, on a real PostgreSQL: ${pg} is its host:port
        server = request.getfixturevalue("postgres_for_examples")
        variables["pg"] = f"{server.host}:{server.port}"
        _pg_setup(server, case["postgres"])
    if "same_as" in expect:  # the page's "final submitted configuration": the same plan
        from streaming_engine.plan.render import to_dict

        final = config_blocks(page)[expect["same_as"] - 1]
        for old, new in (expect.get("final_replace") or {}).items():
            assert old in final, f"{where}: {old!r} not in example {expect['same_as']} any more"
            final = final.replace(old, new)
        assert to_dict(compile_text(text, variables=variables, file="example.conf")) == to_dict(
            compile_text(final, file="example.conf")), where
        return
    if "error" in expect:
        with pytest.raises(EngineError) as e:
            compile_text(text, variables=variables, file="example.conf")
        assert expect["error"] in {p.condition for p in getattr(e.value, "problems", [])} | {
            getattr(e.value, "condition", "")}, f"{where}: {e.value}"
        assert expect.get("contains", "") in str(e.value), f"{where}: {e.value}"
        return
    if expect.get("plans"):
        job = compile_text(text, variables=variables, file="example.conf")
        assert job.dag.vertices, where
        return
    work = tmp_path  # the work directory run_job_text gives the job as ${work}
    for rel, spec in (case.get("files") or {}).items():  # input files of a file source example
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(spec["text"].encode(spec.get("encoding", "utf-8")))
    for rel, spec in (case.get("parquet") or {}).items():  # parquet input written by Spark
        spark.createDataFrame(spec["rows"], spec["schema"]).coalesce(1).write.parquet(str(work / rel))
    ran = run_job_text(text, variables=variables, **(case.get("run") or {}))  # e.g. stop_after_epochs for a STREAMING example
    if "fails" in expect:  # the documented failure of the job (FAIL on bad rows)
        assert ran.result.status == "FAILED" and expect["fails"] in str(ran.result.error), f"{where}: {ran.result.error}"
        return
    assert ran.result.status == "FINISHED", f"{where}: {ran.result.error}"
    if expect.get("finished"):
        return
    if "kafka" in expect:  # what a Kafka sink example wrote
        spec = expect["kafka"]
        records = [json.loads(v) for v in _consume(broker, spec["topic"])]
        assert len(records) == spec["count"], f"{where}: {len(records)} records in {spec['topic']}"
        assert all(sorted(r) == sorted(spec["keys"]) for r in records), f"{where}: {records[:3]}"
        return
    if "files" in expect:  # what a file sink example wrote: {glob, format, rows|count, columns, text}
        spec = expect["files"]
        found = sorted(p for p in ran.work.glob(spec["glob"]) if p.is_file())
        assert found, f"{where}: no file matches {spec['glob']}"
        if "text" in spec:
            got = "".join(p.read_bytes().decode(spec.get("encoding", "utf-8")) for p in found)
            assert sorted(got.splitlines()) == sorted(spec["text"].splitlines()), f"{where}: {got!r}"
        if "format" in spec:
            df = spark.read.format(spec["format"]).load([str(p) for p in found])
            if "columns" in spec:
                assert df.columns == spec["columns"], f"{where}: columns {df.columns}"
            if "count" in spec:
                assert df.count() == spec["count"], where
        if "names" in spec:  # a regular expression every file's path (relative to the work dir) matches
            bad = [str(p.relative_to(ran.work)) for p in found if not re.fullmatch(spec["names"], str(p.relative_to(ran.work)))]
            assert not bad, f"{where}: files named unlike {spec['names']}: {bad}"
        return
    out = ran.work / "out"
    tables = [p for p in out.iterdir() if (p / "_delta_log").is_dir()] if out.is_dir() else []
    if expect.get("count") == 0 and not tables:
        return  # nothing reached the sink, as documented
    if "tables" in expect:  # several output tables: name -> rows (inline) or a row count
        assert sorted(p.name for p in tables) == sorted(expect["tables"]), f"{where}: tables {[p.name for p in tables]}"
        for name, want in expect["tables"].items():
            df = spark.read.format("delta").load(str(out / name))
            if isinstance(want, int):
                assert df.count() == want, f"{where}: {name}"
            else:
                cols = list(want[0].keys())
                got = sorted(tuple(_text(v) for v in r) for r in df.select(*cols).collect())
                assert got == sorted(tuple(str(r[c]) for c in cols) for r in want), f"{where}: {name}"
        return
    assert len(tables) == 1, f"{where}: expected one output table, found {[p.name for p in tables]}"
    df = spark.read.format("delta").load(str(tables[0]))
    for column, spark_type in (expect.get("types") or {}).items():  # values arrive in the declared types
        assert df.schema[column].dataType.simpleString() == spark_type, f"{where}: {column} is {df.schema[column].dataType}"
    for condition in expect.get("all") or ():  # a Spark SQL condition every row meets
        bad = df.where(f"NOT coalesce({condition}, false)").limit(3).collect()
        assert not bad, f"{where}: rows break {condition!r}: {bad}"
    if "values" in expect:  # random input: every row's value of these columns
        for column, values in expect["values"].items():
            got_values = sorted({_text(r[0]) for r in df.select(column).collect()})
            assert got_values == sorted(str(v) for v in values), f"{where}: {column} holds {got_values[:10]}"
        if "count" in expect:
            assert df.count() == expect["count"], where
        return
    if "table" not in expect and "rows" not in expect:
        if "count" in expect:
            assert df.count() == expect["count"], where
        return
    expected = data_tables(page)[expect["table"] - 1] if "table" in expect else expect["rows"]
    renamed = expect.get("rename") or {}  # the page's table spells a column unlike its config (see note)
    expected = [{renamed.get(k, k): v for k, v in r.items()} for r in expected]
    columns = list(expected[0].keys())
    if expect.get("subset"):  # the page shows some columns of the output
        assert set(columns) <= set(df.columns), f"{where}: columns {df.columns}, the page shows {columns}"
    else:
        assert [c for c in df.columns] == columns, f"{where}: columns {df.columns}, the page shows {columns}"
    got = sorted(tuple(_text(v) for v in r) for r in df.select(*columns).collect())
    want = sorted(tuple(str(r[c]).strip() for c in columns) for r in expected)
    assert got == want, f"{where}: rows differ from the page's"
