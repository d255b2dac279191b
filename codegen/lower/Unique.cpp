// Lowerer of unique, with the interpreter's order (runtime/interp/Unique.cpp): one serial
// kernel that merge-sorts the slice indices (stable, lexicographic, NaN last), groups equal
// neighbours, renumbers the groups by first occurrence when unsorted, and writes the results
// whose length depends on the data packed, with that length as their extent (the mechanism of
// non_max_suppression's result).
#include "NNLowering.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

Expected<Kernels> lowerUnique(const Node &node, const std::string &prefix) {
  const Value *xv = node.operand(0);
  Extents xe = extentsOf(xv);
  DType t = xv->dtype();
  // The value type compared: bools as integers, f16/bf16 in f32.
  DType ct = t == DType::Bool ? DType::I64 : computeType(t);
  int64_t outer = 1, n = numElementsOf(xe), inner = 1;
  if (node.hasAttr("axis")) {
    int64_t a = node.getInt("axis");
    size_t axis = static_cast<size_t>(a < 0 ? a + int64_t(xe.size()) : a);
    n = xe[axis];
    for (size_t d = 0; d < xe.size(); ++d) {
      if (d < axis)
        outer *= xe[d];
      else if (d > axis)
        inner *= xe[d];
    }
  }
  int64_t slice = outer * inner, cap = std::max<int64_t>(n, 1);
  size_t results = node.numResults();
  // A result nothing reads (an output the model leaves unnamed before a wanted one) is not
  // written: a data-dependent one has no buffer to go to.
  auto live = [&](size_t i) {
    const Graph *g = node.graph();
    return i < results && (!g || g->hasUses(node.result(i)) || g->isOutput(node.result(i)));
  };
  bool sorted = node.getInt("sorted", 1) != 0;

  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0);
  int order = kb.scratch(0, DType::I64, cap), merged = kb.scratch(1, DType::I64, cap);
  int group = kb.scratch(2, DType::I64, cap), first = kb.scratch(3, DType::I64, cap);
  int count = kb.scratch(4, DType::I64, cap), rank = kb.scratch(5, DType::I64, cap);
  int pick = kb.scratch(6, DType::I64, cap);
  std::vector<Stmt> body;
  auto bind = [&](std::vector<Stmt> &at, const char *hint, DType dt, Expr e) {
    return kb.bind(at, hint, dt, std::move(e));
  };
  auto value = [&](const Expr &s, const Expr &j) {
    // Element j of slice s: j = o * inner + i.
    Expr o = inner == 1 ? j : kir::div(j, i64(inner));
    Expr i = inner == 1 ? i64(0) : kir::mod(j, i64(inner));
    return kir::cast(
        kb.load(xb, kir::add(kir::mul(kir::add(kir::mul(o, i64(n)), s), i64(inner)), i)), ct);
  };
  // Appends to `at` the comparison of slices a and b; returns an i64 -1, 0 or 1.
  auto compare = [&](std::vector<Stmt> &at, const Expr &a, const Expr &b) {
    std::string c = kb.freshName("cmp"), j = kb.freshName("j");
    at.push_back(kir::decl(c, DType::I64, i64(0)));
    std::vector<Stmt> step;
    Expr va = bind(step, "va", ct, value(a, kir::var(j)));
    Expr vb = bind(step, "vb", ct, value(b, kir::var(j)));
    // NaN orders after every number (greaterNaN) and equals NaN.
    step.push_back(kir::assign(c, kir::select(greaterNaN(va, vb), i64(1),
                                              kir::select(greaterNaN(vb, va), i64(-1), i64(0)))));
    // (Conditions are bound to locals: OpenCL C warns of `if ((a == b))`.)
    std::vector<Stmt> iter;
    Expr open = bind(iter, "open", DType::Bool, eq(kir::var(c), i64(0)));
    iter.push_back(kir::ifThen(open, kir::block(step)));
    at.push_back(kir::forLoop(j, i64(slice), kir::block(iter)));
    return kir::var(c);
  };
  {
    std::string i = kb.freshName("i");
    body.push_back(kir::forLoop(i, i64(n), kb.store(order, kir::var(i), kir::var(i))));
  }
  // 1. A bottom-up stable merge sort of the slice indices.
  for (int64_t width = 1; width < n; width *= 2) {
    std::string blk = kb.freshName("blk"), t2 = kb.freshName("t"), u = kb.freshName("u");
    std::string li = kb.freshName("li"), ri = kb.freshName("ri");
    Expr lo = kir::mul(kir::var(blk), i64(2 * width));
    std::vector<Stmt> m;
    Expr mid = bind(m, "mid", DType::I64, kir::min(kir::add(lo, i64(width)), i64(n)));
    Expr hi = bind(m, "hi", DType::I64, kir::min(kir::add(lo, i64(2 * width)), i64(n)));
    Expr liE = kir::var(li), riE = kir::var(ri);
    m.push_back(kir::decl(li, DType::I64, lo));
    m.push_back(kir::decl(ri, DType::I64, mid));
    std::vector<Stmt> step;
    Expr lb = bind(step, "lb", DType::I64, kb.load(order, kir::min(liE, i64(n - 1))));
    Expr rb = bind(step, "rb", DType::I64, kb.load(order, kir::min(riE, i64(n - 1))));
    Expr c = compare(step, rb, lb);
    Expr takeRight = bind(step, "tr", DType::Bool,
                          kir::land(kir::lt(riE, hi), bor(kir::ge(liE, mid), kir::lt(c, i64(0)))));
    step.push_back(kb.store(merged, kir::add(lo, kir::var(t2)), kir::select(takeRight, rb, lb)));
    step.push_back(kir::assign(ri, kir::add(riE, kir::select(takeRight, i64(1), i64(0)))));
    step.push_back(kir::assign(li, kir::add(liE, kir::select(takeRight, i64(0), i64(1)))));
    m.push_back(kir::forLoop(t2, kir::sub(hi, lo), kir::block(step)));
    m.push_back(kir::forLoop(
        u, kir::sub(hi, lo),
        kb.store(order, kir::add(lo, kir::var(u)), kb.load(merged, kir::add(lo, kir::var(u))))));
    int64_t blocks = (n + 2 * width - 1) / (2 * width);
    body.push_back(kir::forLoop(blk, i64(blocks), kir::block(m)));
  }
  // 2. Groups of equal neighbours: each group's first member is its first occurrence.
  std::string g = kb.freshName("g");
  Expr gE = kir::var(g);
  body.push_back(kir::decl(g, DType::I64, i64(-1)));
  {
    std::string k = kb.freshName("k");
    Expr kE = kir::var(k);
    std::vector<Stmt> walk;
    Expr s = bind(walk, "s", DType::I64, kb.load(order, kE));
    std::vector<Stmt> cmpAt;
    Expr prev =
        bind(cmpAt, "p", DType::I64, kb.load(order, kir::max(kir::sub(kE, i64(1)), i64(0))));
    Expr c = compare(cmpAt, prev, s);
    for (Stmt &st : cmpAt)
      walk.push_back(st);
    Expr fresh = bind(walk, "fresh", DType::Bool, bor(eq(kE, i64(0)), bnot(eq(c, i64(0)))));
    walk.push_back(
        kir::ifThen(fresh, kir::block({kir::assign(g, kir::add(gE, i64(1))), kb.store(first, gE, s),
                                       kb.store(count, gE, i64(0))})));
    walk.push_back(kb.store(group, s, gE));
    walk.push_back(kb.store(count, gE, kir::add(kb.load(count, gE), i64(1))));
    body.push_back(kir::forLoop(k, i64(n), kir::block(walk)));
  }
  Expr u = bind(body, "u", DType::I64, kir::add(gE, i64(1)));
  // 3. Each group's position in the results: its sorted place, or its first occurrence's.
  if (sorted) {
    std::string q = kb.freshName("q");
    body.push_back(kir::forLoop(q, u, kb.store(rank, kir::var(q), kir::var(q))));
  } else {
    std::string next = kb.freshName("next"), s = kb.freshName("s");
    body.push_back(kir::decl(next, DType::I64, i64(0)));
    std::vector<Stmt> walk;
    Expr gs = bind(walk, "gs", DType::I64, kb.load(group, kir::var(s)));
    Expr isFirst = bind(walk, "isfirst", DType::Bool, eq(kb.load(first, gs), kir::var(s)));
    walk.push_back(
        kir::ifThen(isFirst, kir::block({kb.store(rank, gs, kir::var(next, DType::I64)),
                                         kir::assign(next, kir::add(kir::var(next), i64(1)))})));
    body.push_back(kir::forLoop(s, i64(n), kir::block(walk)));
  }
  {
    std::string q = kb.freshName("q");
    Expr qE = kir::var(q);
    std::vector<Stmt> put;
    Expr r = bind(put, "r", DType::I64, kb.load(rank, qE));
    put.push_back(kb.store(pick, r, kb.load(first, qE)));
    if (live(3)) {
      auto [cb, ce] = kb.dynamicResult(3, cap);
      put.push_back(kb.store(cb, r, kb.load(count, qE)));
      body.push_back(kb.store(ce, i64(0), u));
    }
    body.push_back(kir::forLoop(q, u, kir::block(put)));
  }
  // 4. The results.
  if (live(0)) {
    std::string q = kb.freshName("q"), o = kb.freshName("o"), i = kb.freshName("i");
    auto [yb, ye] = kb.dynamicResult(0, std::max<int64_t>(numElementsOf(xe), 1));
    Expr qE = kir::var(q), oE = kir::var(o), iE = kir::var(i);
    Expr src =
        kir::add(kir::mul(kir::add(kir::mul(oE, i64(n)), kb.load(pick, qE)), i64(inner)), iE);
    Expr dst = kir::add(kir::mul(kir::add(kir::mul(oE, u), qE), i64(inner)), iE);
    body.push_back(kir::forLoop(
        o, i64(outer),
        kir::forLoop(q, u, kir::forLoop(i, i64(inner), kb.store(yb, dst, kb.load(xb, src))))));
    body.push_back(kb.store(ye, i64(0), u));
  }
  if (live(1)) {
    auto [ib, ie] = kb.dynamicResult(1, cap);
    std::string q = kb.freshName("q");
    body.push_back(kir::forLoop(q, u, kb.store(ib, kir::var(q), kb.load(pick, kir::var(q)))));
    body.push_back(kb.store(ie, i64(0), u));
  }
  if (live(2)) {
    int vb = kb.result(2);
    std::string s = kb.freshName("s");
    body.push_back(kir::forLoop(
        s, i64(n), kb.store(vb, kir::var(s), kb.load(rank, kb.load(group, kir::var(s))))));
  }
  Kernels kernels;
  kernels.push_back(kb.finish(kir::block(body)));
  return kernels;
}

} // namespace

void registerUniqueLowerer(LowererTable &t) {
  t[OpKind::Unique] = lowerUnique;
}

} // namespace nnc::lower
