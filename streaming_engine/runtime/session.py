"""SparkSession construction for the engine (local masters get extra settings; spark-submit.sh passes the rest).

Everything the JVM needs comes from the project-local ``.jars/`` folder that
``scripts/bootstrap.sh`` (``scripts/fetch_jars.py``) fills from the pins in
pyproject.toml, so a session never touches the network (no
``spark.jars.packages``). pyspark is imported lazily: importing this module
does not need a JVM.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from streaming_engine.errors import EngineError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

JARS_DIR_ENV = "STREAMING_ENGINE_JARS_DIR"
LOG4J2_ENV = "STREAMING_ENGINE_LOG4J2"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOG4J2_FILE = Path(__file__).resolve().with_name("log4j2.properties")

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

# Defaults for every session; ``conf`` passed to build_spark_session wins.
BASE_CONF: dict[str, str] = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    # 50k-100k rows per Arrow batch measured 1.28x faster than the 10k default.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    # Worker reuse off costs ~570 ms per task.
    "spark.python.worker.reuse": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    # Off: PySpark's DataFrame debugging records the Python call site of EVERY
    # column function (five py4j round trips each): a 4-transform chain took
    # 0.29 s to build instead of 0.10 s. The call sites it adds to errors would
    # point into the engine, not the user's config.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Off: with it, every commit that adds files to a small table collects the
    # table's file list into its .crc with a Spark job (a fresh-table commit
    # took 0.20 s instead of 0.08 s; 100 tables per epoch pay it 100 times).
    "spark.databricks.delta.allFilesInCrc.enabled": "false",
    # Spark's cache of compiled generated classes (static; 100 by default, in 4
    # segments): an epoch of a 4-table upsert job plans ~60 classes (MERGE,
    # statistics, the ledger) and with 100 compiled ~28 of them again every
    # epoch (~0.3-0.5 s of a ~3 s epoch). Measured: 28 -> 0.4 compiles per epoch.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # Off: with it, a union of single-partition frames is ONE partition (Spark
    # 4 zips children of the same partitioning): the per-table frames a chain
    # makes of a batch shuffled by table, unioned for a sink's one-job write of
    # every table (rows.join_tables), would be written in one task. Off, the
    # union keeps each frame's partition (a task per table, as the per-table
    # writes had). Only a union whose consumer needs its children's common
    # partitioning (an aggregate over unioned bucketed tables) shuffles again.
    "spark.sql.unionOutputPartitioning": "false",
    # Spark's pools for adaptive query stages (static) add a thread for every
    # stage submitted until the pool holds its maximum (1024 each by default;
    # idle ones end after 60 s): a job with an epoch every second held 950 JVM
    # threads after 20 epochs and kept growing. 128 each (broadcasts: Spark's
    # own 128) bound a job of weeks at ~650 threads (measured: 620-660).
    "spark.sql.shuffleExchange.maxThreadThreshold": "128",
    "spark.sql.resultQueryStage.maxThreadThreshold": "128",
    # What the driver's status store keeps of finished jobs, stages, tasks and
    # SQL executions (kept with the UI off too; Spark's defaults: 1000 jobs,
    # 1000 stages, 100,000 tasks, 1000 executions): an epoch runs 10-20 of
    # each, so a job of weeks held the last thousand epochs' worth, ~30 MB of
    # heap more after 30 epochs. A streaming job reports its progress itself.
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "2000",
    "spark.sql.ui.retainedExecutions": "50",
}

# Extra defaults for local masters (2 cores): small shuffles and small Delta
# log replays (Delta's default of 50 snapshot partitions dominates small jobs).
LOCAL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "1",
}


# The engine's own JVM classes (streaming_engine/runtime/jvm, built by
# scripts/build_jvm.py), relative to jars_dir().
ENGINE_JAR = "engine/streaming-engine-jvm.jar"
# ... and those loaded with the pinned jars through spark.jars (shipped to the
# executors, in Delta's class loader): the one-job multi-table Delta write.
ENGINE_SPARK_JAR = "streaming-engine-spark.jar"

# Hadoop's local file system through java.nio instead of one child process per
# chmod/readlink (no libhadoop.so here): about 27 process starts per Delta
# commit and per checkpoint file before. Local masters only (the jar is put on
# the driver's class path, which in local mode is also the executors').
LOCAL_FS_CONF: dict[str, str] = {
    "spark.hadoop.fs.file.impl": "io.streamingengine.hadoop.NioLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.streamingengine.hadoop.NioLocalFs",
}


# Spark's checkpoint and Delta's .crc files: under their final names on stores
# whose streams can be aborted (S3A; a rename there is a copy and a delete),
# by rename elsewhere (jvm/StoreCheckpointFileManager.java, in ENGINE_SPARK_JAR).
CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_MANAGER_CLASS = "io.streamingengine.spark.StoreCheckpointFileManager"


def checkpoint_manager_conf(jars: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The checkpoint file manager setting, when the engine's jar is among
    ``jars`` (comma-separated) and ``conf`` does not choose one itself."""
    if CHECKPOINT_MANAGER_KEY in conf or not any(Path(j).name == ENGINE_SPARK_JAR for j in jars.split(",") if j):
        return {}
    return {CHECKPOINT_MANAGER_KEY: CHECKPOINT_MANAGER_CLASS}


