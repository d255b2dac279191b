// Shape rules of the linear-algebra and neural-network ops: matmul, det, einsum, conv,
// conv_transpose, pools, lrn and resize.
#include "ShapeRules.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "nnc/ir/NNGeometry.h"
#include "nnc/ir/ShapeUtils.h"
#include "nnc/ir/Winograd.h"

namespace nnc::shape {

namespace {

using Types = Expected<std::vector<TensorType>>;

Error requireOperands(const Node &node, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!node.operand(i))
      return node.error("operand {} is missing", i);
  return Error::success();
}

Error requireSameDType(const Node &node, const Value *a, const Value *b, const char *what) {
  if (a->dtype() != b->dtype())
    return node.error("{} has dtype {}, expected {}", what, dtypeName(b->dtype()),
                      dtypeName(a->dtype()));
  return Error::success();
}

Error requireFloat(const Node &node, const Value *v) {
  if (!isFloat(v->dtype()))
    return node.error("expects a float dtype, got {}", dtypeName(v->dtype()));
  return Error::success();
}

/// Output dims of windowed ops: exact where the input and kernel dims are static.
Expected<Shape> windowDims(const Node &node, const WindowAttrs &a, const Shape &x,
                           const Shape &kernel, bool transpose) {
  Shape out;
  for (size_t i = 0; i < kernel.size(); ++i) {
    const Dim &in = x[i + 2];
    const Dim &k = kernel[i];
    if (k.isStatic() && k.value() < 1)
      return node.error("kernel size {} of spatial axis {} must be >= 1", k.value(), i);
    if (transpose && !a.outputShape.empty()) {
      out.push_back(a.outputShape[i]);
    } else if (in.isStatic() && k.isStatic()) {
      Expected<WindowAxis> w = transpose ? transposeWindowAxis(node, a, i, in.value(), k.value())
                                         : windowAxis(node, a, i, in.value(), k.value());
      if (!w)
        return w.takeError();
      out.push_back(w->out);
    } else if (!transpose && in.isSymbolic() && k.isStatic() && k.value() == 1 &&
               a.strides[i] == 1 && a.pads[i] == 0 && a.pads[i + kernel.size()] == 0 &&
               !a.ceilMode) {
      out.push_back(in); // a 1-wide, unit-stride, unpadded window keeps the size
    } else {
      out.push_back(node.graph()->freshDim());
    }
  }
  return out;
}

} // namespace

namespace {

/// numpy matmul's result shape of operands a and b (b's shape `bs` unpacked already).
Expected<Shape> matmulShape(const Node &node, const Value *a, const Value *b, Shape as, Shape bs) {
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), Dim(1));
  if (bVec)
    bs.push_back(Dim(1));
  const Dim &ka = as.back(), &kb = bs[bs.size() - 2];
  if (ka.isStatic() && kb.isStatic() && ka.value() != kb.value())
    return node.error("inner dims differ: {} and {}", a->type().str(), b->type().str());
  Shape batchA(as.begin(), as.end() - 2), batchB(bs.begin(), bs.end() - 2);
  Expected<Shape> batch = broadcastShapes(batchA, batchB, *node.graph());
  if (!batch)
    return batch.takeError().withContext(node.describe());
  Shape out = *batch;
  if (!aVec)
    out.push_back(as[as.size() - 2]);
  if (!bVec)
    out.push_back(bs.back());
  return out;
}

} // namespace

/// Operand 4 of matmul_integer / conv_integer (pack-gemm-weights): the i32 column sums of a
/// packed i8 weight of one matrix, one per column (`countAttr`'s value). `packed`: the node
/// has such a weight.
static Error checkPackedColumnSums(const Node &node, const char *countAttr, bool packed) {
  const Value *sums = node.operand(4);
  if (!sums)
    return Error::success();
  int64_t n = packed ? node.getInt(countAttr) : 0;
  if (!packed || node.operand(1)->dtype() != DType::I8 || sums->dtype() != DType::I32 ||
      sums->rank() != 1 || !sums->shape()[0].isStatic() || sums->shape()[0].value() != n)
    return node.error("operand 4 (the weight's column sums) {} needs an i8 weight of one "
                      "matrix packed with {} and one i32 per column",
                      sums->type().str(), countAttr);
  return Error::success();
}

