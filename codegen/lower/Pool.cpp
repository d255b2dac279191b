// Lowerers of the pooling window ops and lrn: max_pool and avg_pool (direct loop nests, or one
// pass per axis for 3-D and larger f32 pools) and lrn. Semantics follow
// runtime/interp/LocalWindow.cpp.
#include <algorithm>
#include <limits>

#include "NNLowering.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

// ---- pooling -----------------------------------------------------------------------------------

struct PoolGeometry {
  std::vector<WindowAxis> axes;
  Extents inSpatial, outSpatial;
  int64_t inSize = 1, outSize = 1, planes = 1, kernelSize = 1;
};

Expected<PoolGeometry> poolGeometry(const Node &node, const Extents &xs) {
  if (xs.size() < 3)
    return node.error("input must have rank >= 3 (N, C, spatial...), got {}", extentsStr(xs));
  size_t n = xs.size() - 2;
  std::vector<int64_t> ks = node.getInts("kernel_shape", {});
  if (ks.size() != n)
    return node.error("kernel_shape has {} values for {} spatial axes", ks.size(), n);
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  PoolGeometry g;
  g.planes = xs[0] * xs[1];
  for (size_t i = 0; i < n; ++i) {
    NNC_ASSIGN_OR_RETURN(WindowAxis ax, windowAxis(node, a, i, xs[i + 2], ks[i]));
    g.axes.push_back(ax);
    g.inSpatial.push_back(xs[i + 2]);
    g.outSpatial.push_back(ax.out);
    g.inSize *= xs[i + 2];
    g.outSize *= ax.out;
    g.kernelSize *= ks[i];
  }
  return g;
}

/// One step of a max pool's running maximum without branches: `best` (which starts at NaN
/// for floats, at the lowest value otherwise) becomes v when v > best or best is NaN. NaNs are
/// thus skipped unless every tap is NaN, as ONNX MaxPool's reference does.
Expr maxPoolStep(Expr v, Expr best, bool isFloatType) {
  Expr take = isFloatType ? bor(gt(v, best), isNaN(best)) : gt(v, best);
  return kir::select(take, v, best);
}

/// ceil(max(v, 0) / b) for b > 0: the first tap of a window at or past input position 0 (v =
/// -start), or the taps before the input's end (v = in - start), per dilation b.
Expr ceilDivPos(Expr v, int64_t b) {
  return kir::div(kir::add(kir::max(v, i64(0)), i64(b - 1)), i64(b));
}

