#!/usr/bin/env python3
"""End-to-end test of Unique's data-dependent results used further on, through the nnc CLI.

Builds (scripts/onnxw.py) Unique(x, sorted=0) whose outputs are y, an unnamed indices,
inverse_indices and counts, with Neg(y) after it: the graph outputs are -y, inverse_indices and
counts. The CPU target compiles such a graph in stages (unique's lengths are known only once
it ran) and the unnamed indices is never written. Runs it on interp and cpu and compares the
outputs with values computed here.

Usage: unique_stages_test.py NNC_BINARY
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

sys.path.insert(0, HERE)
from dynamic_shape_test import read_npy  # noqa: E402

NNC = sys.argv[1]
INT64 = 7
X = [2.0, 1.0, 1.0, 3.0, 4.0, 3.0, 2.0, float("nan"), float("nan")]


def build_model():
    nodes = [
        node("Unique", ["x"], ["y", "", "inverse", "counts"], "unique", [attr_int("sorted", 0)]),
        node("Neg", ["y"], ["z"], "neg"),
    ]
    return model(nodes, [value_info("x", [len(X)])],
                 [value_info("z", ["U"]), value_info("inverse", [len(X)], elem_type=INT64),
                  value_info("counts", ["U"], elem_type=INT64)], opset=11)


def expected():
    """y in order of first occurrence (NaN equal to NaN), each position's entry, the counts."""
    key = lambda v: "nan" if v != v else v  # noqa: E731
    order, inverse, counts = [], [], []
    for v in X:
        if key(v) not in [key(u) for u in order]:
            order.append(v)
            counts.append(0)
        i = [key(u) for u in order].index(key(v))
        inverse.append(i)
        counts[i] += 1
    return [-v for v in order], inverse, counts


def same(a, b):
    return len(a) == len(b) and all((x != x and y != y) or x == y for x, y in zip(a, b))


def main():
    failures = []
    d = tempfile.mkdtemp(prefix="nnc-unique-stages-")
    model_path = os.path.join(d, "unique.onnx")
    with open(model_path, "wb") as f:
        f.write(build_model())
    inputs = os.path.join(d, "in")
    os.makedirs(inputs)
    with open(os.path.join(inputs, "input_0.pb"), "wb") as f:
        f.write(tensor("x", [len(X)], X))
    z, inverse, counts = expected()
    targets = ("interp", "cpu")
    for target in targets:
        out = os.path.join(d, "out-" + target)
        r = subprocess.run([NNC, "run", model_path, "--inputs-dir", inputs, "--output-dir", out,
                            "--output-format", "npy", "--target", target, "-q"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            failures.append(f"{target}: exit {r.returncode}: {r.stdout}{r.stderr}")
            continue
        try:
            got = [read_npy(os.path.join(out, f"output_{k}.npy")) for k in range(3)]
        except (OSError, AssertionError, KeyError, struct.error) as e:
            failures.append(f"{target}: cannot read the outputs: {e}")
            continue
        for (descr, shape, values), want, name, kind in zip(
                got, (z, inverse, counts), ("-y", "inverse_indices", "counts"),
                ("<f4", "<i8", "<i8")):
            if descr != kind or shape != (len(want),) or not same(values, want):
                failures.append(f"{target}: {name} = {descr}{list(shape)} {values}, "
                                f"expected {kind} {want}")
    for f in failures:
        print("FAIL:", f)
    print(f"unique stages test: {len(targets)} targets passed" if not failures
          else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
