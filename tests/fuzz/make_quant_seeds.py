#!/usr/bin/env python3
"""Writes the quantized-model seeds of the fuzz targets (issue 49, item 2) and checks them.

QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
ConvInteger and QLinearConv get models with the values users feed them by mistake or from a
broken exporter: scales of zero, -0, NaN, +-inf, a denormal, FLT_MAX; int8/uint8 extremes in
the data and the zero points; per-axis and blocked scales whose shapes disagree with x or with
their zero point; zero points and operands of the wrong dtype; absurd axis and block_size
attributes. Each model has one op node named after the seed, and each seed says what must
happen: the model runs (on the interpreter and the CPU), or import fails with one error that
names the node and says what is wrong (checked on the interpreter: the importer is the same for
every target).

  make_quant_seeds.py [--nnc NNC] [OUT_DIR]
                                           writes OUT_DIR/onnx_import/quant-*.onnx (default:
                                           regressions/ beside this script); with --nnc, the
                                           graphs of the models that run (`nnc inspect`) and
                                           their CPU kernels (`--kernels`) become the text_ir
                                           and kernel_ir targets' seeds as well
  make_quant_seeds.py --check NNC [DIR]    checks each seed's outcome with the nnc CLI, and
                                           that DIR/onnx_import (default: regressions/) holds
                                           exactly what this script writes (ctest
                                           fuzz_quant_seeds)

The fuzz harnesses replay the written seeds in every test build (ctest
fuzz_regressions_onnx_import, fuzz_regressions_cpu_run) and scripts/fuzz.sh starts its corpus
from them; tests/fuzz/onnx.dict gives the mutator the same op and attribute names and float
bit patterns.
"""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import attr_int, attr_ints, model, node, tensor, value_info  # noqa: E402

FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, FLOAT16, DOUBLE = 1, 2, 3, 4, 5, 6, 7, 10, 11
FMT = {FLOAT: "f", UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", INT32: "i", INT64: "q",
       FLOAT16: "e", DOUBLE: "d"}
NPY = {FLOAT: "<f4", UINT8: "|u1", INT8: "|i1", INT32: "<i4", FLOAT16: "<f2"}
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
NAN, INF = float("nan"), float("inf")
DENORMAL = 1e-45  # the smallest f32 denormal
FLT_MAX = 3.4028234663852886e38


def t(name, dims, values, dtype=FLOAT):
    return tensor(name, dims, values, dtype, FMT[dtype])


class Seed:
    """One model: op `op` named `name` over `inputs` (graph inputs: (name, dims, dtype)) and
    `inits` (initializers); `error` is None when it must run, else a phrase of the error."""

    def __init__(self, op, args, inputs, inits, out_dims, out_dtype, attrs=(), error=None,
                 opset=21, outputs=1):
        self.op, self.args, self.inputs, self.inits = op, args, inputs, inits
        self.out_dims, self.out_dtype, self.attrs = out_dims, out_dtype, attrs
        self.error, self.opset, self.outputs = error, opset, outputs

    def bytes(self, name):
        outs = ["y%d" % k for k in range(self.outputs)]
        n = node(self.op, self.args, outs, name, self.attrs)
        ins = [value_info(nm, dims, dt) for nm, dims, dt in self.inputs]
        return model([n], ins, [value_info(outs[0], self.out_dims, self.out_dtype)],
                     self.inits, opset=self.opset)


def x_input(dims=(2, 3), dtype=FLOAT, name="x"):
    return [(name, list(dims), dtype)]


