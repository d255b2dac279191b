// Reverse-mode autodiff over a graph: nnc::gradients (the rules are in Gradients.def).
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "nnc/ir/Gradients.h"
#include "nnc/ir/Loop.h"

namespace nnc {

namespace {

using Ints = std::vector<int64_t>;

/// The node producing `v` when it is `kind`, else null.
Node *producedBy(Value *v, OpKind kind) {
  Node *p = v ? v->producer() : nullptr;
  return p && p->kind() == kind ? p : nullptr;
}

/// a @ b of two 2-D operands (no packed weight), else null.
Node *matMul2d(Value *v) {
  Node *m = producedBy(v, OpKind::MatMul);
  if (!m || m->hasAttr("packed_n") || m->operand(0)->rank() != 2 || m->operand(1)->rank() != 2)
    return nullptr;
  return m;
}

/// The operand of a 2-D transpose producing `v`, else null.
Value *transposed2d(Value *v) {
  Node *t = producedBy(v, OpKind::Transpose);
  return t && v->rank() == 2 && t->getInts("perm") == Ints{1, 0} ? t->operand(0) : nullptr;
}

/// concat(vs, axis); of the transposes' operands, transposed, where every v is a 2-D
/// transpose (concat(x_i^T, 1) = concat(x_i, 0)^T).
Value *concat2d(GradEmitter &e, const std::vector<Value *> &vs, int64_t axis) {
  if (vs.size() == 1)
    return vs[0];
  std::vector<Value *> inner;
  for (Value *v : vs)
    if (Value *x = transposed2d(v))
      inner.push_back(x);
  if (inner.size() == vs.size())
    return e.op(OpKind::Transpose, {e.op(OpKind::Concat, inner, {{"axis", 1 - axis}})},
                {{"perm", Ints{1, 0}}});
  return e.op(OpKind::Concat, vs, {{"axis", axis}});
}

/// v^T for a 2-D v: the operand of a transpose, else a new transpose.
Value *transpose2d(GradEmitter &e, Value *v) {
  if (Value *x = transposed2d(v))
    return x;
  return e.op(OpKind::Transpose, {v}, {{"perm", Ints{1, 0}}});
}

/// sum_i a_i @ b_i as one matmul over the joined inner dims, [a_1 .. a_k] @ [b_1; ..; b_k]:
/// a weight used at every step of an unrolled recurrence gets one GEMM with K = steps *
/// batch instead of one small GEMM and one weight-sized add per step.
Value *sumMatMuls(GradEmitter &e, const std::vector<std::pair<Value *, Value *>> &mms) {
  std::vector<Value *> as, bs;
  for (const auto &[a, b] : mms) {
    as.push_back(a);
    bs.push_back(b);
  }
  return e.op(OpKind::MatMul, {concat2d(e, as, 1), concat2d(e, bs, 0)});
}

/// The (axis, begin, end) of a constant-mode, zero-valued pad that pads one axis only, for
/// a result of extent `dim` there; nullopt otherwise.
struct PadPiece {
  int64_t axis, begin, end;
  Value *inner;
};
std::optional<PadPiece> padPiece(Value *v) {
  Node *p = producedBy(v, OpKind::Pad);
  if (!p || p->getString("mode") != "constant" || (p->numOperands() > 2 && p->operand(2)))
    return std::nullopt;
  const Tensor *padsT = p->constantOperand(1);
  std::optional<Extents> ext = staticExtents(v->shape());
  if (!padsT || !ext)
    return std::nullopt;
  Ints pads = padsT->toInt64Vector();
  int64_t r = v->rank();
  std::optional<PadPiece> piece;
  for (int64_t a = 0; a < r; ++a) {
    int64_t lo = pads[static_cast<size_t>(a)], hi = pads[static_cast<size_t>(a + r)];
    if (lo == 0 && hi == 0)
      continue;
    if (piece || lo < 0 || hi < 0)
      return std::nullopt;
    piece = PadPiece{a, lo, (*ext)[static_cast<size_t>(a)] - hi, p->operand(0)};
  }
  return piece;
}

/// The sum of a value's gradient contributions. Two forms are joined rather than added:
///  1. Matmuls (and transposed matmuls) of 2-D operands: one matmul (sumMatMuls).
///  2. Zero pads of the slices of a value that tile one of its axes (the gates of a
///     recurrent step sliced from one matmul): the concatenation of the slices' gradients.
Value *sumContributions(GradEmitter &e, const std::vector<Value *> &parts) {
  if (parts.size() == 1)
    return parts[0];
  // 2. Pads tiling one axis exactly.
  std::vector<PadPiece> pieces;
  for (Value *v : parts)
    if (std::optional<PadPiece> pc = padPiece(v))
      pieces.push_back(*pc);
  if (pieces.size() == parts.size()) {
    std::sort(pieces.begin(), pieces.end(),
              [](const PadPiece &a, const PadPiece &b) { return a.begin < b.begin; });
    bool tiles = pieces[0].begin == 0;
    for (size_t i = 0; tiles && i < pieces.size(); ++i)
      tiles = pieces[i].axis == pieces[0].axis && (i == 0 || pieces[i].begin == pieces[i - 1].end);
    int64_t dim = 0;
    if (tiles) {
      std::optional<Extents> ext = staticExtents(parts[0]->shape());
      dim = (*ext)[static_cast<size_t>(pieces[0].axis)];
    }
    if (tiles && pieces.back().end == dim) {
      std::vector<Value *> inner;
      for (const PadPiece &pc : pieces)
        inner.push_back(pc.inner);
      return e.op(OpKind::Concat, inner, {{"axis", pieces[0].axis}});
    }
  }
  // 1. Matmuls, plain and transposed ((a b)^T = b^T a^T), joined into one.
  std::vector<std::pair<Value *, Value *>> mms;
  std::vector<Value *> rest;
  for (Value *v : parts) {
    Value *tx = transposed2d(v);
    if (Node *m = matMul2d(v))
      mms.push_back({m->operand(0), m->operand(1)});
    else if (Node *tm = tx ? matMul2d(tx) : nullptr)
      mms.push_back({transpose2d(e, tm->operand(1)), transpose2d(e, tm->operand(0))});
    else
      rest.push_back(v);
  }
  if (mms.size() > 1)
    rest.push_back(sumMatMuls(e, mms));
  else
    rest = parts;
  Value *sum = rest[0];
  for (size_t i = 1; i < rest.size(); ++i)
    sum = e.add(sum, rest[i]);
  return sum;
}

} // namespace

Expected<std::vector<Value *>> gradients(Graph &g, Value *loss, const std::vector<Value *> &wrt) {
  NNC_USER_CHECK(loss, "gradients: no loss value");
  NNC_USER_CHECK(isFloat(loss->dtype()), "gradients: the loss {} is not a float value",
                 loss->name());
  std::optional<Extents> lossExt = staticExtents(loss->shape());
  NNC_USER_CHECK(lossExt && checkedNumElements(*lossExt) == 1,
                 "gradients: the loss {} must have one element, got {}", loss->name(),
                 loss->type().str());
  NNC_USER_CHECK(loss->dtype() == DType::F32 || loss->dtype() == DType::F64,
                 "gradients: loss dtype {} is not supported (f32 or f64)",
                 dtypeName(loss->dtype()));
  GradEmitter e(g);
  Tensor one = Tensor::zeros(loss->dtype(), *lossExt);
  if (loss->dtype() == DType::F64)
    *one.data<double>() = 1.0;
  else
    *one.data<float>() = 1.0f;
  Value *seed = e.constant(one);
  if (!e.ok())
    return e.error();
  return vjp(g, {loss}, {seed}, wrt);
}

Expected<std::vector<Value *>> vjp(Graph &g, const std::vector<Value *> &ys,
                                   const std::vector<Value *> &dys,
                                   const std::vector<Value *> &wrt) {
  NNC_ASSERT(ys.size() == dys.size(), "vjp: {} values but {} cotangents", ys.size(), dys.size());
  for (size_t i = 0; i < ys.size(); ++i)
    NNC_USER_CHECK(!dys[i] || (ys[i] && dys[i]->type() == ys[i]->type()),
                   "vjp: the cotangent of {} is {}", ys[i] ? ys[i]->name() : "(null)",
                   dys[i]->type().str());
  for (Value *v : wrt)
    NNC_USER_CHECK(v && isFloat(v->dtype()), "gradients: {} is not a float value",
                   v ? v->name() : "(null)");

  // 1. Values that depend on a wrt value (float only: indices carry no gradient), and the
  //    nodes some seeded value depends on.
  std::vector<Node *> nodes;
  std::set<const Value *> depends;
  std::set<const Node *> needed;
  auto differentiable = [&](const Node &n) {
    for (Value *o : n.operands())
      if (o && depends.count(o))
        return true;
    return false;
  };
  auto mark = [&] {
    nodes = g.nodes();
    depends = std::set<const Value *>(wrt.begin(), wrt.end());
    for (Node *n : nodes)
      if (differentiable(*n))
        for (Value *r : n->results())
          if (isFloat(r->dtype()))
            depends.insert(r);
    needed.clear();
    std::vector<const Value *> work;
    for (size_t i = 0; i < ys.size(); ++i)
      if (dys[i])
        work.push_back(ys[i]);
    while (!work.empty()) {
      const Value *v = work.back();
      work.pop_back();
      Node *p = v->producer();
      if (!p || !needed.insert(p).second)
        continue;
      for (Value *o : p->operands())
        if (o)
          work.push_back(o);
    }
  };
  mark();
  // Loops on the path first return, per step, what their gradient reads (saveScanSteps).
  bool saved = false;
  for (Node *n : nodes)
    if (n->kind() == OpKind::Scan && needed.count(n) && differentiable(*n)) {
      NNC_TRY(saveScanSteps(*n));
      saved = true;
    }
  if (saved)
    mark();

  // 2. Reverse walk, summing each operand's gradient contributions.
  // Each value's contributions are kept apart until its producer's rule needs their sum,
  // so that sumContributions sees them all.
  GradEmitter e(g);
  std::map<const Value *, std::vector<Value *>> parts;
  auto gradOf = [&](const Value *v) -> Value * {
    auto pi = parts.find(v);
    if (pi == parts.end())
      return nullptr;
    if (pi->second.size() > 1)
      pi->second = {sumContributions(e, pi->second)};
    return pi->second[0];
  };
  for (size_t i = 0; i < ys.size(); ++i)
    if (dys[i])
      parts[ys[i]].push_back(dys[i]);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node &n = **it;
    if (!needed.count(&n))
      continue;
    std::vector<Value *> dy;
    bool any = false;
    for (Value *r : n.results()) {
      dy.push_back(gradOf(r));
      any = any || dy.back();
    }
    if (!any || !differentiable(n))
      continue;
    GradientRule rule = gradientRule(n.kind());
    if (!rule)
      return n.error("no gradient rule for op {}", n.opName());
    // A float result that does not reach the loss has gradient zero (rules then see a
    // gradient for every float result).
    for (size_t i = 0; i < dy.size(); ++i)
      if (!dy[i] && isFloat(n.result(i)->dtype()))
        dy[i] = e.zerosLike(n.result(i));
    std::vector<Value *> dx = rule(e, n, dy);
    if (!e.ok())
      return e.error();
    NNC_ASSERT(dx.size() == n.numOperands(),
               "gradient rule of {} gave {} gradients for {} operands", n.opName(), dx.size(),
               n.numOperands());
    for (size_t i = 0; i < dx.size(); ++i) {
      Value *o = n.operand(i);
      if (!o || !dx[i] || !depends.count(o))
        continue;
      NNC_ASSERT(dx[i]->dtype() == o->dtype() && dx[i]->rank() == o->rank(),
                 "gradient of operand {} of {} is {}, the operand {}", i, n.describe(),
                 dx[i]->type().str(), o->type().str());
      parts[o].push_back(dx[i]);
    }
    if (!e.ok())
      return e.error();
  }

  // 3. Gradients of wrt, zeros where the loss does not depend on it.
  std::vector<Value *> out;
  for (Value *v : wrt) {
    Value *gv = gradOf(v);
    out.push_back(gv ? gv : e.zerosLike(v));
  }
  if (!e.ok())
    return e.error();
  return out;
}

} // namespace nnc
