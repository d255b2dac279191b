#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) in their own folder and runs one for a while.
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#
# TARGET: onnx_import (model bytes -> load, check, import, optimize, verify, interpret when
# small), text_ir (the .nir parser as nnc-opt reads it, the print/parse round trip, the
# default pipeline, interpret when small), kernel_ir (the .kir parser, the print/parse round
# trip, the verifier and the backends' body of verified kernels), tensor_file (the .pb
# TensorProto and .npy readers) or cpu_run (a small model compiled and run for the CPU beside
# the interpreter: an LLVM compile per input, so far fewer inputs a second).
#
# The build is clang-15 with -fsanitize=fuzzer,address in $NNC_FUZZ_BUILD_DIR (default
# build-fuzz/; NNC_FUZZ_NO_BUILD=1 skips the build of a binary that is there); extra cmake
# arguments come from $NNC_FUZZ_CMAKE_ARGS (say a ccache launcher).
# The seed corpus is made once from the ONNX node tests ($NNC_SHARED, else ../shared), the
# lit tests' .nir and .kir files and the kept findings and hand-made hostile inputs of
# tests/fuzz/regressions/TARGET (tests/fuzz/make_index_seeds.py writes the index ones,
# make_quant_seeds.py the quantized models); the corpus grows in build-fuzz/corpus/TARGET
# across runs. onnx_import and cpu_run also take tests/fuzz/onnx.dict (op and attribute names,
# dtype codes, float bit patterns such as NaN, inf and denormals) as their dictionary. An input that crashes, leaks, takes
# over $NNC_FUZZ_TIMEOUT seconds (default 10) or makes the process over $NNC_FUZZ_RSS_MB MiB
# (default 2048) is a finding: it lands in build-fuzz/findings/TARGET/ (crash-*, leak-*,
# timeout-*, oom-*). The run keeps going past findings (libFuzzer's fork mode) unless
# NNC_FUZZ_STOP=1, and exits 1 when it made any.
# Reproduce one with
#   build-fuzz/tests/fuzz/fuzz_TARGET FILE
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ $# -lt 2 ]; then
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
TARGET=$1
SECONDS_TO_RUN=$2
shift 2
case "$TARGET" in
  onnx_import | text_ir | kernel_ir | tensor_file | cpu_run) ;;
  *) echo "fuzz.sh: unknown target '$TARGET' (onnx_import, text_ir, kernel_ir, tensor_file," \
    "cpu_run)" >&2
    exit 2 ;;
esac
BUILD_DIR=${NNC_FUZZ_BUILD_DIR:-build-fuzz}
SHARED=${NNC_SHARED:-$ROOT/../shared}
CC_BIN=${NNC_FUZZ_CC:-clang-15}
CXX_BIN=${NNC_FUZZ_CXX:-clang++-15}
for tool in "$CC_BIN" "$CXX_BIN"; do
  command -v "$tool" >/dev/null || {
    echo "fuzz.sh: $tool not found (Debian: clang-15, which brings libclang-common-15-dev" \
      "with libFuzzer and ASan; scripts/setup.sh installs it)" >&2
    exit 1
  }
done

# Configure (once) and build the one target.
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086 # NNC_FUZZ_CMAKE_ARGS is a list of arguments.
  CC=$CC_BIN CXX=$CXX_BIN cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    -DNNC_FUZZ=ON -DNNC_BUILD_TESTS=OFF -DNNC_BUILD_BENCH=OFF ${NNC_FUZZ_CMAKE_ARGS:-} >/dev/null
fi
# NNC_FUZZ_NO_BUILD=1 runs the binary as it is (say while the same folder builds other targets).
if [ "${NNC_FUZZ_NO_BUILD:-0}" != 1 ] || [ ! -x "$BUILD_DIR/tests/fuzz/fuzz_$TARGET" ]; then
  ninja -C "$BUILD_DIR" "fuzz_$TARGET"
fi
FUZZER=$BUILD_DIR/tests/fuzz/fuzz_$TARGET

