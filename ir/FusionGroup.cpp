// Fusion groups: collection from the `group` attributes and their well-formedness rules.
#include "nnc/ir/FusionGroup.h"

#include <algorithm>
#include <map>
#include <set>

namespace nnc {

bool isFusibleElementwise(const Node &n) {
  if (n.numResults() != 1)
    return false;
  return n.info().elementwise || n.kind() == OpKind::Cast || n.kind() == OpKind::Quantize ||
         n.kind() == OpKind::Dequantize;
}

bool isReshapeView(const Node &n) {
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze: return n.numResults() == 1 && n.numOperands() >= 1 && n.operand(0);
  default: return false;
  }
}

bool isFusibleView(const Node &n) {
  if (n.numResults() != 1 || n.numOperands() == 0 || !n.operand(0))
    return false;
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Transpose:
  case OpKind::ToNCHWc:
  case OpKind::FromNCHWc: return true;
  case OpKind::Concat: {
    for (const Value *o : n.operands())
      if (!o)
        return false;
    return true;
  }
  case OpKind::Slice:
    // starts (1) and the optional axes (3) and steps (4) must be constants; ends only bound
    // the result's extents, which are static.
    for (size_t i : {size_t(1), size_t(3), size_t(4)})
      if (i < n.numOperands() && n.operand(i) && !n.constantOperand(i))
        return false;
    return n.operand(1) != nullptr;
  case OpKind::Gather: {
    // A constant scalar index in range: the view needs no runtime check (a gather that
    // would read out of range stands alone, and its kernel reports the error).
    const Tensor *idx = n.numOperands() == 2 ? n.constantOperand(1) : nullptr;
    if (!idx || idx->rank() != 0 || (idx->dtype() != DType::I64 && idx->dtype() != DType::I32))
      return false;
    const Shape &xs = n.operand(0)->shape();
    int64_t axis = n.getInt("axis", 0), r = static_cast<int64_t>(xs.size());
    if (axis < 0)
      axis += r;
    if (axis < 0 || axis >= r || !xs[axis].isStatic())
      return false;
    int64_t i = idx->elementAsInt(0), dim = xs[axis].value();
    return i >= -dim && i < dim;
  }
  default: return false;
  }
}

std::vector<size_t> viewDataOperands(const Node &n) {
  if (n.kind() == OpKind::Concat) {
    std::vector<size_t> all(n.numOperands());
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = i;
    return all;
  }
  return {0};
}

bool isEpilogueAnchor(const Node &n) {
  return (n.kind() == OpKind::MatMul || n.kind() == OpKind::MatMulInteger ||
          n.kind() == OpKind::Conv || n.kind() == OpKind::ConvTranspose ||
          n.kind() == OpKind::ConvNCHWc ||
          n.kind() == OpKind::ConvInteger || n.kind() == OpKind::WinogradOutput) &&
         n.numResults() == 1;
}

int64_t fusionGroupOf(const Node &n) {
  const Attribute *a = n.attr(kFusionGroupAttr);
  if (!a || !std::holds_alternative<int64_t>(*a))
    return -1;
  return std::get<int64_t>(*a);
}

void freshFusionGroups(Graph &g, const std::vector<Node *> &copies) {
  int64_t next = 0;
  for (const Node *n : g.nodes())
    next = std::max(next, fusionGroupOf(*n) + 1);
  std::map<int64_t, int64_t> fresh;
  for (Node *c : copies) {
    int64_t id = fusionGroupOf(*c);
    if (id < 0)
      continue;
    auto [it, added] = fresh.emplace(id, next);
    next += added ? 1 : 0;
    c->setAttr(kFusionGroupAttr, it->second);
  }
}

namespace {
/// The normalized `axis` of a softmax node, or -1 when it is out of range.
int64_t normalizeLastAxis(const Node &softmax) {
  int64_t rank = softmax.operand(0) ? softmax.operand(0)->rank() : 0;
  int64_t axis = softmax.getInt("axis", -1);
  if (axis < 0)
    axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}
} // namespace

