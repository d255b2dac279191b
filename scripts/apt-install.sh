#!/usr/bin/env bash
# apt-install.sh LABEL PACKAGE...: installs the Debian packages that are not installed yet
# (idempotent; sudo when not root). Shared by setup.sh and setup-bench.sh.
set -euo pipefail

label="$1"
shift

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "$label: all $# packages already installed"
  exit 0
fi

echo "$label: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
