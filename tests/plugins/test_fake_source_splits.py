"""FakeSource's offsets without Spark: which rows each micro-batch admits
(row.num per reader, split.num, split.read-interval, BATCH vs STREAMING,
rows.per.batch) and in which order the fixed rows come (per reader, per split)."""

import time
from types import SimpleNamespace

import pyarrow as pa
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from sources import _fake_runtime as rt
from sources.fake_source import FakeSource, FakeSourceOptions


def _specs(readers=2, **options):
    src = FakeSource(FakeSourceOptions.model_validate({"schema": {"fields": {"v": "string"}}, **options}))
    arrow = pa.schema([("__table", pa.string()), ("__kind", pa.string()), ("__seq", pa.int64()), ("v", pa.string())])
    return [
        rt.TableSpec(i, src.output().table(tid), cfg, cfg.cdc, arrow, readers)
        for i, (tid, cfg) in enumerate(src.table_configs())
    ]


def _reader(specs, streaming, readers=2):
    registered = []
    rt._register(SimpleNamespace(dataSource=SimpleNamespace(register=registered.append)))
    [source] = registered
    return source(options={"spec": rt.encode(specs, streaming, readers)}).streamReader(None)


def _offsets(reader, limit, calls):
    start, seen = reader.initialOffset(), []
    for _ in range(calls):
        end = reader.latestOffset(start, limit)
        seen.append(end["t0"])
        start = end
    return seen


def test_batch_reads_row_num_per_reader_at_once_or_in_rows_per_batch():
    reader = _reader(_specs(**{"row.num": 5, "split.num": 3}), streaming=False)
    assert _offsets(reader, ReadAllAvailable(), 2) == [10, 10]  # 5 rows x 2 readers, then nothing
    assert _offsets(reader, reader.getDefaultReadLimit(), 2) == [10, 10]
    reader = _reader(_specs(**{"row.num": 5, "rows.per.batch": 4}), streaming=False)
    assert _offsets(reader, reader.getDefaultReadLimit(), 4) == [4, 8, 10, 10]


def test_streaming_reads_one_split_per_reader_per_interval_then_idles():
    reader = _reader(_specs(**{"row.num": 5, "split.num": 3, "split.read-interval": 0}), streaming=True)
    limit = reader.getDefaultReadLimit()
    # splits of ceil(5/3) = 2, 2 and 1 rows per reader; 2 readers
    assert _offsets(reader, limit, 5) == [4, 8, 10, 10, 10]

    reader = _reader(_specs(**{"row.num": 4, "split.num": 2, "split.read-interval": 300}), streaming=True)
    first = reader.latestOffset(reader.initialOffset(), limit)
    assert first["t0"] == 4
    assert reader.latestOffset(first, limit)["t0"] == 4  # the interval has not passed
    time.sleep(0.35)
    assert reader.latestOffset(first, limit)["t0"] == 8


def test_streaming_with_rows_per_batch_never_ends():
    reader = _reader(_specs(**{"row.num": 5, "rows.per.batch": 3}), streaming=True)
    assert _offsets(reader, reader.getDefaultReadLimit(), 5) == [3, 6, 9, 12, 15]


def test_fixed_rows_come_once_per_reader_split_by_split():
    rows = [{"kind": "INSERT", "fields": [x]} for x in "abc"]
    [spec] = _specs(readers=2, rows=rows, **{"split.num": 2, "split.read-interval": 0})
    assert spec.total == 6
    # split 1 of both readers (a, b), then split 2 of both (c)
    batch = rt.generate(spec, 0, 6)
    assert batch.column("v").to_pylist() == ["a", "b", "a", "b", "c", "c"]
    assert batch.column("__seq").to_pylist() == [0, 1, 2, 3, 4, 5]
    reader = _reader([spec], streaming=True)
    assert _offsets(reader, ReadMaxRows(100), 3) == [4, 6, 6]
    parts = reader.partitions({"t0": 0}, {"t0": 4})
    assert [p.ranges for p in parts] == [[(0, 0, 2)], [(0, 2, 4)]]  # one split per reader


def test_clock_values_come_from_the_offsets_so_a_replay_reads_the_same():
    opts = {"schema": {"columns": [{"name": "t", "type": "timestamp", "defaultValue": "CURRENT_TIMESTAMP"}]}}
    src = FakeSource(FakeSourceOptions.model_validate({**opts, "row.num": 2}))
    arrow = pa.schema([("__table", pa.string()), ("__kind", pa.string()), ("__seq", pa.int64()),
                       ("t", pa.timestamp("us", tz="UTC"))])  # fmt: skip
    (tid, cfg), = src.table_configs()
    spec = rt.TableSpec(0, src.output().table(tid), cfg, None, arrow)
    reader = _reader([spec], streaming=False, readers=1)
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert end["t0"] == 2 and abs(end["ms"] - time.time() * 1000) < 5000
    [part] = reader.partitions({"t0": 0}, end)
    values = [b.column("t").to_pylist() for b in reader.read(part)]
    again = [b.column("t").to_pylist() for b in reader.read(part)]
    assert values == again and values[0][0].timestamp() * 1000 == end["ms"]
