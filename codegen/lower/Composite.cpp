// Lowerers of the composite ops: softmax, log_softmax, hardmax, the normalizations and rotary
// embedding (attention: Attention.cpp). Each computes what its interpreter kernel (runtime/interp/
// Normalization.cpp, Attention.cpp) computes, with the interpreter's intermediate roundings to
// the stash / input dtype; the arithmetic type is chosen by computeType().
//
// Row-wise ops are one kernel: a loop over rows (parallel when there is enough work) whose
// body declares per-row accumulators (max, sum, mean, ...) and makes passes over the row.
// Softmax along a non-innermost axis keeps its per-row statistics in scratch buffers instead,
// so that its inner loops run over contiguous elements.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "CompositeUtil.h"
#include "Templates.h"

namespace nnc::lower {
namespace {

using namespace composite;

// ---- softmax, log_softmax, hardmax ----------------------------------------------------------

enum class AxisOp { Softmax, LogSoftmax, Hardmax };

/// Softmax / log_softmax along an axis that is not the innermost (inner > 1): per outer index
/// o, the row maxima and sums of the `inner` rows live in scratch buffers 0 and 1, and every
/// pass walks k (the axis) outside and i (contiguous) inside, so the inner loops are
/// vectorizable. Same numbers as the row-at-a-time form.
kir::Kernel lowerAlongAxisStrided(const Node &node, const std::string &prefix, AxisOp op,
                                  int64_t outer, int64_t n, int64_t inner, DType ct) {
  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), out = kb.result(0);
  int mxB = kb.scratch(0, ct, outer * inner), smB = kb.scratch(1, ct, outer * inner);
  std::string o = kb.freshName("o");
  Expr ov = kir::var(o);
  std::vector<std::string> ks, is;
  for (int p = 0; p < 3; ++p)
    ks.push_back(kb.freshName("k"));
  for (int p = 0; p < 5; ++p)
    is.push_back(kb.freshName("i"));
  auto stat = [&](const std::string &i) { return kir::add(kir::mul(ov, i64(inner)), kir::var(i)); };
  auto at = [&](const std::string &k, const std::string &i) {
    return kir::add(kir::add(kir::mul(ov, i64(n * inner)), kir::mul(kir::var(k), i64(inner))),
                    kir::var(i));
  };
  auto x = [&](const std::string &k, const std::string &i) {
    return kir::cast(kb.load(in, at(k, i)), ct);
  };
  auto nest = [&](const std::string &k, const std::string &i, Stmt body) {
    return kir::forLoop(k, i64(n), kir::forLoop(i, i64(inner), std::move(body)));
  };
  std::vector<Stmt> st;
  st.push_back(kir::forLoop(is[0], i64(inner), kb.store(mxB, stat(is[0]), fimm(-kInf, ct))));
  st.push_back(nest(
      ks[0], is[1],
      kb.store(mxB, stat(is[1]), fop(OpKind::Max, kb.load(mxB, stat(is[1])), x(ks[0], is[1])))));
  st.push_back(kir::forLoop(is[2], i64(inner), kb.store(smB, stat(is[2]), fimm(0, ct))));
  st.push_back(nest(
      ks[1], is[3],
      kb.store(smB, stat(is[3]),
               kir::add(kb.load(smB, stat(is[3])),
                        fop(OpKind::Exp, kir::sub(x(ks[1], is[3]), kb.load(mxB, stat(is[3]))))))));
  Expr xm = kir::sub(x(ks[2], is[4]), kb.load(mxB, stat(is[4])));
  Expr y = op == AxisOp::Softmax ? kir::div(fop(OpKind::Exp, xm), kb.load(smB, stat(is[4])))
                                 : kir::sub(xm, fop(OpKind::Log, kb.load(smB, stat(is[4]))));
  st.push_back(nest(ks[2], is[4], kb.store(out, at(ks[2], is[4]), narrow(y, kb.bufferType(out)))));
  Sched sc;
  sc.rows(o, outer, outer * n * inner);
  for (int p : {1, 3, 4})
    sc.vectorize(is[p], inner);
  return kb.finish(kir::forLoop(o, i64(outer), kir::block(st)), sc.s);
}

Expected<std::vector<kir::Kernel>> lowerAlongAxis(const Node &node, const std::string &prefix,
                                                  AxisOp op) {
  NNC_TRY(checkFloat(node, 0, "input"));
  const Value *xv = node.operand(0);
  Extents e = extentsOf(xv);
  NNC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(node.getInt("axis"), static_cast<int64_t>(e.size()), node));
  if (numElementsOf(e) == 0)
    return emptyKernel(node, prefix);
  int64_t outer = product(e, 0, axis), n = e[axis], inner = product(e, axis + 1, e.size());
  DType xt = xv->dtype(), ct = computeType({xt}, /*accurate=*/false);
  if (op != AxisOp::Hardmax && inner > 1)
    return std::vector<kir::Kernel>{lowerAlongAxisStrided(node, prefix, op, outer, n, inner, ct)};

  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), out = kb.result(0);
  std::string r = kb.freshName("r"), k1 = kb.freshName("k"), k2 = kb.freshName("k"),
              k3 = kb.freshName("k");
  Expr rv = kir::var(r);
  // Row r is (o, i) = (r / inner, r % inner); its element k is at base + k * inner.
  Expr base = inner == 1 ? kir::mul(rv, i64(n))
                         : kir::add(kir::mul(kir::div(rv, i64(inner)), i64(n * inner)),
                                    kir::mod(rv, i64(inner)));
  auto at = [&](const std::string &k) { return kir::add(base, kir::mul(kir::var(k), i64(inner))); };
  auto x = [&](const std::string &k) { return kir::cast(kb.load(in, at(k)), ct); };
  auto put = [&](const std::string &k, Expr v) {
    return kb.store(out, at(k), narrow(std::move(v), kb.bufferType(out)));
  };

  std::vector<Stmt> row;
  bool expOnce = false;
  if (op == AxisOp::Hardmax) {
    // The first maximum; a NaN counts as the maximum (numpy's argmax).
    std::string best = kb.freshName("best"), bv = kb.freshName("bv");
    Expr bestV = kir::var(bv, ct), c = x(k1);
    Expr better = fop(OpKind::And, fop(OpKind::Not, fop(OpKind::IsNaN, bestV)),
                      fop(OpKind::Or, fop(OpKind::IsNaN, c), fop(OpKind::Greater, c, bestV)));
    row.push_back(kir::decl(best, DType::I64, i64(0)));
    row.push_back(kir::decl(bv, ct, kir::cast(kb.load(in, base), ct)));
    row.push_back(kir::forLoop(
        k1, i64(n),
        kir::ifThen(better, kir::block({kir::assign(best, kir::var(k1)), kir::assign(bv, c)}))));
    Expr hit = fop(OpKind::Equal, kir::var(k2), kir::var(best));
    row.push_back(kir::forLoop(k2, i64(n), put(k2, kir::select(hit, fimm(1, ct), fimm(0, ct)))));
  } else {
    // Max, sum of exp(x - max), then the outputs. A row of -inf, or with +inf or NaN, gives
    // NaN as in the interpreter. Over a contiguous row the maximum takes vector lanes and
    // may ignore NaN operands: a NaN still makes its exp, the sum and so every output NaN
    // (a +inf does through inf - inf), the results a NaN-propagating maximum gives.
    std::string m = kb.freshName("max"), s = kb.freshName("sum");
    Expr mv = kir::var(m, ct), sv = kir::var(s, ct);
    row.push_back(kir::decl(m, ct, fimm(-kInf, ct)));
    row.push_back(kir::forLoop(k1, i64(n),
                               inner == 1 ? kir::accumulateIgnoringNaN(m, ct, x(k1))
                                          : kir::assign(m, fop(OpKind::Max, mv, x(k1)))));
    row.push_back(kir::decl(s, ct, fimm(0, ct)));
    // Softmax into a result of the compute type over contiguous rows: each exp once, kept in
    // the result while it is summed, then divided there (same values as exp(x - max) / sum).
    expOnce = op == AxisOp::Softmax && inner == 1 && kb.bufferType(out) == ct;
    if (expOnce) {
      std::string e = kb.freshName("e");
      Expr ev = kir::var(e, ct);
      row.push_back(
          kir::forLoop(k2, i64(n),
                       kir::block({kir::decl(e, ct, fop(OpKind::Exp, kir::sub(x(k2), mv))),
                                   put(k2, ev), kir::accumulate(s, kir::add(sv, ev))})));
    } else {
      row.push_back(kir::forLoop(
          k2, i64(n), kir::accumulate(s, kir::add(sv, fop(OpKind::Exp, kir::sub(x(k2), mv))))));
    }
    if (expOnce) {
      row.push_back(kir::forLoop(k3, i64(n), put(k3, kir::div(kb.load(out, at(k3)), sv))));
    } else if (op == AxisOp::Softmax) {
      row.push_back(
          kir::forLoop(k3, i64(n), put(k3, kir::div(fop(OpKind::Exp, kir::sub(x(k3), mv)), sv))));
    } else {
      std::string ls = kb.freshName("logsum");
      row.push_back(kir::decl(ls, ct, fop(OpKind::Log, sv)));
      row.push_back(
          kir::forLoop(k3, i64(n), put(k3, kir::sub(kir::sub(x(k3), mv), kir::var(ls, ct)))));
    }
  }
  int64_t rows = outer * inner;
  Sched sc;
  Stmt body = kir::forLoop(r, i64(rows), kir::block(row));
  sc.rows(r, rows, rows * n);
  if (inner == 1) {
    if (op != AxisOp::Hardmax) // the whole loop: its lanes keep partial maxima
      sc.s.steps.push_back({Step::Vectorize, k1, 0, {}});
    if (expOnce)
      sc.vectorize(k2, n);
    sc.vectorize(op == AxisOp::Hardmax ? k2 : k3, n);
  }
  return std::vector<kir::Kernel>{kb.finish(body, sc.s)};
}

