#!/usr/bin/env bash
# Submit an engine job with pyspark's spark-submit, to any master Spark supports.
#
#   ./spark-submit.sh [run|check|explain] -c job.conf [-i key=value ...]
#       [-m MASTER] [-e client|cluster] [-n NAME]
#       [--conf KEY=VALUE ...] [--driver-memory M] [--driver-cores N]
#       [--executor-memory M] [--executor-cores N] [--num-executors N]
#       [--total-executor-cores N] [--queue Q] [--principal P] [--keytab K]
#       [--proxy-user U] [--py-files F,...] [--files F,...] [--archives A,...]
#       [--jars J,...] [--jars-from local|maven] [--executor-python PATH]
#       [--image IMAGE] [--dry-run] [--k8s-manifest | --k8s-pod-template]
#       [any other engine CLI flag: --strict, --restricted, --log-format, ...]
#
# MASTER: local[N] (default local[2]), spark://host:port (client mode only:
# Spark has no cluster mode for Python on standalone), yarn, k8s://https://host:port.
# Ships the pinned jars, the engine's packages as one zip, the job's own Python
# modules (env.python.files) and, in YARN cluster mode, the job file. Flags
# Spark would ignore for the master are refused with the reason.
#   --executor-python  the Python of the executors (default: this venv for local
#                      masters, the cluster's own python3 otherwise)
#   --jars-from maven  let the cluster resolve the pinned jars (--packages)
#   --dry-run          print the spark-submit command instead of running it
#   --k8s-manifest     print a SparkApplication (Spark operator) for the job
#   --k8s-pod-template print a driver pod template that mounts the job file
#                      from a ConfigMap, for -e cluster -c local:///etc/streaming-engine/FILE
# See README "Running on a cluster" and streaming_engine/submit.py.
# Runs scripts/bootstrap.sh first (a no-op when everything is installed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for a in "$@"; do
    case "$a" in -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
done
"$ROOT/scripts/bootstrap.sh"
exec "$ROOT/.venv/bin/python" -m streaming_engine.submit "$@"