Types inferMatMulInteger(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *a = node.operand(0), *b = node.operand(1);
  for (const Value *v : {a, b})
    if (v->dtype() != DType::U8 && v->dtype() != DType::I8)
      return node.error("expects u8 or i8 operands, got {}", dtypeName(v->dtype()));
  if (a->rank() < 1 || b->rank() < 1)
    return node.error("operands must have rank >= 1, got {} and {}", a->type().str(),
                      b->type().str());
  Shape as = a->shape(), bs = b->shape();
  if (node.hasAttr("packed_n")) {
    // Operand 1 holds [..., K, N] as [..., P, ceil(K/4), nr, 4] panels (ir/GemmPacking.h).
    int64_t n = node.getInt("packed_n"), r = static_cast<int64_t>(bs.size());
    bool ok = as.size() >= 2 && r >= 4 && as.back().isStatic() && n >= 1;
    for (int64_t d = r - 4; ok && d < r; ++d)
      ok = bs[d].isStatic();
    ok = ok && bs[r - 1].value() == 4 && bs[r - 4].value() * bs[r - 2].value() >= n &&
         (bs[r - 4].value() - 1) * bs[r - 2].value() < n &&
         bs[r - 3].value() == (as.back().value() + 3) / 4;
    if (!ok)
      return node.error("packed_n = {} needs operand 0 of rank >= 2 with a static K and operand "
                        "1 as [..., ceil(N/nr), ceil(K/4), nr, 4] panels, got {} and {}",
                        n, a->type().str(), b->type().str());
    Shape unpacked(bs.begin(), bs.end() - 4);
    unpacked.push_back(as.back());
    unpacked.push_back(Dim(n));
    bs = unpacked;
  }
  // A zero point: its operand's dtype; a scalar, one element, or one per row of A (operand
  // 2) / column of B (operand 3).
  for (size_t z = 2; z < 4; ++z) {
    const Value *zp = node.operand(z), *of = node.operand(z - 2);
    if (!zp)
      continue;
    if (zp->dtype() != of->dtype())
      return node.error("zero point {} has dtype {}, expected {} (its operand's)", z,
                        dtypeName(zp->dtype()), dtypeName(of->dtype()));
    // A's rows, or B's columns (one of each for a 1-D operand, which matmul promotes).
    const Shape &s = z == 2 ? as : bs;
    Dim along = s.size() < 2 ? Dim(1) : z == 2 ? s[s.size() - 2] : s.back();
    bool ok = zp->rank() == 0;
    if (zp->rank() == 1) {
      const Dim &d = zp->shape()[0];
      ok = !d.isStatic() || !along.isStatic() || d.value() == 1 || d.value() == along.value();
    }
    if (!ok)
      return node.error("zero point {} {} must be a scalar or hold one value per {} ({})", z,
                        zp->type().str(), z == 2 ? "row of A" : "column of B", along.str());
  }
  NNC_TRY(checkPackedColumnSums(node, "packed_n", node.hasAttr("packed_n") && b->rank() == 4));
  NNC_ASSIGN_OR_RETURN(Shape out, matmulShape(node, a, b, as, bs));
  return std::vector<TensorType>{TensorType(DType::I32, out)};
}

/// matmul {packed_n} of an f32 operand 0 by bf16 panels: the bf16 GEMM tile's form
/// (--precision bf16; ir/GemmPacking.h's packGemmPanelsBf16).
Types inferBf16MatMul(const Node &node, const Value *a, const Value *b) {
  Shape as = a->shape(), bs = b->shape();
  int64_t n = node.getInt("packed_n"), r = static_cast<int64_t>(bs.size());
  bool ok = as.size() >= 2 && r >= 4 && as.back().isStatic() && n >= 1;
  for (int64_t d = r - 4; ok && d < r; ++d)
    ok = bs[d].isStatic();
  ok = ok && bs[r - 1].value() == 2 && bs[r - 4].value() * bs[r - 2].value() >= n &&
       (bs[r - 4].value() - 1) * bs[r - 2].value() < n &&
       bs[r - 3].value() == (as.back().value() + 1) / 2;
  if (!ok)
    return node.error("packed_n = {} of bf16 panels needs operand 0 of rank >= 2 with a static "
                      "K and operand 1 as [..., ceil(N/nr), ceil(K/2), nr, 2] panels, got {} "
                      "and {}",
                      n, a->type().str(), b->type().str());
  Shape unpacked(bs.begin(), bs.end() - 4);
  unpacked.push_back(as.back());
  unpacked.push_back(Dim(n));
  NNC_ASSIGN_OR_RETURN(Shape out, matmulShape(node, a, b, as, unpacked));
  return std::vector<TensorType>{TensorType(DType::F32, out)};
}

