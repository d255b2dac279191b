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
"$WORK/build/train_consumer"
if ldd "$WORK/build/core_consumer" | grep -E 'libLLVM|libclang|libprotobuf'; then
  echo "core_consumer links the compiler's libraries" >&2
  exit 1
fi
# The installed Python package (when the build has one): imported from the prefix alone, it
# compiles and runs the bundled model, and nnc.load finds the installed libnnc_runtime.
pkg=$(find "$WORK/prefix" -path '*-packages/nnc/__init__.py' -print -quit)
if [[ -n $pkg ]]; then
  PYTHONPATH=$(dirname "$(dirname "$pkg")") /usr/bin/python3 - "$WORK/prefix" \
    "$(cd "$(dirname "$0")/../../examples/models/tiny_cnn" && pwd)" <<'PY'
import os, sys
import numpy
import nnc
from nnc import _build
prefix, model = sys.argv[1], sys.argv[2]
assert nnc.__file__.startswith(prefix), nnc.__file__
assert _build.RUNTIME_LIBRARY.startswith(prefix) and os.path.exists(_build.RUNTIME_LIBRARY), \
    _build.RUNTIME_LIBRARY
m = nnc.compile(os.path.join(model, "model.onnx"))
x = nnc.load_tensor(os.path.join(model, "test_data_set_0", "input_0.pb"))
want = nnc.load_tensor(os.path.join(model, "test_data_set_0", "output_0.pb"))
assert numpy.allclose(m(x)[0], want, rtol=1e-3, atol=1e-7)
print("installed python package:", os.path.dirname(nnc.__file__))
PY
fi
