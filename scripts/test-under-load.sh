#!/usr/bin/env bash
# Runs the whole suite exactly as `make test` does (scripts/test.sh, arguments passed through)
# while two CPU burners occupy both cores and an I/O writer fsyncs a bounded file over and over:
# the tests must hold on a busy machine (a shared CI runner, a laptop doing other work), not
# only on a quiet one. Prints the suite's exit code, its wall time and the 1-minute load average
# sampled every 30 s during the run, and exits with the suite's code.
#
# PULSAR_LENS_TEST_CMD replaces scripts/test.sh (split on spaces, arguments appended), e.g.
# ".venv/bin/python -m pytest -q", to check the load machinery itself without the suite's setup.
set -uo pipefail
cd "$(dirname "$0")/.."

TEST_CMD=${PULSAR_LENS_TEST_CMD:-scripts/test.sh}
# A ceiling on every load process, so none outlives a run whose trap never fired (kill -9).
LOAD_CEILING_S=${PULSAR_LENS_LOAD_CEILING_S:-14400}
SAMPLE_EVERY_S=30
IO_FILE_MB=64

test_pid=
# The interpreter itself, not a version manager's wrapper script, so that a signal meets it.
PY=$(python3 -c 'import sys; print(sys.executable)') || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/pulsar-lens-load.XXXXXX")
pids=()

any_running() {
  # True while one of the given processes runs (an exited, unreaped one is a zombie, "Z").
  local stat
  for stat in $(ps -o stat= -p "$(IFS=,; echo "$*")"); do
    [[ $stat == Z* ]] || return 0
  done
  return 1
}

cleanup() {
  # TERM to every load process, KILL to any still running after 5 s, then reap them all.
  local pid tries
  [ "${#pids[@]}" -eq 0 ] && { rm -rf "$work"; return; }
  kill "${pids[@]}" 2>/dev/null
  for tries in $(seq 50); do
    any_running "${pids[@]}" || break
    sleep 0.1
  done
  any_running "${pids[@]}" && kill -KILL "${pids[@]}" 2>/dev/null
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null
  done
  pids=()
  rm -rf "$work"
}
on_signal() {
  # A terminal's Ctrl-C reaches the suite itself; a TERM sent to this script is passed on as
  # an interrupt, so pytest tears its brokers down. Either way the suite ends before the load.
  if [ -n "$test_pid" ]; then
    [ "$1" -eq 143 ] && kill -INT "$test_pid" 2>/dev/null
    wait "$test_pid"
  fi
  exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

burn_cpu() {
  # One core busy at normal priority until killed or the ceiling passes.
  exec "$PY" -c '
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
' "$LOAD_CEILING_S"
}

write_io() {
  # Writes and fsyncs a file of IO_FILE_MB, deletes it, again: disk pressure of bounded size.
  exec "$PY" - "$work/io" "$IO_FILE_MB" "$LOAD_CEILING_S" <<'EOF'
import os, sys, time
path, size_mb, end = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
block = os.urandom(1 << 20)
while time.monotonic() < end:
    with open(path, "wb") as f:
        for _ in range(size_mb):
            f.write(block)
            f.flush()
            os.fsync(f.fileno())
    os.remove(path)
EOF
}

sample_load() {
  # The 1-minute load average, every SAMPLE_EVERY_S, one number a line. The sleep is waited
  # on in the background so that killing this sampler ends its sleep too.
  local sleeper=
  trap 'kill $sleeper 2>/dev/null; exit 0' TERM
  while true; do
    cut -d' ' -f1 /proc/loadavg >>"$work/loadavg"
    sleep "$SAMPLE_EVERY_S" &
    sleeper=$!
    wait "$sleeper"
  done
}

# The load's own output (a traceback when it is stopped) is not the suite's: discarded.
burn_cpu 2>/dev/null &
pids+=($!)
burn_cpu 2>/dev/null &
pids+=($!)
write_io 2>/dev/null &
pids+=($!)
sample_load &
pids+=($!)

start=$(date +%s)
# In the background (interrupts restored, which bash ignores in background jobs) so that a
# signal to this script is handled at once rather than after the suite.
(
  trap - INT
  exec $TEST_CMD "$@"
) &
test_pid=$!
wait "$test_pid"
rc=$?
test_pid=
end=$(date +%s)
cut -d' ' -f1 /proc/loadavg >>"$work/loadavg"

summary=$(awk 'NR == 1 {min = $1; max = $1}
  {sum += $1; if ($1 < min) min = $1; if ($1 > max) max = $1}
  END {printf "min %.2f mean %.2f max %.2f (%d samples)", min, sum / NR, max, NR}' \
  "$work/loadavg")
echo "test-under-load: exit code $rc"
echo "test-under-load: wall time $((end - start)) s"
echo "test-under-load: 1-minute load average $summary"
exit "$rc"
