#!/usr/bin/env bash
# Run `ansible-test sanity` on a clean copy of the collection laid out as ansible_collections/gpufabric/node
# (ansible-test needs that path for real, a symlink is not enough). Only files git knows are copied.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
venv=${SANITY_VENV:-$repo/.venv-sanity}
# a private copy per run: concurrent runs must not pull the tree from under each other
mkdir -p "$repo/.build"
top=$(mktemp -d "$repo/.build/sanity.XXXXXX")
trap 'rm -rf "$top"' EXIT
dest=$top/ansible_collections/gpufabric/node
mkdir -p "$dest"
cd "$repo"
# tracked and untracked-but-not-ignored files: what a commit would carry
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] || continue
  mkdir -p "$dest/$(dirname "$f")"
  cp -a "$f" "$dest/$f"
done
cd "$dest"
# ansible-test bootstraps pip in its throw-away venvs with a script it downloads; that host is not reachable here.
pipver=$(PYTHONPATH='' "$venv/bin/python" - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="3.11", path="/usr/bin/python3"))["pip"])
PY
)
mkdir -p ~/.ansible/test/cache
cp "$repo/tests/sanity/get_pip_standin.py" ~/.ansible/test/cache/get_pip_"${pipver//./_}".py
if git init -q .; then git add -A >/dev/null 2>&1 || true; fi
py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
export PATH="$venv/bin:$PATH"
ansible-test sanity --local --python "$py" --color no "$@"
