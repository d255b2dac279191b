#!/usr/bin/env python3
"""Index bounds through the nnc CLI: an index out of range is an error on every target.

For each op that takes indices as data (gather, gather_elements, gather_nd, scatter_elements,
scatter_nd), with the indices a graph input: an index at the axis' size, one below -size and
an absurd one (2^40) make `nnc run` exit 1 on interp, cpu and opencl with the same message,
the interpreter's, naming the node, the value and the axis size; so does the ahead-of-time
artifact of the model (`nnc compile --emit=lib`, run by nnc-exec), on the CPU and on OpenCL.
In-range indices, negative ones included, still give the right answer on all of them; and
a gather in a loop body (scan) reports from whichever iteration fails.
OpenCL parts run where a device is found (PoCL in CI) and say so when skipped.

Usage: index_bounds_test.py NNC_BINARY NNC_EXEC_BINARY
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import tensor  # noqa: E402
from train_data import read_npy, write_npy  # noqa: E402

from clitest import INT64, check, error_line  # noqa: E402
import clitest  # noqa: E402

NNC, NNC_EXEC = sys.argv[1], sys.argv[2]
X = [float(v) for v in range(12)]  # data: f32[3,4], x[r][c] = 4r + c


def run(args):
    return clitest.run(args, timeout=300)


def gather(i):
    return [X[4 * r + (c + 4 if c < 0 else c)] for r in range(3) for c in i]


def gather_elements(i):
    return [X[4 * (r + 3 if r < 0 else r) + c] for c, r in enumerate(i)]


def gather_nd(i):
    r, c = i
    return [X[4 * (r + 3 if r < 0 else r) + (c + 4 if c < 0 else c)]]


def scatter_elements(i):
    y = list(X)
    for k, c in enumerate(i):
        y[(c + 4 if c < 0 else c)] = 100.0 + k
    return y


def scatter_nd(i):
    y = list(X)
    r, c = i
    y[4 * (r + 3 if r < 0 else r) + (c + 4 if c < 0 else c)] = 100.0
    return y


# name: (op text, attributes, indices shape, result type, updates shape, axis size of the
# first index, the answer for in-range indices)
CASES = {
    "gather": ("gather", "{axis = 1}", [2], "f32[3,2]", None, 4, gather),
    "gather_elements": ("gather_elements", "{axis = 0}", [1, 2], "f32[1,2]", None, 3,
                        gather_elements),
    "gather_nd": ("gather_nd", "{batch_dims = 0}", [2], "f32[]", None, 3, gather_nd),
    "scatter_elements": ("scatter_elements", '{axis = 1, reduction = "none"}', [1, 2], "f32[3,4]",
                         [1, 2], 4,
                         scatter_elements),
    "scatter_nd": ("scatter_nd", '{reduction = "none"}', [1, 2], "f32[3,4]", [1], 3, scatter_nd),
}


SCAN_MODEL = """graph @scan_gather(%s0: f32[2], %ids: i64[3], %table: f32[4,2]) -> (f32[2], f32[3,2]) {
  %s, %ys = scan(%s0, %ids, %table) {num_carried = 1, num_scan_inputs = 1, reverse = 0} body graph @step(%acc: f32[2], %id: i64[], %t: f32[4,2]) -> (f32[2], f32[2]) {
    %row = gather(%t, %id) {axis = 0} : f32[2] @lookup
    %a = add(%acc, %row) : f32[2]
    return %a, %a
  } : f32[2], f32[3,2]
  return %s, %ys
}
"""


def model_text(name):
    op, attrs, ishape, result, ushape, _, _ = CASES[name]
    ins = "%x: f32[3,4], %i: i64[{}]".format(",".join(map(str, ishape)))
    args = "%x, %i"
    if ushape:
        ins += ", %u: f32[{}]".format(",".join(map(str, ushape)))
        args += ", %u"
    return (f"graph @{name}({ins}) -> ({result}) {{\n"
            f"  %y = {op}({args}) {attrs} : {result} @bad_{name}\n"
            "  return %y\n}\n")


def write_inputs(d, name, indices):
    """The model's inputs as .npy (for nnc run) and input_K.pb (for nnc-exec)."""
    _, _, ishape, _, ushape, _, _ = CASES[name]
    os.makedirs(d, exist_ok=True)
    files = {"x": (X, [3, 4], "f4"), "i": (indices, ishape, "i8")}
    if ushape:
        n = 1
        for e in ushape:
            n *= e
        files["u"] = ([100.0 + k for k in range(n)], ushape, "f4")
    args = []
    for k, (key, (values, shape, dtype)) in enumerate(files.items()):
        path = os.path.join(d, key + ".npy")
        write_npy(path, values, shape, dtype)
        args += ["--input", f"{key}={path}"]
        pb = tensor(key, shape, values, INT64, "q") if dtype == "i8" else tensor(key, shape, values)
        with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
            f.write(pb)
    return args