Types inferMatMul(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *a = node.operand(0), *b = node.operand(1);
  if (node.hasAttr("packed_n") && a->dtype() == DType::F32 && b->dtype() == DType::BF16)
    return inferBf16MatMul(node, a, b);
  NNC_TRY(requireSameDType(node, a, b, "operand 1"));
  if (!isNumeric(a->dtype()))
    return node.error("expects a numeric dtype, got {}", dtypeName(a->dtype()));
  if (a->rank() < 1 || b->rank() < 1)
    return node.error("operands must have rank >= 1, got {} and {}", a->type().str(),
                      b->type().str());
  Shape as = a->shape(), bs = b->shape();
  if (node.hasAttr("packed_n")) {
    // Operand 1 holds [..., K, N] as [..., P, K, nr] column panels (ir/GemmPacking.h); the
    // rest is plain matmul on the unpacked shape.
    int64_t n = node.getInt("packed_n"), r = static_cast<int64_t>(bs.size());
    if (as.size() < 2 || r < 3 || !bs[r - 3].isStatic() || !bs[r - 1].isStatic() || n < 1 ||
        bs[r - 3].value() * bs[r - 1].value() < n ||
        (bs[r - 3].value() - 1) * bs[r - 1].value() >= n)
      return node.error("packed_n = {} needs operand 0 of rank >= 2 and operand 1 as "
                        "[..., ceil(N/nr), K, nr] panels, got {} and {}",
                        n, a->type().str(), b->type().str());
    Shape unpacked(bs.begin(), bs.end() - 3);
    unpacked.push_back(bs[r - 2]);
    unpacked.push_back(Dim(n));
    bs = unpacked;
  }
  NNC_ASSIGN_OR_RETURN(Shape out, matmulShape(node, a, b, as, bs));
  return std::vector<TensorType>{TensorType(a->dtype(), out)};
}

Types inferDet(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (!isFloat(x->dtype()))
    return node.error("expects a float dtype, got {}", dtypeName(x->dtype()));
  const Shape &s = x->shape();
  // Two symbolic dims may be equal at run time, but only the same dim is known square.
  if (s.size() < 2 || !(s[s.size() - 1] == s[s.size() - 2]))
    return node.error("needs a batch of square matrices [..., M, M], got {}", x->type().str());
  return std::vector<TensorType>{TensorType(x->dtype(), Shape(s.begin(), s.end() - 2))};
}

Types inferEinsum(const Node &node) {
  if (node.numOperands() < 1)
    return node.error("needs at least one operand");
  NNC_TRY(requireOperands(node, node.numOperands()));
  DType t = node.operand(0)->dtype();
  if (!isNumeric(t))
    return node.error("expects a numeric dtype, got {}", dtypeName(t));
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < node.numOperands(); ++i) {
    NNC_TRY(requireSameDType(node, node.operand(0), node.operand(i), "an operand"));
    ranks.push_back(node.operand(i)->rank());
  }
  NNC_ASSIGN_OR_RETURN(EinsumLabels labels, parseEinsum(node, ranks));
  // Size of each label: a static dim other than 1 wins; 1 broadcasts.
  std::map<int, Dim> dims;
  for (size_t i = 0; i < labels.operands.size(); ++i) {
    const Shape &s = node.operand(i)->shape();
    for (size_t j = 0; j < s.size(); ++j) {
      int l = labels.operands[i][j];
      auto it = dims.find(l);
      if (it == dims.end()) {
        dims[l] = s[j];
        continue;
      }
      Dim &d = it->second;
      const Dim &e = s[j];
      if (d == e || (e.isStatic() && e.value() == 1))
        continue;
      if (d.isStatic() && d.value() == 1) {
        d = e;
      } else if (d.isStatic() && e.isStatic()) {
        return node.error("label '{}' has sizes {} and {}",
                          l < 256 ? std::string(1, static_cast<char>(l)) : "...", d.value(),
                          e.value());
      } else if (e.isStatic()) {
        d = e;
      }
    }
  }
  Shape out;
  for (int l : labels.output)
    out.push_back(dims.at(l));
  return std::vector<TensorType>{TensorType(t, out)};
}

/// A conv's input shape with the channels at axis 1 (a channels_last conv_integer's moved
/// there from the end).
static Shape convInputShape(const Node &node) {
  const Shape &s = node.operand(0)->shape();
  return channelsLast(node) && s.size() >= 3 ? permuted(s, channelsPerm(s.size(), false)) : s;
}

/// A conv's result type of shape `out` (channels at axis 1) in the node's layout.
static Types convResult(const Node &node, DType t, const Shape &out) {
  return std::vector<TensorType>{
      TensorType(t, channelsLast(node) ? permuted(out, channelsPerm(out.size(), true)) : out)};
}

/// The checks conv and conv_transpose share: operands, dtypes, ranks and `group` against
/// the input channels. Returns the group.
static Expected<int64_t> checkConvOperands(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0), *w = node.operand(1);
  if (node.kind() == OpKind::ConvInteger) {
    // u8 or i8 operands, each its own.
    for (const Value *v : {x, w})
      if (v->dtype() != DType::U8 && v->dtype() != DType::I8)
        return node.error("expects u8 or i8 operands, got {}", dtypeName(v->dtype()));
  } else {
    NNC_TRY(requireFloat(node, x));
    NNC_TRY(requireSameDType(node, x, w, "weight"));
  }
  if (x->rank() < 3)
    return node.error("input must have rank >= 3 (N, C, spatial...), got {}", x->type().str());
  if (w->rank() != x->rank())
    return node.error("weight {} must have the input's rank {}", w->type().str(), x->rank());
  int64_t group = node.getInt("group", 1);
  if (group < 1)
    return node.error("group {} must be >= 1", group);
  if (node.getInt("channels_last", 0) != 0 && !channelsLast(node))
    return node.error("channels_last must be 0 or 1, got {}", node.getInt("channels_last", 0));
  const Dim c = convInputShape(node)[1];
  if (c.isStatic() && group > std::max<int64_t>(c.value(), 1))
    return node.error("group {} is larger than the {} input channels", group, c.value());
  if (c.isStatic() && c.value() % group != 0)
    return node.error("input channels {} are not divisible by group {}", c.value(), group);
  return group;
}