def seeds():
    """name -> Seed. Names become the node names (with '-' as '_')."""
    s = {}
    # ---- QuantizeLinear: x f32[2,3] an input, scale and zero point initializers.
    scales = [("zero", 0.0), ("minus-zero", -0.0), ("nan", NAN), ("inf", INF),
              ("minus-inf", -INF), ("denormal", DENORMAL), ("flt-max", FLT_MAX)]
    zps = [(UINT8, 0), (UINT8, 255), (INT8, -128), (INT8, 127)]
    for k, (tag, v) in enumerate(scales):
        zt, zv = zps[k % len(zps)]
        s["q-scale-%s" % tag] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                                     [t("s", [], [v]), t("z", [], [zv], zt)], [2, 3], zt)
    # The same scales folded at import: x an initializer at f32's extremes.
    s["q-fold-extremes"] = Seed(
        "QuantizeLinear", ["x", "s", "z"], [],
        [t("x", [2, 3], [FLT_MAX, -FLT_MAX, NAN, INF, -INF, DENORMAL]),
         t("s", [3], [DENORMAL, 0.0, NAN]), t("z", [3], [-128, 0, 127], INT8)],
        [2, 3], INT8)
    s["q-per-axis-special"] = Seed(
        "QuantizeLinear", ["x", "s", "z"], x_input(),
        [t("s", [3], [0.0, NAN, -INF]), t("z", [3], [0, 255, 128], UINT8)], [2, 3], UINT8)
    s["q-x-f16-scale-f32"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(dtype=FLOAT16),
                                  [t("s", [], [DENORMAL]), t("z", [], [255], UINT8)], [2, 3],
                                  UINT8)
    s["q-i16-extremes"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                               [t("s", [], [1e-30]), t("z", [], [-32768], INT16)], [2, 3],
                               INT16)
    s["q-block-ok"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input((2, 5)),
                           [t("s", [2, 3], [0.5, 0.0, NAN, INF, DENORMAL, 1.0]),
                            t("z", [2, 3], [0, 1, 2, 253, 254, 255], UINT8)],
                           [2, 5], UINT8, [attr_int("axis", 1), attr_int("block_size", 2)])
    # Zero points and x of the wrong dtype, attributes out of range.
    s["q-zp-f32"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                         [t("s", [], [1.0]), t("z", [], [0.0])], [2, 3], FLOAT,
                         error="cannot quantize to f32")
    s["q-zp-i32"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                         [t("s", [], [1.0]), t("z", [], [0], INT32)], [2, 3], INT32,
                         error="cannot quantize to i32")
    s["q-zp-i64"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                         [t("s", [], [1.0]), t("z", [], [I64_MIN], INT64)], [2, 3], INT64,
                         error="cannot quantize to i64")
    s["q-output-dtype-disagrees"] = Seed(
        "QuantizeLinear", ["x", "s", "z"], x_input(), [t("s", [], [1.0]), t("z", [], [0], UINT8)],
        [2, 3], INT8, [attr_int("output_dtype", INT8)], error="disagrees with y_zero_point")
    s["q-output-dtype-bogus"] = Seed(
        "QuantizeLinear", ["x", "s"], x_input(), [t("s", [], [1.0])], [2, 3], UINT8,
        [attr_int("output_dtype", 9999)], error="not a supported element type")
    s["q-x-i8"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(dtype=INT8),
                       [t("s", [], [1.0]), t("z", [], [0], UINT8)], [2, 3], UINT8,
                       error="x must be a float or i32")
    s["q-scale-i8"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                           [t("s", [], [1], INT8), t("z", [], [0], UINT8)], [2, 3], UINT8,
                           error="y_scale must be a float")
    s["q-saturate-2"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                             [t("s", [], [1.0]), t("z", [], [0], UINT8)], [2, 3], UINT8,
                             [attr_int("saturate", 2)], error="saturate must be 0 or 1")
    s["q-precision-int"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                                [t("s", [], [1.0]), t("z", [], [0], UINT8)], [2, 3], UINT8,
                                [attr_int("precision", INT32)], error="precision must be a float")
    # Per-axis scales and zero points whose shapes disagree.
    s["q-per-axis-length"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                                  [t("s", [4], [1.0] * 4), t("z", [4], [0] * 4, UINT8)], [2, 3],
                                  UINT8, error="y_scale has 4 elements, but axis 1")
    s["q-per-axis-zp-shape"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                                    [t("s", [3], [1.0] * 3), t("z", [1], [0], UINT8)], [2, 3],
                                    UINT8, error="y_zero_point has shape [1], y_scale [3]")
    s["q-per-axis-2d"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                              [t("s", [2, 3], [1.0] * 6), t("z", [2, 3], [0] * 6, UINT8)],
                              [2, 3], UINT8, error="per-axis quantization takes a 1-D")
    s["q-per-axis-axis-absurd"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input(),
                                       [t("s", [3], [1.0] * 3), t("z", [3], [0] * 3, UINT8)],
                                       [2, 3], UINT8, [attr_int("axis", I64_MIN)], error="axis")
    s["q-per-axis-scale-input"] = Seed(
        "QuantizeLinear", ["x", "s", "z"], x_input() + [("s", [5], FLOAT)],
        [t("z", [5], [0] * 5, INT8)], [2, 3], INT8, error="y_scale has 5 elements")
    # Blocks: the wrong number of blocks, a negative, an absurd and a huge block size.
    s["q-block-count"] = Seed("QuantizeLinear", ["x", "s"], x_input((2, 5)),
                              [t("s", [2, 2], [1.0] * 4)], [2, 5], UINT8,
                              [attr_int("axis", 1), attr_int("block_size", 2)],
                              error="needs 3 elements on dim 1")
    s["q-block-negative"] = Seed("QuantizeLinear", ["x", "s"], x_input(),
                                 [t("s", [2, 1], [1.0, 1.0])], [2, 3], UINT8,
                                 [attr_int("axis", 1), attr_int("block_size", -1)],
                                 error="block_size must be >= 0")
    s["q-block-max"] = Seed("QuantizeLinear", ["x", "s"], x_input(), [t("s", [2, 1], [1.0, 1.0])],
                            [2, 3], UINT8, [attr_int("axis", 1), attr_int("block_size", I64_MAX)])
    s["q-block-2e40"] = Seed("QuantizeLinear", ["x", "s"], x_input(),
                             [t("s", [2, 1], [1.0, 1.0])], [2, 3], UINT8,
                             [attr_int("axis", 1), attr_int("block_size", 1 << 40)])
    s["q-block-zp-shape"] = Seed("QuantizeLinear", ["x", "s", "z"], x_input((2, 4)),
                                 [t("s", [2, 2], [1.0] * 4), t("z", [2, 1], [0, 0], UINT8)],
                                 [2, 4], UINT8, [attr_int("axis", 1), attr_int("block_size", 2)],
                                 error="y_zero_point has shape [2,1], y_scale [2,2]")
    s["q-block-rank"] = Seed("QuantizeLinear", ["x", "s"], x_input((2, 4)),
                             [t("s", [2], [1.0] * 2)], [2, 4], UINT8,
                             [attr_int("axis", 1), attr_int("block_size", 2)],
                             error="blocked quantization takes one of x's rank 2")
    # ---- DequantizeLinear: x u8/i8/i32, an input (the fuzzer's pattern values) or folded.
    for k, (tag, v) in enumerate(scales):
        xt, zv = zps[k % len(zps)]
        s["dq-scale-%s" % tag] = Seed("DequantizeLinear", ["x", "s", "z"], x_input(dtype=xt),
                                      [t("s", [], [v]), t("z", [], [zv], xt)], [2, 3], FLOAT)
    s["dq-fold-extremes"] = Seed(
        "DequantizeLinear", ["x", "s", "z"], [],
        [t("x", [2, 3], [-128, 127, 0, -1, 1, -128], INT8), t("s", [3], [FLT_MAX, NAN, DENORMAL]),
         t("z", [3], [127, -128, 0], INT8)], [2, 3], FLOAT)
    s["dq-i32-extremes"] = Seed(
        "DequantizeLinear", ["x", "s", "z"], [],
        [t("x", [2], [-(1 << 31), (1 << 31) - 1], INT32), t("s", [], [FLT_MAX]),
         t("z", [], [(1 << 31) - 1], INT32)], [2], FLOAT)
    s["dq-block-ok"] = Seed("DequantizeLinear", ["x", "s", "z"], x_input((2, 3), INT8),
                            [t("s", [1, 3], [INF, 0.0, NAN]), t("z", [1, 3], [-128, 0, 127], INT8)],
                            [2, 3], FLOAT, [attr_int("axis", 0), attr_int("block_size", 2)])
    s["dq-zp-dtype"] = Seed("DequantizeLinear", ["x", "s", "z"], x_input(dtype=UINT8),
                            [t("s", [], [1.0]), t("z", [], [-128], INT8)], [2, 3], FLOAT,
                            error="x_zero_point has dtype i8, x has u8")
    s["dq-zp-f32"] = Seed("DequantizeLinear", ["x", "s", "z"], x_input(dtype=UINT8),
                          [t("s", [], [1.0]), t("z", [], [NAN])], [2, 3], FLOAT,
                          error="x_zero_point has dtype f32, x has u8")
    s["dq-x-f32"] = Seed("DequantizeLinear", ["x", "s"], x_input(), [t("s", [], [1.0])], [2, 3],
                         FLOAT, error="cannot dequantize f32")
    s["dq-output-dtype-int"] = Seed("DequantizeLinear", ["x", "s"], x_input(dtype=UINT8),
                                    [t("s", [], [1.0])], [2, 3], INT32,
                                    [attr_int("output_dtype", INT32)],
                                    error="output_dtype must be a float")
    s["dq-per-axis-length"] = Seed("DequantizeLinear", ["x", "s", "z"], x_input(dtype=INT8),
                                   [t("s", [2], [1.0, 1.0]), t("z", [2], [0, 0], INT8)], [2, 3],
                                   FLOAT, error="x_scale has 2 elements, but axis 1")
    s["dq-per-axis-zp-length"] = Seed("DequantizeLinear", ["x", "s", "z"], x_input(dtype=INT8),
                                      [t("s", [3], [1.0] * 3), t("z", [2], [0, 0], INT8)], [2, 3],
                                      FLOAT, error="x_zero_point has shape [2], x_scale [3]")
    s["dq-block-max"] = Seed("DequantizeLinear", ["x", "s"], x_input(dtype=INT8),
                             [t("s", [1, 3], [1.0] * 3)], [2, 3], FLOAT,
                             [attr_int("axis", 0), attr_int("block_size", I64_MAX)])
    s["dq-block-count"] = Seed("DequantizeLinear", ["x", "s"], x_input((4, 3), INT8),
                               [t("s", [3, 3], [1.0] * 9)], [4, 3], FLOAT,
                               [attr_int("axis", 0), attr_int("block_size", 2)],
                               error="needs 2 elements on dim 0")
    # ---- DynamicQuantizeLinear: f32 only; all-NaN, all-inf and all-zero x fold at import.
    for tag, vals in [("nan", [NAN] * 4), ("inf", [INF, -INF, 0.0, 1.0]),
                      ("zeros", [0.0] * 4), ("extremes", [FLT_MAX, -FLT_MAX, DENORMAL, -0.0])]:
        s["dyn-fold-%s" % tag] = Seed("DynamicQuantizeLinear", ["x"], [], [t("x", [4], vals)],
                                      [4], UINT8, outputs=3)
    s["dyn-input"] = Seed("DynamicQuantizeLinear", ["x"], x_input(), [], [2, 3], UINT8, outputs=3)
    s["dyn-x-f16"] = Seed("DynamicQuantizeLinear", ["x"], x_input(dtype=FLOAT16), [], [2, 3],
                          UINT8, outputs=3, error="x must be f32")
    # ---- MatMulInteger: u8 A [2,3] (input), i8 B [3,4] at the extremes, zero points per row
    # of A and per column of B.
    b_i8 = t("b", [3, 4], [-128, 127, 0, -1] * 3, INT8)
    s["mmi-extremes"] = Seed("MatMulInteger", ["a", "b", "za", "zb"], x_input(dtype=UINT8, name="a"),
                             [b_i8, t("za", [2], [255, 0], UINT8),
                              t("zb", [4], [-128, 127, 0, -1], INT8)], [2, 4], INT32)
    s["mmi-fold-extremes"] = Seed(
        "MatMulInteger", ["a", "b", "za", "zb"], [],
        [t("a", [2, 3], [255, 0, 255, 0, 255, 0], UINT8), b_i8, t("za", [], [0], UINT8),
         t("zb", [], [127], INT8)], [2, 4], INT32)
    s["mmi-za-length"] = Seed("MatMulInteger", ["a", "b", "za"], x_input(dtype=UINT8, name="a"),
                              [b_i8, t("za", [5], [1] * 5, UINT8)], [2, 4], INT32,
                              error="a_zero_point has 5 elements")
    s["mmi-za-dtype"] = Seed("MatMulInteger", ["a", "b", "za"], x_input(dtype=UINT8, name="a"),
                             [b_i8, t("za", [], [NAN])], [2, 4], INT32,
                             error="a_zero_point has dtype f32, A has u8")
    s["mmi-zb-dtype"] = Seed("MatMulInteger", ["a", "b", "za", "zb"],
                             x_input(dtype=UINT8, name="a"),
                             [b_i8, t("za", [], [0], UINT8), t("zb", [], [0], UINT8)], [2, 4],
                             INT32, error="b_zero_point has dtype u8, B has i8")
    s["mmi-a-f32"] = Seed("MatMulInteger", ["a", "b"], x_input(name="a"), [b_i8], [2, 4], INT32,
                          error="A must be u8 or i8, got f32")
    s["mmi-b-i32"] = Seed("MatMulInteger", ["a", "b"], x_input(dtype=INT8, name="a"),
                          [t("b", [3, 4], [1 << 30] * 12, INT32)], [2, 4], INT32,
                          error="B must be u8 or i8, got i32")
    # ---- QLinearMatMul.
    qmm = ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]

    def qmm_inits(sa=(1.0,), sb=(1.0,), sy=(1.0,), za=(UINT8, 0), zb=(INT8, 0), zy=(UINT8, 0),
                  sdt=FLOAT):
        return [t("sa", [len(sa)] if len(sa) > 1 else [], list(sa), sdt),
                t("za", [], [za[1]], za[0]), b_i8,
                t("sb", [len(sb)] if len(sb) > 1 else [], list(sb)),
                t("zb", [], [zb[1]], zb[0]), t("sy", [], list(sy)),
                t("zy", [], [zy[1]], zy[0])]

    s["qmm-scales-special"] = Seed("QLinearMatMul", qmm, x_input(dtype=UINT8, name="a"),
                                   qmm_inits(sa=(NAN, 0.0), sb=(INF, -INF, DENORMAL, FLT_MAX),
                                             za=(UINT8, 255), zb=(INT8, -128), zy=(UINT8, 255)),
                                   [2, 4], UINT8)
    s["qmm-y-scale-zero"] = Seed("QLinearMatMul", qmm, x_input(dtype=UINT8, name="a"),
                                 qmm_inits(sy=(0.0,), zy=(INT8, -128)), [2, 4], INT8)
    s["qmm-a-f32"] = Seed("QLinearMatMul", qmm, x_input(name="a"), qmm_inits(za=(FLOAT, 0.0)),
                          [2, 4], UINT8, error="a must be u8 or i8, got f32")
    s["qmm-a-scale-length"] = Seed("QLinearMatMul", qmm, x_input(dtype=UINT8, name="a"),
                                   qmm_inits(sa=(1.0,) * 5), [2, 4], UINT8,
                                   error="a_scale has 5 elements")
    s["qmm-a-scale-f16"] = Seed("QLinearMatMul", qmm, x_input(dtype=UINT8, name="a"),
                              qmm_inits(sdt=FLOAT16), [2, 4], UINT8,
                              error="the scales must share a float dtype")
    s["qmm-zy-i32"] = Seed("QLinearMatMul", qmm, x_input(dtype=UINT8, name="a"),
                           qmm_inits(zy=(INT32, 0)), [2, 4], INT32,
                           error="y_zero_point must be u8 or i8")
    s["qmm-zb-dtype"] = Seed("QLinearMatMul", qmm, x_input(dtype=UINT8, name="a"),
                             qmm_inits(zb=(UINT8, 0)), [2, 4], UINT8,
                             error="b_zero_point has dtype u8, b has i8")
    # ---- ConvInteger and QLinearConv: x u8 [1,1,3,3] (input), w i8 [2,1,2,2].
    w_i8 = t("w", [2, 1, 2, 2], [-128, 127, 0, -1, 127, -128, -1, 0], INT8)
    xin = x_input((1, 1, 3, 3), UINT8)
    s["ci-extremes"] = Seed("ConvInteger", ["x", "w", "zx", "zw"], xin,
                            [w_i8, t("zx", [], [255], UINT8), t("zw", [2], [-128, 127], INT8)],
                            [1, 2, 2, 2], INT32)
    s["ci-zw-length"] = Seed("ConvInteger", ["x", "w", "zx", "zw"], xin,
                             [w_i8, t("zx", [], [0], UINT8), t("zw", [3], [0] * 3, INT8)],
                             [1, 2, 2, 2], INT32, error="w_zero_point")
    s["ci-x-f32"] = Seed("ConvInteger", ["x", "w"], x_input((1, 1, 3, 3)), [w_i8], [1, 2, 2, 2],
                         INT32, error="x must be u8 or i8, got f32")
    s["ci-zx-dtype"] = Seed("ConvInteger", ["x", "w", "zx"], xin, [w_i8, t("zx", [], [NAN])],
                            [1, 2, 2, 2], INT32, error="x_zero_point has dtype f32, x has u8")
    qc = ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "bias"]

    def qc_inits(sw=(1.0, 1.0), zw=(0, 0), zx=(UINT8, 0), bias=(0, 0), bias_dt=INT32):
        return [t("sx", [], [DENORMAL]), t("zx", [], [zx[1]], zx[0]), w_i8,
                t("sw", [len(sw)], list(sw)), t("zw", [len(zw)], list(zw), INT8),
                t("sy", [], [NAN]), t("zy", [], [128], UINT8), t("bias", [len(bias)], list(bias),
                                                                  bias_dt)]

    s["qc-extremes"] = Seed("QLinearConv", qc, xin,
                            qc_inits(sw=(0.0, INF), zw=(-128, 127), zx=(UINT8, 255),
                                     bias=(-(1 << 31), (1 << 31) - 1)), [1, 2, 2, 2], UINT8)
    s["qc-w-scale-length"] = Seed("QLinearConv", qc, xin, qc_inits(sw=(1.0,) * 3), [1, 2, 2, 2],
                                  UINT8, error="w_scale")
    s["qc-bias-f32"] = Seed("QLinearConv", qc, xin, qc_inits(bias=(0.5, 0.5), bias_dt=FLOAT),
                            [1, 2, 2, 2], UINT8, error="B must be i32, got f32")
    s["qc-x-f32"] = Seed("QLinearConv", qc, x_input((1, 1, 3, 3)), qc_inits(zx=(FLOAT, 0.0)),
                         [1, 2, 2, 2], UINT8, error="x must be u8 or i8, got f32")
    return {"quant-%s.onnx" % k: v for k, v in s.items()}


