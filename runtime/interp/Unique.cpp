// Interpreter kernel of unique (ONNX Unique-11): a stable sort of the slices, a walk that
// groups equal neighbours, and (unsorted) a renumbering of the groups by first occurrence.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "interp/Kernels.h"

namespace nnc::interp {

namespace {

/// -1, 0 or 1 as element a of x orders before, with or after element b: numbers by value,
/// NaN after every number and equal to NaN.
int compareElements(const Tensor &x, int64_t a, int64_t b) {
  DType t = x.dtype();
  if (isFloat(t)) {
    double va = x.elementAsDouble(a), vb = x.elementAsDouble(b);
    bool na = std::isnan(va), nb = std::isnan(vb);
    if (na || nb)
      return na == nb ? 0 : (na ? 1 : -1);
    return va < vb ? -1 : (va > vb ? 1 : 0);
  }
  if (isUnsignedInteger(t)) {
    uint64_t va = static_cast<uint64_t>(x.elementAsInt(a)),
             vb = static_cast<uint64_t>(x.elementAsInt(b));
    return va < vb ? -1 : (va > vb ? 1 : 0);
  }
  int64_t va = x.elementAsInt(a), vb = x.elementAsInt(b);
  return va < vb ? -1 : (va > vb ? 1 : 0);
}

} // namespace

Results evalUnique(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  Extents xe = x.extents();
  // Slices: n of them along the axis, each `outer` runs of `inner` elements.
  int64_t outer = 1, n = x.numElements(), inner = 1;
  size_t axis = 0;
  bool hasAxis = node.hasAttr("axis");
  if (hasAxis) {
    int64_t a = node.getInt("axis");
    axis = static_cast<size_t>(a < 0 ? a + x.rank() : a);
    n = xe[axis];
    for (size_t d = 0; d < xe.size(); ++d) {
      if (d < axis)
        outer *= xe[d];
      else if (d > axis)
        inner *= xe[d];
    }
  }
  auto at = [&](int64_t s, int64_t o, int64_t i) { return (o * n + s) * inner + i; };
  auto compareSlices = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        if (int c = compareElements(x, at(a, o, i), at(b, o, i)))
          return c;
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compareSlices(a, b) < 0; });
  // Groups of equal slices in sorted order; a stable sort puts each group's first
  // occurrence first.
  std::vector<int64_t> group(static_cast<size_t>(n)), first, counts;
  for (int64_t k = 0; k < n; ++k) {
    int64_t s = order[static_cast<size_t>(k)];
    if (k == 0 || compareSlices(order[static_cast<size_t>(k - 1)], s) != 0) {
      first.push_back(s);
      counts.push_back(0);
    }
    group[static_cast<size_t>(s)] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank(static_cast<size_t>(u));
  std::iota(rank.begin(), rank.end(), 0);
  if (node.getInt("sorted", 1) == 0) {
    int64_t next = 0;
    for (int64_t s = 0; s < n; ++s) {
      int64_t g = group[static_cast<size_t>(s)];
      if (first[static_cast<size_t>(g)] == s)
        rank[static_cast<size_t>(g)] = next++;
    }
  }
  std::vector<int64_t> indices(static_cast<size_t>(u)), cnt(static_cast<size_t>(u)),
      inverse(static_cast<size_t>(n));
  for (int64_t g = 0; g < u; ++g) {
    indices[static_cast<size_t>(rank[static_cast<size_t>(g)])] = first[static_cast<size_t>(g)];
    cnt[static_cast<size_t>(rank[static_cast<size_t>(g)])] = counts[static_cast<size_t>(g)];
  }
  for (int64_t s = 0; s < n; ++s)
    inverse[static_cast<size_t>(s)] = rank[static_cast<size_t>(group[static_cast<size_t>(s)])];
  Extents ye = hasAxis ? xe : Extents{};
  if (hasAxis)
    ye[axis] = u;
  else
    ye = {u};
  NNC_ASSIGN_OR_RETURN(Tensor y, Tensor::create(x.dtype(), ye));
  size_t es = dtypeSize(x.dtype());
  const char *src = static_cast<const char *>(x.rawData());
  char *dst = static_cast<char *>(y.rawData());
  for (int64_t o = 0; o < outer && inner > 0; ++o)
    for (int64_t g = 0; g < u; ++g)
      std::memcpy(dst + static_cast<size_t>((o * u + g) * inner) * es,
                  src + static_cast<size_t>(at(indices[static_cast<size_t>(g)], o, 0)) * es,
                  static_cast<size_t>(inner) * es);
  std::vector<Tensor> results{y, Tensor::fromVector<int64_t>(DType::I64, {u}, indices),
                              Tensor::fromVector<int64_t>(DType::I64, {n}, inverse),
                              Tensor::fromVector<int64_t>(DType::I64, {u}, cnt)};
  results.resize(std::min<size_t>(results.size(), node.numResults()));
  return results;
}

} // namespace nnc::interp
