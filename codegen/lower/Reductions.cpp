// Lowerers of the reductions (reduce_*), arg-reductions, cumsum/cumprod and topk; registers the NN and
// resize lowerers (NN.cpp, Resize.cpp) too. Semantics follow runtime/interp/Reductions.cpp.
#include <cmath>
#include <limits>

#include "NNLowering.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

namespace nnl {

kir::Expr lowestOf(DType t) {
  if (isFloat(t))
    return fc(-std::numeric_limits<double>::infinity(), t);
  if (t == DType::Bool)
    return kir::intImm(0, t);
  if (isUnsignedInteger(t))
    return kir::intImm(0, t);
  int bits = static_cast<int>(dtypeSize(t)) * 8;
  return kir::intImm(static_cast<int64_t>(uint64_t(1) << (bits - 1)) * (bits == 64 ? 1 : -1), t);
}

kir::Expr highestOf(DType t) {
  if (isFloat(t))
    return fc(std::numeric_limits<double>::infinity(), t);
  if (t == DType::Bool)
    return kir::intImm(1, t);
  int bits = static_cast<int>(dtypeSize(t)) * 8;
  if (isUnsignedInteger(t))
    return kir::intImm(-1, t); // all ones, wrapped to the type
  return kir::intImm(static_cast<int64_t>((uint64_t(1) << (bits - 1)) - 1), t);
}

} // namespace nnl

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

/// The input dims after dropping unit dims and merging neighbours of the same kind.
struct DimGroup {
  int64_t extent;
  bool reduced;
  int64_t inStride;
  int64_t outStride = 0; ///< Kept groups: stride in the output.
};

std::vector<DimGroup> groupDims(const Extents &in, const std::vector<bool> &reduced) {
  std::vector<int64_t> st = stridesOf(in);
  std::vector<DimGroup> g;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1)
      continue;
    if (!g.empty() && g.back().reduced == reduced[d] && in[d] != 0 && g.back().extent != 0) {
      g.back().extent *= in[d];
      g.back().inStride = st[d];
    } else {
      g.push_back({in[d], static_cast<bool>(reduced[d]), st[d]});
    }
  }
  int64_t s = 1;
  for (size_t i = g.size(); i-- > 0;)
    if (!g[i].reduced) {
      g[i].outStride = s;
      s *= g[i].extent;
    }
  return g;
}

} // namespace

int64_t workGroupTreeWidth(int64_t count, const GpuTarget &gpu) {
  int64_t limit = std::min<int64_t>({gpu.maxWorkGroupSize, gpu.maxWorkItemSizes[0], 256});
  int64_t g = 1;
  while (g * 2 <= limit && g * 2 * 4 <= count)
    g *= 2;
  return g >= 2 ? g : 0;
}

