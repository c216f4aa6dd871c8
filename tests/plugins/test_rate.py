"""Rate source: Spark's rate stream."""

import pytest
from pydantic import ValidationError

from sources.rate import Rate, RateOptions
from streaming_engine.plugins.registry import SOURCES


def test_registered_and_unbounded():
    assert SOURCES.find("rate") is Rate
    assert Rate.boundedness == "unbounded"


def test_fixed_output_schema():
    (table,) = Rate(RateOptions.model_validate({})).output().tables
    assert [(c.name, c.type) for c in table.columns] == [("timestamp", "timestamp"), ("value", "bigint")]
    assert table.table_id == "default"
    assert Rate(RateOptions.model_validate({"plugin_output": "r"})).output().table_ids == ("r",)


@pytest.mark.parametrize("key", ["rowsPerSecond", "rows_per_second"])
def test_rows_per_second_spellings(key):
    o = RateOptions.model_validate({key: 500})
    assert o.rowsPerSecond == 500
    assert o.public_dict()["rowsPerSecond"] == 500


def test_bad_values():
    with pytest.raises(ValidationError, match="rowsPerSecond"):
        RateOptions.model_validate({"rowsPerSecond": 0})
    with pytest.raises(ValidationError, match="is not a duration"):
        RateOptions.model_validate({"rampUpTime": "soon"})
    assert RateOptions.model_validate({"ramp_up_time": 5}).rampUpTime == "5s"
    assert RateOptions.model_validate({"num_partitions": 4}).numPartitions == 4
