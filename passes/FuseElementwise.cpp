// Elementwise fusion: chains and trees of elementwise ops (with broadcasting) become fusion
// groups (ir/FusionGroup.h) that code generation runs as one kernel.
//
// Algorithm:
//  1. Walk the nodes from last to first. An elementwise node (or cast) not in a group yet
//     starts a group as its root.
//  2. Grow the group through the operands of its members. The producer p of an operand joins
//     when it is elementwise, not in a group, and computes a value of the root's shape (the
//     same iteration space: a value that is broadcast, or one a consumer reads with another
//     shape, stays in memory), and
//       a. every user of p's result is already a member (p runs inside the group), or
//       b. p's result has users elsewhere, all of them elementwise, is not a graph output,
//          and p is cheap (the cost rule: one add/sub/mul/neg/min/max/abs/cast of at most two
//          operands): a copy of p is recomputed inside the group, and p stays for its other
//          users (dce removes it once every user has its own copy). A result that a conv,
//          matmul or reduction reads is stored anyway, so the group reads it instead.
//     Otherwise p's result is materialized: it is an input of the group.
//  3. A group of two or more nodes gets a fresh id in the `fusion_group` attribute of its members.
// A group stops growing at kMaxGroupMembers: code generation composes a group into one
// expression, and a 10,000-op chain made one expression 10,000 deep, which overflowed the
// stack of every recursive walk over it (the chain becomes a chain of groups instead).
#include <map>
#include <set>

#include "FusionStats.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

constexpr size_t kMaxGroupMembers = 256;

bool fusible(const Node &n) {
  if (!isFusibleElementwise(n) || n.hasAttr(kFusionGroupAttr))
    return false;
  if (isStorageOnly(n.result()->dtype()))
    return false;
  for (const Value *o : n.operands())
    if (!o || isStorageOnly(o->dtype()))
      return false;
  return true;
}

/// The cost rule's "cheap to recompute": one arithmetic op that reads at most two values.
bool cheapToRecompute(const Node &n) {
  switch (n.kind()) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Min:
  case OpKind::Max:
  case OpKind::Cast: return n.numOperands() <= 2;
  default: return false;
  }
}

/// v is stored for a user that is not elementwise (a conv, a matmul, a reduction): a group
/// reads it from memory for less than recomputing it from its own operands, which would have
/// to be stored too (and would keep p's producer from taking p as its epilogue).
bool materializedAnyway(const Graph &g, const Value *v) {
  for (const Node *u : g.users(v))
    if (!isFusibleElementwise(*u))
      return true;
  return false;
}

class FuseElementwisePass : public Pass {
public:
  std::string_view name() const override { return "fuse-elementwise"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    fusion::FusionCounters counters(g);
    int64_t nextId = fusion::freshGroupId(g);
    bool changed = false;
    std::vector<Node *> nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node *root = *it;
      if (!fusible(*root))
        continue;
      std::vector<Node *> members{root};
      std::set<Node *> in{root};
      const Shape &space = root->result()->shape();
      auto absorb = [&](Node *p) {
        members.push_back(p);
        in.insert(p);
      };
      auto allInside = [&](const Value *v) {
        if (g.isOutput(v))
          return false;
        for (Node *u : g.users(v))
          if (!in.count(u))
            return false;
        return true;
      };
      // Values whose producer could join but has users elsewhere: decided by the cost rule
      // once the group cannot grow otherwise (those users may still join it).
      std::vector<Value *> pending;
      for (size_t scanned = 0;;) {
        for (; scanned < members.size(); ++scanned) {
          Node *m = members[scanned];
          if (recomputed_.count(m))
            continue; // a recomputed copy's operands stay inputs
          for (Value *v : m->operands()) {
            Node *p = v ? v->producer() : nullptr;
            if (!p || in.count(p) || !fusible(*p) || v->shape() != space ||
                members.size() >= kMaxGroupMembers)
              continue;
            if (allInside(v))
              absorb(p);
            else
              pending.push_back(v);
          }
        }
        bool grew = false;
        for (Value *v : pending)
          if (!in.count(v->producer()) && members.size() < kMaxGroupMembers && allInside(v)) {
            absorb(v->producer());
            grew = true;
          }
        if (grew)
          continue;
        for (Value *v : pending) {
          Node *p = v->producer();
          if (in.count(p) || g.isOutput(v) || !cheapToRecompute(*p) || materializedAnyway(g, v) ||
              members.size() >= kMaxGroupMembers)
            continue;
          bool usedInside = false;
          for (Node *u : members)
            for (Value *o : u->operands())
              usedInside = usedInside || o == v;
          if (!usedInside)
            continue;
          Node *copy = g.createNode(p->kind(), p->operands(), {v->type()}, p->attrs(), p->name(),
                                    {v->name()}, p);
          recomputed_.insert(copy);
          copied_.insert(p);
          for (Node *u : members)
            for (size_t j = 0; j < u->numOperands(); ++j)
              if (u->operand(j) == v)
                u->setOperand(j, copy->result());
          absorb(copy);
          addStat("nodes-recomputed");
          grew = true;
        }
        pending.clear();
        if (!grew)
          break;
      }
      if (members.size() < 2)
        continue;
      for (Node *m : members)
        m->setAttr(kFusionGroupAttr, Attribute(nextId));
      ++nextId;
      addStat("groups");
      addStat("nodes-fused", static_cast<int64_t>(members.size()));
      changed = true;
    }
    // Originals whose users all took a recomputed copy are dead now.
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node *n = *it;
      // (Only the copied ones are asked for their uses: each question walks the graph.)
      if (n->kind() == OpKind::Constant || n->hasAttr(kFusionGroupAttr) || !copied_.count(n))
        continue;
      bool used = false;
      for (Value *r : n->results())
        used = used || g.hasUses(r);
      if (!used) {
        g.eraseNode(n);
        addStat("recomputed-originals-removed");
      }
    }
    for (const auto &[name, value] : counters.after(g))
      addStat(name, value);
    return changed;
  }

private:
  std::set<const Node *> recomputed_, copied_;
};

} // namespace

std::unique_ptr<Pass> createFuseElementwisePass() {
  return std::make_unique<FuseElementwisePass>();
}

} // namespace nnc
