// ONNX lowerings of QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear onto the IR's
// pointwise quantize / dequantize ops: per-axis and blocked scales and zero points become
// tensors that broadcast against x (views of them), so the ops stay plain pointwise ops.
#include <algorithm>

#include <fmt/format.h>

#include "nnc/ir/Quantize.h"
#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using Ints = std::vector<int64_t>;

/// How a scale or zero point is laid out against x: per tensor (one element), per axis (1-D
/// along `axis`) or blocked (x's rank, `blockSize` elements of x per element along `axis`).
struct QuantLayout {
  int64_t axis = 1;
  int64_t blockSize = 0;
};

Expected<QuantLayout> readLayout(LoweringContext &ctx) {
  QuantLayout l;
  NNC_ASSIGN_OR_RETURN(l.axis, ctx.intAttr("axis", 1));
  NNC_ASSIGN_OR_RETURN(l.blockSize, ctx.intAttr("block_size", 0));
  if (l.blockSize < 0)
    return ctx.error("block_size must be >= 0, got {}", l.blockSize);
  return l;
}

/// Whether a zero point and a scale agree: the same shape, or one element each ([] and [1]
/// both mean per tensor).
bool sameLayout(const Value *zp, const Value *scale) {
  return zp->shape() == scale->shape() || (oneElement(zp) && oneElement(scale));
}

/// `v` (input `what`, a scale or zero point) as a tensor that broadcasts against x to x's
/// shape, as the reference's reshape / repeat does.
Expected<Value *> broadcastable(LoweringContext &ctx, Value *v, const Value *x,
                                const QuantLayout &l, const char *what) {
  if (oneElement(v)) {
    if (v->rank() == 0)
      return v;
    return ctx.emit(OpKind::Reshape, {v, ctx.i64Vector({})});
  }
  int64_t r = x->rank();
  NNC_ASSIGN_OR_RETURN(int64_t axis, ctx.normalizeAxis(l.axis, r));
  const Dim &xd = x->shape()[axis];
  if (l.blockSize == 0) {
    if (v->rank() != 1)
      return ctx.error("{} has shape {}: per-axis quantization takes a 1-D {} (or one element "
                       "per tensor; block_size for blocks)",
                       what, shapeStr(v->shape()), what);
    const Dim &vd = v->shape()[0];
    if (vd.isStatic() && xd.isStatic() && vd.value() != xd.value())
      return ctx.error("{} has {} elements, but axis {} of x {} has {}", what, vd.value(), l.axis,
                       shapeStr(x->shape()), xd.value());
    if (axis + 1 == r)
      return v;
    Ints axes;
    for (int64_t i = 1; i < r - axis; ++i)
      axes.push_back(i);
    return ctx.emit(OpKind::Unsqueeze, {v}, {{"axes", axes}});
  }
  // Blocked: every dim as x's but `axis`, which has ceil(x[axis] / block_size) elements.
  if (v->rank() != r)
    return ctx.error("{} has shape {}: blocked quantization takes one of x's rank {}", what,
                     shapeStr(v->shape()), r);
  Ints vs;
  for (int64_t d = 0; d < r; ++d) {
    const Dim &a = v->shape()[d], &b = x->shape()[d];
    if (!a.isStatic() || !b.isStatic())
      return ctx.error("blocked quantization needs static shapes, got x {} and {} {}",
                       shapeStr(x->shape()), what, shapeStr(v->shape()));
    // ceil(x[axis] / block_size), without the overflow of x[axis] + block_size - 1.
    int64_t want = d == axis ? b.value() / l.blockSize + (b.value() % l.blockSize != 0)
                             : b.value();
    if (a.value() != want)
      return ctx.error("{} has shape {}, but x {} with block_size {} along axis {} needs {} "
                       "elements on dim {}",
                       what, shapeStr(v->shape()), shapeStr(x->shape()), l.blockSize, l.axis, want,
                       d);
    vs.push_back(a.value());
  }
  // Repeat each element block times along the axis: [.., n, ..] -> [.., n, block, ..]
  // -> [.., n * block, ..], then drop the padding of a last, partial block. A block_size past
  // x[axis] is one block of x[axis] elements: repeating it more would only be sliced off.
  int64_t block = std::min(l.blockSize, xd.value());
  NNC_ASSIGN_OR_RETURN(Value * u, ctx.emit(OpKind::Unsqueeze, {v}, {{"axes", Ints{axis + 1}}}));
  Ints wide = vs;
  wide.insert(wide.begin() + axis + 1, block);
  NNC_ASSIGN_OR_RETURN(Value * e, ctx.emit(OpKind::Expand, {u, ctx.i64Vector(wide)}));
  Ints flat = vs;
  flat[axis] *= block;
  NNC_ASSIGN_OR_RETURN(Value * f, ctx.emit(OpKind::Reshape, {e, ctx.i64Vector(flat)}));
  if (flat[axis] == xd.value())
    return f;
  return ctx.emit(OpKind::Slice,
                  {f, ctx.i64Vector({0}), ctx.i64Vector({xd.value()}), ctx.i64Vector({axis})});
}