// ---- layer_norm, rms_norm, lp_norm -------------------------------------------------------------

/// How a normalization walks its rows. On the CPU: one row per iteration of the rows loop
/// (parallel; an OpenCL grid of one work-item per row), its sums serial loops that the
/// schedule vectorizes. On an OpenCL device with a width G (lowerNormWorkGroup): one work-group
/// per row; work-item t takes elements t, t + G, ... of every pass, and a sum adds the items'
/// partial sums as a tree in local memory, a barrier per level, the total read by every item.
/// In the CPU's form a row of 65536 elements (a VAE decoder's group norm) is one work-item's
/// three serial passes, while the rest of the device waits.
class RowForm {
public:
  RowForm(KernelBuilder &kb, DType ct, int64_t width) : kb_(kb), ct_(ct), g_(width) {
    if (g_ > 0)
      t_ = kb.freshName("t");
  }
  bool onDevice() const { return g_ > 0; }

  /// Appends to `row` the declaration of `name` (of the compute type) = the sum of term(j)
  /// over j < count, walked by loop `loop` (which the CPU schedule vectorizes).
  void sum(std::vector<Stmt> &row, const std::string &loop, const std::string &name, int64_t count,
           const std::function<Expr(Expr)> &term) {
    if (!onDevice()) {
      row.push_back(kir::decl(name, ct_, fimm(0, ct_)));
      row.push_back(
          kir::forLoop(loop, i64(count),
                       kir::accumulate(name, kir::add(kir::var(name, ct_), term(kir::var(loop))))));
      return;
    }
    std::string part = kb_.freshName("part");
    row.push_back(kir::decl(part, ct_, fimm(0, ct_)));
    row.push_back(each(loop, count, [&](Expr j) {
      return kir::accumulate(part, kir::add(kir::var(part, ct_), term(j)));
    }));
    Expr t = kir::var(t_);
    row.push_back(kir::store(kPartial, t, kir::var(part, ct_)));
    row.push_back(kir::barrier());
    for (int64_t h = g_ / 2; h >= 1; h /= 2) {
      row.push_back(kir::ifThen(
          kir::lt(t, i64(h)), kir::store(kPartial, t,
                                         kir::add(kir::load(kPartial, ct_, t),
                                                  kir::load(kPartial, ct_, kir::add(t, i64(h)))))));
      row.push_back(kir::barrier());
    }
    row.push_back(kir::decl(name, ct_, kir::load(kPartial, ct_, i64(0))));
    // A later sum stores its partial results only after every item has read this total.
    row.push_back(kir::barrier());
  }

