// The scalar semantics of the elementwise ops and of casts: the helpers behind the formulas of
// Ops.def (integer wrap-around, division and remainder by zero, NaN-propagating min/max, shifts
// past the bit width...), one functor per elementwise op built from those formulas, and the
// ONNX Cast of one value (castNumber). Shared by the reference interpreter
// (runtime/interp/Elementwise.cpp, Cast.cpp) and the kernel evaluator; the backends get the
// same rules from ir/KernelExpand.cpp, which writes them as primitives, and unit tests
// (tests/unit/EdgeCaseTest.cpp) hold every backend to these definitions.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "nnc/ir/DType.h"
#include "nnc/ir/FastMath.h"
#include "nnc/ir/Op.h"
#include "nnc/support/Float16.h"
#include "nnc/support/FloatFormats.h"

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

// exp, sigmoid, tanh and erf: f32 (and f16/bf16, computed in f32) take FastMath.h's
// expansions, the numbers every backend computes; f64 takes libm.
template <typename T> T exp(T a) {
  if constexpr (std::is_same_v<T, float>)
    return fastmath::expF32(a);
  else
    return std::exp(a);
}

/// 1/(1+e^-a) without overflow for large |a|.
template <typename T> T sigmoid(T a) {
  if constexpr (std::is_same_v<T, float>) {
    return fastmath::sigmoidF32(a);
  } else {
    if (a >= 0)
      return T(1) / (T(1) + std::exp(-a));
    T e = std::exp(a);
    return e / (T(1) + e);
  }
}

template <typename T> T tanh(T a) {
  if constexpr (std::is_same_v<T, float>)
    return fastmath::tanhF32(a);
  else
    return std::tanh(a);
}

template <typename T> T erf(T a) {
  if constexpr (std::is_same_v<T, float>)
    return fastmath::erfF32(a);
  else
    return std::erf(a);
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
  } else if constexpr (std::is_same_v<T, float>) {
    return fastmath::powF32(a, b); // f16/bf16 too (computed in f32), as every backend
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

// ---- Casts ------------------------------------------------------------------------------------

/// One value of an arithmetic dtype, exactly: a float as a double holding a value of its
/// dtype, an integer as its value sign- or zero-extended to 64 bits (`i` and `u()` are the same
/// bits), a bool as 0 or 1.
struct Number {
  DType type = DType::I64;
  int64_t i = 0;
  double f = 0;

  uint64_t u() const { return static_cast<uint64_t>(i); }
  bool nonZero() const { return isFloat(type) ? f != 0 : i != 0; }
  /// The value as a double (integers rounded once).
  double asDouble() const {
    if (isFloat(type))
      return f;
    return isUnsignedInteger(type) || type == DType::Bool ? static_cast<double>(u())
                                                          : static_cast<double>(i);
  }
};

/// `bits` (a 64-bit pattern) wrapped to the integer dtype `t`, as a Number.
inline Number intNumber(DType t, uint64_t bits) {
  Number n;
  n.type = t;
  switch (t) {
  case DType::I8: n.i = static_cast<int8_t>(bits); break;
  case DType::U8: n.i = static_cast<uint8_t>(bits); break;
  case DType::I16: n.i = static_cast<int16_t>(bits); break;
  case DType::U16: n.i = static_cast<uint16_t>(bits); break;
  case DType::I32: n.i = static_cast<int32_t>(bits); break;
  case DType::U32: n.i = static_cast<uint32_t>(bits); break;
  case DType::Bool: n.i = bits != 0; break;
  default: n.i = static_cast<int64_t>(bits); break;
  }
  return n;
}

/// ONNX Cast of `v` to the arithmetic dtype `to`, the one definition:
///  - to bool: v != 0 (NaN is true);
///  - float to integer: truncation toward zero, NaN gives 0, values beyond the 64-bit range
///    saturate (to the unsigned range for unsigned targets), then the 64-bit pattern wraps to
///    the target's width (fp::floatToIntBits);
///  - integer to integer: the 64-bit pattern wraps;
///  - to f32 and f64: one rounding of the exact value; to f16 and bf16: one rounding of the
///    value as a double (integers beyond 2^53 round twice; they overflow f16 anyway).
inline Number castNumber(const Number &v, DType to) {
  if (v.type == to)
    return v;
  Number out;
  out.type = to;
  if (to == DType::Bool) {
    out.i = v.nonZero();
    return out;
  }
  if (isFloat(to)) {
    bool fromInt = !isFloat(v.type);
    bool u = isUnsignedInteger(v.type) || v.type == DType::Bool;
    switch (to) {
    case DType::F32:
      out.f = !fromInt ? static_cast<float>(v.f)
                       : (u ? static_cast<float>(v.u()) : static_cast<float>(v.i));
      break;
    case DType::F16: out.f = halfToFloat(static_cast<uint16_t>(
                         fp::encodeFloat(v.asDouble(), fp::kF16, /*saturate=*/false)));
      break;
    case DType::BF16: out.f = bf16ToFloat(static_cast<uint16_t>(
                          fp::encodeFloat(v.asDouble(), fp::kBF16, /*saturate=*/false)));
      break;
    default: out.f = v.asDouble(); break;
    }
    return out;
  }
  uint64_t bits = isFloat(v.type) ? fp::floatToIntBits(v.f, isUnsignedInteger(to)) : v.u();
  return intNumber(to, bits);
}

// ---- Which dtypes have arithmetic, and which an op accepts ------------------------------------

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

/// The compile-time twin of typeClassAccepts() for the arithmetic dtypes.
constexpr bool accepts(TypeClass c, DType t) {
  bool isF = t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
  bool isS = t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
  bool isU = t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
  switch (c) {
  case TypeClass::Float: return isF;
  case TypeClass::Numeric: return isF || isS || isU;
  case TypeClass::Signed: return isF || isS;
  case TypeClass::Int: return isS || isU;
  case TypeClass::Unsigned: return isU;
  case TypeClass::Bool: return t == DType::Bool;
  case TypeClass::Any: return isArithmetic(t);
  }
  return false;
}

// ---- One functor per elementwise op: its kind, type class, arity and formula ------------------

#define NNC_ELEMENTWISE(Id, name, arity, types, result, libm, doc, formula)                        \
  struct Fn##Id {                                                                                  \
    static constexpr OpKind kKind = OpKind::Id;                                                    \
    static constexpr TypeClass kTypes = TypeClass::types;                                          \
    static constexpr int kArity = arity;                                                           \
    static constexpr bool kBoolResult = ResultClass::result == ResultClass::BoolResult;            \
    template <typename A, typename B, typename C> static auto apply(A a, B b, C c) {               \
      (void)a;                                                                                     \
      (void)b;                                                                                     \
      (void)c;                                                                                     \
      return formula;                                                                              \
    }                                                                                              \
  };
#include "nnc/ir/Ops.def"

} // namespace nnc::scalar