/// The pass of separablePool over the last axis (window `a`) of `cur` into `next`: per
/// output column, the taps inside the input, which for the columns whose window lies wholly
/// inside (all but a few at the row ends) are all K of them: a static loop, vectorized
/// across the columns.
kir::Kernel lastAxisPoolPass(KernelBuilder &kb, const WindowAxis &a, const Extents &cur,
                             const Extents &next, int src, int dst, bool isMax, bool includePad) {
  const DType t = DType::F32;
  size_t last = next.size() - 1;
  std::vector<int64_t> srcStride = stridesOf(cur), dstStride = stridesOf(next);
  Nest outer;
  std::vector<Expr> o(next.size());
  for (size_t x = 0; x < last; ++x)
    o[x] = outer.add(kb, next[x], "o");
  Expr srcRow = i64(0), dstRow = i64(0);
  for (size_t x = 0; x < last; ++x) {
    srcRow = kir::add(srcRow, kir::mul(o[x], i64(srcStride[x])));
    dstRow = kir::add(dstRow, kir::mul(o[x], i64(dstStride[x])));
  }
  std::vector<Stmt> row;
  srcRow = kb.bind(row, "srow", DType::I64, srcRow);
  dstRow = kb.bind(row, "drow", DType::I64, dstRow);
  // Output column ow; `inside`: its window lies wholly inside the input.
  auto column = [&](Expr ow, bool inside) -> Stmt {
    std::vector<Stmt> body;
    Expr start =
        kb.bind(body, "start", DType::I64, kir::sub(kir::mul(ow, i64(a.stride)), i64(a.padBegin)));
    Expr lo =
        inside ? i64(0)
               : kb.bind(body, "lo", DType::I64, ceilDivPos(kir::sub(i64(0), start), a.dilation));
    Expr count =
        inside ? i64(a.kernel)
               : kb.bind(
                     body, "count", DType::I64,
                     kir::max(kir::sub(kir::min(i64(a.kernel),
                                                ceilDivPos(kir::sub(i64(a.in), start), a.dilation)),
                                       lo),
                              i64(0)));
    Expr divisor =
        includePad
            ? kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in + a.padEnd), start), a.dilation))
            : count;
    Expr init = isMax ? (inside ? fc(std::numeric_limits<double>::quiet_NaN(), t)
                                : kir::select(kir::lt(count, i64(1)), lowestOf(t),
                                              fc(std::numeric_limits<double>::quiet_NaN(), t)))
                      : fc(0, t);
    std::string acc = kb.freshName("acc"), tv = kb.freshName("t");
    Expr accE = kir::var(acc, t);
    Expr pos = kir::add(start, kir::mul(kir::add(lo, kir::var(tv)), i64(a.dilation)));
    Expr v = kb.load(src, kir::add(srcRow, pos));
    body.push_back(kir::decl(acc, t, init));
    body.push_back(kir::forLoop(
        tv, count, kir::assign(acc, isMax ? maxPoolStep(v, accE, true) : kir::add(accE, v))));
    Expr result = isMax ? accE : kir::op(OpKind::Div, {accE, kir::cast(divisor, t)});
    body.push_back(kb.store(dst, kir::add(dstRow, ow), result));
    return kir::block(body);
  };
  // Columns [first, end) have their windows inside: start >= 0 and start + (K-1)*dil < in.
  int64_t OW = next[last];
  int64_t first = std::min<int64_t>(OW, (a.padBegin + a.stride - 1) / a.stride);
  int64_t reach = a.in - 1 - (a.kernel - 1) * a.dilation + a.padBegin;
  int64_t end = reach < 0 ? first : std::max(first, std::min<int64_t>(OW, reach / a.stride + 1));
  kir::Schedule sched = parallelOuter(outer, numElementsOf(next) * a.kernel);
  auto range = [&](int64_t from, int64_t to, bool inside) {
    std::string jv = kb.freshName("c");
    if (inside)
      sched.steps.push_back({kir::ScheduleStep::Vectorize, jv, 0, {}});
    row.push_back(
        kir::forLoop(jv, i64(to - from), column(kir::add(i64(from), kir::var(jv)), inside)));
  };
  if (first > 0)
    range(0, first, false);
  if (end > first)
    range(first, end, true);
  if (OW > end)
    range(end, OW, false);
  return kb.finish(outer.wrap(kir::block(row)), sched);
}