Types inferConv(const Node &node) {
  NNC_ASSIGN_OR_RETURN(int64_t group, checkConvOperands(node));
  const Value *x = node.operand(0), *w = node.operand(1);
  // conv_integer's operand 2 is x's zero point, not a bias.
  const Value *bias = node.kind() == OpKind::Conv ? node.operand(2) : nullptr;
  const Shape xs = convInputShape(node), &ws = w->shape();
  if (ws[0].isStatic() && ws[0].value() % group != 0)
    return node.error("output channels {} are not divisible by group {}", ws[0].value(), group);
  if (xs[1].isStatic() && ws[1].isStatic() && ws[1].value() * group != xs[1].value())
    return node.error("weight {} expects {} input channels ({} per group x {} groups), input has "
                      "{}",
                      w->type().str(), ws[1].value() * group, ws[1].value(), group, xs[1].value());
  if (bias) {
    NNC_TRY(requireSameDType(node, x, bias, "bias"));
    if (bias->rank() != 1 ||
        (bias->shape()[0].isStatic() && ws[0].isStatic() && bias->shape()[0] != ws[0]))
      return node.error("bias {} must be a vector of {} output channels", bias->type().str(),
                        ws[0].str());
  }
  size_t n = static_cast<size_t>(x->rank() - 2);
  if (node.hasAttr("kernel_shape")) {
    std::vector<int64_t> ks = node.getInts("kernel_shape", {});
    if (ks.size() != n)
      return node.error("kernel_shape has {} values for {} spatial axes", ks.size(), n);
    for (size_t i = 0; i < n; ++i)
      if (ws[i + 2].isStatic() && ws[i + 2].value() != ks[i])
        return node.error("kernel_shape {} differs from weight {}", ks[i], w->type().str());
  }
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  NNC_ASSIGN_OR_RETURN(Shape spatial,
                       windowDims(node, a, xs, Shape(ws.begin() + 2, ws.end()), false));
  Shape out{xs[0], ws[0]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return convResult(node, node.kind() == OpKind::ConvInteger ? DType::I32 : x->dtype(), out);
}

/// conv_integer whose weight pack-gemm-weights packed (packed_m, kernel_shape): the result
/// of the [packed_m, C, kernel_shape...] weight the panels hold.
static Types inferPackedConvInteger(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0), *w = node.operand(1);
  for (const Value *v : {x, w})
    if (v->dtype() != DType::U8 && v->dtype() != DType::I8)
      return node.error("expects u8 or i8 operands, got {}", dtypeName(v->dtype()));
  std::vector<int64_t> ks = node.getInts("kernel_shape", {});
  int64_t m = node.getInt("packed_m"), k = 1;
  if (node.getInt("channels_last", 0) != 0 && !channelsLast(node))
    return node.error("channels_last must be 0 or 1, got {}", node.getInt("channels_last", 0));
  const Shape xs = convInputShape(node), &ws = w->shape();
  bool ok = x->rank() >= 3 && ks.size() + 2 == size_t(x->rank()) && xs[1].isStatic() &&
            node.getInt("group", 1) == 1 && m >= 1 && w->rank() == 4;
  for (int64_t v : ks)
    ok = ok && v >= 1;
  for (size_t d = 0; ok && d < 4; ++d)
    ok = ws[d].isStatic();
  if (ok) {
    k = xs[1].value();
    for (int64_t v : ks)
      k *= v;
    ok = ws[3].value() == 4 && ws[1].value() == (k + 3) / 4 &&
         ws[0].value() * ws[2].value() >= m && (ws[0].value() - 1) * ws[2].value() < m;
  }
  if (!ok)
    return node.error("packed_m = {} and kernel_shape {} need group 1, an input of static "
                      "channels and operand 1 as [ceil(M/nr), ceil(K/4), nr, 4] panels, got {} "
                      "and {}",
                      m, extentsStr(ks), x->type().str(), w->type().str());
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, ks.size()));
  Shape kernel;
  for (int64_t v : ks)
    kernel.push_back(Dim(v));
  NNC_ASSIGN_OR_RETURN(Shape spatial, windowDims(node, a, xs, kernel, false));
  Shape out{xs[0], Dim(m)};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return convResult(node, DType::I32, out);
}

