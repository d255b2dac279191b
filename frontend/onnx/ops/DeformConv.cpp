// ONNX lowering of DeformConv-19 as a composition, the way ONNX's own reference computes it:
// each kernel tap of each output position samples X bilinearly (grid_sample, zeros padding)
// at its regular position plus the learned offset, the samples are scaled by the mask, and a
// batched matmul with the weights sums them per group.
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "onnx/Lowering.h"

namespace nnc::onnxfe {

namespace {

using K = OpKind;

Attribute intA(int64_t v) {
  return Attribute(v);
}

/// DeformConv-19 over k >= 1 spatial dims. With G offset groups, K = prod(kernel_shape) taps
/// and P = prod(output dims) positions:
///   1. pos[n, g, tap, d, p] = offset[n, g, tap, d, p] + (p_d * stride_d - pad_d +
///      tap_d * dilation_d), normalized for grid_sample (align_corners 0: (2 pos + 1) / S_d - 1)
///      as offset * 2 / S_d + a constant, coordinates reordered last axis first;
///   2. samples = grid_sample(X as [N * G, C / G, S...], grid [N * G, K * P, 1.., k]), linear
///      with zeros padding, which is [N, C, K, P] in memory, times the mask [N, G, 1, K, P];
///   3. y = W as [group, oC / group, C / group * K] @ samples as [N, group, C / group * K, P],
///      reshaped to [N, oC, O...], plus B.
Error lowerDeformConv(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(0, "X"));
  NNC_ASSIGN_OR_RETURN(Value * w, ctx.requiredInput(1, "W"));
  NNC_ASSIGN_OR_RETURN(Value * offset, ctx.requiredInput(2, "offset"));
  Value *bias = ctx.input(3), *mask = ctx.input(4);
  DType dt = x->dtype();
  if (!isFloat(dt))
    return ctx.error("X must be floating-point, got {}", x->type().str());
  int64_t rank = x->rank(), k = rank - 2;
  if (k < 1)
    return ctx.error("X must be [N, C, D1, ...] with at least one spatial dim, got {}",
                     x->type().str());
  auto staticDims = [&](const Value *v, size_t from, const char *what) -> Expected<Extents> {
    Extents e;
    for (size_t d = from; d < v->shape().size(); ++d) {
      if (!v->shape()[d].isStatic())
        return ctx.error("{} {} must have static dims past the batch", what, v->type().str());
      e.push_back(v->shape()[d].value());
    }
    return e;
  };
  NNC_ASSIGN_OR_RETURN(Extents xs, staticDims(x, 1, "X"));
  NNC_ASSIGN_OR_RETURN(Extents ws, staticDims(w, 0, "W"));
  if (w->dtype() != dt || offset->dtype() != dt || (bias && bias->dtype() != dt) ||
      (mask && mask->dtype() != dt))
    return ctx.error("X, W, offset, B and mask must have one dtype");
  if (w->rank() != rank)
    return ctx.error("W {} must have X's rank {}", w->type().str(), rank);
  int64_t c = xs[0], oc = ws[0];
  Extents spatial(xs.begin() + 1, xs.end());
  NNC_ASSIGN_OR_RETURN(int64_t group, ctx.intAttr("group", 1));
  NNC_ASSIGN_OR_RETURN(int64_t og, ctx.intAttr("offset_group", 1));
  NNC_ASSIGN_OR_RETURN(
      std::vector<int64_t> kernel,
      ctx.intsAttr("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end())));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> dil,
                       ctx.intsAttr("dilations", std::vector<int64_t>(size_t(k), 1)));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                       ctx.intsAttr("strides", std::vector<int64_t>(size_t(k), 1)));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                       ctx.intsAttr("pads", std::vector<int64_t>(size_t(2 * k), 0)));
  if (int64_t(kernel.size()) != k || int64_t(dil.size()) != k || int64_t(strides.size()) != k ||
      int64_t(pads.size()) != 2 * k)
    return ctx.error("kernel_shape, dilations and strides need {} values and pads {}", k, 2 * k);
  if (group < 1 || og < 1 || c % group != 0 || oc % group != 0 || c % og != 0 || ws[1] * group != c)
    return ctx.error("group {} and offset_group {} must divide X's {} channels and W {} "
                     "must be [oC, C / group, ...] with oC divisible by group",
                     group, og, c, w->type().str());
  int64_t taps = 1, positions = 1;
  Extents out(static_cast<size_t>(k));
  for (int64_t d = 0; d < k; ++d) {
    size_t u = size_t(d);
    if (kernel[u] != ws[u + 2] || kernel[u] < 1 || dil[u] < 1 || strides[u] < 1 || pads[u] < 0 ||
        pads[u + size_t(k)] < 0)
      return ctx.error("kernel_shape [{}] must match W {}, dilations and strides be positive "
                       "and pads non-negative",
                       fmt::join(kernel, ", "), w->type().str());
    int64_t span = (kernel[u] - 1) * dil[u] + 1;
    int64_t padded = spatial[u] + pads[u] + pads[u + size_t(k)];
    if (padded < span)
      return ctx.error("the kernel (span {}) does not fit the padded input ({}) on axis {}", span,
                       padded, d + 2);
    out[u] = (padded - span) / strides[u] + 1;
    taps *= kernel[u];
    positions *= out[u];
    if (taps * positions > (int64_t(1) << 31))
      return ctx.error("too many sampling points ({} taps x {} positions)", taps, positions);
  }
  // offset [N, og * taps * k, O...] and mask [N, og * taps, O...].
  auto checkOperand = [&](const Value *v, int64_t channels, const char *what) -> Error {
    NNC_ASSIGN_OR_RETURN(Extents e, staticDims(v, 1, what));
    Extents want{channels};
    want.insert(want.end(), out.begin(), out.end());
    if (v->rank() != rank || e != want)
      return ctx.error("{} {} must be [N, {}, {}]", what, v->type().str(), channels,
                       fmt::join(out, ", "));
    return Error::success();
  };
  NNC_TRY(checkOperand(offset, og * taps * k, "offset"));
  if (mask)
    NNC_TRY(checkOperand(mask, og * taps, "mask"));
  if (bias && (bias->rank() != 1 || !bias->shape()[0].isStatic() || bias->shape()[0].value() != oc))
    return ctx.error("B {} must be [{}]", bias->type().str(), oc);

