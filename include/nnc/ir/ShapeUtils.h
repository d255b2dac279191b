// Helpers for shape rules and builders: broadcasting, axis normalization, static dims read
// through a shape.
#pragma once

#include "nnc/ir/Graph.h"

namespace nnc {

/// Numpy broadcasting of two shapes. Equal dims stay; a 1 takes the other side; a static
/// dim other than 1 wins over a symbol (the symbol must equal it at run time); two different
/// symbols give a fresh symbol of `g`. Static dims that differ and are not 1 are an error.
Expected<Shape> broadcastShapes(const Shape &a, const Shape &b, Graph &g);
/// Concrete numpy broadcasting; nullopt when incompatible.
std::optional<Extents> broadcastExtents(const Extents &a, const Extents &b);

/// Maps axis in [-rank, rank) to [0, rank); error when out of range.
Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, const Node &node,
                                const char *attrName = "axis");
/// normalizeAxis for each element; also rejects duplicates.
Expected<std::vector<int64_t>> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank,
                                             const Node &node, const char *attrName = "axes");

/// ONNX Slice clamping for one axis of extent `dim` (negative start and end count from the
/// end; step != 0): the first index taken and how many.
void sliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t &first,
               int64_t &count);

/// What `gather(shape(x), indices)` computes when `indices` is a constant and every dim of x
/// it picks is static, even where others are not (x's rows counted by NonMaxSuppression:
/// torch.squeeze(x, 1) exports `If(Shape(x)[1] == 1, Squeeze, Identity)`); nullopt for any
/// other node, an index out of range, or a picked dim known only at run time.
std::optional<Tensor> staticShapeElements(const Node &gather);

} // namespace nnc
