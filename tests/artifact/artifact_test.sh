#!/usr/bin/env bash
# The artifact tests (tests/artifact/CMakeLists.txt); one part per ctest test. Exit 77: skipped.
# Usage: artifact_test.sh NNC NNC_EXEC CHECK RUNTIME_LIB SHARED_DIR SOURCE_DIR WORK_DIR PART
set -uo pipefail
nnc=$1 exec=$2 check=$3 runtime=$(realpath "$4") shared=$5 src=$6 work=$7 part=$8
models=$shared/models
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
need_models() {
  for m in "$@"; do
    if [[ ! -f $models/$m/model.onnx ]]; then
      echo "SKIP: $models/$m/model.onnx is absent (the shared models live beside the repo, or"
      echo "      where NNC_SHARED points); nothing of this part ran"
      exit 77
    fi
  done
}
# compile MODEL: the artifact of a shared model in $work/MODEL (for this part only).
compile() {
  local out=$work/$part/$1
  rm -rf "$out"
  "$nnc" compile "$models/$1/model.onnx" -o "$out" --emit=lib --cpu x86-64-v3 ||
    fail "nnc compile $1 --emit=lib"
  [[ -f $out/lib$1.so && -f $out/$1.h ]] || fail "$1: lib$1.so or $1.h missing"
}

case $part in
links)
  # Neither the runtime library nor nnc-exec pulls in the compiler.
  for bin in "$runtime" "$exec" "$check"; do
    deps=$(ldd "$bin") || fail "ldd $bin"
    grep -q 'libc\.so' <<<"$deps" || fail "ldd $bin lists no libc"
    if grep -E 'libLLVM|libclang|libprotobuf' <<<"$deps"; then fail "$bin links the compiler"; fi
    needed=$(readelf -d "$bin" | grep NEEDED)
    if grep -E 'LLVM|clang|protobuf' <<<"$needed"; then fail "$bin: NEEDED names the compiler"; fi
    echo "ok: $(basename "$bin") links no libLLVM, libclang or libprotobuf"
  done
  # nnc itself does (so the pattern matches what it should).
  # (ldd's output captured first: with pipefail, grep -q closing the pipe early fails ldd)
  nnc_deps=$(ldd "$nnc") || fail "ldd nnc"
  grep -q libLLVM <<<"$nnc_deps" || fail "ldd nnc shows no libLLVM: the check above proves nothing"
  ;;
c_abi_models)
  need_models resnet18_b1 bert_layer_b1
  for m in resnet18_b1 bert_layer_b1; do
    compile $m
    for t in 1 2; do
      "$check" "$work/$part/$m/lib$m.so" "$models/$m/test_data_set_0" $t ||
        fail "$m (threads $t) through the C ABI"
    done
  done
  ;;
storage_formats)
  # Kernels that call the scalar helpers (f16 rounding, f8 encode/decode) load and give the
  # JIT's bits: the helpers live in libnnc_runtime.so, not only in the compiler.
  out=$work/$part
  rm -rf "$out" && mkdir -p "$out/in"
  # input_0.pb: dims [4], f32, raw 1.5 -0.375 100 2.7
  printf '\x08\x04\x10\x01\x4a\x10\x00\x00\xc0\x3f\x00\x00\xc0\xbe\x00\x00\xc8\x42\xcd\xcc\x2c\x40' \
    >"$out/in/input_0.pb"
  "$nnc" compile "$src/tests/artifact/storage_formats.nir" -o "$out/lib" --emit=lib ||
    fail "nnc compile storage_formats.nir --emit=lib"
  "$exec" "$out/lib/libstorage_formats.so" --inputs-dir "$out/in" --output-dir "$out/exec" ||
    fail "nnc-exec on an artifact that calls the scalar helpers"
  "$nnc" run "$src/tests/artifact/storage_formats.nir" --inputs-dir "$out/in" \
    --output-dir "$out/jit" || fail "nnc run storage_formats.nir"
  cmp "$out/exec/output_0.pb" "$out/jit/output_0.pb" || fail "nnc-exec and nnc run differ"
  echo "ok: f16 and f8 helpers resolve in libnnc_runtime.so; nnc-exec gives nnc run's bits"
  ;;
