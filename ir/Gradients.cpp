// The gradient rules of Gradients.def, their helpers, and GradEmitter.
#include "nnc/ir/Gradients.h"
#include "nnc/ir/Loop.h"

#include <algorithm>
#include <numeric>

#include "nnc/ir/ShapeUtils.h"

namespace nnc {

namespace {

using Ints = std::vector<int64_t>;

int64_t normAxis(int64_t a, int64_t rank) {
  return a < 0 ? a + rank : a;
}

/// The static extents of `v`, or a failure naming the node and what needs them.
std::optional<Extents> needStatic(GradEmitter &e, const Node &n, const Value *v) {
  std::optional<Extents> ext = staticExtents(v->shape());
  if (!ext)
    e.fail(n.error("the gradient needs static shapes, got {}", v->type().str()));
  return ext;
}

/// Perm of `rank` dims swapping the last two.
Ints swapLastTwo(int64_t rank) {
  Ints p(rank);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[rank - 1], p[rank - 2]);
  return p;
}

std::vector<Value *> minMaxGrad(GradEmitter &e, const Node &n, Value *g, OpKind firstWins) {
  Value *a = n.operand(0), *b = n.operand(1);
  Value *takeA = e.op(firstWins, {a, b});
  Value *z = e.scalar(0, g->dtype());
  return {e.sumTo(e.op(OpKind::Select, {takeA, g, z}), a),
          e.sumTo(e.op(OpKind::Select, {takeA, z, g}), b)};
}

std::vector<Value *> transposeGrad(GradEmitter &e, const Node &n, Value *g) {
  const Ints &perm = n.getInts("perm");
  Ints inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {e.op(OpKind::Transpose, {g}, {{"perm", inv}})};
}

std::vector<Value *> concatGrad(GradEmitter &e, const Node &n, Value *g) {
  int64_t axis = normAxis(n.getInt("axis"), g->rank());
  Ints sizes;
  for (Value *x : n.operands()) {
    const Dim &d = x->shape()[static_cast<size_t>(axis)];
    if (!d.isStatic())
      return {e.fail(n.error("the gradient needs static sizes along the concat axis"))};
    sizes.push_back(d.value());
  }
  return e.opMulti(OpKind::Split, {g}, {{"axis", axis}, {"sizes", sizes}},
                   static_cast<int>(sizes.size()));
}

/// Gather along axis 0 (an embedding lookup): the gradient rows are added into zeros at the
/// gathered indices, which must be in [0, rows).
std::vector<Value *> gatherGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0), *idx = n.operand(1);
  if (normAxis(n.getInt("axis"), x->rank()) != 0)
    return {e.fail(n.error("the gradient of gather is only implemented for axis 0"))};
  Value *idx1 = e.op(OpKind::Unsqueeze, {idx}, {{"axes", Ints{idx->rank()}}});
  return {e.op(OpKind::ScatterND, {e.zerosLike(x), idx1, g}, {{"reduction", std::string("add")}}),
          nullptr};
}

Value *reduceGrad(GradEmitter &e, const Node &n, Value *g, bool mean) {
  Value *x = n.operand(0);
  int64_t rank = x->rank();
  Ints axes = n.getInts("axes");
  if (axes.empty()) {
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t &a : axes)
    a = normAxis(a, rank);
  std::sort(axes.begin(), axes.end());
  if (!n.getInt("keepdims") && !axes.empty())
    g = e.op(OpKind::Unsqueeze, {g}, {{"axes", axes}});
  Value *full = e.op(OpKind::Expand, {g, e.shapeOf(x)});
  if (!mean)
    return full;
  int64_t count = 1;
  for (int64_t a : axes) {
    const Dim &d = x->shape()[static_cast<size_t>(a)];
    if (!d.isStatic())
      return e.fail(n.error("the gradient of reduce_mean needs static reduced dims"));
    count *= d.value();
  }
  return e.mulScalar(full, 1.0 / static_cast<double>(count));
}

