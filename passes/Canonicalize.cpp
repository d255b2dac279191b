// Canonicalization: local rewrite patterns applied to a fixed point.
//
// Algorithm:
//  1. Walk the nodes; try each pattern on each node. A pattern either leaves the graph alone
//     or rewrites uses of the node's result (the node itself becomes dead; DCE removes it).
//  2. Repeat until a walk changes nothing (bounded by kMaxIterations).
// Results that are graph outputs are not replaced, so output names survive.
#include <algorithm>
#include <cmath>

#include "nnc/ir/NNGeometry.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {
constexpr int kMaxIterations = 32;

/// True when v is a constant whose every element equals `x`.
bool isSplat(const Node &n, size_t operand, double x) {
  const Tensor *t = n.constantOperand(operand);
  if (!t || isStorageOnly(t->dtype()) || t->numElements() == 0)
    return false;
  for (int64_t i = 0; i < t->numElements(); ++i)
    if (t->elementAsDouble(i) != x)
      return false;
  return true;
}

/// Replaces the uses of n's single result with `v` when that changes no type.
bool forward(Graph &g, Node *n, Value *v) {
  Value *r = n->result();
  if (r == v || g.isOutput(r) || r->type() != v->type() || !isStatic(r->shape()) ||
      !g.hasUses(r))
    return false;
  g.replaceAllUsesWith(r, v);
  return true;
}

using Pattern = bool (*)(Graph &, Node *);

/// x+0, 0+x, x-0, x*1, 1*x, x/1, pow(x,1).
bool foldIdentityArithmetic(Graph &g, Node *n) {
  switch (n->kind()) {
  case OpKind::Add:
    return (isSplat(*n, 1, 0) && forward(g, n, n->operand(0))) ||
           (isSplat(*n, 0, 0) && forward(g, n, n->operand(1)));
  case OpKind::Mul:
    return (isSplat(*n, 1, 1) && forward(g, n, n->operand(0))) ||
           (isSplat(*n, 0, 1) && forward(g, n, n->operand(1)));
  case OpKind::Sub: return isSplat(*n, 1, 0) && forward(g, n, n->operand(0));
  case OpKind::Div:
  case OpKind::Pow: return isSplat(*n, 1, 1) && forward(g, n, n->operand(0));
  default: return false;
  }
}

/// x / c -> x * (1 / c) for a constant c whose every element is one normal power of two of
/// f32 or f64 with a normal reciprocal (attention's 1/sqrt(64) scaling): x * 2^-k is exactly
/// the real value x / 2^k, which both then round alike, for every x (infinities, NaN and
/// subnormal x included), and a multiply is several times cheaper than a divide.
bool foldDivByPowerOfTwo(Graph &g, Node *n) {
  if (n->kind() != OpKind::Div || g.isOutput(n->result()))
    return false;
  const Tensor *t = n->constantOperand(1);
  if (!t || (t->dtype() != DType::F32 && t->dtype() != DType::F64) || t->numElements() == 0)
    return false;
  double c = t->elementAsDouble(0);
  int exp = 0;
  if (!std::isfinite(c) || std::fabs(std::frexp(c, &exp)) != 0.5 || !isSplat(*n, 1, c))
    return false;
  double r = 1.0 / c;
  bool normal = t->dtype() == DType::F32
                    ? std::isnormal(static_cast<float>(r)) && std::isnormal(static_cast<float>(c))
                    : std::isnormal(r) && std::isnormal(c);
  if (!normal)
    return false;
  Tensor recip =
      t->dtype() == DType::F32
          ? Tensor::fromVector<float>(DType::F32, t->extents(),
                                      std::vector<float>(t->numElements(), static_cast<float>(r)))
          : Tensor::fromVector<double>(DType::F64, t->extents(),
                                       std::vector<double>(t->numElements(), r));
  Value *rv = g.createNode(OpKind::Constant, {}, {recip.type()}, {{"value", Attribute(recip)}}, "",
                           {n->operand(1)->name() + "_reciprocal"}, n)
                  ->result();
  Value *m = g.createNode(OpKind::Mul, {n->operand(0), rv}, {n->result()->type()}, {}, n->name(),
                          {n->result()->name() + "_as_mul"}, n)
                 ->result();
  g.replaceAllUsesWith(n->result(), m);
  return true;
}

