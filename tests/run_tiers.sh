#!/usr/bin/env bash
# `make test`: every test tier that runs without a GPU, in two lanes on one machine.
#   - background lane: the VM lab (`make vm`), then compat. The QEMU/TCG guest keeps well under one core busy on
#     average (it waits on the guest's boots and on SSH), and compat is single-threaded pip, ansible-test and one
#     simulated node, so both fit beside the foreground lane instead of after it. The lane's output goes to
#     $BUILD/test-bg.log; each of its tiers' stage lines are printed when the lane ends.
#   - foreground lane: lint, unit, collection, sanity, molecule, integration, one after the other, the quick ones
#     first, so a mistake fails early. unit and integration use every core (pytest-xdist).
# Each tier's start and wall time are printed (=== lines) and summed up at the end, so a CI log's tail says where
# the time went. A failing tier stops its lane and the other lane too; the run then fails naming the tier.
# Usage: tests/run_tiers.sh [--serial] [TIER...]
#   TIER...: run only these (vm and compat stay in the background lane); --serial: one lane, in the order
#   lint unit collection sanity molecule vm integration compat.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
make=${MAKE:-make}
serial=0
if [ "${1:-}" = "--serial" ]; then serial=1; shift; fi
fg=(lint unit collection sanity molecule integration)
bg=(vm compat)
if [ $# -gt 0 ]; then
  fg=(); bg=()
  for t in "$@"; do case $t in vm|compat) bg+=("$t") ;; *) fg+=("$t") ;; esac; done
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
: >"$times"
summary() {
  echo "=== [$(now)s] tier times (wall seconds; background lane: ${bg[*]:-none}):"
  sort "$times" | while read -r t s; do printf '===   %-12s %6s\n' "$t" "$s"; done
}

# the venv and the collection link first, once: both lanes need them and must not build them at the same time;
# and the VM lab's system packages (apt): nothing installs packages once tests run ($LAB_DEPS replaces that command
# where this script itself is tried out)
$make --no-print-directory venv link >/dev/null || { echo "=== venv/link failed"; exit 1; }
if [[ " ${fg[*]} ${bg[*]} " == *" vm "* ]]; then
  ${LAB_DEPS:-python3 tests/lab/vm/lab.py deps} || { echo "=== the VM lab's packages failed"; exit 1; }
fi

# run_lane NAME TIER...: the tiers one after the other; each tier's wall time into $times; stops at the first failure
run_lane() {
  local lane=$1 t s; shift
  for t in "$@"; do
    s=$(date +%s)
    echo "=== [$(now)s] make $t ($lane lane)"
    if ! $make --no-print-directory "$t"; then
      echo "=== make $t failed after $(now)s ($lane lane)"
      return 1
    fi
    echo "$t $(( $(date +%s) - s ))" >>"$times"
  done
}

bg_pid=
if [ ${#bg[@]} -gt 0 ]; then
  echo "=== [$(now)s] background lane: ${bg[*]} (log: $bglog)"
  # its own session (setsid), so that stopping it stops QEMU, molecule and pytest below it as well
  export -f run_lane now
  export make start times
  setsid bash -c 'run_lane background "$@"' bash "${bg[@]}" >"$bglog" 2>&1 &
  bg_pid=$!
fi
bg_report() {
  # the lane's own lines, the molecule stages, lab.py's stage timings and the test summaries
  grep -E '^=== |^INFO +\[vm > [a-z_]+\] Execut|stage [a-z_-]+: |^smoke: |[0-9]+ (passed|failed)' "$bglog" | tail -60
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

if ! run_lane foreground "${fg[@]}"; then
  stop_bg; summary; exit 1
fi
if [ -n "$bg_pid" ]; then
  echo "=== [$(now)s] waiting for the background lane"
  wait "$bg_pid"; rc=$?
  bg_report
  if [ "$rc" != 0 ]; then
    echo "=== the background lane failed after $(now)s; its last lines:"; tail -100 "$bglog"; summary; exit 1
  fi
fi
summary
echo "=== [$(now)s] make test: every tier passed"