/// d(a @ b): g @ b^T and a^T @ g over the last two dims, 1-D operands promoted as matmul
/// does, and batch dims that broadcast summed back.
std::vector<Value *> matMulGrad(GradEmitter &e, const Node &n, Value *g) {
  if (n.hasAttr("packed_n"))
    return {e.fail(n.error("no gradient through a packed weight (differentiate before "
                           "pack-gemm-weights)"))};
  Value *a = n.operand(0), *b = n.operand(1);
  Value *a2 = a, *b2 = b, *g2 = g;
  if (a->rank() == 1) {
    a2 = e.op(OpKind::Unsqueeze, {a}, {{"axes", Ints{0}}});
    g2 = e.op(OpKind::Unsqueeze, {g2}, {{"axes", Ints{g2->rank() - (b->rank() == 1 ? 0 : 1)}}});
  }
  if (b->rank() == 1) {
    b2 = e.op(OpKind::Unsqueeze, {b}, {{"axes", Ints{1}}});
    if (g2)
      g2 = e.op(OpKind::Unsqueeze, {g2}, {{"axes", Ints{g2->rank()}}});
  }
  if (!e.ok())
    return {nullptr, nullptr};
  Value *bt = e.op(OpKind::Transpose, {b2}, {{"perm", swapLastTwo(b2->rank())}});
  Value *at = e.op(OpKind::Transpose, {a2}, {{"perm", swapLastTwo(a2->rank())}});
  Value *ga = e.sumTo(e.op(OpKind::MatMul, {g2, bt}), a2);
  Value *gb = nullptr;
  Node *bp = b->producer();
  auto numel = [](Value *v) -> int64_t {
    std::optional<Extents> x = staticExtents(v->shape());
    std::optional<int64_t> n = x ? checkedNumElements(*x) : std::nullopt;
    return n ? *n : -1;
  };
  int64_t gSize = numel(g2), aSize = numel(a2), bSize = numel(b2);
  if (b2 == b && b->rank() == 2 && a2->rank() == 2 && bp && bp->kind() == OpKind::Transpose &&
      (gSize < 0 || aSize < 0 || gSize <= aSize + bSize)) {
    // b = transpose(W) (Gemm with transB, PyTorch's Linear layout): give a^T g as
    // (g^T a)^T, so that the transpose rule's transpose of it cancels this one and W's
    // gradient is g^T a, without transposing a nor the weight-sized result. Where g is the
    // larger (an RNN's input projection: g [steps * batch, gates * hidden], a [steps *
    // batch, inputs]), a^T g, transposing a and the result, moves less.
    Value *gt = e.op(OpKind::Transpose, {g2}, {{"perm", Ints{1, 0}}});
    gb = e.op(OpKind::Transpose, {e.op(OpKind::MatMul, {gt, a2})}, {{"perm", Ints{1, 0}}});
  } else {
    gb = e.sumTo(e.op(OpKind::MatMul, {at, g2}), b2);
  }
  return {a2 == a ? ga : e.reshapeLike(ga, a), b2 == b ? gb : e.reshapeLike(gb, b)};
}

