// Helpers of the pattern-matching passes (see PatternUtil.h).
#include "PatternUtil.h"

#include <algorithm>

#include "nnc/ir/ShapeUtils.h"

namespace nnc::pattern {

std::vector<int64_t> intsOr(const Node &n, const char *name, size_t count, int64_t dflt) {
  std::vector<int64_t> v = n.getInts(name, {});
  if (v.empty())
    v.assign(count, dflt);
  return v;
}

Node *onlyUser(const Graph &g, const Value *v) {
  if (g.isOutput(v))
    return nullptr;
  std::vector<Node *> users = g.users(v);
  return users.size() == 1 ? users[0] : nullptr;
}

bool eraseIfUnusedConstant(Graph &g, Node *c) {
  if (!c || c->kind() != OpKind::Constant || g.hasUses(c->result()))
    return false;
  g.eraseNode(c);
  return true;
}

Value *otherOperand(const Node *n, const Value *v) {
  if (!n || n->numOperands() != 2)
    return nullptr;
  if (n->operand(0) == v && n->operand(1) != v)
    return n->operand(1);
  if (n->operand(1) == v && n->operand(0) != v)
    return n->operand(0);
  return nullptr;
}

std::optional<double> scalarConstant(const Value *v) {
  if (!v || !v->producer() || v->producer()->kind() != OpKind::Constant)
    return std::nullopt;
  const Tensor &t = v->producer()->getTensor("value");
  if (t.numElements() != 1 || !isFloat(t.dtype()))
    return std::nullopt;
  return t.elementAsDouble(0);
}

bool isTrailingParameter(const Value *v, int64_t normRank) {
  return v && v->producer() && v->producer()->kind() == OpKind::Constant &&
         v->rank() <= normRank;
}

int64_t trailingReduceMeanAxis(const Node &r) {
  if (r.kind() != OpKind::ReduceMean || r.getInt("keepdims") != 1 || !r.operand(0))
    return -1;
  int64_t rank = r.operand(0)->rank();
  Expected<std::vector<int64_t>> axes = normalizeAxes(r.getInts("axes"), rank, r);
  if (!axes || axes->empty())
    return -1;
  std::vector<int64_t> a = *axes;
  std::sort(a.begin(), a.end());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != rank - static_cast<int64_t>(a.size()) + static_cast<int64_t>(i))
      return -1;
  return a.front();
}

Value *onesOverTrailingDims(Graph &g, const Value *x, int64_t axis, Node *before,
                            const std::string &name) {
  DType t = x->dtype();
  if (t != DType::F32 && t != DType::F64)
    return nullptr;
  Extents ones;
  for (int64_t i = axis; i < x->rank(); ++i) {
    if (!x->shape()[i].isStatic())
      return nullptr;
    ones.push_back(x->shape()[i].value());
  }
  Tensor one = Tensor::zeros(t, ones);
  for (int64_t i = 0; i < one.numElements(); ++i) {
    if (t == DType::F32)
      one.data<float>()[i] = 1.0f;
    else
      one.data<double>()[i] = 1.0;
  }
  return g.createNode(OpKind::Constant, {}, {TensorType(t, shapeFromExtents(ones))},
                      {{"value", Attribute(one)}}, "", {name}, before)
      ->result();
}

int64_t matchToFixedPoint(Graph &g, const std::function<bool(Node *)> &match) {
  int64_t matches = 0;
  for (bool again = true; again;) {
    again = false;
    for (Node *n : g.nodes()) {
      if (match(n)) {
        ++matches;
        again = true;
        break; // the match erased nodes: the list is stale
      }
    }
  }
  return matches;
}

Error propagateToUsers(Graph &g, Node *from,
                       const std::function<Expected<Node *>(Node *)> &move) {
  std::vector<Node *> work{from};
  while (!work.empty()) {
    Node *f = work.back();
    work.pop_back();
    for (Node *u : g.users(f->result())) {
      NNC_ASSIGN_OR_RETURN(Node * moved, move(u));
      if (moved)
        work.push_back(moved);
    }
  }
  return Error::success();
}

void replaceChain(Graph &g, const std::vector<Node *> &chain, Value *y, Node *replacement) {
  g.replaceAllUsesWith(y, replacement->result());
  std::string name = y->name();
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    g.eraseNode(*it);
  g.renameValue(replacement->result(), name);
}

} // namespace nnc::pattern