workspace)
  # A kernel whose scratch is each thread's own (conv's blocked im2col blocks) asks the
  # runtime for it (nnc_workspace): the artifact loads with libnnc_runtime.so alone and gives
  # nnc run's bits at 1 and 2 threads.
  out=$work/$part
  rm -rf "$out" && mkdir -p "$out/in"
  # input_0.pb: dims [1, 8, 4, 6, 7], f32, raw 1344 floats (i mod 7 - 3) / 4
  python3 - "$out/in/input_0.pb" <<'PY' || fail "writing the input"
import struct, sys
dims, n = [1, 8, 4, 6, 7], 1344
raw = struct.pack("<%df" % n, *[((i % 7) - 3) / 4 for i in range(n)])
def varint(v):
    b = b""
    while True:
        if v < 0x80:
            return b + bytes([v])
        b += bytes([(v & 0x7F) | 0x80])
        v >>= 7
msg = b"".join(b"\x08" + varint(d) for d in dims) + b"\x10\x01" + b"\x4a" + varint(len(raw)) + raw
open(sys.argv[1], "wb").write(msg)
PY
  NNC_CONV_ALGO=blocked "$nnc" compile "$src/tests/artifact/workspace.nir" -o "$out/lib" \
    --emit=lib || fail "nnc compile workspace.nir --emit=lib"
  nm -D --undefined-only "$out/lib/libworkspace.so" | grep -q nnc_workspace ||
    fail "the artifact does not call nnc_workspace: the check below proves nothing"
  NNC_CONV_ALGO=blocked "$nnc" run "$src/tests/artifact/workspace.nir" --inputs-dir "$out/in" \
    --output-dir "$out/jit" || fail "nnc run workspace.nir"
  for t in 1 2; do
    "$exec" "$out/lib/libworkspace.so" --inputs-dir "$out/in" --output-dir "$out/exec$t" \
      --threads $t || fail "nnc-exec on an artifact with per-thread scratch ($t threads)"
    cmp "$out/exec$t/output_0.pb" "$out/jit/output_0.pb" ||
      fail "nnc-exec ($t threads) and nnc run differ"
  done
  echo "ok: nnc_workspace resolves in libnnc_runtime.so; nnc-exec gives nnc run's bits"
  ;;
oclgrind)
  # Issue 15: the OpenCL kernels with local memory and barriers (the GEMM's local tiles, the
  # work-group tree reduction), written for a generic GPU, run under oclgrind (a simulated
  # device that reports data races, barrier divergence, out-of-bounds and API errors) through
  # nnc-exec, a process without LLVM 15 (oclgrind's LLVM 14 crashes beside it); its outputs
  # match nnc run's on the CPU.
  if ! command -v oclgrind >/dev/null; then
    echo "SKIP: oclgrind is not installed (Debian package oclgrind; scripts/setup.sh installs it)"
    exit 77
  fi
  out=$work/$part
  rm -rf "$out" && mkdir -p "$out/in"
  model=$src/tests/artifact/oclgrind_gemm_reduce.nir
  "$nnc" compile "$model" -o "$out/lib" --emit=lib --target opencl --generic-gpu ||
    fail "nnc compile --target opencl --generic-gpu"
  grep -q '__local' "$out/lib/liboclgrind_gemm_reduce.so" ||
    fail "the program has no local memory: nothing for oclgrind to check"
  # input_0.pb: f32[37,70], x[i] = ((i * 37) % 101) / 50 - 1
  python3 - "$out/in/input_0.pb" <<'PY' || fail "writing the input"
import struct, sys
vals = [((i * 37) % 101) / 50.0 - 1.0 for i in range(37 * 70)]
raw = struct.pack('<%df' % len(vals), *vals)
def varint(n):
    out = b''
    while True:
        b, n = n & 0x7f, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])
