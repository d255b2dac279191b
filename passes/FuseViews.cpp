// View fusion: data-movement ops (transpose, reshapes, slice, gather of a constant index,
// concat, the blocked-layout conversions; isFusibleView in ir/FusionGroup.h) join the fusion
// group of their consumer, so that a chain of them, with the elementwise work around it, is
// one pass over the data instead of one kernel (and one intermediate buffer) per op. A
// channel shuffle (from_nchwc, concat, reshape, transpose, slice, to_nchwc) or a window
// partition (reshape, transpose, reshape) becomes one kernel.
//
// Algorithm (after fuse-elementwise, fuse-epilogue and fuse-attention, which keep their
// groups: an anchored or attention group is never changed here):
//  1. Walk the nodes from last to first. A root is an elementwise node or a view that is not
//     in a group (but not a view that only reshapes: alone it costs nothing, the runtime
//     aliases it), or the root of a group without an anchor.
//  2. Grow through the data operands of the members (a view's data operands; every operand
//     of an elementwise member). The producer p of an operand v joins when every user of v is
//     a member already and v is not a graph output, and
//       a. p is a view not in a group (a concat with at most kMaxFusedConcatOperands operands:
//          inside a group it reads every operand at each element), or
//       b. p is an elementwise node not in a group, or the root of a group without an anchor
//          (its members join with it),
//     and, when the member reading v is elementwise, v has that member's shape (a broadcast
//     value would be recomputed for every element it is broadcast to).
//  3. A grown set that holds a view and at least two nodes becomes one group (a new id, or
//     the root group's).
// Code generation (codegen/lower/Fusion.cpp) composes the views' index maps into the loads.
#include <algorithm>
#include <map>
#include <set>

#include "FusionStats.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

bool movesStorageOnly(const Node &n) {
  if (isStorageOnly(n.result()->dtype()))
    return true;
  for (const Value *o : n.operands())
    if (o && isStorageOnly(o->dtype()))
      return true;
  return false;
}

bool isView(const Node &n) {
  return isFusibleView(n) && !isFusibleElementwise(n) && !movesStorageOnly(n);
}

class FuseViewsPass : public Pass {
public:
  std::string_view name() const override { return "fuse-views"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    fusion::FusionCounters counters(g);
    int64_t nextId = fusion::freshGroupId(g);
    // The groups as they are now: members (graph order) and whether they may host views.
    std::map<int64_t, std::vector<Node *>> groups;
    std::set<int64_t> fixed; // anchored and attention groups
    for (Node *n : g.nodes()) {
      int64_t id = fusionGroupOf(*n);
      if (id < 0)
        continue;
      groups[id].push_back(n);
      if (!isFusibleElementwise(*n) && !isView(*n))
        fixed.insert(id);
    }
    bool changed = false;
    std::vector<Node *> nodes = g.nodes();
    std::map<const Node *, size_t> pos;
    for (size_t i = 0; i < nodes.size(); ++i)
      pos[nodes[i]] = i;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node *root = *it;
      int64_t rootGroup = fusionGroupOf(*root);
      std::vector<Node *> members;
      if (rootGroup >= 0) {
        const std::vector<Node *> &gm = groups[rootGroup];
        if (fixed.count(rootGroup) || gm.empty() || gm.back() != root)
          continue;
        members = gm;
      } else {
        bool elementwise = isFusibleElementwise(*root) && !movesStorageOnly(*root);
        if (!elementwise && (!isView(*root) || isReshapeView(*root)))
          continue;
        members = {root};
      }
      std::set<Node *> in(members.begin(), members.end());
      auto allInside = [&](const Value *v) {
        if (g.isOutput(v))
          return false;
        for (Node *u : g.users(v))
          if (!in.count(u))
            return false;
        return true;
      };
      std::vector<int64_t> absorbedGroups;
      for (size_t scanned = 0; scanned < members.size(); ++scanned) {
        Node *m = members[scanned];
        bool mIsView = isView(*m);
        std::vector<size_t> slots;
        if (mIsView) {
          slots = viewDataOperands(*m);
        } else {
          for (size_t k = 0; k < m->numOperands(); ++k)
            slots.push_back(k);
        }
        for (size_t k : slots) {
          Value *v = m->operand(k);
          Node *p = v ? v->producer() : nullptr;
          if (!p || in.count(p) || p->kind() == OpKind::Constant || !allInside(v))
            continue;
          if (!mIsView && v->shape() != m->result()->shape())
            continue;
          int64_t pid = fusionGroupOf(*p);
          if (pid >= 0) {
            const std::vector<Node *> &pm = groups[pid];
            if (fixed.count(pid) || pm.empty() || pm.back() != p)
              continue;
            for (Node *x : pm)
              if (in.insert(x).second)
                members.push_back(x);
            absorbedGroups.push_back(pid);
          } else if (isView(*p)) {
            if (p->kind() == OpKind::Concat && p->numOperands() > kMaxFusedConcatOperands)
              continue;
            in.insert(p);
            members.push_back(p);
          } else if (isFusibleElementwise(*p) && !movesStorageOnly(*p)) {
            in.insert(p);
            members.push_back(p);
          }
        }
      }
      bool hasView = false;
      for (Node *m : members)
        hasView = hasView || isView(*m);
      if (!hasView || members.size() < 2)
        continue;
      int64_t id = rootGroup >= 0 ? rootGroup : nextId++;
      int64_t views = 0;
      for (Node *m : members) {
        m->setAttr(kFusionGroupAttr, Attribute(id));
        views += isView(*m) ? 1 : 0;
      }
      for (int64_t pid : absorbedGroups)
        groups.erase(pid);
      // Graph order for the group's member list (the root stays last).
      std::sort(members.begin(), members.end(),
                [&](const Node *a, const Node *b) { return pos[a] < pos[b]; });
      groups[id] = members;
      addStat(rootGroup >= 0 ? "groups-grown" : "groups");
      addStat("views-fused", views);
      changed = true;
    }
    for (const auto &[name, value] : counters.after(g))
      addStat(name, value);
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createFuseViewsPass() { return std::make_unique<FuseViewsPass>(); }

} // namespace nnc