/// The conv_transpose output_padding that makes a strided op's gradient as large as its
/// input (`in` spatial extents), or a failure where no padding in [0, stride) does.
std::optional<Ints> outputPadding(GradEmitter &e, const Node &n, const Extents &in,
                                  const Extents &out, const Ints &kernel, const Ints &strides,
                                  const Ints &pads, const Ints &dilations) {
  size_t sp = kernel.size();
  Ints op(sp);
  for (size_t i = 0; i < sp; ++i) {
    int64_t full =
        (out[i + 2] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - pads[i] - pads[i + sp];
    op[i] = in[i + 2] - full;
    if (op[i] < 0 || op[i] >= std::max<int64_t>(strides[i], 1)) {
      e.fail(n.error("no gradient for this padding / ceil_mode combination"));
      return std::nullopt;
    }
  }
  return op;
}

bool explicitPads(GradEmitter &e, const Node &n) {
  std::string ap = n.getString("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty())
    return true;
  e.fail(n.error("the gradient needs explicit pads, got auto_pad {}", ap));
  return false;
}

/// Conv over N-D NC... input. The input gradient is conv_transpose of g with the same
/// weight (its [M, C/group, k...] layout is conv_transpose's [C_in, C_out/group, k...]; a conv
/// with the flipped weight, tried for stride 1, measured slower on LeNet's 6-channel layer). The
/// weight gradient is a conv that correlates x with g per group: x as [C/G, G*N, ...] (N as
/// channels), g as weights [G*M/G, N, ...], stride and dilation swapped; the result
/// [C/G, M, k'...] (k' >= k) is cropped to k and transposed to [M, C/G, k...].
std::vector<Value *> convGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0), *w = n.operand(1), *bias = n.operand(2);
  if (!explicitPads(e, n))
    return {nullptr, nullptr, nullptr};
  std::optional<Extents> xe = needStatic(e, n, x), we = needStatic(e, n, w),
                         ge = needStatic(e, n, g);
  if (!xe || !we || !ge)
    return {nullptr, nullptr, nullptr};
  size_t sp = xe->size() - 2;
  Ints strides = n.getInts("strides"), pads = n.getInts("pads"), dil = n.getInts("dilations");
  int64_t group = n.getInt("group");
  Ints kernel(we->begin() + 2, we->end());
  std::optional<Ints> opad = outputPadding(e, n, *xe, *ge, kernel, strides, pads, dil);
  if (!opad)
    return {nullptr, nullptr, nullptr};
  auto cat = [](Ints a, const Ints &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  auto iotaFrom = [](int64_t from, size_t count) {
    Ints r(count);
    std::iota(r.begin(), r.end(), from);
    return r;
  };
  Value *gx = e.op(OpKind::ConvTranspose, {g, w},
                   {{"strides", strides},
                    {"pads", pads},
                    {"dilations", dil},
                    {"group", group},
                    {"output_padding", *opad}});

  int64_t batch = (*xe)[0], c = (*xe)[1], m = (*ge)[1], cg = c / group, mg = m / group;
  Ints spatialX(xe->begin() + 2, xe->end()), spatialG(ge->begin() + 2, ge->end());
  // x [N, G, Cg, S...] -> [Cg, G, N, S...] -> [Cg, G*N, S...]
  Value *xt = e.op(OpKind::Reshape, {x, e.i64s(cat({batch, group, cg}, spatialX))});
  xt = e.transpose(xt, cat({2, 1, 0}, iotaFrom(3, sp)));
  xt = e.op(OpKind::Reshape, {xt, e.i64s(cat({cg, group * batch}, spatialX))});
  // g [N, G, Mg, O...] -> [G, Mg, N, O...] -> [G*Mg, N, O...]
  Value *gt = e.op(OpKind::Reshape, {g, e.i64s(cat({batch, group, mg}, spatialG))});
  gt = e.transpose(gt, cat({1, 2, 0}, iotaFrom(3, sp)));
  gt = e.op(OpKind::Reshape, {gt, e.i64s(cat({m, batch}, spatialG))});
  Value *gw = e.op(OpKind::Conv, {xt, gt},
                   {{"strides", dil}, {"pads", pads}, {"dilations", strides}, {"group", group}});
  if (!e.ok())
    return {nullptr, nullptr, nullptr};
  std::optional<Extents> gwe = staticExtents(gw->shape());
  if (gwe && Ints(gwe->begin() + 2, gwe->end()) != kernel)
    gw = e.op(OpKind::Slice, {gw, e.i64s(Ints(sp, 0)), e.i64s(kernel), e.i64s(iotaFrom(2, sp))});
  gw = e.transpose(gw, cat({1, 0}, iotaFrom(2, sp)));
  if (!bias)
    return {gx, gw};
  return {gx, gw,
          e.op(OpKind::ReduceSum, {g},
               {{"axes", cat({0}, iotaFrom(2, sp))}, {"keepdims", int64_t(0)}})};
}

/// Max pooling: the gradient of each window goes to its maximum, found by a max_pool with
/// the index result (flat indices into x) and added there with scatter_elements.
std::vector<Value *> maxPoolGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0);
  if (!explicitPads(e, n) || !needStatic(e, n, x))
    return {nullptr};
  AttrMap attrs = n.attrs();
  attrs["storage_order"] = int64_t(0);
  std::vector<Value *> r = e.opMulti(OpKind::MaxPool, {x}, attrs, 2);
  if (!e.ok())
    return {nullptr};
  Value *flatIdx = e.op(OpKind::Reshape, {r[1], e.i64s({-1})});
  Value *flatG = e.op(OpKind::Reshape, {g, e.i64s({-1})});
  Value *flatX = e.op(OpKind::Reshape, {e.zerosLike(x), e.i64s({-1})});
  Value *gx = e.op(OpKind::ScatterElements, {flatX, flatIdx, flatG},
                   {{"axis", int64_t(0)}, {"reduction", std::string("add")}});
  return {e.reshapeLike(gx, x)};
}