/// An f32 pool over 3 or more spatial axes (max with one result, or average) as one pass per
/// axis, innermost first, each a kernel pooling one axis of the previous pass's result (the
/// input first) into f32 scratch, the last into the result. Max and sum over a box are max
/// and sum over its axes in turn (maxPoolStep's max, which skips NaNs unless all are, is
/// associative), and a box's tap count is the product of its axes' (each pass divides by its
/// own). A pass over an outer axis runs its taps along whole rows of the last axis, which
/// vectorize: per tap, row = step(row, input row). S3D's 3x3x3 max pools took the generic
/// loop, a scalar window walk per output (27 taps with bounds per tap). An axis the pool
/// leaves alone takes no pass.
Kernels separablePool(const Node &node, const std::string &prefix, const PoolGeometry &geo,
                      bool isMax, bool includePad) {
  size_t D = geo.axes.size(), last = D; // extents: [planes, spatial...]
  Extents cur{geo.planes};
  cur.insert(cur.end(), geo.inSpatial.begin(), geo.inSpatial.end());
  std::vector<size_t> axes;
  for (size_t d = D; d-- > 0;) {
    const WindowAxis &a = geo.axes[d];
    if (a.kernel != 1 || a.stride != 1 || a.padBegin != 0 || a.padEnd != 0 || a.out != a.in)
      axes.push_back(d);
  }
  const DType t = DType::F32;
  Kernels kernels;
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t d = axes[i], e = d + 1; // e: the axis in the extents
    bool lastPass = i + 1 == axes.size();
    const WindowAxis &a = geo.axes[d];
    Extents next = cur;
    next[e] = a.out;
    KernelBuilder kb(node, lastPass ? prefix : prefix + "_axis" + std::to_string(d));
    int src =
        i == 0 ? kb.operand(0) : kb.scratch(static_cast<int>((i - 1) % 2), t, numElementsOf(cur));
    int dst = lastPass ? kb.result(0) : kb.scratch(static_cast<int>(i % 2), t, numElementsOf(next));
    std::vector<int64_t> srcStride = stridesOf(cur), dstStride = stridesOf(next);
    if (e == last) {
      kernels.push_back(lastAxisPoolPass(kb, a, cur, next, src, dst, isMax, includePad));
      cur = next;
      continue;
    }
    // An outer axis: whole rows of the last axis per tap (one column: element by element).
    bool rows = next[last] > 1;
    Nest outer;
    std::vector<Expr> o(next.size());
    for (size_t x = 0; x < next.size(); ++x)
      if (!rows || x != last)
        o[x] = outer.add(kb, next[x], "o");
    std::vector<Stmt> body;
    auto bind = [&](const char *name, DType bt, Expr v) { return kb.bind(body, name, bt, v); };
    // Taps of output o along this axis inside the input: [lo, hi) (LocalWindow's rule).
    Expr start =
        bind("start", DType::I64, kir::sub(kir::mul(o[e], i64(a.stride)), i64(a.padBegin)));
    Expr lo = bind("lo", DType::I64, ceilDivPos(kir::sub(i64(0), start), a.dilation));
    Expr hi = kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in), start), a.dilation));
    Expr count = bind("count", DType::I64, kir::max(kir::sub(hi, lo), i64(0)));
    Expr divisor = count;
    if (includePad)
      divisor =
          kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in + a.padEnd), start), a.dilation));
    // Max starts from NaN (the first tap replaces it), or from the lowest value when no tap
    // is inside; a sum from 0.
    Expr init = isMax ? kir::select(kir::lt(count, i64(1)), lowestOf(t),
                                    fc(std::numeric_limits<double>::quiet_NaN(), t))
                      : fc(0, t);
    init = bind("init", t, init);
    Expr srcBase = i64(0), dstBase = i64(0);
    for (size_t x = 0; x < next.size(); ++x) {
      if (rows && x == last)
        continue;
      dstBase = kir::add(dstBase, kir::mul(o[x], i64(dstStride[x])));
      if (x != e)
        srcBase = kir::add(srcBase, kir::mul(o[x], i64(srcStride[x])));
    }
    srcBase = bind("sbase", DType::I64, srcBase);
    dstBase = bind("dbase", DType::I64, dstBase);
    std::string tv = kb.freshName("t");
    Expr pos = kir::add(start, kir::mul(kir::add(lo, kir::var(tv)), i64(a.dilation)));
    Expr from = kir::add(srcBase, kir::mul(pos, i64(srcStride[e])));
    auto step = [&](Expr acc, Expr v) {
      return isMax ? maxPoolStep(v, acc, true) : kir::add(acc, v);
    };
    auto finish = [&](Expr acc) {
      return isMax ? acc : kir::op(OpKind::Div, {acc, kir::cast(divisor, t)});
    };
    kir::Schedule sched = parallelOuter(outer, numElementsOf(next) * a.kernel);
    if (rows) {
      // Per tap, the whole row: dst row = step(dst row, src row).
      auto rowLoop = [&](const std::function<Stmt(Expr)> &f) {
        std::string jv = kb.freshName("j");
        sched.steps.push_back({kir::ScheduleStep::Vectorize, jv, 0, {}});
        return kir::forLoop(jv, i64(next[last]), f(kir::var(jv)));
      };
      body.push_back(rowLoop([&](Expr j) { return kb.store(dst, kir::add(dstBase, j), init); }));
      body.push_back(kir::forLoop(
          tv, count, rowLoop([&](Expr j) {
            Expr at = kir::add(dstBase, j);
            return kb.store(dst, at, step(kb.load(dst, at), kb.load(src, kir::add(from, j))));
          })));
      if (!isMax)
        body.push_back(rowLoop([&](Expr j) {
          Expr at = kir::add(dstBase, j);
          return kb.store(dst, at, finish(kb.load(dst, at)));
        }));
    } else {
      std::string acc = kb.freshName("acc");
      Expr accE = kir::var(acc, t);
      body.push_back(kir::decl(acc, t, init));
      body.push_back(kir::forLoop(tv, count, kir::assign(acc, step(accE, kb.load(src, from)))));
      body.push_back(kb.store(dst, dstBase, finish(accE)));
    }
    kernels.push_back(kb.finish(outer.wrap(kir::block(body)), sched));
    cur = next;
  }
  return kernels;
}

