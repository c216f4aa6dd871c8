"""Jobs submitted through ./spark-submit.sh to a real YARN (Hadoop's mini
cluster: a ResourceManager and a NodeManager whose containers are real
processes; tests/components/yarn.py), in client and in cluster deploy mode.

The job's Python transform lives in a user module that exists only in the
test's folder: it must reach the executors' containers through the job's
``env.python.files``; in cluster mode the job file and the engine travel to
the application master's container too. What the job wrote is compared with
the rows the test put into it; the ResourceManager says how each application
ended, and the submitting shell gets the job's exit status."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.test_standalone import PY, ROOT, TABLES, UDF, _job, assert_engine_settings_reached_the_executors
from tests.components import wait_until
from tests.components.fixtures import kafka_broker  # noqa: F401
from tests.components.yarn import MiniYarnCluster
from tests.jvm import C1_ONLY_OPTS

pytestmark = [pytest.mark.spark, pytest.mark.components]


@pytest.fixture(scope="module")
def yarn(tmp_path_factory):
    with MiniYarnCluster(tmp_path_factory.mktemp("yarn")) as y:
        yield y


def _submit(work: Path, yarn: MiniYarnCluster, mode: str, name: str, queue: str = "etl") -> subprocess.CompletedProcess:
    argv = [str(ROOT / "spark-submit.sh"), "run", "-c", str(work / "job.conf"), "-i", f"work={work}", "-m", "yarn",
            "-e", mode, "-n", name, "--executor-python", PY, "--num-executors", "1", "--executor-memory", "512m",
            "--queue", queue,
            "--conf", "spark.yarn.maxAppAttempts=1", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", f"spark.yarn.archive={yarn.spark_archive()}",
            "--conf", f"spark.executor.extraJavaOptions={C1_ONLY_OPTS}"]
    if mode == "cluster":
        argv += ["--driver-memory", "768m", "--conf", f"spark.driver.extraJavaOptions={C1_ONLY_OPTS}"]
    env = {**os.environ, **yarn.env(), "SPARK_SUBMIT_OPTS": C1_ONLY_OPTS}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=work, env=env, stdin=subprocess.DEVNULL)


def _apps(yarn: MiniYarnCluster, name: str, count: int) -> list[dict]:
    """The ``count`` applications of that name, once each has ended (in client mode the shell may return
    before the application master has told the ResourceManager)."""
    def ended() -> list[dict]:
        apps = sorted((a for a in yarn.applications() if a["name"] == name), key=lambda a: a["id"])
        return apps if len(apps) == count and all(a["state"] in ("FINISHED", "FAILED", "KILLED") for a in apps) else []

    wait_until(lambda: bool(ended()), timeout=60, interval=0.5)
    apps = sorted((a for a in yarn.applications() if a["name"] == name), key=lambda a: a["id"])
    assert len(apps) == count, apps
    return apps


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["client", "cluster"])
def test_a_job_with_a_user_module_runs_in_yarn_containers_and_writes_delta_once(yarn, tmp_path, spark, mode):
    (tmp_path / "userlib").mkdir()
    (tmp_path / "userlib" / "cluster_udfs.py").write_text(UDF)
    (tmp_path / "job.conf").write_text(_job())
    name = f"yarn_{mode}"
    first = _submit(tmp_path, yarn, mode, name)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]

    places, seen = set(), set()
    for table, rows in TABLES.items():
        got = spark.read.format("delta").load(str(tmp_path / "out" / table.split(".")[1]))
        read = sorted(tuple(r) for r in got.select("id", "name", "qty", "doubled", "ran_in", "seen").collect())
        assert [r[:4] for r in read] == sorted((i, n, q, 2 * q) for i, n, q in rows), table
        places |= {r[4] for r in read}
        seen |= {r[5] for r in read}
    # every row went through the user function in a container the NodeManager launched
    assert places and all(f"{os.sep}container_" in p and p.startswith(str(yarn.workdir)) for p in places), places
    assert_engine_settings_reached_the_executors(seen, [yarn.container_log(Path(p).name, "stderr") for p in places])
    if mode == "cluster":  # the driver ran in the application master's container: its output is the container's
        assert "final status: SUCCEEDED" in first.stdout + first.stderr
        # and YARN users read it as they read any application's: `yarn logs` of the aggregated container logs
        (app,) = _apps(yarn, name, 1)
        logs = None
        for _ in range(60):  # the NodeManager aggregates a finished application's logs in the background
            logs = yarn.logs("-applicationId", app["id"], "-log_files", "stdout")
            if f"job '{name}' FINISHED" in logs.stdout:
                break
            time.sleep(1)
        assert f"job '{name}' FINISHED" in logs.stdout, logs.stdout[-3000:] + logs.stderr[-3000:]

    if mode == "client":  # (the driver's side is the standalone tests'; its rerun is checked there)
        assert [(a["state"], a["finalStatus"], a["queue"]) for a in _apps(yarn, name, 1)] == [
            ("FINISHED", "SUCCEEDED", "root.etl")]  # --queue reached YARN's scheduler
        return
    again = _submit(tmp_path, yarn, mode, name)  # the same job (-n is its name): everything committed, nothing written
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    for table, rows in TABLES.items():
        assert spark.read.format("delta").load(str(tmp_path / "out" / table.split(".")[1])).count() == len(rows)
    assert [(a["state"], a["finalStatus"], a["queue"]) for a in _apps(yarn, name, 2)] == [
        ("FINISHED", "SUCCEEDED", "root.etl")] * 2


@pytest.mark.timeout(600)
def test_a_failing_job_in_cluster_mode_fails_the_submitting_shell_and_the_application(yarn, tmp_path):
    (tmp_path / "job.conf").write_text(_job().replace("python.files = [ userlib ]", "").replace(
        "cluster_udfs:tag", "cluster_udfs_absent:tag"))
    proc = _submit(tmp_path, yarn, "cluster", "yarn_failing")
    assert proc.returncode != 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (app,) = _apps(yarn, "yarn_failing", 1)
    assert app["finalStatus"] == "FAILED", app
    # a queue the cluster does not have: YARN refuses the application and the shell is told which queue
    work = tmp_path / "queue"
    (work / "userlib").mkdir(parents=True)
    (work / "userlib" / "cluster_udfs.py").write_text(UDF)
    (work / "job.conf").write_text(_job())
    proc = _submit(work, yarn, "cluster", "yarn_no_queue", queue="nightly_etl")
    assert proc.returncode != 0 and "nightly_etl" in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (work / "out").exists() and not (work / "ck").exists()


SLOW_UDF = '''
import os
import time
import uuid


def tag(df):
    # marks where it ran (the test kills the executor it finds there), then takes its time
    with open(os.path.join(os.environ["ENGINE_TEST_MARKS"], uuid.uuid4().hex), "w") as fh:
        fh.write(os.getcwd())
    time.sleep(1.0)
    df["doubled"] = df["qty"] * 2
    return df
'''


def _jvm(predicate) -> int | None:
    """The pid of a java process whose command line and working directory satisfy ``predicate``."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            if b"java" in cmd[0] and predicate(b" ".join(cmd).decode(errors="replace"), os.readlink(proc / "cwd")):
                return int(proc.name)
        except OSError:
            continue
    return None


