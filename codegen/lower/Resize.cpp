// Lowerer of resize (ONNX Resize-19). A first kernel fills two scratch tables per resized
// axis (tap indices and extrapolation flags; tap weights), computing each output coordinate's
// taps with the same double arithmetic as the interpreter (nnc/ir/ResizeMath.h); a second
// kernel interpolates, reading the tables. Axes the resize leaves alone need no table (found
// with the interpreter's own tap code, resizeAxisTaps(), run at lowering time).
#include <algorithm>
#include <cmath>

#include "NNLowering.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/ir/ResizeMath.h"
#include "nnc/ir/Tensor.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

using resize::AxisTaps;
using resize::ResizeAttrs;

/// The table layout of one axis that needs one.
struct AxisTable {
  bool identity = true;
  int64_t maxTaps = 0;
  int64_t tapOffset = 0;  ///< Into both tables: [out][maxTaps] indices / weights.
  int64_t flagOffset = -1; ///< Into the index table: [out] extrapolate flags (or -1).
};

/// Converts the f64 interpolation result to `t` like the interpreter's fromDoubles (integers
/// rounded to nearest even and saturated, NaN to 0).
Expr fromF64(const Expr &v, DType t) {
  if (isFloat(t))
    return kir::cast(v, t);
  Expr r = kir::op(OpKind::Round, {v});
  Expr lo = kir::cast(lowestOf(t), DType::F64), hi = kir::cast(highestOf(t), DType::F64);
  Expr c = kir::select(le(r, lo), lowestOf(t), kir::select(kir::ge(r, hi), highestOf(t),
                                                            kir::cast(r, t)));
  return kir::select(isNaN(v), fc(0, t), c);
}

/// The number of taps resizeCoefficients() gives for `scale` (start is static too).
int64_t tapStart(const ResizeAttrs &a, double scale) {
  if (a.mode == "nearest" || (a.mode == "linear" && !a.antialias))
    return 0;
  if (a.mode == "cubic" && !a.antialias)
    return -1;
  double s = std::min(scale, 1.0);
  return static_cast<int64_t>(std::floor((a.mode == "linear" ? -1 : -2) / s)) + 1;
}
int64_t tapCount(const ResizeAttrs &a, double scale) {
  if (a.mode == "nearest" || (a.mode == "linear" && !a.antialias))
    return 2;
  if (a.mode == "cubic" && !a.antialias)
    return 4;
  return 2 - 2 * tapStart(a, scale);
}

Expr F(double v) { return fc(v, DType::F64); }
Expr fadd(Expr x, Expr y) { return kir::add(std::move(x), std::move(y)); }
Expr fsub(Expr x, Expr y) { return kir::sub(std::move(x), std::move(y)); }
Expr fmul(Expr x, Expr y) { return kir::mul(std::move(x), std::move(y)); }
Expr fdiv(Expr x, Expr y) { return kir::op(OpKind::Div, {std::move(x), std::move(y)}); }

