// ONNX lowerings of the neural-network operators: matmul/gemm/einsum, convolutions, pooling,
// resize, the softmax family and attention; normalizations live in Normalization.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

void registerNormalizationLowerings(LoweringTable &t);
void registerVisionLowerings(LoweringTable &t);
void registerComposedLowerings(LoweringTable &t);
void registerSignalLowerings(LoweringTable &t);
void registerLinearAttentionLowerings(LoweringTable &t);
void registerFlexAttentionLowerings(LoweringTable &t);
void registerDeformConvLowerings(LoweringTable &t);

namespace {

using Ints = std::vector<int64_t>;

/// Number of results to emit for an op whose optional outputs 1..maxResults-1 are only
/// produced when wanted: one past the last wanted output.
int wantedResults(LoweringContext &ctx, int maxResults) {
  int n = 1;
  for (int i = 1; i < maxResults; ++i)
    if (ctx.hasOutput(i))
      n = i + 1;
  return n;
}

/// True when `v` is a tensor with no elements (an "absent" optional input in older Resize
/// and Upsample forms).
bool isEmptyTensor(const Value *v) {
  for (const Dim &d : v->shape())
    if (d.isStatic() && d.value() == 0)
      return true;
  return false;
}

Error setOutputs(LoweringContext &ctx, const std::vector<Value *> &results) {
  for (size_t i = 0; i < results.size(); ++i)
    NNC_TRY(ctx.setOutput(i, results[i]));
  return Error::success();
}

// ---- MatMul, Gemm, Einsum --------------------------------------------------------------------

Error lowerMatMul(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * a, ctx.requiredInput(0, "A"));
  NNC_ASSIGN_OR_RETURN(Value * b, ctx.requiredInput(1, "B"));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::MatMul, {a, b}));
  return ctx.setOutput(0, y);
}

Error lowerGemm(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * a, ctx.requiredInput(0, "A"));
  NNC_ASSIGN_OR_RETURN(Value * b, ctx.requiredInput(1, "B"));
  Value *c = ctx.input(2);
  if (ctx.opset() < 11 && !c)
    return ctx.error("missing required input 2 (C) before opset 11");
  NNC_ASSIGN_OR_RETURN(double alpha, ctx.floatAttr("alpha", 1.0));
  NNC_ASSIGN_OR_RETURN(double beta, ctx.floatAttr("beta", 1.0));
  NNC_ASSIGN_OR_RETURN(int64_t transA, ctx.intAttr("transA", 0));
  NNC_ASSIGN_OR_RETURN(int64_t transB, ctx.intAttr("transB", 0));
  NNC_USER_CHECK(a->rank() == 2 && b->rank() == 2,
                 "{}: A and B must be 2-D, got {} and {}", ctx.place(), a->type().str(),
                 b->type().str());
  const AttrMap swap = {{"perm", Ints{1, 0}}};
  if (transA) {
    NNC_ASSIGN_OR_RETURN(a, ctx.emit(OpKind::Transpose, {a}, swap));
  }
  if (transB) {
    NNC_ASSIGN_OR_RETURN(b, ctx.emit(OpKind::Transpose, {b}, swap));
  }
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::MatMul, {a, b}));
  if (alpha != 1.0) {
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Mul, {y, ctx.scalar(y->dtype(), alpha)}));
  }
  // beta == 0 drops C entirely (as runtimes do): C only broadcasts into Y's shape.
  if (c && beta != 0.0) {
    NNC_USER_CHECK(c->rank() <= 2, "{}: C must have rank <= 2, got {}", ctx.place(),
                   c->type().str());
    if (beta != 1.0) {
      NNC_ASSIGN_OR_RETURN(c, ctx.emit(OpKind::Mul, {c, ctx.scalar(c->dtype(), beta)}));
    }
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Add, {y, c}));
  }
  return ctx.setOutput(0, y);
}

Error lowerEinsum(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(std::string eq, ctx.stringAttr("equation", ""));
  NNC_USER_CHECK(!eq.empty(), "{}: missing required attribute 'equation'", ctx.place());
  eq.erase(std::remove_if(eq.begin(), eq.end(), [](unsigned char ch) { return std::isspace(ch) != 0; }),
           eq.end());
  std::vector<Value *> ops;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    NNC_ASSIGN_OR_RETURN(Value * v, ctx.requiredInput(i, "Inputs"));
    ops.push_back(v);
  }
  NNC_USER_CHECK(!ops.empty(), "{}: needs at least one input", ctx.place());
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Einsum, ops, {{"equation", eq}}));
  return ctx.setOutput(0, y);
}

/// x - zeroPoint in i32 (zeroPoint absent: just the cast). `perRowAxis` >= 0 reshapes a 1-D
/// zero point to lie along that axis of x (A's rows in MatMulInteger, W's output channels in
/// ConvInteger).
Expected<Value *> subtractZeroPoint(LoweringContext &ctx, Value *x, Value *zp, int64_t perRowAxis,
                                    DType t) {
  NNC_ASSIGN_OR_RETURN(Value * xi, ctx.emit(OpKind::Cast, {x}, {{"to", t}}));
  if (!zp)
    return xi;
  NNC_ASSIGN_OR_RETURN(Value * zi, ctx.emit(OpKind::Cast, {zp}, {{"to", t}}));
  if (perRowAxis >= 0 && zp->rank() == 1 && x->rank() >= 2) {
    Ints axes;
    for (int64_t i = perRowAxis + 1; i < x->rank(); ++i)
      axes.push_back(i - perRowAxis);
    if (!axes.empty()) {
      NNC_ASSIGN_OR_RETURN(zi, ctx.emit(OpKind::Unsqueeze, {zi}, {{"axes", axes}}));
    }
  }
  return ctx.emit(OpKind::Sub, {xi, zi});
}

/// Checks an 8-bit integer operand `x` (input `what`) of the integer matmul and conv ops and its
/// zero point `zp` (input `zpWhat`, absent: null): ONNX types both u8 or i8, the same for both.
Error checkIntegerOperand(LoweringContext &ctx, const Value *x, const char *what,
                          const Value *zp, const char *zpWhat) {
  if (x->dtype() != DType::U8 && x->dtype() != DType::I8)
    return ctx.error("{} must be u8 or i8, got {}", what, dtypeName(x->dtype()));
  if (zp && zp->dtype() != x->dtype())
    return ctx.error("{} has dtype {}, {} has {}: they must agree", zpWhat,
                     dtypeName(zp->dtype()), what, dtypeName(x->dtype()));
  return Error::success();
}

