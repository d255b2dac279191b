#!/usr/bin/env bash
# Quick start: installs what nnc needs, builds it, and runs the bundled example model
# (examples/models/tiny_cnn, a small CNN in ONNX format), printing its outputs and timing
# and checking them against the expected output stored beside the model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
MODEL=examples/models/tiny_cnn
OUT=$(mktemp -d)
echo "== nnc run $MODEL/model.onnx"
./build/tools/nnc/nnc run "$MODEL/model.onnx" --inputs-dir "$MODEL/test_data_set_0" \
  --output-dir "$OUT" --expected-dir "$MODEL/test_data_set_0"
rm -rf "$OUT"
