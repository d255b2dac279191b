// Recognizes the decomposed RMSNorm that exporters emit and replaces it with one `rms_norm`
// node (a single row kernel in code generation):
//
//   p  = pow(x, 2)              (or mul(x, x))
//   ms = reduce_mean(p)         {axes = [a..r-1], keepdims = 1}
//   s  = sqrt(add(ms, eps))     (eps a one-element constant, either operand order)
//   n  = div(x, s)              (or mul(x, reciprocal(s)), or mul(x, div(1, s)), either order)
//   y  = mul(n, gamma)          (optional; gamma a constant over the normalized dims)
//
// Algorithm: for each reduce_mean, match the chain around it; every intermediate must have
// exactly the uses the pattern names and must not be a graph output. On a match, insert
// rms_norm(x, gamma or ones) {axis = a, epsilon = eps}, point the uses of y at it and erase
// the chain.
#include "PatternUtil.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

using namespace pattern;

class RecognizeRMSNormPass : public Pass {
public:
  std::string_view name() const override { return "recognize-rms-norm"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    int64_t n = matchToFixedPoint(g, [&](Node *r) { return matchAt(g, r); });
    addStat("rms-norms", n);
    return n > 0;
  }

private:
  bool matchAt(Graph &g, Node *r) {
    int64_t axis = trailingReduceMeanAxis(*r);
    if (axis < 0)
      return false;
    Node *sq = r->operand(0)->producer();
    if (!sq || onlyUser(g, sq->result()) != r)
      return false;
    Value *x = sq->operand(0);
    bool isSquare = (sq->kind() == OpKind::Mul && sq->operand(1) == x) ||
                    (sq->kind() == OpKind::Pow && scalarConstant(sq->operand(1)) == 2.0);
    DType t = x ? x->dtype() : DType::F32;
    if (!isSquare || (t != DType::F32 && t != DType::F64))
      return false;
    int64_t normRank = x->rank() - axis;
    Node *addEps = onlyUser(g, r->result());
    if (!addEps || addEps->kind() != OpKind::Add)
      return false;
    std::optional<double> eps = scalarConstant(otherOperand(addEps, r->result()));
    if (!eps || *eps < 0)
      return false;
    Node *sqrt = onlyUser(g, addEps->result());
    if (!sqrt || sqrt->kind() != OpKind::Sqrt)
      return false;
    std::vector<Node *> chain{sq, r, addEps, sqrt};
    Node *n = onlyUser(g, sqrt->result());
    if (!n)
      return false;
    if (!(n->kind() == OpKind::Div && n->operand(0) == x && n->operand(1) == sqrt->result())) {
      // 1/s, then its product with x.
      bool inverse = (n->kind() == OpKind::Reciprocal && n->operand(0) == sqrt->result()) ||
                     (n->kind() == OpKind::Div && scalarConstant(n->operand(0)) == 1.0 &&
                      n->operand(1) == sqrt->result());
      if (!inverse)
        return false;
      chain.push_back(n);
      n = onlyUser(g, n->result());
      if (!n || n->kind() != OpKind::Mul || otherOperand(n, chain.back()->result()) != x)
        return false;
    }
    chain.push_back(n);
    Value *y = n->result();
    Value *gamma = nullptr;
    if (Node *m = onlyUser(g, y); m && m->kind() == OpKind::Mul) {
      Value *o = otherOperand(m, y);
      if (isTrailingParameter(o, normRank) && o->dtype() == t) {
        gamma = o;
        chain.push_back(m);
        y = m->result();
      }
    }
    if (y->shape() != x->shape())
      return false;
    if (!gamma)
      gamma = onesOverTrailingDims(g, x, axis, sq, x->name() + "_rms_scale");
    if (!gamma)
      return false;
    AttrMap attrs{{"axis", Attribute(axis)},
                  {"epsilon", Attribute(*eps)},
                  {"stash_type", Attribute(t)}};
    Expected<Node *> rms = g.createInferred(OpKind::RMSNorm, {x, gamma}, attrs, n->name(), 1,
                                            {}, chain.back());
    if (!rms)
      return false;
    replaceChain(g, chain, y, *rms);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createRecognizeRMSNormPass() {
  return std::make_unique<RecognizeRMSNormPass>();
}

} // namespace nnc