/// Checks a 1-D zero point or scale `v` (input `what`) of matmul operand `x` (named `xName`):
/// one element, or one per row of A (`rows`) / column of B. Others (N-D) broadcast against x
/// as shapes do.
Error checkRowOrColumn(LoweringContext &ctx, const Value *v, const Value *x, bool rows,
                       const char *what, const char *xName) {
  if (!v || v->rank() != 1 || x->rank() < 2)
    return Error::success();
  const Dim &along = rows ? x->shape()[x->rank() - 2] : x->shape().back();
  const Dim &d = v->shape()[0];
  if (d.isStatic() && along.isStatic() && d.value() != 1 && d.value() != along.value())
    return ctx.error("{} has {} elements: it takes one, or one per {} of {} ({})", what,
                     d.value(), rows ? "row" : "column", xName, along.value());
  return Error::success();
}

/// True when zero point `zp` of `x` (A's when `rows`, else B's) is one matmul_integer takes:
/// absent, or x's dtype and a scalar, one value, or one per row of A / column of B.
bool plainZeroPoint(const Value *zp, const Value *x, bool rows) {
  if (!zp)
    return true;
  if (zp->dtype() != x->dtype() || zp->rank() > 1)
    return false;
  if (zp->rank() == 0)
    return true;
  const Shape &s = x->shape();
  Dim along = s.size() < 2 ? Dim(1) : rows ? s[s.size() - 2] : s.back();
  const Dim &d = zp->shape()[0];
  return d.isStatic() && (d.value() == 1 || (along.isStatic() && d.value() == along.value()));
}

/// (A - a_zero_point) @ (B - b_zero_point) in i32, the integer accumulation of MatMulInteger
/// and QLinearMatMul: a 1-D a_zero_point is per row of A, a 1-D b_zero_point per column of B.
/// u8/i8 operands with such zero points become one matmul_integer (the integer GEMM template's
/// op); others (N-D zero points, [..., M, 1] or [..., 1, N]) subtract their zero points in i32
/// and multiply with matmul.
Expected<Value *> integerMatMul(LoweringContext &ctx, Value *a, Value *b, Value *aZp,
                                Value *bZp) {
  NNC_USER_CHECK(a->rank() >= 1 && b->rank() >= 1, "{}: A and B must have rank >= 1",
                 ctx.place());
  auto byte = [](const Value *v) { return v->dtype() == DType::U8 || v->dtype() == DType::I8; };
  if (byte(a) && byte(b) && plainZeroPoint(aZp, a, true) && plainZeroPoint(bZp, b, false)) {
    // Operands are positional: B's zero point without A's needs A's as an explicit zero.
    if (!aZp && bZp)
      aZp = ctx.scalar(a->dtype(), 0);
    std::vector<Value *> ops = {a, b};
    for (Value *zp : {aZp, bZp})
      if (zp)
        ops.push_back(zp);
    return ctx.emit(OpKind::MatMulInteger, ops);
  }
  NNC_ASSIGN_OR_RETURN(Value * ai, subtractZeroPoint(ctx, a, aZp, a->rank() - 2, DType::I32));
  NNC_ASSIGN_OR_RETURN(Value * bi, subtractZeroPoint(ctx, b, bZp, -1, DType::I32));
  return ctx.emit(OpKind::MatMul, {ai, bi});
}

Error lowerMatMulInteger(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * a, ctx.requiredInput(0, "A"));
  NNC_ASSIGN_OR_RETURN(Value * b, ctx.requiredInput(1, "B"));
  NNC_TRY(checkIntegerOperand(ctx, a, "A", ctx.input(2), "a_zero_point"));
  NNC_TRY(checkIntegerOperand(ctx, b, "B", ctx.input(3), "b_zero_point"));
  NNC_TRY(checkRowOrColumn(ctx, ctx.input(2), a, /*rows=*/true, "a_zero_point", "A"));
  NNC_TRY(checkRowOrColumn(ctx, ctx.input(3), b, /*rows=*/false, "b_zero_point", "B"));
  NNC_ASSIGN_OR_RETURN(Value * y, integerMatMul(ctx, a, b, ctx.input(2), ctx.input(3)));
  return ctx.setOutput(0, y);
}

/// A scale of one element as a scalar; a 1-D one of several laid along dim `axis` of a
/// result of rank `rank` (its trailing dims made 1).
Expected<Value *> scaleAlong(LoweringContext &ctx, Value *s, int64_t axis, int64_t rank,
                             const char *what) {
  if (oneElement(s))
    return s->rank() == 0 ? s : ctx.emit(OpKind::Reshape, {s, ctx.i64Vector({})});
  if (s->rank() != 1 || axis < 0)
    return ctx.error("{} has shape {}; it must have one element{}", what, shapeStr(s->shape()),
                     axis < 0 ? "" : " or be 1-D");
  Ints axes;
  for (int64_t i = 1; i < rank - axis; ++i)
    axes.push_back(i);
  if (axes.empty())
    return s;
  return ctx.emit(OpKind::Unsqueeze, {s}, {{"axes", axes}});
}

/// The requantization of QLinearMatMul and QLinearConv as ONNX's reference computes it: the
/// multiplier xScale * wScale / yScale in the scales' dtype, the i32 accumulator times it in
/// f64 (numpy's int32 * float), then rounded half to even, plus yZp and saturated: a quantize
/// by a unit scale.
Expected<Value *> requantize(LoweringContext &ctx, Value *acc, Value *xScale, Value *wScale,
                             Value *yScale, Value *yZp) {
  NNC_USER_CHECK(isFloat(xScale->dtype()) && xScale->dtype() == wScale->dtype() &&
                     xScale->dtype() == yScale->dtype(),
                 "{}: the scales must share a float dtype, got {}, {} and {}", ctx.place(),
                 dtypeName(xScale->dtype()), dtypeName(wScale->dtype()),
                 dtypeName(yScale->dtype()));
  NNC_USER_CHECK(yZp->dtype() == DType::U8 || yZp->dtype() == DType::I8,
                 "{}: y_zero_point must be u8 or i8, got {}", ctx.place(),
                 dtypeName(yZp->dtype()));
  NNC_ASSIGN_OR_RETURN(Value * m, ctx.emit(OpKind::Mul, {xScale, wScale}));
  NNC_ASSIGN_OR_RETURN(m, ctx.emit(OpKind::Div, {m, yScale}));
  NNC_ASSIGN_OR_RETURN(m, ctx.emit(OpKind::Cast, {m}, {{"to", DType::F64}}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Cast, {acc}, {{"to", DType::F64}}));
  NNC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Mul, {y, m}));
  return ctx.emit(OpKind::Quantize, {y, ctx.scalar(DType::F64, 1.0), yZp});
}

