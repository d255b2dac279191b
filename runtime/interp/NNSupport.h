// Helpers of the NN kernels (MatMul, Conv, LocalWindow, Interpolation): numeric tensors seen as
// arrays of double and back, and an odometer over multi-indices.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "nnc/ir/Tensor.h"
#include "nnc/support/Float16.h"

namespace nnc::interp::nn {

/// All elements of a numeric tensor as double.
inline std::vector<double> toDoubles(const Tensor &t) {
  std::vector<double> r(static_cast<size_t>(t.numElements()));
  if (t.dtype() == DType::F32) {
    const float *p = t.data<float>();
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = p[i];
  } else if (t.dtype() == DType::F64) {
    const double *p = t.data<double>();
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = p[i];
  } else {
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = t.elementAsDouble(static_cast<int64_t>(i));
  }
  return r;
}

template <typename T> T saturateRound(double v) {
  if (std::isnan(v))
    return T(0);
  v = std::nearbyint(v);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max()))
    return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

/// A new tensor of numeric dtype `t` holding `values` (integers: rounded to nearest and
/// saturated).
inline Expected<Tensor> fromDoubles(DType t, const Extents &extents,
                                    const std::vector<double> &values) {
  NNC_ASSIGN_OR_RETURN(Tensor r, Tensor::create(t, extents));
  NNC_ASSERT(static_cast<size_t>(r.numElements()) == values.size());
  size_t n = values.size();
  auto fill = [&](auto *p, auto conv) {
    for (size_t i = 0; i < n; ++i)
      p[i] = conv(values[i]);
  };
  switch (t) {
  case DType::F32:
    fill(r.data<float>(), [](double v) { return static_cast<float>(v); });
    break;
  case DType::F64:
    fill(r.data<double>(), [](double v) { return v; });
    break;
  case DType::F16:
    fill(r.data<uint16_t>(), [](double v) { return floatToHalf(static_cast<float>(v)); });
    break;
  case DType::BF16:
    fill(r.data<uint16_t>(), [](double v) { return floatToBf16(static_cast<float>(v)); });
    break;
#define NNC_INT_CASE(D, C)                                                                         \
  case DType::D:                                                                                   \
    fill(r.data<C>(), [](double v) { return saturateRound<C>(v); });                               \
    break;
    NNC_INT_CASE(I8, int8_t)
    NNC_INT_CASE(U8, uint8_t)
    NNC_INT_CASE(I16, int16_t)
    NNC_INT_CASE(U16, uint16_t)
    NNC_INT_CASE(I32, int32_t)
    NNC_INT_CASE(U32, uint32_t)
    NNC_INT_CASE(I64, int64_t)
    NNC_INT_CASE(U64, uint64_t)
#undef NNC_INT_CASE
  case DType::Bool:
    fill(r.data<bool>(), [](double v) { return v != 0; });
    break;
  default:
    NNC_ASSERT(false, "fromDoubles: {} is not an arithmetic dtype", dtypeName(t));
  }
  return r;
}

inline int64_t product(const Extents &e) {
  int64_t p = 1;
  for (int64_t x : e)
    p *= x;
  return p;
}

/// Row-major strides of `e`.
inline std::vector<int64_t> stridesOf(const Extents &e) {
  std::vector<int64_t> s(e.size(), 1);
  for (size_t i = e.size(); i-- > 1;)
    s[i - 1] = s[i] * e[i];
  return s;
}

/// Advances the multi-index `idx` within `e` in row-major order; false after the last one.
inline bool nextIndex(std::vector<int64_t> &idx, const Extents &e) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < e[d])
      return true;
    idx[d] = 0;
  }
  return false;
}

} // namespace nnc::interp::nn
