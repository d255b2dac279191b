// Recognizes the decomposed softmax and log-softmax that exporters emit and replaces them with
// one `softmax` / `log_softmax` node (a single row kernel in code generation):
//
//   m = reduce_max(x) {axes = [a], keepdims = 1}   (optional: the stabilizing shift)
//   d = sub(x, m)
//   e = exp(d)                                      (exp(x) without the shift)
//   s = reduce_sum(e) {axes = [a], keepdims = 1}
//   y = div(e, s)                                   -> softmax(x) {axis = a}
//   y = sub(d, log(s))                              -> log_softmax(x) {axis = a} (shift needed)
//
// The unshifted form overflows for large inputs where softmax does not; replacing it is the
// same function everywhere it is finite.
//
// Algorithm: for each reduce_sum over one axis, match the chain around it (every intermediate
// with exactly the uses the pattern names, none a graph output), insert the op before the
// chain's last node, point the uses of y at it and erase the chain.
#include "PatternUtil.h"
#include "nnc/ir/ShapeUtils.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

using namespace pattern;

/// The one normalized axis of a keepdims reduction of `kind`, or -1.
int64_t singleAxis(const Node &r, OpKind kind) {
  if (r.kind() != kind || r.getInt("keepdims") != 1 || !r.operand(0))
    return -1;
  Expected<std::vector<int64_t>> axes =
      normalizeAxes(r.getInts("axes"), r.operand(0)->rank(), r);
  if (!axes || axes->size() != 1)
    return -1;
  return (*axes)[0];
}

class RecognizeSoftmaxPass : public Pass {
public:
  std::string_view name() const override { return "recognize-softmax"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    int64_t n = matchToFixedPoint(g, [&](Node *r) { return matchAt(g, r); });
    addStat("softmaxes", n);
    return n > 0;
  }

private:
  bool matchAt(Graph &g, Node *sum) {
    int64_t axis = singleAxis(*sum, OpKind::ReduceSum);
    if (axis < 0)
      return false;
    Node *exp = sum->operand(0)->producer();
    if (!exp || exp->kind() != OpKind::Exp)
      return false;
    Value *e = exp->result(), *s = sum->result();
    std::vector<Node *> chain;
    Value *x = exp->operand(0);
    Node *shift = x->producer();
    Value *d = nullptr;
    if (shift && shift->kind() == OpKind::Sub && shift->operand(1)->producer() &&
        singleAxis(*shift->operand(1)->producer(), OpKind::ReduceMax) == axis &&
        shift->operand(1)->producer()->operand(0) == shift->operand(0) &&
        onlyUser(g, shift->operand(1)) == shift) {
      d = x;
      x = shift->operand(0);
      chain = {shift->operand(1)->producer(), shift};
    }
    if (!isFloat(x->dtype()) || e->shape() != x->shape())
      return false;
    chain.push_back(exp);
    chain.push_back(sum);
    Node *last = nullptr;
    OpKind kind = OpKind::Softmax;
    if (Node *div = onlyUser(g, s); div && div->kind() == OpKind::Div &&
                                    div->operand(0) == e && div->operand(1) == s) {
      // Softmax: e feeds the sum and the division only; d (if any) only the exp.
      std::vector<Node *> eUsers = g.users(e);
      if (g.isOutput(e) || eUsers.size() != 2 || (d && onlyUser(g, d) != exp))
        return false;
      last = div;
      kind = OpKind::Softmax;
    } else if (Node *log = onlyUser(g, s); d && log && log->kind() == OpKind::Log) {
      // Log-softmax: d feeds the exp and the final subtraction; e only the sum.
      Node *sub = onlyUser(g, log->result());
      std::vector<Node *> dUsers = g.users(d);
      if (!sub || sub->kind() != OpKind::Sub || sub->operand(0) != d ||
          sub->operand(1) != log->result() || onlyUser(g, e) != sum || g.isOutput(d) ||
          dUsers.size() != 2)
        return false;
      chain.push_back(log);
      last = sub;
      kind = OpKind::LogSoftmax;
    } else {
      return false;
    }
    chain.push_back(last);
    Value *y = last->result();
    if (y->type() != x->type())
      return false;
    Expected<Node *> op =
        g.createInferred(kind, {x}, {{"axis", Attribute(axis)}}, last->name(), 1, {}, last);
    if (!op)
      return false;
    replaceChain(g, chain, y, *op);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createRecognizeSoftmaxPass() {
  return std::make_unique<RecognizeSoftmaxPass>();
}

} // namespace nnc