namespace {

/// The reduction's work-items per output on an OpenCL device (0: not a work-group tree): a
/// reduction over one contiguous run of `count` innermost elements per output (the kept
/// dims outside), long enough that a group's items each sum a few of them.
int64_t workGroupTreeSize(const std::vector<DimGroup> &groups, int64_t count,
                          const GpuTarget &gpu) {
  if (groups.empty() || !groups.back().reduced || count < 64)
    return 0;
  for (size_t d = 0; d + 1 < groups.size(); ++d)
    if (groups[d].reduced)
      return 0;
  return workGroupTreeWidth(count, gpu);
}

/// The tunable problem of a work-group tree: `rows` outputs of `count` elements each,
/// accumulated in `acc`.
tuning::Problem reduceOpenCLProblem(DType acc, int64_t rows, int64_t count) {
  tuning::Problem p;
  p.kind = "reduce_opencl";
  p.signature = fmt::format("reduce_opencl {} rows{} count{}", dtypeName(acc), rows, count);
  p.dims = {rows, count, static_cast<int64_t>(dtypeSize(acc))};
  p.flops = double(rows) * double(count);
  return p;
}

/// One step of a float maximum or minimum that vectorizes: `acc` takes x ignoring NaN (the
/// target's max/min instructions, in vector lanes) and the i32 `nanFlag` becomes 1 once x is
/// NaN, which the caller then makes the result. (A NaN-propagating compare chain stays
/// scalar.)
Stmt extremumStep(const std::string &acc, const std::string &nanFlag, DType t, const Expr &x,
                  bool isMax) {
  Expr one = kir::intImm(1, DType::I32), none = kir::intImm(0, DType::I32);
  return kir::block(
      {kir::accumulateIgnoringNaN(acc, t, x, isMax),
       kir::accumulate(nanFlag,
                       kir::max(kir::var(nanFlag, DType::I32), kir::select(isNaN(x), one, none)))});
}

/// The reduction a reduce_* node computes.
ReduceKind reduceKindOf(const Node &node) {
  switch (node.kind()) {
  case OpKind::ReduceSum:
    return ReduceKind::Sum;
  case OpKind::ReduceMean:
    return ReduceKind::Mean;
  case OpKind::ReduceMax:
    return ReduceKind::Max;
  case OpKind::ReduceMin:
    return ReduceKind::Min;
  default:
    return ReduceKind::Prod;
  }
}

/// Lowers a reduce_*; with opts->gpu set, contiguous rows become work-group trees whose size
/// comes from reduceOpenCLSpace(). With `perOutput` (an OpenCL device, lowerReducePerOutput),
/// a reduction that keeps the innermost dim is one accumulator per output walking the reduced
/// dims, so that the outputs are the grid.
Expected<Kernels> lowerReduce(const Node &node, const std::string &prefix, ReduceKind kind,
                              const tuning::LowerOptions *opts = nullptr, bool perOutput = false) {
  const GpuTarget *gpu = opts && opts->gpu ? &*opts->gpu : nullptr;
  const Value *x = node.operand(0);
  Extents in = extentsOf(x);
  int64_t rank = static_cast<int64_t>(in.size());
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                       normalizeAxes(node.getInts("axes"), rank, node, "axes"));
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes)
    reduced[static_cast<size_t>(a)] = true;
  DType t = x->dtype();
  bool isBool = t == DType::Bool;
  bool minMax = kind == ReduceKind::Max || kind == ReduceKind::Min;
  if (!isNumeric(t) && !(isBool && minMax))
    return node.error("operand must have a numeric type{}, got {}", minMax ? " or bool" : "",
                      dtypeName(t));
  int64_t outN = numElementsOf(extentsOf(node.result(0)));
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[static_cast<size_t>(d)])
      count *= in[static_cast<size_t>(d)];

  // Sums and products accumulate wide; a maximum or minimum is one of the values, exact in
  // the operand's own compute type (in f64 the row ran scalar, converting every element).
  DType acc = isBool ? DType::Bool : minMax ? computeType(t) : accType(t, /*wide=*/true);
  Expr init;
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean:
    init = fc(0, acc);
    break;
  case ReduceKind::Prod:
    init = fc(1, acc);
    break;
  case ReduceKind::Max:
    init = lowestOf(isFloat(acc) ? acc : t);
    break;
  case ReduceKind::Min:
    init = highestOf(isFloat(acc) ? acc : t);
    break;
  }
  auto combine = [&](Expr a, Expr v) -> Expr {
    switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      return kir::add(a, v);
    case ReduceKind::Prod:
      return kir::mul(a, v);
    case ReduceKind::Max:
      return isBool ? bor(a, v) : kir::max(a, v);
    case ReduceKind::Min:
      return isBool ? kir::land(a, v) : kir::min(a, v);
    }
    return a;
  };
  auto finalize = [&](Expr a) -> Expr {
    if (kind != ReduceKind::Mean)
      return kir::cast(a, t);
    if (isFloat(acc))
      return kir::cast(kir::op(OpKind::Div, {a, fc(static_cast<double>(count), acc)}), t);
    if (count == 0)
      return fc(0, t);
    return kir::cast(kir::op(OpKind::Div, {kir::cast(a, DType::F64),
                                           fc(static_cast<double>(count), DType::F64)}),
                     t);
  };

  std::vector<DimGroup> groups = groupDims(in, reduced);
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), ob = kb.result(0);
  bool innerKept = !groups.empty() && !groups.back().reduced;
  bool anyReduced = false;
  for (const DimGroup &g : groups)
    anyReduced = anyReduced || g.reduced;
  int64_t work = numElementsOf(in);

  // A short kept row under a reduced dim ([kept..., reduced, kept K <= 16]: a global pool of
  // channel blocks [C/b, H*W, b], or a reduction over rows of a narrow matrix): one named
  // accumulator per element of the row, so the K running sums live in registers across the
  // reduced loop (through a scratch row they were a chain of store-to-load forwards, one
  // scalar add per element).
  size_t G = groups.size();
  bool registerRow =
      !perOutput && innerKept && G >= 2 && groups[G - 2].reduced && groups[G - 1].extent <= 16;
  for (size_t d = 0; registerRow && d + 2 < G; ++d)
    registerRow = !groups[d].reduced;
  if (registerRow) {
    Nest outer;
    Expr iBase = i64(0), oBase = i64(0);
    for (size_t d = 0; d + 2 < G; ++d) {
      Expr v = outer.add(kb, groups[d].extent);
      iBase = kir::add(iBase, kir::mul(v, i64(groups[d].inStride)));
      oBase = kir::add(oBase, kir::mul(v, i64(groups[d].outStride)));
    }
    const DimGroup &red = groups[G - 2], &row = groups[G - 1];
    std::vector<Stmt> body, adds, stores;
    Nest walk;
    Expr r = walk.add(kb, red.extent);
    for (int64_t j = 0; j < row.extent; ++j) {
      std::string a = kb.freshName("acc");
      Expr av = kir::var(a, acc);
      body.push_back(kir::decl(a, acc, init));
      Expr at = kir::add(kir::add(iBase, kir::mul(r, i64(red.inStride))), i64(j * row.inStride));
      adds.push_back(kir::accumulate(a, combine(av, kir::cast(kb.load(xb, at), acc))));
      stores.push_back(kb.store(ob, kir::add(oBase, i64(j * row.outStride)), finalize(av)));
    }
    // One accumulator per lane of the row: the SLP vectorizer packs them across the row, and
    // the loop vectorizer stays off the walk (it widened the walk with 16 gathers per step,
    // EfficientNet-B0's squeeze-excitation pools at a sixth of ONNX Runtime's speed).
    body.push_back(walk.wrap(kir::block(adds), kir::LoopKind::Scalar));
    body.insert(body.end(), stores.begin(), stores.end());
    return Kernels{kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, work))};
  }

  if (innerKept && anyReduced && !perOutput) {
    // The innermost dim is kept: accumulate whole output rows in a scratch buffer while
    // walking the input in order (contiguous, vectorizable), then finalize.
    int sb = kb.scratch(0, acc, outN);
    Nest initN;
    Expr o = initN.add(kb, outN);
    Stmt initS = initN.wrap(kb.store(sb, o, init));
    Nest walk;
    std::vector<Expr> idx;
    std::vector<std::string> keptLoops; // the walk's loops over kept dims (extent-1 dims have none)
    for (const DimGroup &g : groups) {
      size_t before = walk.loops.size();
      idx.push_back(walk.add(kb, g.extent));
      if (walk.loops.size() > before && !g.reduced)
        keptLoops.push_back(walk.loops.back().first);
    }
    Expr iIdx = i64(0), oIdx = i64(0);
    for (size_t d = 0; d < groups.size(); ++d) {
      iIdx = kir::add(iIdx, kir::mul(idx[d], i64(groups[d].inStride)));
      if (!groups[d].reduced)
        oIdx = kir::add(oIdx, kir::mul(idx[d], i64(groups[d].outStride)));
    }
    Stmt walkS = walk.wrap(
        kb.store(sb, oIdx, combine(kb.load(sb, oIdx), kir::cast(kb.load(xb, iIdx), acc))));
    Nest finN;
    Expr f = finN.add(kb, outN);
    Stmt finS = finN.wrap(kb.store(ob, f, finalize(kb.load(sb, f))));
    kir::Schedule sched;
    // Parallel only where the outermost walked dim is kept (no two threads share a row).
    if (!groups.front().reduced) {
      sched = parallelOuter(walk, work);
      // The walked loops of reduced dims are not independent: their iterations add into the
      // same scratch elements. Marked so (parallelOuter marks every loop of the nest), an
      // OpenCL device collapsed them into the NDRange with the kept ones, and work-items of
      // different work-groups raced on a scratch element (a DLRM's pooled embeddings,
      // [B, 4, 64] summed over the 4, came out wrong now and then on PoCL). Without them the
      // grid stops at the first reduced loop; the kept loops inside it stay independent.
      for (kir::ScheduleStep &st : sched.steps) {
        if (st.kind != kir::ScheduleStep::GpuGrid)
          continue;
        st.loops = keptLoops;
      }
    }
    return Kernels{kb.finish(kir::block({initS, walkS, finS}), sched)};
  }

  // On an OpenCL device, a reduction of contiguous rows as a work-group tree per output:
  //  1. work-item t of the group combines elements t, t + G, t + 2G, ... of the row (so
  //     neighbouring work-items read neighbouring elements);
  //  2. the G partial results go to a local buffer; then log2(G) levels, each after a
  //     barrier, in which item t < h combines partial[t] with partial[t + h];
  //  3. item 0 finalizes partial[0] into the output.
  if (int64_t G = gpu && !isBool ? workGroupTreeSize(groups, count, *gpu) : 0) {
    tuning::Problem problem = reduceOpenCLProblem(acc, outN, count);
    G = tuning::chooseConfig(problem, opts).at("wg");
    std::string row = kb.freshName("row"), tn = kb.freshName("t"), it = kb.freshName("i");
    Expr rowV = kir::var(row), tV = kir::var(tn);
    Expr oIdx = i64(0), iBase = i64(0);
    int64_t rest = outN;
    for (const DimGroup &g : groups)
      if (!g.reduced) { // the kept dims' indices from the flat output index
        rest /= g.extent;
        Expr v = kir::mod(kir::div(rowV, i64(rest)), i64(g.extent));
        iBase = kir::add(iBase, kir::mul(v, i64(g.inStride)));
        oIdx = kir::add(oIdx, kir::mul(v, i64(g.outStride)));
      }
    const DimGroup &red = groups.back();
    int partial = kir::kLocalBufferBase;
    std::string a = kb.freshName("acc");
    Expr av = kir::var(a, acc);
    Expr j = kir::add(kir::mul(kir::var(it), i64(G)), tV);
    Stmt strided = kir::forLoop(
        it, i64((count + G - 1) / G),
        kir::ifThen(
            kir::lt(j, i64(count)),
            kir::assign(
                a,
                combine(av, kir::cast(kb.load(xb, kir::add(iBase, kir::mul(j, i64(red.inStride)))),
                                      acc)))));
    std::vector<Stmt> body = {kir::decl(a, acc, init), strided, kir::store(partial, tV, av),
                              kir::barrier()};
    for (int64_t h = G / 2; h >= 1; h /= 2) {
      body.push_back(kir::ifThen(
          kir::lt(tV, i64(h)), kir::store(partial, tV,
                                          combine(kir::load(partial, acc, tV),
                                                  kir::load(partial, acc, kir::add(tV, i64(h)))))));
      body.push_back(kir::barrier());
    }
    body.push_back(kir::ifThen(kir::lt(tV, i64(1)),
                               kb.store(ob, oIdx, finalize(kir::load(partial, acc, i64(0))))));
    Stmt nest = kir::forLoop(tn, i64(G), kir::block(body), kir::LoopKind::GpuThread);
    nest = kir::forLoop(row, i64(outN), nest, kir::LoopKind::GpuBlock);
    kir::Kernel k = kb.finish(nest, {});
    k.locals.push_back({kb.freshName("partial"), acc, G});
    k.flops = problem.flops;
    return Kernels{std::move(k)};
  }

  // Otherwise (and per output): a loop nest over the kept dims, a local accumulator, the
  // reduced dims inside.
  Nest outer, inner;
  Expr iIdx = i64(0), oIdx = i64(0);
  for (const DimGroup &g : groups)
    if (!g.reduced) {
      Expr v = outer.add(kb, g.extent);
      iIdx = kir::add(iIdx, kir::mul(v, i64(g.inStride)));
      oIdx = kir::add(oIdx, kir::mul(v, i64(g.outStride)));
    }
  for (const DimGroup &g : groups)
    if (g.reduced)
      iIdx = kir::add(iIdx, kir::mul(inner.add(kb, g.extent), i64(g.inStride)));
  std::string a = kb.freshName("acc");
  Expr av = kir::var(a, acc);
  Expr xv = kir::cast(kb.load(xb, iIdx), acc);
  if (minMax && isFloat(acc)) {
    // The extremum ignoring NaN and, beside it, whether any element was NaN (then the result).
    std::string nan = kb.freshName("nan");
    Expr none = kir::intImm(0, DType::I32);
    Stmt body = kir::block(
        {kir::decl(a, acc, init), kir::decl(nan, DType::I32, none),
         inner.wrap(extremumStep(a, nan, acc, xv, kind == ReduceKind::Max)),
         kb.store(ob, oIdx,
                  finalize(kir::select(gt(kir::var(nan, DType::I32), none),
                                       fc(std::nan(""), acc), av)))});
    return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, work))};
  }
  Stmt body = kir::block({kir::decl(a, acc, init), inner.wrap(kir::accumulate(a, combine(av, xv))),
                          kb.store(ob, oIdx, finalize(av))});
  return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, work))};
}