  /// body(j) for each j < count: all of them on the CPU, this work-item's share on a device.
  Stmt each(const std::string &loop, int64_t count, const std::function<Stmt(Expr)> &body) {
    if (!onDevice())
      return kir::forLoop(loop, i64(count), body(kir::var(loop)));
    Expr j = kir::add(kir::mul(kir::var(loop), i64(g_)), kir::var(t_));
    return kir::forLoop(loop, i64((count + g_ - 1) / g_),
                        kir::ifThen(kir::lt(j, i64(count)), body(j)));
  }

  /// `s` once per row (work-item 0 on a device).
  Stmt once(Stmt s) const {
    return onDevice() ? kir::ifThen(kir::lt(kir::var(t_), i64(1)), std::move(s)) : s;
  }

  /// The kernel: `row` for each of `rows` rows (loop `r`); `cpu` is the CPU form's schedule.
  kir::Kernel finish(const std::string &r, int64_t rows, std::vector<Stmt> row, kir::Schedule cpu) {
    if (!onDevice())
      return kb_.finish(kir::forLoop(r, i64(rows), kir::block(std::move(row))), std::move(cpu));
    Stmt nest = kir::forLoop(t_, i64(g_), kir::block(std::move(row)), kir::LoopKind::GpuThread);
    nest = kir::forLoop(r, i64(rows), nest, kir::LoopKind::GpuBlock);
    kir::Kernel k = kb_.finish(nest, {});
    k.locals.push_back({kb_.freshName("partial"), ct_, g_});
    return k;
  }

private:
  static constexpr int kPartial = kir::kLocalBufferBase;
  KernelBuilder &kb_;
  DType ct_;
  int64_t g_;
  std::string t_;
};

