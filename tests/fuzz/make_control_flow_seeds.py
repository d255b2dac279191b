#!/usr/bin/env python3
"""Writes the control-flow seeds of the fuzz targets (issue 49, waiting on issue 48) and
checks them.

Scan, Loop and If models, well-formed ones that run and broken ones a fuzzer should start from:
a Loop of an absurd trip count (must be refused, never allocated), a body reading an outer
value that no scope defines, a loop body and an If branch whose nodes form a cycle, a while
loop (a body that computes its loop condition: it runs), one with a per-step output and one
appending to a sequence (they run too),
a loop-carried value whose type changes, branches whose
results differ in rank, scan axes out of range, a Scan with no scanned input. Each model's control-flow node is named after the seed, and each seed
says what must happen: the model runs (on the interpreter and the CPU), or it stops with one
error line that names the node and says what is wrong (on the interpreter and the CPU).

  make_control_flow_seeds.py [OUT_DIR]     writes OUT_DIR/onnx_import/cflow-*.onnx (default:
                                           regressions/ beside this script)
  make_control_flow_seeds.py --check NNC [DIR]
                                           checks each seed's outcome with the nnc CLI, and
                                           that DIR/onnx_import holds exactly what this script
                                           writes (ctest fuzz_control_flow_seeds)
"""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import (attr_graph, attr_int, attr_ints, field_bytes, graph, model,  # noqa: E402
                   node, tensor, value_info)

FLOAT, INT64, BOOL = 1, 7, 9
NPY = {FLOAT: "<f4", INT64: "<i8", BOOL: "|b1"}
FMT = {FLOAT: "f", INT64: "q", BOOL: "B"}


def vi(name, dims, dt=FLOAT):
    return value_info(name, dims, dt)


class Seed:
    """One model: its nodes (the control-flow one named later), graph inputs (name, dims,
    dtype), initializers, outputs, and the error it must stop with (None: it must run)."""

    def __init__(self, make, inputs, inits, outputs, error=None):
        self.make, self.inputs, self.inits, self.outputs, self.error = (make, inputs, inits,
                                                                         outputs, error)

    def bytes(self, name):
        made = self.make(name)
        return model(made if isinstance(made, list) else [made], [vi(n, d, t) for n, d, t in self.inputs],
                     [vi(n, d, t) for n, d, t in self.outputs], self.inits, opset=16)


def loop_body(nodes, carried, outs, name="body"):
    """A Loop body: iteration number, condition, then `carried` (name, dims, dtype)."""
    ins = [vi("i", [], INT64), vi("cond_in", [], BOOL)] + [vi(n, d, t) for n, d, t in carried]
    return graph(nodes, ins, [vi(n, d, t) for n, d, t in outs], name=name)


