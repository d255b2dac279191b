#!/usr/bin/env python3
"""End-to-end bad-input tests of the nnc CLI.

Builds malformed and hostile models on the fly (scripts/onnxw.py), runs `nnc run`,
`nnc check` and `nnc inspect` on them, and checks that each ends with a clear message that
names the place, a non-zero exit, and no crash (no signal, no abort), and that none of them
tries a huge allocation (the runs are limited to 2 GiB of address space).

Usage: bad_input_test.py NNC_BINARY
"""
import os
import re
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnxw import (attr_int, field_bytes, field_varint, model, node, tensor,  # noqa: E402
                   value_info)

NNC = sys.argv[1]
EXAMPLE = os.path.join(ROOT, "examples", "models", "tiny_cnn")
INT64 = 7


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def external_tensor(name, dims, location):
    """A float TensorProto whose data lives in an external file."""
    entry = field_bytes(1, "location") + field_bytes(2, location)
    msg = b"".join(field_varint(1, d) for d in dims)
    msg += field_varint(2, 1) + field_bytes(8, name)
    return msg + field_bytes(13, entry) + field_varint(14, 1)


def relu_model(in_dims, extra_nodes=(), inits=(), relu_input="x"):
    nodes = list(extra_nodes) + [node("Relu", [relu_input], ["y"], "relu")]
    return model(nodes, [value_info("x", in_dims)], [value_info("y", in_dims)], inits)