/// layer_norm; `width` > 0: the device form of RowForm.
Expected<std::vector<kir::Kernel>> lowerLayerNormRows(const Node &node, const std::string &prefix,
                                                      int64_t width) {
  NNC_TRY(checkFloat(node, 0, "input"));
  NNC_TRY(checkFloat(node, 1, "scale"));
  const Value *xv = node.operand(0), *sv = node.operand(1), *bv = node.operand(2);
  if (bv)
    NNC_TRY(checkFloat(node, 2, "bias"));
  Extents e = extentsOf(xv);
  NNC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(node.getInt("axis"), static_cast<int64_t>(e.size()), node));
  DType stash = node.getDType("stash_type");
  if (!isFloat(stash))
    return node.error("stash_type must be a float dtype, got {}", dtypeName(stash));
  double eps = node.getFloat("epsilon");
  DType xt = xv->dtype();
  DType ct = computeType({xt, stash, sv->dtype(), bv ? bv->dtype() : xt}, /*accurate=*/true);
  int64_t rows = product(e, 0, axis), cols = product(e, axis, e.size());
  if (rows == 0)
    return emptyKernel(node, prefix);
  Extents se = extentsOf(sv), be = bv ? extentsOf(bv) : Extents{};

  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), scale = kb.operand(1), bias = bv ? kb.operand(2) : -1;
  int out = kb.result(0);
  std::string r = kb.freshName("r"), c1 = kb.freshName("c"), c2 = kb.freshName("c"),
              c3 = kb.freshName("c");
  std::string sum = kb.freshName("sum"), mean = kb.freshName("mean"), sq = kb.freshName("sq"),
              inv = kb.freshName("inv");
  Expr rv = kir::var(r), meanV = kir::var(mean, ct), invV = kir::var(inv, ct);
  auto at = [&](Expr c) { return kir::add(kir::mul(rv, i64(cols)), std::move(c)); };
  auto xs = [&](Expr c) {
    return roundTo(kir::cast(kb.load(in, at(std::move(c))), ct), stash, ct);
  };
  Expr n = fimm(static_cast<double>(cols), ct);

  RowForm form(kb, ct, width);
  std::vector<Stmt> row;
  form.sum(row, c1, sum, cols, xs);
  row.push_back(kir::decl(mean, ct, roundTo(kir::div(kir::var(sum, ct), n), stash, ct)));
  form.sum(row, c2, sq, cols, [&](Expr c) {
    Expr d = kir::sub(xs(std::move(c)), meanV);
    return kir::mul(d, d);
  });
  row.push_back(kir::decl(
      inv, ct,
      roundTo(kir::div(fimm(1, ct),
                       fop(OpKind::Sqrt, kir::add(kir::div(kir::var(sq, ct), n), fimm(eps, ct)))),
              stash, ct)));
  if (node.numResults() > 1) {
    int mb = kb.result(1);
    row.push_back(form.once(kb.store(mb, rv, narrow(meanV, kb.bufferType(mb)))));
  }
  if (node.numResults() > 2) {
    int ib = kb.result(2);
    row.push_back(form.once(kb.store(ib, rv, narrow(invV, kb.bufferType(ib)))));
  }
  row.push_back(form.each(c3, cols, [&](Expr c) {
    Expr normalized = roundTo(kir::mul(kir::sub(xs(c), meanV), invV), xt, ct);
    Expr y = kir::mul(normalized,
                      kir::cast(kb.load(scale, broadcastFlat(se, e, axis, rv, c, cols)), ct));
    if (bias >= 0)
      y = kir::add(y, kir::cast(kb.load(bias, broadcastFlat(be, e, axis, rv, c, cols)), ct));
    return kb.store(out, at(c), narrow(y, kb.bufferType(out)));
  }));

  Sched sc;
  sc.rows(r, rows, rows * cols);
  for (const std::string &c : {c1, c2, c3})
    sc.s.steps.push_back({Step::Vectorize, c, 0, {}});
  return std::vector<kir::Kernel>{form.finish(r, rows, std::move(row), sc.s)};
}

Expected<std::vector<kir::Kernel>> lowerLayerNorm(const Node &node, const std::string &prefix) {
  return lowerLayerNormRows(node, prefix, 0);
}

/// rms_norm; `width` > 0: the device form of RowForm.
Expected<std::vector<kir::Kernel>> lowerRMSNormRows(const Node &node, const std::string &prefix,
                                                    int64_t width) {
  NNC_TRY(checkFloat(node, 0, "input"));
  NNC_TRY(checkFloat(node, 1, "scale"));
  const Value *xv = node.operand(0), *sv = node.operand(1);
  Extents e = extentsOf(xv);
  NNC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(node.getInt("axis"), static_cast<int64_t>(e.size()), node));
  DType stash = node.getDType("stash_type");
  if (!isFloat(stash))
    return node.error("stash_type must be a float dtype, got {}", dtypeName(stash));
  double eps = node.getFloat("epsilon");
  DType xt = xv->dtype(), ct = computeType({xt, stash, sv->dtype()}, /*accurate=*/true);
  int64_t rows = product(e, 0, axis), cols = product(e, axis, e.size());
  if (rows == 0)
    return emptyKernel(node, prefix);
  Extents se = extentsOf(sv);

  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), scale = kb.operand(1), out = kb.result(0);
  std::string r = kb.freshName("r"), c1 = kb.freshName("c"), c2 = kb.freshName("c");
  std::string sq = kb.freshName("sq"), rms = kb.freshName("rms");
  Expr rv = kir::var(r);
  auto at = [&](Expr c) { return kir::add(kir::mul(rv, i64(cols)), std::move(c)); };
  auto xs = [&](Expr c) {
    return roundTo(kir::cast(kb.load(in, at(std::move(c))), ct), stash, ct);
  };
  RowForm form(kb, ct, width);
  std::vector<Stmt> row;
  form.sum(row, c1, sq, cols, [&](Expr c) {
    Expr v = xs(std::move(c));
    return kir::mul(v, v);
  });
  row.push_back(kir::decl(
      rms, ct,
      roundTo(fop(OpKind::Sqrt,
                  kir::add(kir::div(kir::var(sq, ct), fimm(static_cast<double>(cols), ct)),
                           fimm(eps, ct))),
              stash, ct)));
  row.push_back(form.each(c2, cols, [&](Expr c) {
    Expr y = kir::mul(roundTo(kir::div(xs(c), kir::var(rms, ct)), xt, ct),
                      kir::cast(kb.load(scale, broadcastFlat(se, e, axis, rv, c, cols)), ct));
    return kb.store(out, at(c), narrow(y, kb.bufferType(out)));
  }));
  Sched sc;
  sc.rows(r, rows, rows * cols);
  sc.vectorize(c2, cols);
  return std::vector<kir::Kernel>{form.finish(r, rows, std::move(row), sc.s)};
}

Expected<std::vector<kir::Kernel>> lowerRMSNorm(const Node &node, const std::string &prefix) {
  return lowerRMSNormRows(node, prefix, 0);
}

