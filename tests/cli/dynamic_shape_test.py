#!/usr/bin/env python3
"""End-to-end test of a model with a symbolic batch dimension through the nnc CLI.

Builds (scripts/onnxw.py) the flatten that exporters emit for a dynamic batch,
Shape -> Gather -> Unsqueeze -> Concat -> Reshape, followed by MatMul + Add, runs it with
`nnc run --target interp` at batch 1 and 3 (with the optimization pipeline, without it, and
with a pipeline of `--passes`) and compares the outputs with values computed here by hand.
`nnc run --target cpu --passes` runs the given pipeline alone, at compile time and again on
the graph specialized to the inputs' shapes (its static-shape passes come from it too).

Usage: dynamic_shape_test.py NNC_BINARY
"""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnxw import attr_int, model, node, tensor, value_info  # noqa: E402

NNC = sys.argv[1]
INT64 = 7
W = [0.5, -1.0, 1.5, 2.0, -0.25, 0.75, 1.0, 0.0, -2.0, 0.5, 0.25, -1.5]  # [6, 2]
B = [0.125, -0.5]


def build_model():
    nodes = [
        node("Shape", ["x"], ["s"], "shape"),
        node("Gather", ["s", "zero"], ["n"], "gather", [attr_int("axis", 0)]),
        node("Unsqueeze", ["n", "axes0"], ["n1"], "unsqueeze"),
        node("Concat", ["n1", "minus1"], ["newshape"], "concat", [attr_int("axis", 0)]),
        node("Reshape", ["x", "newshape"], ["flat"], "reshape"),
        node("MatMul", ["flat", "w"], ["mm"], "matmul"),
        node("Add", ["mm", "b"], ["y"], "add"),
    ]
    inits = [
        tensor("zero", [], [0], data_type=INT64, fmt="q"),
        tensor("axes0", [1], [0], data_type=INT64, fmt="q"),
        tensor("minus1", [1], [-1], data_type=INT64, fmt="q"),
        tensor("w", [6, 2], W),
        tensor("b", [2], B),
    ]
    return model(nodes, [value_info("x", ["N", 2, 3])],
                 [value_info("y", ["N", 2]), value_info("s", [3], elem_type=INT64)], inits)


def read_npy(path):
    """(dtype descr, shape, values) of a little-endian C-order .npy file."""
    data = open(path, "rb").read()
    assert data[:6] == b"\x93NUMPY", f"{path}: not an .npy file"
    major = data[6]
    if major == 1:
        hlen = struct.unpack("<H", data[8:10])[0]
        start = 10
    else:
        hlen = struct.unpack("<I", data[8:12])[0]
        start = 12
    header = eval(data[start:start + hlen].decode("latin1"))  # a Python dict literal
    assert not header["fortran_order"], f"{path}: Fortran order"
    shape = tuple(header["shape"])
    code = {"<f4": "f", "<i8": "q"}[header["descr"]]
    n = 1
    for d in shape:
        n *= d
    values = struct.unpack_from("<%d%s" % (n, code), data, start + hlen)
    return header["descr"], shape, list(values)


def expected(batch, xs):
    y = []
    for r in range(batch):
        row = xs[r * 6:(r + 1) * 6]
        for j in range(2):
            y.append(sum(row[k] * W[k * 2 + j] for k in range(6)) + B[j])
    return y


def passes_on_cpu(model_path, inputs, d):
    """`--passes` on the CPU: the weight packing of the specialized graph (batch 3) runs with
    the target's pipeline and not with a pipeline that leaves it out (NNC_DEBUG=time names
    every pass that runs); a pipeline that does not parse is one error and exit 1."""
    failures = []
    env = dict(os.environ, NNC_DEBUG="time", NNC_CACHE_DIR=os.path.join(d, "objects"))
    pipeline = "shape-inference,constant-fold,dce"
    for extra, packs in (([], True), (["--passes", pipeline], False)):
        r = subprocess.run([NNC, "run", model_path, "--inputs-dir", inputs, "--output-dir",
                            os.path.join(d, f"cpu{len(extra)}"), "--target", "cpu", "-q"] + extra,
                           capture_output=True, text=True, timeout=120, env=env)
        if r.returncode != 0:
            failures.append(f"cpu {extra}: exit {r.returncode}: {r.stderr}")
        elif ("pack-gemm-weights" in r.stderr) != packs:
            failures.append(f"cpu {extra}: pack-gemm-weights {'not ' if packs else ''}run:\n"
                            f"{r.stderr}")
    for bad, says in ((["--passes", "shape-inference,no-such-pass"], "no-such-pass"),
                      (["--passes", pipeline, "--no-optimize"], "--no-optimize")):
        r = subprocess.run([NNC, "run", model_path, "--inputs-dir", inputs, "-q"] + bad,
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0 or says not in r.stderr:
            failures.append(f"{bad}: expected an error naming {says}, got exit {r.returncode}: "
                            f"{r.stderr}")
    return failures


def main():
    failures = []
    d = tempfile.mkdtemp(prefix="nnc-dynamic-shape-")
    model_path = os.path.join(d, "flatten.onnx")
    with open(model_path, "wb") as f:
        f.write(build_model())
    for batch in (1, 3):
        xs = [(i % 7) * 0.5 - 1.25 for i in range(batch * 6)]
        inputs = os.path.join(d, f"in{batch}")
        os.makedirs(inputs)
        with open(os.path.join(inputs, "input_0.pb"), "wb") as f:
            f.write(tensor("x", [batch, 2, 3], xs))
        for extra in ([], ["--no-optimize"], ["--passes", "shape-inference,constant-fold,dce"]):
            what = f"batch {batch}{' ' + extra[0] if extra else ''}"
            out = os.path.join(d, f"out{batch}{len(extra)}")
            r = subprocess.run([NNC, "run", model_path, "--inputs-dir", inputs, "--output-dir",
                                out, "--output-format", "npy", "--target", "interp", "-q"] + extra,
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                failures.append(f"{what}: exit {r.returncode}: {r.stdout}{r.stderr}")
                continue
            try:
                descr, shape, y = read_npy(os.path.join(out, "output_0.npy"))
                want = expected(batch, xs)
                if descr != "<f4" or shape != (batch, 2):
                    failures.append(f"{what}: y is {descr}{list(shape)}, expected <f4[{batch}, 2]")
                elif any(abs(a - e) > 1e-5 + 1e-4 * abs(e) for a, e in zip(y, want)):
                    failures.append(f"{what}: y = {y}, expected {want}")
                descr, shape, s = read_npy(os.path.join(out, "output_1.npy"))
                if descr != "<i8" or shape != (3,) or s != [batch, 2, 3]:
                    failures.append(f"{what}: s = {descr}{list(shape)} {s}, expected [{batch}, 2, 3]")
            except (OSError, AssertionError, KeyError, struct.error) as e:
                failures.append(f"{what}: cannot read the outputs: {e}")
    failures += passes_on_cpu(model_path, os.path.join(d, "in3"), d)
    for f in failures:
        print("FAIL:", f)
    print("dynamic shape test: all runs passed" if not failures
          else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
