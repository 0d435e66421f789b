#!/usr/bin/env bash
# cached_venv.sh DEST KEYFILE... -- BUILD...
# Makes DEST a virtualenv that the command BUILD builds into the directory named by $VENV.
#   - GPUFABRIC_VENV_CACHE unset or empty: BUILD builds DEST itself (VENV=DEST), as `make venv` always did.
#   - GPUFABRIC_VENV_CACHE set (.ci/run sets it, like the VM lab's image cache): the virtualenv is built once per
#     content key under that folder and DEST becomes a symlink to it. The key is the SHA-256 of the key files'
#     contents, BUILD's words, the interpreter's `python3 -VV`, the machine and this script: a changed requirements
#     file or build step builds a new one, an unchanged one is reused by every clone. A virtualenv is not
#     relocatable, so it is built in its final place; its .cached stamp is written last, and one without it (an
#     interrupted build) is removed and built again. Concurrent runs wait on a lock per key.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 DEST KEYFILE... -- BUILD..." >&2; exit 2; }
dest=$1; shift
keyfiles=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do keyfiles+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "$0: no -- before the build command" >&2; exit 2; }
shift
[ $# -gt 0 ] || { echo "$0: no build command" >&2; exit 2; }
cache=${GPUFABRIC_VENV_CACHE:-}
if [ -z "$cache" ]; then
  # no cache: a real directory at DEST (a link left by a cached run is replaced)
  if [ -L "$dest" ]; then rm -f "$dest"; fi
  VENV=$dest "$@"
  exit 0
fi
mkdir -p "$cache"
name=$(basename "$dest")
key=$({
  for f in "${keyfiles[@]}"; do printf 'file %s\n' "$f"; sha256sum <"$f"; done
  printf 'build'; printf ' %q' "$@"; printf '\n'
  "${PY:-python3}" -VV
  uname -m
  sha256sum <"$0"
} | sha256sum | cut -c1-16)
target=$cache/${name#.}-$key
exec 9>"$cache/.lock-${name#.}-$key"
flock 9
if [ ! -f "$target/.cached" ]; then
  rm -rf "$target"
  start=$(date +%s)
  VENV=$target "$@"
  echo "cached_venv: built $target in $(( $(date +%s) - start )) s"
  touch "$target/.cached"
fi
# last use: virtualenvs of this name that no run used for 14 days are removed (each is a few hundred MB)
touch "$target/.cached"
for old in "$cache/${name#.}"-*; do
  if [ "$old" = "$target" ] || [ ! -d "$old" ] || [ -L "$old" ]; then continue; fi
  if [ -z "$(find "$old/.cached" -mtime -14 2>/dev/null)" ] && flock -n "$cache/.lock-${old##*/}" true 2>/dev/null; then
    rm -rf "$old"
  fi
done
# DEST: a link to the cached virtualenv (a directory built without the cache is replaced)
if [ -e "$dest" ] && [ ! -L "$dest" ]; then rm -rf "$dest"; fi
ln -sfn "$target" "$dest"