Expected<std::vector<kir::Kernel>> lowerLpNorm(const Node &node, const std::string &prefix) {
  NNC_TRY(checkFloat(node, 0, "input"));
  const Value *xv = node.operand(0);
  Extents e = extentsOf(xv);
  NNC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(node.getInt("axis"), static_cast<int64_t>(e.size()), node));
  int64_t p = node.getInt("p");
  if (p != 1 && p != 2)
    return node.error("p must be 1 or 2, got {}", p);
  if (numElementsOf(e) == 0)
    return emptyKernel(node, prefix);
  int64_t outer = product(e, 0, axis), n = e[axis], inner = product(e, axis + 1, e.size());
  DType ct = computeType({xv->dtype()}, /*accurate=*/false);

  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), out = kb.result(0);
  std::string r = kb.freshName("r"), k1 = kb.freshName("k"), k2 = kb.freshName("k");
  std::string norm = kb.freshName("norm");
  Expr rv = kir::var(r), normV = kir::var(norm, ct);
  Expr base = inner == 1 ? kir::mul(rv, i64(n))
                         : kir::add(kir::mul(kir::div(rv, i64(inner)), i64(n * inner)),
                                    kir::mod(rv, i64(inner)));
  auto at = [&](const std::string &k) { return kir::add(base, kir::mul(kir::var(k), i64(inner))); };
  auto x = [&](const std::string &k) { return kir::cast(kb.load(in, at(k)), ct); };
  std::vector<Stmt> row;
  row.push_back(kir::decl(norm, ct, fimm(0, ct)));
  {
    Expr v = x(k1);
    Expr term = p == 1 ? fop(OpKind::Abs, v) : kir::mul(v, v);
    row.push_back(kir::forLoop(k1, i64(n), kir::accumulate(norm, kir::add(normV, term))));
  }
  if (p == 2)
    row.push_back(kir::assign(norm, fop(OpKind::Sqrt, normV)));
  // A zero vector stays zero (the ONNX test data expects 0, not 0/0).
  Expr y = kir::select(fop(OpKind::Equal, normV, fimm(0, ct)), fimm(0, ct), kir::div(x(k2), normV));
  row.push_back(kir::forLoop(k2, i64(n), kb.store(out, at(k2), narrow(y, kb.bufferType(out)))));
  int64_t rows = outer * inner;
  Sched sc;
  sc.rows(r, rows, rows * n);
  if (inner == 1)
    sc.vectorize(k2, n);
  return std::vector<kir::Kernel>{kb.finish(kir::forLoop(r, i64(rows), kir::block(row)), sc.s)};
}

// ---- group_norm, instance_norm, batch_norm (N, C, spatial...) ----------------------------------

Error checkChannelOperands(const Node &node, size_t first, size_t last, int64_t channels) {
  const char *names[] = {"input", "scale", "bias", "mean", "var"};
  for (size_t i = first; i <= last; ++i) {
    NNC_TRY(checkFloat(node, i, names[i]));
    Extents pe = extentsOf(node.operand(i));
    if (pe.size() != 1 || pe[0] != channels)
      return node.error("{} has extents {}, expected [{}]", names[i], extentsStr(pe), channels);
  }
  return Error::success();
}

