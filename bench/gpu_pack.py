#!/usr/bin/env python3
"""Packs OpenCL artifacts for a lent GPU machine, which has no Debian packages, cannot hold
libLLVM and takes at most 64 MiB of carried files: what bench/gpu_device.sh runs there.

    /usr/bin/python3 bench/gpu_pack.py [--out build/gpu] [--only NAME,...]

For each model: its large float weights redrawn with their own statistics in a short period
(refill_weights.py tile; timings are those of the real model, the values are not), compiled
with `nnc compile --target opencl --generic-gpu --emit=lib --no-device-binary` (the device
builds the OpenCL C source at load), its inputs as input_K.pb, and the reference outputs: the
same tiled model compiled for this machine's CPU and run by nnc-exec. OUT gets pack.tar.xz
(artifacts, inputs, references, nnc-exec with libnnc_runtime.so and every library it loads,
its own ld.so among them, and the tiled ONNX models for a peer there) and gpu_device.sh.
Carry OUT (a path under build/, which git ignores) and run `bash OUT/gpu_device.sh OUT` there.

Models: SGEMM n^3 graphs, the shared models (../shared/models) and the domain models of
bench/domain_models.py (~/.cache/nnc/domain-models; that script exports them), each case as
FOLDER/CASE. Needs /usr/bin/python3 with numpy and onnx (scripts/setup-bench.sh).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models")
DOMAIN = os.path.expanduser("~/.cache/nnc/domain-models")

# name -> (kind, source). Ordered by what a GPU run should report first, should time run out.
MODELS = [
    ("sgemm_1024", "sgemm", 1024),
    ("sgemm_2048", "sgemm", 2048),
    ("mlp_b1", "shared", "mlp_b1"),
    ("mlp_b32", "shared", "mlp_b32"),
    ("lenet_b1", "shared", "lenet_b1"),
    ("lenet_b32", "shared", "lenet_b32"),
    ("resnet18_b1", "shared", "resnet18_b1"),
    ("bert_layer_b1", "shared", "bert_layer_b1"),
    ("yolo320", "domain", "yolo320/image1"),
    ("resnet50_b16", "domain", "resnet50_b16/b16"),
    ("gpt2_full_t16", "domain", "gpt2_decoder/full_t16"),
    ("bert_base_b1_l32", "domain", "bert_base_mask/b1_l32"),
    ("unet_128", "domain", "unet/128x128"),
    ("vae_16", "domain", "vae_decoder/16x16"),
    ("conformer_len64", "domain", "conformer_block/len64"),
    ("mlp_mixer_b1", "domain", "mlp_mixer_s16/b1"),
    ("sgemm_4096", "sgemm", 4096),
]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (" ".join(map(str, cmd)), r.stdout, r.stderr))
    return r.stdout


def write_input(folder, k, x, name, np, numpy_helper):
    """input_K.pb of `x`; a large float input repeats its first 4093 values (like the weights:
    random data does not compress, and the reference is computed from what is written)."""
    if x.dtype.kind == "f" and x.size > 4093:
        x = np.resize(x.reshape(-1)[:4093], x.shape).astype(x.dtype)
    open(os.path.join(folder, "input_%d.pb" % k), "wb").write(
        numpy_helper.from_array(x, name).SerializeToString())


def domain_paths(spec):
    """(model.onnx, case folder with input_K.npy, meta) of a domain model's case."""
    folder, case = spec.split("/")
    base = os.path.join(DOMAIN, folder)
    if os.path.exists(os.path.join(base, "model.onnx")):
        return os.path.join(base, "model.onnx"), os.path.join(base, case), \
            json.load(open(os.path.join(base, "meta.json")))
    # One export per case (gpt2_decoder/full_t16/{model.onnx,meta.json,full_t16/}).
    base = os.path.join(base, case)
    return os.path.join(base, "model.onnx"), os.path.join(base, case), \
        json.load(open(os.path.join(base, "meta.json")))