/// outer * size * inner around `axis`.
struct AxisSplit {
  int64_t outer = 1, size = 1, inner = 1;
  AxisSplit(const Extents &e, int64_t axis) {
    for (int64_t i = 0; i < axis; ++i)
      outer *= e[static_cast<size_t>(i)];
    size = e[static_cast<size_t>(axis)];
    for (size_t i = static_cast<size_t>(axis) + 1; i < e.size(); ++i)
      inner *= e[i];
  }
};

/// The index of the extremum along the axis. A scan that keeps one running best is a serial
/// chain of compare-and-select (~10 cycles an element), so:
///  - with inner > 1, the scan runs over the axis outermost and keeps one running best per
///    inner position (in scratch and the result), so the innermost loop is independent
///    lanes and vectorizes;
///  - along the contiguous axis, two reductions that vectorize: the extremum (and whether
///    there is a NaN), then the first or last position (as select_last_index asks) holding
///    it, or holding a NaN.
/// NaN counts as the extremum (the interpreter's greaterNaN/lessNaN).
/// With `perOutput` (an OpenCL device, lowerArgPerOutput) and inner > 1, each output (outer,
/// inner position) scans the axis itself instead, so that the outputs are the grid.
Expected<Kernels> lowerArgImpl(const Node &node, const std::string &prefix, bool isMax,
                               bool perOutput) {
  const Value *x = node.operand(0);
  Extents in = extentsOf(x);
  DType t = x->dtype();
  if (!isNumeric(t))
    return node.error("operand must have a numeric type, got {}", dtypeName(t));
  NNC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(node.getInt("axis"), static_cast<int64_t>(in.size()), node));
  bool last = node.getInt("select_last_index") != 0;
  AxisSplit sp(in, axis);
  int64_t outN = sp.outer * sp.inner;
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  if (sp.size == 0)
    return node.error("cannot take the index of an extremum over axis {} of size 0", axis);
  DType ct = computeType(t);
  // v replaces the running best bv of a scan in increasing index order.
  auto replaces = [&](const Expr &v, const Expr &bv) -> Expr {
    if (!isFloat(ct))
      return isMax ? (last ? kir::ge(v, bv) : gt(v, bv)) : (last ? le(v, bv) : kir::lt(v, bv));
    if (!last) // !(v <= bv) is v > bv or v NaN; once bv is NaN nothing replaces it.
      return kir::land(bnot(isNaN(bv)), bnot(isMax ? le(v, bv) : kir::ge(v, bv)));
    return bor(isNaN(v), kir::land(bnot(isNaN(bv)), isMax ? kir::ge(v, bv) : le(v, bv)));
  };
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), ob = kb.result(0);
  Nest outer;
  Expr a = outer.add(kb, sp.outer);
  auto sel = [](const Expr &c, const Expr &y, const Expr &n) { return kir::select(c, y, n); };

  if (sp.inner > 1 && perOutput) {
    // One scan per output (a, b): the positions after the axis become loops of their own, so
    // a device runs every output as a work-item (lowerArgPerOutput).
    Expr b = outer.add(kb, sp.inner);
    auto xAt = [&](const Expr &k) {
      Expr row = kir::add(kir::mul(a, i64(sp.size)), k);
      return kir::cast(kb.load(xb, kir::add(kir::mul(row, i64(sp.inner)), b)), ct);
    };
    std::string best = kb.freshName("best"), bv = kb.freshName("bv");
    Expr bestE = kir::var(best), bvE = kir::var(bv, ct);
    std::vector<Stmt> body{kir::decl(best, DType::I64, i64(0)), kir::decl(bv, ct, xAt(i64(0)))};
    if (sp.size > 1) {
      std::string k = kb.freshName("k"), v = kb.freshName("v"), c = kb.freshName("c");
      Expr kv = kir::add(kir::var(k), i64(1)), vE = kir::var(v, ct), cE = kir::var(c, DType::Bool);
      body.push_back(kir::forLoop(
          k, i64(sp.size - 1),
          kir::block({kir::decl(v, ct, xAt(kv)), kir::decl(c, DType::Bool, replaces(vE, bvE)),
                      kir::assign(bv, sel(cE, vE, bvE)), kir::assign(best, sel(cE, kv, bestE))})));
    }
    body.push_back(kb.store(ob, kir::add(kir::mul(a, i64(sp.inner)), b), bestE));
    return Kernels{kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, outN * sp.size))};
  }
  if (sp.inner > 1) {
    int bvb = kb.scratch(0, ct, outN);
    auto lanes = [&](const std::function<Stmt(const Expr &)> &body) {
      std::string b = kb.freshName("b");
      return kir::forLoop(b, i64(sp.inner), body(kir::var(b)));
    };
    auto xAt = [&](const Expr &k, const Expr &b) {
      return kir::cast(
          kb.load(xb, kir::add(kir::mul(kir::add(kir::mul(a, i64(sp.size)), k), i64(sp.inner)), b)),
          ct);
    };
    auto oAt = [&](const Expr &b) { return kir::add(kir::mul(a, i64(sp.inner)), b); };
    Stmt init = lanes([&](const Expr &b) {
      return kir::block({kb.store(ob, oAt(b), i64(0)), kb.store(bvb, oAt(b), xAt(i64(0), b))});
    });
    std::vector<Stmt> body{init};
    if (sp.size > 1) {
      std::string k = kb.freshName("k");
      Expr kv = kir::add(kir::var(k), i64(1));
      Stmt scan = kir::forLoop(
          k, i64(sp.size - 1), lanes([&](const Expr &b) {
            std::string v = kb.freshName("v"), c = kb.freshName("c");
            Expr vE = kir::var(v, ct), bv = kb.load(bvb, oAt(b)), cE = kir::var(c, DType::Bool);
            return kir::block({kir::decl(v, ct, xAt(kv, b)),
                               kir::decl(c, DType::Bool, replaces(vE, bv)),
                               kb.store(bvb, oAt(b), sel(cE, vE, bv)),
                               kb.store(ob, oAt(b), sel(cE, kv, kb.load(ob, oAt(b))))});
          }));
      body.push_back(scan);
    }
    return Kernels{kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, outN * sp.size))};
  }

  // Along the contiguous axis, two passes over the row, each a reduction LLVM vectorizes:
  //  1. the extremum (floats: ignoring NaN, with a flag of whether the row holds one);
  //  2. the first (or, with select_last_index, the last) position holding it, or holding a
  //     NaN if there is one: the index the scan's order gives.
  Expr base = kir::mul(a, i64(sp.size));
  auto xAt = [&](const Expr &p) { return kir::cast(kb.load(xb, kir::add(base, p)), ct); };
  const bool fl = isFloat(ct);
  std::string m = kb.freshName("m"), nan = kb.freshName("nan"), p1 = kb.freshName("p"),
              p2 = kb.freshName("p"), at = kb.freshName("at");
  Expr mE = kir::var(m, ct), nanE = kir::var(nan, DType::I32), atE = kir::var(at);
  Expr none = kir::intImm(0, DType::I32);
  Expr x1 = xAt(kir::var(p1)), x2 = xAt(kir::var(p2));
  std::vector<Stmt> body{kir::decl(m, ct, isMax ? lowestOf(ct) : highestOf(ct))};
  if (fl)
    body.push_back(kir::decl(nan, DType::I32, none));
  body.push_back(kir::forLoop(
      p1, i64(sp.size),
      fl ? extremumStep(m, nan, ct, x1, isMax)
         : kir::accumulate(m, isMax ? kir::max(mE, x1) : kir::min(mE, x1))));
  Expr match = eq(x2, mE);
  if (fl) {
    std::string look = kb.freshName("look");
    body.push_back(kir::decl(look, DType::Bool, gt(nanE, none)));
    match = kir::select(kir::var(look, DType::Bool), isNaN(x2), match);
  }
  Expr p2E = kir::var(p2);
  body.push_back(kir::decl(at, DType::I64, last ? i64(-1) : i64(sp.size)));
  body.push_back(kir::forLoop(
      p2, i64(sp.size),
      kir::accumulate(at, last ? kir::max(atE, kir::select(match, p2E, i64(-1)))
                               : kir::min(atE, kir::select(match, p2E, i64(sp.size))))));
  body.push_back(kb.store(ob, a, atE));
  return Kernels{kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, outN * sp.size))};
}