/// Group norm (statistics rounded to `stash`, the normalized value to the input dtype) and
/// instance norm (groups == channels, no stash: no rounding, as the interpreter computes it
/// in double): statistics over each group of channels of each batch item.
/// group_norm and instance_norm (a group per channel); `width` > 0: the device form of RowForm.
Expected<std::vector<kir::Kernel>> lowerGroupedNorm(const Node &node, const std::string &prefix,
                                                    int64_t groups, std::optional<DType> stashOpt,
                                                    int64_t width) {
  NNC_TRY(checkFloat(node, 0, "input"));
  const Value *xv = node.operand(0);
  Extents e = extentsOf(xv);
  if (e.size() < 2)
    return node.error("input must have rank >= 2, got extents {}", extentsStr(e));
  int64_t n = e[0], c = e[1], spatial = product(e, 2, e.size());
  if (groups <= 0 || c % groups != 0)
    return node.error("channel count {} is not divisible by num_groups {}", c, groups);
  NNC_TRY(checkChannelOperands(node, 1, 2, c));
  double eps = node.getFloat("epsilon");
  DType xt = xv->dtype();
  DType ct =
      computeType({xt, stashOpt.value_or(xt), node.operand(1)->dtype(), node.operand(2)->dtype()},
                  /*accurate=*/true);
  DType stash = stashOpt.value_or(ct);
  int64_t cpg = c / groups, perGroup = cpg * spatial, rows = n * groups;
  if (rows == 0 || perGroup == 0)
    return emptyKernel(node, prefix);

  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), scale = kb.operand(1), bias = kb.operand(2), out = kb.result(0);
  std::string r = kb.freshName("r"), k1 = kb.freshName("k"), k2 = kb.freshName("k"),
              cg = kb.freshName("cg"), s = kb.freshName("s");
  std::string sum = kb.freshName("sum"), mean = kb.freshName("mean"), sq = kb.freshName("sq"),
              inv = kb.freshName("inv"), ch = kb.freshName("ch"), sc0 = kb.freshName("scale"),
              bi0 = kb.freshName("bias");
  Expr rv = kir::var(r), meanV = kir::var(mean, ct), invV = kir::var(inv, ct);
  Expr base = kir::mul(rv, i64(perGroup));
  auto xs = [&](Expr idx) { return roundTo(kir::cast(kb.load(in, idx), ct), stash, ct); };
  Expr cnt = fimm(static_cast<double>(perGroup), ct);

  RowForm form(kb, ct, width);
  std::vector<Stmt> row;
  form.sum(row, k1, sum, perGroup, [&](Expr k) { return xs(kir::add(base, std::move(k))); });
  row.push_back(kir::decl(mean, ct, roundTo(kir::div(kir::var(sum, ct), cnt), stash, ct)));
  form.sum(row, k2, sq, perGroup, [&](Expr k) {
    Expr d = kir::sub(xs(kir::add(base, std::move(k))), meanV);
    return kir::mul(d, d);
  });
  row.push_back(kir::decl(
      inv, ct,
      roundTo(kir::div(fimm(1, ct),
                       fop(OpKind::Sqrt, kir::add(kir::div(kir::var(sq, ct), cnt), fimm(eps, ct)))),
              stash, ct)));
  // Per channel of the group: y = normalized * scale[ch] + bias[ch].
  auto normalizedAt = [&](Expr idx) {
    Expr normalized = kir::mul(kir::sub(xs(std::move(idx)), meanV), invV);
    if (stashOpt) // group norm rounds to the input dtype; instance norm does not
      normalized = roundTo(normalized, xt, ct);
    return normalized;
  };
  Expr group = kir::mul(kir::mod(rv, i64(groups)), i64(cpg));
  if (form.onDevice()) {
    // One walk over the group; each element finds its channel.
    row.push_back(form.each(s, perGroup, [&](Expr k) {
      Expr c = kir::add(group, kir::div(k, i64(spatial)));
      Expr y = kir::add(kir::mul(normalizedAt(kir::add(base, k)), kir::cast(kb.load(scale, c), ct)),
                        kir::cast(kb.load(bias, c), ct));
      return kb.store(out, kir::add(base, k), narrow(y, kb.bufferType(out)));
    }));
  } else {
    Expr idx = kir::add(base, kir::add(kir::mul(kir::var(cg), i64(spatial)), kir::var(s)));
    Expr y = kir::add(kir::mul(normalizedAt(idx), kir::var(sc0, ct)), kir::var(bi0, ct));
    Stmt perChannel = kir::block({
        kir::decl(ch, DType::I64, kir::add(group, kir::var(cg))),
        kir::decl(sc0, ct, kir::cast(kb.load(scale, kir::var(ch)), ct)),
        kir::decl(bi0, ct, kir::cast(kb.load(bias, kir::var(ch)), ct)),
        kir::forLoop(s, i64(spatial), kb.store(out, idx, narrow(y, kb.bufferType(out)))),
    });
    row.push_back(kir::forLoop(cg, i64(cpg), perChannel));
  }

  Sched sc;
  sc.rows(r, rows, rows * perGroup);
  sc.vectorize(s, spatial);
  return std::vector<kir::Kernel>{form.finish(r, rows, std::move(row), sc.s)};
}

/// group_norm and instance_norm; `width` > 0: the device form of RowForm.
Expected<std::vector<kir::Kernel>> lowerGroupNormRows(const Node &node, const std::string &prefix,
                                                      int64_t width) {
  DType stash = node.getDType("stash_type");
  if (!isFloat(stash))
    return node.error("stash_type must be a float dtype, got {}", dtypeName(stash));
  return lowerGroupedNorm(node, prefix, node.getInt("num_groups"), stash, width);
}

Expected<std::vector<kir::Kernel>> lowerInstanceNormRows(const Node &node,
                                                         const std::string &prefix,
                                                         int64_t width) {
  NNC_TRY(checkFloat(node, 0, "input"));
  Extents e = extentsOf(node.operand(0));
  if (e.size() < 2)
    return node.error("input must have rank >= 2, got extents {}", extentsStr(e));
  return lowerGroupedNorm(node, prefix, e[1], std::nullopt, width);
}

Expected<std::vector<kir::Kernel>> lowerGroupNorm(const Node &node, const std::string &prefix) {
  return lowerGroupNormRows(node, prefix, 0);
}

Expected<std::vector<kir::Kernel>> lowerInstanceNorm(const Node &node, const std::string &prefix) {
  return lowerInstanceNormRows(node, prefix, 0);
}

Expected<std::vector<kir::Kernel>> lowerBatchNorm(const Node &node, const std::string &prefix) {
  NNC_TRY(checkFloat(node, 0, "input"));
  const Value *xv = node.operand(0);
  Extents e = extentsOf(xv);
  if (e.size() < 2)
    return node.error("input must have rank >= 2, got extents {}", extentsStr(e));
  int64_t n = e[0], c = e[1], spatial = product(e, 2, e.size());
  NNC_TRY(checkChannelOperands(node, 1, 4, c));
  double eps = node.getFloat("epsilon");
  DType ct = computeType({xv->dtype(), node.operand(1)->dtype(), node.operand(2)->dtype(),
                          node.operand(3)->dtype(), node.operand(4)->dtype()},
                         /*accurate=*/true);
  int64_t rows = n * c;
  if (rows == 0 || spatial == 0)
    return emptyKernel(node, prefix);

  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), scale = kb.operand(1), bias = kb.operand(2), mean = kb.operand(3),
      var = kb.operand(4), out = kb.result(0);
  std::string r = kb.freshName("r"), s = kb.freshName("s"), ch = kb.freshName("ch"),
              mul = kb.freshName("mul"), add = kb.freshName("add"), mn = kb.freshName("mean");
  Expr chV = kir::var(ch);
  auto param = [&](int b) { return kir::cast(kb.load(b, chV), ct); };
  // y = (x - mean) * inv * scale + bias, with inv = 1 / sqrt(var + eps).
  Expr inv = kir::div(fimm(1, ct), fop(OpKind::Sqrt, kir::add(param(var), fimm(eps, ct))));
  Expr idx = kir::add(kir::mul(kir::var(r), i64(spatial)), kir::var(s));
  Expr y = kir::add(
      kir::mul(kir::sub(kir::cast(kb.load(in, idx), ct), kir::var(mn, ct)), kir::var(mul, ct)),
      kir::var(add, ct));
  Stmt row = kir::block({
      kir::decl(ch, DType::I64, kir::mod(kir::var(r), i64(c))),
      kir::decl(mn, ct, param(mean)),
      kir::decl(mul, ct, kir::mul(inv, param(scale))),
      kir::decl(add, ct, param(bias)),
      kir::forLoop(s, i64(spatial), kb.store(out, idx, narrow(y, kb.bufferType(out)))),
  });
  Sched sc;
  sc.rows(r, rows, rows * spatial);
  sc.vectorize(s, spatial);
  return std::vector<kir::Kernel>{kb.finish(kir::forLoop(r, i64(rows), row), sc.s)};
}

