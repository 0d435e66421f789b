#!/usr/bin/env bash
# venv_pip.sh VENV PIP-INSTALL-ARGS...: `pip install ARGS` into the virtualenv VENV, done by uv (pinned below) when it
# can be had, else by VENV's own pip. The same packages either way: uv resolves the same requirement ranges from the
# same index; it downloads in parallel and links from its cache, so a cold `make venv` takes about a tenth of pip's
# time (docs/benchmarks.md: 17 s against 260-300 s for requirements.txt).
#   - uv itself is installed once, with the host's pip (python3 -m pip install --target), into
#     ${GPUFABRIC_VENV_CACHE:-<repo>/.build}/uv-<version>; a failed install or a failed uv run falls back to pip.
#   - GPUFABRIC_NO_UV=1: pip only.
# Used by the virtualenv builds (Makefile, tests/compat/build_venv.sh), which tests/lab/cached_venv.sh caches.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 VENV PIP-INSTALL-ARGS..." >&2; exit 2; }
venv=$1; shift
[ -x "$venv/bin/python" ] || { echo "$0: no virtualenv at $venv" >&2; exit 2; }
UV_VERSION=0.13.9
repo=$(cd "$(dirname "$0")/../.." && pwd)
tools=${GPUFABRIC_VENV_CACHE:-$repo/.build}/uv-$UV_VERSION

uv_bin() {
  [ "${GPUFABRIC_NO_UV:-}" != 1 ] || return 1
  if [ ! -x "$tools/bin/uv" ]; then
    mkdir -p "$(dirname "$tools")"
    (
      # one install at a time (both test lanes may build a virtualenv); into a scratch folder, moved in whole
      flock 9
      if [ ! -x "$tools/bin/uv" ]; then
        rm -rf "$tools.tmp"
        "${PY:-python3}" -m pip install -q --disable-pip-version-check --root-user-action=ignore --target "$tools.tmp" "uv==$UV_VERSION" >&2 \
          && rm -rf "$tools" && mv "$tools.tmp" "$tools"
      fi
    ) 9>"$tools.lock" || true
  fi
  [ -x "$tools/bin/uv" ] && echo "$tools/bin/uv"
}

if uv=$(uv_bin); then
  # the system's certificate store, as pip uses it
  if UV_NATIVE_TLS=1 "$uv" pip install -q --python "$venv/bin/python" "$@"; then
    exit 0
  fi
  echo "venv_pip: uv failed, installing with pip instead" >&2
fi
"$venv/bin/pip" install -q --disable-pip-version-check "$@"
