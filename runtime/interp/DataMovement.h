// Helpers shared by the data-movement kernels: element copies by byte size, strides and
// "offset table" copies that express transpose, slice, pad, tile and broadcast in one loop.
#pragma once

#include <cstring>
#include <vector>

#include "interp/Kernels.h"

namespace nnc::interp::dm {

/// Row-major strides (in elements) of extents.
inline Extents stridesOf(const Extents &e) {
  Extents s(e.size(), 1);
  for (int64_t i = static_cast<int64_t>(e.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * e[i + 1];
  return s;
}

/// Copies one element of `size` bytes.
inline void copyElement(char *dst, const char *src, size_t size) {
  switch (size) {
  case 1: *dst = *src; break;
  case 2: std::memcpy(dst, src, 2); break;
  case 4: std::memcpy(dst, src, 4); break;
  case 8: std::memcpy(dst, src, 8); break;
  default: std::memcpy(dst, src, size); break;
  }
}

/// Marks an offset-table entry whose output element is the fill value.
constexpr int64_t kFill = INT64_MIN / 4;

/// out[o_0..o_{r-1}] = src[sum_d tables[d][o_d]] (element offsets), or `fill` (one element's
/// bytes) when any table entry is kFill. tables[d] has out.dim(d) entries.
void copyByTables(Tensor &out, const Tensor &src, const std::vector<std::vector<int64_t>> &tables,
                  const void *fill);

/// The integer values of a shape-like operand; an Error naming the node if it is absent or
/// not an integer tensor.
Expected<std::vector<int64_t>> intValues(const Node &node, const Operands &ops, size_t i,
                                         const char *what);

/// Reads index `raw` into an axis of extent `dim` (negative counts from the back); an Error
/// naming the node when out of range.
inline Expected<int64_t> checkIndex(const Node &node, int64_t raw, int64_t dim) {
  int64_t i = raw < 0 ? raw + dim : raw;
  if (i < 0 || i >= dim)
    return node.error("index {} is out of range for an axis of size {}", raw, dim);
  return i;
}

} // namespace nnc::interp::dm
