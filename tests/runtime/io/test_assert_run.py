"""Assert sink at run time: field rules per epoch, row rules over the whole query, per-table configs."""

import json
from types import SimpleNamespace

import pytest

from sinks.assert_sink import Assert, AssertOptions
from streaming_engine.errors import EngineError
from streaming_engine.schema import Column, Dataset, TableSchema

SOURCE = """
env { job.name = %(name)s }
source {
  FakeSource {
    plugin_output = fake
    seed = 3
    tables_configs = [
      { schema = { table = "test.table1", fields { c_int = int, c_bigint = bigint } },
        row.num = 12, rows.per.batch = 6, int.min = 5, int.max = 50 },
      { schema = { table = "test.table2", fields { c_string = string, c_tinyint = tinyint } },
        rows = [
          { kind = INSERT, fields = ["AAA", 1] },
          { kind = INSERT, fields = ["BBBB", 2] },
          { kind = UPDATE_AFTER, fields = ["CC", 3] }
        ] }
    ]
  }
}
"""

PASSING = SOURCE % {"name": "assert_ok"} + """
sink {
  Assert {
    rules {
      tables_configs = [
        { table_path = "test.table1",
          row_rules = [ { rule_type = MAX_ROW, rule_value = 12 }, { rule_type = MIN_ROW, rule_value = 12 } ],
          field_rules = [
            { field_name = c_int, field_type = int,
              field_value = [ { rule_type = NOT_NULL }, { rule_type = MIN, rule_value = 5 }, { rule_type = MAX, rule_value = 50 } ] },
            { field_name = c_bigint, field_type = bigint, field_value = [ { rule_type = NOT_NULL } ] }
          ] },
        { table_path = "test.table2",
          row_rules = [ { rule_type = MAX_ROW, rule_value = 3 } ],
          field_rules = [
            { field_name = c_string, field_type = string,
              field_value = [ { rule_type = MIN_LENGTH, rule_value = 2 }, { rule_type = MAX_LENGTH, rule_value = 4 } ] },
            { field_name = c_tinyint, field_type = tinyint, field_value = [ { rule_type = MIN, rule_value = 1 } ] }
          ],
          catalog_table_rule { column_rule = [ { name = c_string, type = string, nullable = false } ] } }
      ]
    }
  }
}
"""


def test_assert_passes_per_table_rules_over_several_epochs(run_job_text):
    ran = run_job_text(PASSING)
    assert ran.result.status == "FINISHED", ran.result.error
    rows = {r["table"]: (r["total_rows"], r["epochs"]) for r in ran.result.committed}
    assert rows["test.table1"] == (12, 2)
    assert rows["test.table2"][0] == 3
    # the running totals live under the pipeline's checkpoint, one file per epoch
    states = sorted(ran.work.glob("checkpoints/**/sinks/*/assert_rows/*.json"), key=lambda p: int(p.stem))
    assert [p.stem for p in states] == ["0", "1"]
    assert json.loads(states[-1].read_text())["totals"] == {"test.table1": 12, "test.table2": 3}


FAILING_FIELD = SOURCE % {"name": "assert_field"} + """
sink {
  Assert {
    rules {
      tables_configs = [
        { table_path = "test.table1", field_rules = [ { field_name = c_int, field_value = [ { rule_type = NOT_NULL } ] } ] },
        { table_path = "test.table2",
          field_rules = [ { field_name = c_string, field_value = [ { rule_type = NOT_NULL, equals_to = "AAA" } ] } ] }
      ]
    }
  }
}
"""


def test_assert_field_rule_failure_names_rule_table_field_and_value(run_job_text):
    ran = run_job_text(FAILING_FIELD)
    assert ran.result.status == "FAILED"
    error = ran.result.error
    assert "ASSERT.FAILED" in error
    assert "equals_to failed for table test.table2, field c_string" in error
    assert "value BBBB" in error or "value CC" in error
    assert ran.result.exit_code == 1


T = TableSchema("shop.items", (Column("id", "bigint"), Column("name", "string")))


def _ctx(spark, tmp_path, epoch):
    return SimpleNamespace(
        spark=spark, job_name="j", pipeline="p", sink_uid="assert.items", vertex_id="Assert#1", batch_id=epoch,
        txn_app_id=lambda t: f"j.p.assert.{t}", extras={"checkpoint_location": str(tmp_path / "ck")},
    )


def test_a_replayed_epoch_is_counted_once_and_min_row_is_checked_at_the_end(spark, tmp_path):
    sink = Assert(AssertOptions.model_validate({"rules": {"row_rules": [
        {"rule_type": "MAX_ROW", "rule_value": 10}, {"rule_type": "MIN_ROW", "rule_value": 10}]}}))  # fmt: skip
    frame = spark.createDataFrame([("shop.items", "+I", i, i, f"n{i}") for i in range(5)], "__table string, __kind string, __seq bigint, id bigint, name string")
    ds = Dataset((T,))
    sink.write(_ctx(spark, tmp_path, 0), {"shop.items": frame}, ds)
    with pytest.raises(EngineError, match=r"MIN_ROW failed for table shop.items, field \(row count\): value 5 rows is below the minimum 10"):
        sink.finish(_ctx(spark, tmp_path, 0), ds)
    first = sink.write(_ctx(spark, tmp_path, 1), {"shop.items": frame}, ds)
    again = sink.write(_ctx(spark, tmp_path, 1), {"shop.items": frame}, ds)  # replay: 10 rows, not 15
    assert [r.rows for r in first] == [r.rows for r in again] == [5]
    # a new instance (a restarted process) continues from the totals kept under the checkpoint
    fresh = Assert(sink.options)
    fresh.finish(_ctx(spark, tmp_path, 1), ds)
    with pytest.raises(EngineError, match="MAX_ROW failed for table shop.items.*value 15 rows"):
        fresh.write(_ctx(spark, tmp_path, 2), {"shop.items": frame}, ds)


MIN_ROW_FAILS = SOURCE % {"name": "assert_min_row"} + """
sink {
  Assert {
    rules {
      tables_configs = [
        { table_path = "test.table1", row_rules = [ { rule_type = MIN_ROW, rule_value = 13 } ] }
      ]
    }
  }
}
"""


def test_min_row_is_checked_when_a_batch_job_finishes(run_job_text):
    ran = run_job_text(MIN_ROW_FAILS)
    assert ran.result.status == "FAILED"
    assert "MIN_ROW" in ran.result.error and "test.table1" in ran.result.error
    assert "12" in ran.result.error