/// QLinearMatMul: MatMulInteger's accumulation, then requantize. a_scale may be per row of a
/// (1-D), b_scale per column of b.
Error lowerQLinearMatMul(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * a, ctx.requiredInput(0, "a"));
  NNC_ASSIGN_OR_RETURN(Value * aScale, ctx.requiredInput(1, "a_scale"));
  NNC_ASSIGN_OR_RETURN(Value * aZp, ctx.requiredInput(2, "a_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * b, ctx.requiredInput(3, "b"));
  NNC_ASSIGN_OR_RETURN(Value * bScale, ctx.requiredInput(4, "b_scale"));
  NNC_ASSIGN_OR_RETURN(Value * bZp, ctx.requiredInput(5, "b_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * yScale, ctx.requiredInput(6, "y_scale"));
  NNC_ASSIGN_OR_RETURN(Value * yZp, ctx.requiredInput(7, "y_zero_point"));
  NNC_TRY(checkIntegerOperand(ctx, a, "a", aZp, "a_zero_point"));
  NNC_TRY(checkIntegerOperand(ctx, b, "b", bZp, "b_zero_point"));
  NNC_TRY(checkRowOrColumn(ctx, aZp, a, /*rows=*/true, "a_zero_point", "a"));
  NNC_TRY(checkRowOrColumn(ctx, bZp, b, /*rows=*/false, "b_zero_point", "b"));
  NNC_TRY(checkRowOrColumn(ctx, aScale, a, /*rows=*/true, "a_scale", "a"));
  NNC_TRY(checkRowOrColumn(ctx, bScale, b, /*rows=*/false, "b_scale", "b"));
  NNC_ASSIGN_OR_RETURN(Value * acc, integerMatMul(ctx, a, b, aZp, bZp));
  int64_t r = std::max<int64_t>(acc->rank(), 2);
  NNC_ASSIGN_OR_RETURN(aScale, scaleAlong(ctx, aScale, r - 2, r, "a_scale"));
  NNC_ASSIGN_OR_RETURN(bScale, scaleAlong(ctx, bScale, r - 1, r, "b_scale"));
  NNC_ASSIGN_OR_RETURN(yScale, scaleAlong(ctx, yScale, -1, r, "y_scale"));
  NNC_ASSIGN_OR_RETURN(yZp, scaleAlong(ctx, yZp, -1, r, "y_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * y, requantize(ctx, acc, aScale, bScale, yScale, yZp));
  return ctx.setOutput(0, y);
}

// ---- Convolution and pooling -----------------------------------------------------------------

/// The window attributes shared by Conv, ConvTranspose and the pools, with ONNX defaults,
/// checked against the number of spatial dims.
struct Window {
  Ints kernel; ///< Empty when the attribute is absent.
  Ints strides, pads, dilations;
  std::string autoPad;
};

Expected<Window> readWindow(LoweringContext &ctx, int64_t spatial, bool hasDilations) {
  Window w;
  NNC_ASSIGN_OR_RETURN(w.kernel, ctx.intsAttr("kernel_shape", {}));
  NNC_ASSIGN_OR_RETURN(w.strides, ctx.intsAttr("strides", Ints(spatial, 1)));
  NNC_ASSIGN_OR_RETURN(w.pads, ctx.intsAttr("pads", Ints(2 * spatial, 0)));
  if (hasDilations) {
    NNC_ASSIGN_OR_RETURN(w.dilations, ctx.intsAttr("dilations", Ints(spatial, 1)));
  } else {
    w.dilations = Ints(spatial, 1);
  }
  NNC_ASSIGN_OR_RETURN(w.autoPad, ctx.stringAttr("auto_pad", "NOTSET"));
  // Old exporters wrote an empty list for "use the default".
  if (w.strides.empty())
    w.strides = Ints(spatial, 1);
  if (w.pads.empty())
    w.pads = Ints(2 * spatial, 0);
  if (w.dilations.empty())
    w.dilations = Ints(spatial, 1);
  auto sizeCheck = [&](const Ints &v, int64_t n, const char *name) -> Error {
    if (static_cast<int64_t>(v.size()) != n)
      return ctx.error("attribute '{}' has {} values, expected {} for {} spatial dims", name,
                       v.size(), n, spatial);
    return Error::success();
  };
  if (!w.kernel.empty())
    NNC_TRY(sizeCheck(w.kernel, spatial, "kernel_shape"));
  NNC_TRY(sizeCheck(w.strides, spatial, "strides"));
  NNC_TRY(sizeCheck(w.pads, 2 * spatial, "pads"));
  NNC_TRY(sizeCheck(w.dilations, spatial, "dilations"));
  for (int64_t v : w.kernel)
    NNC_USER_CHECK(v > 0, "{}: kernel_shape values must be positive", ctx.place());
  for (int64_t v : w.strides)
    NNC_USER_CHECK(v > 0, "{}: strides must be positive", ctx.place());
  for (int64_t v : w.dilations)
    NNC_USER_CHECK(v > 0, "{}: dilations must be positive", ctx.place());
  for (int64_t v : w.pads)
    NNC_USER_CHECK(v >= 0, "{}: pads must be non-negative", ctx.place());
  if (w.autoPad != "NOTSET" && w.autoPad != "SAME_UPPER" && w.autoPad != "SAME_LOWER" &&
      w.autoPad != "VALID")
    return ctx.error("attribute 'auto_pad' has unknown value '{}'", w.autoPad);
  return w;
}

void putWindow(AttrMap &attrs, const Window &w) {
  attrs["strides"] = w.strides;
  attrs["pads"] = w.pads;
  attrs["dilations"] = w.dilations;
  if (w.autoPad != "NOTSET")
    attrs["auto_pad"] = w.autoPad;
}

/// Spatial rank of an N x C x D1 x ... input.
Expected<int64_t> spatialRank(LoweringContext &ctx, Value *x) {
  if (x->rank() < 3)
    return ctx.error("input must have rank >= 3 (N x C x spatial...), got {}", x->type().str());
  return x->rank() - 2;
}

/// kernel_shape, when given, must agree with the weight's spatial dims.
Error checkKernelShape(LoweringContext &ctx, const Window &w, Value *weight) {
  if (w.kernel.empty())
    return Error::success();
  if (weight->rank() != static_cast<int64_t>(w.kernel.size()) + 2)
    return ctx.error("weight {} does not match kernel_shape of {} dims", weight->type().str(),
                     w.kernel.size());
  for (size_t i = 0; i < w.kernel.size(); ++i) {
    const Dim &d = weight->shape()[i + 2];
    if (d.isStatic() && d.value() != w.kernel[i])
      return ctx.error("kernel_shape [{}] does not match the weight shape {}",
                       fmt::join(w.kernel, ","), shapeStr(weight->shape()));
  }
  return Error::success();
}

Error lowerConv(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * w, ctx.requiredInput(1, "W"));
  Value *b = ctx.input(2);
  NNC_ASSIGN_OR_RETURN(int64_t spatial, spatialRank(ctx, x));
  NNC_ASSIGN_OR_RETURN(Window win, readWindow(ctx, spatial, /*hasDilations=*/true));
  NNC_TRY(checkKernelShape(ctx, win, w));
  NNC_ASSIGN_OR_RETURN(int64_t group, ctx.intAttr("group", 1));
  NNC_USER_CHECK(group >= 1, "{}: group must be >= 1, got {}", ctx.place(), group);
  AttrMap attrs;
  putWindow(attrs, win);
  attrs["group"] = group;
  std::vector<Value *> ops = {x, w};
  if (b)
    ops.push_back(b);
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Conv, ops, attrs));
  return ctx.setOutput(0, y);
}

Error lowerConvTranspose(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * w, ctx.requiredInput(1, "W"));
  Value *b = ctx.input(2);
  NNC_ASSIGN_OR_RETURN(int64_t spatial, spatialRank(ctx, x));
  NNC_ASSIGN_OR_RETURN(Window win, readWindow(ctx, spatial, /*hasDilations=*/true));
  NNC_TRY(checkKernelShape(ctx, win, w));
  NNC_ASSIGN_OR_RETURN(int64_t group, ctx.intAttr("group", 1));
  NNC_USER_CHECK(group >= 1, "{}: group must be >= 1, got {}", ctx.place(), group);
  NNC_ASSIGN_OR_RETURN(Ints outPad, ctx.intsAttr("output_padding", Ints(spatial, 0)));
  if (outPad.empty())
    outPad = Ints(spatial, 0);
  NNC_USER_CHECK(static_cast<int64_t>(outPad.size()) == spatial,
                 "{}: attribute 'output_padding' has {} values, expected {}", ctx.place(),
                 outPad.size(), spatial);
  AttrMap attrs;
  putWindow(attrs, win);
  attrs["group"] = group;
  attrs["output_padding"] = outPad;
  if (ctx.hasAttr("output_shape")) {
    NNC_ASSIGN_OR_RETURN(Ints outShape, ctx.intsAttr("output_shape", {}));
    // Some exporters write the full N x C x spatial shape; the IR takes the spatial part.
    if (static_cast<int64_t>(outShape.size()) == spatial + 2)
      outShape.erase(outShape.begin(), outShape.begin() + 2);
    NNC_USER_CHECK(static_cast<int64_t>(outShape.size()) == spatial,
                   "{}: attribute 'output_shape' has {} values, expected {}", ctx.place(),
                   outShape.size(), spatial);
    attrs["output_shape"] = outShape;
  }
  std::vector<Value *> ops = {x, w};
  if (b)
    ops.push_back(b);
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::ConvTranspose, ops, attrs));
  return ctx.setOutput(0, y);
}