/// Average pooling: conv_transpose of g with a depthwise kernel of 1/window (so only with
/// count_include_pad or without pads, where every window divides by its full size).
std::vector<Value *> avgPoolGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0);
  if (!explicitPads(e, n))
    return {nullptr};
  std::optional<Extents> xe = needStatic(e, n, x), ge = needStatic(e, n, g);
  if (!xe || !ge)
    return {nullptr};
  Ints kernel = n.getInts("kernel_shape"), strides = n.getInts("strides"), pads = n.getInts("pads"),
       dil = n.getInts("dilations");
  bool padded = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; });
  if (padded && !n.getInt("count_include_pad"))
    return {e.fail(n.error("the gradient of avg_pool with pads needs count_include_pad=1"))};
  std::optional<Ints> opad = outputPadding(e, n, *xe, *ge, kernel, strides, pads, dil);
  if (!opad)
    return {nullptr};
  int64_t c = (*xe)[1], window = 1;
  for (int64_t k : kernel)
    window *= k;
  Extents wext = {c, 1};
  wext.insert(wext.end(), kernel.begin(), kernel.end());
  Tensor w = Tensor::zeros(x->dtype(), wext);
  for (int64_t i = 0; i < w.numElements(); ++i) {
    if (x->dtype() == DType::F64)
      w.data<double>()[i] = 1.0 / static_cast<double>(window);
    else if (x->dtype() == DType::F32)
      w.data<float>()[i] = 1.0f / static_cast<float>(window);
    else
      return {e.fail(n.error("the gradient of avg_pool is implemented for f32 and f64"))};
  }
  return {e.op(OpKind::ConvTranspose, {g, e.constant(w)},
               {{"strides", strides},
                {"pads", pads},
                {"dilations", dil},
                {"group", c},
                {"output_padding", *opad}})};
}