Types inferConvInteger(const Node &node) {
  bool packed = node.hasAttr("packed_m");
  NNC_ASSIGN_OR_RETURN(std::vector<TensorType> out,
                       packed ? inferPackedConvInteger(node) : inferConv(node));
  // x_zero_point: one element of x's dtype; w_zero_point: one, or one per output channel,
  // of w's dtype.
  const Dim m = packed ? Dim(node.getInt("packed_m")) : node.operand(1)->shape()[0];
  for (size_t z = 2; z < 4; ++z) {
    const Value *zp = node.operand(z), *of = node.operand(z - 2);
    if (!zp)
      continue;
    if (zp->dtype() != of->dtype())
      return node.error("zero point {} has dtype {}, expected {} (its operand's)", z,
                        dtypeName(zp->dtype()), dtypeName(of->dtype()));
    bool ok = zp->rank() == 0;
    if (zp->rank() == 1) {
      const Dim &d = zp->shape()[0];
      ok = !d.isStatic() || d.value() == 1 ||
           (z == 3 && (!m.isStatic() || d.value() == m.value()));
    }
    if (!ok)
      return node.error("zero point {} {} must be {}", z, zp->type().str(),
                        z == 2 ? "a scalar or hold one value"
                               : fmt::format("a scalar or hold one value per output channel ({})",
                                             m.str()));
  }
  NNC_TRY(checkPackedColumnSums(node, "packed_m", packed));
  return out;
}

Types inferConvTranspose(const Node &node) {
  NNC_ASSIGN_OR_RETURN(int64_t group, checkConvOperands(node));
  const Value *x = node.operand(0), *w = node.operand(1), *bias = node.operand(2);
  const Shape &xs = x->shape(), &ws = w->shape();
  if (xs[1].isStatic() && ws[0].isStatic() && ws[0] != xs[1])
    return node.error("weight {} expects {} input channels, input has {}", w->type().str(),
                      ws[0].value(), xs[1].value());
  Dim outC = group == 1         ? ws[1]
             : ws[1].isStatic() ? Dim(ws[1].value() * group)
                                : node.graph()->freshDim();
  if (bias) {
    NNC_TRY(requireSameDType(node, x, bias, "bias"));
    if (bias->rank() != 1 ||
        (bias->shape()[0].isStatic() && outC.isStatic() && bias->shape()[0] != outC))
      return node.error("bias {} must be a vector of {} output channels", bias->type().str(),
                        outC.str());
  }
  size_t n = static_cast<size_t>(x->rank() - 2);
  if (node.hasAttr("kernel_shape")) {
    std::vector<int64_t> ks = node.getInts("kernel_shape", {});
    if (ks.size() != n)
      return node.error("kernel_shape has {} values for {} spatial axes", ks.size(), n);
  }
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  NNC_ASSIGN_OR_RETURN(Shape spatial,
                       windowDims(node, a, xs, Shape(ws.begin() + 2, ws.end()), true));
  Shape out{xs[0], outC};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return std::vector<TensorType>{TensorType(x->dtype(), out)};
}

namespace {

Expected<Shape> poolShape(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (x->rank() < 3)
    return node.error("input must have rank >= 3 (N, C, spatial...), got {}", x->type().str());
  size_t n = static_cast<size_t>(x->rank() - 2);
  std::vector<int64_t> ks = node.getInts("kernel_shape", {});
  if (ks.size() != n)
    return node.error("kernel_shape has {} values for {} spatial axes of input {}", ks.size(), n,
                      x->type().str());
  Shape kernel;
  for (int64_t k : ks)
    kernel.push_back(Dim(k));
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  NNC_ASSIGN_OR_RETURN(Shape spatial, windowDims(node, a, x->shape(), kernel, false));
  Shape out{x->shape()[0], x->shape()[1]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return out;
}

} // namespace

Types inferMaxPool(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Shape out, poolShape(node));
  DType t = node.operand(0)->dtype();
  if (!isNumeric(t))
    return node.error("expects a numeric dtype, got {}", dtypeName(t));
  int64_t order = node.getInt("storage_order", 0);
  if (order != 0 && order != 1)
    return node.error("storage_order must be 0 or 1, got {}", order);
  return std::vector<TensorType>{TensorType(t, out), TensorType(DType::I64, out)};
}

Types inferAvgPool(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Shape out, poolShape(node));
  NNC_TRY(requireFloat(node, node.operand(0)));
  return std::vector<TensorType>{TensorType(node.operand(0)->dtype(), out)};
}

Types inferLRN(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  NNC_TRY(requireFloat(node, x));
  if (x->rank() < 2)
    return node.error("input must have rank >= 2 (N, C, ...), got {}", x->type().str());
  int64_t size = node.getInt("size", 0);
  if (size < 1)
    return node.error("size {} must be >= 1", size);
  return std::vector<TensorType>{x->type()};
}

