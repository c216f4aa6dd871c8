"""User functions for the Python transform tests, imported by module path inside Spark's Python workers."""

import pyarrow as pa
import pyarrow.compute as pc


def tag_table(pdf):
    """pandas api: copy the row's table id (a metadata column) into a data column."""
    pdf["src_table"] = pdf["__table"]
    return pdf


def score(pdf):
    """pandas api: drop rows without a payload, compute a double from an int, change a string in place."""
    pdf = pdf[pdf["payload"].notna()].copy()
    pdf["score"] = pdf["qty"] * 1.5
    pdf["label"] = pdf["label"].str.upper()
    return pdf


def add_total(batch: pa.RecordBatch) -> pa.RecordBatch:
    """arrow api: an int column computed from two columns (one made by JsonPath upstream)."""
    total = pc.add(batch.column("qty"), pc.fill_null(batch.column("extra"), 0))
    return batch.append_column("total", total)


def explode(batch):
    raise RuntimeError("boom: this function always fails")
