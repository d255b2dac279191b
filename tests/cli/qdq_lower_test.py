#!/usr/bin/env python3
"""lower-qdq end to end: QAT-style Q/DQ models (scripts/make_qdq_models.py) run their matmuls
and convs on the integer kernels and agree with the interpreter run without any pass.

For each model, `nnc run --target cpu`, `--target interp` and `--target opencl` where there is
a device (all with their standard pipelines, so with lower-qdq) are compared with `nnc run --target interp --no-optimize` (the f32 path
between the explicit Q/DQ ops, evaluated op by op):
  - the u8 outputs may differ by one quantization step on a few elements (at most 1 in 20),
    never by more: the integer sum is exact and the f32 path rounds each partial sum, so a
    value that lies within f32 rounding of a rounding tie of the next quantize may round the
    other way; one step in an activation moves the next layer's input by one of its scale
    steps, which stays under one output step;
  - the f32 outputs (the dequantized u8 outputs) likewise by at most one output scale step;
  - the `exact` model must agree bit for bit: a max pool, and slice, gather, concat,
    transpose and nearest resize, moved onto the u8 data and requantized with the same
    parameters (quantize(dequantize(x)) cancelled), and a matmul whose scales are powers of
    two, where the f32 path's sums are exact too.
The CPU pipeline runs the CNN's convs on conv_integer; the OpenCL pipelines keep them in f32
(lower-qdq{convs=0}), so the CNN is also run after `nnc-opt --passes=lower-qdq` with its convs
on conv_integer on every target. `nnc inspect --templates` marks
the integer GEMMs and names the matmuls and convs left in f32 with their reason;
`nnc inspect --stats` counts them.

Usage: qdq_lower_test.py NNC_BINARY NNC_OPT_BINARY
"""
import os
import struct
import subprocess
import sys
import tempfile
import random

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_qdq_models  # noqa: E402
from train_data import write_npy  # noqa: E402

NNC, NNC_OPT = sys.argv[1], sys.argv[2]

# Model: (input shape, input kind, [(output kind, one step of the output)]).
MODELS = {
    "mlp": ([8, 64], "f32", [("f32", 8.0 / 255), ("u8", 1)]),
    "bert": ([1, 8, 32], "f32", [("f32", 8.0 / 255), ("u8", 1)]),
    "cnn": ([1, 3, 12, 12], "f32", [("f32", 8.0 / 255), ("u8", 1)]),
    "exact": ([2, 4, 6, 6], "u8", [("u8", 0), ("f32", 0), ("u8", 0)]),
}