Expected<Kernels> lowerArg(const Node &node, const std::string &prefix, bool isMax) {
  return lowerArgImpl(node, prefix, isMax, /*perOutput=*/false);
}

} // namespace

bool argScansOuterAxis(const Node &node) {
  const Value *x = node.operand(0);
  if (!x || !isStatic(x->shape()))
    return false;
  Extents in = extentsOf(x);
  int64_t r = static_cast<int64_t>(in.size()), axis = node.getInt("axis");
  if (axis < -r || axis >= r)
    return false;
  AxisSplit sp(in, axis < 0 ? axis + r : axis);
  return sp.inner > 1 && sp.outer * sp.inner > 0 && sp.size > 0;
}

Expected<Kernels> lowerArgPerOutput(const Node &node, const std::string &prefix) {
  return lowerArgImpl(node, prefix, node.kind() == OpKind::ArgMax, /*perOutput=*/true);
}

namespace {

/// CumSum and CumProd: one sequential scan along the axis per (outer, inner) position, the
/// running value in the wide accumulator type (the interpreter's).
Expected<Kernels> lowerCumulative(const Node &node, const std::string &prefix) {
  const bool prod = node.kind() == OpKind::CumProd;
  const Value *x = node.operand(0);
  Extents in = extentsOf(x);
  DType t = x->dtype();
  if (!isNumeric(t))
    return node.error("operand must have a numeric type, got {}", dtypeName(t));
  NNC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(node.getInt("axis"), static_cast<int64_t>(in.size()), node));
  bool exclusive = node.getInt("exclusive") != 0;
  bool reverse = node.getInt("reverse") != 0;
  AxisSplit sp(in, axis);
  if (numElementsOf(in) == 0)
    return Kernels{emptyKernel(node, prefix)};
  DType acc = accType(t, /*wide=*/true);
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), ob = kb.result(0);
  Nest outer, scan;
  Expr a = outer.add(kb, sp.outer), b = outer.add(kb, sp.inner);
  Expr j = scan.add(kb, sp.size, "j");
  Expr k = reverse ? kir::sub(i64(sp.size - 1), j) : j;
  Expr i = kir::add(kir::mul(kir::add(kir::mul(a, i64(sp.size)), k), i64(sp.inner)), b);
  std::string s = kb.freshName("sum");
  Expr sE = kir::var(s, acc);
  Expr v = kir::cast(kb.load(xb, i), acc);
  Stmt upd = kir::accumulate(s, prod ? kir::mul(sE, v) : kir::add(sE, v));
  Stmt st = kb.store(ob, i, kir::cast(sE, t));
  Stmt step = exclusive ? kir::block({st, upd}) : kir::block({upd, st});
  Stmt body = kir::block({kir::decl(s, acc, fc(prod ? 1 : 0, acc)), scan.wrap(step)});
  return Kernels{kb.finish(outer.wrap(body), parallelOuter(outer, numElementsOf(in)))};
}

