#!/usr/bin/env python3
"""Q/DQ models as a PyTorch 1.13 QAT export writes them (opset 13), without the onnx package.

Activations are quantized per tensor to uint8 (QuantizeLinear -> DequantizeLinear) before each
Gemm, MatMul and Conv; weights are float initializers through QuantizeLinear(axis 0, int8, zero
point 0) -> DequantizeLinear per output channel; biases stay float; a residual add reads two
dequantized tensors. Used by tests/cli/qdq_lower_test.py and bench/qdq (the sizes differ).

  mlp:  Gemm(transB=1) + Relu, Gemm + Relu, a residual add, Gemm, quantized output
  bert: one encoder block: Q/K/V projections (DQ(W) -> Transpose -> MatMul, + bias), heads
        by Reshape/Transpose, Q.K^T of two dequantized activations, softmax, P.V with a
        float V, output projection, residual add, a Relu feed-forward pair
  cnn:  Conv + Relu, MaxPool, Conv + Relu, 1x1 Conv, residual add, global pool, Gemm
  exact: u8 input -> DQ -> MaxPool -> Q, and a MatMul whose scales are powers of two (the f32
        path sums exactly too), so both paths must agree bit for bit

Usage: make_qdq_models.py OUTDIR [--size test|bench]
"""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnxw import (attr_int, attr_ints, field_bytes, field_varint, model, node, tensor,  # noqa: E402
                   value_info)

UINT8, INT8, INT64 = 2, 3, 7


def attr_str(name, v):
    return field_bytes(1, name) + field_bytes(4, v) + field_varint(20, 3)


