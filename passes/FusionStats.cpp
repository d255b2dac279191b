// Counters shared by the fusion passes (see FusionStats.h).
#include "FusionStats.h"

#include <algorithm>
#include <map>

#include "nnc/ir/FusionGroup.h"

namespace nnc::fusion {

namespace {
std::map<int64_t, int> groupSizes(const Graph &g) {
  std::map<int64_t, int> sizes;
  for (const Node *n : g.nodes())
    if (int64_t id = fusionGroupOf(*n); id >= 0)
      ++sizes[id];
  return sizes;
}
} // namespace

int64_t countUnits(const Graph &g) {
  std::map<int64_t, int> sizes = groupSizes(g);
  int64_t units = 0;
  for (const Node *n : g.nodes()) {
    if (n->kind() == OpKind::Constant)
      continue;
    int64_t id = fusionGroupOf(*n);
    if (id < 0 || sizes[id] == 1)
      ++units;
  }
  for (const auto &[id, size] : sizes)
    if (size > 1)
      ++units;
  return units;
}

int64_t intermediateBytes(const Graph &g) {
  std::map<int64_t, int> sizes = groupSizes(g);
  std::map<int64_t, const Node *> root;
  for (const Node *n : g.nodes())
    if (int64_t id = fusionGroupOf(*n); id >= 0)
      root[id] = n;
  int64_t bytes = 0;
  for (const Node *n : g.nodes()) {
    int64_t id = fusionGroupOf(*n);
    if (id < 0 || sizes[id] < 2 || root[id] == n)
      continue;
    for (const Value *r : n->results()) {
      std::optional<Extents> e = staticExtents(r->shape());
      if (!e)
        continue;
      std::optional<int64_t> count = checkedNumElements(*e);
      if (count)
        bytes += *count * static_cast<int64_t>(dtypeSize(r->dtype()));
    }
  }
  return bytes;
}

int64_t freshGroupId(const Graph &g) {
  int64_t next = 0;
  for (const Node *n : g.nodes())
    next = std::max(next, fusionGroupOf(*n) + 1);
  return next;
}

} // namespace nnc::fusion