Expected<Kernels> lowerPool(const Node &node, const std::string &prefix, bool isMax) {
  const Value *xv = node.operand(0);
  DType t = xv->dtype();
  if (isMax ? !isNumeric(t) : !isFloat(t))
    return node.error("expects a {} dtype, got {}", isMax ? "numeric" : "float", dtypeName(t));
  Extents xs = extentsOf(xv);
  NNC_ASSIGN_OR_RETURN(PoolGeometry geo, poolGeometry(node, xs));
  int64_t outN = geo.planes * geo.outSize;
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  size_t D = geo.axes.size();
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial);
  // Lanes: an innermost axis the window does not pool (kernel 1, stride 1, no pad; the
  // channel lanes of the blocked NCHWc layout, or the channels of a channels-last one), of at
  // most 16 or a multiple of 16 (then in chunks of 16). Each output row of lanes then walks
  // the window once with one accumulator per lane, which vectorizes; a window loop per
  // element stays scalar.
  const WindowAxis &la = geo.axes.back();
  bool lanes = D >= 2 && la.kernel == 1 && la.stride == 1 && la.padBegin == 0 &&
               la.padEnd == 0 && la.out == la.in && la.in >= 4 &&
               (la.in <= 16 || la.in % 16 == 0) &&
               (isMax ? node.numResults() == 1 : accType(t, /*wide=*/false) == t);
  const int64_t L = std::min<int64_t>(la.in, 16);
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), yb = kb.result(0);
  Nest outer, taps;
  Expr p = outer.add(kb, geo.planes, "p");
  std::vector<Expr> o(D), pos(D), inCount(D), padCount(D);
  std::vector<Expr> outTerms{kir::mul(p, i64(geo.outSize))};
  for (size_t d = 0; d < D; ++d) {
    // The lane axis contributes its own loop variable below (here the chunk's first lane).
    if (lanes && d + 1 == D)
      o[d] = la.in == L ? i64(0) : kir::mul(outer.add(kb, la.in / L, "lc"), i64(L));
    else
      o[d] = outer.add(kb, geo.outSpatial[d], "o");
    outTerms.push_back(kir::mul(o[d], i64(outStride[d])));
  }
  // Only the taps inside the input are visited (like the interpreter, so a huge kernel or pad
  // costs nothing): along axis d, the window starting at input position `start` covers taps
  // [lo, hi) with lo = ceil(max(-start, 0) / dil), hi = min(K, ceil(max(in - start, 0) / dil)).
  for (size_t d = 0; d < D; ++d) {
    const WindowAxis &a = geo.axes[d];
    Expr start = kir::sub(kir::mul(o[d], i64(a.stride)), i64(a.padBegin));
    int64_t maxPos = (a.out - 1) * a.stride - a.padBegin + (a.kernel - 1) * a.dilation;
    Expr k;
    if (a.padBegin == 0 && maxPos < a.in) {
      k = taps.add(kb, a.kernel, "k");
      inCount[d] = i64(a.kernel);
    } else {
      Expr lo = ceilDivPos(kir::sub(i64(0), start), a.dilation);
      Expr hi = kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in), start), a.dilation));
      inCount[d] = kir::max(kir::sub(hi, lo), i64(0));
      k = kir::add(lo, taps.addDynamic(kb, inCount[d], "t"));
    }
    padCount[d] = maxPos < a.in + a.padEnd
                      ? i64(a.kernel)
                      : kir::min(i64(a.kernel), ceilDivPos(kir::sub(i64(a.in + a.padEnd), start),
                                                           a.dilation));
    pos[d] = kir::add(start, kir::mul(k, i64(a.dilation)));
  }
  std::vector<Expr> inTerms{kir::mul(p, i64(geo.inSize))};
  for (size_t d = 0; d < D; ++d)
    inTerms.push_back(kir::mul(pos[d], i64(inStride[d])));
  Expr xIdx = sumOf(inTerms);
  Expr yIdx = sumOf(outTerms);
  int64_t work = outN * geo.kernelSize;
  // Taps of a window: those inside the input, or (includePad) inside the padded input too.
  bool dynamicTaps = false;
  for (size_t d = 0; d < D; ++d)
    dynamicTaps |= inCount[d]->kind != kir::ExprKind::IntImm;
  auto windowCount = [&](bool includePad) {
    Expr count = i64(1);
    for (size_t d = 0; d < D; ++d)
      count = kir::mul(count, includePad ? padCount[d] : inCount[d]);
    return count;
  };
  bool includePad = !isMax && node.getInt("count_include_pad", 0) != 0;

  // 3-D and beyond, f32: one pass per axis.
  if (!lanes && D >= 3 && t == DType::F32 && (isMax ? node.numResults() == 1 : true))
    return separablePool(node, prefix, geo, isMax, includePad);
  if (lanes) {
    // One accumulator local per lane, updated lane by lane in each tap: LLVM packs the
    // lanes' loads and selects into vectors (SLP), and nothing goes through memory.
    Expr count = windowCount(includePad);
    DType ct = isMax ? computeType(t) : t;
    bool fl = isFloat(ct);
    std::vector<std::string> acc(L);
    std::vector<Stmt> body, step;
    // Max: maxPoolStep from NaN; a window with no tap gives the lowest value.
    Expr init = isMax ? (fl ? fc(std::numeric_limits<double>::quiet_NaN(), ct) : lowestOf(ct))
                      : fc(0, ct);
    for (int64_t l = 0; l < L; ++l) {
      acc[l] = kb.freshName("acc");
      Expr a = kir::var(acc[l], ct);
      body.push_back(kir::decl(acc[l], ct, init));
      Expr v = kir::cast(kb.load(xb, kir::add(xIdx, i64(l))), ct);
      Expr next = isMax ? maxPoolStep(v, a, fl) : kir::add(a, v);
      step.push_back(kir::assign(acc[l], next));
    }
    body.push_back(taps.wrap(kir::block(step)));
    for (int64_t l = 0; l < L; ++l) {
      Expr a = kir::var(acc[l], ct), r = a;
      if (isMax && fl && dynamicTaps)
        r = kir::select(kir::lt(count, i64(1)), lowestOf(ct), a);
      if (!isMax)
        r = kir::op(OpKind::Div, {a, kir::cast(count, ct)});
      body.push_back(kb.store(yb, kir::add(yIdx, i64(l)), kir::cast(r, t)));
    }
    return Kernels{kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, work))};
  }

  if (isMax) {
    bool withIndices = node.numResults() > 1;
    bool colMajor = node.getInt("storage_order", 0) == 1;
    DType ct = computeType(t);
    bool fl = isFloat(ct);
    std::string best = kb.freshName("best"), bi = kb.freshName("bi"), any = kb.freshName("any"),
                nan = kb.freshName("nan"), v = kb.freshName("v");
    Expr bestE = kir::var(best, ct), anyE = kir::var(any, DType::Bool),
         nanE = kir::var(nan, DType::Bool), vE = kir::var(v, ct);
    Expr idx = xIdx;
    if (colMajor) {
      std::vector<Expr> terms{kir::mul(p, i64(geo.inSize))};
      int64_t s = 1;
      for (size_t d = 0; d < D; ++d) {
        terms.push_back(kir::mul(pos[d], i64(s)));
        s *= geo.inSpatial[d];
      }
      idx = sumOf(terms);
    }
    if (!withIndices) {
      // Branch-free (maxPoolStep), so the loop over outputs vectorizes; a window with no tap
      // gives the lowest value. With indices, the
      // flags below also track where the maximum is.
      Expr count = windowCount(false);
      Stmt tapS = taps.wrap(kir::block({kir::decl(v, ct, kir::cast(kb.load(xb, xIdx), ct)),
                                        kir::assign(best, maxPoolStep(vE, bestE, fl))}));
      Expr result = bestE;
      if (fl && dynamicTaps)
        result = kir::select(kir::lt(count, i64(1)), lowestOf(ct), bestE);
      Stmt body = kir::block(
          {kir::decl(best, ct,
                     fl ? fc(std::numeric_limits<double>::quiet_NaN(), ct) : lowestOf(ct)),
           tapS, kb.store(yb, yIdx, kir::cast(result, t))});
      return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, work))};
    }
    // Branch-free, so the loop over outputs vectorizes: a tap is taken when it is the first
    // non-NaN one or larger than the best so far (the first of equal maxima keeps its index);
    // NaNs are only noted (an all-NaN window gives NaN).
    std::string take = kb.freshName("take");
    Expr takeE = kir::var(take, DType::Bool);
    Expr takeV = bor(bnot(anyE), gt(vE, bestE));
    if (fl)
      takeV = kir::land(bnot(isNaN(vE)), takeV);
    std::vector<Stmt> update{kir::decl(v, ct, kir::cast(kb.load(xb, xIdx), ct)),
                             kir::decl(take, DType::Bool, takeV),
                             kir::assign(best, kir::select(takeE, vE, bestE)),
                             kir::assign(bi, kir::select(takeE, idx, kir::var(bi))),
                             kir::assign(any, bor(anyE, takeE))};
    if (fl)
      update.push_back(kir::assign(nan, bor(nanE, isNaN(vE))));
    Stmt tapS = taps.wrap(kir::block(update));
    std::vector<Stmt> body{kir::decl(best, ct, lowestOf(ct)),
                           kir::decl(any, DType::Bool, kir::intImm(0, DType::Bool))};
    if (withIndices)
      body.push_back(kir::decl(bi, DType::I64, i64(-1)));
    if (fl)
      body.push_back(kir::decl(nan, DType::Bool, kir::intImm(0, DType::Bool)));
    body.push_back(tapS);
    Expr result = bestE;
    if (fl)
      result = kir::select(kir::land(bnot(anyE), nanE),
                           fc(std::numeric_limits<double>::quiet_NaN(), ct), bestE);
    body.push_back(kb.store(yb, yIdx, kir::cast(result, t)));
    if (withIndices)
      body.push_back(kb.store(kb.result(1), yIdx, kir::var(bi)));
    // Vectorized across output positions: scalar, LLVM turns the selects back into branches,
    // which random data mispredicts (many times the cost of the max alone on LeNet's 2x2
    // pools).
    kir::Schedule sched = parallelOuter(outer, work);
    if (!dynamicTaps && !outer.empty() && outer.extent(outer.loops.size() - 1) >= 4)
      sched.steps.push_back({kir::ScheduleStep::Vectorize, outer.loops.back().first, 0, {}});
    return Kernels{kb.finish(outer.wrap(kir::block(body)), sched)};
  }

  DType acc = accType(t, /*wide=*/false);
  std::string sum = kb.freshName("sum");
  Expr sumE = kir::var(sum, acc);
  Expr count = windowCount(includePad);
  Stmt body = kir::block(
      {kir::decl(sum, acc, fc(0, acc)),
       taps.wrap(kir::assign(sum, kir::add(sumE, kir::cast(kb.load(xb, xIdx), acc)))),
       kb.store(yb, yIdx,
                kir::cast(kir::op(OpKind::Div, {sumE, kir::cast(count, acc)}), t))});
  return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, work))};
}

