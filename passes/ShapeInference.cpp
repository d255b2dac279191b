// Shape inference: re-runs every node's shape rule in order and refines result types.
//
// Algorithm:
//  1. Walk nodes in order; run the op's shape rule on the current operand types.
//  2. Refine each declared dim from the rule's: a static dim replaces a symbol, and a named
//     symbol (like `N`) replaces a fresh one (`_3`, from Graph::freshDim). Rules read
//     constant operands, so they are at least as precise as what was declared. A dtype or
//     rank disagreement is an error naming the node.
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {
class ShapeInferencePass : public Pass {
public:
  std::string_view name() const override { return "shape-inference"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      Expected<std::vector<TensorType>> types = n->info().infer(*n);
      if (!types)
        return types.takeError();
      for (size_t i = 0; i < n->numResults(); ++i) {
        const TensorType &want = (*types)[i];
        Value *r = n->result(i);
        if (want.dtype != r->dtype() || want.rank() != r->rank())
          return n->error("result %{} is {} but its operands give {}", r->name(),
                          r->type().str(), want.str());
        TensorType refined = r->type();
        for (size_t d = 0; d < want.shape.size(); ++d) {
          const Dim &rule = want.shape[d];
          Dim &have = refined.shape[d];
          if (have.isStatic())
            continue;
          bool haveFresh = have.symbolName().rfind("_", 0) == 0;
          if (rule.isStatic() || (haveFresh && rule.symbolName().rfind("_", 0) != 0))
            have = rule;
        }
        if (refined != r->type()) {
          r->setType(refined);
          addStat("types-refined");
          changed = true;
        }
      }
    }
    return changed;
  }
};
} // namespace

std::unique_ptr<Pass> createShapeInferencePass() { return std::make_unique<ShapeInferencePass>(); }

} // namespace nnc
