#!/usr/bin/env bash
# basetemp.sh NAME: a fresh, empty folder for one pytest run's temporary trees (--basetemp), printed on stdout.
# In RAM (/dev/shm/gpufabric-NAME-<pid>) when /dev/shm is a tmpfs with at least $GPUFABRIC_SHM_MIN_GB (8) GiB free,
# else below the repository's .build. A unit run writes and deletes about a million small files (simulated node
# trees, copies of them); on an ext4 disk mounted with `discard`, as CI's and this project's machines are, each
# delete waits on a block discard. The caller removes the folder after the run (make unit/integration do).
set -euo pipefail
name=${1:?usage: $0 NAME}
[[ "$name" =~ ^[a-z0-9-]+$ ]] || { echo "$0: bad name: $name" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
min_gb=${GPUFABRIC_SHM_MIN_GB:-8}
dir=
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ]; then
  avail_kb=$(df -Pk /dev/shm | awk 'NR == 2 {print $4}')
  if [ "${avail_kb:-0}" -ge $(( min_gb * 1024 * 1024 )) ]; then
    dir=/dev/shm/gpufabric-$name-$$
  fi
fi
[ -n "$dir" ] || dir=$repo/.build/pytest-$name
rm -rf "$dir"
mkdir -p "$dir"
chmod 0700 "$dir"
echo "$dir"