def write(d, name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def main():
    failures = []
    d = tempfile.mkdtemp(prefix="nnc-bad-input-")
    inputs = os.path.join(d, "inputs")
    os.makedirs(inputs)
    write(inputs, "input_0.pb", tensor("x", [2, 3], [1, -2, 3, -4, 5, -6]))
    good = open(os.path.join(EXAMPLE, "model.onnx"), "rb").read()

    models = {
        "empty.onnx": b"",
        "garbage.onnx": bytes(range(256)) * 4,
        "truncated.onnx": good[: len(good) // 2],
        "unknown_op.onnx": model([node("FrobnicateX", ["x"], ["y"], "frob")],
                                 [value_info("x", [2, 3])], [value_info("y", [2, 3])]),
        "dangling.onnx": model([node("Add", ["x", "nowhere"], ["y"], "add0")],
                               [value_info("x", [2, 3])], [value_info("y", [2, 3])]),
        "cycle.onnx": model([node("Relu", ["b"], ["a"], "first"), node("Relu", ["a"], ["b"], "second"),
                             node("Add", ["x", "b"], ["y"], "join")],
                            [value_info("x", [2, 3])], [value_info("y", [2, 3])]),
        "bad_attr.onnx": model([node("Softmax", ["x"], ["y"], "sm", [attr_int("axis", 5)])],
                               [value_info("x", [2, 3])], [value_info("y", [2, 3])]),
        "huge_input.onnx": relu_model([1 << 20, 1 << 20, 1 << 10]),
        "huge_init.onnx": relu_model([2, 3], [node("Add", ["x", "w"], ["s"], "addw")],
                                     [tensor("w", [1 << 20, 1 << 20, 1 << 10], [1.0])], "s"),
        "ext_escape.onnx": relu_model([2, 3], [node("Add", ["x", "w"], ["s"], "addw")],
                                      [external_tensor("w", [2, 3], "../secret.bin")], "s"),
        "ext_absolute.onnx": relu_model([2, 3], [node("Add", ["x", "w"], ["s"], "addw")],
                                        [external_tensor("w", [2, 3], "/etc/passwd")], "s"),
        "ext_missing.onnx": relu_model([2, 3], [node("Add", ["x", "w"], ["s"], "addw")],
                                       [external_tensor("w", [2, 3], "missing.bin")], "s"),
        "many_unsupported.onnx": model(
            [node("FooOp", ["x"], ["a"], "foo"), node("Relu", ["a"], ["b"], "r", [attr_int("bogus", 1)]),
             node("BarOp", ["b"], ["y"], "bar")],
            [value_info("x", [2, 3])], [value_info("y", [2, 3])]),
    }
    # Valid but hostile: sizes that are absurd only once computed (issue 18).
    one = os.path.join(d, "inputs1")
    os.makedirs(one)
    write(one, "input_0.pb", tensor("x", [1], [2.0]))
    big = 1 << 20
    models.update({
        "expand_2e40.onnx": model([node("Expand", ["x", "shape"], ["y"], "expand_huge")],
                                  [value_info("x", [1])], [value_info("y", [big, big])],
                                  [tensor("shape", [2], [big, big], INT64, "q")]),
        "reshape_negative.onnx": model([node("Reshape", ["x", "shape"], ["y"], "reshape_neg")],
                                       [value_info("x", [2, 3])], [value_info("y", [2, 3])],
                                       [tensor("shape", [2], [-2, -3], INT64, "q")]),
        "fold_overflow.onnx": model([node("Mul", ["s", "s"], ["t"], "square"),
                                     node("ConstantOfShape", ["t"], ["y"], "fill")],
                                    [value_info("x", [1])], [value_info("y", [big * big] * 2)],
                                    [tensor("s", [2], [big, big], INT64, "q")]),
        "fold_huge.onnx": model([node("Mul", ["s", "two"], ["t"], "double"),
                                 node("ConstantOfShape", ["t"], ["c"], "fill"),
                                 node("Add", ["c", "x"], ["y"], "add")],
                                [value_info("x", [1])], [value_info("y", [2 * big, 2 * big])],
                                [tensor("s", [2], [big, big], INT64, "q"),
                                 tensor("two", [2], [2, 2], INT64, "q")]),
    })
    for name, data in models.items():
        write(d, name, data)
    write(d, "secret.bin", b"\0" * 24)

    checks = [0]

    def check(args, pattern, what):
        checks[0] += 1
        r = subprocess.run([NNC] + args, capture_output=True, text=True, timeout=60,
                           preexec_fn=limit_memory)
        out = r.stdout + r.stderr
        if r.returncode <= 0 or r.returncode >= 128:
            failures.append(f"{what}: exit code {r.returncode} (want a plain non-zero exit)\n{out}")
        elif not re.search(pattern, out, re.S):
            failures.append(f"{what}: output does not match /{pattern}/:\n{out}")
        elif "internal error" in out:
            failures.append(f"{what}: an internal error instead of a user error:\n{out}")
        else:
            print(f"ok   {what}: {out.strip().splitlines()[-1][:140]}")

    m = lambda n: os.path.join(d, n)
    run = lambda n: ["run", m(n), "--inputs-dir", inputs]
    check(run("empty.onnx"), r"empty\.onnx.*empty", "empty file")
    check(run("garbage.onnx"), r"garbage\.onnx", "garbage bytes")
    check(run("truncated.onnx"), r"truncated\.onnx", "truncated file")
    check(run("unknown_op.onnx"), r"frob.*FrobnicateX", "unknown operator")
    check(["check", m("unknown_op.onnx")], r"frob.*FrobnicateX", "check: unknown operator")
    check(run("dangling.onnx"), r"add0.*nowhere", "dangling input")
    check(run("cycle.onnx"), r"(first|second|join).*(cycle|not defined|before)", "cycle")
    check(run("bad_attr.onnx"), r"sm.*axis", "out-of-range attribute")
    check(run("huge_input.onnx"), r"'x'.*(too large|\[2,3\])", "absurd declared input shape")
    check(run("huge_init.onnx"), r"'w'.*(limit|bytes|elements|size)", "absurd initializer shape")
    check(run("ext_escape.onnx"), r"secret\.bin", "external data escaping the folder")
    check(run("ext_absolute.onnx"), r"/etc/passwd", "external data at an absolute path")
    check(run("ext_missing.onnx"), r"missing\.bin", "missing external data file")
    check(["run", m("no_such_model.onnx"), "--inputs-dir", inputs], r"no_such_model\.onnx",
          "missing model file")
    for cmd in (["run", d, "--inputs-dir", inputs], ["bench", d], ["inspect", d]):
        check(cmd, r"is a directory", f"{cmd[0]}: a directory as the model")
    check(["run", os.path.join(EXAMPLE, "model.onnx"), "--inputs-dir", os.path.join(d, "nope")],
          r"nope", "missing inputs dir")
    check(["run", os.path.join(EXAMPLE, "model.onnx"), "--inputs-dir", inputs],
          r"input.*\[", "wrong input shape")
    wrong_dtype = os.path.join(d, "wrong_dtype")
    os.makedirs(wrong_dtype)
    write(wrong_dtype, "input_0.pb", tensor("input", [1, 1, 8, 8], list(range(64)), INT64, "q"))
    check(["run", os.path.join(EXAMPLE, "model.onnx"), "--inputs-dir", wrong_dtype],
          r"input.*i64", "wrong input dtype")
    check(["run", os.path.join(EXAMPLE, "model.onnx"), "--input", "nosuch=" + m("x.pb")],
          r"nosuch", "unknown --input name")
    check(["check", m("many_unsupported.onnx")], r"FooOp.*bogus.*BarOp", "check lists all issues")
    check(run("many_unsupported.onnx"), r"FooOp.*bogus.*BarOp", "run refuses with the list")

    for target in ("interp", "cpu"):
        run1 = lambda n: ["run", m(n), "--inputs-dir", one, "--target", target]
        check(run1("expand_2e40.onnx"), r"expand_huge.*too large", f"{target}: 2^40-element Expand")
        check(run("reshape_negative.onnx") + ["--target", target], r"reshape_neg.*-2",
              f"{target}: Reshape to a negative product")
        check(run1("fold_overflow.onnx"), r"fill.*(overflow|too large)",
              f"{target}: a shape that overflows once folded")
        check(run1("fold_huge.onnx"), r"fill.*(too large|limit)",
              f"{target}: a shape that is huge once folded")

    if failures:
        print("\n".join("FAIL " + f for f in failures))
    print(f"bad-input cases: {checks[0] - len(failures)} ok, {len(failures)} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
