#!/usr/bin/env python3
"""Compile the engine's own JVM classes into ``.jars/engine/streaming-engine-jvm.jar``
(driver class path: the local file system, the envelope helper) and
``.jars/streaming-engine-spark.jar`` (with the pinned jars in ``spark.jars``:
the one-job multi-table Delta write, which executors run).

Sources: ``streaming_engine/runtime/jvm/*.java``, compiled with the JDK's
``javac`` against pyspark's bundled jars (Hadoop's client API) and the
pinned Delta jars in the jars folder. Run by
``scripts/bootstrap.sh``; a no-op (offline) when the sources' hash matches the
stamp next to the jar.

The jar is an optimisation (see NioRawLocalFileSystem.java): without a JDK the
engine still runs, only local file system calls are slower, so a missing
``javac`` is a warning, not an error. A compile error is an error.

Environment: ``STREAMING_ENGINE_JARS_DIR`` overrides the jars folder,
``JAVA_HOME`` picks the JDK.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "streaming_engine" / "runtime" / "jvm"
sys.path.insert(0, str(ROOT))

from streaming_engine.runtime.session import ENGINE_JAR, ENGINE_SPARK_JAR, jars_dir  # noqa: E402

# Classes that use Delta's and Spark's SQL internals and run on executors:
# loaded through spark.jars (shipped to every executor, same class loader as
# Delta), not the driver class path.
SPARK_JAR_CLASSES = {"MultiTableWrite", "MultiTableMerge", "KafkaEpochWriter", "StoreCheckpointFileManager", "PermissiveJson"}


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def main() -> int:
    sources = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    jar = jars_dir() / ENGINE_JAR
    spark_jar = jars_dir() / ENGINE_SPARK_JAR
    stamp = jar.with_suffix(".sha256")
    if jar.is_file() and spark_jar.is_file() and stamp.is_file() and stamp.read_text().strip() == digest.hexdigest():
        return 0
    javac = _javac()
    if javac is None:
        print(
            "build_jvm: warning: javac not found (install a JDK 17 or set JAVA_HOME); "
            "the engine runs without its JVM classes, local file system calls are slower",
            file=sys.stderr,
        )
        return 0
    import pyspark

    # pyspark's jars (Spark, Hadoop's client API) and the pinned Delta jars
    classpath = os.pathsep.join([str(Path(pyspark.__file__).parent / "jars" / "*"), str(jars_dir() / "*")])
    with tempfile.TemporaryDirectory() as out:
        cmd = [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", out, *map(str, sources)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            print(f"build_jvm: error: javac failed on {SOURCES}", file=sys.stderr)
            return 1
        classes = sorted(Path(out).rglob("*.class"))
        for target, wanted in ((jar, False), (spark_jar, True)):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
                for path in classes:
                    if (path.name.split("$")[0].removesuffix(".class") in SPARK_JAR_CLASSES) == wanted:
                        zf.write(path, path.relative_to(out).as_posix())
            os.replace(tmp, target)
    stamp.write_text(digest.hexdigest() + "\n")
    print(f"build_jvm: built {jar}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
