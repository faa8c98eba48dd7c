#!/usr/bin/env bash
# Runs every tier of tests (unit, live against a real Pulsar 4.0, browser) in one pytest run,
# so the live broker starts once. "No tests collected" is a failure, not a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
mkdir -p artifacts
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$rc"
