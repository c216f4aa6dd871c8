#!/usr/bin/env bash
# Run an engine job through pyspark's bundled spark-submit (local mode for now).
#
#   ./spark-submit.sh [run|check|explain|plugins] -c job.conf [-i key=value ...]
#                     [--check] [-n NAME] [-m MASTER] [-e DEPLOY_MODE] [--strict]
#                     [any other engine CLI flag]
#
# All arguments are forwarded unchanged to the engine CLI (python -m
# streaming_engine), which runs as the spark-submit driver via
# streaming_engine/spark_entry.py. The wrapper also reads:
#   -m/--master       passed to spark-submit (default local[2]); only local,
#                     local[N], local[*] and local[N,F] are supported yet
#   -e/--deploy-mode  passed to spark-submit (default client); cluster is refused
#                     (not supported yet), never ignored
#   -n/--name         spark-submit --name (default streaming-engine)
# and adds --jars (.jars/*.jar), the engine's local file system classes
# (.jars/engine, local masters), --py-files (a zip of streaming_engine, sources,
# sinks, transforms), the venv's Python and a quiet log4j2 configuration.
# Runs scripts/bootstrap.sh first (a no-op when everything is installed).
# Environment: STREAMING_ENGINE_JARS_DIR, STREAMING_ENGINE_LOG4J2 (log4j2 file),
# SPARK_SUBMIT_EXTRA_ARGS (extra spark-submit options, word-split).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
    sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}
fail() { echo "spark-submit.sh: error: $*" >&2; exit 2; }

master="local[2]"
deploy_mode="client"
name="streaming-engine"

need() {  # need FLAG NREMAINING
    [ "$2" -ge 2 ] || fail "$1 needs a value"
}

args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        -m|--master) need "$1" $#; master="$2"; shift 2 ;;
        --master=*) master="${1#*=}"; shift ;;
        -m?*) master="${1#-m}"; shift ;;
        -e|--deploy-mode) need "$1" $#; deploy_mode="$2"; shift 2 ;;
        --deploy-mode=*) deploy_mode="${1#*=}"; shift ;;
        -e?*) deploy_mode="${1#-e}"; shift ;;
        -n|--name) need "$1" $#; name="$2"; shift 2 ;;
        --name=*) name="${1#*=}"; shift ;;
        -n?*) name="${1#-n}"; shift ;;
        # value-taking engine flags: skip the value so it is never read as a flag
        -c|--config|-i|--variable|--format|--log-format|--log-level)
            need "$1" $#; shift 2 ;;
        --) break ;;
        *) shift ;;
    esac
done

case "$master" in
    local|local\[[0-9]*\]|local\[\*\]|local\[[0-9*]*,[0-9]*\]) ;;
    *) echo "spark-submit.sh: error: master '$master' is not supported yet (only local," \
            "local[N], local[*]; YARN, Kubernetes and standalone clusters are future work)" >&2
       exit 2 ;;
esac
[ "$deploy_mode" = "client" ] || {
    echo "spark-submit.sh: error: deploy mode '$deploy_mode' is not supported yet (cluster submission is" \
         "planned); use -e client (the default): the driver runs where you start the job" >&2
    exit 2
}

"$ROOT/scripts/bootstrap.sh"

PY="$ROOT/.venv/bin/python"
SPARK_HOME_DIR="$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
SPARK_SUBMIT="$SPARK_HOME_DIR/bin/spark-submit"
[ -x "$SPARK_SUBMIT" ] || fail "pyspark's spark-submit not found at $SPARK_SUBMIT"

JARS_DIR="${STREAMING_ENGINE_JARS_DIR:-$ROOT/.jars}"
JARS_DIR="$(cd "$JARS_DIR" && pwd)" || fail "jars folder $JARS_DIR missing; run scripts/bootstrap.sh"
jars=()
for j in "$JARS_DIR"/*.jar; do [ -f "$j" ] && jars+=("$j"); done
[ "${#jars[@]}" -gt 0 ] || fail "no jars in $JARS_DIR; run scripts/bootstrap.sh"
jar_list="$(IFS=,; echo "${jars[*]}")"

# --py-files: the engine's packages, zipped deterministically and named by
# content under build/ (git-ignored). The zip must outlive this script (we exec
# spark-submit so that signals reach the JVM directly), so no temp dir: an
# unchanged tree reuses its zip, and zips unused for 30 days are pruned.
PY_FILES="$("$PY" - "$ROOT" <<'EOF'
import hashlib, io, os, sys, tempfile, time, zipfile
root = sys.argv[1]
out_dir = os.path.join(root, "build", "py-files")
os.makedirs(out_dir, exist_ok=True)
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
    for top in ("streaming_engine", "sources", "sinks", "transforms"):
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for fn in sorted(filenames):
                if fn.endswith((".pyc", ".pyo")) or fn.startswith("."):
                    continue
                full = os.path.join(dirpath, fn)
                info = zipfile.ZipInfo(os.path.relpath(full, root), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                with open(full, "rb") as fh:
                    zf.writestr(info, fh.read())
data = buf.getvalue()
path = os.path.join(out_dir, f"engine-{hashlib.sha256(data).hexdigest()[:16]}.zip")
if os.path.exists(path):
    os.utime(path)
else:
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
cutoff = time.time() - 30 * 86400
for fn in os.listdir(out_dir):
    p = os.path.join(out_dir, fn)
    if p != path and fn.startswith("engine-") and os.path.getmtime(p) < cutoff:
        os.remove(p)
print(path)
EOF
)" || fail "could not build the --py-files zip"

LOG4J2="${STREAMING_ENGINE_LOG4J2:-$ROOT/streaming_engine/runtime/log4j2.properties}"

export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PY}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PY}"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
export STREAMING_ENGINE_JARS_DIR="$JARS_DIR"

# the engine's local file system (java.nio, no child process per chmod/readlink)
# must be on the driver's class path when the JVM starts: session.local_fs_conf
fs_lines="$("$PY" -c 'import sys; sys.path.insert(0, sys.argv[2])
from streaming_engine.runtime.session import local_fs_conf
for k, v in local_fs_conf(sys.argv[1]).items(): print(f"{k}={v}")' "$master" "$ROOT")" \
    || fail "could not read the engine's session settings"
fs_conf=()
while IFS= read -r kv; do
    if [ -n "$kv" ]; then fs_conf+=(--conf "$kv"); fi
done <<<"$fs_lines"

extra=()
# shellcheck disable=SC2206  # intentional word splitting
[ -n "${SPARK_SUBMIT_EXTRA_ARGS:-}" ] && extra=(${SPARK_SUBMIT_EXTRA_ARGS})

exec "$SPARK_SUBMIT" \
    --master "$master" \
    --deploy-mode "$deploy_mode" \
    --name "$name" \
    --jars "$jar_list" \
    --py-files "$PY_FILES" \
    --driver-java-options "-Dlog4j2.configurationFile=file:$LOG4J2" \
    --conf "spark.pyspark.python=$PYSPARK_PYTHON" \
    --conf "spark.pyspark.driver.python=$PYSPARK_DRIVER_PYTHON" \
    --conf "spark.ui.showConsoleProgress=false" \
    ${fs_conf[@]+"${fs_conf[@]}"} \
    ${extra[@]+"${extra[@]}"} \
    "$ROOT/streaming_engine/spark_entry.py" \
    ${args[@]+"${args[@]}"}
