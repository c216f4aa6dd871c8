"""The Grafana dashboard the project ships (conf/grafana/streaming-engine.json):
valid dashboard JSON, and every metric its queries name is one the engine
exports (read from a PrometheusMetrics registry, not from a list kept here).
No Spark. tests/integration/test_prometheus_server.py runs the same queries
on a real Prometheus."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from streaming_engine.checkpoint.record import CommitRecord
from streaming_engine.metrics.prometheus import PrometheusMetrics
from streaming_engine.runtime.events import (
    EpochCommitted, JobFinished, JobStarted, PipelineFinished, PipelineStarted, SourceProgress, StateChanged,
)

DASHBOARD = Path(__file__).resolve().parents[2] / "conf" / "grafana" / "streaming-engine.json"
GRID_WIDTH = 24  # Grafana's grid has 24 columns
PANEL_TYPES = {"timeseries", "stat", "state-timeline", "gauge", "bargauge", "table", "text", "row"}
BUILTIN_VARIABLES = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}
# PromQL words that are not metric names
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
            "inf", "nan"}
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("_sum", "_count", "_created"), "gauge": ("",), "info": ("_info",)}


def exported_metric_names() -> set[str]:
    """Every sample name a PrometheusMetrics registry exports: the samples of
    an instance fed one event of each kind, plus, for a family without a
    sample yet, the names its type exports (counter: _total, histogram:
    _bucket/_sum/_count, ...)."""
    m = PrometheusMetrics()
    m.on_event(JobStarted("j", "STREAMING", ("p",)))
    m.on_event(PipelineStarted("j", "p", "/ckpt", attempt=2))
    m.on_event(EpochCommitted("j", "p", 0, (CommitRecord("s", "db.t", "/t", 3, 0, False, 0.2),
                                            CommitRecord("s", "db.u", "/u", 0, None, True)), 0.5))
    m.on_event(SourceProgress("j", "p", 0, 3, (("topic", 0, 7),), (("kafka.cdc", 1_700_000_000_000),)))
    m.on_event(StateChanged("j", "job", "job", "RUNNING", "SCHEDULED", ("SCHEDULED", "RUNNING")))
    m.on_event(StateChanged("j", "pipeline", "p", "RUNNING", "DEPLOYING", ("DEPLOYING", "RUNNING")))
    m.on_event(PipelineFinished("j", "p", "FINISHED"))
    m.on_event(JobFinished("j", "FINISHED"))
    names = set()
    for family in m.registry.collect():
        names.update(s.name for s in family.samples)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers left once
    strings, label matchers, ranges, grouping clauses and offsets are taken
    out, that are neither a function (followed by "(") nor a keyword."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'", '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\boffset\s+-?\S+", " ", s)
    s = re.sub(r"\$\{?\w+(?::\w+)?\}?", " ", s)  # Grafana variables outside strings
    s = re.sub(r"(?<![\w:])\d+(?:\.\d+)?(?:e[+-]?\d+)?", " ", s)  # numbers (0.95, 1e3)
    out = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        if m.group().lower() in KEYWORDS or s[m.end():].lstrip().startswith("("):
            continue
        out.add(m.group())
    return out


def variable_queries(doc: dict) -> list[str]:
    """The metric selectors of the dashboard's query variables
    (``label_values(metric, label)`` -> ``metric``)."""
    out = []
    for v in doc.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
        m = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*\w+\s*\)\s*", q)
        out.append(m.group(1) if m else q)
    return out


def unknown_metrics(doc: dict, exported: set[str]) -> dict[str, set[str]]:
    """Per panel title (or variable), the metric names its queries use that
    the engine does not export."""
    out = {}
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            missing = metric_names(target["expr"]) - exported
            if missing:
                out.setdefault(panel["title"], set()).update(missing)
    for q in variable_queries(doc):
        missing = metric_names(q) - exported
        if missing:
            out.setdefault(f"variable {q}", set()).update(missing)
    return out


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def test_the_dashboard_is_grafana_dashboard_json(doc):
    assert isinstance(doc["title"], str) and doc["title"]
    assert isinstance(doc["uid"], str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", doc["uid"])
    assert isinstance(doc["schemaVersion"], int) and doc["schemaVersion"] >= 30
    assert "id" not in doc or doc["id"] is None  # an id is the exporting Grafana's row: import would clash
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = doc["panels"]
    assert panels, "no panels"
    assert len({p["id"] for p in panels}) == len(panels), "panel ids repeat"
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        assert isinstance(p["id"], int) and p["type"] in PANEL_TYPES and p["title"], p
        g = p["gridPos"]
        assert all(isinstance(g[k], int) for k in "hwxy") and g["h"] > 0 and g["w"] > 0, p["title"]
        assert g["x"] + g["w"] <= GRID_WIDTH, f"{p['title']}: wider than the grid"
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        targets = p["targets"]
        assert targets and len({t["refId"] for t in targets}) == len(targets), p["title"]
        for t in targets:
            assert t["expr"].strip(), p["title"]
            for var in re.findall(r"\$\{?(\w+)", t["expr"]):
                assert var in variables or var in BUILTIN_VARIABLES, f"{p['title']}: undefined variable ${var}"


def test_the_dashboard_has_the_panels_an_operator_alerts_on(doc):
    """Epochs/s, rows per table, commit latency p95, source lag (records and,
    for CDC sources, seconds), restarts, job and pipeline state (also the
    control plane's state sets), last committed epoch: each a panel over the metric."""
    used = {name for p in doc["panels"] for t in p.get("targets", []) for name in metric_names(t["expr"])}
    assert used >= {
        "streaming_engine_epochs_committed_total", "streaming_engine_rows_committed_total",
        "streaming_engine_commit_duration_seconds_bucket", "streaming_engine_source_lag_records",
        "streaming_engine_pipeline_restarts_total", "streaming_engine_job_status", "streaming_engine_pipeline_status",
        "streaming_engine_last_committed_epoch", "streaming_engine_source_lag_seconds",
        "streaming_engine_job_state", "streaming_engine_pipeline_state",
    }
    p95 = [t["expr"] for p in doc["panels"] for t in p.get("targets", []) if "commit_duration" in t["expr"]]
    assert p95 and all(e.startswith("histogram_quantile(0.95,") and re.search(r"by \(le\b", e) for e in p95), p95


def test_every_metric_a_dashboard_query_names_is_one_the_engine_exports(doc):
    exported = exported_metric_names()
    assert "streaming_engine_commit_duration_seconds_bucket" in exported  # read from the registry
    assert "streaming_engine_epochs_committed_total" in exported
    assert "streaming_engine_epochs_committed" not in exported  # a counter's bare name is no series
    assert unknown_metrics(doc, exported) == {}


def test_a_query_naming_an_unknown_metric_is_caught(doc):
    """The check above fails for a dashboard that names a metric the engine
    does not export (a typo, a renamed counter without its _total, a
    histogram's bare name), in a panel or in a variable."""
    exported = exported_metric_names()
    for wrong in ("streaming_engine_rows_comitted_total", "streaming_engine_epochs_committed",
                  "streaming_engine_commit_duration_seconds"):
        broken = copy.deepcopy(doc)
        t = broken["panels"][-1]["targets"][0]
        t["expr"] = f"sum by (table) (rate({wrong}{{job=~\"$job\"}}[$__rate_interval])) / 2"
        assert unknown_metrics(broken, exported) == {broken["panels"][-1]["title"]: {wrong}}
    broken = copy.deepcopy(doc)
    [v] = [v for v in broken["templating"]["list"] if v["name"] == "job"]
    v["query"]["query"] = "label_values(streaming_engine_job_states, job)"
    assert unknown_metrics(broken, exported) == {"variable streaming_engine_job_states": {"streaming_engine_job_states"}}


@pytest.mark.parametrize("expr, names", [
    ('histogram_quantile(0.95, sum by (le, table) (rate(a_bucket{job=~"$job", x="y{z}"}[5m])))', {"a_bucket"}),
    ("sum without (instance) (b_total) / on (job) group_left c", {"b_total", "c"}),
    ("rate(d_total[1m] offset 5m) > bool 1e3 and e", {"d_total", "e"}),
    ('label_replace(f, "dst", "$1", "src", "(.*)")', {"f"}),
])
def test_metric_names_are_read_from_promql(expr, names):
    assert metric_names(expr) == names
