#!/usr/bin/env bash
# `make test`: every test tier that runs without a GPU, in two lanes on one machine that share one queue of tiers.
#   - background lane: the VM lab (`make vm`) first, its own; then tiers from the queue. The QEMU/TCG guest keeps
#     about half a core busy on average (it waits on the guest's boots and on SSH). Its output goes to
#     $BUILD/test-bg.log; its tiers' stage lines and slowest VM tests are printed when the lane ends.
#   - foreground lane: tiers from the queue, on stdout.
#   - the queue: lint, unit, integration, sanity, molecule, collection, compat. The quick lint first, so a mistake
#     fails early; then the long tiers, so the two lanes end close together: whichever lane is free takes the next
#     tier (before, a fixed split left one lane idle for minutes while the other still had tiers to run). unit and
#     integration use every core (pytest-xdist).
# Each tier's start, lane and wall time are printed (=== lines) and summed up at the end, so a CI log's tail says
# where the time went. A failing tier stops both lanes; the run then fails naming the tier.
# Usage: tests/run_tiers.sh [--serial] [TIER...]
#   TIER...: run only these (vm still first in the background lane); --serial: one lane, in the order
#   lint unit collection sanity molecule vm integration compat.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
make=${MAKE:-make}
serial=0
if [ "${1:-}" = "--serial" ]; then serial=1; shift; fi
# fg: the queue both lanes take from, in this order; bg: the background lane's own tiers, run before it takes any
fg=(lint unit integration sanity molecule collection compat)
bg=(vm)
if [ $# -gt 0 ]; then
  all=" $* "; fg=(); bg=()
  [[ $all == *" vm "* ]] && bg=(vm)
  for t in lint unit integration sanity molecule collection compat; do [[ $all == *" $t "* ]] && fg+=("$t"); done
  for t in "$@"; do
    [[ " vm lint unit integration sanity molecule collection compat " == *" $t "* ]] || { echo "unknown tier: $t"; exit 2; }
  done
fi
if [ "$serial" = 1 ]; then
  all=" ${fg[*]} ${bg[*]} "; fg=()
  for t in lint unit collection sanity molecule vm integration compat; do [[ $all == *" $t "* ]] && fg+=("$t"); done
  bg=()
fi
start=$(date +%s)
now() { echo $(( $(date +%s) - start )); }
mkdir -p "$repo/.build"
times=$repo/.build/test-times
bglog=$repo/.build/test-bg.log
queue=$repo/.build/test-queue
failed=$repo/.build/test-failed
: >"$times"
rm -f "$failed"
printf '%s\n' "${fg[@]}" >"$queue"
summary() {
  echo "=== [$(now)s] tier times (wall seconds, lane):"
  sort "$times" | while read -r t s l; do printf '===   %-12s %6s  %s\n' "$t" "$s" "$l"; done
}

# the venv and the collection link first, once: both lanes need them and must not build them at the same time;
# and the VM lab's system packages (apt): nothing installs packages once tests run ($LAB_DEPS replaces that command
# where this script itself is tried out)
$make --no-print-directory venv link >/dev/null || { echo "=== venv/link failed"; exit 1; }
if [[ " ${fg[*]} ${bg[*]} " == *" vm "* ]]; then
  ${LAB_DEPS:-python3 tests/lab/vm/lab.py deps} || { echo "=== the VM lab's packages failed"; exit 1; }
fi

# pop: the next tier of the shared queue (nothing when it is empty), under a lock
pop() {
  (
    flock 8
    t=$(head -n 1 "$queue")
    if [ -n "$t" ]; then sed -i 1d "$queue"; fi
    echo "$t"
  ) 8>"$queue.lock"
}
# run_lane NAME TIER...: the lane's own tiers, then tiers from the queue until it is empty, one after the other;
# each tier's wall time into $times; returns 1 at its first failure, 3 before its next tier when the other lane
# failed, 0 when the queue is empty
run_lane() {
  local lane=$1 t s; shift
  while :; do
    [ ! -e "$failed" ] || return 3
    if [ $# -gt 0 ]; then t=$1; shift; else t=$(pop); fi
    [ -n "$t" ] || return 0
    s=$(date +%s)
    echo "=== [$(now)s] make $t ($lane lane)"
    if ! $make --no-print-directory "$t"; then
      echo "=== make $t failed after $(now)s ($lane lane)"
      echo "$t" >>"$failed"
      return 1
    fi
    echo "$t $(( $(date +%s) - s )) $lane" >>"$times"
  done
}

bg_pid=
if [ "$serial" = 0 ]; then
  echo "=== [$(now)s] background lane: ${bg[*]:-} then the queue (log: $bglog); queue: ${fg[*]}"
  # its own session (setsid), so that stopping it stops QEMU, molecule and pytest below it as well
  export -f run_lane pop now
  export make start times queue failed
  setsid bash -c 'run_lane background "$@"' bash "${bg[@]}" >"$bglog" 2>&1 &
  bg_pid=$!
fi
bg_report() {
  # the lane's own lines, the molecule stages, lab.py's stage timings and the test summaries
  grep -E '^=== |^INFO +\[vm > [a-z_]+\] Execut|stage [a-z_-]+: |^smoke: |[0-9]+ (passed|failed)' "$bglog" | tail -80
  # the VM lab's slowest tests (molecule's verifier runs pytest with --durations=0), and its playbooks' totals
  grep -E '^[0-9]+\.[0-9]+s (call|setup|teardown) ' "$bglog" | awk '$1+0 >= 20' | head -30
}
stop_bg() {
  [ -n "$bg_pid" ] || return 0
  echo "=== stopping the background lane"
  kill -- "-$bg_pid" 2>/dev/null
  wait "$bg_pid" 2>/dev/null
  # QEMU daemonizes out of the lane's session: bring the VM lab's guest down by its pidfile
  python3 tests/lab/vm/lab.py down molecule-vm >/dev/null 2>&1
  bg_report
}

run_lane foreground; fg_rc=$?
if [ "$fg_rc" = 1 ]; then
  stop_bg; summary; exit 1
fi
# 0: the queue is done; 3: the background lane failed, the foreground stopped before its next tier (reported below)
if [ -n "$bg_pid" ]; then
  echo "=== [$(now)s] waiting for the background lane"
  wait "$bg_pid"; rc=$?
  bg_report
  if [ "$rc" != 0 ]; then
    echo "=== the background lane failed after $(now)s; its last lines:"; tail -100 "$bglog"
    # the failing tests' names and assertion lines, last: a CI log keeps only its tail, which the lines above
    # (molecule's recap) would otherwise fill
    echo "=== the background lane's failing tests:"
    grep -E '^(FAILED|ERROR) |^E {2,}|^[a-z_/]+\.py:[0-9]+: [A-Za-z]*Error' "$bglog" | tail -60
    summary; exit 1
  fi
fi
summary
echo "=== [$(now)s] make test: every tier passed"