class JarsNotFoundError(EngineError):
    """The local JVM jars are missing: scripts/bootstrap.sh has not been run."""

    def __init__(self, detail: str):
        super().__init__("RUNTIME.NOT_AVAILABLE", {"detail": detail})

    def __reduce__(self):
        return (self.__class__, (self.params["detail"],))


def inside_spark_submit() -> bool:
    """This Python process is a driver spark-submit started (its JVM runs already)."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def jars_dir() -> Path:
    """The folder holding the pinned jars.

    ``$STREAMING_ENGINE_JARS_DIR`` if set, else ``<project root>/.jars``, else
    ``./.jars`` (for an installed, non-editable copy run from a checkout).
    """
    env = os.environ.get(JARS_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    for cand in (PROJECT_ROOT / ".jars", Path.cwd() / ".jars"):
        if cand.is_dir():
            return cand
    return PROJECT_ROOT / ".jars"


def pinned_coordinates() -> list[str] | None:
    """Maven coordinates pinned in the checkout's pyproject.toml (None if not a checkout)."""
    pyproject = PROJECT_ROOT / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        with pyproject.open("rb") as fh:
            coords = tomllib.load(fh)["tool"]["streaming-engine"]["jvm"]["artifacts"]
    except (KeyError, tomllib.TOMLDecodeError, OSError):
        return None
    return [c for c in coords if len(c.split(":")) == 3]


def _pinned_jar_names() -> list[str] | None:
    """Jar file names pinned in the checkout's pyproject.toml (None if not a checkout)."""
    coords = pinned_coordinates()
    return None if coords is None else [f"{c.split(':')[1]}-{c.split(':')[2]}.jar" for c in coords]


def jar_paths() -> list[str]:
    """Absolute paths of the jars to put on the Spark classpath (sorted).

    Raises JarsNotFoundError when the folder is missing or lacks a pinned jar.
    """
    folder = jars_dir()
    hint = "run scripts/bootstrap.sh (it fetches the pinned jars)"
    if os.environ.get(JARS_DIR_ENV):
        hint += f", or fix {JARS_DIR_ENV}"
    if not folder.is_dir():
        raise JarsNotFoundError(f"the JVM jars folder {folder} does not exist; {hint}")
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not jars:
        raise JarsNotFoundError(f"the JVM jars folder {folder} holds no jars; {hint}")
    if not os.environ.get(JARS_DIR_ENV):
        pinned = _pinned_jar_names()
        present = {Path(j).name for j in jars}
        missing = [n for n in pinned or [] if n not in present]
        if missing:
            raise JarsNotFoundError(
                f"{folder} lacks {', '.join(missing)} pinned in pyproject.toml; {hint}"
            )
    return jars