def node_name(file_name):
    return file_name[:-len(".onnx")].replace("-", "_")


def written():
    return {name: seed.bytes(node_name(name)) for name, seed in seeds().items()}


def write_npy(path, dtype, dims, n):
    """Pattern values as the fuzz harnesses make them (tests/fuzz/FuzzUtil.h)."""
    lo, hi = {UINT8: (0, 255), INT8: (-128, 127)}.get(dtype, (0, 0))
    extremes = [lo, lo + 1, 0, 1, hi // 2 + 1, hi - 1, hi]
    vals = []
    for i in range(n):
        v = i % 7 - 3
        vals.append(v * 0.5 if dtype in (FLOAT, FLOAT16) else extremes[v + 3] if hi else v)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        NPY[dtype], "".join("%d, " % d for d in dims) if len(dims) != 1 else "%d," % dims[0])
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header.encode() + b" " * pad + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header)
        f.write(struct.pack("<%d%s" % (n, FMT[dtype]), *vals))


def check(nnc, regressions):
    """Each seed's outcome through the CLI; the folder holds what this script writes."""
    failures = []
    want = written()
    folder = os.path.join(regressions, "onnx_import")
    for name, data in sorted(want.items()):
        path = os.path.join(folder, name)
        if not os.path.exists(path) or open(path, "rb").read() != data:
            failures.append("%s: missing or stale (rerun tests/fuzz/make_quant_seeds.py)" % name)
    stray = sorted(f for f in os.listdir(folder) if f.startswith("quant-") and f not in want)
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
            # An error comes from the importer, the same for every target: one run shows it.
            for target in ["interp", "cpu"] if seed.error is None else ["interp"]:
                r = subprocess.run([nnc, "run", path, "--target", target] + args,
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
    print("%d quantized seeds checked, %d failures" % (len(want), len(failures)))
    return 1 if failures else 0


def text_seeds(nnc, models, tmp_dir):
    """The optimized graph (.nir) and CPU kernels (.kir) `nnc inspect` prints for each model
    that must run: quantize, dequantize, matmul_integer and their fused kernels in text."""
    out = {"text_ir": {}, "kernel_ir": {}}
    for name, data in sorted(models.items()):
        if seeds()[name].error is not None:
            continue
        path = os.path.join(tmp_dir, name)
        with open(path, "wb") as f:
            f.write(data)
        base = name[:-len(".onnx")]
        for target, ext, extra in [("text_ir", ".nir", ["--full-constants"]),
                                   ("kernel_ir", ".kir", ["--kernels"])]:
            r = subprocess.run([nnc, "inspect", path] + extra, capture_output=True, check=True)
            if r.stdout.strip():  # a model folded at import has no kernels
                out[target][base + ext] = r.stdout
        os.remove(path)
    return out


def main():
    args = sys.argv[1:]
    if args[:1] == ["--check"]:
        return check(args[1], args[2] if len(args) > 2 else os.path.join(HERE, "regressions"))
    nnc = None
    if args[:1] == ["--nnc"]:
        nnc, args = args[1], args[2:]
    root = args[0] if args else os.path.join(HERE, "regressions")
    made = {"onnx_import": written()}
    if nnc:
        with tempfile.TemporaryDirectory() as tmp:
            made.update(text_seeds(nnc, made["onnx_import"], tmp))
    for target, files in made.items():
        out_dir = os.path.join(root, target)
        os.makedirs(out_dir, exist_ok=True)
        for name in os.listdir(out_dir):
            if name.startswith("quant-"):
                os.remove(os.path.join(out_dir, name))
        for name, data in sorted(files.items()):
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(data)
        print("wrote %d seeds to %s" % (len(files), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
