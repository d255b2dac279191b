#!/usr/bin/env python3
"""The OpenCL target through the nnc CLI.

Without any OpenCL driver (OCL_ICD_VENDORS pointing at an empty folder): `--target opencl`
fails with one message saying what is missing, `--target auto` runs on the CPU and says so,
`nnc devices` still lists the CPU, and `nnc compile --target opencl` still writes OpenCL C
(checked with libclang, no runtime needed), also for a generic GPU: each shared model (SHARED
given) after a GPU's graph passes, its convs and matmuls as work-group GEMMs with their fused
epilogues, and a recurrent model (its loop unrolled into the listing, also for `nnc inspect
--kernels`). With a device (PoCL in CI): `--target opencl`
gives the CPU's numbers and `nnc bench --profile` reports one upload and one download per run.

Usage: opencl_test.py NNC_BINARY [SHARED]
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from train_data import write_npy  # noqa: E402

NNC = sys.argv[1]
SHARED = sys.argv[2] if len(sys.argv) > 2 else ""
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = """graph @m(%x: f32[2,3]) -> (f32[2,3]) {
  %w = constant {value = dense<f32[2,3]>[0.5, -1, 1.5, 2, -0.25, 0.75]} : f32[2,3]
  %a = mul(%x, %w) : f32[2,3]
  %t = tanh(%a) : f32[2,3]
  %y = softmax(%t) {axis = 1} : f32[2,3]
  return %y
}
"""
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def nnc(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([NNC] + args, capture_output=True, text=True, env=e, timeout=300)


with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "m.nir")
    with open(model, "w") as f:
        f.write(MODEL)
    x = os.path.join(tmp, "x.npy")
    write_npy(x, [0.25, -1.0, 2.0, 0.5, 1.5, -0.75], [2, 3])
    none = {"OCL_ICD_VENDORS": os.path.join(tmp, "no-vendors")}
    os.mkdir(none["OCL_ICD_VENDORS"])

    r = nnc(["run", model, "--input", "x=" + x, "--target", "opencl"], none)
    check(r.returncode == 1 and "no OpenCL platform" in r.stderr,
          "--target opencl without a driver: %d %r" % (r.returncode, r.stderr))
    r = nnc(["run", model, "--input", "x=" + x, "--target", "auto"], none)
    check(r.returncode == 0 and "target auto: cpu" in r.stderr,
          "--target auto without a driver: %d %r" % (r.returncode, r.stderr))
    cpu_out = r.stdout.splitlines()[0] if r.stdout else ""
    r = nnc(["devices"], none)
    check(r.returncode == 0 and r.stdout.startswith("cpu:") and "opencl: none" in r.stdout,
          "devices without a driver: %r" % r.stdout)
    cl = os.path.join(tmp, "m.cl")
    r = nnc(["compile", model, "--target", "opencl", "-o", cl], none)
    check(r.returncode == 0 and "__kernel void" in open(cl).read(),
          "compile --target opencl: %d %r" % (r.returncode, r.stderr))
    gpu_models = [os.path.join(ROOT, "examples", "models", "tiny_cnn", "model.onnx")]
    if SHARED:
        gpu_models += sorted(os.path.join(SHARED, "models", m, "model.onnx")
                             for m in os.listdir(os.path.join(SHARED, "models")))
        gpu_models.append(os.path.join(SHARED, "onnx-tests", "node", "test_lstm_batchwise",
                                       "model.onnx"))
    for m in gpu_models:
        if not os.path.exists(m):
            continue
        cl = os.path.join(tmp, "gpu.cl")
        r = nnc(["compile", m, "--target", "opencl", "--generic-gpu", "-o", cl], none)
        check(r.returncode == 0 and "__kernel void" in open(cl).read(),
              "compile %s --target opencl --generic-gpu: %d %r" % (m, r.returncode, r.stderr))
        if r.returncode == 0 and "conv" in open(cl).read():
            check("__local" in open(cl).read(), "%s: no work-group GEMM for a GPU" % m)
        if "lstm" in m:
            r = nnc(["inspect", m, "--target", "opencl", "--kernels"], none)
            check(r.returncode == 0 and "kernel " in r.stdout,
                  "inspect %s --kernels (a loop unrolled into the listing): %d %r"
                  % (m, r.returncode, r.stderr))
    r = nnc(["run", model, "--input", "x=" + x, "--target", "opencl:x"])
    check(r.returncode == 1 and "opencl:PLATFORM.DEVICE" in r.stderr, "bad --target opencl:x")

    devices = nnc(["devices"])
    if "opencl:0.0" not in devices.stdout:
        print("SKIPPED the device checks: no OpenCL device on this machine")
    else:
        r = nnc(["run", model, "--input", "x=" + x, "--target", "opencl"])
        check(r.returncode == 0 and r.stdout.splitlines()[0] == cpu_out,
              "--target opencl output %r vs cpu %r (%s)" % (r.stdout, cpu_out, r.stderr))
        r = nnc(["bench", model, "--target", "opencl", "--profile", "--iterations", "2",
                 "--warmup", "1"])
        check(r.returncode == 0 and "transfers per run: 1 up (24 bytes), 1 down (24 bytes)"
              in r.stdout and "host overhead" in r.stdout,
              "bench --profile: %d %r %r" % (r.returncode, r.stdout, r.stderr))

if failures:
    sys.exit(1)
print("opencl CLI: all checks passed")