/// Checks `v` (input `what`: w's zero point or scale) of a quantized conv with weight `w`:
/// one element (per tensor) or 1-D with one per output channel.
Error checkPerChannel(LoweringContext &ctx, const Value *v, const Value *w, const char *what) {
  if (!v || oneElement(v))
    return Error::success();
  if (v->rank() != 1)
    return ctx.error("{} has shape {}: it takes one element, or one per output channel",
                     what, shapeStr(v->shape()));
  const Dim &d = v->shape()[0];
  if (w->rank() >= 1 && d.isStatic() && w->shape()[0].isStatic() &&
      d.value() != w->shape()[0].value())
    return ctx.error("{} has {} elements: it takes one, or one per output channel ({})", what,
                     d.value(), w->shape()[0].value());
  return Error::success();
}

/// The integer accumulation of ConvInteger and QLinearConv, plus QLinearConv's i32 bias (an
/// add after it). u8/i8 operands whose zero points conv_integer takes (absent, one element of
/// the operand's dtype, or for w one per output channel) become one conv_integer (the integer
/// conv templates' op); others (zero points of other shapes) subtract their zero points and
/// convolve in f64 (exact for 8-bit operands), cast back to i32.
Expected<Value *> integerConv(LoweringContext &ctx, Value *x, Value *w, Value *xZp, Value *wZp,
                              Value *bias) {
  NNC_ASSIGN_OR_RETURN(int64_t spatial, spatialRank(ctx, x));
  NNC_ASSIGN_OR_RETURN(Window win, readWindow(ctx, spatial, /*hasDilations=*/true));
  NNC_TRY(checkKernelShape(ctx, win, w));
  NNC_ASSIGN_OR_RETURN(int64_t group, ctx.intAttr("group", 1));
  NNC_USER_CHECK(group >= 1, "{}: group must be >= 1, got {}", ctx.place(), group);
  if (bias)
    NNC_USER_CHECK(bias->dtype() == DType::I32, "{}: B must be i32, got {}", ctx.place(),
                   dtypeName(bias->dtype()));
  if (xZp && !oneElement(xZp))
    return ctx.error("x_zero_point has shape {}: it takes one element (per tensor)",
                     shapeStr(xZp->shape()));
  NNC_TRY(checkPerChannel(ctx, wZp, w, "w_zero_point"));
  AttrMap attrs;
  putWindow(attrs, win);
  attrs["group"] = group;
  auto byte = [](const Value *v) { return v->dtype() == DType::U8 || v->dtype() == DType::I8; };
  // conv_integer takes a zero point of rank 0 or [1] (or [M] for w).
  auto scalarOrOne = [](const Value *v) {
    return v->rank() == 0 ||
           (v->rank() == 1 && v->shape()[0].isStatic() && v->shape()[0].value() == 1);
  };
  const Dim m = w->rank() >= 1 ? w->shape()[0] : Dim(0);
  bool xZpPlain = !xZp || (xZp->dtype() == x->dtype() && scalarOrOne(xZp));
  bool wZpPlain = !wZp || (wZp->dtype() == w->dtype() &&
                           (scalarOrOne(wZp) || (wZp->rank() == 1 && m.isStatic() &&
                                                wZp->shape()[0].isStatic() &&
                                                wZp->shape()[0].value() == m.value())));
  Value *y = nullptr;
  if (byte(x) && byte(w) && xZpPlain && wZpPlain) {
    // Operands are positional: w's zero point without x's needs x's as an explicit zero.
    if (!xZp && wZp)
      xZp = ctx.scalar(x->dtype(), 0);
    std::vector<Value *> ops = {x, w};
    for (Value *zp : {xZp, wZp})
      if (zp)
        ops.push_back(zp);
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::ConvInteger, ops, attrs));
    if (!bias)
      return y;
    // The bias per output channel: [M] laid along axis 1 of the result.
    Ints axes;
    for (int64_t i = 1; i <= spatial; ++i)
      axes.push_back(i);
    NNC_ASSIGN_OR_RETURN(Value * b, ctx.emit(OpKind::Unsqueeze, {bias}, {{"axes", axes}}));
    return ctx.emit(OpKind::Add, {y, b});
  }
  NNC_ASSIGN_OR_RETURN(Value * xs, subtractZeroPoint(ctx, x, xZp, -1, DType::F64));
  NNC_ASSIGN_OR_RETURN(Value * ws, subtractZeroPoint(ctx, w, wZp, 0, DType::F64));
  std::vector<Value *> ops = {xs, ws};
  if (bias) {
    NNC_ASSIGN_OR_RETURN(Value * bf, ctx.emit(OpKind::Cast, {bias}, {{"to", DType::F64}}));
    ops.push_back(bf);
  }
  NNC_ASSIGN_OR_RETURN(Value * yf, ctx.emit(OpKind::Conv, ops, attrs));
  return ctx.emit(OpKind::Cast, {yf}, {{"to", DType::I32}});
}

