#!/usr/bin/env bash
# Installs nnc from BUILD_DIR into a temporary prefix, then configures, builds and runs a
# separate CMake project that uses find_package(nnc).
set -euo pipefail
BUILD_DIR=$1
SRC_DIR=$(cd "$(dirname "$0")" && pwd)/consumer
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD_DIR" --prefix "$WORK/prefix" >/dev/null
cmake -S "$SRC_DIR" -B "$WORK/build" -G Ninja -DCMAKE_PREFIX_PATH="$WORK/prefix" >/dev/null
ninja -C "$WORK/build" >/dev/null
"$WORK/build/consumer"
"$WORK/build/core_consumer"
if ldd "$WORK/build/core_consumer" | grep -E 'libLLVM|libclang|libprotobuf'; then
  echo "core_consumer links the compiler's libraries" >&2
  exit 1
fi