@pytest.mark.timeout(1800)  # 554 s alone on a 2.5x slower machine (2026-12-01)
def test_a_kafka_cdc_job_in_cluster_mode_survives_an_executor_kill_and_an_application_master_kill(
        yarn, kafka_broker, tmp_path, spark):
    """The issue's must-show: a Kafka -> Delta upsert job in cluster mode (job.mode = BATCH: it reads the topic
    up to its end at the start, 20 records an epoch: 12 epochs) loses an executor container (SIGKILL, mid-epoch: YARN
    gives Spark a new one) and then its application master, which holds the driver (SIGKILL: YARN starts a
    second attempt, spark.yarn.maxAppAttempts = 2, which resumes from the checkpoint). The shell gets 0, the
    application SUCCEEDED in its second attempt, and the upsert target equals the last version of every key."""
    import json
    import signal
    import time

    from confluent_kafka import Producer

    keys, versions = 60, 4
    kafka_broker.create_topic("yarn_cdc", partitions=1)
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap, "enable.idempotence": True, "acks": "all"})
    for v in range(versions):
        for k in range(keys):
            p.produce("yarn_cdc", json.dumps({"id": k, "name": f"n{k}-v{v}", "qty": k * 10 + v}).encode())
    p.flush(30)
    (tmp_path / "userlib").mkdir()
    (tmp_path / "userlib" / "cluster_udfs.py").write_text(SLOW_UDF)
    (tmp_path / "marks").mkdir()
    (tmp_path / "job.conf").write_text(f"""
env {{ job.name = yarn_cdc, job.mode = BATCH, checkpoint.dir = "${{work}}/ck", job.retry.times = 0,
      python.files = [ userlib ], spark.executorEnv.ENGINE_TEST_MARKS = "{tmp_path / 'marks'}" }}
source {{ Kafka {{ plugin_output = src, bootstrap.servers = "{kafka_broker.bootstrap}", topic = "yarn_cdc",
  start_mode = earliest, format = json, max_offsets_per_trigger = 20,
  schema = {{ table = "shop.items", fields {{ id = bigint, name = string, qty = bigint }},
             primaryKey {{ name = pk, columnNames = [id] }} }} }} }}
transform {{ Python {{ plugin_input = src, plugin_output = tagged, function = "cluster_udfs:tag",
                      output_schema = {{ doubled = bigint }} }} }}
sink {{ Delta {{ plugin_input = tagged, path = "${{work}}/out", save_mode = upsert }} }}
""")
    argv = [str(ROOT / "spark-submit.sh"), "run", "-c", str(tmp_path / "job.conf"), "-i", f"work={tmp_path}",
            "-m", "yarn", "-e", "cluster", "-n", "yarn_cdc", "--executor-python", PY, "--num-executors", "1",
            "--executor-memory", "512m", "--driver-memory", "768m", "--conf", "spark.yarn.maxAppAttempts=2",
            "--conf", "spark.sql.shuffle.partitions=2", "--conf", f"spark.yarn.archive={yarn.spark_archive()}",
            "--conf", f"spark.executor.extraJavaOptions={C1_ONLY_OPTS}",
            "--conf", f"spark.driver.extraJavaOptions={C1_ONLY_OPTS}"]
    env = {**os.environ, **yarn.env(), "SPARK_SUBMIT_OPTS": C1_ONLY_OPTS}
    log = (tmp_path / "submit.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, stdin=subprocess.DEVNULL, env=env)
    root = str(yarn.workdir)
    killed: dict[str, str] = {}
    second = None  # the same job started again beside the running application (another driver, local master)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None and len(killed) < 2:
            marks = sorted((tmp_path / "marks").iterdir(), key=lambda m: m.stat().st_mtime)
            if "executor" not in killed and len(marks) >= 2:  # an epoch or so in: the executor running the function
                pid = _jvm(lambda cmd, cwd: "CoarseGrainedExecutorBackend" in cmd and cwd == marks[-1].read_text())
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed["executor"] = marks[-1].read_text()
                    second = subprocess.Popen(
                        [str(ROOT / "spark-submit.sh"), "run", "-c", str(tmp_path / "job.conf"), "-i",
                         f"work={tmp_path}", "-n", "yarn_cdc", "-q"], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, cwd=tmp_path, stdin=subprocess.DEVNULL,
                        env={**env, "SPARK_LOCAL_IP": "127.0.0.1"})
            committed = [c for c in (tmp_path / "ck").rglob("commits/*") if c.name.isdigit()]
            if "executor" in killed and "master" not in killed and len(committed) >= 3 and second.poll() is not None:
                pid = _jvm(lambda cmd, cwd: "ApplicationMaster" in cmd and cwd.startswith(root))
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed["master"] = f"after {len(committed)} epochs"
            time.sleep(0.2)
        proc.wait(timeout=600)
        second_out = second.communicate(timeout=300)[0] if second is not None else ""
    finally:
        for p in (proc, second):
            if p is not None and p.poll() is None:
                p.kill()
        log.close()
    out = (tmp_path / "submit.log").read_text()
    assert set(killed) == {"executor", "master"}, f"killed {killed}:\n{out[-3000:]}"
    # the running application's driver holds the job's lease: a second driver of the job is refused at start
    assert second.returncode != 0 and "is running already" in second_out, second_out[-3000:]
    assert proc.returncode == 0, out[-5000:]
    (app,) = _apps(yarn, "yarn_cdc", 1)
    assert app["finalStatus"] == "SUCCEEDED", app
    attempts = yarn.rest(f"apps/{app['id']}/appattempts")["appAttempts"]["appAttempt"]
    assert len(attempts) == 2, attempts
    got = sorted(tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "out"))
                 .select("id", "name", "qty", "doubled").collect())
    last = versions - 1
    assert got == [(k, f"n{k}-v{last}", k * 10 + last, 2 * (k * 10 + last)) for k in range(keys)]
