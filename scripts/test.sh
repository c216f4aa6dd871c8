#!/usr/bin/env bash
# The project's test command: set up (idempotent, see scripts/bootstrap.sh),
# then run pytest from the repository root. Arguments go to pytest, e.g.
#   ./scripts/test.sh tests/unit -x
#   ./scripts/test.sh -m "not spark"
# Two pytest-xdist workers, each test FILE on one worker (its module-scoped
# servers and cluster start once); STREAMING_ENGINE_TEST_WORKERS=0 runs in one
# process (needed for -s, e.g. a soak run that prints its kills).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

./scripts/bootstrap.sh

rc=0
workers="${STREAMING_ENGINE_TEST_WORKERS:-2}"
xdist=()
if [ "$workers" != "0" ]; then
    xdist=(-n "$workers" --dist loadfile --no-loadscope-reorder)  # files in collection order (tests/conftest.py)
fi
.venv/bin/python -m pytest -q --durations=15 "${xdist[@]}" "$@" </dev/null || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "test.sh: error: pytest collected no tests (exit 5); check the paths and -k/-m filters" >&2
fi
exit "$rc"
