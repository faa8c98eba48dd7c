#!/usr/bin/env bash
# Runs every tier of tests (unit, live against a real Pulsar 4.0, Spark, browser, image) as two
# pytest processes side by side, the parts of tests/parts.py: "brokers" (every module that
# reaches the broker pool, so each broker configuration still starts once per run, and the
# Spark tier) and "rest" (the others). Most of a run waits on brokers, subprocesses and browsers,
# so two processes on two cores take about half the time of one.
#
# Arguments (and PYTEST_ADDOPTS) go to both parts. Each part writes artifacts/test-<part>.log,
# shown here as it grows with the part's name before each line, and has a temporary directory
# of its own (pytest's --basetemp and TMPDIR, so its brokers and browsers too) and a pytest
# cache of its own. At the end both summaries are printed; the run fails when either part fails.
# "No tests collected" is a failure: in a whole run, by either part; with arguments (or
# PYTEST_ADDOPTS), which may choose tests of one part only, when neither part collected any.
#
# With --lens-part among the arguments (brokers, rest, or all for every test) one pytest runs
# in the foreground with the arguments as given, as it did before the split: for a debugger
# (--pdb), or one part alone.
#
# Ctrl-C or TERM interrupts both parts (SIGINT to each part's process group, as a terminal's
# Ctrl-C would), so each stops its brokers; a part still running after STOP_GRACE_S is killed,
# and so is any process left with its working directory in the run's temporary directory (a
# broker's JVM runs in its data directory, in its own process group).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
mkdir -p artifacts

PYTEST=(.venv/bin/python -m pytest)
PARTS=(brokers rest)
STOP_GRACE_S=180

no_tests() {
  echo "test: pytest collected no tests; that is a failure" >&2
  exit 1
}

for arg in "$@"; do
  if [[ $arg == --lens-part* ]]; then
    "${PYTEST[@]}" "$@"
    rc=$?
    [ "$rc" -eq 5 ] && no_tests
    exit "$rc"
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/pulsar-lens-test.XXXXXX") || exit 1
declare -A pid=() rc=()
tails=()

start_part() {
  # pytest in a session (and process group) of its own, its output to its log, and a
  # follower printing that log. SIGINT is set back to its default for pytest, so that it ends
  # with its teardown when interrupted: a background job, or a script started with SIGINT
  # ignored, would hand its children the ignore (`trap - INT` cannot undo an inherited one).
  local part=$1 log=artifacts/test-$1.log
  shift
  mkdir -p "$work/tmp-$part"
  (
    export TMPDIR="$work/tmp-$part"
    exec setsid env --default-signal=INT "${PYTEST[@]}" --lens-part="$part" \
      --basetemp="$work/basetemp-$part" -o cache_dir=".pytest_cache/$part" "$@"
  ) >"$log" 2>&1 </dev/null &
  pid[$part]=$!
  tail -n +1 --pid="${pid[$part]}" -f "$log" | sed -u "s/^/[$part] /" &
  tails+=($!)
}

left_in_work() {
  # The processes whose working directory lies in this run's temporary directory.
  local dir found=()
  for dir in /proc/[0-9]*; do
    [[ $(readlink "$dir/cwd" 2>/dev/null) == "$work"/* ]] && found+=("${dir#/proc/}")
  done
  echo "${found[@]}"
}

kill_leftovers() {
  local left
  left=$(left_in_work)
  if [ -n "$left" ]; then
    echo "test: killing processes left running in $work: $left" >&2
    # shellcheck disable=SC2086  # one pid a word
    kill -KILL $left 2>/dev/null
  fi
}

running_parts() {
  local part
  for part in "${!pid[@]}"; do
    kill -0 "${pid[$part]}" 2>/dev/null && echo "$part"
  done
}

stop_parts() {
  # Interrupt each part's group once, wait for its teardown, then kill what is left.
  local part waited=0
  trap '' INT TERM
  echo "test: interrupting both parts; waiting up to ${STOP_GRACE_S}s for their teardown" >&2
  for part in "${!pid[@]}"; do
    kill -INT -- "-${pid[$part]}" 2>/dev/null
  done
  while [ -n "$(running_parts)" ] && [ "$waited" -lt "$STOP_GRACE_S" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  for part in $(running_parts); do
    echo "test: part $part still running after ${STOP_GRACE_S}s; killing its group" >&2
    kill -KILL -- "-${pid[$part]}" 2>/dev/null
  done
  wait
  kill_leftovers
  rm -rf "$work"
  exit "$1"
}

summary() {
  # From the last "short test summary info" to the end, else the last line.
  local part=$1 log=artifacts/test-$1.log
  echo "== part $part (exit code ${rc[$part]}, full output in $log)"
  awk '/=+ short test summary info =+/ {n = NR} {line[NR] = $0}
    END {for (i = (n ? n : NR); i <= NR; i++) print line[i]}' "$log"
}

trap 'stop_parts 130' INT
trap 'stop_parts 143' TERM
for part in "${PARTS[@]}"; do
  start_part "$part" "$@"
done

for part in "${PARTS[@]}"; do
  wait "${pid[$part]}"
  rc[$part]=$?
done
wait "${tails[@]}"
trap - INT TERM
kill_leftovers

for part in "${PARTS[@]}"; do
  summary "$part"
done

# A part that collected nothing: a failure in a whole run; with a selection, only when the
# other part collected nothing either (the selection may hold one part's tests only).
addopts=${PYTEST_ADDOPTS:-}
selection=$(($# > 0 || ${#addopts} > 0))
status=0
for part in "${PARTS[@]}"; do
  code=${rc[$part]}
  if [ "$code" -eq 5 ]; then
    other=${rc[$([ "$part" = brokers ] && echo rest || echo brokers)]}
    if [ "$selection" -eq 1 ] && [ "$other" -ne 5 ]; then
      echo "test: part $part: the selection holds none of its tests"
      code=0
    else
      echo "test: part $part collected no tests; that is a failure" >&2
      code=1
    fi
  fi
  [ "$status" -eq 0 ] && status=$code
done
if [ "$status" -eq 0 ]; then
  rm -rf "$work"
else
  echo "test: the parts' temporary directories stay in $work" >&2
fi
exit "$status"