/// A loop over the outputs of one axis writing its taps (as resizeAxisTaps() computes them,
/// with zero weights kept in place instead of dropped) and extrapolation flags into the tables.
Stmt axisTableLoop(KernelBuilder &kb, const ResizeAttrs &a, int64_t in, int64_t out,
                   double scale, double roiStart, double roiEnd, int64_t n, int64_t tapOffset,
                   int64_t flagOffset, int ib, int wb) {
  Nest loop;
  Expr o = loop.add(kb, out, "o");
  std::vector<Stmt> body;
  auto local = [&](const std::string &hint, DType t, Expr init) {
    return kb.bind(body, hint, t, std::move(init));
  };
  double outWidth = scale * static_cast<double>(in);
  double inW = static_cast<double>(in);
  Expr x = local("x", DType::F64, kir::cast(o, DType::F64));
  Expr xo;
  Expr extrapolate = kir::intImm(0, DType::Bool);
  const Expr half = F(0.5);
  if (a.ctm == "align_corners") {
    xo = outWidth == 1 ? F(0) : fdiv(fmul(x, F(inW - 1)), F(outWidth - 1));
  } else if (a.ctm == "asymmetric") {
    xo = fdiv(x, F(scale));
  } else if (a.ctm == "tf_crop_and_resize") {
    xo = outWidth == 1 ? F((roiEnd - roiStart) * (inW - 1) / 2)
                       : fdiv(fmul(fmul(x, F(roiEnd - roiStart)), F(inW - 1)), F(outWidth - 1));
    xo = local("xo", DType::F64, fadd(xo, F(roiStart * (inW - 1))));
    extrapolate = bor(kir::lt(xo, F(0)), gt(xo, F(inW - 1)));
  } else if (a.ctm == "pytorch_half_pixel") {
    xo = outWidth == 1 ? F(-0.5) : fsub(fdiv(fadd(x, half), F(scale)), half);
  } else if (a.ctm == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(out) / outWidth;
    double offset = inW / 2 * (1 - adjustment);
    xo = fsub(fadd(F(offset), fdiv(fadd(x, half), F(scale))), half);
  } else if (a.ctm == "tf_half_pixel_for_nn") {
    xo = fdiv(fadd(x, half), F(scale));
  } else {
    xo = fsub(fdiv(fadd(x, half), F(scale)), half);
  }
  xo = local("xo", DType::F64, xo);
  // A NaN, infinite or absurd coordinate extrapolates too; its taps are computed from 0 so
  // that every stored index stays inside the input.
  extrapolate = local("ext", DType::Bool,
                      bor(extrapolate, bnot(kir::lt(kir::op(OpKind::Abs, {xo}), F(0x1p52)))));
  xo = local("xs", DType::F64, kir::select(extrapolate, F(0), xo));
  Expr fl = local("fl", DType::F64, kir::op(OpKind::Floor, {xo}));
  Expr r0 = fsub(xo, fl);
  Expr atInt = local("zr", DType::Bool, eq(r0, F(0)));
  Expr ratio = local("r", DType::F64, kir::select(atInt, F(1), r0));
  Expr base = local("base", DType::I64,
                    kir::sub(kir::cast(fl, DType::I64), kir::select(atInt, i64(1), i64(0))));
  int64_t start = tapStart(a, scale);
  std::vector<Expr> c(static_cast<size_t>(n));
  double A = a.cubicA;
  auto normalize = [&](std::vector<Expr> &v) {
    Expr sum = F(0);
    for (const Expr &e : v)
      sum = fadd(sum, e);
    Expr sumE = local("sum", DType::F64, sum);
    for (Expr &e : v)
      e = fdiv(e, sumE);
  };
  auto hold = [&](std::vector<Expr> &v) {
    for (Expr &e : v)
      e = local("c", DType::F64, e);
  };
  if (a.mode == "nearest") {
    Expr ceil;
    if (a.nearestMode == "round_prefer_ceil")
      ceil = kir::ge(ratio, half);
    else if (a.nearestMode == "floor")
      ceil = kir::intImm(0, DType::Bool);
    else if (a.nearestMode == "ceil")
      ceil = kir::intImm(1, DType::Bool);
    else
      ceil = gt(ratio, half);
    ceil = bor(eq(ratio, F(1)), ceil);
    c[0] = kir::select(ceil, F(0), F(1));
    c[1] = kir::select(ceil, F(1), F(0));
  } else if (a.mode == "linear" && !a.antialias) {
    c[0] = fsub(F(1), ratio);
    c[1] = ratio;
  } else if (a.mode == "linear") {
    double s = std::min(scale, 1.0);
    for (int64_t k = 0; k < n; ++k) {
      Expr t = fsub(F(1), kir::op(OpKind::Abs, {fmul(fsub(F(static_cast<double>(start + k)), ratio),
                                                     F(s))}));
      c[k] = kir::min(kir::max(t, F(0)), F(1));
    }
    hold(c);
    normalize(c);
  } else if (!a.antialias) {
    Expr r1 = local("r1", DType::F64, fadd(ratio, F(1)));
    Expr q = local("q", DType::F64, fsub(F(1), ratio));
    Expr q1 = local("q1", DType::F64, fadd(q, F(1)));
    auto outer = [&](const Expr &v) {
      return fsub(fmul(fadd(fmul(fsub(fmul(F(A), v), F(5 * A)), v), F(8 * A)), v), F(4 * A));
    };
    auto inner = [&](const Expr &v) {
      return fadd(fmul(fmul(fsub(fmul(F(A + 2), v), F(A + 3)), v), v), F(1));
    };
    c[0] = outer(r1);
    c[1] = inner(ratio);
    c[2] = inner(q);
    c[3] = outer(q1);
  } else {
    double s = std::min(scale, 1.0);
    for (int64_t k = 0; k < n; ++k) {
      Expr xa = local("xa", DType::F64,
                      kir::op(OpKind::Abs,
                              {fmul(F(s), fsub(F(static_cast<double>(start + k)), ratio))}));
      Expr near = fadd(fmul(fmul(fsub(fmul(F(A + 2), xa), F(A + 3)), xa), xa), F(1));
      Expr far = fsub(fmul(fadd(fmul(fsub(fmul(F(A), xa), F(5 * A)), xa), F(8 * A)), xa),
                      F(4 * A));
      c[k] = kir::select(le(xa, F(1)), near, kir::select(kir::lt(xa, F(2)), far, F(0)));
    }
    hold(c);
    normalize(c);
  }
  hold(c);
  std::vector<Expr> idx(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k)
    idx[k] = local("ix", DType::I64, kir::add(base, i64(start + k)));
  if (a.excludeOutside) {
    for (int64_t k = 0; k < n; ++k)
      c[k] = kir::select(bor(kir::lt(idx[k], i64(0)), kir::ge(idx[k], i64(in))), F(0), c[k]);
    hold(c);
    normalize(c);
  }
  Expr row = kir::add(i64(tapOffset), kir::mul(o, i64(n)));
  for (int64_t k = 0; k < n; ++k) {
    Expr at = kir::add(row, i64(k));
    body.push_back(kb.store(wb, at, c[k]));
    body.push_back(kb.store(ib, at, kir::min(kir::max(idx[k], i64(0)), i64(in - 1))));
  }
  body.push_back(kb.store(ib, kir::add(i64(flagOffset), o),
                          kir::select(extrapolate, i64(1), i64(0))));
  return loop.wrap(kir::block(body));
}

