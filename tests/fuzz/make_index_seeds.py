#!/usr/bin/env python3
"""Writes the index-tensor seeds of the fuzz targets (issue 49, item 3) into regressions/.

Each op that takes indices as data (Gather, GatherElements, GatherND, ScatterElements,
ScatterND) gets models whose indices are out of range, negative, absurd (+-2^40, INT64_MIN,
INT64_MAX) or shaped so they cannot fit the data; as an initializer (constant folding reads them
at import) and as a graph input (the fuzzer interprets it on its pattern inputs, -3 .. 3, so
an axis of size 2 is indexed out of range). Every one must end in an error naming the node,
never a crash or an allocation without bound; the normal test suite replays them
(ctest fuzz_regressions_onnx_import, fuzz_regressions_text_ir) and scripts/fuzz.sh starts its
corpus from them.

With --nnc NNC, the CPU kernels of the text seeds (`nnc inspect --kernels`: each index read
with its runtime check into the status buffer) become the kernel_ir target's seeds as well.

Usage: make_index_seeds.py [--nnc NNC] [OUT_DIR]  (default: regressions/ beside this script)
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import (attr_int, field_bytes, field_varint, model, node, tensor,  # noqa: E402
                   value_info)

FLOAT, INT64, INT32 = 1, 7, 6
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
ABSURD = [I64_MIN, I64_MAX, 1 << 40, -(1 << 40)]


def attr_string(name, s):
    return field_bytes(1, name) + field_bytes(4, s) + field_varint(20, 3)


def ints(name, dims, values, dtype=INT64):
    return tensor(name, dims, values, dtype, "q" if dtype == INT64 else "i")


def floats(name, dims):
    n = 1
    for d in dims:
        n *= d
    return tensor(name, dims, [float(k) for k in range(n)])


def one_op(op, x_dims, idx_dims, idx_values, out_dims, attrs=(), upd_dims=None,
           idx_input=False, idx_dtype=INT64, opset=13):
    """A model `y = op(x, indices[, updates])`; indices an initializer unless idx_input."""
    inputs = [value_info("x", x_dims)]
    inits = []
    if idx_input:
        inputs.append(value_info("i", idx_dims, idx_dtype))
    else:
        inits.append(ints("i", idx_dims, idx_values, idx_dtype))
    names = ["x", "i"]
    if upd_dims is not None:
        inputs.append(value_info("u", upd_dims))
        names.append("u")
    n = node(op, names, ["y"], "bad_" + op.lower(), attrs)
    return model([n], inputs, [value_info("y", out_dims)], inits, opset=opset)


def seeds():
    """The ONNX models."""
    out = {}
    # Gather (axis 1 of f32[3,2]): one index at the size, one below -size, the absurd ones.
    for tag, v in [("at-size", 2), ("below-minus-size", -3)] + \
            [("absurd-%d" % k, a) for k, a in enumerate(ABSURD)]:
        out["index-gather-const-%s.onnx" % tag] = one_op(
            "Gather", [3, 2], [2], [0, v], [3, 2], [attr_int("axis", 1)])
    out["index-gather-input.onnx"] = one_op(
        "Gather", [3, 2], [4], None, [3, 4], [attr_int("axis", 1)], idx_input=True)
    out["index-gather-input-i32.onnx"] = one_op(
        "Gather", [2, 3], [2, 3], None, [2, 3, 3], [attr_int("axis", 0)], idx_input=True,
        idx_dtype=INT32)
    out["index-gather-axis-absurd.onnx"] = one_op(
        "Gather", [3, 2], [2], [0, 1], [3, 2], [attr_int("axis", I64_MIN)])
    # An empty axis: every index is out of range.
    out["index-gather-empty-axis.onnx"] = one_op(
        "Gather", [3, 0], [1], [0], [3, 1], [attr_int("axis", 1)])
    # GatherElements (axis 0 of f32[2,3]).
    for tag, v in [("at-size", 2), ("below-minus-size", -3), ("absurd", I64_MIN)]:
        out["index-gather-elements-const-%s.onnx" % tag] = one_op(
            "GatherElements", [2, 3], [1, 3], [0, v, 1], [1, 3], [attr_int("axis", 0)])
    out["index-gather-elements-input.onnx"] = one_op(
        "GatherElements", [2, 3], [2, 3], None, [2, 3], [attr_int("axis", 0)], idx_input=True)
    # Indices larger than the data on a non-axis dim.
    out["index-gather-elements-too-wide.onnx"] = one_op(
        "GatherElements", [2, 3], [2, 9], [0] * 18, [2, 9], [attr_int("axis", 0)])
    # GatherND (f32[2,2]).
    for tag, v in [("at-size", 2), ("absurd", I64_MAX)]:
        out["index-gather-nd-const-%s.onnx" % tag] = one_op(
            "GatherND", [2, 2], [1, 2], [v, -1], [1])
    out["index-gather-nd-input.onnx"] = one_op(
        "GatherND", [2, 2], [3, 2], None, [3], idx_input=True)
    # Index tuples longer than the data's rank, and batch_dims past the rank.
    out["index-gather-nd-too-long.onnx"] = one_op(
        "GatherND", [2, 2], [1, 3], [0, 0, 0], [1])
    out["index-gather-nd-batch-dims-absurd.onnx"] = one_op(
        "GatherND", [2, 2], [2, 1], [0, 1], [2], [attr_int("batch_dims", 1 << 40)])
    # ScatterElements (axis 1 of f32[2,2]), with and without a reduction.
    for tag, v in [("at-size", 2), ("below-minus-size", -3), ("absurd", -(1 << 40))]:
        out["index-scatter-elements-const-%s.onnx" % tag] = one_op(
            "ScatterElements", [2, 2], [1, 2], [v, 0], [2, 2], [attr_int("axis", 1)],
            upd_dims=[1, 2], opset=16)
    out["index-scatter-elements-input-add.onnx"] = one_op(
        "ScatterElements", [2, 2], [2, 2], None, [2, 2],
        [attr_int("axis", 1), attr_string("reduction", "add")], upd_dims=[2, 2],
        idx_input=True, opset=16)
    # Updates whose shape is not the indices'.
    out["index-scatter-elements-updates-mismatch.onnx"] = one_op(
        "ScatterElements", [2, 2], [1, 2], [0, 1], [2, 2], [attr_int("axis", 1)],
        upd_dims=[5, 7], opset=16)
    # ScatterND (f32[2,2]).
    for tag, v in [("at-size", 2), ("absurd", I64_MIN)]:
        out["index-scatter-nd-const-%s.onnx" % tag] = one_op(
            "ScatterND", [2, 2], [1, 2], [0, v], [2, 2], upd_dims=[1], opset=16)
    out["index-scatter-nd-input-max.onnx"] = one_op(
        "ScatterND", [2, 2], [3, 2], None, [2, 2], [attr_string("reduction", "max")],
        upd_dims=[3], idx_input=True, opset=16)
    out["index-scatter-nd-too-long.onnx"] = one_op(
        "ScatterND", [2, 2], [1, 3], [0, 0, 0], [2, 2], upd_dims=[1], opset=16)
    # An indices initializer whose dims claim 2^40 elements over 16 bytes of data.
    x = value_info("x", [3, 2])
    y = value_info("y", [3, 1 << 40])
    n = node("Gather", ["x", "i"], ["y"], "bad_gather", [attr_int("axis", 1)])
    huge = (b"".join(field_varint(1, d) for d in [1 << 40]) + field_varint(2, INT64)
            + field_bytes(8, "i") + field_bytes(9, b"\0" * 16))
    out["index-gather-indices-dims-lie.onnx"] = model([n], [x], [y], [huge])
    return out


def nir(name, ins, op, args, attrs, result, consts=()):
    body = "".join("  %%%s = constant {value = dense<i64[%d]>[%s]} : i64[%d]\n"
                   % (c, len(vs), ", ".join(map(str, vs)), len(vs)) for c, vs in consts)
    return (f"graph @{name}({ins}) -> ({result}) {{\n{body}"
            f"  %y = {op}({args}) {attrs} : {result} @bad_{op}\n  return %y\n}}\n").encode()


def text_seeds():
    """The same ops in the text IR: indices an input (pattern values -3 .. 3 against an axis of
    size 2) or a constant holding the absurd values."""
    out = {}
    x = "%x: f32[3,2]"
    out["index-gather-input.nir"] = nir(
        "gather", x + ", %i: i64[4]", "gather", "%x, %i", "{axis = 1}", "f32[3,4]")
    out["index-gather-const-absurd.nir"] = nir(
        "gather", x, "gather", "%x, %i", "{axis = 1}", "f32[3,5]", [("i", [0] + ABSURD)])
    out["index-gather-elements-input.nir"] = nir(
        "gather_elements", x + ", %i: i64[3,2]", "gather_elements", "%x, %i", "{axis = 1}",
        "f32[3,2]")
    out["index-gather-nd-input.nir"] = nir(
        "gather_nd", "%x: f32[2,2], %i: i64[3,2]", "gather_nd", "%x, %i", "{batch_dims = 0}",
        "f32[3]")
    out["index-scatter-elements-input.nir"] = nir(
        "scatter_elements", x + ", %i: i64[3,2], %u: f32[3,2]", "scatter_elements",
        "%x, %i, %u", '{axis = 1, reduction = "add"}', "f32[3,2]")
    out["index-scatter-nd-input.nir"] = nir(
        "scatter_nd", "%x: f32[2,2], %i: i64[3,2], %u: f32[3]", "scatter_nd", "%x, %i, %u",
        '{reduction = "none"}', "f32[2,2]")
    return out


def kernel_seeds(nnc, texts, tmp_dir):
    """The CPU kernels `nnc inspect --kernels` prints for each text seed."""
    out = {}
    for name, text in texts.items():
        path = os.path.join(tmp_dir, name)
        with open(path, "wb") as f:
            f.write(text)
        r = subprocess.run([nnc, "inspect", path, "--kernels"], capture_output=True, check=True)
        out[name[:-len(".nir")] + ".kir"] = r.stdout
        os.remove(path)
    return out


def main():
    args = sys.argv[1:]
    nnc = None
    if args[:1] == ["--nnc"]:
        nnc, args = args[1], args[2:]
    out_dir = args[0] if args else os.path.join(HERE, "regressions")
    made_all = [("onnx_import", seeds()), ("text_ir", text_seeds())]
    if nnc:
        made_all.append(("kernel_ir", kernel_seeds(nnc, text_seeds(), out_dir)))
    for target, made in made_all:
        path = os.path.join(out_dir, target)
        os.makedirs(path, exist_ok=True)
        for name, data in sorted(made.items()):
            with open(os.path.join(path, name), "wb") as f:
                f.write(data)
        print("wrote %d seeds to %s" % (len(made), path))


if __name__ == "__main__":
    main()
