#!/usr/bin/env python3
"""Fetch the JVM jars pinned in pyproject.toml into the project-local ``.jars/``.

The artifact list is ``[tool.streaming-engine.jvm].artifacts`` (``group:artifact:version``),
the one place JVM versions are pinned. Exactly those jars are copied, without
transitive dependencies (the pyspark distribution ships the rest), using Maven
(``maven-dependency-plugin``, checksums enforced) into ``.jars/``.

* Idempotent: when every pinned jar is already present nothing runs and no
  network is used. Jars in ``.jars/`` that are no longer pinned are removed
  (an old kafka-clients next to a new one would be a classpath conflict).
* On every run the poms of the pinned artifacts (kept in ``.jars/.poms/``) are
  checked for consistency (offline):
  if a pinned artifact declares a compile dependency on another pinned
  artifact, the versions must agree (e.g. spark-sql-kafka -> kafka-clients,
  commons-pool2; delta-spark -> delta-storage), and a ``delta-spark_X.Y_2.13``
  artifact must match the installed pyspark X.Y.
* ``--verify`` prints the checks' result and also lists compile dependencies
  that neither the pins nor pyspark ship.

Environment: ``STREAMING_ENGINE_JARS_DIR`` overrides the output folder,
``MVN`` the Maven executable.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = PROJECT_ROOT / "pyproject.toml"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class FetchError(Exception):
    pass


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str

    @classmethod
    def parse(cls, coord: str) -> "Artifact":
        parts = coord.strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise FetchError(
                f"bad artifact {coord!r} in pyproject.toml: expected group:artifact:version"
            )
        return cls(*parts)

    @property
    def key(self) -> str:
        return f"{self.group}:{self.name}"

    @property
    def jar(self) -> str:
        return f"{self.name}-{self.version}.jar"

    @property
    def pom(self) -> str:
        return f"{self.name}-{self.version}.pom"

    def __str__(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"


def log(msg: str) -> None:
    print(f"fetch_jars: {msg}", file=sys.stderr, flush=True)


# built by scripts/build_jvm.py into the same folder (it must sit beside Delta
# in spark.jars): not a pinned artifact, never removed as stale
BUILT_JARS = {"streaming-engine-spark.jar"}


def jars_dir() -> Path:
    env = os.environ.get("STREAMING_ENGINE_JARS_DIR")
    return Path(env).expanduser().resolve() if env else PROJECT_ROOT / ".jars"


def load_artifacts(pyproject: Path = PYPROJECT) -> list[Artifact]:
    with pyproject.open("rb") as fh:
        data = tomllib.load(fh)
    try:
        coords = data["tool"]["streaming-engine"]["jvm"]["artifacts"]
    except KeyError:
        raise FetchError(f"{pyproject}: missing [tool.streaming-engine.jvm] artifacts") from None
    artifacts = [Artifact.parse(c) for c in coords]
    seen: dict[str, Artifact] = {}
    for a in artifacts:
        if a.key in seen:
            raise FetchError(f"{a.key} is pinned twice ({seen[a.key].version}, {a.version})")
        seen[a.key] = a
    return artifacts


def find_mvn() -> str:
    for cand in (os.environ.get("MVN"), shutil.which("mvn"), "/usr/share/maven/bin/mvn"):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    raise FetchError("Maven (mvn) not found: install Maven 3.8+ or set MVN=/path/to/mvn")


def temp_pom(artifacts: list[Artifact]) -> str:
    deps = "\n".join(
        f"""    <dependency>
      <groupId>{a.group}</groupId>
      <artifactId>{a.name}</artifactId>
      <version>{a.version}</version>
    </dependency>"""
        for a in artifacts
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.streaming-engine</groupId>
  <artifactId>fetch-jars</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def run_maven(artifacts: list[Artifact], out: Path, workdir: Path, transitive: bool = False) -> None:
    (workdir / "pom.xml").write_text(temp_pom(artifacts), encoding="utf-8")
    cmd = [
        find_mvn(),
        "-B",  # batch mode: no prompts, no colour
        "-q",
        "-C",  # fail on checksum mismatch
        "-U",  # re-check artifacts that an earlier attempt cached as missing
        "-Dstyle.color=never",
        "-f",
        str(workdir / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime" if transitive else "-DexcludeTransitive=true",
        "-Dmdep.copyPom=true",
        "-Dmdep.overWriteReleases=true",
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
    # Maven 3.8 prints bare ANSI resets even with -B -q; keep the output only for errors.
    output = ANSI.sub("", proc.stdout).strip()
    if proc.returncode != 0:
        raise FetchError(
            "Maven failed to fetch "
            + ", ".join(map(str, artifacts))
            + f" (exit {proc.returncode}):\n{output}"
        )


def pom_dependencies(pom: Path) -> list[tuple[str, str, str, str, bool]]:
    """(group, artifact, version, scope, optional) of a pom's direct dependencies."""
    root = ET.parse(pom).getroot()

    def text(node: ET.Element, tag: str, default: str = "") -> str:
        child = node.find(f"m:{tag}", POM_NS)
        return child.text.strip() if child is not None and child.text else default

    return [
        (
            text(d, "groupId"),
            text(d, "artifactId"),
            text(d, "version"),
            text(d, "scope", "compile"),
            text(d, "optional", "false") == "true",
        )
        for d in root.findall("m:dependencies/m:dependency", POM_NS)
    ]


