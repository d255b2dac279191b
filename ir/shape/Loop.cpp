// Shape rule of the loop op (scan): its results are the body's states and its per-step
// outputs stacked along a new axis 0.
#include "ShapeRules.h"

#include "nnc/ir/Loop.h"

namespace nnc::shape {

Expected<std::vector<TensorType>> inferScan(const Node &node) {
  NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(node));
  const Graph &body = *node.body();
  std::vector<TensorType> out;
  for (int64_t i = 0; i < p.carried; ++i) {
    const TensorType &init = node.operand(i)->type();
    const TensorType &next = body.outputs()[i]->type();
    if (init.dtype != next.dtype || init.rank() != next.rank())
      return node.error("state {} starts as {} but the body returns {}", i, init.str(), next.str());
    out.push_back(init);
  }
  for (int64_t k = 0; k < p.scanOutputs; ++k) {
    TensorType t = body.outputs()[p.carried + k]->type();
    t.shape.insert(t.shape.begin(), p.steps);
    // The body's symbols are its own: an unknown dim of a step is a fresh one out here (the
    // one given before, so that rerunning the rule does not change the type).
    const TensorType &before = node.result(p.carried + k)->type();
    for (int64_t d = 1; d < t.rank(); ++d)
      if (!t.shape[d].isStatic())
        t.shape[d] = before.rank() == t.rank() && !before.shape[d].isStatic()
                         ? before.shape[d]
                         : node.graph()->freshDim();
    out.push_back(std::move(t));
  }
  return out;
}

} // namespace nnc::shape

namespace nnc::shape {

/// The taken half's types when the condition is a constant; else each result the type both
/// branches agree on, a dim where they differ a symbol of its own (known once the condition
/// is: staged execution specializes on it).
Expected<std::vector<TensorType>> inferIf(const Node &node) {
  NNC_ASSIGN_OR_RETURN(size_t k, ifResults(node));
  NNC_ASSIGN_OR_RETURN(std::vector<TensorType> body, bodyOutputTypes(node, 1));
  if (const Tensor *c = node.constantOperand(0)) {
    size_t first = c->elementAsDouble(0) != 0 ? 0 : k;
    return std::vector<TensorType>(body.begin() + first, body.begin() + first + k);
  }
  std::vector<TensorType> out;
  for (size_t i = 0; i < k; ++i) {
    const TensorType &t = body[i], &e = body[k + i];
    if (t.dtype != e.dtype || t.rank() != e.rank())
      return node.error("result {} is {} in the then branch but {} in the else branch", i, t.str(),
                        e.str());
    TensorType r = t;
    for (size_t d = 0; d < r.shape.size(); ++d) {
      if (t.shape[d] == e.shape[d])
        continue;
      // A symbol given before stays, so rerunning the rule does not change the type.
      const TensorType &before = node.result(i)->type();
      r.shape[d] = before.rank() == r.rank() && !before.shape[d].isStatic()
                       ? before.shape[d]
                       : node.graph()->freshDim();
    }
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace nnc::shape