/// Slice with step 1 (constant starts, ends, axes): the gradient pads g with zeros back to
/// x's extents.
/// Slice: g put back where its elements were taken from x, zeros elsewhere. Per sliced axis
/// (first index f, count c, step s):
///  1. a negative step reverses g along the axis, so that it runs upward from the lowest
///     index taken, f + (c - 1) s;
///  2. |s| > 1 puts |s| - 1 zeros after each element (unsqueeze a unit axis after it, pad that
///     to |s|, reshape back: c |s| elements);
///  3. one pad of every axis then places each run at its lowest index (a negative end pad
///     crops the zeros past x's end).
std::vector<Value *> sliceGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0);
  std::vector<Value *> none(n.numOperands(), nullptr);
  std::optional<Extents> xe = needStatic(e, n, x), ge = needStatic(e, n, g);
  const Tensor *starts = n.constantOperand(1), *ends = n.constantOperand(2);
  const Tensor *axesT = n.numOperands() > 3 && n.operand(3) ? n.constantOperand(3) : nullptr;
  const Tensor *stepsT = n.numOperands() > 4 && n.operand(4) ? n.constantOperand(4) : nullptr;
  if (!xe || !ge)
    return none;
  if (!starts || !ends || (n.operand(3) && !axesT) ||
      (n.numOperands() > 4 && n.operand(4) && !stepsT)) {
    e.fail(n.error("the gradient of slice needs constant starts, ends, axes and steps"));
    return none;
  }
  Ints st = starts->toInt64Vector(), en = ends->toInt64Vector();
  Ints axes = axesT ? axesT->toInt64Vector() : Ints();
  if (!axesT)
    for (size_t i = 0; i < st.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  Ints steps = stepsT ? stepsT->toInt64Vector() : Ints(st.size(), 1);
  int64_t r = x->rank();
  Ints pads(static_cast<size_t>(2 * r), 0);
  const AttrMap constantMode = {{"mode", std::string("constant")}};
  Extents runs = *ge; // g's extents, each sliced axis widened to c |s|
  Value *gx = g;
  for (size_t i = 0; i < st.size(); ++i) {
    auto ax = static_cast<size_t>(normAxis(axes[i], r));
    int64_t dim = (*xe)[ax], s = steps[i], first = 0, count = 0;
    sliceAxis(dim, st[i], en[i], s, first, count);
    if (count == 0) { // nothing taken: x does not reach the loss
      none[0] = e.zerosLike(x);
      return none;
    }
    if (s < 0) {
      gx = e.op(OpKind::Slice, {gx, e.i64s({-1}), e.i64s({-(count + 1)}),
                                e.i64s({static_cast<int64_t>(ax)}), e.i64s({-1})});
      first += (count - 1) * s;
      s = -s;
    }
    if (s > 1) {
      auto unit = static_cast<int64_t>(ax) + 1;
      Ints spread(static_cast<size_t>(2 * (r + 1)), 0);
      spread[static_cast<size_t>(r + 1 + unit)] = s - 1;
      gx =
          e.op(OpKind::Pad, {e.op(OpKind::Unsqueeze, {gx}, {{"axes", Ints{unit}}}), e.i64s(spread)},
               constantMode);
      runs[ax] = count * s;
      gx = e.op(OpKind::Reshape, {gx, e.i64s(runs)});
    }
    pads[ax] = first;
    pads[ax + static_cast<size_t>(r)] = dim - first - runs[ax];
  }
  none[0] = e.op(OpKind::Pad, {gx, e.i64s(pads)}, constantMode);
  return none;
}

/// Constant-mode pad with pads >= 0: the gradient is the slice of g where x was.
std::vector<Value *> padGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0);
  std::vector<Value *> none(n.numOperands(), nullptr);
  std::optional<Extents> xe = needStatic(e, n, x);
  const Tensor *padsT = n.constantOperand(1);
  if (!xe)
    return none;
  Ints pads = padsT ? padsT->toInt64Vector() : Ints();
  if (n.getString("mode") != "constant" || !padsT ||
      std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; })) {
    e.fail(n.error("the gradient of pad is implemented for constant mode with constant pads "
                   ">= 0"));
    return none;
  }
  size_t r = xe->size();
  Ints begins(pads.begin(), pads.begin() + static_cast<long>(r)), ends(r);
  for (size_t i = 0; i < r; ++i)
    ends[i] = begins[i] + (*xe)[i];
  none[0] = e.op(OpKind::Slice, {g, e.i64s(begins), e.i64s(ends)});
  return none;
}

/// Split: the pieces' gradients joined back (zeros for a piece that does not reach the loss).
std::vector<Value *> splitGrad(GradEmitter &e, const Node &n, const std::vector<Value *> &dy) {
  std::vector<Value *> parts;
  for (size_t i = 0; i < dy.size(); ++i)
    parts.push_back(dy[i] ? dy[i] : e.zerosLike(n.result(i)));
  return {e.op(OpKind::Concat, parts, {{"axis", n.getInt("axis")}})};
}

/// Layer norm over dims [axis, rank): with xhat = (x - mean) rstd and gh = g scale,
/// dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), dscale = sum(g xhat), dbias = sum(g), the
/// sums over the dims that broadcast scale and bias. The statistics are recomputed.
std::vector<Value *> layerNormGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0), *scale = n.operand(1), *bias = n.operand(2);
  int64_t r = x->rank(), axis = normAxis(n.getInt("axis"), r);
  Ints axes;
  for (int64_t a = axis; a < r; ++a)
    axes.push_back(a);
  AttrMap keep = {{"axes", axes}, {"keepdims", int64_t(1)}};
  Value *mean = e.op(OpKind::ReduceMean, {x}, keep);
  Value *xc = e.sub(x, mean);
  Value *var = e.op(OpKind::ReduceMean, {e.mul(xc, xc)}, keep);
  Value *eps = e.scalar(n.getFloat("epsilon"), x->dtype());
  Value *rstd = e.op(OpKind::Reciprocal, {e.op(OpKind::Sqrt, {e.add(var, eps)})});
  Value *xhat = e.mul(xc, rstd);
  Value *gh = e.mul(g, scale);
  Value *m1 = e.op(OpKind::ReduceMean, {gh}, keep);
  Value *m2 = e.op(OpKind::ReduceMean, {e.mul(gh, xhat)}, keep);
  Value *gx = e.mul(rstd, e.sub(e.sub(gh, m1), e.mul(xhat, m2)));
  std::vector<Value *> out = {gx, e.sumTo(e.mul(g, xhat), scale)};
  if (n.numOperands() > 2)
    out.push_back(bias ? e.sumTo(g, bias) : nullptr);
  return out;
}