def pyspark_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("pyspark")
    except PackageNotFoundError:
        return None


def pyspark_jar_names() -> set[str]:
    try:
        import importlib.util

        spec = importlib.util.find_spec("pyspark")
    except ImportError:
        spec = None
    if spec is None or not spec.origin:
        return set()
    jars = Path(spec.origin).parent / "jars"
    return {p.name for p in jars.glob("*.jar")}


def check_consistency(artifacts: list[Artifact], poms: Path, report_missing: bool) -> list[str]:
    """Return a list of problems; print informational notes when report_missing."""
    problems: list[str] = []
    pinned = {a.key: a for a in artifacts}

    spark = pyspark_version()
    if spark:
        mm = ".".join(spark.split(".")[:2])
        for a in artifacts:
            m = re.fullmatch(r"delta-spark_(\d+\.\d+)_(\d+\.\d+)", a.name)
            if a.group == "io.delta" and m and m.group(1) != mm:
                problems.append(f"{a}: built for Spark {m.group(1)}, but pyspark is {spark}")
            m = re.fullmatch(r"spark-[\w.-]+_(\d+\.\d+)", a.name)
            if a.group == "org.apache.spark" and m and a.version != spark:
                problems.append(f"{a}: Spark module version differs from pyspark {spark}")

    shipped = pyspark_jar_names()
    for a in artifacts:
        pom = poms / a.pom
        if not pom.is_file():
            if report_missing:
                log(f"note: no pom for {a} in {poms}; skipped its dependency check")
            continue
        for group, name, version, scope, optional in pom_dependencies(pom):
            if scope not in ("compile", "runtime") or optional:
                continue
            other = pinned.get(f"{group}:{name}")
            if other is not None:
                if version and other.version != version:
                    problems.append(
                        f"{a} declares {group}:{name}:{version}, but pyproject pins {other.version}"
                    )
            elif report_missing and not any(j.startswith(f"{name}-") for j in shipped):
                log(f"note: {a} depends on {group}:{name}:{version} ({scope}), "
                    "which is neither pinned nor shipped with pyspark")
    return problems