Error lowerConvInteger(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "x"));
  NNC_ASSIGN_OR_RETURN(Value * w, ctx.requiredInput(1, "w"));
  NNC_TRY(checkIntegerOperand(ctx, x, "x", ctx.input(2), "x_zero_point"));
  NNC_TRY(checkIntegerOperand(ctx, w, "w", ctx.input(3), "w_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * y, integerConv(ctx, x, w, ctx.input(2), ctx.input(3), nullptr));
  return ctx.setOutput(0, y);
}

/// QLinearConv: ConvInteger's accumulation (with the bias), then requantize; w_scale may be
/// per output channel.
Error lowerQLinearConv(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "x"));
  NNC_ASSIGN_OR_RETURN(Value * xScale, ctx.requiredInput(1, "x_scale"));
  NNC_ASSIGN_OR_RETURN(Value * xZp, ctx.requiredInput(2, "x_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * w, ctx.requiredInput(3, "w"));
  NNC_ASSIGN_OR_RETURN(Value * wScale, ctx.requiredInput(4, "w_scale"));
  NNC_ASSIGN_OR_RETURN(Value * wZp, ctx.requiredInput(5, "w_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * yScale, ctx.requiredInput(6, "y_scale"));
  Value *yZp = ctx.input(7);
  NNC_TRY(checkIntegerOperand(ctx, x, "x", xZp, "x_zero_point"));
  NNC_TRY(checkIntegerOperand(ctx, w, "w", wZp, "w_zero_point"));
  if (!yZp)
    yZp = ctx.scalar(x->dtype(), 0.0);
  NNC_TRY(checkPerChannel(ctx, wScale, w, "w_scale"));
  NNC_ASSIGN_OR_RETURN(Value * acc, integerConv(ctx, x, w, xZp, wZp, ctx.input(8)));
  int64_t r = acc->rank();
  NNC_ASSIGN_OR_RETURN(xScale, scaleAlong(ctx, xScale, -1, r, "x_scale"));
  NNC_ASSIGN_OR_RETURN(wScale, scaleAlong(ctx, wScale, 1, r, "w_scale"));
  NNC_ASSIGN_OR_RETURN(yScale, scaleAlong(ctx, yScale, -1, r, "y_scale"));
  NNC_ASSIGN_OR_RETURN(yZp, scaleAlong(ctx, yZp, -1, r, "y_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * y, requantize(ctx, acc, xScale, wScale, yScale, yZp));
  return ctx.setOutput(0, y);
}

Error lowerMaxPool(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(int64_t spatial, spatialRank(ctx, x));
  NNC_ASSIGN_OR_RETURN(Window win, readWindow(ctx, spatial, ctx.opset() >= 10));
  NNC_USER_CHECK(!win.kernel.empty(), "{}: missing required attribute 'kernel_shape'",
                 ctx.place());
  NNC_ASSIGN_OR_RETURN(int64_t ceilMode, ctx.intAttr("ceil_mode", 0));
  NNC_ASSIGN_OR_RETURN(int64_t storageOrder, ctx.intAttr("storage_order", 0));
  NNC_USER_CHECK(storageOrder == 0 || storageOrder == 1,
                 "{}: storage_order must be 0 or 1, got {}", ctx.place(), storageOrder);
  AttrMap attrs;
  putWindow(attrs, win);
  attrs["kernel_shape"] = win.kernel;
  attrs["ceil_mode"] = ceilMode;
  attrs["storage_order"] = storageOrder;
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> ys,
                       ctx.emitMulti(OpKind::MaxPool, {x}, attrs, wantedResults(ctx, 2)));
  return setOutputs(ctx, ys);
}

Error lowerAveragePool(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(int64_t spatial, spatialRank(ctx, x));
  NNC_ASSIGN_OR_RETURN(Window win, readWindow(ctx, spatial, ctx.opset() >= 19));
  NNC_USER_CHECK(!win.kernel.empty(), "{}: missing required attribute 'kernel_shape'",
                 ctx.place());
  NNC_ASSIGN_OR_RETURN(int64_t ceilMode, ctx.intAttr("ceil_mode", 0));
  NNC_ASSIGN_OR_RETURN(int64_t countIncludePad, ctx.intAttr("count_include_pad", 0));
  AttrMap attrs;
  putWindow(attrs, win);
  attrs["kernel_shape"] = win.kernel;
  attrs["ceil_mode"] = ceilMode;
  attrs["count_include_pad"] = countIncludePad;
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::AvgPool, {x}, attrs));
  return ctx.setOutput(0, y);
}

/// |x|^p for the Lp pools (p = 1 and 2 without pow).
Expected<Value *> absPow(LoweringContext &ctx, Value *x, double p) {
  if (p == 2.0)
    return ctx.emit(OpKind::Mul, {x, x});
  NNC_ASSIGN_OR_RETURN(Value * a, ctx.emit(OpKind::Abs, {x}));
  if (p == 1.0)
    return a;
  return ctx.emit(OpKind::Pow, {a, ctx.scalar(x->dtype(), p)});
}

/// s^(1/p).
Expected<Value *> root(LoweringContext &ctx, Value *s, double p) {
  if (p == 1.0)
    return s;
  if (p == 2.0)
    return ctx.emit(OpKind::Sqrt, {s});
  return ctx.emit(OpKind::Pow, {s, ctx.scalar(s->dtype(), 1.0 / p)});
}

/// GlobalAveragePool, GlobalMaxPool, GlobalLpPool: a reduction over the spatial axes.
Error lowerGlobalPool(LoweringContext &ctx, OpKind reduce, bool lp) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_USER_CHECK(x->rank() >= 2, "{}: input must have rank >= 2, got {}", ctx.place(),
                 x->type().str());
  if (x->rank() == 2) // No spatial dims: every window is one element.
    return ctx.setOutput(0, x);
  Ints axes;
  for (int64_t i = 2; i < x->rank(); ++i)
    axes.push_back(i);
  AttrMap attrs = {{"axes", axes}, {"keepdims", int64_t{1}}};
  double p = 2.0;
  if (lp) {
    // GlobalLpPool-1 had a float p; from opset 2 it is an int.
    if (ctx.opset() < 2) {
      NNC_ASSIGN_OR_RETURN(p, ctx.floatAttr("p", 2.0));
    } else {
      NNC_ASSIGN_OR_RETURN(int64_t pi, ctx.intAttr("p", 2));
      p = static_cast<double>(pi);
    }
    NNC_USER_CHECK(p > 0, "{}: p must be positive, got {}", ctx.place(), p);
    NNC_ASSIGN_OR_RETURN(x, absPow(ctx, x, p));
  }
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(reduce, {x}, attrs));
  if (lp) {
    NNC_ASSIGN_OR_RETURN(y, root(ctx, y, p));
  }
  return ctx.setOutput(0, y);
}

