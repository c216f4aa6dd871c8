"""JVM flags of the test suite's short-lived JVMs (Spark drivers and executors, Kafka, Debezium, s3proxy),
and the class-data-sharing archive the suite's Spark drivers start from.

Run ``python -m tests.jvm`` to build the archive by hand (the suite builds it on first use)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# C1-only JIT: ~35 % faster for short test workloads (measured 37 s vs 55 s on a small
# Delta round trip); wrong for throughput runs, so tests only. C1 alone reserves a
# 48 MB code cache (tiered: 240 MB) and never flushes what it compiled: a CDC driver
# (Kafka, four MERGE targets) used 58 MB within 40 s and then failed with
# "Out of space in CodeCache for method handle intrinsic". Reserve what tiered does.
C1_ONLY = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
C1_ONLY_OPTS = " ".join(C1_ONLY)
# The suite's shared in-process session (one per xdist worker, tests/conftest.py) lives for the whole run:
# there C2 pays for itself (test_delta_writes.py + test_delta_merge.py in one worker: 387-417 s C1 only,
# 308-324 s tiered). Spark's launcher puts spark.driver.extraJavaOptions after SPARK_SUBMIT_OPTS (which
# carries C1_ONLY for the short-lived drivers the tests start), and the JVM takes a flag's last value.
SHARED_SESSION_OPTS = "-XX:TieredStopAtLevel=4"

# Application class-data sharing (JDK 17 dynamic archive, JEP 350): the classes a
# Spark driver of this checkout loads (Spark SQL, streaming, Delta's MERGE and
# append, the engine's jar) are dumped once, parsed and verified, into
# build/cds/; every later driver JVM maps them instead of loading them again.
# Measured here (local[2], C1 only): session start 8.4 -> 4.5 s, a first Delta
# write and read 13.1 -> 9.5 s. A driver whose class path differs from the
# archive's (another JDK, a changed jar, a cluster master without the engine's
# local-FS jar) starts without it (silently: the -Xlog options), exactly as
# before. The archive is keyed by the JDK and the jars, so a change builds a new one.
ROOT = Path(__file__).resolve().parents[1]
CDS_DIR = ROOT / "build" / "cds"
CDS_ENV = "STREAMING_ENGINE_TEST_CDS"  # "0": no archive
_QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]

# What the dumping driver runs: the engine's CLI on a job touching what the
# suite's drivers load (a Python transform, a Delta upsert with a sequence
# column and its MERGE, a Delta append, the ledger, the job history, a
# streaming query with foreachBatch).
_WORKLOAD = """
env { job.name = cds_workload, job.mode = BATCH, checkpoint.dir = "${work}/ck", job.retry.times = 0 }
source { FakeSource { plugin_output = src, row.num = 20, rows.per.batch = 10, string.template = ["+I", "+U"],
                      schema = { table = "db.t", fields { id = bigint, op = string, seq = bigint },
                                 primaryKey { name = pk, columnNames = [id] } } } }
transform {
  Python { plugin_input = src, plugin_output = kinds, function = "tests.recovery.cdc_kinds:kind_from_op", api = arrow }
  Sql { plugin_input = src, plugin_output = sql, query = "select id % 7 as k, op, seq from src" }
}
sink {
  Delta { plugin_input = kinds, path = "${work}/state", save_mode = upsert, sequence_column = seq }
  Delta { plugin_input = sql, path = "${work}/log" }
}
"""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def _key() -> str | None:
    """A hash of the JDK and every jar a local driver's class path holds."""
    from streaming_engine.runtime.session import engine_jar, jar_paths

    try:
        import pyspark

        version = subprocess.run([_java(), "-version"], capture_output=True, text=True, timeout=60).stderr
        jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
        jars += [Path(p) for p in jar_paths()] + [j for j in [engine_jar()] if j is not None]
    except Exception:  # noqa: BLE001 - no archive then: the suite runs as before
        return None
    h = hashlib.sha256(version.encode())
    for j in jars:
        st = j.stat()
        h.update(f"{j}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def cds_archive() -> Path | None:
    """The archive for this checkout's drivers when it was built, else None."""
    if os.environ.get(CDS_ENV) == "0":
        return None
    key = _key()
    path = CDS_DIR / f"spark-driver-{key}.jsa" if key else None
    return path if path is not None and path.is_file() else None


def build_cds_archive(timeout: float = 600) -> Path | None:
    """Build the archive unless it exists (or STREAMING_ENGINE_TEST_CDS=0):
    one run of the workload job with -XX:ArchiveClassesAtExit. None when it
    could not be built (the suite then runs without it); says why on stderr."""
    if os.environ.get(CDS_ENV) == "0":
        return None
    key = _key()
    if key is None:
        return None
    path = CDS_DIR / f"spark-driver-{key}.jsa"
    if path.is_file():
        return path
    CDS_DIR.mkdir(parents=True, exist_ok=True)
    for old in CDS_DIR.glob("spark-driver-*.jsa"):  # archives of jars that changed since
        old.unlink(missing_ok=True)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cds-") as work:
        job = Path(work) / "job.conf"
        job.write_text(_WORKLOAD)
        partial = Path(work) / "archive.jsa"
        env = {**os.environ, "SPARK_SUBMIT_OPTS": " ".join([*C1_ONLY, f"-XX:ArchiveClassesAtExit={partial}", *_QUIET]),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        try:
            proc = subprocess.run([sys.executable, "-m", "streaming_engine", "run", "-c", str(job), "-i", f"work={work}",
                                   "-q"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            print(f"tests/jvm.py: the class-data archive was not built within {timeout:g} s", file=sys.stderr)
            return None
        if proc.returncode != 0 or not partial.is_file():
            tail = (proc.stdout + proc.stderr)[-1500:]
            print(f"tests/jvm.py: the class-data archive was not built (exit {proc.returncode}):\n{tail}", file=sys.stderr)
            return None
        shutil.move(str(partial), str(path.with_suffix(".tmp")))
        os.replace(path.with_suffix(".tmp"), path)
    print(f"tests/jvm.py: built the Spark drivers' class-data archive {path.name} in {time.monotonic() - began:.0f} s",
          file=sys.stderr)
    return path


def driver_opts() -> str:
    """JVM options of the suite's Spark drivers: C1 only, and the class-data archive when built."""
    archive = cds_archive()
    return " ".join([*C1_ONLY, *([f"-XX:SharedArchiveFile={archive}", *_QUIET] if archive else [])])


if __name__ == "__main__":
    built = build_cds_archive()
    print(built or "no archive")
    sys.exit(0 if built else 1)
