"""The one-job MERGE of a multi-table batch (``checkpoint/delta_merge.py``,
``jvm/MultiTableMerge.java``) against Delta's own MERGE per table
(``STREAMING_ENGINE_DELTA_MERGE=per_table``): the same rows in every table and
tombstone table, epoch after epoch, through the public interface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sinks.delta import MERGE_ENV
from streaming_engine.checkpoint import delta_merge

TABLES = 3


def _job(order: str, epochs: int = 6) -> str:
    cdc = ", ".join(
        f'{{ schema = {{ table = "db.t{i}", fields {{ id = bigint, name = string, seq = bigint, score = double }}, '
        f"primaryKey {{ name = pk{i}, columnNames = [id] }} }}, row.num = {epochs * 40}, rows.per.batch = 40, "
        f"cdc = {{ key_column = id, keys = 30, update_ratio = 0.4, delete_ratio = 0.2 }} }}"
        for i in range(TABLES))
    return f"""
env {{ job.name = merge, job.mode = BATCH }}
source {{ FakeSource {{ plugin_output = cdc, seed = 5, tables_configs = [ {cdc} ] }} }}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/out/${{table_name}}", save_mode = upsert {order} }} }}
"""


def _state(spark, root: Path) -> dict:
    out = {}
    for t in sorted(root.iterdir()):
        out[t.name] = sorted(tuple(r) for r in spark.read.format("delta").load(str(t)).collect())
        tombs = t / "_cdc_tombstones"
        if tombs.is_dir():
            out[t.name + "/tombstones"] = sorted(
                tuple(r)[:-1] for r in spark.read.format("delta").load(str(tombs)).collect())
    return out


@pytest.mark.parametrize("order", ["", ", sequence_column = seq", ", source_order_column = _pos"])
def test_the_one_job_merge_equals_a_delta_merge_per_table(spark, run_job_text, tmp_path, monkeypatch, order):
    calls = []
    real = delta_merge.merge_tables

    def spy(*a, **kw):
        out = real(*a, **kw)
        calls.append(out)
        return out

    monkeypatch.setattr(delta_merge, "merge_tables", spy)
    ran = run_job_text(_job(order))
    assert ran.result.status == "FINISHED", ran.result.error
    assert calls and all(not refused and len(done) == TABLES for done, refused in calls), calls
    one_job = _state(spark, tmp_path / "out")

    monkeypatch.setenv(MERGE_ENV, "per_table")
    other = tmp_path / "per_table"
    other.mkdir()
    ran2 = run_job_text(_job(order).replace("${work}/out", f"{other}/out").replace("job.name = merge", "job.name = m2"))
    assert ran2.result.status == "FINISHED", ran2.result.error
    per_table = _state(spark, other / "out")
    assert one_job == per_table
    assert sum(len(v) for k, v in one_job.items() if "/" not in k) > 0
