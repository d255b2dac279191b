#!/bin/bash
# Packs what bench/device_cpu.py needs on a lent machine that has no Debian packages and takes
# at most 64 MiB of carried files: this build's nnc with every shared library it loads (its own
# ld.so among them, so the host's glibc does not matter), and weight-stripped copies of
# bench/torch_models.py's exports (bench/refill_weights.py strip; refilled there for timing
# only) with their inputs' shapes instead of the inputs.
#
#   bash bench/device_bundle.sh [OUT] [MODEL ...]
#
# OUT (default build/device) gets bundle.tar.xz, models.tar.xz, device_cpu.py, device_ab.py,
# refill_weights.py and what they import (nncbench/, ort/ort_bench.py); carry it (a path under build/, which git ignores) and run there
#   python3 OUT/device_cpu.py --carry OUT --out $OUT/cpu
# then, for kernel-config A/Bs on a model it unpacked, OUT/device_ab.py (its docstring).
# Models come from ~/.cache/nnc/torch-models (bench/torch_models.py exports them; TORCH_MODELS
# overrides). Needs xz, ldd and python3 with onnx and numpy (/usr/bin/python3 after
# scripts/setup-bench.sh). Compressing libLLVM takes about 5 minutes on 2 cores.
# ONNX Runtime's C library (bench/ort's, scripts/setup-bench.sh installs it; ORT_LIBRARY
# overrides, ORT_LIBRARY=none leaves it out) goes into the bundle too, so that the lent
# machine runs `nnc bench --compare ort`, which alternates the two engines run by run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build/device}
shift || true
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  MODELS=(vit_b_16 efficientnet_b0 matmul_197x1x768_w768x2304 matmul_1x197x768_w768x2304
    silu_1x96x112x112 resnet50 convnext_tiny swin_t encoder_seq_first mobilenet_v2
    densenet121 regnet_y_400mf)
fi
NNC=${NNC:-$ROOT/build/tools/nnc/nnc}
SRC=${TORCH_MODELS:-$HOME/.cache/nnc/torch-models}
PY=${PY:-/usr/bin/python3}
# The lent machine takes 64 MiB with the working tree included: what git would send (tracked
# and untracked-not-ignored files) is counted, and half a MiB kept spare.
TREE=$( (git -C "$ROOT" ls-files -z; git -C "$ROOT" ls-files -z --others --exclude-standard) |
  (cd "$ROOT" && du -cb --files0-from=- 2>/dev/null) | tail -1 | cut -f1)
LIMIT=$((64 * 1024 * 1024 - TREE - 512 * 1024))

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$OUT" "$STAGE/b/lib" "$STAGE/m"

# nnc and its libraries (ld.so too: run as lib/ld-linux-x86-64.so.2 --library-path lib nnc).
cp "$NNC" "$STAGE/b/nnc"
ldd "$NNC" | awk '$3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}' | sort -u |
  while read -r lib; do cp -L "$lib" "$STAGE/b/lib/"; done
strip --strip-unneeded "$STAGE/b/nnc" "$STAGE"/b/lib/*.so* 2>/dev/null || true
[ -f "$STAGE/b/lib/ld-linux-x86-64.so.2" ] || { echo "device_bundle: no ld-linux in ldd's list" >&2; exit 1; }
ORT=${ORT_LIBRARY:-$ROOT/bench/ort/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1}
if [ "$ORT" != none ]; then
  [ -f "$ORT" ] || { echo "device_bundle: no $ORT (scripts/setup-bench.sh installs it; ORT_LIBRARY=none leaves it out)" >&2; exit 1; }
  mkdir -p "$STAGE/b/ort"
  cp -L "$ORT" "$STAGE/b/ort/libonnxruntime.so.1"
  # Its own needs that nnc lacks (libdl, librt, libpthread): from this host, with its libc.
  ldd "$ORT" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    [ -f "$STAGE/b/lib/$(basename "$lib")" ] || cp -L "$lib" "$STAGE/b/lib/"
  done
fi

for m in "${MODELS[@]}"; do
  [ -f "$SRC/$m/model.onnx" ] || { echo "device_bundle: no $SRC/$m/model.onnx (bench/torch_models.py --only $m exports it)" >&2; exit 1; }
  mkdir -p "$STAGE/m/$m"
  "$PY" "$ROOT/bench/refill_weights.py" strip "$SRC/$m/model.onnx" "$STAGE/m/$m/model.onnx" >/dev/null
  "$PY" -c "import json, numpy as np, sys; json.dump(list(np.load(sys.argv[1]).shape), open(sys.argv[2], 'w'))" \
    "$SRC/$m/input.npy" "$STAGE/m/$m/shape.json"
done

# The x86 branch filter before LZMA2 takes 6% off (libLLVM is mostly code): 59 MB instead of
# 63 with ONNX Runtime in.
tar -C "$STAGE/b" -cf - . | xz -T0 --x86 --lzma2=preset=9e >"$OUT/bundle.tar.xz"
tar -C "$STAGE/m" -cf - . | xz -T0 -6 >"$OUT/models.tar.xz"
cp "$ROOT/bench/device_cpu.py" "$ROOT/bench/device_ab.py" "$ROOT/bench/refill_weights.py" "$OUT/"
mkdir -p "$OUT/nncbench" "$OUT/ort"
cp "$ROOT"/bench/nncbench/*.py "$OUT/nncbench/"
cp "$ROOT/bench/ort/ort_bench.py" "$OUT/ort/"
SIZE=$(du -cb "$OUT" | tail -1 | cut -f1)
echo "$OUT: $((SIZE / 1024 / 1024)) MiB ($(ls "$OUT" | tr '\n' ' '))"
if [ "$SIZE" -gt "$LIMIT" ]; then
  echo "device_bundle: over $((LIMIT / 1024 / 1024)) MiB (a lent machine takes 64 with the working tree); name fewer models, or ORT_LIBRARY=none" >&2
  exit 1
fi
