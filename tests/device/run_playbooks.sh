#!/usr/bin/env bash
# Run the collection's playbooks on the GPU host itself, with a local connection, as a user would, and keep what
# they say. Needs ansible-core carried as wheels in .whl/ (the host has no network).
#   tests/device/run_playbooks.sh OUT_DIR [playbook...]     (default: drift.yml provision.yml drift.yml report.yml)
# EXTRA_VARS (a JSON object or key=value words), when set, is passed to every playbook as one more -e.
set -uo pipefail
out=${1:?usage: run_playbooks.sh OUT_DIR [playbook...]}
shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$repo"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
mkdir -p "$repo/.build/ansible_collections/gpufabric"
ln -sfn "$repo" "$repo/.build/ansible_collections/gpufabric/node"
export ANSIBLE_COLLECTIONS_PATH=$repo/.build ANSIBLE_CONFIG=$repo/ansible.cfg ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
printf 'all:\n  hosts:\n    gpuhost:\n      ansible_connection: local\n      ansible_python_interpreter: %s\n' \
  "$(command -v python3)" > "$out/inventory.yml"
if [ $# -eq 0 ]; then set -- drift.yml provision.yml drift.yml report.yml; fi
n=0
for pb in "$@"; do
  n=$((n + 1))
  start=$(date +%s.%N)
  ansible-playbook -i "$out/inventory.yml" "$repo/playbooks/$pb" -e "gpufabric_report_dir=$out/reports" \
    -e gpufabric_metrics_dir="$out/metrics" ${EXTRA_VARS:+-e "$EXTRA_VARS"} > "$out/$n-${pb%.yml}.log" 2>&1
  rc=$?
  echo "$pb rc=$rc $(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || true)s" | tee -a "$out/summary.txt"
  for f in drift-report.json fleet-report.json; do
    if [ -f "$out/reports/$f" ]; then cp "$out/reports/$f" "$out/$n-$f"; fi
  done
done
