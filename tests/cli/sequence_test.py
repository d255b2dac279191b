#!/usr/bin/env python3
"""ONNX sequences through the nnc CLI: static sequences resolved at import time.

- A model with a sequence input (a SequenceProto file, its length taken from the file), a
  SequenceInsert at a constant position and a ConcatFromSequence, with a sequence output and a
  tensor output: `nnc run` on interp and cpu matches answers computed here (--expected-dir),
  and --output-dir writes the sequence back as a SequenceProto that reads back equal.
- A SequenceAt whose position is a graph input: with the position given (`nnc run --input`)
  it resolves; without it (`nnc inspect`, which imports with no input values) the position is
  only known at run time, which is one error naming the node, never a guess.

Usage: sequence_test.py NNC_BINARY
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import (attr_int, field_bytes, field_varint, model, node, tensor,  # noqa: E402
                   value_info)

from clitest import FLOAT, INT64, check, run, write  # noqa: E402
import clitest  # noqa: E402

NNC = sys.argv[1]


def sequence_vi(name, elem=FLOAT):
    """A ValueInfoProto of type sequence(tensor(elem)) (TypeProto.sequence_type is field 4)."""
    ttype = field_bytes(1, field_varint(1, elem))
    return field_bytes(1, name) + field_bytes(2, field_bytes(4, field_bytes(1, ttype)))


def sequence_pb(name, tensors):
    """A SequenceProto of tensors (elem_type 1 = tensor) from encoded TensorProtos."""
    return field_bytes(1, name) + field_varint(2, 1) + b"".join(field_bytes(3, t) for t in tensors)


def const_i64(name, v):
    t = tensor(name, [], [v], INT64, "q")
    return node("Constant", [], [name], name + "_c",
                [field_bytes(1, "value") + field_bytes(5, t) + field_varint(20, 4)])


with tempfile.TemporaryDirectory() as d:
    # ---- xs (a sequence of [2] and [3]), t [1]: ys = xs with t inserted at 1, y = concat(ys).
    m = model(
        [const_i64("one", 1),
         node("SequenceInsert", ["xs", "t", "one"], ["ys"], "insert"),
         node("ConcatFromSequence", ["ys"], ["y"], "concat", [attr_int("axis", 0)])],
        [sequence_vi("xs"), value_info("t", [1])],
        [sequence_vi("ys"), value_info("y", [6])], opset=17)
    path = os.path.join(d, "seq.onnx")
    write(path, m)
    ins, want = os.path.join(d, "in"), os.path.join(d, "want")
    os.makedirs(ins)
    os.makedirs(want)
    a, b, t = [1.0, 2.0], [3.0, 4.0, 5.0], [9.0]
    write(os.path.join(ins, "input_0.pb"),
          sequence_pb("xs", [tensor("", [2], a), tensor("", [3], b)]))
    write(os.path.join(ins, "input_1.pb"), tensor("t", [1], t))
    write(os.path.join(want, "output_0.pb"),
          sequence_pb("ys", [tensor("", [2], a), tensor("", [1], t), tensor("", [3], b)]))
    write(os.path.join(want, "output_1.pb"), tensor("y", [6], a + t + b))
    for target in ("interp", "cpu"):
        out = os.path.join(d, "out_" + target)
        r = run([NNC, "run", path, "--inputs-dir", ins, "--expected-dir", want,
                 "--output-dir", out, "--target", target])
        check(r.returncode == 0 and "all 2 outputs match" in r.stdout,
              f"sequence model on {target}: {r.stdout}{r.stderr}")
        # What it wrote reads back as the expected sequence.
        r = run([NNC, "run", path, "--inputs-dir", ins, "--expected-dir", out, "-q",
                 "--target", "interp"])
        check(r.returncode == 0, f"written outputs of {target} read back: {r.stderr}")

    # ---- A wrong expected sequence (one tensor short) is reported, not passed.
    write(os.path.join(want, "output_0.pb"),
          sequence_pb("ys", [tensor("", [2], a), tensor("", [1], t)]))
    r = run([NNC, "run", path, "--inputs-dir", ins, "--expected-dir", want, "--target", "interp"])
    check(r.returncode == 1 and "a sequence of 3 tensors but expected a sequence of 2" in r.stderr,
          f"short expected sequence: {r.returncode} {r.stderr}")

    # ---- SequenceAt at a position that is a graph input.
    m = model(
        [node("SequenceConstruct", ["a", "b"], ["s"], "construct"),
         node("SequenceAt", ["s", "pos"], ["y"], "pick")],
        [value_info("a", [2]), value_info("b", [2]), value_info("pos", [], INT64)],
        [value_info("y", [2])], opset=17)
    path = os.path.join(d, "at.onnx")
    write(path, m)
    files = []
    for name, dims, vals, elem, fmt in (("a", [2], a, FLOAT, "f"), ("b", [2], [7.0, 8.0], FLOAT, "f"),
                                        ("pos", [], [-1], INT64, "q")):
        p = os.path.join(d, name + ".pb")
        write(p, tensor(name, dims, vals, elem, fmt))
        files += ["--input", f"{name}={p}"]
    r = run([NNC, "run", path, "--target", "cpu"] + files)
    check(r.returncode == 0 and "[7, 8]" in r.stdout,
          f"SequenceAt with a given position: {r.stdout}{r.stderr}")
    r = run([NNC, "inspect", path])
    check(r.returncode != 0 and "node 'pick' (SequenceAt)" in r.stderr and "position" in r.stderr
          and "run time" in r.stderr and "Traceback" not in r.stderr,
          f"run-time position: {r.returncode} {r.stderr}")

if clitest.finish():
    sys.exit(1)
print("sequence CLI tests passed")