  // 1. Sampling positions, normalized: offset * scale[d] + base[tap, d, p].
  std::vector<double> base(static_cast<size_t>(taps * k * positions)),
      scale(static_cast<size_t>(k));
  for (int64_t d = 0; d < k; ++d)
    scale[size_t(d)] = 2.0 / double(spatial[size_t(d)]);
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t p = 0; p < positions; ++p) {
      int64_t tr = t, pr = p;
      for (int64_t d = k; d-- > 0;) {
        size_t u = size_t(d);
        int64_t td = tr % kernel[u], pd = pr % out[u];
        tr /= kernel[u];
        pr /= out[u];
        double at = double(pd * strides[u] - pads[u] + td * dil[u]);
        base[size_t((t * k + d) * positions + p)] = (2.0 * at + 1.0) / double(spatial[u]) - 1.0;
      }
    }
  auto constantOf = [&](std::vector<double> v, std::vector<int64_t> shape) -> Expected<Value *> {
    Value *cv = ctx.constant(Tensor::fromVector<double>(DType::F64, shape, v));
    if (dt == DType::F64)
      return cv;
    return ctx.emit(K::Cast, {cv}, {{"to", dt}});
  };
  auto reshape = [&](Value *v, std::vector<int64_t> shape) {
    return ctx.emit(K::Reshape, {v, ctx.i64Vector(shape)}, {{"allowzero", intA(0)}});
  };
  NNC_ASSIGN_OR_RETURN(Value * off, reshape(offset, {0, og, taps, k, positions}));
  NNC_ASSIGN_OR_RETURN(Value * scaleV, constantOf(scale, {1, 1, 1, k, 1}));
  NNC_ASSIGN_OR_RETURN(Value * baseV, constantOf(base, {1, 1, taps, k, positions}));
  NNC_ASSIGN_OR_RETURN(Value * scaled, ctx.emit(K::Mul, {off, scaleV}));
  NNC_ASSIGN_OR_RETURN(Value * grid, ctx.emit(K::Add, {scaled, baseV}));
  if (k > 1) {
    std::vector<int64_t> reversed;
    for (int64_t d = k; d-- > 0;)
      reversed.push_back(d);
    NNC_ASSIGN_OR_RETURN(grid,
                         ctx.emit(K::Gather, {grid, ctx.i64Vector(reversed)}, {{"axis", intA(3)}}));
  }
  NNC_ASSIGN_OR_RETURN(grid, ctx.emit(K::Transpose, {grid},
                                      {{"perm", Attribute(std::vector<int64_t>{0, 1, 2, 4, 3})}}));
  std::vector<int64_t> gridShape{-1, taps * positions};
  gridShape.resize(size_t(k + 1), 1);
  gridShape.push_back(k);
  NNC_ASSIGN_OR_RETURN(grid, reshape(grid, gridShape));

  // 2. The samples [N * og, C / og, taps * positions, 1..], scaled by the mask.
  std::vector<int64_t> xShape{-1, c / og};
  xShape.insert(xShape.end(), spatial.begin(), spatial.end());
  NNC_ASSIGN_OR_RETURN(Value * xg, reshape(x, xShape));
  NNC_ASSIGN_OR_RETURN(Value * samples, ctx.emit(K::GridSample, {xg, grid},
                                                 {{"mode", Attribute(std::string("linear"))},
                                                  {"padding_mode", Attribute(std::string("zeros"))},
                                                  {"align_corners", intA(0)}}));
  if (mask) {
    NNC_ASSIGN_OR_RETURN(samples, reshape(samples, {-1, og, c / og, taps, positions}));
    NNC_ASSIGN_OR_RETURN(Value * m, reshape(mask, {0, og, 1, taps, positions}));
    NNC_ASSIGN_OR_RETURN(samples, ctx.emit(K::Mul, {samples, m}));
  }

  // 3. The per-group matmul, the output's shape and the bias.
  NNC_ASSIGN_OR_RETURN(Value * cols, reshape(samples, {-1, group, c / group * taps, positions}));
  NNC_ASSIGN_OR_RETURN(Value * wg, reshape(w, {group, oc / group, c / group * taps}));
  NNC_ASSIGN_OR_RETURN(Value * y, ctx.emit(K::MatMul, {wg, cols}));
  std::vector<int64_t> yShape{-1, oc};
  yShape.insert(yShape.end(), out.begin(), out.end());
  NNC_ASSIGN_OR_RETURN(y, reshape(y, yShape));
  if (bias) {
    std::vector<int64_t> bShape{1, oc};
    bShape.resize(size_t(rank), 1);
    NNC_ASSIGN_OR_RETURN(Value * b, reshape(bias, bShape));
    NNC_ASSIGN_OR_RETURN(y, ctx.emit(K::Add, {y, b}));
  }
  return ctx.setOutput(0, y);
}

} // namespace

void registerDeformConvLowerings(LoweringTable &t) {
  t["DeformConv"] = {{"dilations", "group", "kernel_shape", "offset_group", "pads", "strides"},
                     lowerDeformConv};
}

} // namespace nnc::onnxfe
