#!/usr/bin/env bash
# Installs every Debian package nnc needs to build, test and benchmark. Idempotent.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build git python3 pkg-config
  llvm-15-dev llvm-15-tools libclang-15-dev clang-15
  zlib1g-dev libzstd-dev libtinfo-dev libxml2-dev libedit-dev libffi-dev
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo
  libeigen3-dev libfmt-dev
  libprotobuf-dev protobuf-compiler libonnx-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev libcli11-dev
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
