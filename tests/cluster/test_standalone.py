"""Jobs submitted through ./spark-submit.sh to a real Spark standalone cluster
(a master and two workers started by the test from pyspark's spark-class).

The job's Python transform lives in a user module that exists only in the
test's folder: it must reach the workers' executors through the job's
``env.python.files``. Results are compared with rows the test wrote into the
job itself, and Spark's event log says where every task ran."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
import shutil
import subprocess
from pathlib import Path

import pytest

from streaming_engine.runtime.session import BASE_CONF
from tests.jvm import C1_ONLY_OPTS

from tests.components.spark_cluster import SparkStandaloneCluster

ROOT = Path(__file__).resolve().parents[2]
PY = str(ROOT / ".venv" / "bin" / "python")

pytestmark = [pytest.mark.spark, pytest.mark.components]

# The SQL settings of the engine's session (runtime/session.py BASE_CONF) as an executor's task sees them:
# SQLConf.get in a task reads the task's local properties, so this is what Spark's code on the executor
# uses (the codegen cache is sized from it when the executor's first task generates code).
ENGINE_SQL_SETTINGS = {k: v for k, v in BASE_CONF.items() if k.startswith(("spark.sql.", "spark.databricks."))}
assert "spark.sql.codegen.cache.maxEntries" in ENGINE_SQL_SETTINGS

UDF = '''
import json
import os

from pyspark import TaskContext


def tag(df):
    df["doubled"] = df["qty"] * 2
    df["ran_in"] = os.getcwd()  # an executor's working directory: <worker dir>/<app id>/<executor id>
    task = TaskContext.get()
    df["seen"] = json.dumps({k: task.getLocalProperty(k) for k in %r})
    return df
''' % sorted(ENGINE_SQL_SETTINGS)
# the executor's log: a jar Spark serves is fetched and added to the task class loader (standalone); one
# YARN localized into the container starts on the executor's user class path
ENGINE_JAR_LOADED = re.compile(r"Adding file:\S*/streaming-engine-spark\.jar to class loader"
                               r"|Starting executor with user classpath [^\n]*/streaming-engine-spark\.jar")


def assert_engine_settings_reached_the_executors(seen: set[str], executor_logs: list[Path]) -> str:
    """Every task of the user function saw the engine's SQL settings, and every executor that ran one
    put the engine's jar into its task class loader (its log says so). Returns a line for the report."""
    assert seen and all(json.loads(s) == ENGINE_SQL_SETTINGS for s in seen), (seen, ENGINE_SQL_SETTINGS)
    assert executor_logs, "no executor log"
    loaded = [p for p in executor_logs if ENGINE_JAR_LOADED.search(p.read_text(errors="replace"))]
    assert loaded == executor_logs, [str(p) for p in set(executor_logs) - set(loaded)]
    return f"{len(ENGINE_SQL_SETTINGS)} engine SQL settings seen in the tasks, engine jar loaded by {len(loaded)} executors"

TABLES = {"shop.orders": [(i, f"o{i}", i % 7) for i in range(60)], "shop.items": [(i, f"i{i}", i) for i in range(25)]}


def _rows(rows: list[tuple]) -> str:
    return ", ".join('{ kind = INSERT, fields = [%d, "%s", %d] }' % row for row in rows)


def _job() -> str:
    configs = ",\n".join(
        f'{{ schema = {{ table = "{t}", fields {{ id = bigint, name = string, qty = bigint }} }}, rows = [{_rows(rows)}] }}'
        for t, rows in TABLES.items()
    )
    return f"""
env {{ job.name = on_cluster, checkpoint.dir = "${{work}}/ck", job.retry.times = 0,
      python.files = [ userlib ] }}
source {{ FakeSource {{ plugin_output = src, tables_configs = [ {configs} ] }} }}
transform {{
  Python {{ plugin_input = src, plugin_output = tagged, function = "cluster_udfs:tag",
           output_schema = {{ doubled = bigint, ran_in = string, seen = string }} }}
}}
sink {{ Delta {{ plugin_input = tagged, path = "${{work}}/out/${{table_name}}" }} }}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with SparkStandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=1, memory="1g") as c:
        yield c


def _argv(work: Path, cluster: SparkStandaloneCluster) -> list[str]:
    return [str(ROOT / "spark-submit.sh"), "run", "-c", str(work / "job.conf"), "-i", f"work={work}",
            "-m", cluster.url, "--executor-python", PY, "--executor-memory", "512m", "--total-executor-cores", "2",
            "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={work / 'events'}",
            "--conf", "spark.eventLog.compress=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.databricks.delta.snapshotPartitions=1",
            "--conf", f"spark.executor.extraJavaOptions={C1_ONLY_OPTS}"]  # short test JVMs: C1 only


ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_SUBMIT_OPTS": C1_ONLY_OPTS}  # C1-only driver JVM


def _submit(work: Path, cluster: SparkStandaloneCluster) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(work, cluster), capture_output=True, text=True, timeout=600, cwd=work, env=ENV,
                          stdin=subprocess.DEVNULL)


def _events(work: Path) -> list[dict]:
    """Spark's event log of the one application (a folder of rolled files in Spark 4)."""
    (app,) = list((work / "events").iterdir())
    files = sorted(app.glob("events_*")) if app.is_dir() else [app]
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def test_a_user_module_that_is_not_shipped_fails_the_job_naming_it(cluster, tmp_path):
    (tmp_path / "events").mkdir()
    (tmp_path / "job.conf").write_text(_job().replace("python.files = [ userlib ]", "").replace(
        "cluster_udfs:tag", "cluster_udfs_absent:tag"))
    proc = _submit(tmp_path, cluster)
    assert proc.returncode != 0
    assert "cluster_udfs_absent" in proc.stdout + proc.stderr