/// neg(neg(x)) and not(not(x)).
bool foldInvolution(Graph &g, Node *n) {
  if (n->kind() != OpKind::Neg && n->kind() != OpKind::Not)
    return false;
  Node *p = n->operand(0)->producer();
  return p && p->kind() == n->kind() && forward(g, n, p->operand(0));
}

/// A cast to the operand's own dtype.
bool foldNoopCast(Graph &g, Node *n) {
  return n->kind() == OpKind::Cast && n->getDType("to") == n->operand(0)->dtype() &&
         forward(g, n, n->operand(0));
}

/// Shape-only ops (and zero pads) whose result has exactly the operand's static type.
bool foldNoopReshape(Graph &g, Node *n) {
  switch (n->kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Expand: return forward(g, n, n->operand(0));
  // PyTorch exports a Pad of zeros before some pools (DenseNet's transitions). Only zero
  // pads: a crop and a pad of the same size keep the type but shift the data.
  case OpKind::Pad: return isSplat(*n, 1, 0) && forward(g, n, n->operand(0));
  case OpKind::Transpose: {
    const std::vector<int64_t> &perm = n->getInts("perm");
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i))
        return false;
    return forward(g, n, n->operand(0));
  }
  default: return false;
  }
}

/// transpose(transpose(x, p), q) -> transpose(x, p[q[i]]).
bool foldTransposeChain(Graph &g, Node *n) {
  if (n->kind() != OpKind::Transpose)
    return false;
  Node *p = n->operand(0)->producer();
  if (!p || p->kind() != OpKind::Transpose)
    return false;
  const std::vector<int64_t> &inner = p->getInts("perm");
  const std::vector<int64_t> &outer = n->getInts("perm");
  std::vector<int64_t> composed(outer.size());
  for (size_t i = 0; i < outer.size(); ++i)
    composed[i] = inner[outer[i]];
  n->setOperand(0, p->operand(0));
  n->setAttr("perm", composed);
  return true;
}

/// reshape(v) to static extents `to`, named `name` (its shape constant `shapeName`), inserted
/// before `n` and attributed to it.
Value *reshapeBefore(Graph &g, Node *n, Value *v, const Extents &to, const std::string &name,
                     const std::string &shapeName) {
  Tensor shape = Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(to.size())}, to);
  Value *sv = g.createNode(OpKind::Constant, {}, {shape.type()}, {{"value", Attribute(shape)}}, "",
                           {shapeName}, n)
                  ->result();
  return g
      .createNode(OpKind::Reshape, {v, sv}, {TensorType(v->dtype(), shapeFromExtents(to))}, {},
                  n->name(), {name}, n)
      ->result();
}

/// A transpose that moves only dims of extent 1 (the others keep their order) is a reshape:
/// [1,197,768] -> [197,1,768] reorders no element. As a reshape it costs no copy (the buffer
/// plan aliases it) and fuses as a view.
bool foldUnitTranspose(Graph &g, Node *n) {
  if (n->kind() != OpKind::Transpose || g.isOutput(n->result()))
    return false;
  std::optional<Extents> in = staticExtents(n->operand(0)->shape()),
                         out = staticExtents(n->result()->shape());
  if (!in || !out || in->size() != out->size())
    return false;
  const std::vector<int64_t> &perm = n->getInts("perm");
  if (perm.size() != in->size())
    return false;
  int64_t last = -1;
  bool moves = false;
  for (size_t i = 0; i < perm.size(); ++i) {
    moves = moves || perm[i] != static_cast<int64_t>(i);
    if ((*in)[perm[i]] == 1)
      continue;
    if (perm[i] < last)
      return false;
    last = perm[i];
  }
  if (!moves)
    return false;
  g.replaceAllUsesWith(n->result(),
                       reshapeBefore(g, n, n->operand(0), *out, n->result()->name() + "_reshaped",
                                     n->result()->name() + "_shape"));
  return true;
}

