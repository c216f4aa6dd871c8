#!/usr/bin/env bash
# Idempotent project set-up, run by ./scripts/test.sh and ./spark-submit.sh:
#   1. create .venv with python3.11 if missing;
#   2. pip install -e '.[test]' when pyproject.toml's [project] (or build
#      settings) changed since the last install (a hash stamp is kept in .venv/);
#   3. scripts/fetch_jars.py: the pinned JVM jars into .jars/;
#   4. scripts/build_jvm.py: the engine's own JVM classes into .jars/engine/;
#   5. scripts/compile_pyspark_zips.py: bytecode into the pyspark.zip every
#      Python worker imports pyspark from (it compiled pyspark at each start).
# Silent when there is nothing to do, and then needs no network. Non-interactive
# (works with CI=true and no stdin). Environment: STREAMING_ENGINE_PYTHON
# (interpreter for a new venv, default python3.11).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
PY="$VENV/bin/python"
STAMP="$VENV/.streaming-engine-install"
PIP_LOG="$VENV/.streaming-engine-pip.log"
# Bump when the install recipe below changes, to force a reinstall.
RECIPE="pip-install-e-test-compat-v1"

say() { echo "bootstrap: $*" >&2; }
die() { echo "bootstrap: error: $*" >&2; exit 1; }

# One bootstrap at a time per checkout (parallel test runs share .venv/.jars).
if command -v flock >/dev/null 2>&1; then
    lock="${TMPDIR:-/tmp}/streaming-engine-bootstrap-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1).lock"
    exec 9>"$lock"
    flock 9
fi

# 1. virtualenv
if [ ! -x "$PY" ]; then
    base="${STREAMING_ENGINE_PYTHON:-python3.11}"
    command -v "$base" >/dev/null 2>&1 \
        || die "$base not found; install Python 3.11 or set STREAMING_ENGINE_PYTHON=/path/to/python3.11"
    say "creating .venv with $("$base" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    rm -rf "$VENV"
    "$base" -m venv "$VENV" </dev/null || die "could not create .venv with $base"
fi
pyver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" \
    || die ".venv/bin/python does not run; delete .venv and re-run $0"
[ "$pyver" = "3.11" ] \
    || die ".venv uses Python $pyver but the project needs 3.11; delete .venv and re-run $0"

# 2. Python packages, reinstalled only when what pip reads from pyproject.toml
#    ([build-system], [project], [tool.setuptools]) or the recipe changed; JVM
#    pins and pytest settings do not need a reinstall.
want="$("$PY" - "$ROOT/pyproject.toml" "$RECIPE" <<'EOF'
import hashlib, json, sys, tomllib
with open(sys.argv[1], "rb") as fh:
    data = tomllib.load(fh)
relevant = {k: data.get(k) for k in ("build-system", "project")}
relevant["setuptools"] = data.get("tool", {}).get("setuptools")
h = hashlib.sha256(json.dumps(relevant, sort_keys=True).encode())
h.update(sys.argv[2].encode())
h.update(sys.version.encode())
print(h.hexdigest())
EOF
)" || die "cannot read pyproject.toml (see above)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
    say "installing Python dependencies (first run, or [project] in pyproject.toml changed)"
    rm -f "$STAMP"
    # editable_mode=compat puts the checkout itself on sys.path (a .pth file),
    # so packages added later (sources/, sinks/, ...) need no reinstall.
    if ! PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install \
            --no-input --disable-pip-version-check --progress-bar off \
            -e "${ROOT}[test]" --config-settings editable_mode=compat \
            </dev/null >"$PIP_LOG" 2>&1; then
        tail -n 40 "$PIP_LOG" >&2
        die "pip install -e '.[test]' failed (full log: $PIP_LOG)"
    fi
    echo "$want" >"$STAMP"
fi

# 3. JVM jars (no-op, offline, when all pinned jars are present)
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] \
    || die "java not found: Spark 4.2 (and Maven) need a Java 17 runtime on PATH or JAVA_HOME"
"$PY" "$ROOT/scripts/fetch_jars.py" </dev/null \
    || die "could not fetch the JVM jars pinned in pyproject.toml (see above)"

# 4. the engine's own JVM classes (streaming_engine/runtime/jvm/*.java), rebuilt
#    with the JDK's javac only when the sources changed
"$PY" "$ROOT/scripts/build_jvm.py" </dev/null \
    || die "could not compile streaming_engine/runtime/jvm (see above)"

# 5. bytecode in pyspark's worker archives (no-op when they hold it already)
"$PY" "$ROOT/scripts/compile_pyspark_zips.py" </dev/null \
    || die "could not add bytecode to pyspark's python/lib/*.zip (see above)"
