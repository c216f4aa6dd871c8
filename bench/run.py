"""Benchmarks: the engine against baselines measured in the same run.

    .venv/bin/python -m bench.run            # default sizes (a few minutes on 2 cores)
    .venv/bin/python -m bench.run --rows 3000000 --repeat 3

Prints a table of ratios with the machine facts and writes bench/RESULTS.md.
Ratios, never absolute timings, are what to compare across machines; nothing
here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass
class Row:
    name: str
    engine_s: float
    baseline_s: float
    goal: str
    goal_ok: bool | None

    @property
    def ratio(self) -> float:
        return self.engine_s / self.baseline_s if self.baseline_s else float("nan")


def timed(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up (JIT, Python workers, Delta log caches)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timed_pair(engine: Callable[[], object], baseline: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Medians of ``engine`` and ``baseline`` run alternately (after one warm-up
    each), so load that drifts during the run weighs on both alike."""
    engine(), baseline()
    e, b = [], []
    for _ in range(repeat):
        for fn, out in ((engine, e), (baseline, b)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(e), statistics.median(b)


# ---------------------------------------------------------------------------
# 1. fused Python transforms vs one mapInPandas per transform


def _python_chain_job(k: int) -> str:
    blocks = "\n".join(
        f'  Python {{ function = "bench.udfs:add_one_arrow", api = arrow }}' for _ in range(k)
    )
    return f"""
    env {{ job.name = bench_py }}
    source {{ FakeSource {{ plugin_output = src, schema = {{ fields {{ id = bigint, v = double, s = string }} }} }} }}
    transform {{
{blocks}
    }}
    sink {{ Noop {{ }} }}
    """


def bench_python_fusion(spark, df, repeat: int) -> list[Row]:
    from bench import udfs
    from streaming_engine.job import compile_text
    from streaming_engine.runtime.chain import run_chain
    from streaming_engine.runtime import rows as envelope

    out = []
    costs = {}
    for k in (1, 3, 6):
        job = compile_text(_python_chain_job(k))
        members = [v for v in job.dag.vertices if v.kind == "transform"]
        passes = sum(1 for s in job.physical.pipelines[0].stages for seg in s.detail.get("segments", ()) if seg["segment"] == "python")
        assert passes == 1, "the engine must fuse the chain into one Python pass"

        def engine(members=members, job=job):
            frames = run_chain(spark, job.dag, members, {"src": df}, 0)
            frames["src"].write.format("noop").mode("overwrite").save()

        def unfused(k=k):
            cur = df
            for _ in range(k):
                cur = cur.mapInPandas(udfs.add_one_pandas_iter, cur.schema)
            cur.write.format("noop").mode("overwrite").save()

        e, b = timed(engine, repeat), timed(unfused, repeat)
        costs[k] = e
        out.append(Row(f"K={k} Python transforms: engine (fused) vs one mapInPandas each", e, b,
                       "engine >= 4x faster at K=6" if k == 6 else "-", (b / e >= 4) if k == 6 else None))
    out.append(Row("fused K=6 vs fused K=1 (cost of 5 more transforms)", costs[6], costs[1], "<= 1.25x", costs[6] / costs[1] <= 1.25))
    return out


# ---------------------------------------------------------------------------
# 2. built-in transforms vs the same logic as hand-written column expressions

BUILTIN_JOB = """
env { job.name = bench_builtin }
source { FakeSource { plugin_output = src, schema = { fields { id = bigint, v = double, s = string } } } }
transform {
  Copy { fields { s2 = s } }
  FieldRename { replacements_with_regex = [ { replace_from = "^v$", replace_to = "value" } ] }
  Replace { replace_field = s2, pattern = "a", replacement = "b" }
  Filter { include_fields = [id, value, s, s2] }
}
sink { Noop { } }
"""


def bench_builtins(spark, df, repeat: int) -> Row:
    from pyspark.sql import functions as F

    from streaming_engine.job import compile_text
    from streaming_engine.runtime.chain import run_chain

    job = compile_text(BUILTIN_JOB)
    members = [v for v in job.dag.vertices if v.kind == "transform"]

    def engine():
        frames = run_chain(spark, job.dag, members, {"src": df}, 0)
        frames["src"].write.format("noop").mode("overwrite").save()

    def hand():
        (
            df.withColumn("s2", F.col("s"))
            .withColumnRenamed("v", "value")
            .withColumn("s2", F.replace(F.col("s2"), F.lit("a"), F.lit("b")))
            .select("__table", "__kind", "__seq", "id", "value", "s", "s2")
            .write.format("noop").mode("overwrite").save()
        )

    # a short job (about half a second): more, alternating repeats
    e, b = timed_pair(engine, hand, max(7, 3 * repeat))
    return Row("built-in transforms (Copy, FieldRename, Replace, Filter) vs hand-written columns", e, b, "<= 1.1x", e / b <= 1.1)


# ---------------------------------------------------------------------------
# 3. a whole job through the engine vs a hand-written PySpark streaming job

WHOLE_JOB = """
env {{ job.name = bench_whole, checkpoint.dir = "{work}/ck", job.retry.times = 0 }}
source {{ LocalFile {{ plugin_output = src, path = "{work}/in", file_format_type = parquet,
  schema = {{ fields {{ id = bigint, v = double, s = string }} }} }} }}
transform {{
  Copy {{ fields {{ s2 = s }} }}
  Filter {{ include_fields = [id, v, s2] }}
}}
sink {{ Delta {{ path = "{work}/out" }} }}
"""


def bench_whole_job(spark, rows: int, repeat: int) -> Row:
    from pyspark.sql import functions as F

    from streaming_engine.job import compile_text
    from streaming_engine.runtime.runner import execute

    base = Path(tempfile.mkdtemp(prefix="bench-whole-"))
    (
        spark.range(rows)
        .select(F.col("id"), (F.col("id") * 0.5).alias("v"), F.concat(F.lit("s"), F.col("id")).alias("s"))
        .repartition(4)
        .write.parquet(str(base / "in"))
    )
    counter = [0]

    def engine():
        counter[0] += 1
        work = base / f"e{counter[0]}"
        work.mkdir()
        (work / "in").symlink_to(base / "in")
        job = compile_text(WHOLE_JOB.format(work=work))
        result = execute(job, spark=spark)
        assert result.status == "FINISHED", result.error

    def hand():
        counter[0] += 1
        work = base / f"h{counter[0]}"
        src = spark.readStream.schema("id bigint, v double, s string").parquet(str(base / "in"))

        def batch(df, batch_id):
            (
                df.withColumn("s2", F.col("s")).select("id", "v", "s2")
                .write.format("delta").mode("append")
                .option("txnAppId", "hand").option("txnVersion", batch_id)
                .save(str(work / "out"))
            )

        q = (
            src.writeStream.foreachBatch(batch)
            .option("checkpointLocation", str(work / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()

    e, b = timed_pair(engine, hand, max(3, repeat))
    shutil.rmtree(base, ignore_errors=True)
    return Row("whole job (LocalFile -> Copy -> Filter -> Delta) vs hand-written PySpark", e, b, "<= 1.05x", e / b <= 1.05)


# ---------------------------------------------------------------------------
# 4. fan-out of one batch to many Delta tables vs one table

FANOUT_JOB = """
env {{ job.name = bench_fanout_{n}, checkpoint.dir = "{work}/ck", job.retry.times = 0 }}
source {{ FakeSource {{ plugin_output = src, seed = 1, row.num = {per_table}, {tables}
  schema = {{ fields {{ id = bigint, v = double, s = string }} }} }} }}
sink {{ Delta {{ path = "{work}/out/${{table_name}}" }} }}
"""


def bench_fanout(spark, rows: int, repeat: int) -> list[Row]:
    from streaming_engine.job import compile_text
    from streaming_engine.runtime.runner import execute

    base = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    counter = [0]

    def job_for(n: int) -> Callable[[], None]:
        def run():
            counter[0] += 1
            work = base / f"{n}-{counter[0]}"
            tables = "table-names = [" + ", ".join(f"t{i}" for i in range(n)) + "]," if n > 1 else ""
            job = compile_text(FANOUT_JOB.format(n=n, work=work, per_table=rows // n, tables=tables))
            result = execute(job, spark=spark)
            assert result.status == "FINISHED", result.error

        return run

    one = timed(job_for(1), repeat)
    out = []
    for n, goal in ((10, 1.5), (100, 2.0)):
        t = timed(job_for(n), repeat)
        out.append(Row(f"fan-out of one batch to {n} Delta tables vs 1 table, same rows", t, one, f"<= {goal}x", t / one <= goal))
    shutil.rmtree(base, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------


def machine_facts() -> str:
    import pyspark

    mem = ""
    try:
        mem = subprocess.run(["free", "-h"], capture_output=True, text=True).stdout.splitlines()[1].split()[1]
    except Exception:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, {mem} RAM, Python {platform.python_version()}, "
        f"pyspark {pyspark.__version__}, load average at start {load:.2f}"
    )


def render(rows: list[Row], facts: str, args: argparse.Namespace) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Machine: {facts}",
        f"Run: `python -m bench.run --rows {args.rows} --repeat {args.repeat}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "Median of the repeats after one warm-up; ratio = engine / baseline (lower is better).",
        "",
        "| benchmark | engine s | baseline s | ratio | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "-" if r.goal_ok is None else ("yes" if r.goal_ok else "NO")
        lines.append(f"| {r.name} | {r.engine_s:.2f} | {r.baseline_s:.2f} | {r.ratio:.2f} | {r.goal} | {met} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows per benchmark batch")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", choices=("python", "builtin", "whole", "fanout"), action="append")
    p.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    args = p.parse_args(argv)

    from pyspark.sql import functions as F

    from streaming_engine.runtime.session import build_spark_session

    facts = machine_facts()
    spark = build_spark_session("bench")
    df = (
        spark.range(args.rows)
        .select(
            F.lit("src").alias("__table"), F.lit("+I").alias("__kind"), F.col("id").alias("__seq"),
            F.col("id"), (F.col("id") * 0.5).alias("v"), F.concat(F.lit("abc"), F.col("id")).alias("s"),
        )
        .repartition(2)
        .cache()
    )
    df.count()
    only = set(args.only or ("python", "builtin", "whole", "fanout"))
    rows: list[Row] = []
    if "python" in only:
        rows += bench_python_fusion(spark, df, args.repeat)
    if "builtin" in only:
        rows.append(bench_builtins(spark, df, args.repeat))
    if "whole" in only:
        rows.append(bench_whole_job(spark, args.rows, args.repeat))
    if "fanout" in only:
        rows += bench_fanout(spark, min(args.rows, 300_000), args.repeat)
    text = render(rows, facts, args)
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