/// reshape(reshape(x, a), b) -> reshape(x, b) when b does not copy dims (no 0 entries, or
/// allowzero) from the intermediate.
bool foldReshapeChain(Graph &g, Node *n) {
  if (n->kind() != OpKind::Reshape)
    return false;
  Node *p = n->operand(0)->producer();
  if (!p || (p->kind() != OpKind::Reshape && p->kind() != OpKind::Flatten &&
             p->kind() != OpKind::Squeeze && p->kind() != OpKind::Unsqueeze))
    return false;
  const Tensor *shape = n->constantOperand(1);
  if (!shape)
    return false;
  if (n->getInt("allowzero", 0) == 0)
    for (int64_t d : shape->toInt64Vector())
      if (d == 0)
        return false;
  n->setOperand(0, p->operand(0));
  return true;
}

/// A two-operand einsum that is a (batched) product, as matmul between views:
/// einsum(A, B) -> transpose(reshape(matmul(reshape(transpose(A)), reshape(transpose(B))))).
/// Each label is a batch label (both operands and the result), a row label (A and the
/// result), a column label (B and the result) or a contracted one (both operands, not the
/// result); A is laid out [batch, rows, contracted], B [batch, contracted, columns], and the
/// product's [batch, rows, columns] is put in the result's order. Identity transposes and
/// reshapes are left out (an attention's "bhid,bhjd->bhij" is matmul(A, transpose(B))). The
/// generic einsum kernel runs one scalar loop nest, without the GEMM's register tiles and
/// vectors, so every product that can be a matmul becomes one. Left to it: a label repeated
/// in one term (a diagonal), one summed in one operand only, batch or contracted extents that
/// differ (broadcast), dtypes other than f32 and f64, and results that are graph outputs.
bool einsumAsMatMul(Graph &g, Node *n) {
  if (n->kind() != OpKind::Einsum || n->numOperands() != 2 || g.isOutput(n->result()) ||
      !g.hasUses(n->result()))
    return false;
  Value *a = n->operand(0), *b = n->operand(1), *y = n->result();
  DType t = y->dtype();
  if (!a || !b || (t != DType::F32 && t != DType::F64) || a->dtype() != t || b->dtype() != t)
    return false;
  std::optional<Extents> ae = staticExtents(a->shape()), be = staticExtents(b->shape()),
                         ye = staticExtents(y->shape());
  if (!ae || !be || !ye)
    return false;
  Expected<EinsumLabels> parsed =
      parseEinsum(*n, {static_cast<int64_t>(ae->size()), static_cast<int64_t>(be->size())});
  if (!parsed)
    return false;
  const std::vector<int> &la = parsed->operands[0], &lb = parsed->operands[1], &lo = parsed->output;
  auto distinct = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
  };
  if (la.size() != ae->size() || lb.size() != be->size() || lo.size() != ye->size() ||
      !distinct(la) || !distinct(lb) || !distinct(lo))
    return false;
  auto pos = [](const std::vector<int> &v, int l) {
    auto it = std::find(v.begin(), v.end(), l);
    return it == v.end() ? int64_t(-1) : static_cast<int64_t>(it - v.begin());
  };
  std::vector<int> batch, rows, cols, contracted;
  for (int l : lo) {
    bool inA = pos(la, l) >= 0, inB = pos(lb, l) >= 0;
    if (inA && inB)
      batch.push_back(l);
    else if (inA)
      rows.push_back(l);
    else if (inB)
      cols.push_back(l);
    else
      return false;
  }
  for (int l : la)
    if (pos(lo, l) < 0) {
      if (pos(lb, l) < 0)
        return false; // summed over in A alone
      contracted.push_back(l);
    }
  for (int l : lb)
    if (pos(lo, l) < 0 && pos(la, l) < 0)
      return false; // summed over in B alone
  for (const std::vector<int> *shared : {&batch, &contracted})
    for (int l : *shared)
      if ((*ae)[pos(la, l)] != (*be)[pos(lb, l)])
        return false;

  auto typeOf = [&](const Extents &e) { return TensorType(t, shapeFromExtents(e)); };
  std::string base = y->name();
  // `v` with its dims in the order of `want` (labels of `have`, v's dims).
  auto permuted = [&](Value *v, const std::vector<int> &have, const std::vector<int> &want,
                      const std::string &tag) {
    Extents e = *staticExtents(v->shape());
    std::vector<int64_t> perm;
    Extents pe;
    for (int l : want) {
      perm.push_back(pos(have, l));
      pe.push_back(e[pos(have, l)]);
    }
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity = identity && perm[i] == static_cast<int64_t>(i);
    if (identity)
      return v;
    return g
        .createNode(OpKind::Transpose, {v}, {typeOf(pe)}, {{"perm", perm}}, n->name(), {base + tag},
                    n)
        ->result();
  };
  auto reshaped = [&](Value *v, const Extents &to, const std::string &tag) {
    return *staticExtents(v->shape()) == to
               ? v
               : reshapeBefore(g, n, v, to, base + tag, base + tag + "_shape");
  };
  auto extentOf = [&](int l) {
    int64_t p = pos(la, l);
    return p >= 0 ? (*ae)[p] : (*be)[pos(lb, l)];
  };
  auto product = [&](const std::vector<int> &ls) {
    int64_t p = 1;
    for (int l : ls)
      p *= extentOf(l);
    return p;
  };
  Extents batchE;
  for (int l : batch)
    batchE.push_back(extentOf(l));
  int64_t M = product(rows), K = product(contracted), N = product(cols);
  auto cat = [](std::vector<int> x, const std::vector<int> &y2, const std::vector<int> &z) {
    x.insert(x.end(), y2.begin(), y2.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  auto with = [&](Extents e, std::initializer_list<int64_t> tail) {
    e.insert(e.end(), tail);
    return e;
  };
  Value *a2 = reshaped(permuted(a, la, cat(batch, rows, contracted), "_lhs_t"),
                       with(batchE, {M, K}), "_lhs");
  Value *b2 = reshaped(permuted(b, lb, cat(batch, contracted, cols), "_rhs_t"),
                       with(batchE, {K, N}), "_rhs");
  Value *mm = g.createNode(OpKind::MatMul, {a2, b2}, {typeOf(with(batchE, {M, N}))}, {}, n->name(),
                           {base + "_matmul"}, n)
                  ->result();
  std::vector<int> produced = cat(batch, rows, cols);
  Extents producedE;
  for (int l : produced)
    producedE.push_back(extentOf(l));
  Value *r = permuted(reshaped(mm, producedE, "_unflat"), produced, lo, "_out");
  g.replaceAllUsesWith(y, r);
  return true;
}

/// An i64 vector constant inserted before `n`.
Value *i64Constant(Graph &g, Node *n, const std::vector<int64_t> &v, const std::string &name) {
  Tensor t = Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v);
  return g.createNode(OpKind::Constant, {}, {t.type()}, {{"value", Attribute(t)}}, "", {name}, n)
      ->result();
}