Types inferResize(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (!isNumeric(x->dtype()))
    return node.error("expects a numeric dtype, got {}", dtypeName(x->dtype()));
  std::string mode = node.getString("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return node.error("unknown mode '{}'", mode);
  std::string ctm = node.getString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "half_pixel_symmetric" && ctm != "pytorch_half_pixel" &&
      ctm != "align_corners" && ctm != "asymmetric" && ctm != "tf_crop_and_resize" &&
      ctm != "tf_half_pixel_for_nn")
    return node.error("unknown coordinate_transformation_mode '{}'", ctm);
  std::string nm = node.getString("nearest_mode", "round_prefer_floor");
  if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil")
    return node.error("unknown nearest_mode '{}'", nm);
  std::string policy = node.getString("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return node.error("unknown keep_aspect_ratio_policy '{}'", policy);
  int64_t rank = x->rank();
  std::vector<int64_t> axes;
  if (node.hasAttr("axes")) {
    NNC_ASSIGN_OR_RETURN(axes, normalizeAxes(node.getInts("axes", {}), rank, node));
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  // An operand counts as absent when missing or statically empty.
  auto present = [&](size_t i) {
    const Value *v = node.operand(i);
    if (!v)
      return false;
    for (const Dim &d : v->shape())
      if (d.isStatic() && d.value() == 0)
        return false;
    return true;
  };
  bool hasScales = present(2), hasSizes = present(3);
  if (!hasScales && !hasSizes)
    return node.error("needs scales or sizes");
  if (hasScales && hasSizes)
    return node.error("takes only one of scales and sizes");
  if (ctm == "tf_crop_and_resize" && !present(1))
    return node.error("coordinate_transformation_mode tf_crop_and_resize needs roi");
  if (node.operand(1) && !isFloat(node.operand(1)->dtype()))
    return node.error("roi must be floating-point, got {}", dtypeName(node.operand(1)->dtype()));
  if (hasScales && !isFloat(node.operand(2)->dtype()))
    return node.error("scales must be floating-point, got {}",
                      dtypeName(node.operand(2)->dtype()));
  if (hasSizes && node.operand(3)->dtype() != DType::I64)
    return node.error("sizes must be i64, got {}", dtypeName(node.operand(3)->dtype()));
  size_t operand = hasScales ? 2 : 3;
  const Value *v = node.operand(operand);
  if (v->rank() != 1)
    return node.error("{} must be a vector, got {}", hasScales ? "scales" : "sizes",
                      v->type().str());
  if (v->shape()[0].isStatic() && v->shape()[0].value() != static_cast<int64_t>(axes.size()))
    return node.error("{} has {} values, expected {}", hasScales ? "scales" : "sizes",
                      v->shape()[0].value(), axes.size());

  const Tensor *c = node.constantOperand(operand);
  Shape out = x->shape();
  std::optional<Extents> in = staticExtents(x->shape());
  if (c && in) {
    NNC_ASSIGN_OR_RETURN(ResizePlan p, planResize(node, *in, node.constantOperand(1),
                                                  hasScales ? c : nullptr, hasSizes ? c : nullptr));
    out = shapeFromExtents(p.out);
  } else if (c && hasSizes && policy == "stretch") {
    if (c->numElements() != static_cast<int64_t>(axes.size()))
      return node.error("sizes has {} values, expected {}", c->numElements(), axes.size());
    std::vector<int64_t> sz = c->toInt64Vector();
    for (size_t i = 0; i < axes.size(); ++i) {
      if (sz[i] < 0)
        return node.error("size {} must not be negative", sz[i]);
      out[axes[i]] = Dim(sz[i]);
    }
  } else if (c && hasScales) {
    if (c->numElements() != static_cast<int64_t>(axes.size()))
      return node.error("scales has {} values, expected {}", c->numElements(), axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      double s = c->elementAsDouble(i);
      if (!(s > 0) || !std::isfinite(s))
        return node.error("scale {} must be positive and finite", s);
      const Dim &d = out[axes[i]];
      if (d.isStatic() && s * static_cast<double>(d.value()) >= 0x1p62)
        return node.error("scale {} makes axis {} too large", s, axes[i]);
      if (d.isStatic())
        out[axes[i]] = Dim(static_cast<int64_t>(std::floor(s * static_cast<double>(d.value()))));
      else if (s != 1.0)
        out[axes[i]] = node.graph()->freshDim();
    }
  } else {
    for (int64_t a : axes)
      out[a] = node.graph()->freshDim();
  }
  return std::vector<TensorType>{TensorType(x->dtype(), out)};
}

// ---- blocked channel layout ---------------------------------------------------------------------

namespace {

/// ceil(d / b) for a static dim, a fresh dim otherwise.
Dim blocksOf(const Node &node, const Dim &d, int64_t b) {
  return d.isStatic() ? Dim((d.value() + b - 1) / b) : node.graph()->freshDim();
}

Expected<int64_t> positiveAttr(const Node &node, const char *name) {
  int64_t v = node.getInt(name, 0);
  if (v < 1)
    return node.error("{} {} must be >= 1", name, v);
  return v;
}

} // namespace

Types inferToNCHWc(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  NNC_ASSIGN_OR_RETURN(int64_t b, positiveAttr(node, "block"));
  int64_t axis = node.getInt("axis", 1);
  if (axis < 0 || axis >= x->rank())
    return node.error("axis {} is out of range for {}", axis, x->type().str());
  Shape out = x->shape();
  out[axis] = blocksOf(node, out[axis], b);
  out.push_back(Dim(b));
  return std::vector<TensorType>{TensorType(x->dtype(), out)};
}

Types inferFromNCHWc(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  NNC_ASSIGN_OR_RETURN(int64_t c, positiveAttr(node, "channels"));
  int64_t axis = node.getInt("axis", 1);
  if (x->rank() < 2 || axis < 0 || axis >= x->rank() - 1)
    return node.error("axis {} is out of range for the blocked {}", axis, x->type().str());
  const Dim &lanes = x->shape().back(), &blocks = x->shape()[axis];
  if (!lanes.isStatic())
    return node.error("the lane axis of {} must be static", x->type().str());
  if (blocks.isStatic() && (blocks.value() * lanes.value() < c ||
                            (blocks.value() - 1) * lanes.value() >= c))
    return node.error("{} blocks of {} lanes do not hold {} channels", blocks.value(),
                      lanes.value(), c);
  Shape out(x->shape().begin(), x->shape().end() - 1);
  out[axis] = Dim(c);
  return std::vector<TensorType>{TensorType(x->dtype(), out)};
}

Types inferPackConvWeight(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *w = node.operand(0);
  NNC_ASSIGN_OR_RETURN(int64_t bi, positiveAttr(node, "in_block"));
  NNC_ASSIGN_OR_RETURN(int64_t bo, positiveAttr(node, "out_block"));
  if (w->rank() < 3)
    return node.error("weight must have rank >= 3 (M, C/group, kernel...), got {}",
                      w->type().str());
  Shape out = w->shape();
  out[0] = blocksOf(node, out[0], bo);
  out[1] = blocksOf(node, out[1], bi);
  out.push_back(Dim(bi));
  out.push_back(Dim(bo));
  return std::vector<TensorType>{TensorType(w->dtype(), out)};
}

Types inferConvNCHWc(const Node &node) {
  NNC_TRY(requireOperands(node, 2));
  const Value *x = node.operand(0), *w = node.operand(1), *bias = node.operand(2);
  NNC_TRY(requireFloat(node, x));
  NNC_TRY(requireSameDType(node, x, w, "weight"));
  if (w->rank() != 6 || !w->shape()[4].isStatic() || !w->shape()[5].isStatic())
    return node.error("weight must be a packed [Mb, Kc, kh, kw, bi, b] with static blocks, got {}",
                      w->type().str());
  const Shape &ws = w->shape(), &xs = x->shape();
  int64_t bi = ws[4].value(), b = ws[5].value();
  int64_t group = node.getInt("group", 1);
  // bf16 operands in pairs of input lanes (1), or on a plain input in pairs of kernel
  // columns (2: lane l of pair p is kernel column 2p + l, the kernel 2 * ws[3] columns wide,
  // along W dilation 1); f32 bias and result.
  const int64_t pairMode = node.getInt("bf16_pairs", 0);
  const bool pairs = pairMode != 0, columnPairs = pairMode == 2;
  if (pairs && (pairMode < 0 || pairMode > 2 || x->dtype() != DType::BF16 ||
                (columnPairs ? x->rank() != 4 || bi != 2 : bi % 2 != 0 || x->rank() != 5)))
    return node.error("bf16_pairs {} needs a bf16 x, blocked with an even in_block (1) or plain "
                      "with in_block 2 (2), not {} and {}",
                      pairMode, x->type().str(), w->type().str());
  const DType out = pairs ? DType::F32 : x->dtype();
  if (group < 1)
    return node.error("group {} must be >= 1", group);
  bool plain = x->rank() == 4;
  if (plain ? (bi != (columnPairs ? 2 : 1) || group != 1) : (x->rank() != 5 || xs[4] != Dim(b)))
    return node.error("input {} does not match the packed weight {} (group {})", x->type().str(),
                      w->type().str(), group);
  // The channels the input holds (padded) and the channels the weight reads.
  if (xs[1].isStatic() && ws[1].isStatic() && ws[0].isStatic()) {
    int64_t c = plain ? xs[1].value() : xs[1].value() * b, m = ws[0].value() * b;
    if (c % group != 0 || m % group != 0 ||
        ws[1].value() * (columnPairs ? 1 : bi) != c / group)
      return node.error("input {} and weight {} do not match group {}", x->type().str(),
                        w->type().str(), group);
  }
  if (bias) {
    if (bias->dtype() != out)
      return node.error("bias {} must be {}", bias->type().str(), dtypeName(out));
    if (bias->rank() != 2 || bias->shape()[0] != ws[0] || bias->shape()[1] != Dim(b))
      return node.error("bias {} must be [{}, {}]", bias->type().str(), ws[0].str(), b);
  }
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, 2));
  Shape kernel(ws.begin() + 2, ws.begin() + 4);
  if (columnPairs) {
    if (!kernel[1].isStatic() || a.dilations[1] != 1)
      return node.error("bf16_pairs 2 needs a static kernel width and dilation 1 along W");
    kernel[1] = Dim(2 * kernel[1].value());
  }
  NNC_ASSIGN_OR_RETURN(Shape spatial,
                       windowDims(node, a, Shape(xs.begin(), xs.begin() + 4), kernel, false));
  Shape shape{xs[0], ws[0], spatial[0], spatial[1], Dim(b)};
  return std::vector<TensorType>{TensorType(out, shape)};
}

