#!/usr/bin/env bash
# On the GPU host (not in CI): what cuFile does in compat mode there, per directory and compat policy, with its log.
#   tests/device/cufile_compat_matrix.sh OUT_DIR
# Runs the collection's cuFile program (plugins/module_utils/discovery/cufile_probe.py) with compat mode allowed,
# allowed and forced, and off, in /var/tmp and /dev/shm, and records the driver open, the handle registration,
# whether the data matched, and the tail of cuFile's log; also the mounts and whether a udev database exists
# (cuFile reads the volume attributes of the file's block device from it).
set -uo pipefail
out=${1:?usage: cufile_compat_matrix.sh OUT_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
f=$out/cufile-compat-matrix.txt
{
  echo "# findmnt -T /var/tmp; findmnt -T /dev/shm; find /run/udev/data -maxdepth 1"
  findmnt -T /var/tmp 2>&1; findmnt -T /dev/shm 2>&1
  find /run/udev/data -maxdepth 1 2>&1 | head -5
  for dir in /var/tmp /dev/shm; do
    for policy in "true false" "true true" "false false"; do
      # shellcheck disable=SC2086  # two words: allow, force
      set -- $policy
      w=$(mktemp -d "$dir/.gf-cufile-XXXXXX")
      printf '{"logging": {"dir": "%s"}, "properties": {"allow_compat_mode": %s}}\n' "$w" "$1" > "$w/cufile.json"
      CUFILE_ENV_PATH_JSON=$w/cufile.json CUFILE_ALLOW_COMPAT_MODE=$1 CUFILE_FORCE_COMPAT_MODE=$2 \
        CUFILE_LOGFILE_PATH=$w/cufile.log timeout 120 python3 "$repo/plugins/module_utils/discovery/cufile_probe.py" \
        --dir "$w" --size 16777216 > "$w/report.json" 2> "$w/stderr.txt"
      rc=$?
      python3 - "$dir" "$1" "$2" "$rc" "$w/report.json" <<'PY'
import json, sys
d, allow, force, rc, path = sys.argv[1:]
try:
    r = json.loads(open(path).read().strip().splitlines()[-1])
except Exception as e:  # noqa: BLE001 - a record
    r = {"error": "no report: %s" % e}
print("dir=%s allow=%s force=%s rc=%s driver_open=%s handle_register=%s data_matched=%s error=%s"
      % (d, allow, force, rc, (r.get("driver_open") or {}).get("name"), (r.get("handle_register") or {}).get("name"),
         r.get("data_matched"), r.get("error")))
PY
      sed 's/^/    log: /' "$w/cufile.log" 2>/dev/null | tail -8
      rm -rf "$w"
    done
  done
} > "$f" 2>&1
cat "$f"
