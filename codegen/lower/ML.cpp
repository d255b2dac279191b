// Lowerers of the table-driven text and tree ops, with the interpreter's arithmetic
// (runtime/interp/ML.cpp): tfidf_vectorizer, one kernel over rows that counts each row's
// n-grams found in the pool (a scan of the pool's n-grams of each length) and weights them;
// tree_ensemble, one kernel over rows that walks every tree (at most `depth` steps, the tables
// loaded from the constant operands), aggregates the leaves' weights per target and applies
// the post transform.
#include <fmt/format.h>

#include "NNLowering.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

Expected<Kernels> lowerTfIdfVectorizer(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0));
  int64_t rows = xe.size() == 2 ? xe[0] : 1, c = xe.back();
  int64_t lo = node.getInt("min_gram_length"), hi = node.getInt("max_gram_length");
  int64_t skip = node.getInt("max_skip_count"), size = node.getInt("output_size");
  std::string mode = node.getString("mode");
  const std::vector<int64_t> &starts = node.getInts("ngram_counts");
  int64_t poolSize = numElementsOf(extentsOf(node.operand(1)));
  int64_t lengths = static_cast<int64_t>(starts.size());
  bool hasWeights = node.numOperands() > 3 && node.operand(3);

  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), pool = kb.operand(1), cols = kb.operand(2), yb = kb.result(0);
  Nest outer;
  Expr r = outer.add(kb, rows, "r");
  Expr rowX = kir::mul(r, i64(c)), rowY = kir::mul(r, i64(size));
  std::vector<Stmt> body;
  {
    std::string i = kb.freshName("i");
    body.push_back(
        kir::forLoop(i, i64(size), kb.store(yb, kir::add(rowY, kir::var(i)), fc(0, DType::F32))));
  }
  // Per skip distance d (1 + the loop variable) and start s, each n-gram length n: the last
  // pool n-gram equal to items s, s + d, ..., s + (n - 1) d counts once.
  std::string dv = kb.freshName("d"), sv = kb.freshName("s");
  Expr d = kir::add(kir::var(dv), i64(1)), s = kir::var(sv);
  std::vector<Stmt> perStart;
  int64_t base = 0;
  for (int64_t n = 1; n <= lengths; ++n) {
    int64_t start = starts[size_t(n - 1)];
    int64_t end = n < lengths ? starts[size_t(n)] : poolSize;
    int64_t count = (end - start) / n, id0 = base;
    base += count;
    if (n < lo || n > hi || count <= 0)
      continue;
    // Unigrams count at distance 1 only.
    Expr fits = kir::lt(kir::add(s, kir::mul(i64(n - 1), d)), i64(c));
    if (n == 1)
      fits = kir::land(fits, eq(d, i64(1)));
    std::vector<Stmt> look;
    std::vector<Expr> items;
    for (int64_t k = 0; k < n; ++k)
      items.push_back(kb.bind(
          look, "it", DType::I64,
          kir::cast(kb.load(xb, kir::add(rowX, kir::add(s, kir::mul(i64(k), d)))), DType::I64)));
    std::string found = kb.freshName("found"), g = kb.freshName("g");
    look.push_back(kir::decl(found, DType::I64, i64(-1)));
    std::vector<Expr> same;
    for (int64_t k = 0; k < n; ++k)
      same.push_back(eq(kb.load(pool, kir::add(i64(start + k), kir::mul(kir::var(g), i64(n)))),
                        items[size_t(k)]));
    look.push_back(kir::forLoop(
        g, i64(count), kir::assign(found, kir::select(allOf(same), kir::var(g), kir::var(found)))));
    std::vector<Stmt> hit;
    Expr col = kb.bind(hit, "col", DType::I64, kb.load(cols, kir::add(i64(id0), kir::var(found))));
    Expr inside = kb.bind(hit, "in", DType::Bool, inRange(col, 0, size));
    kir::RuntimeCheck check{node.describe() + ": ngram_indexes holds the column ",
                            fmt::format(", outside the {} output columns", size)};
    hit.push_back(kb.check(bnot(inside), col, std::move(check)));
    Expr at = kir::add(rowY, col);
    hit.push_back(
        kir::ifThen(inside, kb.store(yb, at, kir::add(kb.load(yb, at), fc(1, DType::F32)))));
    look.push_back(kir::ifThen(kir::ge(kir::var(found), i64(0)), kir::block(hit)));
    perStart.push_back(kir::ifThen(fits, kir::block(look)));
  }
  if (!perStart.empty())
    body.push_back(kir::forLoop(dv, i64(skip + 1), kir::forLoop(sv, i64(c), kir::block(perStart))));
  if (mode != "TF") {
    std::string i = kb.freshName("i");
    Expr at = kir::add(rowY, kir::var(i));
    Expr f = kb.load(yb, at);
    Expr w = hasWeights ? kb.load(kb.operand(3), kir::var(i)) : fc(1, DType::F32);
    Expr v = mode == "IDF" ? kir::select(gt(f, fc(0, DType::F32)), w, fc(0, DType::F32))
                           : kir::mul(w, f);
    body.push_back(kir::forLoop(i, i64(size), kb.store(yb, at, v)));
  }
  Kernels kernels;
  kernels.push_back(
      kb.finish(outer.wrap(kir::block(body)),
                parallelOuter(outer, rows * (skip + 1) * c * std::max<int64_t>(poolSize, 1))));
  return kernels;
}

