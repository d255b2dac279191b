// Epilogue fusion: the elementwise work after a matmul or conv (bias add, activation, residual
// add, scaling, clipping) runs in the output loop of the matmul or conv.
//
// Algorithm (after fuse-elementwise):
//  0. Elementwise work behind views moves to the anchor: for each matmul or conv a not in a
//     group whose result reaches, through single-user elementwise nodes e1..ek of its shape
//     and then single-user views that only move elements (reshapes, transpose, from_nchwc),
//     a float elementwise node u whose other operands are one-element constants and that is
//     in no group, u is applied before the views instead (u(view(x)) = view(u(x)): u reads
//     one element at the same place whatever the layout; a graph output keeps its name, on
//     the last view's result), where step 2 makes it a's epilogue. A cost check decides
//     (worthHoisting): the template evaluates u on each element it stores, padding included, in its
//     vectorized store loop; left behind the views, u runs in the consumer's loop, whose index math
//     through views often keeps it one lane wide, and once for every user that reads it (a view
//     group that selects among several slices of u evaluates u once per slice at each element).
//     YOLO's detect head (conv, reshape, transpose, sigmoid, slices, concat) had its sigmoid
//     evaluated three times per output element, scalar, in the decode's concat loop.
//  1. For each matmul or conv a not in a group, whose result is not a graph output and has
//     one user u, an elementwise node (or cast), or several that are all in u's group:
//  2. If u is in a group without an anchor whose result has a's result shape, a joins that
//     group as its anchor. If u is in no group and its result has a's shape, a and u form a
//     new group. Otherwise (the group broadcasts a's result, or already has an anchor) a
//     stays alone.
//  3. If u is in a group that has its anchor, and a's result reaches through single-user
//     members e1..ek of that group (reading nothing else the group computes) a value of fewer
//     bytes per element (the requantization of an integer conv's i32 sums to u8, before a
//     residual add), a and e1..ek form a group of their own: a stores the narrow value, which
//     the other group reads, instead of its wide sums.
// An anchor never joins a group of views (fuse-views keeps anchored groups as they are and
// takes no matmul or conv): its template keeps its kernel, and views, slices and concats of
// its result form a group of their own.
// Code generation (codegen/lower/Fusion.cpp) hands the group's epilogue to a's template, which
// applies it where it writes a final element of a's result.
#include <algorithm>
#include <map>
#include <optional>

#include "FusionStats.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

/// The epilogue's evaluations of a hoisted op may exceed the consumer's by this factor (the
/// blocked layout's padding: 9 channels in a block of 16 is 1.8x) and still be cheaper: the
/// template applies it in vector registers where it stores, a loop composed through views
/// may apply it one lane at a time.
constexpr int64_t kEpilogueRateRatio = 2;

std::optional<int64_t> staticElements(const Value *v) {
  std::optional<Extents> e = staticExtents(v->shape());
  return e ? checkedNumElements(*e) : std::nullopt;
}

/// Views that move elements without dropping, duplicating or padding any of the operand's
/// meaningful ones (from_nchwc drops the block's padding, which u may compute on unseen).
bool movesElementsOnly(const Node &n) {
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Transpose:
  case OpKind::FromNCHWc: return n.numResults() == 1 && n.numOperands() >= 1;
  default: return false;
  }
}

/// The value's one user, or null when it has several, none, or is a graph output.
Node *soleUser(const Graph &g, const Value *v) {
  if (g.isOutput(v))
    return nullptr;
  std::vector<Node *> users = g.users(v);
  return users.size() == 1 ? users[0] : nullptr;
}

/// Step 0's cost check: epilogue evaluations (every element the anchor stores) against the
/// consumer's (each element of u's result once per user), at the rates kEpilogueRateRatio
/// assumes.
bool worthHoisting(const Graph &g, const Value *anchorSide, const Node &u) {
  std::optional<int64_t> ea = staticElements(anchorSide), eu = staticElements(u.result());
  if (!ea || !eu)
    return false;
  int64_t users = std::max<int64_t>(1, static_cast<int64_t>(g.users(u.result()).size()));
  return *ea <= kEpilogueRateRatio * users * *eu;
}