def seeds():
    s = {}
    sum_body = graph([node("Add", ["acc", "xt"], ["acc2"], "add"),
                      node("Mul", ["acc2", "w"], ["y"], "mul")],
                     [vi("acc", [2]), vi("xt", [2])], [vi("acc2", [2]), vi("y", [2])],
                     name="sum")
    s["cflow-scan-two-outputs.onnx"] = Seed(
        lambda n: node("Scan", ["a0", "x"], ["a", "ys"], n,
                       [attr_graph("body", sum_body), attr_int("num_scan_inputs", 1),
                        attr_ints("scan_input_axes", [1]), attr_ints("scan_output_axes", [1])]),
        [("a0", [2], FLOAT), ("x", [2, 5], FLOAT), ("w", [2], FLOAT)], [],
        [("a", [2], FLOAT), ("ys", [2, 5], FLOAT)])
    s["cflow-scan-axis-out-of-range.onnx"] = Seed(
        lambda n: node("Scan", ["a0", "x"], ["a", "ys"], n,
                       [attr_graph("body", sum_body), attr_int("num_scan_inputs", 1),
                        attr_ints("scan_input_axes", [7])]),
        [("a0", [2], FLOAT), ("x", [2, 5], FLOAT), ("w", [2], FLOAT)], [],
        [("a", [2], FLOAT), ("ys", [5, 2], FLOAT)], error="'scan_input_axes' = 7 is out of range")
    s["cflow-scan-no-scanned-input.onnx"] = Seed(
        lambda n: node("Scan", ["a0", "x"], ["a", "ys"], n,
                       [attr_graph("body", sum_body), attr_int("num_scan_inputs", 0)]),
        [("a0", [2], FLOAT), ("x", [5, 2], FLOAT), ("w", [2], FLOAT)], [],
        [("a", [2], FLOAT), ("ys", [5, 2], FLOAT)], error="'num_scan_inputs' = 0")

    step = loop_body([node("Cast", ["i"], ["fi"], "cast", [attr_int("to", FLOAT)]),
                      node("Add", ["y_in", "fi"], ["y_out"], "add")],
                     [("y_in", [3], FLOAT)],
                     [("cond_in", [], BOOL), ("y_out", [3], FLOAT), ("y_out", [3], FLOAT)])
    s["cflow-loop-runs.onnx"] = Seed(
        lambda n: node("Loop", ["M", "cond", "y0"], ["y", "ys"], n, [attr_graph("body", step)]),
        [("y0", [3], FLOAT), ("cond", [], BOOL)], [tensor("M", [], [6], INT64, "q")],
        [("y", [3], FLOAT), ("ys", [6, 3], FLOAT)])
    s["cflow-loop-absurd-trip-count.onnx"] = Seed(
        lambda n: node("Loop", ["M", "", "y0"], ["y", "ys"], n, [attr_graph("body", step)]),
        [("y0", [3], FLOAT)], [tensor("M", [], [1 << 62], INT64, "q")],
        [("y", [3], FLOAT), ("ys", [1, 3], FLOAT)], error="limit")
    missing = loop_body([node("Add", ["y_in", "nowhere"], ["y_out"], "add")],
                        [("y_in", [3], FLOAT)], [("cond_in", [], BOOL), ("y_out", [3], FLOAT)])
    s["cflow-loop-missing-outer-value.onnx"] = Seed(
        lambda n: node("Loop", ["M", "", "y0"], ["y"], n, [attr_graph("body", missing)]),
        [("y0", [3], FLOAT)], [tensor("M", [], [3], INT64, "q")], [("y", [3], FLOAT)],
        error="dangling input 'nowhere'")
    computed = loop_body([node("ReduceSum", ["y_in"], ["t"], "sum"),
                          node("Less", ["t", "ten"], ["c"], "less"),
                          node("Add", ["y_in", "y_in"], ["y_out"], "add")],
                         [("y_in", [3], FLOAT)], [("c", [], BOOL), ("y_out", [3], FLOAT)])
    s["cflow-loop-computed-condition.onnx"] = Seed(
        lambda n: node("Loop", ["M", "cond", "y0"], ["y"], n, [attr_graph("body", computed)]),
        [("y0", [3], FLOAT), ("cond", [], BOOL)],
        [tensor("M", [], [50], INT64, "q"), tensor("ten", [], [10.0])], [("y", [3], FLOAT)])
    # The same while loop with a per-step output, whose row count only the end tells.
    computed_scan = loop_body([node("ReduceSum", ["y_in"], ["t"], "sum"),
                               node("Less", ["t", "ten"], ["c"], "less"),
                               node("Add", ["y_in", "y_in"], ["y_out"], "add")],
                              [("y_in", [3], FLOAT)],
                              [("c", [], BOOL), ("y_out", [3], FLOAT), ("t", [], FLOAT)])
    s["cflow-while-per-step-output.onnx"] = Seed(
        lambda n: node("Loop", ["M", "cond", "y0"], ["y", "ts"], n,
                       [attr_graph("body", computed_scan)]),
        [("y0", [3], FLOAT), ("cond", [], BOOL)],
        [tensor("M", [], [50], INT64, "q"), tensor("ten", [], [10.0])],
        [("y", [3], FLOAT), ("ts", ["steps"], FLOAT)])
    # The same while loop appending to a sequence (a Python list), stacked after it.
    appending = graph([node("ReduceSum", ["y_in"], ["t"], "sum"),
                       node("Less", ["t", "ten"], ["c"], "less"),
                       node("Add", ["y_in", "y_in"], ["y_out"], "add"),
                       node("SequenceInsert", ["s_in", "y_out"], ["s_out"], "append")],
                      [vi("i", [], INT64), vi("cond_in", [], BOOL), vi("y_in", [3], FLOAT),
                       field_bytes(1, "s_in")],
                      [vi("c", [], BOOL), vi("y_out", [3], FLOAT), field_bytes(1, "s_out")],
                      name="body")
    s["cflow-while-appends-to-sequence.onnx"] = Seed(
        lambda n: [node("SequenceConstruct", ["y0"], ["s0"], "construct"),
                   node("Loop", ["M", "cond", "y0", "s0"], ["y", "s"], n,
                        [attr_graph("body", appending)]),
                   node("ConcatFromSequence", ["s"], ["ys"], "stack",
                        [attr_int("axis", 0), attr_int("new_axis", 1)])],
        [("y0", [3], FLOAT), ("cond", [], BOOL)],
        [tensor("M", [], [50], INT64, "q"), tensor("ten", [], [10.0])],
        [("y", [3], FLOAT), ("ys", ["steps", 3], FLOAT)])
    # Two body nodes that read each other's results: a cycle inside a subgraph.
    cyclic = loop_body([node("Add", ["y_in", "b"], ["a"], "first"),
                        node("Relu", ["a"], ["b"], "second"),
                        node("Identity", ["a"], ["y_out"], "out")],
                       [("y_in", [3], FLOAT)], [("cond_in", [], BOOL), ("y_out", [3], FLOAT)])
    s["cflow-loop-body-cycle.onnx"] = Seed(
        lambda n: node("Loop", ["M", "", "y0"], ["y"], n, [attr_graph("body", cyclic)]),
        [("y0", [3], FLOAT)], [tensor("M", [], [2], INT64, "q")], [("y", [3], FLOAT)],
        error="is used before it is defined by node 'second'")
    retype = loop_body([node("Cast", ["y_in"], ["y_out"], "cast", [attr_int("to", INT64)])],
                       [("y_in", [3], FLOAT)], [("cond_in", [], BOOL), ("y_out", [3], INT64)])
    s["cflow-loop-state-changes-type.onnx"] = Seed(
        lambda n: node("Loop", ["M", "", "y0"], ["y"], n, [attr_graph("body", retype)]),
        [("y0", [3], FLOAT)], [tensor("M", [], [2], INT64, "q")], [("y", [3], FLOAT)],
        error="loop-carried value 0 starts as f32[3]")

    then_b = graph([node("Mul", ["x", "x"], ["t"], "mul")], [], [vi("t", [4])], name="then")
    else_b = graph([node("Neg", ["x"], ["e"], "neg")], [], [vi("e", [4])], name="else")
    s["cflow-if-runs.onnx"] = Seed(
        lambda n: node("If", ["cond"], ["y"], n,
                       [attr_graph("then_branch", then_b), attr_graph("else_branch", else_b)]),
        [("cond", [], BOOL), ("x", [4], FLOAT)], [], [("y", [4], FLOAT)])
    cyclic_b = graph([node("Mul", ["x", "q"], ["p"], "first"), node("Neg", ["p"], ["q"], "second")],
                     [], [vi("p", [4])], name="then")
    s["cflow-if-branch-cycle.onnx"] = Seed(
        lambda n: node("If", ["cond"], ["y"], n,
                       [attr_graph("then_branch", cyclic_b), attr_graph("else_branch", else_b)]),
        [("cond", [], BOOL), ("x", [4], FLOAT)], [], [("y", [4], FLOAT)],
        error="is used before it is defined by node 'second'")
    scalar_b = graph([node("ReduceSum", ["x"], ["e"], "sum", [attr_int("keepdims", 0)])], [],
                     [vi("e", [])], name="else")
    # The condition is computed, so that neither the importer nor specialization knows it.
    s["cflow-if-branch-ranks-differ.onnx"] = Seed(
        lambda n: [node("ReduceSum", ["x"], ["t"], "total", [attr_int("keepdims", 0)]),
                   node("Less", ["t", "zero"], ["cond"], "negative"),
                   node("If", ["cond"], ["y"], n, [attr_graph("then_branch", then_b),
                                                   attr_graph("else_branch", scalar_b)])],
        [("x", [4], FLOAT)], [tensor("zero", [], [0.0])], [("y", [4], FLOAT)],
        error="in the then branch but")
    return s