def main():
    with tempfile.TemporaryDirectory(prefix="nnc-index-bounds-") as tmp:
        probe = os.path.join(tmp, "probe.nir")
        with open(probe, "w") as f:
            f.write(model_text("gather"))
        args = write_inputs(os.path.join(tmp, "probe"), "gather", [0, 1])
        r = run([NNC, "run", probe, "--target", "opencl", "-q"] + args)
        targets = ["interp", "cpu"]
        if r.returncode == 0:
            targets.append("opencl")
        else:
            print("SKIP: the opencl parts (no OpenCL device: {})".format(error_line(r.stderr)))
        for name, (_, _, _, _, _, dim, answer) in CASES.items():
            model = os.path.join(tmp, name + ".nir")
            with open(model, "w") as f:
                f.write(model_text(name))
            libs = {}
            for t in [t for t in targets if t != "interp"]:
                out = os.path.join(tmp, f"{name}_{t}_lib")
                c = run([NNC, "compile", model, "-o", out, "--emit=lib", "--target", t])
                check(c.returncode == 0, f"{name}: nnc compile --emit=lib --target {t}: {c.stderr}")
                libs[t] = os.path.join(out, f"lib{name}.so")
            second = 1  # an in-range second index
            for bad in [dim, -dim - 1, 1 << 40]:
                d = os.path.join(tmp, f"{name}_{bad}")
                args = write_inputs(d, name, [bad, second])
                want = (f"node 'bad_{name}' ({CASES[name][0]}): index {bad} is out of range "
                        f"for an axis of size {dim}")
                for t in targets:
                    r = run([NNC, "run", model, "--target", t, "-q"] + args)
                    what = f"{name} index {bad} --target {t}"
                    check(r.returncode == 1, f"{what}: exit {r.returncode}, not 1")
                    check(want in r.stderr, f"{what}: stderr lacks '{want}': {r.stderr!r}")
                for t, lib in libs.items():
                    r = run([NNC_EXEC, lib, "--inputs-dir", d, "--output-dir",
                             os.path.join(d, "out_" + t)])
                    what = f"{name} index {bad} nnc-exec ({t} artifact)"
                    check(r.returncode != 0 and r.returncode < 128,
                          f"{what}: exit {r.returncode}, not an error")
                    check(want in r.stderr, f"{what}: stderr lacks '{want}': {r.stderr!r}")
            for good in [[-1, -2], [-dim, second], [dim - 1, -1]]:
                d = os.path.join(tmp, f"{name}_good_{good[0]}_{good[1]}")
                args = write_inputs(d, name, good)
                expect = answer(good)
                for t in targets:
                    out = os.path.join(d, "out_" + t)
                    r = run([NNC, "run", model, "--target", t, "-q", "--output-dir", out,
                             "--output-format", "npy"] + args)
                    what = f"{name} indices {good} --target {t}"
                    check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr}")
                    if r.returncode == 0:
                        got, _ = read_npy(os.path.join(out, "output_0.npy"))
                        check(list(got) == expect, f"{what}: {list(got)}, expected {expect}")
            print(f"ok: {name} ({', '.join(targets)}; artifacts: {', '.join(libs) or 'none'})")
        # A gather in a loop body (scan): its check reports from whichever iteration fails.
        model = os.path.join(tmp, "scan.nir")
        with open(model, "w") as f:
            f.write(SCAN_MODEL)
        table = [float(v) for v in range(8)]  # f32[4,2]
        for ids, want in [([-1, 0, 2], None),
                          ([0, 4, 1], "index 4 is out of range for an axis of size 4"),
                          ([-5, 0, 1], "index -5 is out of range for an axis of size 4")]:
            d = os.path.join(tmp, "scan_{}".format("_".join(map(str, ids))))
            os.makedirs(d)
            args = []
            inputs = [("s0", [0.0, 0.0], [2], "f4"), ("ids", ids, [3], "i8"),
                      ("table", table, [4, 2], "f4")]
            for key, values, shape, dtype in inputs:
                path = os.path.join(d, key + ".npy")
                write_npy(path, values, shape, dtype)
                args += ["--input", f"{key}={path}"]
            for t in targets:
                out = os.path.join(d, "out_" + t)
                r = run([NNC, "run", model, "--target", t, "-q", "--output-dir", out,
                         "--output-format", "npy"] + args)
                what = f"scan ids {ids} --target {t}"
                if want is None:
                    check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr}")
                    if r.returncode == 0:
                        got, _ = read_npy(os.path.join(out, "output_0.npy"))
                        rows = [(i + 4) % 4 for i in ids]
                        expect = [sum(table[2 * i + c] for i in rows) for c in range(2)]
                        check(list(got) == expect, f"{what}: {list(got)}, expected {expect}")
                else:
                    want_full = "node 'lookup' (gather): " + want
                    check(r.returncode == 1, f"{what}: exit {r.returncode}, not 1")
                    check(want_full in r.stderr,
                          f"{what}: stderr lacks '{want_full}': {r.stderr!r}")
        print(f"ok: a gather in a loop body ({', '.join(targets)})")
    if clitest.finish():
        return 1
    print("all index bounds checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
