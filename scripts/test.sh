#!/usr/bin/env bash
# Installs what nnc needs, builds it, and runs every test (unit, lit, ONNX conformance,
# install/find_package), ending with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BUILD_DIR=${NNC_BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest --output-on-failure -j "${NNC_JOBS:-$(nproc)}" "$@"
