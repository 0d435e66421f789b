#!/usr/bin/env bash
# basetemp.sh NAME: a fresh, empty folder in RAM for one pytest run's temporary trees (--basetemp), printed on
# stdout: /dev/shm/gf-<NAME's first 4 letters>-<pid>, when /dev/shm is a tmpfs with at least $GPUFABRIC_SHM_MIN_GB
# (8) GiB free; else nothing is printed and pytest keeps its own default. A unit run writes and deletes about a
# million small files (simulated node trees, copies of them); on an ext4 disk mounted with `discard`, as CI's and
# this project's machines are, each delete waits on a block discard. The caller removes the folder after the run
# (make unit/integration do).
set -euo pipefail
name=${1:?usage: $0 NAME}
[[ "$name" =~ ^[a-z0-9-]+$ ]] || { echo "$0: bad name: $name" >&2; exit 2; }
min_gb=${GPUFABRIC_SHM_MIN_GB:-8}
# short: the simulated fleets keep SSH ControlPath sockets below it, and a unix socket path has at most 107
# characters (pytest's own /tmp/pytest-of-root/pytest-N is 30; this is at most 25)
dir=/dev/shm/gf-${name:0:4}-$$
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" != tmpfs ] || [ ! -w /dev/shm ]; then exit 0; fi
avail_kb=$(df -Pk /dev/shm | awk 'NR == 2 {print $4}')
[ "${avail_kb:-0}" -ge $(( min_gb * 1024 * 1024 )) ] || exit 0
rm -rf "$dir"
mkdir -p "$dir"
chmod 0700 "$dir"
echo "$dir"
