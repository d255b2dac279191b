// Dead-code elimination: removes nodes none of whose results are used.
//
// Algorithm: walk nodes from last to first; a node with no used result is erased, which may
// make its operands' producers dead in turn (they come earlier, so the same walk sees them).
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {
class DeadCodeEliminationPass : public Pass {
public:
  std::string_view name() const override { return "dce"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    std::vector<Node *> nodes = g.nodes();
    bool changed = false;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node *n = *it;
      bool used = false;
      for (Value *r : n->results())
        used = used || g.hasUses(r);
      if (!used) {
        g.eraseNode(n);
        addStat("nodes-removed");
        changed = true;
      }
    }
    return changed;
  }
};
} // namespace

std::unique_ptr<Pass> createDeadCodeEliminationPass() {
  return std::make_unique<DeadCodeEliminationPass>();
}

} // namespace nnc