Expected<std::vector<FusionGroup>> fusionGroups(const Graph &g) {
  std::map<int64_t, FusionGroup> byId;
  std::vector<Node *> nodes = g.nodes();
  for (Node *n : nodes) {
    int64_t id = fusionGroupOf(*n);
    if (n->hasAttr(kFusionGroupAttr) && id < 0)
      return n->error("attribute '{}' must be a non-negative integer", kFusionGroupAttr);
    if (id < 0)
      continue;
    FusionGroup &fg = byId[id];
    fg.id = id;
    fg.members.push_back(n);
  }
  std::vector<FusionGroup> out;
  if (byId.empty())
    return out;
  // Users of every value, computed once (the verifier calls this after every pass).
  std::map<const Value *, std::vector<Node *>> usersOf;
  for (Node *n : nodes)
    for (Value *o : n->operands())
      if (o && (usersOf[o].empty() || usersOf[o].back() != n))
        usersOf[o].push_back(n);
  for (auto &[id, fg] : byId) {
    std::set<const Node *> in(fg.members.begin(), fg.members.end());
    fg.root = fg.members.back();
    if (fg.root->numResults() != 1)
      return fg.root->error("the root of fusion group {} must have one result", id);
    // The epilogue's result: the root's, or in an attention group the softmax operand's.
    const Value *epilogue = fg.root->result();
    if (fg.root->kind() == OpKind::MatMul && fg.members.size() > 1) {
      Value *p = fg.root->operand(0);
      fg.softmax = p && p->producer() && in.count(p->producer()) ? p->producer() : nullptr;
      if (!fg.softmax || fg.softmax->kind() != OpKind::Softmax ||
          normalizeLastAxis(*fg.softmax) != p->rank() - 1 || fg.members.size() < 3)
        return fg.root->error("the matmul that ends fusion group {} must multiply the softmax "
                              "(over the last axis) of the group's matmul",
                              id);
      Value *v = fg.root->operand(1);
      if (v && v->producer() && in.count(v->producer()))
        return fg.root->error("the last matmul of fusion group {} reads a member as V", id);
      epilogue = fg.softmax->operand(0);
    }
    for (Node *m : fg.members) {
      if (fg.softmax && (m == fg.softmax || m == fg.root)) {
        // the attention tail
      } else if (isEpilogueAnchor(*m) && m != fg.root) {
        if (fg.anchor)
          return m->error("fusion group {} has two anchors ({} and this one)", id,
                          fg.anchor->describe());
        fg.anchor = m;
      } else if (isFusibleView(*m) && !isFusibleElementwise(*m)) {
        fg.hasViews = true;
      } else if (!isFusibleElementwise(*m) && fg.members.size() > 1) {
        return m->error("op '{}' cannot be a member of fusion group {}", m->opName(), id);
      }
      if (m == fg.root)
        continue;
      if (g.isOutput(m->result()))
        return m->error("result %{} of a non-root member of fusion group {} is a graph output",
                        m->result()->name(), id);
      for (Node *u : usersOf[m->result()])
        if (!in.count(u))
          return m->error("result %{} of fusion group {} is used outside the group by {}",
                          m->result()->name(), id, u->describe());
    }
    if (fg.hasViews && (fg.anchor || fg.softmax))
      return fg.root->error("fusion group {} holds views and an anchor; views fuse only into "
                            "groups without one",
                            id);
    if (fg.softmax && (!fg.anchor || fg.anchor->kind() != OpKind::MatMul))
      return fg.root->error("attention fusion group {} needs a matmul as its anchor", id);
    if (fg.anchor) {
      if (fg.anchor->result()->shape() != epilogue->shape())
        return fg.anchor->error("the anchor of fusion group {} has shape {}, the group's "
                                "result {}",
                                id, fg.anchor->result()->type().str(),
                                epilogue->type().str());
      for (Value *o : fg.anchor->operands())
        if (o && o->producer() && in.count(o->producer()))
          return fg.anchor->error("the anchor of fusion group {} reads a member's result", id);
    }
    std::set<const Value *> seen;
    for (Node *m : fg.members)
      for (Value *o : m->operands())
        if (o && !(o->producer() && in.count(o->producer())) && seen.insert(o).second)
          fg.inputs.push_back(o);
    out.push_back(std::move(fg));
  }
  std::map<const Node *, size_t> pos;
  for (size_t i = 0; i < nodes.size(); ++i)
    pos[nodes[i]] = i;
  std::sort(out.begin(), out.end(), [&](const FusionGroup &a, const FusionGroup &b) {
    return pos[a.root] < pos[b.root];
  });
  return out;
}

} // namespace nnc