/// batch_norm(x, scale, bias, mean, var) per channel (dim 1): y = (x - mean) scale rstd +
/// bias with rstd = 1 / sqrt(var + eps). The gradients of mean and var matter in training
/// mode, where the importer computes them from x (ReduceMean), so that their rules carry
/// the batch statistics' share of x's gradient.
std::vector<Value *> batchNormGrad(GradEmitter &e, const Node &n, Value *g) {
  Value *x = n.operand(0);
  int64_t r = x->rank();
  Ints spatial; // the per-channel operands broadcast as [C, 1, ...]
  for (int64_t a = 1; a + 1 < r; ++a)
    spatial.push_back(a);
  auto chan = [&](Value *p) {
    return spatial.empty() ? p : e.op(OpKind::Unsqueeze, {p}, {{"axes", spatial}});
  };
  auto back = [&](Value *v, Value *like, Value *p) { return e.reshapeLike(e.sumTo(v, like), p); };
  Value *scale = chan(n.operand(1)), *bias = chan(n.operand(2)), *mean = chan(n.operand(3)),
        *var = chan(n.operand(4));
  Value *eps = e.scalar(n.getFloat("epsilon"), x->dtype());
  Value *rstd = e.op(OpKind::Reciprocal, {e.op(OpKind::Sqrt, {e.add(var, eps)})});
  Value *xc = e.sub(x, mean);
  Value *gx = e.mul(g, e.mul(scale, rstd));
  Value *gxc = e.mul(g, xc);
  Value *rstd3 = e.mul(rstd, e.mul(rstd, rstd));
  return {gx, back(e.mul(gxc, rstd), scale, n.operand(1)), back(g, bias, n.operand(2)),
          back(e.neg(gx), mean, n.operand(3)),
          back(e.mul(gxc, e.mul(scale, e.mulScalar(rstd3, -0.5))), var, n.operand(4))};
}

#define X(i) n.operand(i)
#define Y(i) n.result(i)
#define G dy[0]
#define NNC_GRADIENT(Id, ...)                                                                      \
  std::vector<Value *> grad##Id(GradEmitter &e, const Node &n, const std::vector<Value *> &dy)     \
      __VA_ARGS__
#include "nnc/ir/Gradients.def"
#undef X
#undef Y
#undef G

} // namespace

GradientRule gradientRule(OpKind kind) {
  switch (kind) {
#define NNC_GRADIENT(Id, ...)                                                                      \
  case OpKind::Id:                                                                                 \
    return grad##Id;
#include "nnc/ir/Gradients.def"
  default:
    return nullptr;
  }
}

// ---- GradEmitter -----------------------------------------------------------------------------

Value *GradEmitter::fail(Error e) {
  if (!error_)
    error_ = std::move(e);
  return nullptr;
}

Value *GradEmitter::op(OpKind kind, const std::vector<Value *> &operands, AttrMap attrs) {
  std::vector<Value *> r = opMulti(kind, operands, std::move(attrs), 1);
  return r.empty() ? nullptr : r[0];
}