Expected<Kernels> lowerTopK(const Node &node, const std::string &prefix) {
  const Value *x = node.operand(0);
  Extents in = extentsOf(x);
  DType t = x->dtype();
  if (!isNumeric(t))
    return node.error("operand must have a numeric type, got {}", dtypeName(t));
  if (in.empty())
    return node.error("operand 0 must have rank >= 1");
  NNC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(node.getInt("axis"), static_cast<int64_t>(in.size()), node));
  // k is static: the result's extent along the axis (a constant k operand must agree).
  int64_t k = extentsOf(node.result(0))[static_cast<size_t>(axis)];
  if (const Tensor *kt = node.constantOperand(1))
    if (kt->numElements() == 1 && kt->elementAsInt(0) != k)
      return node.error("k = {} disagrees with the result's extent {}", kt->elementAsInt(0), k);
  if (k > in[static_cast<size_t>(axis)])
    return node.error("k = {} is larger than axis {} of size {}", k, axis,
                      in[static_cast<size_t>(axis)]);
  bool largest = node.getInt("largest") != 0;
  AxisSplit sp(in, axis);
  if (sp.outer * sp.inner * k == 0)
    return Kernels{emptyKernel(node, prefix)};
  DType ct = computeType(t);
  // before(p, q): element p comes before element q in the result order (by value, NaN
  // largest, ties by lower index): a strict total order.
  auto before = [&](const Expr &pv, const Expr &pi, const Expr &qv, const Expr &qi) {
    Expr pq = largest ? greaterNaN(pv, qv) : greaterNaN(qv, pv);
    Expr qp = largest ? greaterNaN(qv, pv) : greaterNaN(pv, qv);
    return bor(pq, kir::land(bnot(qp), kir::lt(pi, qi)));
  };
  // Each result row holds a binary heap of the best k elements so far, its root the worst of
  // them (every parent comes after its children in the result order). The first k elements
  // sift up into it; a later element that does not come before the root (most of them, once
  // the heap holds good ones) costs one comparison, one that does replaces the root and sifts
  // down. A heap sort then orders the row best first. That is O(n + m log k) for m
  // replacements, where a sorted insertion shifts up to k elements per entry (a detector's
  // top 1000 of its scores, most of which enter while the kept ones are still poor).
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), vb = kb.result(0), ib = kb.result(1);
  Nest outer;
  Expr a = outer.add(kb, sp.outer), b = outer.add(kb, sp.inner);
  auto oi = [&](const Expr &j) {
    return kir::add(kir::mul(kir::add(kir::mul(a, i64(k)), j), i64(sp.inner)), b);
  };
  auto valAt = [&](const Expr &j) { return kir::cast(kb.load(vb, oi(j)), ct); };
  auto idxAt = [&](const Expr &j) { return kb.load(ib, oi(j)); };
  auto put = [&](const Expr &j, const Expr &v, const Expr &i) {
    return kir::block({kb.store(vb, oi(j), kir::cast(v, t)), kb.store(ib, oi(j), i)});
  };
  auto move = [&](const Expr &to, const Expr &from) {
    return kir::block({kb.store(vb, oi(to), kb.load(vb, oi(from))),
                       kb.store(ib, oi(to), idxAt(from))});
  };
  // A path from the root to a leaf has at most `levels` edges.
  int64_t levels = 0;
  while ((int64_t(1) << (levels + 1)) <= k)
    ++levels;
  const Expr no = kir::intImm(0, DType::Bool), yes = kir::intImm(1, DType::Bool);
  // Element (v, vi) placed from the root down into the heap of positions [0, n): each step
  // moves the worse child up while it comes after (v, vi).
  auto siftDown = [&](const Expr &v, const Expr &vi, const Expr &n) {
    std::string j = kb.freshName("j"), done = kb.freshName("done"), l = kb.freshName("l"),
                w = kb.freshName("w"), u = kb.freshName("u");
    Expr jE = kir::var(j), lE = kir::var(l), wE = kir::var(w),
         doneE = kir::var(done, DType::Bool);
    // The right child, read at a clamped position: both operands of the select are loaded.
    Expr r = kir::add(lE, i64(1)), rIn = kir::min(r, kir::sub(n, i64(1)));
    Stmt step = kir::ifThen(
        bnot(doneE),
        kir::block(
            {kir::decl(l, DType::I64, kir::add(kir::mul(jE, i64(2)), i64(1))),
             kir::ifThen(
                 kir::lt(lE, n),
                 kir::block({kir::decl(w, DType::I64,
                                       kir::select(kir::land(kir::lt(r, n),
                                                             before(valAt(lE), idxAt(lE),
                                                                    valAt(rIn), idxAt(rIn))),
                                                   r, lE)),
                             kir::ifThen(before(v, vi, valAt(wE), idxAt(wE)),
                                         kir::block({move(jE, wE), kir::assign(j, wE)}),
                                         kir::assign(done, yes))}),
                 kir::assign(done, yes))}));
    return kir::block({kir::decl(j, DType::I64, i64(0)), kir::decl(done, DType::Bool, no),
                       kir::forLoop(u, i64(levels), step), put(jE, v, vi)});
  };
  auto xAt = [&](const Expr &pos) {
    return kir::cast(
        kb.load(xb, kir::add(kir::mul(kir::add(kir::mul(a, i64(sp.size)), pos), i64(sp.inner)),
                             b)),
        ct);
  };
  // 1. The first k elements, each sifted up from the next free position.
  std::string p = kb.freshName("p"), v = kb.freshName("v");
  Expr pE = kir::var(p), vE = kir::var(v, ct);
  std::vector<Stmt> body;
  {
    std::string j = kb.freshName("j"), done = kb.freshName("done"), u = kb.freshName("u");
    Expr jE = kir::var(j), doneE = kir::var(done, DType::Bool);
    Expr parent = kir::div(kir::sub(jE, i64(1)), i64(2));
    Stmt step = kir::ifThen(
        bnot(doneE),
        kir::ifThen(kir::land(gt(jE, i64(0)), before(valAt(parent), idxAt(parent), vE, pE)),
                    kir::block({move(jE, parent), kir::assign(j, parent)}),
                    kir::assign(done, yes)));
    body.push_back(kir::forLoop(
        p, i64(k),
        kir::block({kir::decl(v, ct, xAt(pE)), kir::decl(j, DType::I64, pE),
                    kir::decl(done, DType::Bool, no), kir::forLoop(u, i64(levels), step),
                    put(jE, vE, pE)})));
  }
  // 2. The others replace the root when they come before it.
  if (sp.size > k) {
    std::string q = kb.freshName("q"), w = kb.freshName("x");
    Expr qE = kir::add(kir::var(q), i64(k)), wE = kir::var(w, ct);
    body.push_back(kir::forLoop(
        q, i64(sp.size - k),
        kir::block({kir::decl(w, ct, xAt(qE)),
                    kir::ifThen(before(wE, qE, valAt(i64(0)), idxAt(i64(0))),
                                siftDown(wE, qE, i64(k)))})));
  }
  // 3. Heap sort: the root, the worst of positions [0, e], goes to position e.
  if (k > 1) {
    std::string e = kb.freshName("e"), tv = kb.freshName("tv"), ti = kb.freshName("ti");
    Expr eE = kir::sub(i64(k - 1), kir::var(e));
    body.push_back(kir::forLoop(
        e, i64(k - 1),
        kir::block({kir::decl(tv, ct, valAt(eE)), kir::decl(ti, DType::I64, idxAt(eE)),
                    move(eE, i64(0)), siftDown(kir::var(tv, ct), kir::var(ti), eE)})));
  }
  Stmt bodyS = kir::block(body);
  return Kernels{kb.finish(outer.wrap(bodyS), parallelOuter(outer, sp.outer * sp.inner * sp.size))};
}

} // namespace

