// Broadcasting and axis helpers.
#include "nnc/ir/ShapeUtils.h"

#include <algorithm>
#include <set>

namespace nnc {

Expected<Shape> broadcastShapes(const Shape &a, const Shape &b, Graph &g) {
  size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim one(1);
    const Dim &x = i < rank - a.size() ? one : a[i - (rank - a.size())];
    const Dim &y = i < rank - b.size() ? one : b[i - (rank - b.size())];
    if (x == y)
      r[i] = x;
    else if (x.isStatic() && x.value() == 1)
      r[i] = y;
    else if (y.isStatic() && y.value() == 1)
      r[i] = x;
    else if (x.isStatic() && y.isStatic())
      return makeError("shapes {} and {} do not broadcast (dim {}: {} vs {})", shapeStr(a),
                       shapeStr(b), i, x.value(), y.value());
    else if (x.isStatic())
      r[i] = x;
    else if (y.isStatic())
      r[i] = y;
    else
      r[i] = g.freshDim();
  }
  return r;
}

std::optional<Extents> broadcastExtents(const Extents &a, const Extents &b) {
  size_t rank = std::max(a.size(), b.size());
  Extents r(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x == y || y == 1)
      r[i] = x;
    else if (x == 1)
      r[i] = y;
    else
      return std::nullopt;
  }
  return r;
}

Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, const Node &node,
                                const char *attrName) {
  if (axis < -rank || axis >= rank)
    return node.error("{} {} is out of range for rank {}", attrName, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

Expected<std::vector<int64_t>> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank,
                                             const Node &node, const char *attrName) {
  std::vector<int64_t> r;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    NNC_ASSIGN_OR_RETURN(int64_t n, normalizeAxis(a, rank, node, attrName));
    if (!seen.insert(n).second)
      return node.error("{} lists axis {} twice", attrName, a);
    r.push_back(n);
  }
  return r;
}

void sliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t &first,
               int64_t &count) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  if (dim == 0)
    count = 0;
  first = start;
}

std::optional<Tensor> staticShapeElements(const Node &gather) {
  if (gather.kind() != OpKind::Gather || gather.numOperands() != 2 || !gather.operand(0))
    return std::nullopt;
  const Node *shape = gather.operand(0)->producer();
  const Tensor *indices = gather.constantOperand(1);
  if (!shape || shape->kind() != OpKind::ShapeOf || !indices || !shape->operand(0) ||
      !isInteger(indices->dtype()))
    return std::nullopt;
  const Shape &dims = shape->operand(0)->shape();
  int64_t rank = static_cast<int64_t>(dims.size());
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank); };
  int64_t start = clamp(shape->getInt("start", 0)), end = clamp(shape->getInt("end", rank));
  int64_t len = std::max<int64_t>(end - start, 0);
  int64_t axis = gather.getInt("axis", 0);
  if (axis != 0 && axis != -1)
    return std::nullopt;
  std::vector<int64_t> values;
  for (int64_t k = 0; k < indices->numElements(); ++k) {
    int64_t i = static_cast<int64_t>(indices->elementAsDouble(k));
    if (i < -len || i >= len)
      return std::nullopt;
    const Dim &d = dims[static_cast<size_t>(start + (i < 0 ? i + len : i))];
    if (!d.isStatic())
      return std::nullopt;
    values.push_back(d.value());
  }
  return Tensor::fromVector<int64_t>(DType::I64, indices->extents(), values);
}

} // namespace nnc