/// LpPool: (sum over the window of |x|^p)^(1/p), the window sum taken as an average pool that
/// counts padding, times the kernel volume.
Error lowerLpPool(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(int64_t spatial, spatialRank(ctx, x));
  NNC_ASSIGN_OR_RETURN(Window win, readWindow(ctx, spatial, ctx.opset() >= 18));
  NNC_USER_CHECK(!win.kernel.empty(), "{}: missing required attribute 'kernel_shape'",
                 ctx.place());
  double p = 2.0;
  if (ctx.opset() < 2) {
    NNC_ASSIGN_OR_RETURN(p, ctx.floatAttr("p", 2.0));
  } else {
    NNC_ASSIGN_OR_RETURN(int64_t pi, ctx.intAttr("p", 2));
    p = static_cast<double>(pi);
  }
  NNC_USER_CHECK(p > 0, "{}: p must be positive, got {}", ctx.place(), p);
  NNC_ASSIGN_OR_RETURN(int64_t ceilMode, ctx.intAttr("ceil_mode", 0));
  AttrMap attrs;
  putWindow(attrs, win);
  attrs["kernel_shape"] = win.kernel;
  attrs["ceil_mode"] = ceilMode;
  attrs["count_include_pad"] = int64_t{1};
  double volume = 1;
  for (int64_t k : win.kernel)
    volume *= static_cast<double>(k);
  NNC_ASSIGN_OR_RETURN(Value * xp, absPow(ctx, x, p));
  NNC_ASSIGN_OR_RETURN(Value * avg, ctx.emit(OpKind::AvgPool, {xp}, attrs));
  NNC_ASSIGN_OR_RETURN(Value * sum, ctx.emit(OpKind::Mul, {avg, ctx.scalar(x->dtype(), volume)}));
  NNC_ASSIGN_OR_RETURN(Value * y, root(ctx, sum, p));
  return ctx.setOutput(0, y);
}

Error lowerLRN(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_USER_CHECK(ctx.hasAttr("size"), "{}: missing required attribute 'size'", ctx.place());
  NNC_ASSIGN_OR_RETURN(int64_t size, ctx.intAttr("size", 1));
  NNC_USER_CHECK(size >= 1, "{}: size must be >= 1, got {}", ctx.place(), size);
  NNC_ASSIGN_OR_RETURN(double alpha, ctx.floatAttr("alpha", 1e-4));
  NNC_ASSIGN_OR_RETURN(double beta, ctx.floatAttr("beta", 0.75));
  NNC_ASSIGN_OR_RETURN(double bias, ctx.floatAttr("bias", 1.0));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::LRN, {x},
                                           {{"size", size},
                                            {"alpha", alpha},
                                            {"beta", beta},
                                            {"bias", bias}}));
  return ctx.setOutput(0, y);
}

// ---- Resize and Upsample ---------------------------------------------------------------------

/// Resize attributes with the IR defaults for what an older form lacks.
AttrMap resizeAttrs(const std::string &mode, const std::string &coordMode,
                    const std::string &nearestMode) {
  return {{"mode", mode},
          {"coordinate_transformation_mode", coordMode},
          {"nearest_mode", nearestMode},
          {"cubic_coeff_a", -0.75},
          {"exclude_outside", int64_t{0}},
          {"extrapolation_value", 0.0},
          {"antialias", int64_t{0}},
          {"keep_aspect_ratio_policy", std::string("stretch")}};
}

Error emitResize(LoweringContext &ctx, Value *x, Value *roi, Value *scales, Value *sizes,
                 AttrMap attrs) {
  std::vector<Value *> ops = {x, roi, scales, sizes};
  while (ops.size() > 1 && !ops.back())
    ops.pop_back();
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Resize, ops, std::move(attrs)));
  return ctx.setOutput(0, y);
}

/// Resize-10 and Upsample: output = floor(input * scale), source coordinate = output / scale,
/// nearest rounds down.
Error lowerLegacyUpsample(LoweringContext &ctx, Value *x, Value *scales, std::string mode) {
  if (mode == "bilinear") // Upsample-1's name for linear.
    mode = "linear";
  if (mode != "nearest" && mode != "linear")
    return ctx.error("attribute 'mode' has unsupported value '{}' (expected nearest or linear)",
                     mode);
  return emitResize(ctx, x, nullptr, scales, nullptr, resizeAttrs(mode, "asymmetric", "floor"));
}

