"""The spark-submit command line of a job, for every master Spark supports.

``./spark-submit.sh`` runs ``python -m streaming_engine.submit``: it reads the
wrapper's own flags (master, deploy mode, resources, shipping), passes every
other argument to the engine CLI that runs as the spark-submit driver
(``streaming_engine/spark_entry.py``), and execs pyspark's spark-submit, so
signals reach the JVM directly. ``--dry-run`` prints the command instead, and
``--k8s-manifest`` prints a SparkApplication for the Spark operator and
``--k8s-pod-template`` a driver pod template for spark-submit itself (both
mount the job file from a ConfigMap; tests/deploy validates them against
Kubernetes' and the operator's own schemas).

What each master gets (one table, :data:`MASTERS`; tests assert the commands):

* ``local[...]``: client mode only; the venv's Python; the engine's local file
  system on the driver class path (``session.local_fs_conf``).
* ``spark://host:port``: client mode only (Spark has no cluster deploy mode for
  Python applications on a standalone cluster).
* ``yarn``: client and cluster; in cluster mode the job file travels with
  ``--files`` and the engine reads it by its name in the container.
* ``k8s://https://host:port``: client and cluster; cluster mode needs the
  engine's image (``spark.kubernetes.container.image``) and a job file the
  driver pod can read (``-c local:///path/in/the/pod``, for example a mounted
  ConfigMap, as the generated manifest and pod template do).

Everywhere: the pinned jars (``--jars``, or ``--packages`` with their Maven
coordinates when the cluster resolves them itself: ``--jars-from maven``) and
the extra sets the job's paths need (``s3a://`` -> hadoop-aws; ``--extra s3a``
names one when the job file is only in the driver pod, ``-c local://``), the
engine's packages as one zip (``--py-files``) with the user's modules named by
the job (``env.python.files``) or on the command line, and the executors'
Python (``--executor-python``; local masters default to this venv, clusters to
Spark's own default, a ``python3`` on each node). Nothing assumes that the
driver and the executors share a disk: local-only settings are only applied to
local masters. A flag Spark would ignore for the master is refused with the
reason, never accepted and dropped.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shlex
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
ENGINE_PACKAGES = ("streaming_engine", "sources", "sinks", "transforms")
IMAGE_HOME = "/opt/streaming-engine"  # where docker/Dockerfile puts the engine in its image
JOB_MOUNT = "/etc/streaming-engine"  # where the job's ConfigMap is mounted in the driver pod
DRIVER_CONTAINER = "spark-kubernetes-driver"  # Spark's name for the driver container


class SubmitError(Exception):
    """A submission Spark cannot run as asked; the message says what to change."""


@dataclass(frozen=True)
class Master:
    kind: str  # local | standalone | yarn | k8s
    deploy_modes: tuple[str, ...]
    why_not_cluster: str = ""


def master_of(url: str) -> Master:
    if url == "local" or url.startswith("local["):
        return Master("local", ("client",), "a local master runs the driver in this process")
    if url.startswith("spark://"):
        return Master("standalone", ("client",),
                      "Spark has no cluster deploy mode for Python applications on a standalone cluster")
    if url == "yarn":
        return Master("yarn", ("client", "cluster"))
    if url.startswith("k8s://"):
        return Master("k8s", ("client", "cluster"))
    raise SubmitError(
        f"master {url!r} is not one Spark supports: use local[N], spark://host:port, yarn or k8s://https://host:port"
    )


# resource flags: spark-submit's name -> the masters where Spark honours it
RESOURCES: dict[str, tuple[str, ...]] = {
    "--driver-memory": ("local", "standalone", "yarn", "k8s"),
    "--driver-cores": ("yarn", "k8s"),  # cluster deploy mode only (checked below)
    "--executor-memory": ("standalone", "yarn", "k8s"),
    "--executor-cores": ("standalone", "yarn", "k8s"),
    "--num-executors": ("yarn", "k8s"),
    "--total-executor-cores": ("standalone",),
    "--queue": ("yarn",),
    "--principal": ("yarn", "k8s"),
    "--keytab": ("yarn", "k8s"),
    "--proxy-user": ("standalone", "yarn", "k8s"),
}


@dataclass
class Submission:
    master: str = "local[2]"
    deploy_mode: str = "client"
    name: str = "streaming-engine"
    name_given: bool = False
    engine_args: list[str] = field(default_factory=list)
    config: str | None = None
    variables: list[str] = field(default_factory=list)
    conf: list[str] = field(default_factory=list)
    resources: dict[str, str] = field(default_factory=dict)
    py_files: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    archives: list[str] = field(default_factory=list)
    jars: list[str] = field(default_factory=list)
    jars_from: str = "local"
    executor_python: str | None = None
    image: str | None = None
    extras: list[str] = field(default_factory=list)  # --extra: jar sets named on the command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spark-submit.sh", allow_abbrev=False, add_help=False)
    p.add_argument("-m", "--master", default="local[2]")
    p.add_argument("-e", "--deploy-mode", default="client")
    p.add_argument("-n", "--name", default=None)
    p.add_argument("-c", "--config")
    p.add_argument("-i", "--variable", action="append", default=[])
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    for flag in RESOURCES:
        p.add_argument(flag, default=None)
    p.add_argument("--py-files", action="append", default=[])
    p.add_argument("--files", action="append", default=[])
    p.add_argument("--archives", action="append", default=[])
    p.add_argument("--jars", action="append", default=[])
    p.add_argument("--jars-from", choices=("local", "maven"), default="local")
    p.add_argument("--extra", action="append", default=[])
    p.add_argument("--executor-python", default=None)
    p.add_argument("--image", default=None)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--k8s-manifest", action="store_true")
    p.add_argument("--k8s-pod-template", action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    return p


def _split(values: list[str]) -> list[str]:
    return [v for item in values for v in item.split(",") if v]


def parse(argv: Sequence[str]) -> tuple[Submission, argparse.Namespace]:
    args, rest = _parser().parse_known_args(list(argv))
    sub = Submission(
        master=args.master, deploy_mode=args.deploy_mode, name=args.name or "streaming-engine",
        name_given=args.name is not None,
        config=args.config, variables=list(args.variable), conf=list(args.conf),
        resources={f: getattr(args, f[2:].replace("-", "_")) for f in RESOURCES
                   if getattr(args, f[2:].replace("-", "_")) is not None},
        py_files=_split(args.py_files), files=_split(args.files), archives=_split(args.archives),
        jars=_split(args.jars), jars_from=args.jars_from, executor_python=args.executor_python, image=args.image,
        extras=_split(args.extra),
    )
    sub.engine_args = rest
    if args.name is None and sub.config and not sub.config.startswith("local://") and Path(sub.config).is_file():
        sub.name = _job_name(sub) or sub.name
    for kv in sub.conf:
        if "=" not in kv:
            raise SubmitError(f"--conf {kv!r} is not KEY=VALUE")
    known = extra_sets()
    for name in sub.extras:
        if name not in known:
            raise SubmitError(f"--extra {name!r} is not a jar set of pyproject.toml [tool.streaming-engine.jvm.extras]; "
                              f"known: {', '.join(sorted(known)) or 'none'}")
    return sub, args


def extra_sets() -> set[str]:
    """The names of the extra jar sets the checkout declares."""
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as fh:
        return set(tomllib.load(fh).get("tool", {}).get("streaming-engine", {}).get("jvm", {}).get("extras", {}))


def job_extras(sub: Submission) -> list[str]:
    """The extra jar sets to ship: those the job's paths need (``s3a://`` ->
    s3a; unknown when the job file lives in the driver pod, ``-c local://``)
    and those named with ``--extra``."""
    from streaming_engine.runtime.session import required_extras

    raw = _raw(sub)
    found = required_extras(raw) if raw is not None else []
    return found + [name for name in sub.extras if name not in found]


def _raw(sub: Submission):
    """The job file as loaded (None when it lives where the driver runs: local://)."""
    if not sub.config or sub.config.startswith("local://"):
        return None
    from streaming_engine.config.loader import load_file, parse_variables

    return load_file(sub.config, parse_variables(sub.variables))


def _job_name(sub: Submission) -> str | None:
    """env.job.name of the job file (its file name without extension by default)."""
    from streaming_engine.config.models import parse_env

    raw = _raw(sub)
    return parse_env(raw.env, raw.file, strict=False)[0].job_name


def conf_value(sub: Submission, key: str) -> str | None:
    found = None
    for kv in sub.conf:
        k, _, v = kv.partition("=")
        if k == key:
            found = v
    return found


def check(sub: Submission) -> Master:
    """The master, after refusing anything Spark would not honour for it."""
    m = master_of(sub.master)
    if sub.deploy_mode not in ("client", "cluster"):
        raise SubmitError(f"deploy mode {sub.deploy_mode!r}: use client or cluster")
    if sub.deploy_mode not in m.deploy_modes:
        raise SubmitError(f"deploy mode 'cluster' is not possible with master {sub.master!r}: {m.why_not_cluster}; "
                          "use -e client (the default): the driver runs where you start the job")
    for flag in sub.resources:
        if m.kind not in RESOURCES[flag]:
            where = ", ".join(RESOURCES[flag])
            raise SubmitError(f"{flag} has no effect with master {sub.master!r} (Spark honours it on: {where}); "
                              "remove it")
    res = sub.resources
    if ("--principal" in res) != ("--keytab" in res):
        raise SubmitError("--principal and --keytab go together: Spark logs in with the keytab as the principal "
                          "(and renews the job's delegation tokens with it); give both, or neither to use your "
                          "ticket cache (kinit; it expires, a job of weeks needs the keytab)")
    if "--proxy-user" in res and "--principal" in res:
        raise SubmitError("--proxy-user and --principal/--keytab exclude each other in Spark: submit as the proxy "
                          "user, or log in with the keytab")
    if "--keytab" in res and not Path(res["--keytab"]).is_file():
        raise SubmitError(f"--keytab {res['--keytab']}: no such file on this machine (spark-submit reads it here "
                          "and ships it to the cluster)")
    if "--driver-cores" in sub.resources and sub.deploy_mode != "cluster":
        raise SubmitError("--driver-cores only applies in cluster deploy mode (in client mode the driver is this "
                          "process); remove it")
    if m.kind == "k8s" and sub.deploy_mode == "cluster":
        if not (sub.image or conf_value(sub, "spark.kubernetes.container.image")):
            raise SubmitError("Kubernetes cluster mode runs the driver in a pod of the engine's image: give --image "
                              "(built from docker/Dockerfile)")
        if sub.config and not sub.config.startswith("local://"):
            raise SubmitError(
                f"Kubernetes cluster mode: the driver pod cannot read {sub.config}; put the job file in the pod "
                "(mounted ConfigMap or the image) and pass -c local:///path/in/the/pod: --k8s-pod-template prints "
                "a driver pod template that mounts it, --k8s-manifest a SparkApplication that does")
    if m.kind != "local" and sub.config is None:
        raise SubmitError("-c/--config is required")
    return m


# -- what is shipped ----------------------------------------------------------------------


def _deterministic_zip(entries: list[tuple[str, Path]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, full in entries:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, full.read_bytes())
    return buf.getvalue()


def _tree(base: Path, top: Path) -> list[tuple[str, Path]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fn in sorted(filenames):
            if not fn.endswith((".pyc", ".pyo")) and not fn.startswith("."):
                full = Path(dirpath) / fn
                out.append((str(full.relative_to(base)), full))
    return out


def _stored(data: bytes, stem: str, out_dir: Path) -> Path:
    """The zip under build/py-files, named by content (an unchanged tree reuses
    its zip; it must outlive this process, which execs spark-submit); zips
    unused for 30 days are pruned."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if path.exists():
        os.utime(path)
    else:
        fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    cutoff = time.time() - 30 * 86400
    for old in out_dir.glob(f"{stem}-*.zip"):
        if old != path and old.stat().st_mtime < cutoff:
            old.unlink()
    return path


def engine_zip(out_dir: Path | None = None) -> Path:
    entries = [e for top in ENGINE_PACKAGES for e in _tree(ROOT, ROOT / top)]
    return _stored(_deterministic_zip(entries), "engine", out_dir or ROOT / "build" / "py-files")


def python_file(path: Path, out_dir: Path | None = None) -> Path:
    """A user module as spark-submit ships it: a .py/.zip/.egg as is, a folder
    (a package, or a folder of modules) zipped so that it imports the same way."""
    if path.is_dir():
        base = path.parent if (path / "__init__.py").exists() else path
        return _stored(_deterministic_zip(_tree(base, path)), f"user-{path.name}", out_dir or ROOT / "build" / "py-files")
    return path


def job_python_files(sub: Submission) -> list[Path]:
    """``env.python.files`` of the job (resolved against its folder, checked)."""
    from streaming_engine.config.models import python_files_of

    raw = _raw(sub)
    return [] if raw is None else python_files_of(raw)


def jar_args(sub: Submission, m: Master) -> list[str]:
    """--jars/--packages: the pinned jars plus the extra sets the job's file systems need (s3a)."""
    from streaming_engine.runtime.session import ENGINE_SPARK_JAR, extra_jar_paths, jar_paths, jars_dir, pinned_coordinates

    extras = extra_jar_paths(job_extras(sub))
    if m.kind == "k8s" and sub.deploy_mode == "cluster":  # the image has them (docker/Dockerfile, EXTRAS)
        home = jars_dir()
        jars = [f"local://{IMAGE_HOME}/.jars/{Path(j).relative_to(home)}" for j in jar_paths() + extras]
        return ["--jars", ",".join(jars + sub.jars)]
    if sub.jars_from == "maven":
        own = [j for j in jar_paths() if Path(j).name == ENGINE_SPARK_JAR]  # the engine's own classes: not on Maven
        coords = pinned_coordinates()
        if not coords:
            raise SubmitError("--jars-from maven needs the pinned coordinates in the checkout's pyproject.toml")
        out = ["--packages", ",".join(coords)]
        return out + ["--jars", ",".join(own + extras + sub.jars)] if own or extras or sub.jars else out
    return ["--jars", ",".join(jar_paths() + extras + sub.jars)]


def command(sub: Submission, python: str | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, environment additions) of the spark-submit run."""
    import pyspark

    from streaming_engine.runtime.session import LOG4J2_ENV, LOG4J2_FILE, jars_dir, local_fs_conf

    m = check(sub)
    python = python or sys.executable
    spark_submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    in_image = m.kind == "k8s" and sub.deploy_mode == "cluster"
    env = {"STREAMING_ENGINE_JARS_DIR": str(jars_dir())}
    argv = [spark_submit, "--master", sub.master, "--deploy-mode", sub.deploy_mode, "--name", sub.name]
    argv += jar_args(sub, m)

    py_files = [] if in_image else [str(engine_zip())]
    py_files += [str(python_file(p)) for p in job_python_files(sub)]
    py_files += [str(python_file(Path(p))) if "://" not in p else p for p in sub.py_files]
    if py_files:
        argv += ["--py-files", ",".join(py_files)]

    files = list(sub.files)
    engine_args = list(sub.engine_args)
    config = sub.config
    if config is not None:
        if sub.deploy_mode == "cluster" and m.kind == "yarn":
            files.append(str(Path(config).resolve()))
            config = Path(config).name  # in the container's working directory
        elif config.startswith("local://"):
            config = config[len("local://"):]
        engine_args = ["-c", config, *engine_args]
    for v in sub.variables:
        engine_args += ["-i", v]
    if files:
        argv += ["--files", ",".join(files)]
    if sub.archives:
        argv += ["--archives", ",".join(sub.archives)]
    for flag, value in sub.resources.items():
        argv += [flag, value]

    if sub.deploy_mode == "client":  # the driver runs here: our quiet log4j2 configuration
        log4j2 = os.environ.get(LOG4J2_ENV) or str(LOG4J2_FILE)
        argv += ["--driver-java-options", f"-Dlog4j2.configurationFile=file:{log4j2}"]
    if m.kind == "local":
        for k, v in local_fs_conf(sub.master).items():  # the engine's local file system: local masters only
            argv += ["--conf", f"{k}={v}"]
        executor_python = sub.executor_python or python
    else:
        executor_python = sub.executor_python  # None: the cluster's default Python on each node
    confs = ["spark.ui.showConsoleProgress=false"]
    if sub.deploy_mode == "client":
        confs.append(f"spark.pyspark.driver.python={python}")
        env["PYSPARK_DRIVER_PYTHON"] = python
    if executor_python:
        confs.append(f"spark.pyspark.python={executor_python}")
        if m.kind == "yarn" and sub.deploy_mode == "cluster":
            confs.append(f"spark.yarn.appMasterEnv.PYSPARK_PYTHON={executor_python}")
    if m.kind == "local":
        env["PYSPARK_PYTHON"] = executor_python
    if sub.image:
        confs.append(f"spark.kubernetes.container.image={sub.image}")
    for c in confs + sub.conf:
        argv += ["--conf", c]
    entry = f"local://{IMAGE_HOME}/streaming_engine/spark_entry.py" if in_image else str(
        ROOT / "streaming_engine" / "spark_entry.py")
    argv.append(entry)
    argv += engine_args + ["-m", sub.master, "-e", sub.deploy_mode]
    if sub.name_given:
        argv += ["-n", sub.name]
    return argv, env


# -- Kubernetes: a driver pod template for spark-submit, a SparkApplication for the Spark operator


def _k8s_job(sub: Submission) -> tuple[str, str, str]:
    """(object name, ConfigMap name, job path in the driver pod) of a job on Kubernetes: names are
    DNS-1123 labels made from the job name, at most 53 characters (room for the "-driver" and
    "-exec-N" suffixes of pod names, which must stay within 63)."""
    if not sub.config:
        raise SubmitError("-c/--config is required")
    if sub.config.startswith("local://"):
        raise SubmitError(f"{sub.config} is already in the pod; the manifest and the pod template mount a job file "
                          "from a ConfigMap: give the job file on this machine (-c job.conf)")
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", sub.name.lower()).strip("-")[:53].strip("-") or "job"
    return slug, f"{slug}-job", f"{JOB_MOUNT}/{Path(sub.config).name}"


def _job_volume(conf_name: str) -> tuple[dict, dict]:
    """The pod volume holding the job file and the driver container's mount of it."""
    return ({"name": "job", "configMap": {"name": conf_name}},
            {"name": "job", "mountPath": JOB_MOUNT, "readOnly": True})


def k8s_pod_template(sub: Submission) -> dict:
    """A driver pod template (``spark.kubernetes.driver.podTemplateFile``) for
    ``spark-submit.sh -m k8s://... -e cluster -c local:///etc/streaming-engine/<job file>``:
    the driver container mounts the job file from the ConfigMap named after the job.
    Spark fills in the rest (image, command, resources) as for any driver pod."""
    slug, conf_name, _ = _k8s_job(sub)
    volume, mount = _job_volume(conf_name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {"app.kubernetes.io/name": "streaming-engine", "app.kubernetes.io/instance": slug}},
        "spec": {
            "serviceAccountName": "spark",
            "containers": [{"name": DRIVER_CONTAINER, "volumeMounts": [mount]}],
            "volumes": [volume],
        },
    }


def k8s_manifest(sub: Submission) -> dict:
    """A ``sparkoperator.k8s.io/v1beta2`` SparkApplication running the job in the
    engine's image, the job file mounted from a ConfigMap named after the job."""
    from streaming_engine.runtime.session import extra_jar_paths, jar_paths, jars_dir

    if not sub.image:
        raise SubmitError("--k8s-manifest needs --image (the engine's image, built from docker/Dockerfile)")
    slug, conf_name, job_path = _k8s_job(sub)
    for flag in sub.resources:
        if "k8s" not in RESOURCES[flag]:
            raise SubmitError(f"{flag} has no effect on Kubernetes; remove it")
    if job_python_files(sub) or sub.py_files:
        raise SubmitError("user Python modules on Kubernetes belong in the image (pip install them in a Dockerfile "
                          "FROM the engine's image); env.python.files and --py-files are not shipped by the manifest")
    commands = [a for a in sub.engine_args if not a.startswith("-")][:1]
    if commands and commands != ["run"]:
        raise SubmitError(f"--k8s-manifest runs the job; {commands[0]!r} is not something to run on a cluster")
    extra = [a for a in sub.engine_args if a != "run"]
    spark_conf = {"spark.ui.showConsoleProgress": "false"}
    for kv in sub.conf:
        k, _, v = kv.partition("=")
        spark_conf[k] = v
    res = sub.resources
    volume, mount = _job_volume(conf_name)
    driver = {"cores": int(res.get("--driver-cores", 1)), "memory": res.get("--driver-memory", "2g"),
              "serviceAccount": "spark", "volumeMounts": [mount]}
    executor = {"instances": int(res.get("--num-executors", 2)), "cores": int(res.get("--executor-cores", 1)),
                "memory": res.get("--executor-memory", "2g")}
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": slug},
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": sub.image,
            "imagePullPolicy": "IfNotPresent",
            "mainApplicationFile": f"local://{IMAGE_HOME}/streaming_engine/spark_entry.py",
            "arguments": ["run", "-c", job_path, "-m", "k8s://https://kubernetes.default.svc", "-e", "cluster",
                          *extra],
            "sparkVersion": __import__("pyspark").__version__,
            "deps": {"jars": [f"local://{IMAGE_HOME}/.jars/{Path(j).relative_to(jars_dir())}"
                              for j in jar_paths() + extra_jar_paths(job_extras(sub))]},
            "sparkConf": spark_conf,
            "restartPolicy": {"type": "OnFailure", "onFailureRetries": 3, "onFailureRetryInterval": 10,
                              "onSubmissionFailureRetries": 3, "onSubmissionFailureRetryInterval": 20},
            "volumes": [volume],
            "driver": driver,
            "executor": executor,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        sub, args = parse(argv)
        if args.help:
            print(__doc__)
            return 0
        if args.k8s_manifest or args.k8s_pod_template:
            import yaml

            if args.k8s_manifest and args.k8s_pod_template:
                raise SubmitError("--k8s-manifest and --k8s-pod-template are two ways to run the job: pick one")
            doc = k8s_manifest(sub) if args.k8s_manifest else k8s_pod_template(sub)
            _, conf_name, job_path = _k8s_job(sub)
            print(f"# kubectl create configmap {conf_name} --from-file={shlex.quote(sub.config)}")
            if args.k8s_manifest:
                print("# kubectl apply -f <this file>")
            else:
                print(f"# ./spark-submit.sh run -c local://{job_path} -m k8s://https://<api server> -e cluster "
                      f"--image {sub.image or '<the engine image>'} \\\n"
                      "#     --conf spark.kubernetes.driver.podTemplateFile=<this file>")
            print(yaml.safe_dump(doc, sort_keys=False), end="")
            return 0
        cmd, env = command(sub)
    except SubmitError as e:
        print(f"spark-submit.sh: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a job file that does not load, say
        from streaming_engine.errors import ConfigError

        if isinstance(e, ConfigError):
            print(f"spark-submit.sh: error: {e}", file=sys.stderr)
            return 2
        raise
    if args.dry_run:
        for k, v in sorted(env.items()):
            print(f"{k}={shlex.quote(v)} \\")
        print(shlex.join(cmd))
        return 0
    sys.stdout.flush()
    if master_of(sub.master).kind == "local":
        env.setdefault("SPARK_LOCAL_IP", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
    os.execve(cmd[0], cmd, {**os.environ, **env})
    return 0  # pragma: no cover


if __name__ == "__main__":
    raise SystemExit(main())
