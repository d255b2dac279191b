#!/usr/bin/env bash
# Configures and builds nnc in ./build (Release, Ninja). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${NNC_BUILD_DIR:-build}
JOBS=${NNC_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$BUILD_DIR" -j "$JOBS"
