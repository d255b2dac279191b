#!/usr/bin/env python3
"""The patterns torchvision's detectors export (issue 48: SSDlite, Faster R-CNN; see
bench/detect_models.py), reduced, through `nnc check` and `nnc run` on interp, cpu and opencl.

Models written here (scripts/onnxw.py), each checked against answers computed in Python:
- batched_nms's guard: If(ReduceProd(Shape(boxes)) == 0, an empty result, the NMS branch),
  where the boxes' count is data-dependent (here a NonZero's) and the taken branch holds a
  data-dependent node of its own (NonZero standing in for NonMaxSuppression): the CPU runs it
  in stages, the If inlined once its condition is known;
- torch.squeeze(x, 1) on a value with a data-dependent row count: If(Shape(x)[1] == 1,
  Squeeze, Identity), whose branches differ in rank. The dim tested is static, so the If
  resolves while importing;
for both values of the data the conditions test.

Usage: detect_export_test.py NNC_BINARY
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import attr_graph, attr_int, attr_ints, graph, model, node, tensor, value_info  # noqa

from clitest import FLOAT, INT64, check, pb, run, write  # noqa: E402
import clitest  # noqa: E402

NNC = sys.argv[1]


def i64(name, dims, values):
    return tensor(name, dims, values, INT64, "q")


# ---- batched_nms's guard: y = [] if count(x > 0) == 0 else nonzero(x * x + x > 6), and
# z = 2 * float(nonzero(x > 0)) + 1. The elementwise chains inside the branch and of z fuse
# into groups numbered 0 in each graph, and both run in the stage after the first NonZero;
# inlined there, the branch's must keep a group of its own.
def nms_guard_model():
    then_b = graph([node("Identity", ["empty"], ["t"], "then_empty")], [],
                   [value_info("t", [1, 0], INT64)], name="then")
    else_b = graph([node("Mul", ["x", "x"], ["sq"], "else_square"),
                    node("Add", ["sq", "x"], ["sum"], "else_add"),
                    node("Greater", ["sum", "six"], ["big"], "else_greater"),
                    node("NonZero", ["big"], ["e"], "else_nonzero")], [],
                   [value_info("e", [1, "M"], INT64)], name="else")
    nodes = [node("Greater", ["x", "zero"], ["pos"], "positive"),
             node("NonZero", ["pos"], ["boxes"], "boxes"),
             node("Shape", ["boxes"], ["s"], "shape"),
             node("ReduceProd", ["s"], ["count"], "count", [attr_int("keepdims", 0)]),
             node("Equal", ["count", "zero_i"], ["none"], "none"),
             node("If", ["none"], ["y"], "guard",
                  [attr_graph("then_branch", then_b), attr_graph("else_branch", else_b)]),
             node("Cast", ["boxes"], ["fb"], "float_boxes", [attr_int("to", FLOAT)]),
             node("Mul", ["fb", "two"], ["b2"], "double"),
             node("Add", ["b2", "one"], ["z"], "plus_one")]
    return model(nodes, [value_info("x", [6])],
                 [value_info("y", [1, "K"], INT64), value_info("z", [1, "B"])],
                 [tensor("zero", [], [0.0]), tensor("one", [], [1.0]), tensor("two", [], [2.0]),
                  tensor("six", [], [6.0]), i64("zero_i", [], [0]),
                  i64("empty", [1, 0], [])], opset=13)


# ---- torch.squeeze(rows, 1), rows = transpose(nonzero(x > 0)) [n, 1]: y = the indices.
def squeeze_model():
    then_b = graph([node("Squeeze", ["rows", "axis1"], ["t"], "then_squeeze")], [],
                   [value_info("t", ["N"], INT64)], name="then")
    else_b = graph([node("Identity", ["rows"], ["e"], "else_identity")], [],
                   [value_info("e", ["N", 1], INT64)], name="else")
    nodes = [node("Greater", ["x", "zero"], ["pos"], "positive"),
             node("NonZero", ["pos"], ["nz"], "nonzero"),
             node("Transpose", ["nz"], ["rows"], "transpose", [attr_ints("perm", [1, 0])]),
             node("Shape", ["rows"], ["s"], "shape"),
             node("Gather", ["s", "one"], ["d1"], "dim1", [attr_int("axis", 0)]),
             node("Equal", ["d1", "one"], ["is_one"], "is_one"),
             node("If", ["is_one"], ["y"], "squeeze_if",
                  [attr_graph("then_branch", then_b), attr_graph("else_branch", else_b)])]
    return model(nodes, [value_info("x", [6])], [value_info("y", ["N"], INT64)],
                 [tensor("zero", [], [0.0]), i64("one", [], [1]), i64("axis1", [1], [1])],
                 opset=13)


def run_case(targets, path, args, want, what, d):
    """Each output's (values, shape) exactly as `want` has it."""
    clitest.run_case(NNC, targets, path, args, want, what, d, lambda got, e: got == e)


def main():
    with tempfile.TemporaryDirectory(prefix="nnc-detect-export-") as tmp:
        targets = clitest.targets(NNC, tmp)

        for name, make, cases in [
                ("nms_guard", nms_guard_model,
                 [([-1, -2, -3, -4, -5, -6], [([], [1, 0]), ([], [1, 0])]),
                  ([1, 3, -1, 4, 0, 2.5], [([1, 3, 5], [1, 3]), ([1, 3, 7, 11], [1, 4])]),
                  ([1, 1.5, -1, 0.5, 0, 2], [([], [1, 0]), ([1, 3, 7, 11], [1, 4])])]),
                ("squeeze", squeeze_model,
                 [([1, 3, -1, 4, 0, 2.5], [([0, 1, 3, 5], [4])]),
                  ([-1, -2, -3, -4, -5, 6], [([5], [1])])])]:
            before = len(clitest.failures)
            path = os.path.join(tmp, name + ".onnx")
            write(path, make())
            r = run([NNC, "check", path])
            check(r.returncode == 0, f"{name}: nnc check: {r.stderr}")
            for k, (x, want) in enumerate(cases):
                d = os.path.join(tmp, f"{name}_{k}")
                os.makedirs(d)
                run_case(targets, path, pb(d, "x", [6], x), [(list(v), list(e)) for v, e in want],
                         f"{name} x={x}", d)
            if len(clitest.failures) == before:
                print(f"ok: {name} ({', '.join(targets)})")
    return clitest.finish()


if __name__ == "__main__":
    sys.exit(main())
