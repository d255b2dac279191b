// Lowerer of det: one iteration per matrix (the OpenCL grid; the CPU's parallel loop) copies
// its matrix into a compute-type scratch and factors it there by LU with partial pivoting,
// the interpreter's operations in its order (runtime/interp/Det.cpp), strict so that no
// backend contracts or reorders them:
//   1. det = 1; for each column k: the pivot row p is the first with the largest |a[p][k]|
//      at or below k;
//   2. rows k and p are swapped (columns k on) and det negated when p != k;
//   3. det *= a[k][k]; unless that pivot is 0, a[i][j] -= (a[i][k] / pivot) * a[k][j] for the
//      rows i and columns j past k.
#include <algorithm>

#include "NNLowering.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;

Expected<std::vector<kir::Kernel>> lowerDet(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0));
  DType t = node.operand(0)->dtype(), ct = computeType(t);
  int64_t m = xe.back(), batch = numElementsOf(extentsOf(node.result(0)));
  if (batch == 0)
    return std::vector<kir::Kernel>{emptyKernel(node, prefix)};
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), yb = kb.result(0);
  int ab = kb.scratch(0, ct, std::max<int64_t>(batch * m * m, 1));
  Nest outer;
  Expr b = outer.add(kb, batch, "b");
  std::vector<Stmt> body;
  Expr base = kb.bind(body, "base", DType::I64, kir::mul(b, i64(m * m)));
  auto at = [&](const Expr &row, const Expr &col) {
    return kir::add(base, kir::add(kir::mul(row, i64(m)), col));
  };
  {
    std::string i = kb.freshName("i");
    Expr o = kir::add(base, kir::var(i));
    body.push_back(kir::forLoop(i, i64(m * m), kb.store(ab, o, kir::cast(kb.load(xb, o), ct))));
  }
  std::string det = kb.freshName("det");
  Expr detE = kir::var(det, ct);
  body.push_back(kir::decl(det, ct, fc(1, ct)));

  std::string kv = kb.freshName("k");
  Expr k = kir::var(kv);
  Expr after = kir::sub(i64(m - 1), k); // rows (or columns) past k
  std::vector<Stmt> col;
  // 1. The pivot row.
  std::string p = kb.freshName("p"), best = kb.freshName("best");
  Expr pE = kir::var(p), bestE = kir::var(best, ct);
  col.push_back(kir::decl(p, DType::I64, k));
  col.push_back(kir::decl(best, ct, kir::op(OpKind::Abs, {kb.load(ab, at(k, k))})));
  {
    std::string i = kb.freshName("i");
    Expr row = kir::add(k, kir::add(kir::var(i), i64(1)));
    std::vector<Stmt> s;
    Expr v = kb.bind(s, "v", ct, kir::op(OpKind::Abs, {kb.load(ab, at(row, k))}));
    s.push_back(kir::ifThen(gt(v, bestE), kir::block({kir::assign(best, v), kir::assign(p, row)})));
    col.push_back(kir::forLoop(i, after, kir::block(s)));
  }
  // 2. The row swap.
  {
    std::string j = kb.freshName("j");
    Expr c = kir::add(k, kir::var(j));
    std::vector<Stmt> s;
    Expr top = kb.bind(s, "top", ct, kb.load(ab, at(k, c)));
    s.push_back(kb.store(ab, at(k, c), kb.load(ab, at(pE, c))));
    s.push_back(kb.store(ab, at(pE, c), top));
    col.push_back(kir::ifThen(bnot(eq(pE, k)),
                              kir::block({kir::forLoop(j, kir::sub(i64(m), k), kir::block(s)),
                                          kir::assign(det, kir::op(OpKind::Neg, {detE}))})));
  }
  // 3. The pivot into det, then the elimination below it.
  Expr pivot = kb.bind(col, "piv", ct, kb.load(ab, at(k, k)));
  col.push_back(kir::assign(det, smul(detE, pivot)));
  {
    std::string i = kb.freshName("i"), j = kb.freshName("j");
    Expr row = kir::add(k, kir::add(kir::var(i), i64(1)));
    Expr c = kir::add(k, kir::add(kir::var(j), i64(1)));
    std::vector<Stmt> s;
    Expr f = kb.bind(s, "f", ct, sdiv(kb.load(ab, at(row, k)), pivot));
    s.push_back(kir::forLoop(
        j, after,
        kb.store(ab, at(row, c), ssub(kb.load(ab, at(row, c)), smul(f, kb.load(ab, at(k, c)))))));
    col.push_back(kir::ifThen(bnot(eq(pivot, fc(0, ct))), kir::forLoop(i, after, kir::block(s))));
  }
  body.push_back(kir::forLoop(kv, i64(m), kir::block(col)));
  body.push_back(kb.store(yb, b, kir::cast(detE, t)));
  std::vector<kir::Kernel> kernels;
  kernels.push_back(
      kb.finish(outer.wrap(kir::block(body)), parallelOuter(outer, batch * m * m * m)));
  return kernels;
}

} // namespace

void registerDetLowerer(LowererTable &t) {
  t[OpKind::Det] = lowerDet;
}

} // namespace nnc::lower
