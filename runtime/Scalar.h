// Per-dtype storage, compute type, load/store and dtype dispatch for the interpreter kernels, on
// top of the scalar semantics of the elementwise ops (nnc/ir/ScalarOps.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "nnc/ir/DType.h"
#include "nnc/ir/ScalarOps.h"
#include "nnc/ir/Tensor.h"
#include "nnc/support/Float16.h"

namespace nnc::scalar {

// ---- Per-dtype storage, compute type, load and store ----------------------------------------

template <DType D> using Storage = typename DTypeStorage<D>::type;

/// The type arithmetic on a dtype is done in: float for f16/bf16, the storage type otherwise.
template <DType D> struct ComputeOf {
  using type = Storage<D>;
};
template <> struct ComputeOf<DType::F16> {
  using type = float;
};
template <> struct ComputeOf<DType::BF16> {
  using type = float;
};
template <DType D> using Compute = typename ComputeOf<D>::type;

template <DType D> inline Compute<D> load(const Storage<D> *p, int64_t i) {
  if constexpr (D == DType::F16)
    return halfToFloat(p[i]);
  else if constexpr (D == DType::BF16)
    return bf16ToFloat(p[i]);
  else
    return p[i];
}

template <DType D, typename V> inline void store(Storage<D> *p, int64_t i, V v) {
  if constexpr (D == DType::F16)
    p[i] = floatToHalf(static_cast<float>(v));
  else if constexpr (D == DType::BF16)
    p[i] = floatToBf16(static_cast<float>(v));
  else
    p[i] = static_cast<Storage<D>>(v);
}

/// Calls `f(std::integral_constant<DType, D>())` for an arithmetic dtype D; returns false
/// (without calling) for a storage-only dtype.
template <typename F> bool dispatchArithmetic(DType t, F &&f) {
#define NNC_CASE(D)                                                                                \
  case DType::D:                                                                                   \
    f(std::integral_constant<DType, DType::D>());                                                  \
    return true;
  switch (t) {
    NNC_CASE(F32)
    NNC_CASE(F64)
    NNC_CASE(F16)
    NNC_CASE(BF16)
    NNC_CASE(I8)
    NNC_CASE(U8)
    NNC_CASE(I16)
    NNC_CASE(U16)
    NNC_CASE(I32)
    NNC_CASE(U32)
    NNC_CASE(I64)
    NNC_CASE(U64)
    NNC_CASE(Bool)
  default:
    return false;
  }
#undef NNC_CASE
}

} // namespace nnc::scalar
