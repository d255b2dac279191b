#!/bin/bash
# Runs bench/gpu_pack.py's OpenCL artifacts on a lent GPU machine: nnc-exec (libnnc_runtime.so
# alone, no LLVM) per model, its outputs against the CPU reference packed with it, each
# kernel's device time, and PyTorch on the same GPU as the peer. Each section appends to
# $OUT/summary.txt as it goes, so a run cut short still reports what it finished.
#
#   bash build/gpu/gpu_device.sh build/gpu        # OUT: $OUT, else /tmp/gpu-out
#
# BUDGET (seconds, default 240) bounds the models' section; each model's timing stops after
# MODEL_SECONDS (default 4) of runs; PEERS=0 leaves out PyTorch and ONNX Runtime (a rerun of
# nnc alone). Benchmarks, not tests.
set -u
PACK=$(cd "${1:-build/gpu}" && pwd)
OUT=${OUT:-/tmp/gpu-out}
BUDGET=${BUDGET:-240}
MODEL_SECONDS=${MODEL_SECONDS:-4}
PEERS=${PEERS:-1}
PY=${PY:-python3}
W=/tmp/nnc-gpu
S=$OUT/summary.txt
mkdir -p "$OUT" "$W"
log() { echo "$*" | tee -a "$S"; }
section() { log "== $* ($(date +%T))"; }
START=$(date +%s)

section machine
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  nproc; uname -r; grep -m1 'model name' /proc/cpuinfo; } 2>&1 | tee -a "$S"
tar -C "$W" -xJf "$PACK/pack.tar.xz" || { log "cannot unpack $PACK/pack.tar.xz"; exit 1; }