std::vector<Value *> GradEmitter::opMulti(OpKind kind, const std::vector<Value *> &operands,
                                          AttrMap attrs, int numResults) {
  if (error_)
    return std::vector<Value *>(static_cast<size_t>(numResults), nullptr);
  for (Value *v : operands)
    if (!v) {
      fail(makeError("internal error: a null operand of {} in a gradient", opInfo(kind).name));
      return std::vector<Value *>(static_cast<size_t>(numResults), nullptr);
    }
  Expected<Node *> node = g_.createInferred(kind, operands, std::move(attrs), "", numResults);
  if (!node) {
    fail(node.takeError().withContext("gradient"));
    return std::vector<Value *>(static_cast<size_t>(numResults), nullptr);
  }
  return (*node)->results();
}

Value *GradEmitter::constant(const Tensor &t) {
  return op(OpKind::Constant, {}, {{"value", t}});
}

Value *GradEmitter::scalar(double v, DType t) {
  Tensor s = Tensor::zeros(t, {});
  switch (t) {
  case DType::F32:
    *s.data<float>() = static_cast<float>(v);
    break;
  case DType::F64:
    *s.data<double>() = v;
    break;
  case DType::I32:
    *s.data<int32_t>() = static_cast<int32_t>(v);
    break;
  case DType::I64:
    *s.data<int64_t>() = static_cast<int64_t>(v);
    break;
  default:
    return fail(makeError("gradients: dtype {} is not supported", dtypeName(t)));
  }
  return constant(s);
}

Value *GradEmitter::i64s(const std::vector<int64_t> &v) {
  return constant(Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v));
}

Value *GradEmitter::shapeOf(Value *v) {
  if (!v)
    return nullptr;
  if (std::optional<Extents> ext = staticExtents(v->shape()))
    return i64s(*ext);
  return op(OpKind::ShapeOf, {v});
}

Value *GradEmitter::zerosLike(Value *v) {
  if (!v)
    return nullptr;
  if (std::optional<Extents> ext = staticExtents(v->shape()))
    return constant(Tensor::zeros(v->dtype(), *ext));
  return op(OpKind::Expand, {scalar(0, v->dtype()), shapeOf(v)});
}

Value *GradEmitter::mulScalar(Value *a, double s) {
  if (!a)
    return nullptr;
  return mul(a, scalar(s, a->dtype()));
}

Value *GradEmitter::reshapeLike(Value *v, Value *like) {
  if (!v || !like)
    return nullptr;
  if (v->type() == like->type())
    return v;
  return op(OpKind::Reshape, {v, shapeOf(like)});
}

Value *GradEmitter::transpose(Value *v, const std::vector<int64_t> &perm) {
  if (!v)
    return nullptr;
  std::optional<Extents> ext = staticExtents(v->shape());
  if (ext) {
    // The non-1 dims in their new order: if still increasing, the data order is unchanged.
    int64_t last = -1;
    bool same = true;
    Extents out;
    for (int64_t p : perm) {
      int64_t d = (*ext)[static_cast<size_t>(p)];
      out.push_back(d);
      if (d != 1) {
        same = same && p > last;
        last = p;
      }
    }
    if (same)
      return op(OpKind::Reshape, {v, i64s(out)});
  }
  return op(OpKind::Transpose, {v}, {{"perm", perm}});
}

Value *GradEmitter::sumTo(Value *g, Value *target) {
  if (!g || !target)
    return nullptr;
  if (g->shape() == target->shape())
    return g;
  int64_t lead = g->rank() - target->rank();
  if (lead < 0)
    return fail(makeError("internal error: gradient {} smaller than its operand {}",
                          g->type().str(), target->type().str()));
  if (lead > 0) {
    Ints axes(static_cast<size_t>(lead));
    std::iota(axes.begin(), axes.end(), 0);
    g = op(OpKind::ReduceSum, {g}, {{"axes", axes}, {"keepdims", int64_t(0)}});
  }
  if (!g)
    return nullptr;
  Ints stretched;
  for (int64_t i = 0; i < target->rank(); ++i) {
    const Dim &t = target->shape()[static_cast<size_t>(i)];
    if (t.isStatic() && t.value() == 1 && g->shape()[static_cast<size_t>(i)] != Dim(1))
      stretched.push_back(i);
  }
  if (!stretched.empty())
    g = op(OpKind::ReduceSum, {g}, {{"axes", stretched}, {"keepdims", int64_t(1)}});
  return reshapeLike(g, target);
}

} // namespace nnc
