#!/usr/bin/env bash
# basetemp.sh NAME PYTEST-COMMAND...: runs the pytest command with its temporary trees in RAM (--basetemp
# /dev/shm/gf-<NAME's first 4 letters>-<pid>) when /dev/shm is a tmpfs with at least $GPUFABRIC_SHM_MIN_GB (8) GiB
# free, removes that folder afterwards, and exits with the command's status; else runs the command as it is (pytest
# keeps its own default). A unit run writes and deletes about a million small files (simulated node trees, copies of
# them); on an ext4 disk mounted with `discard`, as CI's and this project's machines are, each delete waits on a
# block discard. Used by make unit and make integration.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NAME PYTEST-COMMAND..." >&2; exit 2; }
name=$1; shift
[[ "$name" =~ ^[a-z0-9-]+$ ]] || { echo "$0: bad name: $name" >&2; exit 2; }
min_gb=${GPUFABRIC_SHM_MIN_GB:-8}
# short: the simulated fleets keep SSH ControlPath sockets below it, and a unix socket path has at most 107
# characters (pytest's own /tmp/pytest-of-root/pytest-N is 30; this is at most 24)
dir=/dev/shm/gf-${name:0:4}-$$
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" != tmpfs ] || [ ! -w /dev/shm ] ||
   [ "$(df -Pk /dev/shm | awk 'NR == 2 {print $4}')" -lt $(( min_gb * 1024 * 1024 )) ]; then
  echo "pytest --basetemp: pytest's default (no tmpfs with $min_gb GiB free)"
  exec "$@"
fi
rm -rf "$dir"
mkdir -p "$dir" && chmod 0700 "$dir" || exit 1
echo "pytest --basetemp=$dir"
"$@" --basetemp="$dir"
rc=$?
rm -rf "$dir"
exit "$rc"
