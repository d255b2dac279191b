#!/usr/bin/env bash
# Installs every Debian package nnc needs to build, test and benchmark. Idempotent.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build git python3 pkg-config
  # clang-15 also brings libclang-common-15-dev: libFuzzer and the sanitizer runtimes (ASan,
  # UBSan, TSan) that scripts/fuzz.sh and scripts/sanitize.sh build with.
  llvm-15-dev llvm-15-tools libclang-15-dev clang-15 libclang-common-15-dev
  zlib1g-dev libzstd-dev libtinfo-dev libxml2-dev libedit-dev libffi-dev
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo
  # A simulated OpenCL device that reports data races, barrier divergence and out-of-bounds
  # accesses: the test suite runs the local-memory kernels under it (tests/artifact, oclgrind).
  oclgrind
  libeigen3-dev libfmt-dev
  libprotobuf-dev protobuf-compiler libonnx-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev libcli11-dev
  # The 1,797 digits images (sklearn/datasets/data/digits.csv.gz) that `nnc train`'s end-to-end
  # test trains on (tests/cli/train_test.py reads the file; no sklearn import).
  python3-sklearn
  # The Python package (python/, `import nnc`): pybind11's headers and CMake config (without
  # them the build skips the package), and Python.h for the extension module.
  pybind11-dev python3-pybind11 python3-dev
  # The package's arrays in and out are numpy's.
  python3-numpy
  # tests/python runs under pytest (ctest's python_package).
  python3-pytest
)

exec bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" setup "${PKGS[@]}"
