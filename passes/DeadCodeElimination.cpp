// Dead-code elimination: removes nodes none of whose results are used.
//
// Algorithm:
//   1. Count the uses of every value (operands of nodes, graph outputs) once.
//   2. Walk nodes from last to first; a node none of whose results has a use is erased and
//      its operands' counts drop, which may make their producers dead in turn (they come
//      earlier, so the same walk sees them).
// The counts keep the walk linear in the graph's size (asking the graph for each node's uses
// made a 10,000-node chain take seconds).
#include <unordered_map>

#include "nnc/passes/Passes.h"

namespace nnc {

namespace {
class DeadCodeEliminationPass : public Pass {
public:
  std::string_view name() const override { return "dce"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    std::vector<Node *> nodes = g.nodes();
    std::unordered_map<const Value *, int64_t> uses;
    for (Node *n : nodes)
      for (Value *op : n->operands())
        if (op)
          ++uses[op];
    for (Value *o : g.outputs())
      ++uses[o];
    bool changed = false;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node *n = *it;
      bool used = false;
      for (Value *r : n->results()) {
        auto u = uses.find(r);
        used = used || (u != uses.end() && u->second > 0);
      }
      if (!used) {
        for (Value *op : n->operands())
          if (op)
            --uses[op];
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
