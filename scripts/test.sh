#!/usr/bin/env bash
# Installs what nnc needs, builds it, and runs every test (unit, lit, ONNX conformance on
# each target, shared models, install/find_package, CLI bad input), ending with ctest's
# summary. The conformance runners' counts ("1107 passed, 0 failed") are shown as they end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BUILD_DIR=${NNC_BUILD_DIR:-build}
cd "$BUILD_DIR"
JOBS=${NNC_JOBS:-$(nproc)}
status=0
ctest -V -j "$JOBS" "$@" > ctest-verbose.log 2>&1 || status=$?
# Per-test verdicts, the runners' counts and skips, then ctest's own summary.
grep -E '^ *[0-9]+/[0-9]+ Test +#|^[0-9]+: (.*(passed|XFAIL|XPASS|SKIPPED|FAIL).*)$|tests passed|tests failed|Total Test time|The following tests FAILED|^\s+[0-9]+ - ' \
  ctest-verbose.log | grep -vE '^[0-9]+: (\[ +(OK|RUN|PASSED) +\]|PASS )' || true
if [ "$status" -ne 0 ]; then
  echo "== output of the failed tests"
  ctest --rerun-failed --output-on-failure -j "$JOBS" | tail -n 200 || true
  echo "== ctest failed (exit $status); the full log is $BUILD_DIR/ctest-verbose.log"
  exit "$status"
fi