# The seed corpus, made once per target.
SEEDS=$BUILD_DIR/seeds/$TARGET
if [ ! -d "$SEEDS" ]; then
  mkdir -p "$SEEDS.tmp"
  case "$TARGET" in
    onnx_import | cpu_run)
      if [ -d "$SHARED/onnx-tests/node" ]; then
        for m in "$SHARED"/onnx-tests/node/*/model.onnx; do
          cp "$m" "$SEEDS.tmp/$(basename "$(dirname "$m")").onnx"
        done
      else
        echo "fuzz.sh: no ONNX node tests at $SHARED/onnx-tests; starting from an empty corpus"
      fi
      ;;
    text_ir | kernel_ir)
      find tests/lit -name "*.$([ "$TARGET" = text_ir ] && echo nir || echo kir)" | while read -r f; do
        cp "$f" "$SEEDS.tmp/$(echo "${f#tests/lit/}" | tr / _)"
      done
      ;;
    tensor_file)
      if [ -d "$SHARED/onnx-tests/node" ]; then
        # The test data's TensorProtos under 16 KiB (larger ones only slow the mutator).
        find "$SHARED/onnx-tests/node" -name '*.pb' -size -16k | while read -r f; do
          rel=${f#"$SHARED"/onnx-tests/node/}
          cp "$f" "$SEEDS.tmp/$(echo "$rel" | tr / _)"
        done
      fi
      # .npy files of each dtype and layout numpy writes (written here without numpy).
      python3 - "$SEEDS.tmp" <<'PY'
import struct
import sys

out = sys.argv[1]


def npy(name, descr, shape, payload, fortran=False, version=1):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False",
        "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0])
    size_bytes = 2 if version == 1 else 4
    pad = (64 - (6 + 2 + size_bytes + len(header) + 1) % 64) % 64
    header = header.encode() + b" " * pad + b"\n"
    size = struct.pack("<H" if version == 1 else "<I", len(header))
    with open(f"{out}/{name}.npy", "wb") as f:
        f.write(b"\x93NUMPY" + bytes([version, 0]) + size + header + payload)


npy("f32_2x3", "<f4", (2, 3), struct.pack("<6f", *range(6)))
npy("f64_scalar", "<f8", (), struct.pack("<d", 3.5))
npy("i64_4", "<i8", (4,), struct.pack("<4q", 0, -1, 2, -3))
npy("i32_fortran", "<i4", (2, 3), struct.pack("<6i", *range(6)), fortran=True)
npy("u8_empty", "|u1", (0, 3), b"")
npy("bool_3", "|b1", (3,), b"\x01\x00\x01")
npy("f16_2", "<f2", (2,), struct.pack("<2e", 1.0, -2.0))
npy("i8_big_endian", ">i8", (3,), struct.pack(">3q", 0, 1, 2))
npy("f32_v2", "<f4", (1,), struct.pack("<f", 1.5), version=2)
PY
      ;;
  esac
  for kept in tests/fuzz/regressions/"$TARGET" \
    $([ "$TARGET" = cpu_run ] && echo tests/fuzz/regressions/onnx_import); do
    if [ -d "$kept" ]; then cp "$kept"/* "$SEEDS.tmp"/; fi
  done
  mv "$SEEDS.tmp" "$SEEDS"
fi

CORPUS=$BUILD_DIR/corpus/$TARGET
FINDINGS=$BUILD_DIR/findings/$TARGET
mkdir -p "$CORPUS" "$FINDINGS"
before=$(find "$FINDINGS" -type f | wc -l)
KEEP_GOING=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
if [ "${NNC_FUZZ_STOP:-0}" = 1 ]; then
  KEEP_GOING=()
fi
# The ONNX targets' dictionary: op and attribute names, dtype codes, float bit patterns.
DICT=()
case "$TARGET" in
  onnx_import | cpu_run) DICT=(-dict="$ROOT/tests/fuzz/onnx.dict") ;;
esac
status=0
"$FUZZER" "$CORPUS" "$SEEDS" -max_total_time="$SECONDS_TO_RUN" "${DICT[@]}" \
  -timeout="${NNC_FUZZ_TIMEOUT:-10}" -rss_limit_mb="${NNC_FUZZ_RSS_MB:-2048}" \
  -artifact_prefix="$FINDINGS/" -print_final_stats=1 -print_funcs=0 "${KEEP_GOING[@]}" "$@" || status=$?
after=$(find "$FINDINGS" -type f | wc -l)
echo "fuzz.sh: $TARGET ran ${SECONDS_TO_RUN}s; findings in $FINDINGS: $((after - before)) new, $after in all"
if [ "$after" -gt "$before" ] || [ "$status" -ne 0 ]; then
  ls -t "$FINDINGS" | head -20
  exit 1
fi
