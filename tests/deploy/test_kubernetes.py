"""What a Kubernetes user runs, checked against the real schemas (no cluster
can run here): the driver pod template (``--k8s-pod-template``) against
Kubernetes' own OpenAPI (the strict JSON schemas of the ``kubernetes-validate``
wheel, unknown fields refused as ``kubectl apply --validate=strict`` does) and
through Spark's own template loader; the SparkApplication (``--k8s-manifest``)
against the Kubeflow Spark operator's CRD (tests/deploy/schemas), made strict
the same way. Every validator is first shown to refuse a broken document, so a
green run cannot come from a validator that accepts anything."""

from __future__ import annotations

import copy
import gzip
import re
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from streaming_engine import submit

ROOT = Path(__file__).resolve().parents[2]
CRD = Path(__file__).with_name("schemas") / "sparkoperator.k8s.io_sparkapplications-v2.5.2.yaml.gz"
KUBERNETES = ("1.30.0", "1.37.0")  # an older release still in use and the newest the wheel knows
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

JOB = """
env { job.name = "Nightly Orders: EU", parallelism = 2 }
source { FakeSource { plugin_output = s, schema = { fields { id = bigint } } } }
sink { Console { plugin_input = s } }
"""


def _print(*argv: str) -> tuple[str, list[str]]:
    """What ./spark-submit.sh prints: (the YAML document, its leading comment lines)."""
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "streaming_engine.submit", *argv],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    comments = [line for line in proc.stdout.splitlines() if line.startswith("#")]
    return proc.stdout, comments


@pytest.fixture
def job_file(tmp_path) -> Path:
    path = tmp_path / "orders job.conf"
    path.write_text(JOB)
    return path


