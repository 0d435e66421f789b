#!/usr/bin/env bash
# Smoke run on every ansible-core minor that meta/runtime.yml's requires_ansible admits, other than the pinned one
# (the full suite runs there): for each minor, a private virtualenv with that ansible-core, then
#   1. ansible-test sanity (every test but pylint and pep8, which check style, not compatibility),
#   2. a one-node simulated fleet driven by that ansible-core: provision.yml, provision.yml again (nothing may
#      change: idempotence), then drift.yml (the one-call check and the report: rc 0, no drift). This is what
#      `molecule test -s sim` did here before (converge, idempotence), without molecule's own set-up, its second node
#      (the same code paths) and its testinfra read-back, which stays on the pinned minor (`make molecule`).
# Usage: tests/compat/run.sh [MINOR...]   (default: the minors listed in tests/compat/minors.txt)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
py=${PY:-python3}
mapfile -t minors < <(if [ $# -gt 0 ]; then printf '%s\n' "$@"; else grep -Ev '^\s*(#|$)' tests/compat/minors.txt; fi)
start=$(date +%s)
# resolved: with the virtualenv cache, .venv is a link and a cached compat virtualenv must not point into a clone
community=$(realpath "$(PYTHONPATH='' "$repo/.venv/bin/python" -c 'import ansible_collections; print(list(ansible_collections.__path__)[0])')")
for minor in "${minors[@]}"; do
  [[ "$minor" =~ ^2\.[0-9]+$ ]] || { echo "compat: not an ansible-core minor: $minor" >&2; exit 2; }
  venv=$repo/.venv-compat-$minor
  # built by build_venv.sh (in place, or once per content key below $GPUFABRIC_VENV_CACHE: tests/lab/cached_venv.sh)
  if [ ! -f "$venv/.stamp" ] || [ -n "${GPUFABRIC_VENV_CACHE:-}" ]; then
    PY=$py tests/lab/cached_venv.sh "$venv" requirements.txt tests/compat/build_venv.sh tests/lab/venv_pip.sh -- \
      tests/compat/build_venv.sh "$minor" "$py" "$community"
    touch "$venv/.stamp"
  fi
  got=$("$venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')
  echo "=== [$(( $(date +%s) - start ))s] ansible-core $got: sanity"
  SANITY_VENV=$venv tests/sanity/run.sh --skip-test pylint --skip-test pep8
  echo "=== [$(( $(date +%s) - start ))s] ansible-core $got: one-node fleet: provision, idempotence, drift check"
  PYTHONPATH="$repo/.build:$repo/tests/lab" ANSIBLE_CONFIG="$repo/ansible.cfg" PATH="$venv/bin:$PATH" \
    "$venv/bin/python" tests/compat/smoke.py --fleet "$repo/.sim-compat-$minor"
  echo "=== [$(( $(date +%s) - start ))s] ansible-core $got: passed"
done