/// The dtype numpy divides x by the scale in: the wider float (f16 with bf16: f32); i32 x
/// divides in f64, as int32 / float32 does.
DType divisionType(DType x, DType s) {
  if (x == s && isFloat(x))
    return x;
  if (x == DType::F64 || s == DType::F64 || x == DType::I32)
    return DType::F64;
  return DType::F32;
}

Expected<Value *> castTo(LoweringContext &ctx, Value *v, DType t) {
  if (v->dtype() == t)
    return v;
  return ctx.emit(OpKind::Cast, {v}, {{"to", t}});
}

/// The ONNX dtype attribute `name` (0 or absent: none).
Expected<std::optional<DType>> dtypeAttr(LoweringContext &ctx, const char *name) {
  NNC_ASSIGN_OR_RETURN(int64_t code, ctx.intAttr(name, 0));
  if (code == 0)
    return std::optional<DType>();
  std::optional<DType> t = dtypeFromOnnx(static_cast<int>(code));
  if (!t)
    return ctx.error("attribute '{}' = {} is not a supported element type", name, code);
  return t;
}

Error lowerQuantizeLinear(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "x"));
  NNC_ASSIGN_OR_RETURN(Value * scale, ctx.requiredInput(1, "y_scale"));
  Value *zp = ctx.input(2);
  NNC_ASSIGN_OR_RETURN(QuantLayout layout, readLayout(ctx));
  NNC_ASSIGN_OR_RETURN(int64_t saturate, ctx.intAttr("saturate", 1));
  if (saturate != 0 && saturate != 1)
    return ctx.error("saturate must be 0 or 1, got {}", saturate);
  NNC_ASSIGN_OR_RETURN(std::optional<DType> outputDtype, dtypeAttr(ctx, "output_dtype"));
  NNC_ASSIGN_OR_RETURN(std::optional<DType> precision, dtypeAttr(ctx, "precision"));
  DType q = outputDtype.value_or(DType::U8);
  if (zp) {
    if (outputDtype && *outputDtype != zp->dtype())
      return ctx.error("output_dtype {} disagrees with y_zero_point's dtype {}",
                       dtypeName(*outputDtype), dtypeName(zp->dtype()));
    q = zp->dtype();
  }
  if (!isQuantizedType(q))
    return ctx.error("cannot quantize to {}: the output must be an 8- or 16-bit, 4- or 2-bit "
                     "integer, f8 or f4e2m1 type",
                     dtypeName(q));
  if (!isFloat(x->dtype()) && x->dtype() != DType::I32)
    return ctx.error("x must be a float or i32 tensor, got {}", dtypeName(x->dtype()));
  if (!isFloat(scale->dtype()))
    return ctx.error("y_scale must be a float tensor, got {}", dtypeName(scale->dtype()));
  if (precision && !isFloat(*precision))
    return ctx.error("precision must be a float type, got {}", dtypeName(*precision));
  DType t = precision ? *precision : divisionType(x->dtype(), scale->dtype());
  NNC_ASSIGN_OR_RETURN(x, castTo(ctx, x, t));
  NNC_ASSIGN_OR_RETURN(scale, castTo(ctx, scale, t));
  if (!zp)
    zp = ctx.constant(Tensor::zeros(q, {}));
  else if (!sameLayout(zp, scale))
    return ctx.error("y_zero_point has shape {}, y_scale {}: they must agree",
                     shapeStr(zp->shape()), shapeStr(scale->shape()));
  NNC_ASSIGN_OR_RETURN(scale, broadcastable(ctx, scale, x, layout, "y_scale"));
  NNC_ASSIGN_OR_RETURN(zp, broadcastable(ctx, zp, x, layout, "y_zero_point"));
  AttrMap attrs;
  if (!saturate)
    attrs["saturate"] = int64_t(0);
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Quantize, {x, scale, zp}, attrs));
  return ctx.setOutput(0, y);
}

