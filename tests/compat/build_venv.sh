#!/usr/bin/env bash
# build_venv.sh MINOR PYTHON COMMUNITY: the compat tier's virtualenv for one ansible-core minor, built into $VENV
# (tests/lab/cached_venv.sh names it; tests/compat/run.sh calls that). COMMUNITY: the main virtualenv's
# ansible_collections folder (the community collections the playbooks use).
set -euo pipefail
minor=$1 py=$2 community=$3
[ -n "${VENV:-}" ] || { echo "$0: VENV is not set" >&2; exit 2; }
"$py" -m venv "$VENV"
pipi=$(dirname "$0")/../lab/venv_pip.sh
# the project's own requirements, with ansible-core at this minor; ansible (the community package) and the
# linters are left out: their releases pin one ansible-core each. The community collections the playbooks use
# come from the main virtualenv's ansible package (their requires_ansible admits every minor tested here).
grep -Ev '^(ansible-core|ansible|ansible-lint|molecule|pytest-testinfra)\b' requirements.txt >"$VENV/requirements.txt"
"$pipi" "$VENV" "ansible-core==$minor.*" -r "$VENV/requirements.txt"
# the community collections the playbooks use, from the main virtualenv's ansible package, found the way
# ansible-core finds that package's collections: ansible_collections on sys.path
site=$("$VENV/bin/python" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
for c in ansible/posix kubernetes/core; do
  mkdir -p "$site/ansible_collections/${c%/*}"
  ln -sfn "$community/$c" "$site/ansible_collections/$c"
done
reqs=$("$VENV/bin/python" -c 'import ansible_test,os;print(os.path.dirname(ansible_test.__file__))')/_data/requirements
args=()
for f in "$reqs"/sanity.*.txt; do
  case $(basename "$f") in sanity.pylint.txt|sanity.pep8.txt) continue ;; esac
  args+=(-r "$f")
done
"$pipi" "$VENV" "${args[@]}"
