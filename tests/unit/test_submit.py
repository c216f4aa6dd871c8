"""The spark-submit command lines spark-submit.sh builds per master and deploy
mode, the refusals, the shipped files and the Kubernetes manifest (no YARN or
Kubernetes runs here: the commands are checked as data)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml

from streaming_engine import submit
from streaming_engine.errors import ConfigError

JOB = """
env {{ job.name = nightly {extra} }}
source {{ FakeSource {{ plugin_output = s, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Console {{ plugin_input = s }} }}
"""


@pytest.fixture
def job(tmp_path):
    def write(extra: str = "") -> str:
        path = tmp_path / "job.conf"
        path.write_text(JOB.format(extra=extra))
        return str(path)

    return write


def _cmd(*argv: str) -> tuple[list[str], dict[str, str]]:
    sub, _ = submit.parse(list(argv))
    return submit.command(sub, python="/venv/bin/python")


def _opts(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def _confs(argv: list[str]) -> dict[str, str]:
    return dict(c.split("=", 1) for c in _opts(argv, "--conf"))


def _engine(argv: list[str]) -> list[str]:
    return argv[argv.index(next(a for a in argv if a.endswith("spark_entry.py"))) + 1:]


def test_local_master_gets_the_venv_python_the_local_file_system_and_the_engine_zip(job):
    argv, env = _cmd("run", "-c", job(), "-m", "local[2]")
    assert argv[argv.index("--master") + 1] == "local[2]" and argv[argv.index("--deploy-mode") + 1] == "client"
    assert argv[argv.index("--name") + 1] == "nightly"  # the job's name
    confs = _confs(argv)
    assert confs["spark.pyspark.python"] == "/venv/bin/python" == env["PYSPARK_PYTHON"]
    assert confs["spark.hadoop.fs.file.impl"].endswith("NioLocalFileSystem")
    jars = _opts(argv, "--jars")[0].split(",")
    assert any("delta-spark" in j for j in jars) and all(Path(j).is_file() for j in jars)
    (engine_zip,) = _opts(argv, "--py-files")[0].split(",")
    names = zipfile.ZipFile(engine_zip).namelist()
    assert "streaming_engine/cli.py" in names and "transforms/python_udf.py" in names
    assert not any("__pycache__" in n for n in names)
    assert _engine(argv) == ["-c", job(), "run", "-m", "local[2]", "-e", "client"]


def test_standalone_client_mode_ships_everything_and_assumes_no_shared_disk(job):
    argv, env = _cmd("run", "-c", job(), "-m", "spark://h1:7077", "--total-executor-cores", "8",
                     "--executor-memory", "4g", "-i", "day=2026-11-24", "-n", "renamed")
    confs = _confs(argv)
    assert not any(k.startswith("spark.hadoop.fs.file") or k == "spark.driver.extraClassPath" for k in confs)
    assert "spark.pyspark.python" not in confs and "PYSPARK_PYTHON" not in env  # the nodes' own python3
    assert argv[argv.index("--total-executor-cores") + 1] == "8"
    assert _engine(argv) == ["-c", job(), "run", "-i", "day=2026-11-24", "-m", "spark://h1:7077", "-e", "client",
                             "-n", "renamed"]
    argv, _ = _cmd("run", "-c", job(), "-m", "spark://h1:7077", "--executor-python", "/opt/py/bin/python3")
    assert _confs(argv)["spark.pyspark.python"] == "/opt/py/bin/python3"


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["-m", "spark://h:7077", "-e", "cluster"], "no cluster deploy mode for Python applications on a standalone"),
        (["-e", "cluster"], "a local master runs the driver in this process"),
        (["-m", "mesos://h:5050"], "is not one Spark supports"),
        (["--num-executors", "3"], "--num-executors has no effect with master 'local[2]'"),
        (["-m", "spark://h:7077", "--queue", "etl"], "--queue has no effect"),
        (["-m", "yarn", "--driver-cores", "2"], "--driver-cores only applies in cluster deploy mode"),
        (["-m", "yarn", "-e", "sideways"], "use client or cluster"),
        (["-m", "k8s://https://k:443", "-e", "cluster"], "give --image"),
        (["-m", "k8s://https://k:443", "-e", "cluster", "--image", "i:1"], "the driver pod cannot read"),
        (["--conf", "spark.x"], "is not KEY=VALUE"),
        (["-m", "yarn", "--principal", "etl@EXAMPLE.COM"], "--principal and --keytab go together"),
        (["-m", "yarn", "--keytab", "/etc/security/etl.keytab"], "--principal and --keytab go together"),
        (["-m", "yarn", "--principal", "etl@EXAMPLE.COM", "--keytab", "/nonexistent/etl.keytab"],
         "--keytab /nonexistent/etl.keytab: no such file"),
        (["-m", "yarn", "--proxy-user", "bob", "--principal", "etl@EXAMPLE.COM", "--keytab", "/nonexistent/k"],
         "--proxy-user and --principal/--keytab exclude each other"),
    ],
)
def test_what_spark_would_not_honour_is_refused_with_the_reason(job, argv, reason):
    with pytest.raises(submit.SubmitError, match=reason.replace("(", r"\(").replace("[", r"\[")):
        _cmd("run", "-c", job(), *argv)


def test_yarn_cluster_mode_ships_the_job_file_and_reads_it_by_name(job):
    argv, env = _cmd("run", "-c", job(), "-m", "yarn", "-e", "cluster", "--num-executors", "4", "--queue", "etl",
                     "--driver-cores", "2", "--archives", "env.tar.gz#env", "--executor-python", "./env/bin/python")
    assert _opts(argv, "--files") == [str(Path(job()).resolve())]
    assert _engine(argv)[:2] == ["-c", "job.conf"]
    confs = _confs(argv)
    assert confs["spark.pyspark.python"] == confs["spark.yarn.appMasterEnv.PYSPARK_PYTHON"] == "./env/bin/python"
    assert "spark.pyspark.driver.python" not in confs and "PYSPARK_DRIVER_PYTHON" not in env  # the driver is remote
    assert "--driver-java-options" not in argv  # our log4j2 file is a path on this machine
    assert [argv[argv.index(f) + 1] for f in ("--num-executors", "--queue", "--driver-cores", "--archives")] == [
        "4", "etl", "2", "env.tar.gz#env"]


def test_kubernetes_cluster_mode_uses_the_image_for_the_engine_and_its_jars(job):
    argv, _ = _cmd("run", "-c", "local:///etc/job/job.conf", "-m", "k8s://https://k:443", "-e", "cluster",
                   "--image", "reg/engine:1", "--num-executors", "2")
    assert argv[-8:] == ["local:///opt/streaming-engine/streaming_engine/spark_entry.py", "-c", "/etc/job/job.conf",
                         "run", "-m", "k8s://https://k:443", "-e", "cluster"][-8:]
    assert all(j.startswith("local:///opt/streaming-engine/.jars/") for j in _opts(argv, "--jars")[0].split(","))
    assert "--py-files" not in argv  # the engine is installed in the image
    assert _confs(argv)["spark.kubernetes.container.image"] == "reg/engine:1"


def test_jars_from_maven_let_the_cluster_resolve_the_pinned_coordinates(job):
    argv, _ = _cmd("run", "-c", job(), "-m", "yarn", "--jars-from", "maven")
    packages = _opts(argv, "--packages")[0].split(",")
    assert "io.delta:delta-spark_4.2_2.13:4.4.0" in packages
    assert [Path(j).name for j in _opts(argv, "--jars")[0].split(",")] == ["streaming-engine-spark.jar"]


def test_python_files_of_the_job_are_shipped_folders_zipped(job, tmp_path):
    (tmp_path / "lib" / "mypkg").mkdir(parents=True)
    (tmp_path / "lib" / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "lib" / "mypkg" / "f.py").write_text("def g(df): return df\n")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "mod.py").write_text("X = 1\n")
    (tmp_path / "one.py").write_text("Y = 2\n")
    argv, _ = _cmd("run", "-c", job(', python.files = ["lib/mypkg", flat, "one.py"]'), "-m", "spark://h:7077",
                   "--py-files", str(tmp_path / "one.py"))
    engine, pkg, flat, one, again = _opts(argv, "--py-files")[0].split(",")
    assert "mypkg/f.py" in zipfile.ZipFile(pkg).namelist()  # a package keeps its folder
    assert zipfile.ZipFile(flat).namelist() == ["mod.py"]  # a folder of modules: the modules at the root
    assert one == again == str(tmp_path / "one.py")


def test_a_missing_python_file_is_a_config_error_naming_it(job):
    with pytest.raises(ConfigError, match=r"python.files names .*nothere.py, which does not exist"):
        _cmd("run", "-c", job(", python.files = nothere.py"))


def test_the_kubernetes_manifest_runs_the_job_from_a_configmap(job):
    sub, _ = submit.parse(["run", "-c", job(), "--image", "reg/engine:1", "--num-executors", "3",
                           "--executor-memory", "3g", "--conf", "spark.sql.shuffle.partitions=8", "--strict"])
    m = submit.k8s_manifest(sub)
    yaml.safe_load(yaml.safe_dump(m))  # plain data
    spec = m["spec"]
    assert (m["apiVersion"], m["kind"], m["metadata"]["name"]) == ("sparkoperator.k8s.io/v1beta2", "SparkApplication",
                                                                   "nightly")
    assert (spec["type"], spec["mode"], spec["image"]) == ("Python", "cluster", "reg/engine:1")
    assert spec["mainApplicationFile"] == "local:///opt/streaming-engine/streaming_engine/spark_entry.py"
    assert spec["arguments"][:3] == ["run", "-c", "/etc/streaming-engine/job.conf"] and "--strict" in spec["arguments"]
    assert spec["volumes"] == [{"name": "job", "configMap": {"name": "nightly-job"}}]
    assert spec["driver"]["volumeMounts"] == [{"name": "job", "mountPath": "/etc/streaming-engine", "readOnly": True}]
    assert (spec["executor"]["instances"], spec["executor"]["memory"]) == (3, "3g")
    assert spec["sparkConf"]["spark.sql.shuffle.partitions"] == "8"
    jars = {Path(j).name for j in spec["deps"]["jars"]}
    assert {p.name for p in Path(submit.ROOT / ".jars").glob("*.jar")} == jars


def test_the_dockerfile_copies_what_the_image_paths_name():
    text = (submit.ROOT / "docker" / "Dockerfile").read_text()
    assert f"WORKDIR {submit.IMAGE_HOME}" in text
    for top in (*submit.ENGINE_PACKAGES, "pyproject.toml", "scripts"):
        assert f"COPY {top}" in text, top
        assert (submit.ROOT / top).exists()
    assert "fetch_jars.py" in text  # the pinned jars land in /opt/streaming-engine/.jars


@pytest.fixture
def s3a_jars(monkeypatch, tmp_path):
    """The s3a jar set as if fetched (the real fetch, 690 MB, runs in tests/cluster)."""
    from streaming_engine.runtime import session

    fetched = []

    def fake(names):
        fetched.extend(names)
        return [str(session.jars_dir() / "extras" / n / f"{n}-dep.jar") for n in names]

    monkeypatch.setattr(session, "extra_jar_paths", fake)
    return fetched


def test_a_job_naming_s3a_ships_the_s3a_jars_and_one_that_does_not_ships_none(job, s3a_jars):
    argv, _ = _cmd("run", "-c", job(', checkpoint.dir = "s3a://lake/ck"'), "-m", "spark://m:7077")
    assert any(j.endswith("extras/s3a/s3a-dep.jar") for j in _opts(argv, "--jars")[0].split(","))
    argv, _ = _cmd("run", "-c", job(), "-m", "spark://m:7077")
    assert not any("extras" in j for j in _opts(argv, "--jars")[0].split(","))
    assert s3a_jars == ["s3a"]


def test_a_job_file_only_in_the_driver_pod_names_its_jar_sets_with_extra(job, s3a_jars):
    base = ("run", "-c", "local:///etc/jobs/job.conf", "-m", "k8s://https://api:6443", "-e", "cluster",
            "--image", "registry/engine:1")
    argv, _ = _cmd(*base)  # the wrapper cannot read the job: nothing beyond the pinned jars
    assert not any("extras" in j for j in _opts(argv, "--jars")[0].split(","))
    argv, _ = _cmd(*base, "--extra", "s3a")
    jars = _opts(argv, "--jars")[0].split(",")
    assert "local:///opt/streaming-engine/.jars/extras/s3a/s3a-dep.jar" in jars
    assert all(j.startswith("local:///opt/streaming-engine/") for j in jars)
    with pytest.raises(submit.SubmitError, match=r"--extra 'gcs' is not a jar set .* known: .*s3a"):
        _cmd(*base, "--extra", "gcs")


def test_a_principal_and_its_keytab_reach_spark_submit(job, tmp_path):
    keytab = tmp_path / "etl.keytab"
    keytab.write_bytes(b"\x05\x02")
    argv, _ = _cmd("run", "-c", job(), "-m", "yarn", "-e", "cluster", "--principal", "etl@EXAMPLE.COM",
                   "--keytab", str(keytab), "--queue", "etl")
    assert [_opts(argv, f) for f in ("--principal", "--keytab", "--queue")] == [
        ["etl@EXAMPLE.COM"], [str(keytab)], ["etl"]]
