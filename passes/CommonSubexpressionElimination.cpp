// Common-subexpression elimination: a node with the same op, operands and attributes as an
// earlier one (constants: the same tensor, bit for bit) is replaced by that earlier node.
//
// Algorithm:
//  1. Walk nodes in order, keying each by (op, operands, result count, attribute digest).
//  2. On a key hit, compare attributes exactly (attrEqual); if equal, redirect every use of
//     the node's results to the earlier node's results. DCE removes the leftovers.
#include <map>
#include <tuple>

#include "nnc/passes/Passes.h"
#include "nnc/support/Hash.h"

namespace nnc {

namespace {
uint64_t digest(const Attribute &a) {
  // A cheap digest that only needs to separate most unequal attributes; attrEqual decides.
  uint64_t h = kFnv1aOffset ^ a.index();
  auto mix = [&](const void *p, size_t n) { h = fnv1a(p, n, h); };
  if (const Tensor *t = std::get_if<Tensor>(&a)) {
    mix(t->extents().data(), t->extents().size() * sizeof(int64_t));
    mix(t->rawData(), std::min<size_t>(t->byteSize(), 4096));
  } else if (const int64_t *i = std::get_if<int64_t>(&a)) {
    mix(i, sizeof *i);
  } else if (const std::vector<int64_t> *v = std::get_if<std::vector<int64_t>>(&a)) {
    mix(v->data(), v->size() * sizeof(int64_t));
  }
  return h;
}

bool sameAttrs(const Node &a, const Node &b) {
  if (a.attrs().size() != b.attrs().size())
    return false;
  for (auto ia = a.attrs().begin(), ib = b.attrs().begin(); ia != a.attrs().end(); ++ia, ++ib)
    if (ia->first != ib->first || !attrEqual(ia->second, ib->second))
      return false;
  return true;
}

class CsePass : public Pass {
public:
  std::string_view name() const override { return "cse"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    using Key = std::tuple<int, std::vector<Value *>, size_t, uint64_t>;
    std::map<Key, std::vector<Node *>> seen;
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (n->body()) // attributes and operands do not say what a loop computes
        continue;
      uint64_t h = 0;
      for (const auto &[name, value] : n->attrs())
        h = h * 31 + digest(value) + std::hash<std::string>()(name);
      Key key{static_cast<int>(n->kind()), n->operands(), n->numResults(), h};
      Node *match = nullptr;
      for (Node *cand : seen[key])
        if (sameAttrs(*cand, *n)) {
          match = cand;
          break;
        }
      if (!match) {
        seen[key].push_back(n);
        continue;
      }
      for (size_t i = 0; i < n->numResults(); ++i)
        if (!g.isOutput(n->result(i))) // outputs keep their names
          g.replaceAllUsesWith(n->result(i), match->result(i));
      addStat("nodes-merged");
      changed = true;
    }
    return changed;
  }
};
} // namespace

std::unique_ptr<Pass> createCommonSubexpressionEliminationPass() {
  return std::make_unique<CsePass>();
}

} // namespace nnc
