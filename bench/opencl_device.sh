#!/bin/bash
# Issue 15's measurements on whatever OpenCL device this machine has (a GPU when one is lent):
# SGEMM and the six shared models through `nnc bench --target opencl`, per-kernel device time,
# OpenCL tuning and its effect, tier-1 conformance on the device, and the machine's CPU target
# beside ONNX Runtime's Python package when there is one. Each section has its own time limit
# and appends to OUT/summary.txt as it goes, so a run cut short still reports what it finished.
#
#   NNC=build/tools/nnc/nnc CONF=build/tests/conformance/nnc-conformance \
#   SHARED=/work/shared OUT=out/opencl-device bash bench/opencl_device.sh
#
# Models may be weight-stripped copies (bench/refill_weights.py): timing only then, and the
# models' own output check is left out. Benchmarks, not tests: nothing here is in ctest.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NNC=${NNC:-build/tools/nnc/nnc}
CONF=${CONF:-build/tests/conformance/nnc-conformance}
SHARED=${SHARED:-/work/shared}
OUT=${OUT:-out/opencl-device}
PY=${PY:-python3}
TUNE_SGEMM=${TUNE_SGEMM:-45}   # seconds of `nnc tune` on SGEMM 1024^3
TUNE_RESNET=${TUNE_RESNET:-90} # ...and on resnet18_b1 (0: not)
TIER1_LIMIT=${TIER1_LIMIT:-150}
SECTIONS=${SECTIONS:-devices floor sgemm clblast peer models tier1 tune cpu}
FLOOR=${FLOOR:-build/bench/nnc-opencl-floor}     # the device's per-run floor (bench/opencl_floor)
CLBLAST=${CLBLAST:-build/bench/nnc-clblast-sgemm} # CLBlast's SGEMM peer (bench/clblast)
BENCH_LIMIT=${BENCH_LIMIT:-180} # seconds per nnc bench run
MODELS=${MODELS:-"mlp_b1 mlp_b32 lenet_b1 lenet_b32 resnet18_b1 bert_layer_b1"}
WORK=${WORK:-$OUT} # graphs and tuning caches
mkdir -p "$OUT" "$WORK"
DB=$WORK/tuning.db
S=$OUT/summary.txt
log() { echo "$*" | tee -a "$S"; }
section() { log "== $* ($(date +%T))"; }
median() { grep -o '"median_ms": [0-9.e+-]*' | awk '{print $2}' | tail -1; }
has() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
# bench ARGS...: the median of one `nnc bench --json` run, or "fail"; its stderr goes to the log.
bench() {
  local m
  m=$(timeout "$BENCH_LIMIT" "$NNC" bench "$@" --json 2>>"$OUT/log.txt" | median)
  echo "${m:-fail}"
}
gflops() { awk -v n="$1" -v ms="$2" 'BEGIN { if (ms + 0 > 0) printf "%.1f", 2 * n * n * n / ms / 1e6; else print "-" }'; }
sgemm_graph() { # n path
  local t="f32[$1,$1]"
  printf 'graph @sgemm(%%a: %s, %%b: %s) -> (%s) {\n  %%c = matmul(%%a, %%b) : %s\n  return %%c\n}\n' \
    "$t" "$t" "$t" "$t" >"$2"
}

if has devices; then
  section devices
  "$NNC" devices 2>&1 | tee -a "$S"
fi

if has floor; then
  section "per-run floor: a small upload, K empty kernels, a small read back (bench/opencl_floor)"
  if [ -x "$FLOOR" ]; then
    timeout 120 "$FLOOR" 2>>"$OUT/log.txt" | tee -a "$S"
  else
    log "no $FLOOR (build the bench targets)"
  fi
fi

if has sgemm; then
  section "SGEMM n^3 through nnc bench --target opencl (default configs)"
  for n in 1024 2048 4096; do
    sgemm_graph $n "$WORK/sgemm$n.nir"
    it=20; [ $n = 4096 ] && it=10
    ms=$(bench "$WORK/sgemm$n.nir" --target opencl --iterations $it --cache "$DB")
    log "sgemm $n: median $ms ms = $(gflops $n "$ms") GFLOP/s"
  done
  timeout 60 "$NNC" bench "$WORK/sgemm1024.nir" --target opencl --iterations 10 --profile \
    --cache "$DB" >>"$OUT/profile.txt" 2>&1
fi

if has clblast; then
  section "peer on the same OpenCL device: CLBlast SGEMM (its defaults: untuned for a device it does not know)"
  if [ -x "$CLBLAST" ]; then
    for n in 1024 2048; do
      sgemm_graph $n "$WORK/sgemm$n.nir"
      # Alternate CLBlast and nnc (default configs) so that both see the same machine.
      for round in 1 2; do
        c=$(timeout "$BENCH_LIMIT" "$CLBLAST" $n 10 2>>"$OUT/log.txt" | grep -o 'median [0-9.]* ms' | awk '{print $2}')
        ms=$(bench "$WORK/sgemm$n.nir" --target opencl --iterations 10 --cache "$WORK/none.db")
        log "sgemm $n round $round: CLBlast ${c:-fail} ms = $(gflops $n "${c:-0}") GFLOP/s, nnc $ms ms = $(gflops $n "$ms") GFLOP/s, nnc/CLBlast GFLOP/s $(awk -v a="${c:-0}" -v b="$ms" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.2f", a / b; else print "-" }')"
      done
    done
  else
    log "no $CLBLAST (scripts/setup-bench.sh installs libclblast-dev; then rebuild)"
  fi
