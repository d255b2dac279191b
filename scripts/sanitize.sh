#!/usr/bin/env bash
# Builds nnc with a sanitizer in its own folder and runs the tests that matter for it, ending
# with ctest's summary:
#   address    ASan + UBSan, build-asan: the unit tests and tier-1 conformance on interp and cpu
#   undefined  UBSan alone, build-ubsan: the same tests
#   thread     TSan, build-tsan: the concurrency tests (tests/concurrency, label concurrency)
# JIT-compiled kernels are outside the sanitizers' view (LLVM emits them uninstrumented), so the
# interpreter and kernel-evaluator tests carry the weight. clang-15 (its runtimes come with
# libclang-common-15-dev) matches the LLVM 15 that nnc links. Extra arguments go to ctest.
# Not part of scripts/test.sh: each is a full build, slow on a small machine.
# NNC_SANITIZE_CMAKE_ARGS: more cmake arguments (e.g. ccache as the compiler launcher);
# NNC_SANITIZE_BUILD_ONLY=1: build, run nothing; NNC_JOBS: build and test jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-}
shift || true
SUPP=$ROOT/scripts/sanitizers
case "$MODE" in
  address)
    BUILD_DIR=build-asan
    FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    TESTS=(-L 'unit|tier1-subset|concurrency') ;;
  undefined)
    BUILD_DIR=build-ubsan
    FLAGS="-fsanitize=undefined -fno-sanitize-recover=undefined"
    TESTS=(-L 'unit|tier1-subset|concurrency') ;;
  thread)
    BUILD_DIR=build-tsan
    FLAGS="-fsanitize=thread"
    TESTS=(-L 'concurrency') ;;
  *)
    echo "usage: scripts/sanitize.sh address|undefined|thread [ctest arguments]" >&2
    exit 2 ;;
esac
BUILD_DIR=${NNC_SANITIZE_BUILD_DIR:-$BUILD_DIR}
JOBS=${NNC_JOBS:-$(nproc)}
# -O1 keeps the interpreter fast enough; line tables are enough for the reports and build
# faster than full debug info; assert() stays on (no NDEBUG).
FLAGS="$FLAGS -O1 -gline-tables-only -fno-omit-frame-pointer"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_C_COMPILER=clang-15 -DCMAKE_CXX_COMPILER=clang++-15 \
  -DCMAKE_C_FLAGS_SANITIZE="$FLAGS" -DCMAKE_CXX_FLAGS_SANITIZE="$FLAGS" \
  -DCMAKE_EXE_LINKER_FLAGS_SANITIZE="$FLAGS" -DCMAKE_SHARED_LINKER_FLAGS_SANITIZE="$FLAGS" \
  -DCMAKE_MODULE_LINKER_FLAGS_SANITIZE="$FLAGS" -DNNC_BUILD_BENCH=OFF \
  ${NNC_SANITIZE_CMAKE_ARGS:-} >/dev/null
# Suppressions cover third-party libraries only; each entry says why. Set before the build:
# listing the gtest cases runs the instrumented test binaries.
# intercept_tls_get_addr=0: with it on, LeakSanitizer's own tracer crashed at exit ("Tracer
# caught signal 11") in EdgeCases.CastsToBool as ctest runs it (NNC_DEBUG=verify), every time,
# after the test had passed: the crash is inside the sanitizer runtime, which then scans the
# dynamic TLS blocks of the libraries PoCL and LLVM load. With it off that run passes its leak
# check. Leak checking stays on; only those dynamic TLS blocks are no longer scanned for
# pointers.
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:intercept_tls_get_addr=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# Only what the tests run.
if [ "$MODE" = thread ]; then
  ninja -C "$BUILD_DIR" -j "$JOBS" nnc_concurrency_tests
else
  ninja -C "$BUILD_DIR" -j "$JOBS" nnc_unit_tests nnc_concurrency_tests nnc-conformance
fi
[ -n "${NNC_SANITIZE_BUILD_ONLY:-}" ] && exit 0

cd "$BUILD_DIR"
ctest -j "$JOBS" --output-on-failure "${TESTS[@]}" "$@"