Types inferWinogradInput(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *x = node.operand(0);
  if (x->dtype() != DType::F32)
    return node.error("expects f32, got {}", dtypeName(x->dtype()));
  int64_t m = node.getInt("tile", 0);
  if (!winogradTileSupported(m))
    return node.error("tile {} is not supported (2 or 4)", m);
  std::vector<int64_t> pads = node.getInts("pads", {});
  if (pads.size() != 4 || *std::min_element(pads.begin(), pads.end()) < 0)
    return node.error("pads must be 4 non-negative values [top, left, bottom, right]");
  const Shape &xs = x->shape();
  if (x->rank() != 5 || !xs[4].isStatic())
    return node.error("input must be a blocked [N, Cb, H, W, b], got {}", x->type().str());
  int64_t a = m + 2;
  Dim p = node.graph()->freshDim();
  if (xs[0].isStatic() && xs[2].isStatic() && xs[3].isStatic()) {
    int64_t oh = xs[2].value() + pads[0] + pads[2] - 2, ow = xs[3].value() + pads[1] + pads[3] - 2;
    if (oh < 1 || ow < 1)
      return node.error("input {} with pads gives no output of a 3x3 window", x->type().str());
    int64_t tiles = winogradTiles(xs[0].value(), oh, ow, m);
    int64_t rows = node.getInt("rows", tiles);
    if (rows < tiles)
      return node.error("rows {} is fewer than the {} tiles", rows, tiles);
    p = Dim(rows);
  } else if (node.hasAttr("rows")) {
    return node.error("rows needs a static N, H and W");
  }
  Dim c = xs[1].isStatic() ? Dim(xs[1].value() * xs[4].value()) : node.graph()->freshDim();
  return std::vector<TensorType>{TensorType(x->dtype(), Shape{Dim(a * a), p, c})};
}