fi

if has peer; then
  section "peer on the same GPU: PyTorch (cuBLAS/cuDNN) float32, TF32 off"
  timeout 120 "$PY" - >>"$S" 2>>"$OUT/log.txt" <<'EOF'
import torch
if not torch.cuda.is_available():
    raise SystemExit("no CUDA device for the PyTorch peer")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
def t(fn, it):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(it):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]
print("device:", torch.cuda.get_device_name(0))
for n in (1024, 2048, 4096):
    x, y = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    ms = t(lambda: x @ y, 20)
    print("torch sgemm %d: median %.4f ms = %.1f GFLOP/s" % (n, ms, 2 * n ** 3 / ms / 1e6))
try:
    import torchvision
    m = torchvision.models.resnet18().cuda().eval()
    x = torch.randn(1, 3, 224, 224, device="cuda")
    with torch.no_grad():
        print("torch resnet18_b1 eager: median %.4f ms" % t(lambda: m(x), 20))
except Exception as e:
    print("torch resnet18: %s" % e)
EOF
  log "peer rc $?"
fi

if has models; then
  section "six models, nnc bench --target opencl (default configs); device time per kernel in profile.txt"
  for m in $MODELS; do
    f=$SHARED/models/$m/model.onnx
    [ -f "$f" ] || { log "$m: no $f"; continue; }
    it=50; case $m in resnet18_b1|bert_layer_b1) it=20 ;; esac
    o=$(bench "$f" --target opencl --iterations $it --cache "$DB")
    timeout 120 "$NNC" bench "$f" --target opencl --iterations 10 --profile --cache "$DB" \
      >>"$OUT/profile.txt" 2>&1
    dev=$(grep -A2000 "^$f" "$OUT/profile.txt" | grep -m1 -o 'device time [0-9.]* ms' | awk '{print $3}')
    log "$m: opencl median $o ms (device ${dev:-?} ms per run in the profiled run)"
  done
fi

if has tier1; then
  section "tier-1 ONNX node tests on the OpenCL device (limit ${TIER1_LIMIT} s)"
  timeout "$TIER1_LIMIT" "$CONF" --target opencl --shared "$SHARED" -v >"$OUT/tier1.txt" 2>&1
  log "rc $? ; $(grep -ciE '^(PASS|ok)' "$OUT/tier1.txt") lines reporting a pass"
  tail -5 "$OUT/tier1.txt" | tee -a "$S"
  grep -iE 'FAIL|mismatch|error' "$OUT/tier1.txt" | head -40 | tee -a "$S"
fi

if has tune; then
  section "nnc tune --target opencl: SGEMM 1024 (${TUNE_SGEMM} s), resnet18_b1 (${TUNE_RESNET} s)"
  sgemm_graph 1024 "$WORK/sgemm1024.nir"
  timeout $((TUNE_SGEMM + 60)) "$NNC" tune "$WORK/sgemm1024.nir" --target opencl \
    --budget "$TUNE_SGEMM" --cache "$DB" -q >>"$OUT/tune.txt" 2>&1
  log "tune sgemm rc $?: $(tail -1 "$OUT/tune.txt")"
  ms=$(bench "$WORK/sgemm1024.nir" --target opencl --iterations 20 --cache "$DB")
  log "sgemm 1024 tuned: median $ms ms = $(gflops 1024 "$ms") GFLOP/s"
  f=$SHARED/models/resnet18_b1/model.onnx
  if [ -f "$f" ] && [ "$TUNE_RESNET" != 0 ]; then
    d=$(bench "$f" --target opencl --iterations 20 --cache "$WORK/none.db")
    timeout $((TUNE_RESNET + 90)) "$NNC" tune "$f" --target opencl --budget "$TUNE_RESNET" \
      --cache "$DB" -q >>"$OUT/tune.txt" 2>&1
    log "tune resnet18 rc $?: $(tail -1 "$OUT/tune.txt")"
    t=$(bench "$f" --target opencl --iterations 20 --cache "$DB")
    d2=$(bench "$f" --target opencl --iterations 20 --cache "$WORK/none.db")
    log "resnet18_b1 opencl: default $d / $d2 ms, tuned $t ms"
  fi
fi

if has cpu; then
  section "this machine's CPU target (nnc bench --target cpu) beside ONNX Runtime (bench/ort/ort_bench.py: Python onnxruntime, its own process, its default pool)"
  "$NNC" devices 2>&1 | head -2 | tee -a "$S"
  for th in 2 $(nproc); do
    for m in $MODELS; do
      f=$SHARED/models/$m/model.onnx
      [ -f "$f" ] || continue
      it=100; case $m in resnet18_b1|bert_layer_b1) it=20 ;; esac
      c=$(bench "$f" --threads $th --iterations $it)
      o=$(timeout 120 "$PY" "$HERE/ort/ort_bench.py" "$f" --threads $th --iterations $it \
        --warmup 5 2>>"$OUT/log.txt" | median)
      r=$(awk -v a="$c" -v b="$o" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
      log "cpu ${th}T $m: nnc $c ms, ort ${o:-fail} ms, nnc/ort $r"
    done
  done
fi
section done
