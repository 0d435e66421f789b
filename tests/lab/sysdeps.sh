#!/usr/bin/env bash
# Install the system packages a make target needs, from package lists (one Debian package name a line, # comments).
#   tests/lab/sysdeps.sh tests/lab/apt-demo.txt [more lists...]
# On Debian or Ubuntu as root the missing ones are installed with apt-get (idempotent: nothing runs when all are
# there). Elsewhere, or as another user, it prints exactly what is missing and how to install it, and fails.
set -euo pipefail
pkgs=()
for list in "$@"; do
  while IFS= read -r line; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    if [ -n "$line" ]; then pkgs+=("$line"); fi
  done < "$list"
done
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "sysdeps: this is not a Debian or Ubuntu system; install the equivalents of: ${pkgs[*]}" >&2
  echo "sysdeps: (see $*), then run make again" >&2
  exit 1
fi
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then missing+=("$p"); fi
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "sysdeps: missing system packages: ${missing[*]}" >&2
  echo "sysdeps: install them as root: apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "sysdeps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