/// An f32 resize of several axes as one pass per resized axis, innermost first (`resized`,
/// descending), each a kernel: pass i resizes its axis of the previous pass's result (the
/// input first) into an f64 scratch, summing its taps' weighted values (a zero weight adds
/// nothing, as in the interpreter's product of weights); the last pass writes the result,
/// extrapolated where any axis says so. The interpreter sums over the product of the axes'
/// taps: an upsampling of H and W by 16 reads 4 taps per output, gathered; here the first
/// pass gathers 2 per element of a 16x smaller intermediate, and the second reads rows whole.
/// DeepLabV3's final resize of 21 x 28 x 28 to 224 x 224 so went from several times ONNX
/// Runtime's time to less than it. The sums are the same terms in another order (f64, then
/// rounded to f32).
void separablePasses(const Node &node, const std::string &prefix, const Extents &in,
                     const Extents &outE, const std::vector<AxisTable> &tables,
                     const std::vector<size_t> &resized, int64_t idxSize, int64_t wSize,
                     double extrapolation, Kernels &kernels) {
  size_t rank = in.size();
  Extents cur = in;
  for (size_t i = 0; i < resized.size(); ++i) {
    size_t d = resized[i];
    bool last = i + 1 == resized.size();
    Extents next = cur;
    next[d] = outE[d];
    KernelBuilder kb(node, last ? prefix : prefix + "_axis" + std::to_string(d));
    int ib = kb.scratch(0, DType::I64, idxSize), wb = kb.scratch(1, DType::F64, wSize);
    // Scratch 2 and 3 hold the intermediates, in turn.
    int src = i == 0
                  ? kb.operand(0)
                  : kb.scratch(2 + static_cast<int>((i - 1) % 2), DType::F64, numElementsOf(cur));
    int dst = last ? kb.result(0)
                   : kb.scratch(2 + static_cast<int>(i % 2), DType::F64, numElementsOf(next));
    std::vector<int64_t> srcStride = stridesOf(cur), dstStride = stridesOf(next);
    // The last axis runs innermost. When this pass resizes another axis, its weights and
    // source rows are the same along it: locals per row, and a row loop that vectorizes.
    size_t lastAxis = rank - 1;
    bool rows = d != lastAxis;
    Nest outer;
    std::vector<Expr> o(rank);
    for (size_t a = 0; a < rank; ++a)
      if (!rows || a != lastAxis)
        o[a] = outer.add(kb, next[a], "o");
    std::string jv = kb.freshName("j");
    if (rows)
      o[lastAxis] = kir::var(jv);
    std::vector<Stmt> perRow, body;
    std::vector<Stmt> &hoist = rows ? perRow : body;
    const AxisTable &tb = tables[d];
    Expr base = i64(0);
    for (size_t a = 0; a < rank; ++a)
      if (a != d && (!rows || a != lastAxis))
        base = kir::add(base, kir::mul(o[a], i64(srcStride[a])));
    std::string v = kb.freshName("v");
    Expr vE = kir::var(v, DType::F64);
    body.push_back(kir::decl(v, DType::F64, fc(0, DType::F64)));
    for (int64_t k = 0; k < tb.maxTaps; ++k) {
      Expr at = kir::add(i64(tb.tapOffset + k), kir::mul(o[d], i64(tb.maxTaps)));
      Expr w = kb.bind(hoist, "w", DType::F64, kb.load(wb, at));
      Expr from = kb.bind(hoist, "from", DType::I64,
                          kir::add(base, kir::mul(kb.load(ib, at), i64(srcStride[d]))));
      if (rows)
        from = kir::add(from, o[lastAxis]);
      Expr x = kir::cast(kb.load(src, from), DType::F64);
      body.push_back(kir::assign(v, kir::add(vE, kir::select(eq(w, fc(0, DType::F64)),
                                                             fc(0, DType::F64), kir::mul(w, x)))));
    }
    Expr result = vE;
    if (last) {
      Expr rowFlag = kir::intImm(0, DType::Bool), flag = kir::intImm(0, DType::Bool);
      for (size_t a : resized)
        if (tables[a].flagOffset >= 0) {
          Expr f = bnot(eq(kb.load(ib, kir::add(i64(tables[a].flagOffset), o[a])), i64(0)));
          if (rows && a != lastAxis)
            rowFlag = bor(rowFlag, f);
          else
            flag = bor(flag, f);
        }
      if (rows)
        rowFlag = kb.bind(perRow, "ext", DType::Bool, rowFlag);
      result =
          fromF64(kir::select(bor(rowFlag, flag), fc(extrapolation, DType::F64), vE), DType::F32);
    }
    body.push_back(kb.store(dst, flatIndex(o, dstStride), result));
    Stmt nest;
    kir::Schedule sched = parallelOuter(outer, numElementsOf(next) * tb.maxTaps);
    if (rows) {
      perRow.push_back(kir::forLoop(jv, i64(next[lastAxis]), kir::block(body)));
      nest = outer.wrap(kir::block(perRow));
      sched.steps.push_back({kir::ScheduleStep::Vectorize, jv, 0, {}});
    } else {
      nest = outer.wrap(kir::block(body));
    }
    kernels.push_back(kb.finish(nest, sched));
    cur = next;
  }
}