// ---- rotary_embedding ------------------------------------------------------------------------

Expected<std::vector<kir::Kernel>> lowerRotaryEmbedding(const Node &node,
                                                        const std::string &prefix) {
  NNC_TRY(checkFloat(node, 0, "input"));
  NNC_TRY(checkFloat(node, 1, "cos_cache"));
  NNC_TRY(checkFloat(node, 2, "sin_cache"));
  const Value *xv = node.operand(0), *posVal = node.operand(3);
  Extents xe = extentsOf(xv), ce = extentsOf(node.operand(1));
  if (xe.size() != 3 && xe.size() != 4)
    return node.error("input must have rank 3 or 4, got extents {}", extentsStr(xe));
  NNC_ASSIGN_OR_RETURN(HeadView view, headView(node, xe, node.getInt("num_heads", 0), "input"));
  int64_t rot = node.getInt("rotary_embedding_dim", 0);
  if (rot == 0)
    rot = view.head;
  if (rot < 0 || rot % 2 != 0 || rot > view.head)
    return node.error("rotary dimension {} must be even and at most the head size {}", rot,
                      view.head);
  int64_t half = rot / 2;
  bool interleaved = node.getInt("interleaved", 0) != 0;
  if (extentsOf(node.operand(2)) != ce)
    return node.error("cos_cache {} and sin_cache {} differ", extentsStr(ce),
                      extentsStr(extentsOf(node.operand(2))));
  int64_t idBatch = 1, idSeq = 1;
  if (posVal) {
    Extents pe = extentsOf(posVal);
    if (!isInteger(posVal->dtype()) || pe.size() != 2)
      return node.error("position_ids must be a rank-2 integer tensor, got extents {}",
                        extentsStr(pe));
    idBatch = pe[0];
    idSeq = pe[1];
    if ((idBatch != 1 && idBatch != view.batch) || (idSeq != 1 && idSeq != view.seq))
      return node.error("position_ids extents {} do not match [batch {}, seq {}]", extentsStr(pe),
                        view.batch, view.seq);
    if (ce.size() != 2 || ce[1] != half)
      return node.error("cos_cache must be [max_position, {}] with position_ids, got {}", half,
                        extentsStr(ce));
  } else if (ce.size() != 3 || ce[2] != half || (ce[0] != 1 && ce[0] != view.batch) ||
             (ce[1] != 1 && ce[1] != view.seq)) {
    return node.error("cos_cache must be [{}, {}, {}] without position_ids, got {}", view.batch,
                      view.seq, half, extentsStr(ce));
  }
  int64_t rows = view.batch * view.seq * view.heads;
  if (rows == 0 || view.head == 0)
    return emptyKernel(node, prefix);
  DType ct = computeType({xv->dtype(), node.operand(1)->dtype(), node.operand(2)->dtype()},
                         /*accurate=*/true);

  KernelBuilder kb(node, prefix);
  int in = kb.operand(0), cosB = kb.operand(1), sinB = kb.operand(2), out = kb.result(0);
  int posB = posVal ? kb.operand(3) : -1;
  std::string r = kb.freshName("r"), i = kb.freshName("i"), d = kb.freshName("d"),
              cr = kb.freshName("crow"), x1 = kb.freshName("x1"), x2 = kb.freshName("x2"),
              cv = kb.freshName("cos"), sv = kb.freshName("sin");
  Expr rv = kir::var(r);
  // Row r = (b, s, h).
  Expr b = kir::div(rv, i64(view.seq * view.heads)),
       s = kir::mod(kir::div(rv, i64(view.heads)), i64(view.seq)),
       h = kir::mod(rv, i64(view.heads));
  Expr cacheRow;
  std::vector<Stmt> row;
  if (posVal) {
    Expr pidx = kir::add(kir::mul(idBatch == 1 ? i64(0) : b, i64(idSeq)), idSeq == 1 ? i64(0) : s);
    // An id out of range is the interpreter's error (a runtime check, once per row); the
    // cache is read at the id clamped into it, so no load leaves its buffer.
    Expr id = kb.bind(row, "pid", DType::I64, kir::cast(kb.load(posB, pidx), DType::I64));
    row.push_back(kb.check(
        kir::op(OpKind::Or, {kir::lt(id, i64(0)), kir::ge(id, i64(ce[0]))}), id,
        {node.describe() + ": position id ", fmt::format(" is out of range [0, {})", ce[0])}));
    cacheRow = kir::max(kir::min(id, i64(ce[0] - 1)), i64(0));
  } else {
    cacheRow = kir::add(kir::mul(ce[0] == 1 ? i64(0) : b, i64(ce[1])), ce[1] == 1 ? i64(0) : s);
  }
  Expr iv = kir::var(i);
  Expr i1 = interleaved ? kir::mul(iv, i64(2)) : iv;
  Expr i2 = interleaved ? kir::add(kir::mul(iv, i64(2)), i64(1)) : kir::add(iv, i64(half));
  Expr p1 = view.at(b, h, s, i1), p2 = view.at(b, h, s, i2);
  Expr cidx = kir::add(kir::mul(kir::var(cr), i64(half)), iv);
  Expr x1v = kir::var(x1, ct), x2v = kir::var(x2, ct), cosv = kir::var(cv, ct),
       sinv = kir::var(sv, ct);
  DType ot = kb.bufferType(out);
  Stmt pair = kir::block({
      kir::decl(cv, ct, kir::cast(kb.load(cosB, cidx), ct)),
      kir::decl(sv, ct, kir::cast(kb.load(sinB, cidx), ct)),
      kir::decl(x1, ct, kir::cast(kb.load(in, p1), ct)),
      kir::decl(x2, ct, kir::cast(kb.load(in, p2), ct)),
      kb.store(out, p1, narrow(kir::sub(kir::mul(cosv, x1v), kir::mul(sinv, x2v)), ot)),
      kb.store(out, p2, narrow(kir::add(kir::mul(sinv, x1v), kir::mul(cosv, x2v)), ot)),
  });
  row.push_back(kir::decl(cr, DType::I64, cacheRow));
  row.push_back(kir::forLoop(i, i64(half), pair));
  if (rot < view.head) {
    Expr pd = view.at(b, h, s, kir::add(kir::var(d), i64(rot)));
    row.push_back(kir::forLoop(d, i64(view.head - rot), kb.store(out, pd, kb.load(in, pd))));
  }
  Sched sc;
  sc.rows(r, rows, rows * view.head);
  return std::vector<kir::Kernel>{kb.finish(kir::forLoop(r, i64(rows), kir::block(row)), sc.s)};
}

} // namespace

