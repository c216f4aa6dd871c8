"""Python transform of the crash test's job: a row's kind is its ``op`` column.

The LocalFile source makes every row an INSERT (``+I``); the test's input
files carry the change kind as data (``op`` = +I, -U, +U or -D), and this
function moves it into the envelope's ``__kind``, where the Delta upsert sink
reads it. Imported by Spark's Python workers (the repository root must be on
their PYTHONPATH).
"""

from __future__ import annotations

KINDS = ("+I", "-U", "+U", "-D")


def kind_from_op(batch):
    import pyarrow as pa

    names = batch.schema.names
    op = batch.column(names.index("op"))
    bad = set(op.to_pylist()) - set(KINDS)
    if bad:
        raise ValueError(f"unknown op values {sorted(map(str, bad))}")
    columns = [op if n == "__kind" else batch.column(i) for i, n in enumerate(names)]
    return pa.RecordBatch.from_arrays(columns, names=names)
