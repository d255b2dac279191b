// Scalar helpers behind the elementwise formulas of Ops.def, and per-dtype load/store/dispatch.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "nnc/ir/DType.h"
#include "nnc/ir/Tensor.h"
#include "nnc/support/Float16.h"

namespace nnc::scalar {

template <typename T> constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T> constexpr bool kIsFloat = std::is_floating_point_v<T>;

/// The wrap-around (two's complement) conversion to T of a 64-bit pattern.
template <typename T> T wrap(uint64_t bits) { return static_cast<T>(bits); }

template <typename T> T abs(T a) {
  if constexpr (kIsFloat<T>)
    return std::fabs(a);
  else if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>)
    return a;
  else // |INT_MIN| wraps to INT_MIN instead of overflowing.
    return a < 0 ? wrap<T>(uint64_t(0) - static_cast<uint64_t>(a)) : a;
}

template <typename T> T sign(T a) {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a))
      return a;
    return a > 0 ? T(1) : (a < 0 ? T(-1) : T(0));
  } else if constexpr (std::is_unsigned_v<T>) {
    return a > 0 ? T(1) : T(0);
  } else {
    return a > 0 ? T(1) : (a < 0 ? T(-1) : T(0));
  }
}

/// 1/(1+e^-a) without overflow for large |a|.
template <typename T> T sigmoid(T a) {
  if (a >= 0)
    return T(1) / (T(1) + std::exp(-a));
  T e = std::exp(a);
  return e / (T(1) + e);
}

template <typename T> T add(T a, T b) {
  if constexpr (kIsInt<T>)
    return wrap<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <typename T> T sub(T a, T b) {
  if constexpr (kIsInt<T>)
    return wrap<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else
    return a - b;
}
template <typename T> T mul(T a, T b) {
  if constexpr (kIsInt<T>)
    return wrap<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

/// Integers truncate toward zero; division by zero gives 0 and INT_MIN / -1 wraps.
template <typename T> T div(T a, T b) {
  if constexpr (kIsInt<T>) {
    if (b == 0)
      return T(0);
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1))
        return wrap<T>(uint64_t(0) - static_cast<uint64_t>(a));
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

/// Integer powers by squaring (wrapping); a negative exponent gives the truncated real result.
template <typename T> T pow(T a, T b) {
  if constexpr (kIsInt<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (b < 0) {
        if (a == 1)
          return T(1);
        if (a == -1)
          return (b % 2 == 0) ? T(1) : T(-1);
        return T(0);
      }
    }
    uint64_t result = 1, base = static_cast<uint64_t>(a);
    uint64_t e = static_cast<uint64_t>(b);
    while (e) {
      if (e & 1)
        result *= base;
      base *= base;
      e >>= 1;
    }
    return wrap<T>(result);
  } else {
    return std::pow(a, b);
  }
}

/// Remainder with the sign of the divisor (Python's %); integer division by zero gives 0.
template <typename T> T mod(T a, T b) {
  if constexpr (kIsInt<T>) {
    if (b == 0)
      return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1))
        return T(0);
      T r = static_cast<T>(a % b);
      if (r != 0 && ((r < 0) != (b < 0)))
        r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  } else {
    T r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0)))
      r += b;
    else if (r == 0)
      r = std::copysign(T(0), b);
    return r;
  }
}

/// Remainder with the sign of the dividend (C fmod / %); integer division by zero gives 0.
template <typename T> T fmod(T a, T b) {
  if constexpr (kIsInt<T>) {
    if (b == 0)
      return T(0);
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1))
        return T(0);
    return static_cast<T>(a % b);
  } else {
    return std::fmod(a, b);
  }
}

template <typename T> T min(T a, T b) {
  if constexpr (kIsFloat<T>)
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<T>::quiet_NaN();
  return b < a ? b : a;
}
template <typename T> T max(T a, T b) {
  if constexpr (kIsFloat<T>)
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<T>::quiet_NaN();
  return a < b ? b : a;
}

/// a << b; 0 when b is at least the bit width.
template <typename T> T shiftLeft(T a, T b) {
  if (static_cast<uint64_t>(b) >= sizeof(T) * 8)
    return T(0);
  return wrap<T>(static_cast<uint64_t>(a) << static_cast<uint64_t>(b));
}
/// a >> b; 0 when b is at least the bit width.
template <typename T> T shiftRight(T a, T b) {
  if (static_cast<uint64_t>(b) >= sizeof(T) * 8)
    return T(0);
  return wrap<T>(static_cast<uint64_t>(a) >> static_cast<uint64_t>(b));
}

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

/// True for the dtypes that have arithmetic (not the storage-only formats).
constexpr bool isArithmetic(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
  case DType::I8:
  case DType::U8:
  case DType::I16:
  case DType::U16:
  case DType::I32:
  case DType::U32:
  case DType::I64:
  case DType::U64:
  case DType::Bool:
    return true;
  default:
    return false;
  }
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