msg = b'\x08' + varint(37) + b'\x08' + varint(70) + b'\x10' + varint(1) + b'\x4a' + varint(len(raw)) + raw
open(sys.argv[1], 'wb').write(msg)
PY
  oclgrind --check-api --data-races --log "$out/oclgrind.log" \
    "$exec" "$out/lib/liboclgrind_gemm_reduce.so" --inputs-dir "$out/in" --output-dir "$out/got" ||
    fail "nnc-exec under oclgrind"
  if [[ -s $out/oclgrind.log ]]; then
    cat "$out/oclgrind.log"
    fail "oclgrind reported errors"
  fi
  "$nnc" run "$model" --inputs-dir "$out/in" --expected-dir "$out/got" ||
    fail "the simulated device's outputs differ from the CPU's"
  echo "ok: local-tile GEMM and work-group reduction clean under oclgrind; outputs match the CPU"
  ;;
exec_models)
  need_models lenet_b1 mlp_b1 lenet_b32 mlp_b32
  for m in lenet_b1 mlp_b1 lenet_b32 mlp_b32; do
    compile $m
    rm -rf "$work/$part/out_$m"
    "$exec" "$work/$part/$m/lib$m.so" --inputs-dir "$models/$m/test_data_set_0" \
      --output-dir "$work/$part/out_$m" --threads 2 || fail "nnc-exec $m"
    "$check" --compare "$work/$part/out_$m" "$models/$m/test_data_set_0" || fail "$m outputs"
  done
  # --profile: every kernel once, with its time per run, and their sum.
  prof=$("$exec" "$work/$part/lenet_b1/liblenet_b1.so" --inputs-dir "$models/lenet_b1/test_data_set_0" \
    --iterations 3 --warmup 1 --profile) || fail "nnc-exec --profile"
  kernels=$(sed -n 's/^nnc-exec: \([0-9]*\) kernels, [0-9.]* ms per run in kernels (4 runs)$/\1/p' <<<"$prof")
  [[ -n $kernels && $kernels -gt 0 ]] || fail "no kernel summary in: $prof"
  [[ $(grep -c '^ *[0-9.]* ms  *[0-9.]*%  ' <<<"$prof") -eq $kernels ]] ||
    fail "not one line per kernel: $prof"
  # Recurrent node tests: their time loop (a scan) is unrolled into the artifact.
  for t in test_lstm_batchwise test_gru_defaults test_rnn_seq_length; do
    d=$shared/onnx-tests/node/$t
    [[ -f $d/model.onnx ]] || continue
    "$nnc" compile "$d/model.onnx" -o "$work/$part/$t" --emit=lib --name "$t" ||
      fail "nnc compile $t --emit=lib"
    rm -rf "$work/$part/out_$t"
    "$exec" "$work/$part/$t/lib$t.so" --inputs-dir "$d/test_data_set_0" \
      --output-dir "$work/$part/out_$t" || fail "nnc-exec $t"
    "$check" --compare "$work/$part/out_$t" "$d/test_data_set_0" || fail "$t outputs"
  done
  ;;
