// Canonicalization: local rewrite patterns applied to a fixed point.
//
// Algorithm:
//  1. Walk the nodes; try each pattern on each node. A pattern either leaves the graph alone
//     or rewrites uses of the node's result (the node itself becomes dead; DCE removes it).
//  2. Repeat until a walk changes nothing (bounded by kMaxIterations).
// Results that are graph outputs are not replaced, so output names survive.
#include <cmath>

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
  Tensor shape = Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(out->size())}, *out);
  Value *sv = g.createNode(OpKind::Constant, {}, {shape.type()}, {{"value", Attribute(shape)}}, "",
                           {n->result()->name() + "_shape"}, n)
                  ->result();
  Value *r = g.createNode(OpKind::Reshape, {n->operand(0), sv}, {n->result()->type()}, {},
                          n->name(), {n->result()->name() + "_reshaped"}, n)
                 ->result();
  g.replaceAllUsesWith(n->result(), r);
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

const Pattern kPatterns[] = {foldIdentityArithmetic, foldInvolution,     foldNoopCast,
                             foldNoopReshape,        foldTransposeChain, foldReshapeChain,
                             foldUnitTranspose,      foldDivByPowerOfTwo};

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