Types inferWinogradOutput(const Node &node) {
  NNC_TRY(requireOperands(node, 1));
  const Value *mv = node.operand(0), *bias = node.operand(1);
  if (mv->dtype() != DType::F32)
    return node.error("expects f32, got {}", dtypeName(mv->dtype()));
  int64_t m = node.getInt("tile", 0), h = node.getInt("height", 0), w = node.getInt("width", 0),
          b = node.getInt("block", 0);
  if (!winogradTileSupported(m))
    return node.error("tile {} is not supported (2 or 4)", m);
  if (h < 1 || w < 1 || b < 1)
    return node.error("height {}, width {} and block {} must be >= 1", h, w, b);
  const Shape &ms = mv->shape();
  int64_t a = m + 2, tiles = winogradTiles(1, h, w, m);
  if (mv->rank() != 3 || ms[0] != Dim(a * a))
    return node.error("operand must be [{}, P, K], got {}", a * a, mv->type().str());
  Dim n = node.graph()->freshDim(), kb = node.graph()->freshDim();
  if (node.hasAttr("images")) {
    int64_t images = node.getInt("images", 0);
    if (images < 0 || (ms[1].isStatic() && images * tiles > ms[1].value()))
      return node.error("{} images of {} tiles need {} rows, got {}", images, tiles, images * tiles,
                        ms[1].str());
    n = Dim(images);
  } else if (ms[1].isStatic()) {
    if (ms[1].value() % tiles != 0)
      return node.error("{} tiles are not a whole number of {}x{} images", ms[1].value(), h, w);
    n = Dim(ms[1].value() / tiles);
  }
  if (ms[2].isStatic()) {
    if (ms[2].value() % b != 0)
      return node.error("{} channels are not whole blocks of {}", ms[2].value(), b);
    kb = Dim(ms[2].value() / b);
  }
  if (bias) {
    NNC_TRY(requireSameDType(node, mv, bias, "bias"));
    if (bias->rank() != 2 || bias->shape()[0] != kb || bias->shape()[1] != Dim(b))
      return node.error("bias {} must be [{}, {}]", bias->type().str(), kb.str(), b);
  }
  return std::vector<TensorType>{TensorType(mv->dtype(), Shape{n, kb, Dim(h), Dim(w), Dim(b)})};
}

} // namespace nnc::shape
