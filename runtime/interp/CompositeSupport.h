// Helpers of the composite-op kernels (Normalization.cpp, Attention.cpp): float tensors seen
// as arrays of double, rounding to a float dtype, broadcast index maps.
#pragma once

#include <vector>

#include "nnc/ir/Tensor.h"
#include "nnc/support/Float16.h"

namespace nnc::interp::composite {

/// All elements of a float (or integer/bool) tensor as double.
inline std::vector<double> toDoubles(const Tensor &t) {
  std::vector<double> r(static_cast<size_t>(t.numElements()));
  switch (t.dtype()) {
  case DType::F32: {
    const float *p = t.data<float>();
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = p[i];
    break;
  }
  case DType::F64: {
    const double *p = t.data<double>();
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = p[i];
    break;
  }
  default:
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = t.elementAsDouble(static_cast<int64_t>(i));
  }
  return r;
}

/// `v` rounded to the precision of float dtype `t` (identity for f64).
inline double roundTo(DType t, double v) {
  switch (t) {
  case DType::F32:
    return static_cast<float>(v);
  case DType::F16:
    return halfToFloat(floatToHalf(static_cast<float>(v)));
  case DType::BF16:
    return bf16ToFloat(floatToBf16(static_cast<float>(v)));
  default:
    return v;
  }
}

/// A new tensor of float dtype `t` holding `values`.
inline Expected<Tensor> fromDoubles(DType t, const Extents &extents,
                                    const std::vector<double> &values) {
  NNC_ASSIGN_OR_RETURN(Tensor r, Tensor::create(t, extents));
  NNC_ASSERT(static_cast<size_t>(r.numElements()) == values.size());
  size_t n = values.size();
  switch (t) {
  case DType::F32: {
    float *p = r.data<float>();
    for (size_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(values[i]);
    break;
  }
  case DType::F64: {
    double *p = r.data<double>();
    for (size_t i = 0; i < n; ++i)
      p[i] = values[i];
    break;
  }
  case DType::F16: {
    uint16_t *p = r.data<uint16_t>();
    for (size_t i = 0; i < n; ++i)
      p[i] = floatToHalf(static_cast<float>(values[i]));
    break;
  }
  case DType::BF16: {
    uint16_t *p = r.data<uint16_t>();
    for (size_t i = 0; i < n; ++i)
      p[i] = floatToBf16(static_cast<float>(values[i]));
    break;
  }
  default:
    NNC_ASSERT(false, "fromDoubles: {} is not a float dtype", dtypeName(t));
  }
  return r;
}

inline int64_t product(const Extents &e, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < e.size(); ++i)
    p *= e[i];
  return p;
}

/// For each element of `out` (row-major), the flat index of the element of a tensor of extents
/// `in` that numpy broadcasting maps to it. `in` must broadcast to `out` one way.
inline std::vector<int64_t> broadcastIndexMap(const Extents &out, const Extents &in) {
  size_t rank = out.size(), off = rank - in.size();
  std::vector<int64_t> inStride(rank, 0);
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    inStride[off + i] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  int64_t n = product(out, 0, rank);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(rank, 0);
  int64_t cur = 0;
  for (int64_t e = 0; e < n; ++e) {
    map[static_cast<size_t>(e)] = cur;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out[d]) {
        cur += inStride[d];
        break;
      }
      cur -= inStride[d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
  return map;
}

/// True when `in` broadcasts to `out` without changing it.
inline bool broadcastsTo(const Extents &in, const Extents &out) {
  if (in.size() > out.size())
    return false;
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != 1 && in[i] != out[off + i])
      return false;
  return true;
}

} // namespace nnc::interp::composite
