"""The digits data and MLP models for `nnc train` (standard library only).

Shared by tests/cli/train_test.py and bench/train_peer.py: scikit-learn's bundled digits
(Debian python3-sklearn: 1,797 8x8 images, 64 pixels 0..16 and a label per row), a fixed
80/20 split, .npy reading and writing, and an MLP as an ONNX model (Gemm + Relu layers with
PyTorch nn.Linear's layout and initialization range).
"""
import gzip
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnxw import attr_int, attr_ints, model, node, tensor, value_info  # noqa: E402

DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
INT64 = 7


def load_digits(path=DIGITS):
    """(pixels scaled to [0, 1] as lists of 64 floats, labels as ints)."""
    xs, ys = [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            v = line.strip().split(",")
            if len(v) != 65:
                continue
            xs.append([float(p) / 16.0 for p in v[:64]])
            ys.append(int(float(v[64])))
    return xs, ys


def split(xs, ys, train_fraction=0.8, seed=0):
    """A seeded shuffle, then the first 80% for training: (xtr, ytr, xte, yte)."""
    idx = list(range(len(xs)))
    random.Random(seed).shuffle(idx)
    n = int(len(idx) * train_fraction)
    tr, te = idx[:n], idx[n:]
    return ([xs[i] for i in tr], [ys[i] for i in tr], [xs[i] for i in te], [ys[i] for i in te])


def _npy_header(descr, shape):
    shape_s = "(%s)" % ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_s)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()


def write_npy(path, values, shape, dtype="f4"):
    """Writes flat `values` as a little-endian f4 / f8 / i8 array of `shape`."""
    code = {"f4": "f", "f8": "d", "i8": "q"}[dtype]
    with open(path, "wb") as f:
        f.write(_npy_header("<" + dtype, shape))
        f.write(struct.pack("<%d%s" % (len(values), code), *values))


def read_npy(path):
    """(flat values, shape) of a little-endian f4 / f8 / i4 / i8 / bool .npy file."""
    with open(path, "rb") as f:
        data = f.read()
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode()
    descr = header.split("'descr':")[1].split("'")[1]
    shape_s = header.split("'shape':")[1].split("(")[1].split(")")[0]
    shape = [int(d) for d in shape_s.split(",") if d.strip()]
    code = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q", "|b1": "?"}[descr]
    n = 1
    for d in shape:
        n *= d
    return list(struct.unpack_from("<%d%s" % (n, code), data, 10 + hlen)), shape


def init_mlp(sizes, seed=0):
    """nn.Linear's initialization range U(-1/sqrt(in), 1/sqrt(in)) for weights [out, in] and
    biases, from a seeded generator: [(w flat, b), ...]."""
    rng = random.Random(seed)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        w = [rng.uniform(-bound, bound) for _ in range(fan_in * fan_out)]
        b = [rng.uniform(-bound, bound) for _ in range(fan_out)]
        layers.append((w, b))
    return layers


def mlp_model(sizes, layers, batch="N"):
    """An ONNX MLP: Gemm(transB=1) + Relu per hidden layer, logits out. Input 'x', output
    'logits', initializers w0, b0, w1, b1, ..."""
    nodes, inits = [], []
    cur = "x"
    for i, (w, b) in enumerate(layers):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        inits.append(tensor("w%d" % i, [fan_out, fan_in], w))
        inits.append(tensor("b%d" % i, [fan_out], b))
        out = "logits" if i == len(layers) - 1 else "h%d" % i
        gemm_out = out if i == len(layers) - 1 else "z%d" % i
        nodes.append(node("Gemm", [cur, "w%d" % i, "b%d" % i], [gemm_out], "fc%d" % i,
                          [attr_int("transB", 1)]))
        if i != len(layers) - 1:
            nodes.append(node("Relu", [gemm_out], [out], "relu%d" % i))
        cur = out
    return model(nodes, [value_info("x", [batch, sizes[0]])],
                 [value_info("logits", [batch, sizes[-1]])], inits, opset=13, name="mlp")


def lenet5_params(seed=0):
    """LeNet-5's parameters [(name, dims, flat values)], initialized like PyTorch's layers'
    range U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    rng = random.Random(seed)

    def u(n, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return [rng.uniform(-bound, bound) for _ in range(n)]

    ps = [("c0", [6, 1, 5, 5], u(150, 25)), ("cb0", [6], u(6, 25)),
          ("c1", [16, 6, 5, 5], u(2400, 150)), ("cb1", [16], u(16, 150))]
    sizes = [400, 120, 84, 10]
    for i in range(3):
        ps.append(("w%d" % i, [sizes[i + 1], sizes[i]], u(sizes[i] * sizes[i + 1], sizes[i])))
        ps.append(("b%d" % i, [sizes[i + 1]], u(sizes[i + 1], sizes[i])))
    return ps


def lenet5_model(params, batch="N"):
    """LeNet-5 on [N, 1, 28, 28]: conv 6@5x5 pad 2, relu, max pool 2, conv 16@5x5, relu,
    max pool 2, flatten, Gemm 400-120-84-10 with relus; `params` from lenet5_params."""
    inits = [tensor(n, d, v) for n, d, v in params]
    pool = [attr_ints("kernel_shape", [2, 2]), attr_ints("strides", [2, 2])]
    nodes = [node("Conv", ["x", "c0", "cb0"], ["a0"], "conv0",
                  [attr_ints("kernel_shape", [5, 5]), attr_ints("pads", [2, 2, 2, 2])]),
             node("Relu", ["a0"], ["r0"], "relu0"),
             node("MaxPool", ["r0"], ["p0"], "pool0", pool),
             node("Conv", ["p0", "c1", "cb1"], ["a1"], "conv1",
                  [attr_ints("kernel_shape", [5, 5])]),
             node("Relu", ["a1"], ["r1"], "relu1"),
             node("MaxPool", ["r1"], ["p1"], "pool1", pool),
             node("Flatten", ["p1"], ["f"], "flatten", [attr_int("axis", 1)])]
    cur = "f"
    for i in range(3):
        out = "logits" if i == 2 else "h%d" % i
        z = out if i == 2 else "z%d" % i
        nodes.append(node("Gemm", [cur, "w%d" % i, "b%d" % i], [z], "fc%d" % i,
                          [attr_int("transB", 1)]))
        if i != 2:
            nodes.append(node("Relu", [z], [out], "frelu%d" % i))
        cur = out
    return model(nodes, [value_info("x", [batch, 1, 28, 28])], [value_info("logits", [batch, 10])],
                 inits, opset=13, name="lenet5")
