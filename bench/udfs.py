"""User functions for the Python-transform benchmarks (importable by workers)."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc


def add_one_arrow(batch: pa.RecordBatch) -> pa.RecordBatch:
    i = batch.schema.get_field_index("v")
    return batch.set_column(i, "v", pc.add(batch.column(i), 1.0))


def add_one_arrow_iter(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield add_one_arrow(batch)
