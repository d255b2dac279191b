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
                             foldNoopReshape,        foldTransposeChain, foldReshapeChain};

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
