// Reverse-mode autodiff over a graph: nnc::gradients (the rules are in Gradients.def).
#include <map>
#include <set>

#include "nnc/ir/Gradients.h"

namespace nnc {

Expected<std::vector<Value *>> gradients(Graph &g, Value *loss, const std::vector<Value *> &wrt) {
  NNC_USER_CHECK(loss, "gradients: no loss value");
  NNC_USER_CHECK(isFloat(loss->dtype()), "gradients: the loss {} is not a float value",
                 loss->name());
  std::optional<Extents> lossExt = staticExtents(loss->shape());
  NNC_USER_CHECK(lossExt && checkedNumElements(*lossExt) == 1,
                 "gradients: the loss {} must have one element, got {}", loss->name(),
                 loss->type().str());
  const std::vector<Node *> nodes = g.nodes();

  // 1. Values that depend on a wrt value (float only: indices carry no gradient) ...
  std::set<const Value *> depends;
  for (Value *v : wrt) {
    NNC_USER_CHECK(v && isFloat(v->dtype()), "gradients: {} is not a float value",
                   v ? v->name() : "(null)");
    depends.insert(v);
  }
  for (Node *n : nodes) {
    bool any = false;
    for (Value *v : n->operands())
      any = any || (v && depends.count(v));
    if (any)
      for (Value *r : n->results())
        if (isFloat(r->dtype()))
          depends.insert(r);
  }
  // ... and the nodes the loss depends on.
  std::set<const Node *> needed;
  std::vector<const Value *> work = {loss};
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

  // 2. Reverse walk, summing each operand's gradient contributions.
  GradEmitter e(g);
  std::map<const Value *, Value *> grad;
  grad[loss] = e.constant([&] {
    Tensor one = Tensor::zeros(loss->dtype(), *lossExt);
    if (loss->dtype() == DType::F64)
      *one.data<double>() = 1.0;
    else
      *one.data<float>() = 1.0f;
    return one;
  }());
  NNC_USER_CHECK(loss->dtype() == DType::F32 || loss->dtype() == DType::F64,
                 "gradients: loss dtype {} is not supported (f32 or f64)",
                 dtypeName(loss->dtype()));
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node &n = **it;
    if (!needed.count(&n))
      continue;
    std::vector<Value *> dy;
    bool any = false;
    for (Value *r : n.results()) {
      auto gi = grad.find(r);
      dy.push_back(gi == grad.end() ? nullptr : gi->second);
      any = any || dy.back();
    }
    bool differentiable = false;
    for (Value *o : n.operands())
      differentiable = differentiable || (o && depends.count(o));
    if (!any || !differentiable)
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
      auto gi = grad.find(o);
      grad[o] = gi == grad.end() ? dx[i] : e.add(gi->second, dx[i]);
    }
    if (!e.ok())
      return e.error();
  }

  // 3. Gradients of wrt, zeros where the loss does not depend on it.
  std::vector<Value *> out;
  for (Value *v : wrt) {
    auto gi = grad.find(v);
    out.push_back(gi != grad.end() ? gi->second : e.zerosLike(v));
  }
  if (!e.ok())
    return e.error();
  return out;
}

} // namespace nnc
