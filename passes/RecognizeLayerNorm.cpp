// Recognizes the decomposed LayerNorm that exporters emit and replaces it with one
// `layer_norm` node (a single row kernel in code generation):
//
//   mean = reduce_mean(x) {axes = [a..r-1], keepdims = 1}
//   d    = sub(x, mean)
//   p    = pow(d, 2)            (or mul(d, d))
//   var  = reduce_mean(p)       (same axes, keepdims = 1)
//   s    = sqrt(add(var, eps))  (eps a one-element constant, either operand order)
//   n    = div(d, s)
//   y    = add(mul(n, gamma), beta)   (the mul and the add optional, either operand order;
//                                      gamma and beta constants over the normalized dims)
//
// Algorithm: for each reduce_mean, match the chain forward; every intermediate must have
// exactly the uses the pattern names and must not be a graph output. On a match, insert
// layer_norm(x, gamma or ones, beta?) {axis = a, epsilon = eps}, point the uses of y at it
// and erase the chain.
#include "PatternUtil.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

using namespace pattern;

class RecognizeLayerNormPass : public Pass {
public:
  std::string_view name() const override { return "recognize-layer-norm"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    int64_t n = matchToFixedPoint(g, [&](Node *r) { return matchAt(g, r); });
    addStat("layer-norms", n);
    return n > 0;
  }

private:
  bool matchAt(Graph &g, Node *r1) {
    int64_t axis = trailingReduceMeanAxis(*r1);
    if (axis < 0)
      return false;
    Value *x = r1->operand(0);
    DType t = x->dtype();
    if (t != DType::F32 && t != DType::F64)
      return false;
    int64_t normRank = x->rank() - axis;
    Node *sub = onlyUser(g, r1->result());
    if (!sub || sub->kind() != OpKind::Sub || sub->operand(0) != x ||
        sub->operand(1) != r1->result())
      return false;
    Value *d = sub->result();
    if (g.isOutput(d))
      return false;
    std::vector<Node *> dUsers = g.users(d);
    if (dUsers.size() != 2)
      return false;
    Node *sq = nullptr, *div = nullptr;
    for (Node *u : dUsers) {
      if (u->kind() == OpKind::Div && u->operand(0) == d && u->operand(1) != d)
        div = u;
      else if (u->kind() == OpKind::Mul && u->operand(0) == d && u->operand(1) == d)
        sq = u;
      else if (u->kind() == OpKind::Pow && u->operand(0) == d &&
               scalarConstant(u->operand(1)) == 2.0)
        sq = u;
    }
    if (!sq || !div)
      return false;
    Node *r2 = onlyUser(g, sq->result());
    if (!r2 || trailingReduceMeanAxis(*r2) != axis || r2->operand(0) != sq->result())
      return false;
    Node *addEps = onlyUser(g, r2->result());
    if (!addEps || addEps->kind() != OpKind::Add)
      return false;
    std::optional<double> eps = scalarConstant(otherOperand(addEps, r2->result()));
    if (!eps || *eps < 0)
      return false;
    Node *sqrt = onlyUser(g, addEps->result());
    if (!sqrt || sqrt->kind() != OpKind::Sqrt || onlyUser(g, sqrt->result()) != div ||
        div->operand(1) != sqrt->result())
      return false;
    std::vector<Node *> chain{r1, sub, sq, r2, addEps, sqrt, div};
    Value *y = div->result();
    Value *gamma = nullptr, *beta = nullptr;
    if (Node *m = onlyUser(g, y); m && m->kind() == OpKind::Mul) {
      Value *o = otherOperand(m, y);
      if (isTrailingParameter(o, normRank) && o->dtype() == t) {
        gamma = o;
        chain.push_back(m);
        y = m->result();
      }
    }
    if (Node *a = onlyUser(g, y); a && a->kind() == OpKind::Add) {
      Value *o = otherOperand(a, y);
      if (isTrailingParameter(o, normRank) && o->dtype() == t) {
        beta = o;
        chain.push_back(a);
        y = a->result();
      }
    }
    // y keeps the chain's last shape; the statistics are over the same dims.
    if (y->shape() != x->shape())
      return false;
    Node *last = chain.back();
    if (!gamma)
      gamma = onesOverTrailingDims(g, x, axis, r1, x->name() + "_ln_scale");
    if (!gamma)
      return false;
    std::vector<Value *> operands{x, gamma};
    if (beta)
      operands.push_back(beta);
    AttrMap attrs{{"axis", Attribute(axis)},
                  {"epsilon", Attribute(*eps)},
                  {"stash_type", Attribute(t)}};
    Expected<Node *> ln = g.createInferred(OpKind::LayerNorm, operands, attrs, div->name(), 1,
                                           {}, last);
    if (!ln)
      return false;
    (*ln)->result()->setType(y->type());
    replaceChain(g, chain, y, *ln);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createRecognizeLayerNormPass() {
  return std::make_unique<RecognizeLayerNormPass>();
}

} // namespace nnc