/// ONNX runtime's inverse error function (Winitzki's approximation), as the interpreter's.
Expr erfInv(KernelBuilder &kb, std::vector<Stmt> &at, const Expr &x, DType t) {
  auto k = [&](double v) { return fc(v, t); };
  Expr sgn = kb.bind(at, "sgn", t, kir::select(kir::lt(x, k(0)), k(-1), k(1)));
  Expr y = kb.bind(at, "y", t, kir::mul(kir::sub(k(1), x), kir::add(k(1), x)));
  Expr lg = kb.bind(at, "lg", t, kir::op(OpKind::Log, {y}));
  Expr v = kb.bind(at, "v", t, kir::add(k(2 / (3.14159 * 0.147)), kir::mul(k(0.5), lg)));
  Expr v2 = kb.bind(at, "v2", t, kir::mul(k(1 / 0.147), lg));
  Expr v3 =
      kb.bind(at, "v3", t,
              kir::add(kir::sub(k(0), v), kir::op(OpKind::Sqrt, {kir::sub(kir::mul(v, v), v2)})));
  return kir::mul(sgn, kir::op(OpKind::Sqrt, {kir::sub(v3, v)}));
}

Expected<Kernels> lowerTreeEnsemble(const Node &node, const std::string &prefix) {
  Extents xe = extentsOf(node.operand(0));
  DType t = node.operand(0)->dtype(), ct = computeType(t), at = accType(t, /*wide=*/true);
  int64_t rows = xe[0], features = xe[1];
  int64_t numNodes = extentsOf(node.operand(1))[0];
  int64_t numLeaves = numElementsOf(extentsOf(node.operand(3)));
  int64_t numTrees = numElementsOf(extentsOf(node.operand(5)));
  bool hasMembers =
      node.numOperands() > 6 && node.operand(6) && numElementsOf(extentsOf(node.operand(6))) > 0;
  int64_t agg = node.getInt("aggregate_function"), post = node.getInt("post_transform");
  int64_t targets = node.getInt("n_targets"), depth = node.getInt("depth");
  if (rows == 0)
    return Kernels{emptyKernel(node, prefix)};

  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), nodes = kb.operand(1), splits = kb.operand(2);
  int leafTargets = kb.operand(3), leafWeights = kb.operand(4), roots = kb.operand(5);
  int yb = kb.result(0);
  // Each row's per-target accumulators (rows are independent).
  int acc = kb.scratch(0, at, rows * targets);
  Nest outer;
  Expr r = outer.add(kb, rows, "r");
  Expr rowAcc = kir::mul(r, i64(targets));
  std::vector<Stmt> body;
  double tMax = t == DType::F64   ? 1.7976931348623157e308
                : t == DType::F32 ? 3.4028234663852886e38
                : t == DType::F16 ? 65504.0
                                  : 3.3895313892515355e38;
  Expr init = fc(agg == 2 ? tMax : agg == 3 ? -tMax : 0.0, at);
  {
    std::string k = kb.freshName("k");
    body.push_back(
        kir::forLoop(k, i64(targets), kb.store(acc, kir::add(rowAcc, kir::var(k)), init)));
  }
  auto clampTo = [](const Expr &e, int64_t n) { return kir::min(kir::max(e, i64(0)), i64(n - 1)); };
  std::string tv = kb.freshName("tree");
  std::vector<Stmt> tree;
  Expr root = kb.bind(tree, "root", DType::I64, kb.load(roots, kir::var(tv)));
  std::string leaf = kb.freshName("leaf"), cur = kb.freshName("cur");
  Expr leafE = kir::var(leaf), curE = kir::var(cur);
  tree.push_back(kir::decl(leaf, DType::I64,
                           kir::select(kir::lt(root, i64(0)), kir::sub(i64(-1), root), i64(-1))));
  tree.push_back(kir::decl(cur, DType::I64, kir::max(root, i64(0))));
  if (numNodes > 0 && depth > 0) {
    // One interior node per step until a leaf is reached (indices clamped into the tables,
    // which the importer checked).
    std::string step = kb.freshName("step");
    std::vector<Stmt> visit;
    Expr row = kb.bind(visit, "row", DType::I64, kir::mul(clampTo(curE, numNodes), i64(9)));
    auto field = [&](int f) { return kb.load(nodes, kir::add(row, i64(f))); };
    Expr feature = kb.bind(visit, "f", DType::I64, clampTo(field(0), features));
    Expr mode = kb.bind(visit, "mode", DType::I64, field(1));
    Expr xv = kb.bind(visit, "xv", ct,
                      kir::cast(kb.load(xb, kir::add(kir::mul(r, i64(features)), feature)), ct));
    Expr sp = kb.bind(visit, "sp", ct, kir::cast(kb.load(splits, clampTo(curE, numNodes)), ct));
    Expr member = kir::intImm(0, DType::Bool);
    if (hasMembers) {
      int mb = kb.operand(6);
      int64_t numMembers = numElementsOf(extentsOf(node.operand(6)));
      std::string in = kb.freshName("in"), m = kb.freshName("m");
      visit.push_back(kir::decl(in, DType::Bool, kir::intImm(0, DType::Bool)));
      Expr begin = kb.bind(visit, "mb", DType::I64, clampTo(field(7), numMembers + 1));
      Expr end = kb.bind(visit, "me", DType::I64, kir::min(field(8), i64(numMembers)));
      Expr mv = kir::cast(kb.load(mb, kir::add(begin, kir::var(m))), ct);
      Expr isMember = kb.bind(visit, "ismember", DType::Bool, eq(mode, i64(6)));
      visit.push_back(kir::ifThen(
          isMember, kir::forLoop(m, kir::max(kir::sub(end, begin), i64(0)),
                                 kir::assign(in, bor(kir::var(in, DType::Bool), eq(mv, xv))))));
      member = kir::var(in, DType::Bool);
    }
    Expr cond = kir::select(
        eq(mode, i64(0)), le(xv, sp),
        kir::select(eq(mode, i64(1)), kir::lt(xv, sp),
                    kir::select(eq(mode, i64(2)), kir::ge(xv, sp),
                                kir::select(eq(mode, i64(3)), gt(xv, sp),
                                            kir::select(eq(mode, i64(4)), eq(xv, sp),
                                                        kir::select(eq(mode, i64(5)),
                                                                    bnot(eq(xv, sp)), member))))));
    Expr goTrue = kb.bind(visit, "go", DType::Bool,
                          bor(cond, kir::land(bnot(eq(field(6), i64(0))), isNaN(xv))));
    Expr next = kb.bind(visit, "next", DType::I64, kir::select(goTrue, field(2), field(4)));
    Expr isLeaf = kb.bind(visit, "isleaf", DType::Bool,
                          bnot(eq(kir::select(goTrue, field(3), field(5)), i64(0))));
    visit.push_back(kir::assign(leaf, kir::select(isLeaf, next, i64(-1))));
    visit.push_back(kir::assign(cur, next));
    tree.push_back(
        kir::forLoop(step, i64(depth), kir::ifThen(kir::lt(leafE, i64(0)), kir::block(visit))));
  }
  {
    // The leaf's weight into its target's accumulator.
    std::vector<Stmt> add;
    Expr lf = kb.bind(add, "lf", DType::I64, clampTo(leafE, std::max<int64_t>(numLeaves, 1)));
    Expr w = kb.bind(add, "w", at, kir::cast(kb.load(leafWeights, lf), at));
    Expr target = kb.bind(add, "tg", DType::I64, clampTo(kb.load(leafTargets, lf), targets));
    Expr slot = kir::add(rowAcc, target);
    Expr old = kb.load(acc, slot);
    Expr v = agg == 0   ? kir::add(old, kir::op(OpKind::Div, {w, fc(double(numTrees), at)}))
             : agg == 1 ? kir::add(old, w)
             : agg == 2 ? kir::min(old, w)
                        : kir::max(old, w);
    add.push_back(kb.store(acc, slot, v));
    if (numLeaves > 0)
      tree.push_back(kir::ifThen(kir::ge(leafE, i64(0)), kir::block(add)));
  }
  if (numTrees > 0)
    body.push_back(kir::forLoop(tv, i64(numTrees), kir::block(tree)));
  // The post transform per row, then the results in x's dtype.
  auto each = [&](const std::function<Stmt(const Expr &slot)> &f) {
    std::string k = kb.freshName("k");
    body.push_back(kir::forLoop(k, i64(targets), f(kir::add(rowAcc, kir::var(k)))));
  };
  if (post == 1 || post == 3) {
    std::string mx = kb.freshName("mx"), sum = kb.freshName("sum");
    body.push_back(kir::decl(mx, at, kb.load(acc, rowAcc)));
    each([&](const Expr &slot) {
      return kir::assign(mx, kir::max(kir::var(mx, at), kb.load(acc, slot)));
    });
    body.push_back(kir::decl(sum, at, fc(0, at)));
    Expr mxE = kir::var(mx, at), sumE = kir::var(sum, at);
    each([&](const Expr &slot) {
      // The value and its exponential as locals: the store changes what a load would read.
      std::vector<Stmt> s;
      Expr v = kb.bind(s, "v", at, kb.load(acc, slot));
      Expr e = kb.bind(s, "e", at, kir::op(OpKind::Exp, {kir::sub(v, mxE)}));
      Stmt soft = kir::block({kb.store(acc, slot, e), kir::assign(sum, kir::add(sumE, e))});
      if (post == 1) {
        s.push_back(soft);
        return kir::block(s);
      }
      Expr nonzero =
          kb.bind(s, "nz", DType::Bool, bor(gt(v, fc(1e-7, at)), kir::lt(v, fc(-1e-7, at))));
      s.push_back(kir::ifThen(
          nonzero, soft,
          kb.store(acc, slot, kir::mul(v, kir::op(OpKind::Exp, {kir::sub(fc(0, at), mxE)})))));
      return kir::block(s);
    });
    each([&](const Expr &slot) {
      return kb.store(acc, slot, kir::op(OpKind::Div, {kb.load(acc, slot), sumE}));
    });
  } else if (post == 2) {
    each([&](const Expr &slot) {
      Expr v = kb.load(acc, slot);
      return kb.store(acc, slot,
                      kir::op(OpKind::Div,
                              {fc(1, at), kir::add(fc(1, at), kir::op(OpKind::Exp,
                                                                      {kir::sub(fc(0, at), v)}))}));
    });
  } else if (post == 4) {
    std::string k = kb.freshName("k");
    Expr slot = kir::add(rowAcc, kir::var(k));
    std::vector<Stmt> s;
    Expr e = erfInv(kb, s, kir::sub(kir::mul(fc(2, at), kb.load(acc, slot)), fc(1, at)), at);
    s.push_back(kb.store(acc, slot, kir::mul(fc(1.4142135623730951, at), e)));
    body.push_back(kir::forLoop(k, i64(targets), kir::block(s)));
  }
  each([&](const Expr &slot) { return kb.store(yb, slot, kir::cast(kb.load(acc, slot), t)); });
  Kernels kernels;
  kernels.push_back(kb.finish(outer.wrap(kir::block(body)),
                              parallelOuter(outer, rows * std::max<int64_t>(numTrees, 1) *
                                                       std::max<int64_t>(depth, 1) * 16)));
  return kernels;
}

} // namespace

void registerMLLowerers(LowererTable &t) {
  t[OpKind::TfIdfVectorizer] = lowerTfIdfVectorizer;
  t[OpKind::TreeEnsemble] = lowerTreeEnsemble;
}

} // namespace nnc::lower
