// Shape inference: re-runs every node's shape rule in order and refines result types.
//
// Algorithm:
//  1. Walk nodes in order; run the op's shape rule on the current operand types.
//  2. Where the rule gives a static dim and the declared type has a symbol, or the rule's
//     type otherwise differs, take the rule's type (it is at least as precise, since rules
//     read constant operands). A dtype or rank disagreement is an error naming the node.
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
        for (size_t d = 0; d < want.shape.size(); ++d)
          if (want.shape[d].isStatic() && refined.shape[d].isSymbolic())
            refined.shape[d] = want.shape[d];
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