Error lowerResize(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", "nearest"));
  if (ctx.opset() < 11) {
    NNC_ASSIGN_OR_RETURN(Value * scales, ctx.requiredInput(1, "scales"));
    return lowerLegacyUpsample(ctx, x, scales, mode);
  }
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return ctx.error("attribute 'mode' has unknown value '{}'", mode);
  NNC_ASSIGN_OR_RETURN(std::string coord,
                       ctx.stringAttr("coordinate_transformation_mode", "half_pixel"));
  static const char *const coordModes[] = {"half_pixel", "half_pixel_symmetric",
                                           "pytorch_half_pixel", "align_corners", "asymmetric",
                                           "tf_crop_and_resize", "tf_half_pixel_for_nn"};
  if (std::find(std::begin(coordModes), std::end(coordModes), coord) == std::end(coordModes))
    return ctx.error("attribute 'coordinate_transformation_mode' has unknown value '{}'", coord);
  NNC_ASSIGN_OR_RETURN(std::string nearestMode,
                       ctx.stringAttr("nearest_mode", "round_prefer_floor"));
  if (nearestMode != "round_prefer_floor" && nearestMode != "round_prefer_ceil" &&
      nearestMode != "floor" && nearestMode != "ceil")
    return ctx.error("attribute 'nearest_mode' has unknown value '{}'", nearestMode);
  AttrMap attrs = resizeAttrs(mode, coord, nearestMode);
  NNC_ASSIGN_OR_RETURN(double cubicA, ctx.floatAttr("cubic_coeff_a", -0.75));
  NNC_ASSIGN_OR_RETURN(int64_t excludeOutside, ctx.intAttr("exclude_outside", 0));
  NNC_ASSIGN_OR_RETURN(double extrapolation, ctx.floatAttr("extrapolation_value", 0.0));
  NNC_ASSIGN_OR_RETURN(int64_t antialias, ctx.intAttr("antialias", 0));
  NNC_ASSIGN_OR_RETURN(std::string policy, ctx.stringAttr("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return ctx.error("attribute 'keep_aspect_ratio_policy' has unknown value '{}'", policy);
  attrs["cubic_coeff_a"] = cubicA;
  attrs["exclude_outside"] = excludeOutside;
  attrs["extrapolation_value"] = extrapolation;
  attrs["antialias"] = antialias;
  attrs["keep_aspect_ratio_policy"] = policy;
  if (ctx.hasAttr("axes")) {
    NNC_ASSIGN_OR_RETURN(Ints axes, ctx.intsAttr("axes", {}));
    attrs["axes"] = axes;
  }

  // Empty names and (before opset 13, required-but-unused) empty tensors mean absent.
  auto present = [&](size_t i) -> Value * {
    Value *v = ctx.input(i);
    return v && !isEmptyTensor(v) ? v : nullptr;
  };
  Value *roi = coord == "tf_crop_and_resize" ? present(1) : nullptr;
  Value *scales = present(2);
  Value *sizes = present(3);
  if (coord == "tf_crop_and_resize" && !roi)
    return ctx.error("coordinate_transformation_mode tf_crop_and_resize needs the roi input");
  if (!scales && !sizes)
    return ctx.error("one of the inputs 'scales' and 'sizes' must be given");
  if (scales && sizes)
    return ctx.error("only one of the inputs 'scales' and 'sizes' may be given");
  return emitResize(ctx, x, roi, scales, sizes, std::move(attrs));
}

Error lowerUpsample(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(std::string mode, ctx.stringAttr("mode", "nearest"));
  Value *scales = nullptr;
  if (ctx.opset() >= 9) {
    NNC_ASSIGN_OR_RETURN(scales, ctx.requiredInput(1, "scales"));
  } else {
    std::vector<float> values;
    if (ctx.opset() >= 7) {
      NNC_ASSIGN_OR_RETURN(std::vector<double> s, ctx.floatsAttr("scales", {}));
      NNC_USER_CHECK(!s.empty(), "{}: missing required attribute 'scales'", ctx.place());
      values.assign(s.begin(), s.end());
    } else {
      // Upsample-1: NCHW with height_scale and width_scale.
      NNC_USER_CHECK(x->rank() == 4, "{}: input must be 4-D (NCHW), got {}", ctx.place(),
                     x->type().str());
      NNC_USER_CHECK(ctx.hasAttr("height_scale") && ctx.hasAttr("width_scale"),
                     "{}: missing required attributes 'height_scale' and 'width_scale'",
                     ctx.place());
      NNC_ASSIGN_OR_RETURN(double h, ctx.floatAttr("height_scale", 1.0));
      NNC_ASSIGN_OR_RETURN(double w, ctx.floatAttr("width_scale", 1.0));
      values = {1.0f, 1.0f, static_cast<float>(h), static_cast<float>(w)};
    }
    NNC_USER_CHECK(static_cast<int64_t>(values.size()) == x->rank(),
                   "{}: {} scales for an input of rank {}", ctx.place(), values.size(),
                   x->rank());
    scales = ctx.constant(
        Tensor::fromVector<float>(DType::F32, {static_cast<int64_t>(values.size())}, values));
  }
  return lowerLegacyUpsample(ctx, x, scales, mode);
}

// ---- Softmax family --------------------------------------------------------------------------

/// Softmax, LogSoftmax, Hardmax. From opset 13 the op runs along `axis` (default -1); before,
/// the input is coerced to 2-D at `axis` (default 1) and the op runs along dim 1 of that.
Error lowerSoftmaxLike(LoweringContext &ctx, OpKind kind) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "input"));
  bool legacy = ctx.opset() < 13;
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.intAttr("axis", legacy ? 1 : -1));
  int64_t rank = x->rank();
  if (!legacy || rank == 0) {
    NNC_USER_CHECK(rank >= 1, "{}: input must have rank >= 1", ctx.place());
    NNC_ASSIGN_OR_RETURN(axis, ctx.normalizeAxis(axis, rank));
    NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(kind, {x}, {{"axis", axis}}));
    return ctx.setOutput(0, y);
  }
  // Legacy: axis may also equal rank (everything in the outer dim).
  if (axis < -rank || axis > rank)
    return ctx.error("attribute 'axis' = {} is out of range for an input of rank {}", axis, rank);
  if (axis < 0)
    axis += rank;
  if (axis == rank - 1) { // The 2-D coercion changes nothing.
    NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(kind, {x}, {{"axis", axis}}));
    return ctx.setOutput(0, y);
  }
  NNC_ASSIGN_OR_RETURN(Value * flat, ctx.emit(OpKind::Flatten, {x}, {{"axis", axis}}));
  NNC_ASSIGN_OR_RETURN(Value * y2, ctx.emit(kind, {flat}, {{"axis", int64_t{1}}}));
  NNC_ASSIGN_OR_RETURN(Value * shape, ctx.emit(OpKind::ShapeOf, {x}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Reshape, {y2, shape}));
  return ctx.setOutput(0, y);
}

