#!/usr/bin/env bash
# `make test`: every test tier that runs without a GPU, in two lanes on one machine.
#   - the VM lab (`make vm`) starts first, in the background: a QEMU/TCG guest keeps about one core busy for the
#     whole run and waits on the guest the rest of the time, so it runs beside the other tiers instead of after them;
#     its output goes to $BUILD/test-vm.log, and its stage lines are printed when it ends;
#   - the other tiers run one after the other in the foreground, the quick ones first, so a mistake fails early.
# Each tier's start, end and wall time are printed (=== lines) and summed up at the end, so a CI log's tail says
# where the time went. The first failing tier stops the foreground lane; the VM lane is then stopped too.
# Usage: tests/run_tiers.sh [--serial] [TIER...]   (default: every tier; --serial runs the VM lab in the foreground)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
make=${MAKE:-make}
serial=0
if [ "${1:-}" = "--serial" ]; then serial=1; shift; fi
fg_tiers=(lint unit collection sanity molecule integration compat)
vm_tier=vm
if [ $# -gt 0 ]; then
  fg_tiers=(); vm_tier=
  for t in "$@"; do if [ "$t" = vm ]; then vm_tier=vm; else fg_tiers+=("$t"); fi; done
fi
start=$(date +%s)
now() { echo $(( $(date +%s) - start )); }
declare -A took
summary() {
  echo "=== [$(now)s] tier times (wall, seconds; the VM lab ran beside the others):"
  for t in "${!took[@]}"; do printf '===   %-12s %6s\n' "$t" "${took[$t]}"; done | sort
}

mkdir -p "$repo/.build"
vmlog=$repo/.build/test-vm.log
vm_pid=
# the venv and the collection link first, once: both lanes need them and must not build them at the same time
$make --no-print-directory venv link >/dev/null || { echo "=== venv/link failed"; exit 1; }
# and the VM lab's system packages (apt) before the lanes split: nothing installs packages while tests run
if [ -n "$vm_tier" ]; then python3 tests/lab/vm/lab.py deps || { echo "=== the VM lab's packages failed"; exit 1; }; fi
if [ -n "$vm_tier" ] && [ "$serial" = 0 ]; then
  echo "=== [$(now)s] make vm (background lane, log: $vmlog)"
  # its own session (setsid), so that stopping it stops QEMU, molecule and pytest below it as well
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid bash -c 's=$(date +%s); "$0" --no-print-directory vm >"$1" 2>&1; rc=$?
    echo "=== make vm rc=$rc after $(( $(date +%s) - s ))s" >>"$1"; exit $rc' "$make" "$vmlog" &
  vm_pid=$!
  vm_start=$(date +%s)
fi
stop_vm() {
  [ -n "$vm_pid" ] || return 0
  kill -- "-$vm_pid" 2>/dev/null
  wait "$vm_pid" 2>/dev/null
}
vm_report() {
  # the VM lab's stage lines (molecule actions, lab.py stage timings, the test summary) and, on failure, its tail
  grep -E '^INFO +\[vm > [a-z_]+\] Execut|stage |passed|failed|^=== make vm' "$vmlog" | tail -40
}

if [ "$serial" = 1 ] && [ -n "$vm_tier" ]; then fg_tiers=(lint unit collection sanity molecule vm integration compat); fi
for t in "${fg_tiers[@]}"; do
  s=$(date +%s)
  echo "=== [$(now)s] make $t"
  if ! $make --no-print-directory "$t"; then
    echo "=== make $t failed after $(now)s"
    if [ -n "$vm_pid" ]; then echo "=== stopping the VM lab lane"; stop_vm; vm_report; fi
    exit 1
  fi
  took[$t]=$(( $(date +%s) - s ))
done

if [ -n "$vm_pid" ]; then
  echo "=== [$(now)s] waiting for the VM lab lane"
  wait "$vm_pid"; rc=$?
  took[vm]=$(( $(date +%s) - vm_start ))
  vm_report
  if [ "$rc" != 0 ]; then
    echo "=== make vm failed after $(now)s; its last lines:"; tail -80 "$vmlog"; summary; exit 1
  fi
fi
summary
echo "=== [$(now)s] make test: every tier passed"
