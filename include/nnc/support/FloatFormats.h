// Bit-exact scalar conversions between double and the small storage formats: the f8 variants
// (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), f4e2m1, f8e8m0 (with its round modes) and the sub-byte
// integers i4/u4/i2/u2. One element is one byte with the format's bits in the low bits.
// Shared by the interpreter's Cast (the oracle) and the helpers generated code calls, so both
// give the same bits. The semantics follow onnx.numpy_helper / ml_dtypes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace nnc::fp {

/// How a small binary format uses its top exponent and NaN: IEEE (inf and NaNs), FN (no
/// inf, only the all-ones pattern is NaN), FNUZ (no inf, no -0: 0x80 is the only NaN) and
/// NoNaN (no inf, no NaN).
enum class Special { IEEE, FN, FNUZ, NoNaN };

/// A binary float format: 1 sign bit, expBits, manBits.
struct FloatFormat {
  int expBits;
  int manBits;
  int bias;
  Special special;

  constexpr int width() const { return 1 + expBits + manBits; }
  constexpr uint32_t signBit() const { return 1u << (expBits + manBits); }
  constexpr uint32_t expMask() const { return ((1u << expBits) - 1) << manBits; }
  constexpr int maxExpField() const {
    return special == Special::IEEE ? (1 << expBits) - 2 : (1 << expBits) - 1;
  }
  constexpr uint32_t maxMantissa() const {
    return special == Special::FN ? (1u << manBits) - 2 : (1u << manBits) - 1;
  }
  double maxFinite() const {
    return std::ldexp(1.0 + double(maxMantissa()) / double(1u << manBits), maxExpField() - bias);
  }
  constexpr uint32_t maxBits() const { return uint32_t(maxExpField()) << manBits | maxMantissa(); }
  constexpr uint32_t nanBits(bool negative) const {
    switch (special) {
    case Special::IEEE: return (negative ? signBit() : 0) | expMask() | (1u << (manBits - 1));
    case Special::FN: return (negative ? signBit() : 0) | expMask() | ((1u << manBits) - 1);
    case Special::FNUZ: return signBit();
    case Special::NoNaN: return signBit(); // ml_dtypes' float4_e2m1fn maps NaN to -0
    }
    return 0;
  }
};

inline constexpr FloatFormat kF16{5, 10, 15, Special::IEEE};
inline constexpr FloatFormat kBF16{8, 7, 127, Special::IEEE};
inline constexpr FloatFormat kE4M3FN{4, 3, 7, Special::FN};
inline constexpr FloatFormat kE4M3FNUZ{4, 3, 8, Special::FNUZ};
inline constexpr FloatFormat kE5M2{5, 2, 15, Special::IEEE};
inline constexpr FloatFormat kE5M2FNUZ{5, 2, 16, Special::FNUZ};
inline constexpr FloatFormat kF4E2M1{2, 1, 1, Special::NoNaN};

/// Rounds `x` to nearest even in format `f`. Out-of-range values (and infinities where the
/// format has none) become ±max when `saturate` (always for NoNaN formats), else infinity or
/// NaN.
inline uint32_t encodeFloat(double x, const FloatFormat &f, bool saturate) {
  bool neg = std::signbit(x);
  uint32_t sign = neg ? f.signBit() : 0;
  if (std::isnan(x))
    return f.nanBits(neg);
  bool noNegZero = f.special == Special::FNUZ;
  auto overflow = [&]() -> uint32_t {
    if (saturate || f.special == Special::NoNaN)
      return sign | f.maxBits();
    if (f.special == Special::IEEE)
      return sign | f.expMask();
    return f.nanBits(neg);
  };
  double a = std::fabs(x);
  if (std::isinf(a))
    return (f.special == Special::IEEE && !saturate) ? (sign | f.expMask()) : overflow();
  if (a == 0)
    return noNegZero ? 0 : sign;
  int ex;
  std::frexp(a, &ex); // a = m * 2^ex, m in [0.5, 1)
  int e = ex - 1;
  int minNormal = 1 - f.bias;
  int quantumExp = (e < minNormal ? minNormal : e) - f.manBits;
  double q = std::nearbyint(std::ldexp(a, -quantumExp)); // ties to even
  double v = std::ldexp(q, quantumExp);
  if (v > f.maxFinite())
    return overflow();
  if (q == 0)
    return noNegZero ? 0 : sign;
  if (v < std::ldexp(1.0, minNormal)) // subnormal: exponent field 0
    return sign | static_cast<uint32_t>(q);
  int ve;
  std::frexp(v, &ve);
  int vexp = ve - 1;
  uint32_t mant = static_cast<uint32_t>(std::ldexp(v, f.manBits - vexp)) - (1u << f.manBits);
  return sign | uint32_t(vexp + f.bias) << f.manBits | mant;
}