READER = r'''
import json, sys
from pyspark.sql import SparkSession
conf, tables = json.loads(sys.argv[1]), json.loads(sys.argv[2])
b = SparkSession.builder.master("local[1]").appName("plain-reader")
for k, v in conf.items():
    b = b.config(k, v)
spark = b.getOrCreate()
out = {}
for t in tables:
    path = f"s3a://lake/tables/{t}"
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).select("id", "name", "qty", "doubled", "ran_in", "seen").collect())
    adds = spark.read.json(f"{path}/_delta_log/*.json").where("add IS NOT NULL").select("add.stats").collect()
    stats = [json.loads(a.stats) for a in adds]
    out[t] = {"rows": rows, "files": len(adds), "stats": stats}
print("RESULT " + json.dumps(out))
'''


def test_a_job_with_a_user_module_runs_on_the_workers_and_writes_delta_and_its_checkpoint_on_s3a_once(
        cluster, tmp_path, request):
    """The issue's must-show: ./spark-submit.sh run -m spark://... with a user Python
    module (only in the test's folder, shipped by env.python.files) writes Delta
    tables and its checkpoint to s3a on s3proxy; a plain Spark session reads them
    with per-file statistics; every row went through the function on a worker's
    executor; a rerun writes nothing."""
    from streaming_engine.runtime.session import extra_jar_paths, jar_paths
    from tests.components.s3proxy import S3Proxy

    with S3Proxy(tmp_path / "s3") as s3:
        s3.bucket("lake")
        (tmp_path / "userlib").mkdir()
        (tmp_path / "userlib" / "cluster_udfs.py").write_text(UDF)
        (tmp_path / "events").mkdir()
        settings = ", ".join(f'"{k}" = "{v}"' for k, v in s3.hadoop_conf().items())
        job = (_job().replace('checkpoint.dir = "${work}/ck"', f'checkpoint.dir = "s3a://lake/ck", {settings}')
               .replace('path = "${work}/out/${table_name}"', 'path = "s3a://lake/tables/${table_name}"'))
        assert "s3a://lake/ck" in job and "s3a://lake/tables" in job
        (tmp_path / "job.conf").write_text(job)

        first = _submit(tmp_path, cluster)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        assert "job 'on_cluster' FINISHED" in first.stdout
        assert s3.secret_key not in first.stdout + first.stderr  # the run's output masks the secret
        events = _events(tmp_path)
        shutil.rmtree(tmp_path / "events")  # the rerun's event log is its own
        (tmp_path / "events").mkdir()
        again = _submit(tmp_path, cluster)  # everything committed: the rerun writes nothing
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert (s3.data / "lake" / "ck").is_dir()  # the checkpoint lives in the bucket

        conf = {"spark.jars": ",".join(p for p in jar_paths() + extra_jar_paths(["s3a"])
                                       if "streaming-engine" not in p),
                "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
                **s3.hadoop_conf()}
        read = subprocess.run([PY, "-c", READER, json.dumps(conf), json.dumps([t.split(".")[1] for t in TABLES])],
                              capture_output=True, text=True, timeout=300, env=ENV, stdin=subprocess.DEVNULL)
        assert read.returncode == 0, read.stderr[-3000:]
        result = json.loads(next(ln for ln in read.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    places, seen = set(), set()
    for table, rows in TABLES.items():
        got = result[table.split(".")[1]]
        assert [tuple(r[:4]) for r in got["rows"]] == sorted((i, n, q, 2 * q) for i, n, q in rows), table
        places |= {r[4] for r in got["rows"]}
        seen |= {r[5] for r in got["rows"]}
        # Delta's per-file statistics, as its own writer records them
        assert got["stats"] and all({"numRecords", "minValues", "maxValues", "nullCount"} <= set(s)
                                    for s in got["stats"])
        assert min(s["minValues"]["id"] for s in got["stats"]) == 0
    workers = {str(cluster.worker_dir(i)) for i in range(2)}
    # every row went through the user function inside an executor a worker launched
    assert places and all(any(p.startswith(w + os.sep) for w in workers) for p in places), (places, workers)
    settings = assert_engine_settings_reached_the_executors(seen, [Path(p) / "stderr" for p in places])
    executors = [e for e in events if e["Event"] == "SparkListenerExecutorAdded"]
    tasks = [e for e in events if e["Event"] == "SparkListenerTaskEnd"]
    assert len(executors) == 2 and tasks
    assert {e["Task Info"]["Executor ID"] for e in tasks} <= {e["Executor ID"] for e in executors}
    assert all(e["Task End Reason"]["Reason"] == "Success" for e in tasks)
    rerun_tasks = [e for e in _events(tmp_path) if e["Event"] == "SparkListenerTaskEnd"]
    request.node.user_properties.append(
        ("ran", f"{sum(len(r) for r in TABLES.values())} rows in 2 tables on a standalone master with 2 workers, "
                f"Delta tables and checkpoint on s3a (s3proxy); {len(tasks)} tasks on executors "
                f"{sorted({e['Task Info']['Executor ID'] for e in tasks})}; the user function ran in executor(s) "
                f"{sorted({p.split(os.sep)[-1] for p in places})}; the rerun ran {len(rerun_tasks)} tasks; "
                f"{sum(r['files'] for r in result.values())} data files read back by a plain Spark session; {settings}"))


SLOW_UDF = '''
import os
import time
import uuid


def tag(df):
    # marks where and when it ran (the test kills the executor it finds here), then takes its time
    marks = os.environ["ENGINE_TEST_MARKS"]
    with open(os.path.join(marks, uuid.uuid4().hex), "w") as fh:
        fh.write(os.getcwd())
    time.sleep(1.0)
    df["doubled"] = df["qty"] * 2
    df["ran_in"] = os.getcwd()
    return df
'''


def _executor_jvm(cwd: str) -> int | None:
    """The pid of the executor JVM working in ``cwd`` (a worker's <app>/<executor id> folder)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.readlink(proc / "cwd") == cwd and b"java" in (proc / "cmdline").read_bytes().split(b"\0")[0]:
                return int(proc.name)
        except OSError:
            continue
    return None


def test_an_executor_killed_in_the_middle_of_a_job_is_replaced_and_rows_arrive_once(cluster, tmp_path, spark):
    import signal
    import time

    files, per_file = 8, 50
    (tmp_path / "in").mkdir()
    for f in range(files):
        lines = [json.dumps({"id": f * per_file + i, "name": f"n{f}-{i}", "qty": i}) for i in range(per_file)]
        (tmp_path / "in" / f"part-{f:02d}.json").write_text("\n".join(lines) + "\n")
    (tmp_path / "userlib").mkdir()
    (tmp_path / "userlib" / "cluster_udfs.py").write_text(SLOW_UDF)
    (tmp_path / "marks").mkdir()
    (tmp_path / "events").mkdir()
    (tmp_path / "job.conf").write_text(f"""
env {{ job.name = killed_executor, checkpoint.dir = "${{work}}/ck", job.retry.times = 0, python.files = [ userlib ],
      spark.executorEnv.ENGINE_TEST_MARKS = "{tmp_path / 'marks'}" }}
source {{ LocalFile {{ plugin_output = src, path = "${{work}}/in", file_format_type = json, max_files_per_trigger = 1,
                      schema = {{ fields {{ id = bigint, name = string, qty = bigint }} }} }} }}
transform {{ Python {{ plugin_input = src, plugin_output = tagged, function = "cluster_udfs:tag",
                      output_schema = {{ doubled = bigint, ran_in = string }} }} }}
sink {{ Delta {{ plugin_input = tagged, path = "${{work}}/out" }} }}
""")
    log = (tmp_path / "submit.log").open("w")  # a file, not a pipe nobody reads while the job runs
    proc = subprocess.Popen(_argv(tmp_path, cluster), stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, env=ENV)
    try:
        killed = None
        deadline = time.monotonic() + 300
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            marks = sorted((tmp_path / "marks").iterdir(), key=lambda p: p.stat().st_mtime)
            if len(marks) >= 3:  # a few batches in: kill the executor that runs the function now
                pid = _executor_jvm(marks[-1].read_text())
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed = marks[-1].read_text()
            time.sleep(0.2)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    out = (tmp_path / "submit.log").read_text()
    assert killed is not None, f"no executor was killed:\n{out[-3000:]}"
    assert proc.returncode == 0, out[-5000:]

    rows = spark.read.format("delta").load(str(tmp_path / "out")).collect()
    assert sorted((r.id, r.name, r.qty, r.doubled) for r in rows) == sorted(
        (f * per_file + i, f"n{f}-{i}", i, 2 * i) for f in range(files) for i in range(per_file))  # each row once
    events = _events(tmp_path)
    removed = [e for e in events if e["Event"] == "SparkListenerExecutorRemoved"]
    added = [e for e in events if e["Event"] == "SparkListenerExecutorAdded"]
    assert removed and len(added) >= 3, (len(removed), len(added))  # the killed one was replaced
    assert any(r.ran_in != killed for r in rows)


def test_a_driver_killed_between_commits_resumes_on_the_cluster_exactly_once(cluster, tmp_path, spark):
    """The crash test's driver kill, once on the cluster: after one table of the
    epoch committed, before the ledger; the restarted driver gets new executors
    and the tables hold every row once (append) and the latest rows (upsert)."""
    files, per_file = 3, 40
    (tmp_path / "in").mkdir()
    for f in range(files):
        lines = [json.dumps({"id": i, "name": f"v{f}", "qty": f * per_file + i}) for i in range(per_file)]
        part = tmp_path / "in" / f"part-{f:02d}.json"
        part.write_text("\n".join(lines) + "\n")
        os.utime(part, (1_700_000_000 + f, 1_700_000_000 + f))  # the file source takes files by modification time
    (tmp_path / "events").mkdir()
    (tmp_path / "job.conf").write_text("""
env { job.name = killed_driver, checkpoint.dir = "${work}/ck", job.retry.times = 0 }
source { LocalFile { plugin_output = src, path = "${work}/in", file_format_type = json, max_files_per_trigger = 1,
                     schema = { fields { id = bigint, name = string, qty = bigint }, primaryKey { name = pk, columnNames = [id] } } } }
sink {
  Delta { plugin_input = src, path = "${work}/log" }
  Delta { plugin_input = src, path = "${work}/state", save_mode = upsert }
}
""")
    killed = subprocess.run(_argv(tmp_path, cluster), capture_output=True, text=True, timeout=600, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env={**ENV, "STREAMING_ENGINE_FAULT": "sink_table_committed@1"})
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    log = spark.read.format("delta").load(str(tmp_path / "log")).count()
    assert 0 < log < files * per_file  # it died in the middle
    done = subprocess.run(_argv(tmp_path, cluster), capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, env=ENV)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = spark.read.format("delta").load(str(tmp_path / "log")).collect()
    assert sorted((r.id, r.qty) for r in rows) == sorted((i, f * per_file + i) for f in range(files) for i in range(per_file))
    state = spark.read.format("delta").load(str(tmp_path / "state")).collect()
    assert sorted((r.id, r.name) for r in state) == [(i, f"v{files - 1}") for i in range(per_file)]


def test_the_one_job_merge_runs_on_the_workers_and_equals_delta_merge_per_table(cluster, tmp_path, spark):
    """A multi-table CDC upsert (source order, tombstones) submitted to the
    cluster: its epochs go through the one-job MERGE, whose tasks read and
    write every table on the workers' executors; the same job with a Delta
    MERGE per table (STREAMING_ENGINE_DELTA_MERGE=per_table) gives the same tables."""
    from tests.merge_paths import merge_paths

    cdc = ", ".join(
        f'{{ schema = {{ table = "db.t{i}", fields {{ id = bigint, name = string }}, '
        f"primaryKey {{ name = pk, columnNames = [id] }} }}, row.num = 120, rows.per.batch = 40, "
        f"cdc = {{ key_column = id, keys = 40, update_ratio = 0.4, delete_ratio = 0.2 }} }}"
        for i in range(3))
    got = {}
    for way in ("one job", "per table"):
        work = tmp_path / way.replace(" ", "_")
        (work / "events").mkdir(parents=True)
        (work / "job.conf").write_text(f"""
env {{ job.name = merge_on_cluster, job.mode = BATCH, checkpoint.dir = "${{work}}/ck", job.retry.times = 0 }}
source {{ FakeSource {{ plugin_output = cdc, seed = 9, tables_configs = [ {cdc} ] }} }}
sink {{ Delta {{ plugin_input = cdc, path = "${{work}}/out/${{table_name}}", save_mode = upsert, source_order_column = _pos }} }}
""")
        env = {**ENV, "STREAMING_ENGINE_DELTA_MERGE": "per_table"} if way == "per table" else ENV
        done = subprocess.run(_argv(work, cluster), capture_output=True, text=True, timeout=600, cwd=work, env=env,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        paths = sum((merge_paths(work / "out" / f"t{i}") for i in range(3)), Counter())
        assert paths[way.replace("per table", "delta")] >= 3 and len(paths) == 1, (way, paths)
        got[way] = {i: sorted(tuple(r) for r in spark.read.format("delta").load(str(work / "out" / f"t{i}")).collect())
                    for i in range(3)}
    assert got["one job"] == got["per table"] and all(got["one job"].values())