Error lowerDequantizeLinear(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "x"));
  NNC_ASSIGN_OR_RETURN(Value * scale, ctx.requiredInput(1, "x_scale"));
  Value *zp = ctx.input(2);
  NNC_ASSIGN_OR_RETURN(QuantLayout layout, readLayout(ctx));
  NNC_ASSIGN_OR_RETURN(std::optional<DType> outputDtype, dtypeAttr(ctx, "output_dtype"));
  DType xt = x->dtype();
  if (!isQuantizedType(xt) && xt != DType::I32)
    return ctx.error("cannot dequantize {}: x must be an 8- or 16-bit, 4- or 2-bit integer, "
                     "i32, f8 or f4e2m1 tensor",
                     dtypeName(xt));
  if (!isFloat(scale->dtype()))
    return ctx.error("x_scale must be a float tensor, got {}", dtypeName(scale->dtype()));
  DType to = outputDtype.value_or(scale->dtype());
  if (!isFloat(to))
    return ctx.error("output_dtype must be a float type, got {}", dtypeName(to));
  if (!zp) {
    zp = ctx.constant(Tensor::zeros(xt, {}));
  } else {
    if (zp->dtype() != xt)
      return ctx.error("x_zero_point has dtype {}, x has {}: they must agree",
                       dtypeName(zp->dtype()), dtypeName(xt));
    if (!sameLayout(zp, scale))
      return ctx.error("x_zero_point has shape {}, x_scale {}: they must agree",
                       shapeStr(zp->shape()), shapeStr(scale->shape()));
  }
  NNC_ASSIGN_OR_RETURN(scale, broadcastable(ctx, scale, x, layout, "x_scale"));
  NNC_ASSIGN_OR_RETURN(zp, broadcastable(ctx, zp, x, layout, "x_zero_point"));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Dequantize, {x, scale, zp}, {{"to", to}}));
  return ctx.setOutput(0, y);
}

/// DynamicQuantizeLinear: u8 with a scale and zero point from x's range widened to hold 0 (a
/// range of 0, x all zeros, takes scale 1, as the reference does), then quantize.
Error lowerDynamicQuantizeLinear(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "x"));
  if (x->dtype() != DType::F32)
    return ctx.error("x must be f32, got {}", dtypeName(x->dtype()));
  const AttrMap all = {{"axes", Ints{}}, {"keepdims", int64_t(0)}};
  Value *zero = ctx.scalar(DType::F32, 0.0);
  NNC_ASSIGN_OR_RETURN(Value * lo, ctx.emit(OpKind::ReduceMin, {x}, all));
  NNC_ASSIGN_OR_RETURN(lo, ctx.emit(OpKind::Min, {lo, zero}));
  NNC_ASSIGN_OR_RETURN(Value * hi, ctx.emit(OpKind::ReduceMax, {x}, all));
  NNC_ASSIGN_OR_RETURN(hi, ctx.emit(OpKind::Max, {hi, zero}));
  NNC_ASSIGN_OR_RETURN(Value * range, ctx.emit(OpKind::Sub, {hi, lo}));
  NNC_ASSIGN_OR_RETURN(Value * scale,
                       ctx.emit(OpKind::Div, {range, ctx.scalar(DType::F32, 255.0)}));
  NNC_ASSIGN_OR_RETURN(Value * empty, ctx.emit(OpKind::Equal, {range, zero}));
  NNC_ASSIGN_OR_RETURN(scale,
                       ctx.emit(OpKind::Select, {empty, ctx.scalar(DType::F32, 1.0), scale}));
  NNC_ASSIGN_OR_RETURN(Value * loScaled, ctx.emit(OpKind::Div, {lo, scale}));
  NNC_ASSIGN_OR_RETURN(Value * zpf, ctx.emit(OpKind::Sub, {zero, loScaled}));
  NNC_ASSIGN_OR_RETURN(zpf, ctx.emit(OpKind::Max, {zpf, zero}));
  NNC_ASSIGN_OR_RETURN(zpf, ctx.emit(OpKind::Min, {zpf, ctx.scalar(DType::F32, 255.0)}));
  NNC_ASSIGN_OR_RETURN(zpf, ctx.emit(OpKind::Round, {zpf}));
  NNC_ASSIGN_OR_RETURN(Value * zp, ctx.emit(OpKind::Cast, {zpf}, {{"to", DType::U8}}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(OpKind::Quantize, {x, scale, zp}));
  NNC_TRY(ctx.setOutput(0, y));
  NNC_TRY(ctx.setOutput(1, scale));
  return ctx.setOutput(2, zp);
}

} // namespace

void registerQuantizeLowerings(LoweringTable &t) {
  t["QuantizeLinear"] = {{"axis", "block_size", "output_dtype", "precision", "saturate"},
                         lowerQuantizeLinear};
  t["DequantizeLinear"] = {{"axis", "block_size", "output_dtype"}, lowerDequantizeLinear};
  t["DynamicQuantizeLinear"] = {{}, lowerDynamicQuantizeLinear};
}

} // namespace nnc::onnxfe