/// The exact value of `bits` in format `f`. NaN keeps the sign bit (fnuz's only NaN, 0x80,
/// reads as -NaN like ml_dtypes).
inline double decodeFloat(uint32_t bits, const FloatFormat &f) {
  bits &= (1u << f.width()) - 1;
  bool neg = (bits & f.signBit()) != 0;
  uint32_t expField = (bits & f.expMask()) >> f.manBits;
  uint32_t mant = bits & ((1u << f.manBits) - 1);
  double nan = std::copysign(std::numeric_limits<double>::quiet_NaN(), neg ? -1.0 : 1.0);
  switch (f.special) {
  case Special::IEEE:
    if (expField == (1u << f.expBits) - 1)
      return mant ? nan : (neg ? -INFINITY : INFINITY);
    break;
  case Special::FN:
    if (expField == (1u << f.expBits) - 1 && mant == (1u << f.manBits) - 1)
      return nan;
    break;
  case Special::FNUZ:
    if (bits == f.signBit())
      return nan;
    break;
  case Special::NoNaN: break;
  }
  double v = expField == 0 ? std::ldexp(double(mant), 1 - f.bias - f.manBits)
                           : std::ldexp(1.0 + double(mant) / double(1u << f.manBits),
                                        int(expField) - f.bias);
  return neg ? -v : v;
}

// ---- Per-format entry points (value -> bits, bits -> exact value) --------------------------

inline uint8_t toF8E4M3FN(double v, bool saturate) {
  return static_cast<uint8_t>(encodeFloat(v, kE4M3FN, saturate));
}
inline uint8_t toF8E4M3FNUZ(double v, bool saturate) {
  return static_cast<uint8_t>(encodeFloat(v, kE4M3FNUZ, saturate));
}
inline uint8_t toF8E5M2(double v, bool saturate) {
  return static_cast<uint8_t>(encodeFloat(v, kE5M2, saturate));
}
inline uint8_t toF8E5M2FNUZ(double v, bool saturate) {
  return static_cast<uint8_t>(encodeFloat(v, kE5M2FNUZ, saturate));
}
/// f4e2m1 has no inf or NaN: out-of-range values always saturate (NaN gives -0).
inline uint8_t toF4E2M1(double v) {
  return static_cast<uint8_t>(encodeFloat(v, kF4E2M1, /*saturate=*/true));
}
inline double fromF8E4M3FN(uint8_t b) { return decodeFloat(b, kE4M3FN); }
inline double fromF8E4M3FNUZ(uint8_t b) { return decodeFloat(b, kE4M3FNUZ); }
inline double fromF8E5M2(uint8_t b) { return decodeFloat(b, kE5M2); }
inline double fromF8E5M2FNUZ(uint8_t b) { return decodeFloat(b, kE5M2FNUZ); }
inline double fromF4E2M1(uint8_t b) { return decodeFloat(b, kF4E2M1); }

/// The round modes of a cast to f8e8m0 (the cast op's `round_mode`).
enum class E8M0Round : int32_t { Up = 0, Down = 1, Nearest = 2 };

/// Parses "up" / "down" / "nearest"; false for anything else.
inline bool parseE8M0Round(const char *s, E8M0Round &out) {
  if (std::strcmp(s, "up") == 0)
    out = E8M0Round::Up;
  else if (std::strcmp(s, "down") == 0)
    out = E8M0Round::Down;
  else if (std::strcmp(s, "nearest") == 0)
    out = E8M0Round::Nearest;
  else
    return false;
  return true;
}

/// f32 to f8e8m0 (exponent only, no sign, 0xff is NaN) like onnx.numpy_helper.to_float8e8m0.
inline uint8_t toF8E8M0(float x, bool saturate, E8M0Round mode) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  uint32_t exponent = (b >> 23) & 0xff;
  if (exponent == 0xff)
    return 0xff;
  bool roundUp = false;
  if (mode == E8M0Round::Nearest) {
    bool g = b & 0x400000, r = b & 0x200000, s = b & 0x1fffff;
    bool lsb = exponent > 0;
    roundUp = g && (r || s || lsb);
  } else if (mode == E8M0Round::Up) {
    roundUp = (b & 0x7fffff) != 0;
  }
  if (roundUp && saturate && exponent == 0xfe)
    roundUp = false;
  return static_cast<uint8_t>(exponent + (roundUp ? 1 : 0));
}
inline double fromF8E8M0(uint8_t b) {
  return b == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int(b) - 127);
}

// ---- Sub-byte integers ------------------------------------------------------------------------

/// The integer pattern an ONNX cast of a float to an integer type wraps: truncation toward
/// zero, NaN gives 0, values beyond the 64-bit range saturate (to the unsigned range when
/// `toUnsigned`).
inline uint64_t floatToIntBits(double f, bool toUnsigned) {
  if (std::isnan(f))
    return 0;
  double t = std::trunc(f);
  if (toUnsigned && t >= 9223372036854775808.0)
    return t >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(t);
  if (t >= 9223372036854775808.0)
    return static_cast<uint64_t>(INT64_MAX);
  if (t < -9223372036854775808.0)
    return static_cast<uint64_t>(INT64_MIN);
  return static_cast<uint64_t>(static_cast<int64_t>(t));
}

/// Sub-byte integers keep the low bits of the 64-bit pattern (two's complement), like
/// numpy/ml_dtypes astype.
inline uint8_t toSubByteInt(uint64_t bits, int width) {
  return static_cast<uint8_t>(bits & ((1u << width) - 1));
}
/// The value of a sub-byte integer's bits (sign-extended when `isSigned`).
inline int64_t fromSubByteInt(uint8_t b, int width, bool isSigned) {
  int64_t v = b & ((1 << width) - 1);
  if (isSigned && (v & (int64_t(1) << (width - 1))))
    v -= int64_t(1) << width;
  return v;
}

} // namespace nnc::fp