def engine_jar() -> Path | None:
    """The engine's compiled JVM classes, when scripts/bootstrap.sh built them."""
    jar = jars_dir() / ENGINE_JAR
    return jar if jar.is_file() else None


def local_fs_conf(master: str) -> dict[str, str]:
    """Settings that put the engine's local file system on a JVM this process
    launches: the jar on the driver class path and the two Hadoop settings.
    Empty for cluster masters, without the jar, and inside spark-submit (the
    JVM runs already; ./spark-submit.sh passes them on its command line)."""
    jar = engine_jar()
    if jar is None or not is_local_master(master) or inside_spark_submit():
        return {}
    return {"spark.driver.extraClassPath": str(jar), **LOCAL_FS_CONF}


def _log4j2_option(existing: str) -> str:
    """Driver JVM options with our log4j2 config, unless one is configured already."""
    if "log4j2.configurationFile" in existing or "log4j.configurationFile" in existing:
        return existing
    path = os.environ.get(LOG4J2_ENV) or (str(LOG4J2_FILE) if LOG4J2_FILE.is_file() else "")
    if not path:
        return existing
    option = f"-Dlog4j2.configurationFile={Path(path).resolve().as_uri()}"
    return f"{option} {existing}".strip()


# URI scheme -> the extra jar set (pyproject.toml [tool.streaming-engine.jvm.extras]) it needs
SCHEME_EXTRAS = {"s3a": "s3a"}