// ---- Attention -------------------------------------------------------------------------------

Error lowerAttention(LoweringContext &ctx) {
  std::vector<Value *> ops;
  for (size_t i = 0; i < std::min<size_t>(ctx.numInputs(), 7); ++i)
    ops.push_back(ctx.input(i));
  NNC_USER_CHECK(ctx.numInputs() <= 7, "{}: too many inputs ({})", ctx.place(),
                 ctx.numInputs());
  static const char *const names[] = {"Q", "K", "V"};
  for (size_t i = 0; i < 3; ++i) {
    NNC_ASSIGN_OR_RETURN(Value * v, ctx.requiredInput(i, names[i]));
    (void)v;
  }
  while (ops.size() > 3 && !ops.back())
    ops.pop_back();
  AttrMap attrs;
  NNC_ASSIGN_OR_RETURN(int64_t isCausal, ctx.intAttr("is_causal", 0));
  NNC_ASSIGN_OR_RETURN(int64_t qkMode, ctx.intAttr("qk_matmul_output_mode", 0));
  NNC_ASSIGN_OR_RETURN(double softcap, ctx.floatAttr("softcap", 0.0));
  attrs["is_causal"] = isCausal;
  attrs["qk_matmul_output_mode"] = qkMode;
  attrs["softcap"] = softcap;
  for (const char *name : {"kv_num_heads", "q_num_heads"}) {
    if (ctx.hasAttr(name)) {
      NNC_ASSIGN_OR_RETURN(int64_t v, ctx.intAttr(name, 0));
      attrs[name] = v;
    }
  }
  if (ctx.hasAttr("scale")) {
    NNC_ASSIGN_OR_RETURN(double scale, ctx.floatAttr("scale", 1.0));
    attrs["scale"] = scale;
  }
  if (ctx.hasAttr("softmax_precision")) {
    NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr("softmax_precision", 1));
    std::optional<DType> t = dtypeFromOnnx(static_cast<int>(code));
    if (!t)
      return ctx.error("attribute 'softmax_precision' has unsupported type code {}", code);
    attrs["softmax_precision"] = *t;
  }
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> ys,
                       ctx.emitMulti(OpKind::Attention, ops, attrs, wantedResults(ctx, 4)));
  return setOutputs(ctx, ys);
}

Error lowerRotaryEmbedding(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * cosCache, ctx.requiredInput(1, "cos_cache"));
  NNC_ASSIGN_OR_RETURN(Value * sinCache, ctx.requiredInput(2, "sin_cache"));
  std::vector<Value *> ops = {x, cosCache, sinCache};
  if (Value *pos = ctx.input(3))
    ops.push_back(pos);
  NNC_ASSIGN_OR_RETURN(int64_t interleaved, ctx.intAttr("interleaved", 0));
  NNC_ASSIGN_OR_RETURN(int64_t rotaryDim, ctx.intAttr("rotary_embedding_dim", 0));
  AttrMap attrs = {{"interleaved", interleaved}, {"rotary_embedding_dim", rotaryDim}};
  if (ctx.hasAttr("num_heads")) {
    NNC_ASSIGN_OR_RETURN(int64_t numHeads, ctx.intAttr("num_heads", 0));
    attrs["num_heads"] = numHeads;
  }
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::RotaryEmbedding, ops, attrs));
  return ctx.setOutput(0, y);
}

} // namespace

void registerNNLowerings(LoweringTable &t) {
  const std::vector<std::string> convAttrs = {"auto_pad", "dilations", "group",
                                              "kernel_shape", "pads", "strides"};
  t["MatMul"] = {{}, lowerMatMul};
  t["Gemm"] = {{"alpha", "beta", "transA", "transB", "broadcast"}, lowerGemm};
  t["MatMulInteger"] = {{}, lowerMatMulInteger};
  t["QLinearMatMul"] = {{}, lowerQLinearMatMul};
  t["Einsum"] = {{"equation"}, lowerEinsum};
  t["Conv"] = {convAttrs, lowerConv};
  t["ConvInteger"] = {convAttrs, lowerConvInteger};
  t["QLinearConv"] = {convAttrs, lowerQLinearConv};
  std::vector<std::string> convTAttrs = convAttrs;
  convTAttrs.insert(convTAttrs.end(), {"output_padding", "output_shape"});
  t["ConvTranspose"] = {convTAttrs, lowerConvTranspose};
  t["MaxPool"] = {{"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                   "storage_order", "strides"},
                  lowerMaxPool};
  t["AveragePool"] = {{"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                       "kernel_shape", "pads", "strides"},
                      lowerAveragePool};
  t["LpPool"] = {{"auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"},
                 lowerLpPool};
  t["GlobalAveragePool"] = {
      {}, [](LoweringContext &ctx) { return lowerGlobalPool(ctx, OpKind::ReduceMean, false); }};
  t["GlobalMaxPool"] = {
      {}, [](LoweringContext &ctx) { return lowerGlobalPool(ctx, OpKind::ReduceMax, false); }};
  t["GlobalLpPool"] = {
      {"p"}, [](LoweringContext &ctx) { return lowerGlobalPool(ctx, OpKind::ReduceSum, true); }};
  t["LRN"] = {{"alpha", "beta", "bias", "size"}, lowerLRN};
  t["Resize"] = {{"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                  "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy", "mode",
                  "nearest_mode"},
                 lowerResize};
  t["Upsample"] = {{"height_scale", "mode", "scales", "width_scale"}, lowerUpsample};
  t["Softmax"] = {{"axis"},
                  [](LoweringContext &ctx) { return lowerSoftmaxLike(ctx, OpKind::Softmax); }};
  t["LogSoftmax"] = {
      {"axis"}, [](LoweringContext &ctx) { return lowerSoftmaxLike(ctx, OpKind::LogSoftmax); }};
  t["Hardmax"] = {{"axis"},
                  [](LoweringContext &ctx) { return lowerSoftmaxLike(ctx, OpKind::Hardmax); }};
  t["Attention"] = {{"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                     "scale", "softcap", "softmax_precision"},
                    lowerAttention};
  t["RotaryEmbedding"] = {{"interleaved", "num_heads", "rotary_embedding_dim"},
                          lowerRotaryEmbedding};
  registerNormalizationLowerings(t);
  registerVisionLowerings(t);
  registerComposedLowerings(t);
  registerSignalLowerings(t);
  registerLinearAttentionLowerings(t);
  registerFlexAttentionLowerings(t);
  registerDeformConvLowerings(t);
}

} // namespace nnc::onnxfe
