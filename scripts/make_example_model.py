#!/usr/bin/env python3
"""Writes the bundled example model examples/models/tiny_cnn/ in ONNX test-data layout.

A small digit-classifier-shaped CNN with fixed pseudo-random weights:
  x[N,1,8,8] -> Conv(4x1x3x3, pad 1) + bias -> Relu -> MaxPool 2x2 -> Flatten
             -> Gemm(64 -> 10, transB) -> Softmax
The batch dim is symbolic ("N"). The expected output is computed here in plain Python
(float64, independent of nnc) and stored as float32. Only the standard library is used:
the protobuf wire format is written by scripts/onnxw.py.
"""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnxw import attr_float, attr_int, attr_ints, field_bytes, field_varint, node, tensor, value_info  # noqa: E402

# ---- the model and its reference computation ---------------------------------------------


def main(out_dir):
    rng = random.Random(20261121)
    conv_w = [rng.uniform(-0.5, 0.5) for _ in range(4 * 9)]
    conv_b = [rng.uniform(-0.1, 0.1) for _ in range(4)]
    fc_w = [rng.uniform(-0.3, 0.3) for _ in range(10 * 64)]
    fc_b = [rng.uniform(-0.1, 0.1) for _ in range(10)]
    f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
    conv_w, conv_b, fc_w, fc_b = ([f32(v) for v in a] for a in (conv_w, conv_b, fc_w, fc_b))
    x = [f32(rng.uniform(0.0, 1.0)) for _ in range(64)]

    nodes = [
        node("Conv", ["input", "conv.w", "conv.b"], ["conv"], "conv1",
             [attr_ints("kernel_shape", [3, 3]), attr_ints("pads", [1, 1, 1, 1])]),
        node("Relu", ["conv"], ["relu"], "relu1"),
        node("MaxPool", ["relu"], ["pool"], "pool1",
             [attr_ints("kernel_shape", [2, 2]), attr_ints("strides", [2, 2])]),
        node("Flatten", ["pool"], ["flat"], "flatten", [attr_int("axis", 1)]),
        node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], "fc",
             [attr_int("transB", 1), attr_float("alpha", 1.0)]),
        node("Softmax", ["logits"], ["output"], "softmax", [attr_int("axis", 1)]),
    ]
    graph = b"".join(field_bytes(1, n) for n in nodes) + field_bytes(2, "tiny_cnn")
    graph += field_bytes(5, tensor("conv.w", [4, 1, 3, 3], conv_w))
    graph += field_bytes(5, tensor("conv.b", [4], conv_b))
    graph += field_bytes(5, tensor("fc.w", [10, 64], fc_w))
    graph += field_bytes(5, tensor("fc.b", [10], fc_b))
    graph += field_bytes(11, value_info("input", ["N", 1, 8, 8]))
    graph += field_bytes(12, value_info("output", ["N", 10]))
    model = field_varint(1, 8) + field_bytes(2, "nnc make_example_model.py")
    model += field_bytes(7, graph) + field_bytes(8, field_bytes(1, "") + field_varint(2, 13))

    # Reference: conv (pad 1) + relu + 2x2 max pool + gemm + softmax, in float64.
    conv = [[[0.0] * 8 for _ in range(8)] for _ in range(4)]
    for c in range(4):
        for i in range(8):
            for j in range(8):
                s = conv_b[c]
                for ki in range(3):
                    for kj in range(3):
                        y, z = i + ki - 1, j + kj - 1
                        if 0 <= y < 8 and 0 <= z < 8:
                            s += conv_w[c * 9 + ki * 3 + kj] * x[y * 8 + z]
                conv[c][i][j] = max(s, 0.0)
    flat = []
    for c in range(4):
        for i in range(4):
            for j in range(4):
                flat.append(max(conv[c][2 * i + a][2 * j + b] for a in (0, 1) for b in (0, 1)))
    logits = [fc_b[o] + sum(fc_w[o * 64 + k] * flat[k] for k in range(64)) for o in range(10)]
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    out = [v / sum(e) for v in e]

    data_dir = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(out_dir, "model.onnx"), "wb") as f:
        f.write(model)
    with open(os.path.join(data_dir, "input_0.pb"), "wb") as f:
        f.write(tensor("input", [1, 1, 8, 8], x))
    with open(os.path.join(data_dir, "output_0.pb"), "wb") as f:
        f.write(tensor("output", [1, 10], out))


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "examples", "models", "tiny_cnn"))