def required_extras(raw: Any) -> list[str]:
    """The extra jar sets a job needs: one per file system scheme its env or
    options name (``s3a://...`` anywhere -> ``s3a``)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.update(extra for scheme, extra in SCHEME_EXTRAS.items() if f"{scheme}://" in value)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(raw.env)
    for block in raw.blocks:
        walk(block.options)
    return sorted(found)


def extra_jar_paths(names: Sequence[str]) -> list[str]:
    """The jars of extra sets ``names``, fetched on first use (scripts/fetch_jars.py --extra)."""
    out: list[str] = []
    for name in names:
        folder = jars_dir() / "extras" / name
        if not any(folder.glob("*.jar")) or not (folder / ".stamp").is_file():
            script = PROJECT_ROOT / "scripts" / "fetch_jars.py"
            if not script.is_file():
                raise JarsNotFoundError(f"the {name} jars are not in {folder} and this is not a checkout that can "
                                        f"fetch them (scripts/fetch_jars.py --extra {name})")
            proc = subprocess.run([sys.executable, str(script), "--extra", name], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise JarsNotFoundError(f"could not fetch the {name} jars: {proc.stderr.strip()[-2000:]}")
        out += sorted(str(p) for p in folder.glob("*.jar"))
    return out


def session_conf(master: str, conf: Mapping[str, str] | None = None, extras: Sequence[str] = ()) -> dict[str, str]:
    """The full configuration build_spark_session applies (without the master)."""
    merged = dict(BASE_CONF)
    if is_local_master(master):
        merged.update(LOCAL_CONF)
    user = {k: str(v) for k, v in (conf or {}).items()}
    if inside_spark_submit():  # spark-submit shipped the jars (paths of the submitting machine) and started the JVM
        merged.update(user)
        return merged
    jars = jar_paths() + extra_jar_paths(extras)
    if user.get("spark.jars"):
        jars = jars + [j for j in user["spark.jars"].split(",") if j and j not in jars]
    fs = local_fs_conf(master)
    merged.update(fs)
    merged.update(user)
    cp = "spark.driver.extraClassPath"
    if fs and user.get(cp):
        merged[cp] = f"{fs[cp]}{os.pathsep}{user[cp]}"
    merged["spark.jars"] = ",".join(jars)
    merged.update(checkpoint_manager_conf(merged["spark.jars"], user))
    merged["spark.driver.extraJavaOptions"] = _log4j2_option(
        merged.get("spark.driver.extraJavaOptions", "")
    )
    if not merged["spark.driver.extraJavaOptions"]:
        del merged["spark.driver.extraJavaOptions"]
    return merged


def build_spark_session(
    app_name: str,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    extras: Sequence[str] = (),
) -> "SparkSession":
    """Build (or return the already running) SparkSession with Delta and Kafka.

    * ``spark.jars`` = the pinned jars in ``.jars/`` (JarsNotFoundError if absent);
    * Delta SQL extension and catalog;
    * PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON = this interpreter unless set, so
      Python workers get the venv (with pandas/pyarrow), not the system python3;
    * Arrow batches of 50,000 rows, Python worker reuse, no UI/progress bars,
      log level WARN, and for local masters 4 shuffle partitions and
      SPARK_LOCAL_IP=127.0.0.1 (unless set).

    ``conf`` overrides any of these (``spark.jars`` entries are added to ours).
    JVM-level settings only take effect when this call starts the JVM.
    """
    merged = session_conf(master, conf, extras)

    if not inside_spark_submit():  # spark-submit.sh chose the executors' Python (for clusters: theirs, not ours)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if is_local_master(master):
        # Avoids the "hostname resolves to a loopback address" warning and
        # binding a local-only driver to an external interface.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    # pyspark 4.2 warns once that pandas >= 3 is not fully supported; measured
    # results are correct (missing strings arrive as NaN), so keep logs clean.
    warnings.filterwarnings(
        "ignore", message=r"PySpark does not yet fully support pandas", category=FutureWarning
    )

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if inside_spark_submit():
        # spark-submit's master (the same through spark-submit.sh) and its
        # --conf settings hold: the engine's defaults and the job's env fill in
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the running JVM's gateway: SparkConf() reads its settings
        submitted = SparkConf()
        given = {k: v for k, v in submitted.getAll()}
        merged.update(checkpoint_manager_conf(given.get("spark.jars", ""), {**given, **merged}))
        merged = {k: v for k, v in merged.items() if not submitted.contains(k)}
    else:
        builder = builder.master(master)
    for key, value in merged.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(merged.get("spark.log.level", "WARN"))
    return spark


def add_python_files(spark: "SparkSession", raw: Any) -> None:
    """Ship the job's ``env.python.files`` to the executors (and this driver)
    with SparkContext.addPyFile, folders zipped. Under spark-submit,
    spark-submit.sh shipped them already as --py-files (in cluster mode the
    paths of the submitting machine do not exist here)."""
    if inside_spark_submit():
        return
    from streaming_engine.config.models import python_files_of
    from streaming_engine.submit import python_file

    for path in python_files_of(raw):
        spark.sparkContext.addPyFile(str(python_file(path)))


def release_session(session: "SparkSession") -> None:
    """Unregister what Spark registered for ``session`` on the SparkContext's
    listener bus: the session's StreamingQueryListenerBus, added when its first
    query started and never removed by Spark (every session would stay
    reachable, and each Spark event be handed to all of them: a driver running
    job after job, as the benchmark or a job server does, would grow without
    bound); and the sessions the Delta sink cloned from it for MERGEs with
    a txn id; and the file lists of the one-job MERGE. Call it once the session's queries have stopped."""
    from streaming_engine.checkpoint.delta_merge import forget
    from streaming_engine.checkpoint.delta_txn import forget_sessions

    forget_sessions(session)
    forget(session)  # the one-job MERGE's file lists
    jsession = session._jsparkSession  # type: ignore[attr-defined]
    try:
        jsession.sparkContext().listenerBus().removeListener(jsession.streams().listenerBus())
    except Exception as e:  # bookkeeping: a run that ended must not fail on it (a Spark without these members)
        import logging

        logging.getLogger("streaming_engine.runtime").warning(
            "could not unregister a pipeline session's streaming listener bus", extra={"error": str(e)[:300]})
