// Epilogue fusion: the elementwise work after a matmul or conv (bias add, activation, residual
// add, scaling, clipping) runs in the output loop of the matmul or conv.
//
// Algorithm (after fuse-elementwise):
//  1. For each matmul or conv a not in a group, whose result is not a graph output and has
//     one user u, an elementwise node (or cast), or several that are all in u's group:
//  2. If u is in a group without an anchor whose result has a's result shape, a joins that
//     group as its anchor. If u is in no group and its result has a's shape, a and u form a
//     new group. Otherwise (the group broadcasts a's result, or already has an anchor) a
//     stays alone.
// Code generation (codegen/lower/Fusion.cpp) rewrites the stores of a's result.
#include <map>

#include "FusionStats.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

class FuseEpiloguePass : public Pass {
public:
  std::string_view name() const override { return "fuse-epilogue"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    fusion::FusionCounters counters(g);
    int64_t nextId = fusion::freshGroupId(g);
    std::map<int64_t, Node *> anchorOf, rootOf;
    for (Node *n : g.nodes()) {
      int64_t id = fusionGroupOf(*n);
      if (id < 0)
        continue;
      rootOf[id] = n;
      if (isEpilogueAnchor(*n))
        anchorOf[id] = n;
    }
    bool changed = false;
    for (Node *a : g.nodes()) {
      if (!isEpilogueAnchor(*a) || a->hasAttr(kFusionGroupAttr) || g.isOutput(a->result()))
        continue;
      std::vector<Node *> users = g.users(a->result());
      // One user, or several that are all in one group (which reads a's value from a local).
      bool ok = !users.empty();
      for (Node *u : users)
        ok = ok && isFusibleElementwise(*u) && !isStorageOnly(u->result()->dtype()) &&
             (users.size() == 1 || (fusionGroupOf(*u) >= 0 &&
                                    fusionGroupOf(*u) == fusionGroupOf(*users[0])));
      if (!ok)
        continue;
      Node *u = users[0];
      int64_t id = fusionGroupOf(*u);
      if (id >= 0) {
        if (anchorOf.count(id) || rootOf[id]->result()->shape() != a->result()->shape())
          continue;
      } else {
        if (u->result()->shape() != a->result()->shape())
          continue;
        id = nextId++;
        u->setAttr(kFusionGroupAttr, Attribute(id));
        rootOf[id] = u;
        addStat("nodes-fused");
      }
      a->setAttr(kFusionGroupAttr, Attribute(id));
      anchorOf[id] = a;
      addStat("epilogues");
      addStat(a->kind() == OpKind::MatMul ? "matmul-epilogues" : "conv-epilogues");
      addStat("nodes-fused");
      changed = true;
    }
    for (const auto &[name, value] : counters.after(g))
      addStat(name, value);
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createFuseEpiloguePass() { return std::make_unique<FuseEpiloguePass>(); }

} // namespace nnc
