#!/usr/bin/env python3
"""Fetch the JVM jars of the real servers the CDC tests start into ``.components/<name>/``.

Components (runtime jars with their transitive dependencies, from Maven Central):

* ``kafka``: an Apache Kafka broker (KRaft) with a log4j2 binding for slf4j 1.7;
* ``s3proxy``: s3proxy, an S3-compatible server (jclouds' filesystem provider);
* ``yarn``: Hadoop's mini cluster (a YARN ResourceManager, NodeManager and
  JobHistoryServer in one JVM, ``MiniHadoopClusterManager``);
* ``debezium``: the Debezium embedded engine with the PostgreSQL connector, an
  slf4j binding and Kafka's producer (kafka-clients, the version Debezium's
  dependencies bring), plus ``tests/components/java/DebeziumToKafka.java``
  compiled into ``.components/debezium/classes/``.

Layout: ``.components/<name>/libs/*.jar`` and ``.components/<name>/.stamp`` (the
coordinate list the jars were fetched for). Idempotent: when the stamp matches
nothing runs and no network is used; the Java program is recompiled only when
its source hash changes (``classes/.sha256``).

Usage: ``python scripts/fetch_components.py kafka debezium`` (no argument: all),
or ``from scripts.fetch_components import ensure; ensure("kafka")`` -> the
component's folder.

Environment: ``STREAMING_ENGINE_COMPONENTS_DIR`` overrides ``.components/``,
``MVN`` the Maven executable, ``JAVA_HOME`` the JDK (for ``javac``).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
JAVA_SOURCES = PROJECT_ROOT / "tests" / "components" / "java"

# Pinned here and only here (test infrastructure, not the engine's pins).
COMPONENTS: dict[str, tuple[str, ...]] = {
    "kafka": (
        "org.apache.kafka:kafka_2.13:4.4.0",
        # Kafka 4.x brings slf4j-api 1.7.x, hence the slf4j 1.7 binding of log4j2
        "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
        "org.apache.logging.log4j:log4j-core:2.24.3",
    ),
    "debezium": (
        "io.debezium:debezium-embedded:3.6.1.Final",
        "io.debezium:debezium-connector-postgres:3.6.1.Final",
        "org.slf4j:slf4j-simple:1.7.36",
        # org.apache.kafka:kafka-clients comes with debezium-embedded (connect-api);
        # its presence is checked after the fetch (REQUIRED_JARS).
    ),
    # an S3-compatible server (jclouds' filesystem provider) for the s3a tests
    "s3proxy": ("org.gaul:s3proxy:4.1.0:jar-with-dependencies",),  # its own dependency set (Maven's mediation breaks it)
    # a real YARN (ResourceManager, NodeManager, JobHistoryServer in one JVM: Hadoop's MiniHadoopClusterManager,
    # of the Hadoop version pyspark ships); its test classes need JUnit's Assertions at run time
    "yarn": (
        "org.apache.hadoop:hadoop-minicluster:3.5.0",
        "org.junit.jupiter:junit-jupiter-api:5.10.2",
    ),
}
# jar-name prefixes each component must contain after the fetch
REQUIRED_JARS: dict[str, tuple[str, ...]] = {
    "kafka": ("kafka_2.13-", "kafka-clients-", "log4j-core-"),
    "debezium": ("debezium-embedded-", "debezium-connector-postgres-", "kafka-clients-", "slf4j-simple-"),
    "s3proxy": ("s3proxy-",),
    "yarn": ("hadoop-mapreduce-client-jobclient-3.5.0-tests", "hadoop-yarn-server-resourcemanager-",
             "hadoop-yarn-server-nodemanager-", "junit-jupiter-api-"),
}


class FetchError(Exception):
    pass


def log(msg: str) -> None:
    print(f"fetch_components: {msg}", file=sys.stderr, flush=True)


def components_dir() -> Path:
    env = os.environ.get("STREAMING_ENGINE_COMPONENTS_DIR")
    return Path(env).expanduser().resolve() if env else PROJECT_ROOT / ".components"


def find_mvn() -> str:
    for cand in (os.environ.get("MVN"), shutil.which("mvn"), "/usr/share/maven/bin/mvn"):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    raise FetchError("Maven (mvn) not found: install Maven 3.8+ or set MVN=/path/to/mvn")


def find_javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    javac = shutil.which("javac")
    if javac is None:
        raise FetchError("javac not found: install a JDK 17+ or set JAVA_HOME")
    return javac


def temp_pom(name: str, coords: tuple[str, ...]) -> str:
    deps = []
    for coord in coords:
        group, artifact, version, *classifier = coord.split(":")
        # group:artifact:version:classifier -> that one jar (a self-contained build), without dependencies
        extra = (f"\n      <classifier>{classifier[0]}</classifier>\n      <exclusions><exclusion><groupId>*</groupId>"
                 "<artifactId>*</artifactId></exclusion></exclusions>") if classifier else ""
        deps.append(
            f"""    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>{extra}
    </dependency>"""
        )
    body = "\n".join(deps)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.streaming-engine</groupId>
  <artifactId>components-{name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def stamp_text(coords: tuple[str, ...]) -> str:
    return "\n".join((DEPENDENCY_PLUGIN, *coords)) + "\n"


@contextmanager
def _lock(base: Path, name: str):
    """One fetch per component at a time (parallel test sessions share the folder)."""
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run_maven(name: str, coords: tuple[str, ...], out: Path, workdir: Path) -> None:
    (workdir / "pom.xml").write_text(temp_pom(name, coords), encoding="utf-8")
    cmd = [
        find_mvn(),
        "-B",
        "-q",
        "-C",  # fail on checksum mismatch
        "-U",  # re-check artifacts that an earlier attempt cached as missing
        "-Dstyle.color=never",
        "-f",
        str(workdir / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={out}",
    ]
    proc = subprocess.run(
        cmd,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = ANSI.sub("", proc.stdout).strip()
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-25:])
        raise FetchError(
            f"Maven failed to fetch component {name!r} ({', '.join(coords)}), exit {proc.returncode}; "
            f"last lines:\n{tail}"
        )


def _fetch_jars(name: str, base: Path) -> Path:
    coords = COMPONENTS[name]
    home = base / name
    libs = home / "libs"
    stamp = home / ".stamp"
    want = stamp_text(coords)
    if libs.is_dir() and stamp.is_file() and stamp.read_text(encoding="utf-8") == want:
        return home
    log(f"fetching {name} ({', '.join(coords)}) with their runtime dependencies into {libs}")
    home.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    # Fetch into a scratch folder, then swap it in: an interrupted fetch never
    # leaves a half-filled libs/ behind a valid stamp.
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=home) as tmp:
        tmpdir = Path(tmp)
        dest = tmpdir / "libs"
        dest.mkdir()
        run_maven(name, coords, dest, tmpdir)
        jars = sorted(p.name for p in dest.glob("*.jar"))
        missing = [p for p in REQUIRED_JARS[name] if not any(j.startswith(p) for j in jars)]
        if missing:
            raise FetchError(f"component {name!r}: Maven's result has no {', '.join(m + '*.jar' for m in missing)}")
        if libs.exists():
            shutil.rmtree(libs)
        os.replace(dest, libs)
    stamp.write_text(want, encoding="utf-8")
    size = sum(p.stat().st_size for p in libs.glob("*.jar"))
    log(f"{name}: {len(jars)} jars, {size / 1e6:.0f} MB")
    return home


def _compile_debezium_program(home: Path) -> None:
    sources = sorted(JAVA_SOURCES.glob("*.java"))
    if not sources:
        raise FetchError(f"no Java sources in {JAVA_SOURCES}")
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    digest.update(stamp_text(COMPONENTS["debezium"]).encode())
    classes = home / "classes"
    stamp = classes / ".sha256"
    if stamp.is_file() and stamp.read_text().strip() == digest.hexdigest():
        return
    log(f"compiling {', '.join(s.name for s in sources)} into {classes}")
    with tempfile.TemporaryDirectory(prefix=".javac-", dir=home) as tmp:
        out = Path(tmp) / "classes"
        out.mkdir()
        cmd = [find_javac(), "--release", "17", "-nowarn", "-cp", str(home / "libs" / "*"), "-d", str(out)]
        proc = subprocess.run(cmd + [str(s) for s in sources], capture_output=True, text=True)
        if proc.returncode != 0:
            raise FetchError(f"javac failed on {JAVA_SOURCES}:\n{proc.stdout}{proc.stderr}")
        (out / ".sha256").write_text(digest.hexdigest() + "\n")
        if classes.exists():
            shutil.rmtree(classes)
        os.replace(out, classes)


def ensure(name: str) -> Path:
    """Make sure component ``name`` is fetched (and built); return its folder."""
    if name not in COMPONENTS:
        raise FetchError(f"unknown component {name!r} (known: {', '.join(COMPONENTS)})")
    base = components_dir()
    with _lock(base, name):
        home = _fetch_jars(name, base)
        if name == "debezium":
            _compile_debezium_program(home)
    return home


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"components ({', '.join(COMPONENTS)}); default all")
    args = parser.parse_args(argv)
    try:
        for name in args.names or list(COMPONENTS):
            ensure(name)
    except FetchError as exc:
        log(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
