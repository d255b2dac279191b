#!/usr/bin/env python3
"""Writes a small YOLO-style detector (backbone, FPN neck, detect head and box decode in the
graph) in ONNX test-data layout: DIR/model.onnx and DIR/test_data_set_0/input_0.pb.

    python3 scripts/make_yolo_head.py DIR [--size 64] [--width 16] [--classes 3]

The shape of YOLOv5's export, at a size that compiles quickly (issue 50's detector):
  x[1,3,S,S] -> five Conv 3x3 stride 2 + SiLU (x * sigmoid(x)): P3 (stride 8), P4 (16), P5 (32)
  neck: Resize(P5, nearest x2) ++ P4 -> Conv 1x1 + SiLU -> N4; Resize(N4) ++ P3 -> Conv -> N3
  head: per scale, Conv 1x1 -> 3 * (5 + classes) channels, then the decode: Reshape to
        [1, 3, 5 + classes, H, W], Transpose to [1, 3, H, W, 5 + classes], Sigmoid, Slices
        xy | wh | rest, xy = (xy * 2 - 0.5 + grid) * stride, wh = Pow(wh * 2, 2) * anchor,
        Concat(xy, wh, rest), Reshape to [1, 3 H W, 5 + classes]
  output: Concat of the three scales on axis 1.
Weights and the input are fixed pseudo-random values (no expected output: tests compare the
backends with nnc's reference interpreter). Only the standard library is used.
"""
import argparse
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnxw import attr_int, attr_ints, field_bytes, field_varint, model, node, tensor, value_info  # noqa: E402

INT64 = 7


def attr_str(name, v):
    """A STRING AttributeProto (type 3)."""
    return field_bytes(1, name) + field_bytes(4, v) + field_varint(20, 3)


class Builder:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def name(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def const(self, base, dims, values, data_type=1, fmt="f"):
        n = self.name(base)
        self.inits.append(tensor(n, dims, values, data_type, fmt))
        return n

    def ints(self, base, values):
        return self.const(base, [len(values)], values, INT64, "q")

    def op(self, op_type, inputs, attrs=(), base=None):
        out = self.name(base or op_type.lower())
        self.nodes.append(node(op_type, inputs, [out], out, attrs))
        return out

    def conv(self, x, cin, cout, k, stride, silu=True):
        bound = (6.0 / (cin * k * k)) ** 0.5
        w = self.const("w", [cout, cin, k, k],
                       [self.rng.uniform(-bound, bound) for _ in range(cout * cin * k * k)])
        b = self.const("b", [cout], [self.rng.uniform(-0.1, 0.1) for _ in range(cout)])
        pad = k // 2
        y = self.op("Conv", [x, w, b], [attr_ints("kernel_shape", [k, k]),
                                        attr_ints("strides", [stride, stride]),
                                        attr_ints("pads", [pad] * 4)])
        if not silu:
            return y
        return self.op("Mul", [y, self.op("Sigmoid", [y])], base="silu")

    def up(self, x):
        scales = self.const("scales", [4], [1.0, 1.0, 2.0, 2.0])
        return self.op("Resize", [x, "", scales], [attr_str("mode", "nearest")])

    def decode(self, h, hw, stride, anchors, no):
        """The box decode of one scale's head output h[1, 3*no, hw, hw]."""
        r = self.op("Reshape", [h, self.ints("shape", [1, 3, no, hw, hw])])
        t = self.op("Transpose", [r], [attr_ints("perm", [0, 1, 3, 4, 2])])
        y = self.op("Sigmoid", [t])

        def sl(lo, hi):
            return self.op("Slice", [y, self.ints("starts", [lo]), self.ints("ends", [hi]),
                                     self.ints("axes", [4])])

        grid = []
        for i in range(hw):
            for j in range(hw):
                grid += [float(j), float(i)]
        g = self.const("grid", [1, 1, hw, hw, 2], grid)
        a = self.const("anchor", [1, 3, 1, 1, 2], [float(v) for pair in anchors for v in pair])
        two = self.const("two", [], [2.0])
        half = self.const("half", [], [0.5])
        st = self.const("stride", [], [float(stride)])
        xy = self.op("Mul", [self.op("Add", [self.op("Sub", [self.op("Mul", [sl(0, 2), two]), half]), g]), st])
        wh = self.op("Mul", [self.op("Pow", [self.op("Mul", [sl(2, 4), two]), two]), a])
        c = self.op("Concat", [xy, wh, sl(4, no)], [attr_int("axis", 4)])
        return self.op("Reshape", [c, self.ints("shape", [1, 3 * hw * hw, no])])


def build(size, width, classes):
    b = Builder(20261202)
    no = 5 + classes
    w = width
    x = b.conv("images", 3, w, 3, 2)
    x = b.conv(x, w, w, 3, 2)
    p3 = b.conv(x, w, 2 * w, 3, 2)
    p4 = b.conv(p3, 2 * w, 2 * w, 3, 2)
    p5 = b.conv(p4, 2 * w, 4 * w, 3, 2)
    n4 = b.conv(b.op("Concat", [b.up(p5), p4], [attr_int("axis", 1)]), 6 * w, 2 * w, 1, 1)
    n3 = b.conv(b.op("Concat", [b.up(n4), p3], [attr_int("axis", 1)]), 4 * w, 2 * w, 1, 1)
    anchors = [[(10, 13), (16, 30), (33, 23)], [(30, 61), (62, 45), (59, 119)],
               [(116, 90), (156, 198), (373, 326)]]
    outs = []
    for i, (feat, cin) in enumerate([(n3, 2 * w), (n4, 2 * w), (p5, 4 * w)]):
        stride = 8 << i
        h = b.conv(feat, cin, 3 * no, 1, 1, silu=False)
        outs.append(b.decode(h, size // stride, stride, anchors[i], no))
    b.nodes.append(node("Concat", outs, ["output"], "detect", [attr_int("axis", 1)]))
    boxes = 3 * sum((size // (8 << i)) ** 2 for i in range(3))
    return model(b.nodes, [value_info("images", [1, 3, size, size])],
                 [value_info("output", [1, boxes, no])], b.inits, name="yolo_head")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--size", type=int, default=64, help="input height and width (a multiple of 32)")
    ap.add_argument("--width", type=int, default=16, help="channels of the first conv")
    ap.add_argument("--classes", type=int, default=3)
    args = ap.parse_args()
    if args.size % 32:
        sys.exit("make_yolo_head.py: --size must be a multiple of 32, got %d" % args.size)
    os.makedirs(os.path.join(args.dir, "test_data_set_0"), exist_ok=True)
    with open(os.path.join(args.dir, "model.onnx"), "wb") as f:
        f.write(build(args.size, args.width, args.classes))
    rng = random.Random(7)
    n = 3 * args.size * args.size
    with open(os.path.join(args.dir, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(tensor("images", [1, 3, args.size, args.size], [rng.uniform(0.0, 1.0) for _ in range(n)]))


if __name__ == "__main__":
    main()