def pack_model(a, name, kind, src, stage, np, onnx, numpy_helper):
    d = os.path.join(stage, "models", name)
    inputs = os.path.join(d, "inputs")
    os.makedirs(inputs)
    tiled = os.path.join(d, "model.onnx")
    shapes = []
    if kind == "sgemm":
        n = src
        tiled = os.path.join(d, "model.nir")
        t = "f32[%d,%d]" % (n, n)
        with open(tiled, "w") as f:
            f.write("graph @sgemm(%%a: %s, %%b: %s) -> (%s) {\n  %%c = matmul(%%a, %%b) : %s\n"
                    "  return %%c\n}\n" % (t, t, t, t))
        # Random n x n operands do not compress: the device draws them (gpu_device.sh), and
        # checks the product against numpy's there.
        json.dump({"sgemm": n}, open(os.path.join(d, "generate.json"), "w"))
    else:
        if kind == "shared":
            model = os.path.join(SHARED, src, "model.onnx")
            k = 0
            while os.path.exists(os.path.join(SHARED, src, "test_data_set_0", "input_%d.pb" % k)):
                t = onnx.load_tensor(os.path.join(SHARED, src, "test_data_set_0",
                                                  "input_%d.pb" % k))
                write_input(inputs, k, numpy_helper.to_array(t), t.name, np, numpy_helper)
                k += 1
        else:
            model, case, meta = domain_paths(src)
            k = 0
            while os.path.exists(os.path.join(case, "input_%d.npy" % k)):
                x = np.load(os.path.join(case, "input_%d.npy" % k))
                nm = meta["in_names"][k]
                write_input(inputs, k, x, nm, np, numpy_helper)
                if meta.get("dynamic"):
                    shapes.append("%s=%s" % (nm, "x".join(str(e) for e in x.shape)))
                k += 1
        run([a.python, os.path.join(ROOT, "bench", "refill_weights.py"), "tile", model, tiled])
    shape_args = ["--shape"] + shapes if shapes else []
    gpu = os.path.join(d, "gpu")
    if kind == "sgemm":
        run([a.nnc, "compile", tiled, "--target", "opencl", "--generic-gpu", "--emit=lib",
             "--no-device-binary", "--name", "m", "-o", gpu])
        os.remove(tiled)
        os.rmdir(inputs)
        return os.path.getsize(os.path.join(gpu, "libm.so"))
    run([a.nnc, "compile", tiled, "--target", "opencl", "--generic-gpu", "--emit=lib",
         "--no-device-binary", "--name", "m", "-o", gpu] + shape_args)
    # The reference: the same model on this machine's CPU through the same runtime.
    with tempfile.TemporaryDirectory() as cpu:
        run([a.nnc, "compile", tiled, "--emit=lib", "--name", "m", "-o", cpu] + shape_args)
        run([a.nnc_exec, os.path.join(cpu, "libm.so"), "--inputs-dir", inputs, "--output-dir",
             os.path.join(d, "expected")])
    return os.path.getsize(os.path.join(gpu, "libm.so"))


def pack_runner(a, stage):
    """nnc-exec, libnnc_runtime.so and every library they load, ld.so among them."""
    b = os.path.join(stage, "bin")
    os.makedirs(os.path.join(b, "lib"))
    shutil.copy(a.nnc_exec, b)
    for line in run(["ldd", a.nnc_exec]).splitlines():
        parts = line.split()
        path = parts[2] if len(parts) > 2 and parts[1] == "=>" else parts[0]
        if path.startswith("/"):
            shutil.copy(os.path.realpath(path), os.path.join(b, "lib", os.path.basename(path)))
    subprocess.run(["strip", "--strip-unneeded"] + [os.path.join(b, "lib", f) for f in
                   os.listdir(os.path.join(b, "lib"))], capture_output=True)
    if not os.path.exists(os.path.join(b, "lib", "ld-linux-x86-64.so.2")):
        raise RuntimeError("no ld-linux in ldd's list of %s" % a.nnc_exec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "gpu"))
    ap.add_argument("--only", help="comma-separated names (default: all)")
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    ap.add_argument("--nnc-exec", default=os.path.join(ROOT, "build", "tools", "nnc-exec",
                                                       "nnc-exec"))
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    import numpy as np
    import onnx
    from onnx import numpy_helper
    only = set(a.only.split(",")) if a.only else None
    stage = tempfile.mkdtemp()
    try:
        pack_runner(a, stage)
        order = []
        for name, kind, src in MODELS:
            if only and name not in only:
                continue
            try:
                size = pack_model(a, name, kind, src, stage, np, onnx, numpy_helper)
            except (RuntimeError, OSError) as e:
                print("gpu_pack: %s left out: %s" % (name, str(e).strip()[:400]), file=sys.stderr)
                shutil.rmtree(os.path.join(stage, "models", name), ignore_errors=True)
                continue
            order.append(name)
            print("gpu_pack: %s (artifact %.1f MB)" % (name, size / 1e6), flush=True)
        open(os.path.join(stage, "models", "order.txt"), "w").write("\n".join(order) + "\n")
        os.makedirs(a.out, exist_ok=True)
        tar = os.path.join(a.out, "pack.tar.xz")
        with open(tar, "wb") as f:
            p1 = subprocess.Popen(["tar", "-C", stage, "-cf", "-", "."], stdout=subprocess.PIPE)
            subprocess.run(["xz", "-T0", "-6"], stdin=p1.stdout, stdout=f, check=True)
            p1.wait()
        shutil.copy(os.path.join(ROOT, "bench", "gpu_device.sh"), a.out)
        print("%s: %.1f MiB, %d models" % (tar, os.path.getsize(tar) / 2**20, len(order)))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