def fetch(check_only: bool = False, verify: bool = False) -> int:
    artifacts = load_artifacts()
    out = jars_dir()
    wanted = {a.jar for a in artifacts}
    poms = out / ".poms"

    present = {p.name for p in out.glob("*.jar")} if out.is_dir() else set()
    missing = [a for a in artifacts if a.jar not in present or (out / a.jar).stat().st_size == 0]
    stale = sorted(present - wanted - BUILT_JARS)

    if check_only:
        for a in missing:
            log(f"missing {a.jar}")
        for name in stale:
            log(f"not pinned: {name}")
        return 1 if missing or stale else 0

    for name in stale:
        (out / name).unlink()
        log(f"removed {name} (no longer pinned)")
    if poms.is_dir():
        for p in poms.glob("*.pom"):
            if p.name not in {a.pom for a in artifacts}:
                p.unlink()

    if missing:
        log(f"fetching {len(missing)} jar(s) from Maven Central into {out}")
        out.mkdir(parents=True, exist_ok=True)
        poms.mkdir(exist_ok=True)
        # Fetch into a scratch dir next to .jars, then rename into place, so an
        # interrupted fetch never leaves a truncated jar that looks present.
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=out) as tmp:
            tmpdir = Path(tmp)
            dest = tmpdir / "out"
            dest.mkdir()
            run_maven(missing, dest, tmpdir)
            for a in missing:
                src = dest / a.jar
                if not src.is_file():
                    raise FetchError(f"Maven did not produce {a.jar}")
                if (dest / a.pom).is_file():
                    os.replace(dest / a.pom, poms / a.pom)
                os.replace(src, out / a.jar)

    if not verify:
        # Offline and cheap (reads .jars/.poms), so it runs every time: a wrong
        # pin keeps failing until pyproject.toml is fixed.
        problems = check_consistency(artifacts, poms, report_missing=False)
        if problems:
            raise FetchError(
                "pinned JVM artifacts are inconsistent (fix [tool.streaming-engine.jvm] "
                "in pyproject.toml):\n  " + "\n  ".join(problems)
            )
    else:
        problems = check_consistency(artifacts, poms, report_missing=True)
        for p in problems:
            log(f"MISMATCH: {p}")
        if problems:
            return 1
        log(f"ok: {len(artifacts)} pinned jars present in {out} and consistent")
    return 0


def load_extras(pyproject: Path = PYPROJECT) -> dict[str, list[Artifact]]:
    """``[tool.streaming-engine.jvm.extras]``: jar sets fetched on first use, with their dependencies."""
    with pyproject.open("rb") as fh:
        data = tomllib.load(fh)
    extras = data.get("tool", {}).get("streaming-engine", {}).get("jvm", {}).get("extras", {})
    return {name: [Artifact.parse(c) for c in coords] for name, coords in extras.items()}


_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.]*(?:-[A-Za-z]\w*)?\.jar$")


def fetch_extra(name: str) -> Path:
    """Fetch extra jar set ``name`` (e.g. ``s3a``: hadoop-aws and the AWS SDK
    bundle) with its runtime dependencies into ``.jars/extras/<name>/``, minus
    artifacts pyspark ships itself; a no-op when its stamp matches."""
    extras = load_extras()
    if name not in extras:
        raise FetchError(f"unknown extra {name!r} (pinned: {', '.join(sorted(extras)) or 'none'})")
    artifacts = extras[name]
    out = jars_dir() / "extras" / name
    stamp = out / ".stamp"
    want = "\n".join([DEPENDENCY_PLUGIN, *map(str, artifacts)]) + "\n"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == want and any(out.glob("*.jar")):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text(encoding="utf-8") == want and any(out.glob("*.jar")):
            return out
        log(f"fetching extra {name!r} ({', '.join(map(str, artifacts))}) with its dependencies into {out}")
        shipped = {m.group("name") for j in pyspark_jar_names() if (m := _VERSIONED.match(j))}
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=out.parent) as tmp:
            dest = Path(tmp) / "out"
            dest.mkdir()
            run_maven(artifacts, dest, Path(tmp), transitive=True)
            for jar in dest.glob("*.jar"):
                m = _VERSIONED.match(jar.name)
                if m and m.group("name") in shipped:  # pyspark has its own version: keep one on the class path
                    jar.unlink()
            for a in artifacts:
                if not (dest / a.jar).is_file():
                    raise FetchError(f"Maven did not produce {a.jar}")
            (dest / ".stamp").write_text(want, encoding="utf-8")
            if out.exists():
                shutil.rmtree(out)
            os.replace(dest, out)
    size = sum(p.stat().st_size for p in out.glob("*.jar"))
    log(f"extra {name!r}: {len(list(out.glob('*.jar')))} jars, {size / 1e6:.0f} MB")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--check", action="store_true", help="only report missing or stale jars (exit 1 if any)"
    )
    group.add_argument(
        "--verify",
        action="store_true",
        help="after fetching, check the pins against the poms and pyspark, with notes",
    )
    group.add_argument("--extra", metavar="NAME",
                       help="fetch an extra jar set of [tool.streaming-engine.jvm.extras] (e.g. s3a) and print its folder")
    args = parser.parse_args(argv)
    try:
        if args.extra:
            print(fetch_extra(args.extra))
            return 0
        return fetch(check_only=args.check, verify=args.verify)
    except FetchError as exc:
        log(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