Expected<Kernels> lowerResize(const Node &node, const std::string &prefix) {
  const Value *xv = node.operand(0);
  DType t = xv->dtype();
  if (!isNumeric(t))
    return node.error("expects a numeric input, got {}", dtypeName(t));
  Extents in = extentsOf(xv), outE = extentsOf(node.result(0));
  NNC_ASSIGN_OR_RETURN(ResizeAttrs a, resize::readResizeAttrs(node));
  double extrapolation = node.getFloat("extrapolation_value", 0.0);

  // The roi, scales and sizes must be known now; sizes (with the stretch policy) can be read
  // off the static result shape.
  auto constOperand = [&](size_t i, const char *what) -> Expected<const Tensor *> {
    if (!node.operand(i))
      return nullptr;
    if (const Tensor *c = node.constantOperand(i))
      return c;
    if (numElementsOf(extentsOf(node.operand(i))) == 0)
      return nullptr;
    return node.error("code generation needs the {} operand to be a constant", what);
  };
  const Tensor *roi = nullptr, *scales = nullptr, *sizes = nullptr;
  Tensor sizesFromShape;
  if (a.ctm == "tf_crop_and_resize") {
    NNC_ASSIGN_OR_RETURN(roi, constOperand(1, "roi"));
  }
  NNC_ASSIGN_OR_RETURN(scales, constOperand(2, "scales"));
  if (node.operand(3) && !node.constantOperand(3) &&
      numElementsOf(extentsOf(node.operand(3))) > 0 &&
      node.getString("keep_aspect_ratio_policy", "stretch") == "stretch") {
    std::vector<int64_t> axes(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      axes[i] = static_cast<int64_t>(i);
    if (node.hasAttr("axes"))
      axes = node.getInts("axes", {});
    std::vector<int64_t> sz;
    for (int64_t ax : axes)
      sz.push_back(outE[static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(in.size()) : ax)]);
    sizesFromShape =
        Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(sz.size())}, sz);
    sizes = &sizesFromShape;
  } else {
    NNC_ASSIGN_OR_RETURN(sizes, constOperand(3, "sizes"));
  }
  NNC_ASSIGN_OR_RETURN(ResizePlan plan, planResize(node, in, roi, scales, sizes));
  if (plan.out != outE)
    return node.error("planned output {} disagrees with the result shape {}",
                      extentsStr(plan.out), extentsStr(outE));
  int64_t outN = numElementsOf(outE);
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};

  size_t rank = in.size();
  std::vector<std::vector<AxisTaps>> taps;
  std::vector<AxisTable> tables(rank);
  int64_t idxSize = 0, wSize = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (in[d] == 0)
      return node.error("cannot resize an empty axis {}", d);
    taps.push_back(resize::resizeAxisTaps(a, in[d], outE[d], plan.scales[d], plan.roiStart[d],
                                          plan.roiEnd[d]));
    AxisTable &tb = tables[d];
    bool anyExtrapolate = false;
    for (int64_t o = 0; o < outE[d]; ++o) {
      const AxisTaps &at = taps[d][static_cast<size_t>(o)];
      anyExtrapolate = anyExtrapolate || at.extrapolate;
      tb.maxTaps = std::max<int64_t>(tb.maxTaps, static_cast<int64_t>(at.taps.size()));
      if (at.extrapolate || at.taps.size() != 1 || at.taps[0].index != o ||
          at.taps[0].weight != 1.0)
        tb.identity = false;
    }
    if (in[d] != outE[d])
      tb.identity = false;
    if (tb.identity)
      continue;
    (void)anyExtrapolate;
    tb.maxTaps = tapCount(a, plan.scales[d]);
    tb.tapOffset = wSize;
    wSize += outE[d] * tb.maxTaps;
    tb.flagOffset = -2; // assigned below, after all tap entries
  }
  idxSize = wSize;
  for (size_t d = 0; d < rank; ++d)
    if (tables[d].flagOffset == -2) {
      tables[d].flagOffset = idxSize;
      idxSize += outE[d];
    }

  Kernels kernels;
  int64_t iTab = 0, wTab = 1;
  if (wSize > 0) {
    // Kernel 1: the tables, computed per output coordinate with the interpreter's double
    // arithmetic (same operations in the same order, so the same bits).
    KernelBuilder kb(node, prefix + "_tables");
    int ib = kb.scratch(static_cast<int>(iTab), DType::I64, idxSize);
    int wb = kb.scratch(static_cast<int>(wTab), DType::F64, wSize);
    std::vector<Stmt> stores;
    for (size_t d = 0; d < rank; ++d) {
      const AxisTable &tb = tables[d];
      if (tb.identity)
        continue;
      stores.push_back(axisTableLoop(kb, a, in[d], outE[d], plan.scales[d], plan.roiStart[d],
                                     plan.roiEnd[d], tb.maxTaps, tb.tapOffset, tb.flagOffset,
                                     ib, wb));
    }
    kernels.push_back(kb.finish(kir::block(stores)));
  }

  // f32 with several axes resized: one pass per axis (separablePasses).
  std::vector<size_t> resized;
  for (size_t d = rank; d-- > 0;)
    if (!tables[d].identity)
      resized.push_back(d);
  if (t == DType::F32 && resized.size() >= 2) {
    separablePasses(node, prefix, in, outE, tables, resized, idxSize, wSize, extrapolation,
                    kernels);
    return kernels;
  }

  // Kernel 2: for each output element, the weighted sum over the product of the axes' taps.
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), yb = kb.result(0);
  int ib = wSize > 0 ? kb.scratch(static_cast<int>(iTab), DType::I64, idxSize) : -1;
  int wb = wSize > 0 ? kb.scratch(static_cast<int>(wTab), DType::F64, wSize) : -1;
  std::vector<int64_t> inStride = stridesOf(in), outStride = stridesOf(outE);
  Nest outer, tapN;
  std::vector<Expr> o(rank);
  for (size_t d = 0; d < rank; ++d)
    o[d] = outer.add(kb, outE[d], "o");
  Expr extrapolate = kir::intImm(0, DType::Bool);
  Expr weight, xIdx = i64(0);
  for (size_t d = 0; d < rank; ++d) {
    const AxisTable &tb = tables[d];
    if (tb.identity) {
      xIdx = kir::add(xIdx, kir::mul(o[d], i64(inStride[d])));
      continue;
    }
    if (tb.flagOffset >= 0)
      extrapolate = bor(extrapolate,
                        bnot(eq(kb.load(ib, kir::add(i64(tb.flagOffset), o[d])), i64(0))));
    Expr k = tapN.add(kb, tb.maxTaps, "k");
    Expr at = kir::add(i64(tb.tapOffset), kir::add(kir::mul(o[d], i64(tb.maxTaps)), k));
    Expr w = kb.load(wb, at);
    weight = weight ? kir::mul(weight, w) : w;
    xIdx = kir::add(xIdx, kir::mul(kb.load(ib, at), i64(inStride[d])));
  }
  Expr yIdx = flatIndex(o, outStride);
  Expr xval = kir::cast(kb.load(xb, xIdx), DType::F64);
  Stmt body;
  if (!weight) {
    body = kb.store(yb, yIdx, kb.load(xb, xIdx)); // every axis is left alone: a copy
  } else {
    std::string v = kb.freshName("v");
    Expr vE = kir::var(v, DType::F64);
    Expr term = kir::select(eq(weight, fc(0, DType::F64)), fc(0, DType::F64),
                            kir::mul(weight, xval));
    Expr result = kir::select(extrapolate, fc(extrapolation, DType::F64), vE);
    body = kir::block({kir::decl(v, DType::F64, fc(0, DType::F64)),
                       tapN.wrap(kir::assign(v, kir::add(vE, term))),
                       kb.store(yb, yIdx, fromF64(result, t))});
  }
  int64_t tapCount = 1;
  for (const AxisTable &tb : tables)
    if (!tb.identity)
      tapCount *= tb.maxTaps;
  kernels.push_back(kb.finish(outer.wrap(body), parallelOuter(outer, outN * tapCount)));
  return kernels;
}

} // namespace

void registerResizeLowerer(LowererTable &t) { t[OpKind::Resize] = lowerResize; }

} // namespace nnc::lower