/// A conv's kernel taps that read only padding, for every output, are dropped: the weight is
/// sliced to the taps that reach the input and the pads shrink by the dropped taps' reach, so
/// the output and every remaining tap's input stay where they were. DeepLabV3's ASPP convs
/// (3x3, dilation 24 and 36, padding = dilation) on a 14x14 map reach the input only with
/// their centre tap: they become 1x1 convs (the pointwise fast path) instead of computing
/// eight taps of zeros. Taps are kept where dropping them would need a negative pad. The
/// conv is rewritten in place (a graph output keeps its name).
bool convDropDeadTaps(Graph &g, Node *n) {
  if (n->kind() != OpKind::Conv || n->numResults() != 1)
    return false;
  std::optional<Extents> xs = staticExtents(n->operand(0)->shape()),
                         ws = staticExtents(n->operand(1)->shape()),
                         ys = staticExtents(n->result()->shape());
  if (!xs || !ws || !ys || xs->size() < 3 || ws->size() != xs->size() || ys->size() != xs->size())
    return false;
  size_t D = xs->size() - 2;
  std::string autoPad = n->getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID")
    return false;
  Expected<WindowAttrs> a = readWindowAttrs(*n, D);
  if (!a)
    return false;
  std::vector<int64_t> starts, ends, axes, pads = a->pads;
  for (size_t d = 0; d < D; ++d) {
    int64_t in = (*xs)[d + 2], K = (*ws)[d + 2], out = (*ys)[d + 2], s = a->strides[d],
            dil = a->dilations[d], pb = a->pads[d], pe = a->pads[d + D];
    if (in <= 0 || out <= 0 || s <= 0 || dil <= 0)
      return false;
    // Tap k reads input o*s - pb + k*dil; its first output at or after position 0 must be
    // inside the input.
    auto live = [&](int64_t k) {
      int64_t c = k * dil - pb;
      int64_t o = c >= 0 ? 0 : (-c + s - 1) / s;
      return o < out && o * s + c < in;
    };
    int64_t k0 = 0, k1 = K;
    while (k0 < K && !live(k0))
      ++k0;
    while (k1 > k0 && !live(k1 - 1))
      --k1;
    if (k0 >= k1)
      return false; // no tap reaches the input: left to the lowering
    k0 = std::min(k0, pb / dil);
    k1 = std::max(k1, K - pe / dil);
    if (k0 == 0 && k1 == K)
      continue;
    starts.push_back(k0);
    ends.push_back(k1);
    axes.push_back(static_cast<int64_t>(d + 2));
    pads[d] = pb - k0 * dil;
    pads[d + D] = pe - (K - k1) * dil;
  }
  if (axes.empty())
    return false;
  const std::string base = n->result()->name();
  Extents wsSliced = *ws;
  for (size_t i = 0; i < axes.size(); ++i)
    wsSliced[axes[i]] = ends[i] - starts[i];
  Value *w = g.createNode(OpKind::Slice,
                          {n->operand(1), i64Constant(g, n, starts, base + "_taps_starts"),
                           i64Constant(g, n, ends, base + "_taps_ends"),
                           i64Constant(g, n, axes, base + "_taps_axes")},
                          {TensorType(n->operand(1)->dtype(), shapeFromExtents(wsSliced))}, {},
                          n->name(), {base + "_live_taps"}, n)
                 ->result();
  n->setOperand(1, w);
  n->setAttr("pads", pads);
  n->setAttr("auto_pad", std::string("NOTSET"));
  if (n->hasAttr("kernel_shape")) {
    std::vector<int64_t> ks(wsSliced.begin() + 2, wsSliced.end());
    n->setAttr("kernel_shape", ks);
  }
  return true;
}

const Pattern kPatterns[] = {foldIdentityArithmetic, foldInvolution,      foldNoopCast,
                             foldNoopReshape,        foldTransposeChain,  foldReshapeChain,
                             foldUnitTranspose,      foldDivByPowerOfTwo, einsumAsMatMul,
                             convDropDeadTaps};

class CanonicalizePass : public Pass {
public:
  std::string_view name() const override { return "canonicalize"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (int it = 0; it < kMaxIterations; ++it) {
      bool any = false;
      for (Node *n : g.nodes())
        for (Pattern p : kPatterns)
          if (p(g, n)) {
            addStat("rewrites");
            any = true;
          }
      if (!any)
        break;
      changed = true;
    }
    return changed;
  }
};
} // namespace

std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }

} // namespace nnc
