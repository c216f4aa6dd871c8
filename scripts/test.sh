#!/usr/bin/env bash
# The project's test command: set up (idempotent, see scripts/bootstrap.sh),
# then run pytest from the repository root. Arguments go to pytest, e.g.
#   ./scripts/test.sh tests/unit -x
#   ./scripts/test.sh -m "not spark"
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

./scripts/bootstrap.sh

rc=0
.venv/bin/python -m pytest -q --durations=15 "$@" </dev/null || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "test.sh: error: pytest collected no tests (exit 5); check the paths and -k/-m filters" >&2
fi
exit "$rc"
