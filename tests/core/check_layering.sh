#!/usr/bin/env bash
# Checks that the runtime core and nnc-opt stand without the compiler's heavy dependencies:
#  1. ldd of the core-only test program shows no libLLVM, libclang or libprotobuf (and does
#     show libOpenCL: the OpenCL launch path is in the core);
#  2. ldd of nnc-opt shows none of those, nor libOpenCL or libsqlite3;
#  3. ldd of nnc does show libLLVM (so the pattern in 1 and 2 matches what it should);
#  4. the core's link closure, as CMake computed it (CLOSURE_FILE), names no LLVM, libclang,
#     protobuf, codegen or frontend target;
#  5. no source or header of runtime/core includes a codegen, frontend, LLVM, clang or
#     protobuf header;
#  6. the libraries stand below the tools: driver/ includes neither nnc/train nor a tools/
#     header, and train/ no tools/ header (train -> driver, tools -> both: no folder cycle).
# Usage: check_layering.sh CORE_TEST NNC_OPT NNC CLOSURE_FILE SOURCE_DIR
set -euo pipefail
core_test=$1 nnc_opt=$2 nnc=$3 closure=$4 src=$5
heavy='libLLVM|libclang|libprotobuf'
fail=0
deps() { # the resolved dependencies of a binary; ldd failing or listing nothing is an error
  local out
  out=$(ldd "$1") || { echo "ldd $1 failed" >&2; exit 1; }
  grep -q 'libc\.so' <<<"$out" || { echo "ldd $1 lists no libc: $out" >&2; exit 1; }
  echo "$out"
}
check_absent() { # binary pattern what
  local hits
  local out
  out=$(deps "$1")
  hits=$(grep -E "$2" <<<"$out" || true)
  if [[ -n $hits ]]; then
    echo "FAIL: $3 links:"$'\n'"$hits"
    fail=1
  else
    echo "ok: $3 links none of $2"
  fi
}
check_present() { # binary pattern what
  # The list is captured first: `deps | grep -q` under pipefail failed now and then, when grep
  # quit at its first match and the writer died of SIGPIPE.
  local out
  out=$(deps "$1")
  if grep -qE "$2" <<<"$out"; then
    echo "ok: $3 links $2"
  else
    echo "FAIL: $3 does not link $2"
    fail=1
  fi
}
check_absent "$core_test" "$heavy" "the core-only program"
check_present "$core_test" 'libOpenCL' "the core-only program"
check_absent "$nnc_opt" "$heavy|libOpenCL|libsqlite3" "nnc-opt"
check_present "$nnc" 'libLLVM' "nnc (control)"

[[ -s $closure ]] || { echo "FAIL: empty link closure file $closure"; exit 1; }
grep -q 'nnc_ir' "$closure" || { echo "FAIL: the closure lacks nnc_ir: $(cat "$closure")"; exit 1; }
bad=$(grep -iE 'llvm|clang|protobuf|nnc_codegen|nnc_frontend|nnc_onnx_proto' "$closure" || true)
if [[ -n $bad ]]; then
  echo "FAIL: nnc_runtime_core's link closure names: $bad"
  fail=1
else
  echo "ok: nnc_runtime_core's link closure: $(tr '\n' ' ' <"$closure")"
fi

bad=$(grep -nE '#include *[<"](nnc/codegen/|nnc/frontend/|llvm/|llvm-c/|clang-c/|clang/|google/protobuf|onnx)' \
        "$src"/runtime/core/*.h "$src"/runtime/core/*.cpp || true)
if [[ -n $bad ]]; then
  echo "FAIL: runtime/core includes compiler headers:"$'\n'"$bad"
  fail=1
else
  echo "ok: runtime/core includes no codegen, frontend, LLVM, clang or protobuf header"
fi

bad=$({ grep -HnE '#include *[<"](nnc/train/|tools/|\.\./tools/)' "$src"/driver/*.cpp
        grep -HnE '#include *[<"](tools/|\.\./tools/)' "$src"/train/*.cpp; } || true)
if [[ -n $bad ]]; then
  echo "FAIL: the driver or the trainer includes a layer above it:"$'\n'"$bad"
  fail=1
else
  echo "ok: driver/ includes no trainer or tools header, train/ no tools header"
fi
exit $fail
