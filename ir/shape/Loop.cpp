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
    out.push_back(std::move(t));
  }
  return out;
}

} // namespace nnc::shape