exec_opencl)
  # The OpenCL program in an artifact, run by nnc-exec (no LLVM linked; PoCL in CI).
  need_models lenet_b1
  if ! grep -q '^opencl:' <<<"$("$nnc" devices 2>/dev/null)"; then
    echo "SKIP: no OpenCL device (nnc devices lists none)"
    exit 77
  fi
  out=$work/$part/lenet_b1
  rm -rf "$out"
  "$nnc" compile "$models/lenet_b1/model.onnx" -o "$out" --emit=lib --target opencl ||
    fail "nnc compile lenet_b1 --emit=lib --target opencl"
  "$exec" "$out/liblenet_b1.so" --inputs-dir "$models/lenet_b1/test_data_set_0" \
    --output-dir "$out/out" || fail "nnc-exec on the OpenCL artifact"
  "$check" --compare "$out/out" "$models/lenet_b1/test_data_set_0" || fail "OpenCL outputs"
  # --profile: the device's profiling events, one line per kernel.
  prof=$("$exec" "$out/liblenet_b1.so" --inputs-dir "$models/lenet_b1/test_data_set_0" \
    --iterations 2 --profile) || fail "nnc-exec --profile (OpenCL)"
  kernels=$(sed -n 's/^nnc-exec: \([0-9]*\) kernels, [0-9.]* ms per run in kernels (2 runs)$/\1/p' <<<"$prof")
  [[ -n $kernels && $kernels -gt 0 ]] || fail "no kernel summary in: $prof"
  [[ $(grep -c '^ *[0-9.]* ms  *[0-9.]*%  ' <<<"$prof") -eq $kernels ]] ||
    fail "not one line per kernel: $prof"
  # It carries the program's binary for this device, and the runtime loads that instead of
  # building the source; an artifact compiled without it builds the source.
  info=$("$exec" "$out/liblenet_b1.so" --info) || fail "nnc-exec --info"
  grep -q "device binary for" <<<"$info" || fail "no device binary in the notes: $info"
  grep -q "program from the artifact's device binary" <<<"$info" ||
    fail "the runtime did not load the device binary: $info"
  "$nnc" compile "$models/lenet_b1/model.onnx" -o "$out/src" --emit=lib --target opencl \
    --no-device-binary || fail "nnc compile --no-device-binary"
  info=$("$exec" "$out/src/liblenet_b1.so" --info) || fail "nnc-exec --info (source only)"
  grep -q "program built from its OpenCL C source" <<<"$info" ||
    fail "a source-only artifact did not build its source: $info"
  "$exec" "$out/src/liblenet_b1.so" --inputs-dir "$models/lenet_b1/test_data_set_0" \
    --output-dir "$out/src/out" || fail "nnc-exec on the source-only OpenCL artifact"
  "$check" --compare "$out/src/out" "$models/lenet_b1/test_data_set_0" || fail "OpenCL outputs (source only)"
  ;;
bad_input)
  # expect_error DESCRIPTION PATTERN CMD...: non-zero exit, one line naming the problem.
  expect_error() {
    local what=$1 pattern=$2
    shift 2
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    [[ $rc -ne 0 ]] || fail "$what: exit 0"
    [[ $rc -lt 128 ]] || fail "$what: crashed (status $rc): $err"
    [[ $(wc -l <<<"$err") -eq 1 ]] || fail "$what: not one line: $err"
    grep -qE "$pattern" <<<"$err" || fail "$what: '$err' does not match '$pattern'"
    echo "ok: $what: $err"
  }
  mkdir -p "$work/$part"
  expect_error "missing artifact" "nnc-exec: error: .*no-such\.so: no such file" \
    "$exec" "$work/$part/no-such.so" --inputs-dir "$work"
  printf 'not an ELF file' >"$work/$part/junk.so"
  expect_error "not a library" "nnc-exec: error: .*junk\.so: cannot load" \
    "$exec" "$work/$part/junk.so" --inputs-dir "$work"
  expect_error "a library that is no artifact" "not an nnc artifact" \
    "$exec" "$runtime" --inputs-dir "$work"
  need_models lenet_b1 mlp_b1
  compile lenet_b1
  expect_error "missing input file" "input_0\.pb: cannot open" \
    "$exec" "$work/$part/lenet_b1/liblenet_b1.so" --inputs-dir "$work/$part/nothing-here"
  # MLP's input (1x784) into LeNet (1x1x28x28).
  expect_error "wrong input shape" "input '.*': shape 1x784 given, but the artifact runs 1x1x28x28" \
    "$exec" "$work/$part/lenet_b1/liblenet_b1.so" --inputs-dir "$models/mlp_b1/test_data_set_0"
  ;;
readme)
  # The README's C program, as written, against the LeNet artifact.
  need_models lenet_b1
  compile lenet_b1
  dir=$work/$part/lenet_b1
  awk '/<!-- c-example-begin -->/{on=1; next} /<!-- c-example-end -->/{on=0} on' \
    "$src/README.md" | sed '/^```/d' >"$dir/main.c"
  [[ -s $dir/main.c ]] || fail "no C example between the README's c-example markers"
  cc -std=c11 -Wall -Werror -I "$src/include" -I "$dir" "$dir/main.c" -o "$dir/main" \
    -L "$(dirname "$runtime")" -lnnc_runtime -Wl,-rpath,"$(dirname "$runtime")" ||
    fail "the README's C program does not compile"
  (cd "$dir" && ./main) || fail "the README's C program fails"
  ;;
*) fail "unknown part $part" ;;
esac
echo "PASS: $part"
