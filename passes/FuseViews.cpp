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
//  3. Cost check of each concat that joined in step 2a (concatStaysOut), unless code
//     generation writes it in pieces (the root, or an operand of such a concat): inside the
//     group it reads every operand at each of its elements, a select keeping one, so the work
//     of every operand's members runs on all of the concat's elements; on its own (the root of
//     a group of its own, later in this walk) each operand's work runs on that operand's
//     elements, the concat's result is stored and read back once, and a kernel is launched.
//     When the select costs more, the concat leaves the set and step 2 runs again without it.
//     YOLO's box decode (a concat of xy, wh (a pow) and the 81 class scores on the last axis) ran
//     its pow on all 85 fields.
//  4. A grown set that holds a view and at least two nodes becomes one group (a new id, or
//     the root group's).
// Code generation (codegen/lower/Fusion.cpp) composes the views' index maps into the loads.
#include <algorithm>
#include <map>
#include <optional>
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

/// The per-element cost of one member in the units of concatStaysOut (a load or store of
/// an element is 1): a view only changes index math, an add, compare or select is about one
/// instruction, and any other elementwise op (exp, pow, sigmoid, erf, division, ...) expands
/// to tens of them.
constexpr int64_t kCheapOpCost = 1, kCostlyOpCost = 16;

int64_t memberCost(const Node &n) {
  if (isView(n))
    return 0;
  switch (n.kind()) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Min:
  case OpKind::Max:
  case OpKind::Cast:
  case OpKind::Select:
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::LessEqual:
  case OpKind::Greater:
  case OpKind::GreaterEqual: return kCheapOpCost;
  default: return kCostlyOpCost;
  }
}

std::optional<int64_t> staticElements(const Value *v) {
  std::optional<Extents> e = staticExtents(v->shape());
  return e ? checkedNumElements(*e) : std::nullopt;
}

/// The per-element cost of computing `v` inside a group with members `in`: the members it
/// is computed from (each once: code generation binds a value used twice to a local).
int64_t valueCost(const Value *v, const std::set<Node *> &in) {
  int64_t cost = 0;
  std::set<const Node *> seen;
  std::vector<const Value *> work{v};
  while (!work.empty()) {
    const Value *x = work.back();
    work.pop_back();
    Node *p = x ? x->producer() : nullptr;
    if (!p || !in.count(p) || !seen.insert(p).second)
      continue; // a group input (its load is counted by the caller), or counted already
    cost += memberCost(*p);
    if (isView(*p)) {
      for (size_t k : viewDataOperands(*p))
        work.push_back(p->operand(k));
    } else {
      for (const Value *o : p->operands())
        work.push_back(o);
    }
  }
  return cost;
}

/// Whether code generation writes concat `c` operand by operand, with no select: the root,
/// or the one operand use of such a concat (nested concats flatten into pieces).
bool writtenInPieces(const Graph &g, const Node &c, const Node &root) {
  if (&c == &root)
    return true;
  std::vector<Node *> users = g.users(c.result());
  return users.size() == 1 && users[0]->kind() == OpKind::Concat &&
         writtenInPieces(g, *users[0], root);
}

/// A kernel of its own costs a dispatch through the thread pool and a loop nest's set-up,
/// worth about this many element operations: a small concat stays in the group.
constexpr int64_t kKernelCost = 1024;

/// Step 3: whether the member concat `c` costs less outside the group (see the algorithm).
bool concatStaysOut(const Graph &g, const Node &c, const Node &root, const std::set<Node *> &in) {
  std::optional<int64_t> ec = staticElements(c.result());
  if (!ec || writtenInPieces(g, c, root))
    return false;
  // Alone: its result stored once and read once, and a kernel more.
  int64_t fused = 0, alone = 2 * *ec + kKernelCost;
  for (const Value *o : c.operands()) {
    std::optional<int64_t> eo = staticElements(o);
    if (!eo)
      return false;
    int64_t cost = valueCost(o, in) + 1; // the operand's own work and its load
    fused += *ec * cost;
    alone += *eo * cost;
  }
  return fused > alone;
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
      const std::vector<Node *> start = members;
      std::set<Node *> in, vetoed;
      auto allInside = [&](const Value *v) {
        if (g.isOutput(v))
          return false;
        for (Node *u : g.users(v))
          if (!in.count(u))
            return false;
        return true;
      };
      std::vector<int64_t> absorbedGroups;
      std::vector<Node *> concats; // joined in step 2a
      for (bool regrow = true; regrow;) {
        members = start;
        in = std::set<Node *>(members.begin(), members.end());
        absorbedGroups.clear();
        concats.clear();
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
              if (p->kind() == OpKind::Concat &&
                  (p->numOperands() > kMaxFusedConcatOperands || vetoed.count(p)))
                continue;
              in.insert(p);
              members.push_back(p);
              if (p->kind() == OpKind::Concat)
                concats.push_back(p);
            } else if (isFusibleElementwise(*p) && !movesStorageOnly(*p)) {
              in.insert(p);
              members.push_back(p);
            }
          }
        }
        regrow = false;
        for (Node *c : concats)
          if (concatStaysOut(g, *c, *root, in)) {
            vetoed.insert(c);
            addStat("concats-kept-out");
            regrow = true;
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
