"""User functions for the Python-transform benchmarks (importable by workers)."""

from __future__ import annotations

from typing import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def add_one_arrow(batch: pa.RecordBatch) -> pa.RecordBatch:
    i = batch.schema.get_field_index("v")
    return batch.set_column(i, "v", pc.add(batch.column(i), 1.0))


def add_one_pandas(df: pd.DataFrame) -> pd.DataFrame:
    df["v"] = df["v"] + 1.0
    return df


def add_one_pandas_iter(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for df in frames:
        yield add_one_pandas(df)