def _strict(schema: dict) -> dict:
    """The CRD's structural schema as the API server applies it with strict field validation:
    an object that lists its properties takes no others (unless the schema says to keep unknown fields)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return schema


@pytest.fixture(scope="module")
def spark_application_schema() -> dict:
    crd = yaml.safe_load(gzip.decompress(CRD.read_bytes()))
    assert crd["spec"]["names"]["kind"] == "SparkApplication"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return _strict(version["schema"]["openAPIV3Schema"])


def _crd_errors(schema: dict, doc: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(schema)
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc))


def test_the_driver_pod_template_is_a_valid_pod_for_kubernetes(job_file):
    text, comments = _print("run", "-c", str(job_file), "--image", "registry/engine:1", "--k8s-pod-template")
    pod = yaml.safe_load(text)
    for version in KUBERNETES:
        assert kubernetes_validate.validate(pod, version, strict=True) == version.rsplit(".", 1)[0]  # its schemas
    # the validator refuses what the API server would: a misspelled field, a wrong type
    broken = copy.deepcopy(pod)
    broken["spec"]["containers"][0]["volumeMount"] = broken["spec"]["containers"][0].pop("volumeMounts")
    with pytest.raises(kubernetes_validate.ValidationError, match="volumeMount"):
        kubernetes_validate.validate(broken, KUBERNETES[-1], strict=True)
    broken = copy.deepcopy(pod)
    broken["spec"]["volumes"][0]["configMap"]["defaultMode"] = "0644"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES[-1], strict=True)

    # what it says: the job file, from the ConfigMap the printed kubectl line makes, where -c points
    (mount,) = pod["spec"]["containers"][0]["volumeMounts"]
    (volume,) = pod["spec"]["volumes"]
    assert volume["name"] == mount["name"] and mount["mountPath"] == submit.JOB_MOUNT
    name = volume["configMap"]["name"]
    assert DNS1123_LABEL.match(name) and name == "nightly-orders-eu-job"
    assert comments[0] == f"# kubectl create configmap {name} --from-file='{job_file}'"
    assert f"-c local://{submit.JOB_MOUNT}/{job_file.name} " in comments[1]  # the key kubectl gives the file


@pytest.mark.spark
def test_spark_reads_the_pod_template_into_the_driver_pod_it_builds(job_file, tmp_path, spark):
    """Spark's own loader (KubernetesUtils.loadPodFromTemplate, in pyspark's spark-kubernetes jar, the
    code a driver submission runs with spark.kubernetes.driver.podTemplateFile) finds the driver
    container by Spark's name and keeps the job's volume and mount."""
    text, _ = _print("run", "-c", str(job_file), "--k8s-pod-template")
    template = tmp_path / "driver-pod.yaml"
    template.write_text(text)
    jvm = spark._jvm
    client = jvm.io.fabric8.kubernetes.client.KubernetesClientBuilder().build()  # no connection is made
    try:
        pod = jvm.org.apache.spark.deploy.k8s.KubernetesUtils.loadPodFromTemplate(
            client, str(template), jvm.scala.Option.apply(submit.DRIVER_CONTAINER), jvm.org.apache.spark.SparkConf(False))
    finally:
        client.close()
    container = pod.container()
    assert container.getName() == submit.DRIVER_CONTAINER
    mounts = [(m.getName(), m.getMountPath(), m.getReadOnly()) for m in container.getVolumeMounts()]
    assert mounts == [("job", submit.JOB_MOUNT, True)]
    volumes = [(v.getName(), v.getConfigMap().getName()) for v in pod.pod().getSpec().getVolumes()]
    assert volumes == [("job", "nightly-orders-eu-job")]
    assert pod.pod().getSpec().getServiceAccountName() == "spark"
    # the driver container is the template's, not an extra one Spark adds beside it
    assert [c.getName() for c in pod.pod().getSpec().getContainers()] == []


def test_the_spark_application_is_valid_for_the_spark_operators_crd(job_file, spark_application_schema):
    text, comments = _print("run", "-c", str(job_file), "--image", "registry/engine:1", "--num-executors", "3",
                            "--executor-memory", "3g", "--driver-cores", "2", "--conf",
                            "spark.sql.shuffle.partitions=8", "--k8s-manifest", "--strict")
    app = yaml.safe_load(text)
    assert _crd_errors(spark_application_schema, app) == []
    assert DNS1123_LABEL.match(app["metadata"]["name"]) and len(app["metadata"]["name"]) <= 53
    assert comments[0].startswith(f"# kubectl create configmap {app['spec']['volumes'][0]['configMap']['name']} ")

    # the strict schema refuses what the operator's API would
    broken = copy.deepcopy(app)
    broken["spec"]["driver"]["serviceAcount"] = broken["spec"]["driver"].pop("serviceAccount")
    assert any("serviceAcount" in e for e in _crd_errors(spark_application_schema, broken))
    broken = copy.deepcopy(app)
    broken["spec"]["executor"]["instances"] = "3"
    assert any(e.startswith("spec.executor.instances") for e in _crd_errors(spark_application_schema, broken))
    broken = copy.deepcopy(app)
    broken["spec"]["sparkConf"]["spark.executor.instances"] = 3  # sparkConf values are strings
    assert _crd_errors(spark_application_schema, broken)
    broken = copy.deepcopy(app)
    broken["spec"]["mode"] = "local"
    assert any(e.startswith("spec.mode") for e in _crd_errors(spark_application_schema, broken))


def test_a_long_or_odd_job_name_still_makes_valid_kubernetes_names(tmp_path, spark_application_schema):
    path = tmp_path / "job.conf"
    path.write_text(JOB.replace("Nightly Orders: EU", "__" + "Ünïcode and a very long job name " * 4 + "--"))
    app = yaml.safe_load(_print("run", "-c", str(path), "--image", "r/e:1", "--k8s-manifest")[0])
    name = app["metadata"]["name"]
    assert DNS1123_LABEL.match(name) and len(name) <= 53, name
    assert _crd_errors(spark_application_schema, app) == []
    pod = yaml.safe_load(_print("run", "-c", str(path), "--k8s-pod-template")[0])
    assert kubernetes_validate.validate(pod, KUBERNETES[-1], strict=True)


def test_a_job_file_already_in_the_pod_is_refused_with_the_way_out(tmp_path):
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "streaming_engine.submit", "run", "-c",
                           "local:///etc/jobs/job.conf", "--k8s-pod-template"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert "is already in the pod" in proc.stderr and "-c job.conf" in proc.stderr