// ---- lrn ---------------------------------------------------------------------------------------

Expected<Kernels> lowerLRN(const Node &node, const std::string &prefix) {
  const Value *xv = node.operand(0);
  DType t = xv->dtype();
  Extents xs = extentsOf(xv);
  if (!isFloat(t) || xs.size() < 2)
    return node.error("expects a float input of rank >= 2, got {} {}", dtypeName(t),
                      extentsStr(xs));
  int64_t size = node.getInt("size", 0);
  if (size < 1)
    return node.error("size {} must be >= 1", size);
  double alpha = node.getFloat("alpha", 1e-4), beta = node.getFloat("beta", 0.75),
         bias = node.getFloat("bias", 1.0);
  int64_t N = xs[0], C = xs[1], inner = 1;
  for (size_t d = 2; d < xs.size(); ++d)
    inner *= xs[d];
  if (N * C * inner == 0)
    return Kernels{emptyKernel(node, prefix)};
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  const DType ct = DType::F64;
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), yb = kb.result(0);
  Nest outer, win;
  Expr n = outer.add(kb, N, "n"), c = outer.add(kb, C, "c"), i = outer.add(kb, inner, "i");
  Expr lo = kir::max(kir::sub(c, i64(before)), i64(0));
  Expr hi = kir::min(kir::add(c, i64(after)), i64(C - 1));
  Expr tt = win.addDynamic(kb, kir::max(kir::add(kir::sub(hi, lo), i64(1)), i64(0)), "t");
  Expr cc = kir::add(lo, tt);
  std::string sq = kb.freshName("sq"), v = kb.freshName("v");
  Expr sqE = kir::var(sq, ct), vE = kir::var(v, ct);
  Expr nC = kir::mul(n, i64(C));
  Stmt acc = win.wrap(kir::block(
      {kir::decl(v, ct, kir::cast(kb.load(xb, kir::add(kir::mul(kir::add(nC, cc), i64(inner)), i)),
                                  ct)),
       kir::assign(sq, kir::add(sqE, kir::mul(vE, vE)))}));
  Expr at = kir::add(kir::mul(kir::add(nC, c), i64(inner)), i);
  Expr denom = kir::op(OpKind::Pow, {kir::add(fc(bias, ct), kir::mul(fc(alpha / static_cast<double>(size), ct), sqE)),
                                     fc(beta, ct)});
  Stmt body = kir::block(
      {kir::decl(sq, ct, fc(0, ct)), acc,
       kb.store(yb, at, kir::cast(kir::op(OpKind::Div, {kir::cast(kb.load(xb, at), ct), denom}), t))});
  return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, N * C * inner * size))};
}

} // namespace

void registerPoolLowerers(LowererTable &t) {
  t[OpKind::MaxPool] = [](const Node &n, const std::string &p) { return lowerPool(n, p, true); };
  t[OpKind::AvgPool] = [](const Node &n, const std::string &p) { return lowerPool(n, p, false); };
  t[OpKind::LRN] = lowerLRN;
}

} // namespace nnc::lower
