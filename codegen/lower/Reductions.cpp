// Lowerers of the reductions (reduce_*), arg-reductions, cumsum and topk; registers the NN and
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
  return kir::intImm(static_cast<int64_t>(uint64_t(1) << (bits - 1)) * (bits == 64 ? 1 : -1),
                     t);
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

Expected<Kernels> lowerReduce(const Node &node, const std::string &prefix, ReduceKind kind) {
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

  DType acc = isBool ? DType::Bool : accType(t, /*wide=*/true);
  Expr init;
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean: init = fc(0, acc); break;
  case ReduceKind::Prod: init = fc(1, acc); break;
  case ReduceKind::Max: init = lowestOf(isFloat(acc) ? acc : t); break;
  case ReduceKind::Min: init = highestOf(isFloat(acc) ? acc : t); break;
  }
  auto combine = [&](Expr a, Expr v) -> Expr {
    switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: return kir::add(a, v);
    case ReduceKind::Prod: return kir::mul(a, v);
    case ReduceKind::Max: return isBool ? bor(a, v) : kir::max(a, v);
    case ReduceKind::Min: return isBool ? kir::land(a, v) : kir::min(a, v);
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

  if (innerKept && anyReduced) {
    // The innermost dim is kept: accumulate whole output rows in a scratch buffer while
    // walking the input in order (contiguous, vectorizable), then finalize.
    int sb = kb.scratch(0, acc, outN);
    Nest initN;
    Expr o = initN.add(kb, outN);
    Stmt initS = initN.wrap(kb.store(sb, o, init));
    Nest walk;
    std::vector<Expr> idx;
    for (const DimGroup &g : groups)
      idx.push_back(walk.add(kb, g.extent));
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
    if (!groups.front().reduced)
      sched = parallelOuter(walk, work);
    return Kernels{kb.finish(kir::block({initS, walkS, finS}), sched)};
  }

  // Otherwise: a loop nest over the kept dims, a local accumulator, the reduced dims inside.
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
  Stmt body = kir::block(
      {kir::decl(a, acc, init),
       inner.wrap(kir::assign(a, combine(av, kir::cast(kb.load(xb, iIdx), acc)))),
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

Expected<Kernels> lowerArg(const Node &node, const std::string &prefix, bool isMax) {
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
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), ob = kb.result(0);
  Nest outer;
  Expr a = outer.add(kb, sp.outer), b = outer.add(kb, sp.inner);
  Expr base = kir::add(kir::mul(a, i64(sp.size * sp.inner)), b);
  std::string best = kb.freshName("best"), bv = kb.freshName("bv"), v = kb.freshName("v");
  Expr bestE = kir::var(best), bvE = kir::var(bv, ct), vE = kir::var(v, ct);
  Nest scan;
  Expr k = kir::add(scan.add(kb, sp.size - 1, "k"), i64(1));
  if (sp.size - 1 == 1)
    k = i64(1);
  // NaN counts as the extremum (the interpreter's greaterNaN/lessNaN): once the best is NaN
  // only a later NaN can replace it, and only with select_last_index.
  Expr better;
  if (!isFloat(ct)) {
    better = isMax ? (last ? kir::ge(vE, bvE) : gt(vE, bvE))
                   : (last ? le(vE, bvE) : kir::lt(vE, bvE));
  } else if (!last) {
    // !(v <= bv) is v > bv or v NaN; (v >= bv) likewise for the minimum.
    better = kir::land(bnot(isNaN(bvE)), bnot(isMax ? le(vE, bvE) : kir::ge(vE, bvE)));
  } else {
    better = bor(isNaN(vE), kir::land(bnot(isNaN(bvE)), isMax ? kir::ge(vE, bvE) : le(vE, bvE)));
  }
  Stmt step = kir::block(
      {kir::decl(v, ct, kir::cast(kb.load(xb, kir::add(base, kir::mul(k, i64(sp.inner)))), ct)),
       kir::ifThen(better, kir::block({kir::assign(best, k), kir::assign(bv, vE)}))});
  std::vector<Stmt> body{kir::decl(best, DType::I64, i64(0)),
                         kir::decl(bv, ct, kir::cast(kb.load(xb, base), ct))};
  if (sp.size > 1)
    body.push_back(scan.wrap(step));
  body.push_back(kb.store(ob, kir::add(kir::mul(a, i64(sp.inner)), b), bestE));
  return Kernels{kb.finish(outer.wrap(kir::block(body)),
                           parallelOuter(outer, outN * sp.size))};
}

Expected<Kernels> lowerCumSum(const Node &node, const std::string &prefix) {
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
  Stmt upd = kir::assign(s, kir::add(sE, kir::cast(kb.load(xb, i), acc)));
  Stmt st = kb.store(ob, i, kir::cast(sE, t));
  Stmt step = exclusive ? kir::block({st, upd}) : kir::block({upd, st});
  Stmt body = kir::block({kir::decl(s, acc, fc(0, acc)), scan.wrap(step)});
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
  // largest, ties by lower index); a strict total order, so the j-th result is the first
  // element after result j-1.
  auto before = [&](const Expr &pv, const Expr &pi, const Expr &qv, const Expr &qi) {
    Expr pq = largest ? greaterNaN(pv, qv) : greaterNaN(qv, pv);
    Expr qp = largest ? greaterNaN(qv, pv) : greaterNaN(pv, qv);
    return bor(pq, kir::land(bnot(qp), kir::lt(pi, qi)));
  };
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), vb = kb.result(0), ib = kb.result(1);
  Nest outer, sel, scan;
  Expr a = outer.add(kb, sp.outer), b = outer.add(kb, sp.inner);
  Expr j = sel.add(kb, k, "j");
  Expr p = scan.add(kb, sp.size, "p");
  std::string pv = kb.freshName("pv"), pi = kb.freshName("pi"), bv = kb.freshName("bv"),
              bi = kb.freshName("bi"), v = kb.freshName("v");
  Expr pvE = kir::var(pv, ct), piE = kir::var(pi), bvE = kir::var(bv, ct), biE = kir::var(bi),
       vE = kir::var(v, ct);
  Expr none = i64(-1);
  Expr cand = kir::land(bor(kir::lt(piE, i64(0)), before(pvE, piE, vE, p)),
                        bor(kir::lt(biE, i64(0)), before(vE, p, bvE, biE)));
  Expr xi = kir::add(kir::mul(kir::add(kir::mul(a, i64(sp.size)), p), i64(sp.inner)), b);
  Stmt scanS = scan.wrap(kir::block(
      {kir::decl(v, ct, kir::cast(kb.load(xb, xi), ct)),
       kir::ifThen(cand, kir::block({kir::assign(bv, vE), kir::assign(bi, p)}))}));
  Expr oi = kir::add(kir::mul(kir::add(kir::mul(a, i64(k)), j), i64(sp.inner)), b);
  Stmt selS = sel.wrap(kir::block({kir::decl(bv, ct, fc(0, ct)), kir::decl(bi, DType::I64, none),
                                   scanS, kb.store(vb, oi, kir::cast(bvE, t)),
                                   kb.store(ib, oi, biE), kir::assign(pv, bvE),
                                   kir::assign(pi, biE)}));
  Stmt body = kir::block({kir::decl(pv, ct, fc(0, ct)), kir::decl(pi, DType::I64, none), selS});
  return Kernels{
      kb.finish(outer.wrap(body), parallelOuter(outer, sp.outer * sp.inner * sp.size * k))};
}

} // namespace

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
  t[OpKind::CumSum] = lowerCumSum;
  t[OpKind::TopK] = lowerTopK;
  registerNNLowerers(t);
  registerResizeLowerer(t);
}

} // namespace nnc::lower