class Builder:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def fresh(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def const(self, name, dims, values, data_type=1, fmt="f"):
        self.inits.append(tensor(name, dims, values, data_type=data_type, fmt=fmt))
        return name

    def add(self, op, inputs, attrs=(), base=None):
        out = self.fresh(base or op.lower())
        self.nodes.append(node(op, inputs, [out], out, list(attrs)))
        return out

    def qdq(self, x, scale, zero=0):
        """Per-tensor uint8 fake quantization of activation x."""
        s = self.const(self.fresh("s"), [], [scale])
        z = self.const(self.fresh("z"), [], [zero], UINT8, "B")
        q = self.add("QuantizeLinear", [x, s, z], base="q")
        return self.add("DequantizeLinear", [q, s, z], base="dq"), q

    def weight(self, dims, fan_in):
        """A float weight quantized per output channel (axis 0) to int8, dequantized."""
        bound = math.sqrt(3.0 / fan_in)
        count = 1
        for d in dims:
            count *= d
        vals = [self.rng.uniform(-bound, bound) for _ in range(count)]
        per = count // dims[0]
        scales = [max(abs(v) for v in vals[c * per:(c + 1) * per]) / 127 for c in range(dims[0])]
        w = self.const(self.fresh("w"), dims, vals)
        s = self.const(self.fresh("ws"), [dims[0]], scales)
        z = self.const(self.fresh("wz"), [dims[0]], [0] * dims[0], INT8, "b")
        q = self.add("QuantizeLinear", [w, s, z], [attr_int("axis", 0)], base="wq")
        return self.add("DequantizeLinear", [q, s, z], [attr_int("axis", 0)], base="wd")

    def bias(self, n):
        return self.const(self.fresh("b"), [n], [self.rng.uniform(-0.1, 0.1) for _ in range(n)])

    def i64(self, values):
        return self.const(self.fresh("shape"), [len(values)], values, INT64, "q")


# Activation scales without calibration: signed values in about [-4, 4], relu outputs in [0, 4].
SIGNED, RELU = (8.0 / 255, 128), (4.0 / 255, 0)


def mlp(m, d, h, o, seed=1):
    b = Builder(seed)
    x, _ = b.qdq("x", 2.0 / 255, 128)
    h1 = b.add("Gemm", [x, b.weight([h, d], d), b.bias(h)], [attr_int("transB", 1)])
    h1 = b.add("Relu", [h1])
    h1d, _ = b.qdq(h1, *RELU)
    h2 = b.add("Gemm", [h1d, b.weight([h, h], h), b.bias(h)], [attr_int("transB", 1)])
    h2 = b.add("Relu", [h2])
    h2d, _ = b.qdq(h2, *RELU)
    r = b.add("Add", [h1d, h2d])
    rd, _ = b.qdq(r, *RELU)
    y = b.add("Gemm", [rd, b.weight([o, h], h), b.bias(o)], [attr_int("transB", 1)])
    yd, yq = b.qdq(y, *SIGNED)
    return model(b.nodes, [value_info("x", [m, d])],
                 [value_info(yd, [m, o]), value_info(yq, [m, o], elem_type=UINT8)], b.inits,
                 name="qdq_mlp")


def bert(s, d, heads, ff, seed=2):
    b = Builder(seed)
    dh = d // heads

    def linear(xd, n_in, n_out):
        wt = b.add("Transpose", [b.weight([n_out, n_in], n_in)], [attr_ints("perm", [1, 0])])
        return b.add("Add", [b.add("MatMul", [xd, wt]), b.bias(n_out)])

    x, _ = b.qdq("x", 2.0 / 255, 128)
    split = b.i64([1, s, heads, dh])
    qd, _ = b.qdq(linear(x, d, d), *SIGNED)
    kd, _ = b.qdq(linear(x, d, d), *SIGNED)
    v = linear(x, d, d)
    q4 = b.add("Transpose", [b.add("Reshape", [qd, split])], [attr_ints("perm", [0, 2, 1, 3])])
    kt = b.add("Transpose", [b.add("Reshape", [kd, split])], [attr_ints("perm", [0, 2, 3, 1])])
    v4 = b.add("Transpose", [b.add("Reshape", [v, split])], [attr_ints("perm", [0, 2, 1, 3])])
    scores = b.add("Mul", [b.add("MatMul", [q4, kt]), b.const("scale", [], [1 / math.sqrt(dh)])])
    p = b.add("Softmax", [scores], [attr_int("axis", -1)])
    pd, _ = b.qdq(p, 1.0 / 255, 0)
    ctx = b.add("MatMul", [pd, v4])
    ctx = b.add("Reshape", [b.add("Transpose", [ctx], [attr_ints("perm", [0, 2, 1, 3])]),
                            b.i64([1, s, d])])
    cd, _ = b.qdq(ctx, *SIGNED)
    att = linear(cd, d, d)
    ad, _ = b.qdq(att, *SIGNED)
    r = b.add("Add", [x, ad])
    rd, _ = b.qdq(r, *SIGNED)
    f = b.add("Relu", [linear(rd, d, ff)])
    fd, _ = b.qdq(f, *RELU)
    y = linear(fd, ff, d)
    yd, yq = b.qdq(y, *SIGNED)
    return model(b.nodes, [value_info("x", [1, s, d])],
                 [value_info(yd, [1, s, d]), value_info(yq, [1, s, d], elem_type=UINT8)],
                 b.inits, name="qdq_bert")


def cnn(n, c, hw, width, classes, seed=3):
    b = Builder(seed)
    pads = [attr_ints("pads", [1, 1, 1, 1])]
    x, _ = b.qdq("x", 2.0 / 255, 128)
    c1 = b.add("Relu", [b.add("Conv", [x, b.weight([width, c, 3, 3], 9 * c), b.bias(width)],
                              pads)])
    c1d, _ = b.qdq(c1, *RELU)
    p = b.add("MaxPool", [c1d], [attr_ints("kernel_shape", [2, 2]), attr_ints("strides", [2, 2])])
    pd, _ = b.qdq(p, *RELU)
    c2 = b.add("Relu", [b.add("Conv", [pd, b.weight([width, width, 3, 3], 9 * width),
                                       b.bias(width)], pads)])
    c2d, _ = b.qdq(c2, *RELU)
    c3 = b.add("Conv", [c2d, b.weight([width, width, 1, 1], width), b.bias(width)])
    c3d, _ = b.qdq(c3, *SIGNED)
    r = b.add("Relu", [b.add("Add", [pd, c3d])])
    rd, _ = b.qdq(r, *RELU)
    g = b.add("Flatten", [b.add("GlobalAveragePool", [rd])])
    gd, _ = b.qdq(g, *RELU)
    y = b.add("Gemm", [gd, b.weight([classes, width], width), b.bias(classes)],
              [attr_int("transB", 1)])
    yd, yq = b.qdq(y, *SIGNED)
    return model(b.nodes, [value_info("x", [n, c, hw, hw])],
                 [value_info(yd, [n, classes]), value_info(yq, [n, classes], elem_type=UINT8)],
                 b.inits, name="qdq_cnn")


def exact(seed=4):
    """Outputs both paths compute exactly: a max pool of a u8 input, requantized with its own
    parameters, and a matmul whose scales are powers of two and sums stay below 2^24."""
    b = Builder(seed)
    s = b.const("s", [], [0.125])
    z = b.const("z", [], [100], UINT8, "B")
    xd = b.add("DequantizeLinear", ["xq", s, z])
    p = b.add("MaxPool", [xd], [attr_ints("kernel_shape", [3, 3]), attr_ints("strides", [1, 1]),
                                attr_ints("pads", [1, 1, 1, 1])])
    pq = b.add("QuantizeLinear", [p, s, z])
    a = b.add("Reshape", [xd, b.i64([8, 36])])
    wq = b.const("wq", [36, 5], [b.rng.randint(-127, 127) for _ in range(36 * 5)], INT8, "b")
    ws = b.const("ws", [5], [2.0 ** -k for k in range(5)])
    wz = b.const("wz", [5], [0, 3, -2, 0, 1], INT8, "b")
    wd = b.add("DequantizeLinear", [wq, ws, wz], [attr_int("axis", 1)])
    mm = b.add("MatMul", [a, wd])
    # Data movement on the u8 data: slice, gather, concat, transpose, nearest resize.
    sl = b.add("Slice", [xd, b.i64([1]), b.i64([5]), b.i64([3])])
    ga = b.add("Gather", [xd, b.i64([0, 5, 2, 2])], [attr_int("axis", 3)])
    cc = b.add("Concat", [sl, ga], [attr_int("axis", 3)])
    tr = b.add("Transpose", [cc], [attr_ints("perm", [0, 1, 3, 2])])
    rs = b.add("Resize", [tr, "", b.const("scales", [4], [1.0, 1.0, 2.0, 1.0])],
               [attr_str("mode", "nearest")])
    rq = b.add("QuantizeLinear", [rs, s, z])
    return model(b.nodes, [value_info("xq", [2, 4, 6, 6], elem_type=UINT8)],
                 [value_info(pq, [2, 4, 6, 6], elem_type=UINT8), value_info(mm, [8, 5]),
                  value_info(rq, [2, 4, 16, 6], elem_type=UINT8)],
                 b.inits, name="qdq_exact")


SIZES = {
    "test": {"mlp": (8, 64, 48, 16), "bert": (8, 32, 2, 64), "cnn": (1, 3, 12, 8, 10)},
    "bench": {"mlp": (64, 1024, 1024, 256), "bert": (128, 256, 4, 1024),
              "cnn": (1, 3, 64, 64, 100)},
}


def write_all(outdir, size="test"):
    os.makedirs(outdir, exist_ok=True)
    sz = SIZES[size]
    models = {"mlp": mlp(*sz["mlp"]), "bert": bert(*sz["bert"]), "cnn": cnn(*sz["cnn"])}
    if size == "test":
        models["exact"] = exact()
    for name, data in models.items():
        with open(os.path.join(outdir, "qdq_%s.onnx" % name), "wb") as f:
            f.write(data)
    return sorted(models)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    size = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--size" else "test"
    print(" ".join(write_all(sys.argv[1], size)))
