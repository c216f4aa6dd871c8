"""A multi-table CDC epoch reuses Spark's generated code instead of compiling it again."""

from __future__ import annotations

from streaming_engine.job import compile_text
from streaming_engine.runtime.events import EventBus
from streaming_engine.runtime.runner import execute

TABLES = 4
JOB = """
env { job.name = codegen_cache, job.mode = STREAMING, checkpoint.interval = 200,
      checkpoint.dir = "${work}/ck", job.retry.times = 0 }
source { FakeSource { plugin_output = cdc, seed = 5, tables_configs = [ %s ] } }
sink { Delta { plugin_input = cdc, path = "${work}/out/${table_name}", save_mode = upsert } }
""" % ", ".join(
    f'{{ schema = {{ table = "db.t{i}", fields {{ id = bigint, v = string, n = double }}, '
    f"primaryKey {{ name = pk{i}, columnNames = [id] }} }}, row.num = 1000000, rows.per.batch = 20, "
    f"cdc = {{ key_column = id, keys = 50, update_ratio = 0.5, delete_ratio = 0.1 }} }}"
    for i in range(TABLES)
)


def test_a_multi_table_upsert_epoch_compiles_no_code_once_warm(spark, tmp_path):
    """Each epoch of a 4-table upsert job plans the same ~60 whole-stage and
    expression classes (MERGE, statistics, the ledger). Spark keeps compiled
    classes in a cache of ``spark.sql.codegen.cache.maxEntries`` (100 by
    default, split over 4 segments): too small for that working set, it
    compiled ~28 classes again every epoch (~0.3-0.5 s of a ~3 s epoch).
    The engine's session sets a larger cache; warm epochs compile (nearly)
    nothing."""
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    compiled: dict[int, int] = {}
    bus = EventBus()
    bus.subscribe(
        lambda e: compiled.setdefault(e.epoch, metrics.METRIC_COMPILATION_TIME().getCount())
        if type(e).__name__ == "EpochCommitted"
        else None
    )
    job = compile_text(JOB, variables={"work": str(tmp_path)}, file="job.conf")
    result = execute(job, spark=spark, bus=bus, stop_after_epochs=9, timeout_s=300)
    assert result.status in ("FINISHED", "CANCELED"), result.error
    epochs = sorted(compiled)
    assert len(epochs) >= 9, epochs
    warm = epochs[4:]  # the first epochs create the tables and compile what every epoch runs
    per_epoch = (compiled[warm[-1]] - compiled[warm[0]]) / (len(warm) - 1)
    assert per_epoch <= 2, f"{per_epoch:.1f} classes compiled per warm epoch (by epoch: {compiled})"
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"