section "OpenCL ICDs"
{ ls -la /etc/OpenCL/vendors 2>&1; cat /etc/OpenCL/vendors/*.icd 2>&1
  ldconfig -p | grep -i -E 'libOpenCL|nvidia-opencl'; } 2>&1 | tee -a "$S"
# The ICD loader gets NVIDIA's driver alone: another vendor's library (an image's PoCL, built
# with another LLVM) must not be opened beside ours.
NV=${OPENCL_DRIVER:-}  # (another driver for a dry run elsewhere: OPENCL_DRIVER=libpocl.so.2)
[ -n "$NV" ] || for f in /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
  $(ldconfig -p | awk '/libnvidia-opencl.so.1/ {print $NF}'); do
  [ -e "$f" ] && { NV=$f; break; }
done
[ -n "$NV" ] || NV=$(find / -name 'libnvidia-opencl.so*' 2>/dev/null | head -1)
log "OpenCL driver: ${NV:-none found}"
mkdir -p "$W/vendors"
echo "$NV" >"$W/vendors/nvidia.icd"
export OCL_ICD_VENDORS=$W/vendors
# Models whose inputs are drawn here (SGEMM's random operands would not compress).
$PY - "$W/models" <<'EOF' 2>&1 | tee -a "$S"
import json, os, sys
import numpy as np
from onnx import numpy_helper
for m in sorted(os.listdir(sys.argv[1])):
    d = os.path.join(sys.argv[1], m)
    g = os.path.join(d, "generate.json")
    if not os.path.exists(g):
        continue
    n = json.load(open(g))["sgemm"]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = (a.astype(np.float64) @ b).astype(np.float32)
    for sub, name, arrays in (("inputs", "input", {"a": a, "b": b}), ("expected", "output", {"c": c})):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        for k, (nm, x) in enumerate(arrays.items()):
            with open(os.path.join(d, sub, "%s_%d.pb" % (name, k)), "wb") as f:
                f.write(numpy_helper.from_array(x, nm).SerializeToString())
    print("drew %s's operands" % m)
EOF
B=$W/bin
# nnc-exec through its own ld.so and libraries (the image's glibc does not matter).
X=("$B/lib/ld-linux-x86-64.so.2" --library-path "$B/lib" "$B/nnc-exec")

section "models: nnc-exec median wall per run (inputs up, outputs down), device time in kernels"
log "model | load, first and warm-up runs s | median ms | min ms | runs | kernels device ms/run | max err / range vs CPU"
for m in $(cat "$W/models/order.txt"); do
  if [ $(($(date +%s) - START)) -gt "$BUDGET" ]; then
    log "$m | skipped: the section's $BUDGET s are spent"
    continue
  fi
  d=$W/models/$m
  t0=$(date +%s.%N)
  r=$(timeout 90 "${X[@]}" "$d/gpu/libm.so" --info --inputs-dir "$d/inputs" \
    --output-dir "$d/out" --warmup 1 --iterations 200 --max-seconds "$MODEL_SECONDS" 2>&1)
  rc=$?
  t1=$(date +%s.%N)
  echo "### $m rc=$rc" >>"$OUT/log.txt"
  echo "$r" >>"$OUT/log.txt"
  line=$(echo "$r" | grep 'nnc-exec: .* runs, median')
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    log "$m | failed (rc $rc): $(echo "$r" | grep -i error | head -2 | tr '\n' ' ')"
    continue
  fi
  med=$(echo "$line" | sed 's/.*median \([0-9.]*\) ms.*/\1/')
  mn=$(echo "$line" | sed 's/.*min \([0-9.]*\) ms.*/\1/')
  runs=$(echo "$line" | sed 's/nnc-exec: \([0-9]*\) runs.*/\1/')
  total=$(awk -v a="$t0" -v b="$t1" -v r="$runs" -v med="$med" \
    'BEGIN { printf "%.2f", b - a - (r - 1) * med / 1000 }')
  err=$($PY - "$d/out" "$d/expected" <<'EOF' 2>&1 | tail -1
import os, sys
import numpy as np
from onnx import TensorProto, numpy_helper
worst = 0.0
k = 0
while os.path.exists(os.path.join(sys.argv[2], "output_%d.pb" % k)):
    got, want = [numpy_helper.to_array(TensorProto.FromString(
        open(os.path.join(d, "output_%d.pb" % k), "rb").read())).astype(np.float64)
        for d in sys.argv[1:3]]
    rng = max(float(want.max() - want.min()), 1e-30) if want.size else 1.0
    worst = max(worst, float(np.abs(got - want).max()) / rng if want.size else 0.0)
    k += 1
print("%.1e (%d outputs)" % (worst, k))
EOF
)
  p=$(timeout 60 "${X[@]}" "$d/gpu/libm.so" --inputs-dir "$d/inputs" \
    --iterations 5 --max-seconds 2 --profile 2>&1)
  { echo "### $m"; echo "$p" | grep -v 'runs, median' | head -12; } >>"$OUT/profiles.txt"
  kms=$(echo "$p" | sed -n 's/.*kernels, \([0-9.]*\) ms per run in kernels.*/\1/p')
  log "$m | $total | $med | $mn | $runs | ${kms:--} | $err"
  echo "$r" | grep -m1 'OpenCL device' >>"$OUT/devices.txt"
done
head -1 "$OUT/devices.txt" 2>/dev/null | tee -a "$S"

if [ "$PEERS" = 0 ]; then
  log "done in $(($(date +%s) - START)) s (no peers)"
  exit 0
fi
section "PyTorch on the same GPU (fp32, TF32 off): eager, wall per run with the input up and the output down, and on-device (CUDA events)"
timeout 150 $PY - <<'EOF' 2>&1 | tee -a "$S"
import time, torch, torchvision
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
print("torch", torch.__version__, torch.cuda.get_device_name(0))

def timeit(fn, host_in, seconds=3.0):
    for _ in range(3):
        fn(host_in)
    torch.cuda.synchronize()
    walls = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end and len(walls) < 200:
        t = time.perf_counter()
        fn(host_in)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t) * 1e3)
    walls.sort()
    return walls[len(walls) // 2]

def dev_ms(fn, x, n=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn(x); torch.cuda.synchronize()
    s.record()
    for _ in range(n):
        fn(x)
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / n

with torch.no_grad():
    for n in (1024, 2048, 4096):
        a = torch.randn(n, n); b = torch.randn(n, n)
        wall = timeit(lambda h: (h[0].to(dev) @ h[1].to(dev)).cpu(), (a, b))
        da, db = a.to(dev), b.to(dev)
        d = dev_ms(lambda x: x[0] @ x[1], (da, db))
        print("sgemm_%d | wall %.3f ms | device %.3f ms = %.1f TFLOP/s" % (n, wall, d, 2 * n**3 / d / 1e9))
    for name, ctor, shape in (("resnet18_b1", torchvision.models.resnet18, (1, 3, 224, 224)),
                              ("resnet50_b16", torchvision.models.resnet50, (16, 3, 224, 224))):
        m = ctor(weights=None).eval().to(dev)
        x = torch.randn(*shape)
        wall = timeit(lambda h: m(h.to(dev)).cpu(), x)
        d = dev_ms(m, x.to(dev))
        print("%s | wall %.3f ms | device %.3f ms" % (name, wall, d))
EOF

section "ONNX Runtime on the same models (the tiled ONNX files), when it has a GPU provider"
timeout 120 $PY - "$W/models" <<'EOF' 2>&1 | tee -a "$S"
import os, sys, time
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, numpy_helper
print("onnxruntime", ort.__version__, ort.get_available_providers())
prov = [p for p in ("CUDAExecutionProvider",) if p in ort.get_available_providers()]
if not prov:
    sys.exit(0)
for m in open(os.path.join(sys.argv[1], "order.txt")).read().split():
    d = os.path.join(sys.argv[1], m)
    if not os.path.exists(os.path.join(d, "model.onnx")):
        continue
    try:
        s = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=prov)
        feeds = {}
        for k, i in enumerate(s.get_inputs()):
            t = TensorProto.FromString(open(os.path.join(d, "inputs", "input_%d.pb" % k), "rb").read())
            feeds[i.name] = numpy_helper.to_array(t)
        s.run(None, feeds)
        walls = []
        end = time.perf_counter() + 2
        while time.perf_counter() < end and len(walls) < 200:
            t = time.perf_counter()
            s.run(None, feeds)
            walls.append((time.perf_counter() - t) * 1e3)
        walls.sort()
        print("%s | ORT CUDA median %.3f ms (%d runs)" % (m, walls[len(walls) // 2], len(walls)))
    except Exception as e:
        print("%s | ORT failed: %s" % (m, str(e)[:200]))
EOF
log "done in $(($(date +%s) - START)) s"