/// Step 0 for anchor a: moves the first elementwise node behind a chain of views onto the
/// value before the views. Returns whether it moved one.
bool hoistThroughViews(Graph &g, Node &a) {
  if (!isEpilogueAnchor(a) || a.hasAttr(kFusionGroupAttr))
    return false;
  Value *before = a.result(); // the value the first view reads
  Node *n = soleUser(g, before);
  while (n && isFusibleElementwise(*n) && !n->hasAttr(kFusionGroupAttr) &&
         n->result()->type() == a.result()->type()) {
    before = n->result();
    n = soleUser(g, before);
  }
  Node *firstView = n;
  Value *end = before;
  while (n && movesElementsOnly(*n) && n->operand(0) == end && !n->hasAttr(kFusionGroupAttr)) {
    end = n->result();
    n = soleUser(g, end);
  }
  Node *u = n;
  if (!u || end == before || !isFusibleElementwise(*u) || u->kind() == OpKind::Cast ||
      u->hasAttr(kFusionGroupAttr) || !isFloat(u->result()->dtype()) ||
      u->result()->dtype() != end->dtype() || u->result()->shape() != end->shape())
    return false;
  // The other operands broadcast one constant element (of no higher rank than `before`, so
  // the moved op's result keeps the shape of the value it reads).
  std::vector<Value *> operands = u->operands();
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i] == end) {
      operands[i] = before;
      continue;
    }
    const Tensor *c = operands[i] ? u->constantOperand(i) : nullptr;
    if (!c || c->numElements() != 1 || operands[i]->rank() > before->rank())
      return false;
  }
  if (!worthHoisting(g, before, *u))
    return false;
  OpKind kind = u->kind();
  AttrMap attrs = u->attrs();
  std::string name = u->name(), resultName = u->result()->name();
  g.replaceAllUsesWith(u->result(), end);
  g.eraseNode(u);
  if (g.isOutput(end)) // the graph's output keeps its name
    g.renameValue(end, resultName);
  Node *moved = g.createNode(kind, std::move(operands), {before->type()}, std::move(attrs), name,
                             {resultName}, firstView);
  firstView->setOperand(0, moved->result());
  return true;
}

/// Step 3's chain: from a's result, nodes e1..ek of group `id`, each the one user of the
/// previous value, of a's result shape, reading nothing else that the group computes, where
/// ek's result has fewer bytes per element than a's (a requantization to u8 of an i32 sum)
/// and its users are in the group; the longest such prefix up to the narrowest value. Empty
/// when there is none.
std::vector<Node *> narrowingChain(const Graph &g, const Node &a, int64_t id) {
  std::vector<Node *> chain, best;
  size_t narrowest = dtypeSize(a.result()->dtype());
  const Value *v = a.result();
  for (Node *n = soleUser(g, v);
       n && fusionGroupOf(*n) == id && isFusibleElementwise(*n) && n->numResults() == 1 &&
       n->result()->shape() == a.result()->shape();
       n = soleUser(g, v)) {
    for (const Value *o : n->operands())
      if (o && o != v && o->producer() && fusionGroupOf(*o->producer()) == id)
        return best; // reads the group's own work: it cannot leave the group
    chain.push_back(n);
    v = n->result();
    bool usersInGroup = !g.isOutput(v) && g.hasUses(v);
    for (const Node *u : g.users(v))
      usersInGroup = usersInGroup && fusionGroupOf(*u) == id;
    if (!usersInGroup)
      break;
    if (dtypeSize(v->dtype()) < narrowest) {
      narrowest = dtypeSize(v->dtype());
      best = chain;
    }
  }
  return best;
}

class FuseEpiloguePass : public Pass {
public:
  std::string_view name() const override { return "fuse-epilogue"; }

  Expected<bool> run(Graph &g, PassContext &) override {
    fusion::FusionCounters counters(g);
    bool changed = false;
    bool hoisted = false;
    // The anchors first: a hoist erases the elementwise node it moves, which a walk over a
    // snapshot of every node would visit afterwards (anchors are never the moved node).
    std::vector<Node *> anchors;
    for (Node *a : g.nodes())
      if (isEpilogueAnchor(*a))
        anchors.push_back(a);
    for (Node *a : anchors)
      while (hoistThroughViews(g, *a)) {
        addStat("hoisted-through-views");
        hoisted = true;
      }
    // A hoisted op's constant operands may come after the views in graph order.
    if (hoisted) {
      NNC_TRY(g.topologicalSort());
      changed = true;
    }
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
      if (id >= 0 && users.size() == 1 && anchorOf.count(id)) {
        // Step 3: the group has its anchor already; a's narrowing chain becomes a's own.
        if (std::vector<Node *> chain = narrowingChain(g, *a, id); !chain.empty()) {
          int64_t own = nextId++;
          for (Node *n : chain)
            n->setAttr(kFusionGroupAttr, Attribute(own));
          a->setAttr(kFusionGroupAttr, Attribute(own));
          rootOf[own] = chain.back();
          anchorOf[own] = a;
          addStat("epilogues");
          addStat("narrowing-chains-split");
          addStat("nodes-fused");
          changed = true;
        }
        continue;
      }
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
      addStat(a->kind() == OpKind::MatMul || a->kind() == OpKind::MatMulInteger
                  ? "matmul-epilogues"
                  : "conv-epilogues");
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