def read_npy(path):
    data = open(path, "rb").read()
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode()
    descr = header.split("'descr':")[1].split("'")[1]
    body = data[10 + hlen:]
    code = {"<f4": "f", "|u1": "B"}[descr]
    return list(struct.unpack("<%d%s" % (len(body) // struct.calcsize(code), code), body))


def write_u8_npy(path, values, shape):
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d, " % d for d in shape))
    header += " " * (63 - len(header) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(bytes(values))


def run(args):
    r = subprocess.run([NNC] + args, capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout + r.stderr


def main():
    failures = []
    targets = [("interp", ["--target", "interp"]), ("cpu", ["--target", "cpu"])]
    rc, out = run(["devices"])
    if any(line.startswith("opencl:") for line in out.splitlines()):
        targets.append(("opencl", ["--target", "opencl"]))
    else:
        print("no OpenCL device: the opencl target is not checked")
    with tempfile.TemporaryDirectory() as d:
        make_qdq_models.write_all(d, "test")
        rng = random.Random(7)
        for name, (shape, kind, outs) in MODELS.items():
            path = os.path.join(d, "qdq_%s.onnx" % name)
            count = 1
            for s in shape:
                count *= s
            x = os.path.join(d, name + "_x.npy")
            if kind == "f32":
                write_npy(x, [rng.uniform(-1.2, 1.2) for _ in range(count)], shape)
            else:
                write_u8_npy(x, [rng.randint(0, 255) for _ in range(count)], shape)
            inp = "x" if kind == "f32" else "xq"
            results = {}
            runs = [("ref", path, ["--target", "interp", "--no-optimize"])]
            runs += [(label, path, extra) for label, extra in targets]
            if name == "cnn":
                # The OpenCL pipelines leave convs in f32 (lower-qdq{convs=0}); the graph that
                # lower-qdq with its convs on makes runs through every target as well.
                imported, lowered = os.path.join(d, "cnn.nir"), os.path.join(d, "cnn_int.nir")
                rc, out = run(["inspect", path, "--after", "import", "--full-constants"])
                open(imported, "w").write(out)
                r = subprocess.run([NNC_OPT, imported, "--passes=lower-qdq,constant-fold,dce",
                                    "-o", lowered], capture_output=True, text=True)
                if rc != 0 or r.returncode != 0 or "conv_integer" not in open(lowered).read():
                    failures.append(f"cnn: no conv_integer from nnc-opt:\n{out}{r.stderr}")
                else:
                    runs += [(label + "_intconv", lowered, extra) for label, extra in targets]
            for label, model_path, extra in runs:
                o = os.path.join(d, "%s_%s" % (name, label))
                rc, out = run(["run", model_path, "--input", "%s=%s" % (inp, x), "--output-dir",
                               o, "--output-format", "npy"] + extra)
                if rc != 0:
                    failures.append(f"{name}: nnc run {' '.join(extra)} failed ({rc}):\n{out}")
                    continue
                results[label] = [read_npy(os.path.join(o, "output_%d.npy" % k))
                                  for k in range(len(outs))]
            ref = results.get("ref")
            if not ref:
                continue
            if all(len(set(v)) < 2 for v in ref):
                failures.append(f"{name}: the reference outputs are constant")
            for label in [r[0] for r in runs[1:]]:
                got = results.get(label)
                if not got:
                    continue
                for k, ((okind, step), want, have) in enumerate(zip(outs, ref, got)):
                    if len(want) != len(have):
                        failures.append(f"{name} {label} output {k}: {len(have)} elements, "
                                        f"want {len(want)}")
                        continue
                    diff = [i for i in range(len(want)) if want[i] != have[i]]
                    far = [i for i in diff if abs(want[i] - have[i]) > step * 1.0001 + 1e-7]
                    if far or len(diff) > len(want) // 20:
                        failures.append(
                            f"{name} {label} output {k}: {len(diff)} of {len(want)} differ from "
                            f"the f32 path, {len(far)} by more than {step} (first: "
                            f"{[(i, have[i], want[i]) for i in diff[:4]]})")
            rc, out = run(["inspect", path, "--templates"])
            if rc != 0:
                failures.append(f"{name}: nnc inspect --templates failed ({rc}):\n{out}")
            elif name != "exact" and "matmul_integer.tiles matmul_integer" not in out:
                failures.append(f"{name}: no integer GEMM in the templates:\n{out}")
            if name == "bert" and "fp32 between Q/DQ: operand 1 is not dequantized" not in out:
                failures.append(f"bert: P.V (a float V) is not reported as left in f32:\n{out}")
            if name == "cnn" and "conv_integer." not in out:
                failures.append(f"cnn: the convs do not run on conv_integer's templates:\n{out}")
            if name == "cnn" and any(t[0] == "opencl" for t in targets):
                rc, out = run(["inspect", path, "--templates", "--target", "opencl"])
                if rc != 0 or "fp32 between Q/DQ: integer convs are off" not in out:
                    failures.append(f"cnn: opencl's f32 convs are not reported:\n{out}")
            rc, out = run(["inspect", path, "--stats"])
            wants = {"mlp": ["matmuls-integer 3"], "bert": ["matmuls-integer 7"],
                     "exact": ["matmuls-integer 1"],
                     "cnn": ["matmuls-integer 1", "convs-integer 3"]}[name]
            for want in wants:
                if rc != 0 or want not in out:
                    failures.append(f"{name}: --stats does not say {want!r}:\n{out}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok: %s agree with the f32 path" % ", ".join(MODELS))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
