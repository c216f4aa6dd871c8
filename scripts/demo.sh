#!/usr/bin/env bash
# The README's first command: set everything up (idempotent), show how the
# engine will run the demo job, run it, and show what it committed.
#   ./scripts/demo.sh                      # conf/examples/cdc_demo.conf
#   ./scripts/demo.sh path/to/job.conf     # any other job
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
./scripts/bootstrap.sh

JOB="${1:-conf/examples/cdc_demo.conf}"
ENGINE=(.venv/bin/python -m streaming_engine)

echo "== explain =="
"${ENGINE[@]}" explain -c "$JOB"
echo "== run =="
"${ENGINE[@]}" run -c "$JOB" --log-level INFO
echo "== status =="
"${ENGINE[@]}" status -c "$JOB"
