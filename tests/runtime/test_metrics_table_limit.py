"""``env { metrics.table.limit }`` through job runs: the process has one
metrics registry (``PrometheusMetrics.shared``) and each job's tables are
bounded by the job's own limit, not by the registry's or another job's."""

from __future__ import annotations

import pytest

from streaming_engine.errors import ConfigError
from streaming_engine.job import compile_text

JOB = """
env {{ job.name = {name}, job.mode = BATCH, metrics.enabled = true, metrics.port = 0 {limit} }}
source {{
  FakeSource {{
    plugin_output = shop
    seed = 3
    tables_configs = [
      {{ schema = {{ table = "shop.a", fields {{ id = bigint }} }}, row.num = 5 }},
      {{ schema = {{ table = "shop.b", fields {{ id = bigint }} }}, row.num = 5 }},
      {{ schema = {{ table = "shop.c", fields {{ id = bigint }} }}, row.num = 5 }},
      {{ schema = {{ table = "shop.d", fields {{ id = bigint }} }}, row.num = 5 }}
    ]
  }}
}}
sink {{ Noop {{ plugin_input = shop }} }}
"""


def _rows_by_table(job: str) -> dict[str, float]:
    from streaming_engine.metrics.prometheus import PrometheusMetrics

    registry = PrometheusMetrics._shared.registry
    return {
        s.labels["table"]: s.value for family in registry.collect() for s in family.samples
        if s.name == "streaming_engine_rows_committed_total" and s.labels["job"] == job and s.labels["table"] != "*"
    }


def test_each_job_bounds_its_own_table_series_in_the_shared_registry(spark, run_job_text):
    limited = run_job_text(JOB.format(name="limit_two", limit=", metrics.table.limit = 2"))
    assert limited.result.status == "FINISHED", limited.result.error
    default = run_job_text(JOB.format(name="limit_default", limit=""))
    assert default.result.status == "FINISHED", default.result.error

    rows = _rows_by_table("limit_two")
    assert len(rows) == 3 and "_other" in rows, rows  # two tables of its own, the other two share _other
    assert rows["_other"] == 10 and sum(rows.values()) == 20
    assert _rows_by_table("limit_default") == {f"shop.{t}": 5 for t in "abcd"}  # the default (100) for the other job


def test_the_table_limit_is_at_least_one():
    with pytest.raises(ConfigError, match="metrics.table.limit"):
        compile_text(JOB.format(name="limit_zero", limit=", metrics.table.limit = 0"), file="job.conf")