const tuning::Space &reduceOpenCLSpace() {
  static const tuning::Space space = [] {
    tuning::Space s;
    s.kind = "reduce_opencl";
    s.version = 1;
    s.knobs = {{"wg",
                {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
                "work-items of the group that reduces one output (the tree's width)"}};
    s.valid = [sp = &s](const tuning::Config &c, const tuning::Problem &p) {
      if (!tuning::namesEveryKnob(*sp, c) || p.dims.size() != 3)
        return false;
      GpuTarget gpu = p.gpu ? *p.gpu : GpuTarget::generic();
      int64_t wg = c.at("wg");
      // Every work-item has an element to start from, and the group and its partial results
      // fit the device.
      return wg <= p.dims[1] && wg <= gpu.maxWorkGroupSize && wg <= gpu.maxWorkItemSizes[0] &&
             wg * p.dims[2] <= gpu.localMemBytes;
    };
    s.defaults = [](const tuning::Problem &p) {
      GpuTarget gpu = p.gpu ? *p.gpu : GpuTarget::generic();
      std::vector<DimGroup> rows{{p.dims[0], false, p.dims[1]}, {p.dims[1], true, 1}};
      return tuning::Config{{"wg", std::max<int64_t>(2, workGroupTreeSize(rows, p.dims[1], gpu))}};
    };
    return s;
  }();
  return space;
}

namespace {

/// Which of `rank` dims a reduce_* reduces (no axes: all of them), or nullopt for bad axes
/// (its lowerer reports them).
std::optional<std::vector<bool>> reducedDims(const Node &node, size_t rank) {
  Expected<std::vector<int64_t>> axes =
      normalizeAxes(node.getInts("axes"), static_cast<int64_t>(rank), node, "axes");
  if (!axes)
    return std::nullopt;
  std::vector<bool> reduced(rank, axes->empty());
  for (int64_t a : *axes)
    reduced[static_cast<size_t>(a)] = true;
  return reduced;
}

} // namespace

bool reduceKeepsInnermost(const Node &node) {
  const Value *x = node.operand(0);
  if (!x || !isStatic(x->shape()) || !(isNumeric(x->dtype()) || x->dtype() == DType::Bool))
    return false;
  Extents in = extentsOf(x);
  std::optional<std::vector<bool>> reduced = reducedDims(node, in.size());
  if (!reduced)
    return false;
  std::vector<DimGroup> groups = groupDims(in, *reduced);
  bool anyReduced = false;
  for (const DimGroup &g : groups)
    anyReduced = anyReduced || g.reduced;
  return anyReduced && !groups.back().reduced && numElementsOf(extentsOf(node.result(0))) > 0;
}

Expected<Kernels> lowerReducePerOutput(const Node &node, const std::string &prefix) {
  return lowerReduce(node, prefix, reduceKindOf(node), nullptr, /*perOutput=*/true);
}

bool isWorkGroupReduction(const Node &node, const GpuTarget &gpu) {
  const Value *x = node.operand(0);
  if (!x || x->dtype() == DType::Bool || !isNumeric(x->dtype()) || isStorageOnly(x->dtype()))
    return false;
  Extents in = extentsOf(x);
  std::optional<std::vector<bool>> reduced = reducedDims(node, in.size());
  if (!reduced)
    return false;
  int64_t count = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if ((*reduced)[d])
      count *= in[d];
  return numElementsOf(extentsOf(node.result(0))) > 0 &&
         workGroupTreeSize(groupDims(in, *reduced), count, gpu) > 0;
}

Expected<Kernels> lowerReduceWorkGroup(const Node &node, const std::string &prefix,
                                       const tuning::LowerOptions &opts) {
  if (!opts.gpu)
    return node.error("the work-group reduction needs an OpenCL device");
  return lowerReduce(node, prefix, reduceKindOf(node), &opts);
}

void registerReductionAndNNLowerers(LowererTable &t) {
  auto reduce = [](ReduceKind k) {
    return [k](const Node &n, const std::string &p) { return lowerReduce(n, p, k); };
  };
  t[OpKind::ReduceSum] = reduce(ReduceKind::Sum);
  t[OpKind::ReduceMean] = reduce(ReduceKind::Mean);
  t[OpKind::ReduceMax] = reduce(ReduceKind::Max);
  t[OpKind::ReduceMin] = reduce(ReduceKind::Min);
  t[OpKind::ReduceProd] = reduce(ReduceKind::Prod);
  t[OpKind::ArgMax] = [](const Node &n, const std::string &p) { return lowerArg(n, p, true); };
  t[OpKind::ArgMin] = [](const Node &n, const std::string &p) { return lowerArg(n, p, false); };
  t[OpKind::CumSum] = lowerCumulative;
  t[OpKind::CumProd] = lowerCumulative;
  t[OpKind::TopK] = lowerTopK;
  registerNNLowerers(t);
  registerIntGemmLowerer(t);
  registerResizeLowerer(t);
}

} // namespace nnc::lower