def node_name(file_name):
    return file_name[:-len(".onnx")].replace("-", "_")


def written():
    return {name: seed.bytes(node_name(name)) for name, seed in seeds().items()}


def write_npy(path, dtype, dims, n):
    """Pattern values (a bool input is true)."""
    vals = [1 if dtype == BOOL else (i % 7 - 3) * (0.5 if dtype == FLOAT else 1)
            for i in range(n)]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        NPY[dtype], "".join("%d, " % d for d in dims) if len(dims) != 1 else "%d," % dims[0])
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header.encode() + b" " * pad + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header)
        f.write(struct.pack("<%d%s" % (n, FMT[dtype]), *vals))


def check(nnc, regressions):
    failures = []
    want = written()
    folder = os.path.join(regressions, "onnx_import")
    for name, data in sorted(want.items()):
        path = os.path.join(folder, name)
        if not os.path.exists(path) or open(path, "rb").read() != data:
            failures.append("%s: missing or stale (rerun tests/fuzz/make_control_flow_seeds.py)"
                            % name)
    stray = sorted(f for f in os.listdir(folder) if f.startswith("cflow-") and f not in want)
    failures += ["%s: not written by this script" % f for f in stray]
    with tempfile.TemporaryDirectory() as tmp:
        for name, seed in sorted(seeds().items()):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(want[name])
            args = []
            for k, (nm, dims, dt) in enumerate(seed.inputs):
                n = 1
                for d in dims:
                    n *= d
                npy = os.path.join(tmp, "%s-%d.npy" % (name, k))
                write_npy(npy, dt, dims, n)
                args += ["--input", "%s=%s" % (nm, npy)]
            for target in ["interp", "cpu"]:
                r = subprocess.run([nnc, "run", path, "--target", target, "-q"] + args,
                                   capture_output=True, text=True, timeout=300)
                text = r.stdout + r.stderr
                if r.returncode < 0 or "Sanitizer" in text or "Assertion" in text:
                    failures.append("%s on %s: crashed (%d): %s" % (name, target, r.returncode,
                                                                  text[-2000:]))
                elif seed.error is None and r.returncode != 0:
                    failures.append("%s on %s: should run, failed: %s" % (name, target,
                                                                        text.strip()))
                elif seed.error is not None:
                    errors = [ln for ln in text.splitlines() if "error:" in ln]
                    if r.returncode == 0:
                        failures.append("%s on %s: ran, should fail with '%s'" % (
                            name, target, seed.error))
                    elif len(errors) != 1 or node_name(name) not in errors[0] or \
                            seed.error not in errors[0]:
                        failures.append("%s on %s: want one error line naming %s with '%s', "
                                        "got: %s" % (name, target, node_name(name), seed.error,
                                                     text.strip()))
    for f in failures:
        print("FAIL " + f)
    print("%d control-flow seeds checked, %d failures" % (len(want), len(failures)))
    return 1 if failures else 0


def main():
    args = sys.argv[1:]
    if args[:1] == ["--check"]:
        return check(args[1], args[2] if len(args) > 2 else os.path.join(HERE, "regressions"))
    root = args[0] if args else os.path.join(HERE, "regressions")
    out_dir = os.path.join(root, "onnx_import")
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.startswith("cflow-"):
            os.remove(os.path.join(out_dir, name))
    files = written()
    for name, data in sorted(files.items()):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(files), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