namespace {

/// The length of a normalization's rows (what one work-group sums), or 0 for a node that is
/// not a float normalization of static shape.
int64_t normRowLength(const Node &node) {
  const Value *x = node.operand(0);
  if (!x || !isFloat(x->dtype()) || !isStatic(x->shape()))
    return 0;
  Extents e = extentsOf(x);
  switch (node.kind()) {
  case OpKind::LayerNorm:
  case OpKind::RMSNorm: {
    int64_t r = static_cast<int64_t>(e.size()), axis = node.getInt("axis");
    if (axis < -r || axis >= r)
      return 0;
    return product(e, static_cast<size_t>(axis < 0 ? axis + r : axis), e.size());
  }
  case OpKind::GroupNorm:
  case OpKind::InstanceNorm: {
    if (e.size() < 2)
      return 0;
    int64_t groups = node.kind() == OpKind::GroupNorm ? node.getInt("num_groups") : e[1];
    if (groups <= 0 || e[1] % groups != 0)
      return 0;
    return e[1] / groups * product(e, 2, e.size());
  }
  default:
    return 0;
  }
}

} // namespace

bool isWorkGroupNorm(const Node &node) {
  int64_t cols = normRowLength(node);
  return cols >= 64 && workGroupTreeWidth(cols, GpuTarget::generic()) > 0;
}

Expected<std::vector<kir::Kernel>> lowerNormWorkGroup(const Node &node, const std::string &prefix,
                                                      const tuning::LowerOptions &opts) {
  if (!opts.gpu)
    return node.error("the work-group normalization needs an OpenCL device");
  int64_t width = workGroupTreeWidth(normRowLength(node), *opts.gpu);
  switch (node.kind()) {
  case OpKind::LayerNorm:
    return lowerLayerNormRows(node, prefix, width);
  case OpKind::RMSNorm:
    return lowerRMSNormRows(node, prefix, width);
  case OpKind::GroupNorm:
    return lowerGroupNormRows(node, prefix, width);
  default:
    return lowerInstanceNormRows(node, prefix, width);
  }
}

void registerCompositeLowerers(LowererTable &t) {
  t[OpKind::Softmax] = [](const Node &n, const std::string &p) {
    return lowerAlongAxis(n, p, AxisOp::Softmax);
  };
  t[OpKind::LogSoftmax] = [](const Node &n, const std::string &p) {
    return lowerAlongAxis(n, p, AxisOp::LogSoftmax);
  };
  t[OpKind::Hardmax] = [](const Node &n, const std::string &p) {
    return lowerAlongAxis(n, p, AxisOp::Hardmax);
  };
  t[OpKind::LayerNorm] = lowerLayerNorm;
  t[OpKind::RMSNorm] = lowerRMSNorm;
  t[OpKind::GroupNorm] = lowerGroupNorm;
  t[OpKind::InstanceNorm] = lowerInstanceNorm;
  t[OpKind::BatchNorm] = lowerBatchNorm;
  t[OpKind::LpNorm] = lowerLpNorm;
  t[OpKind::RotaryEmbedding] = lowerRotaryEmbedding;
}

} // namespace nnc::lower
