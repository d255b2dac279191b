// Bit-exact conversions between f32 and the 16-bit float formats (IEEE half, bfloat16).
#pragma once

#include <cstdint>
#include <cstring>

namespace nnc {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// IEEE binary16 to f32 (exact).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0)
      return bitsToFloat(sign);
    // Subnormal: normalize.
    int e = -1;
    do {
      e++;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    mant &= 0x3ff;
    return bitsToFloat(sign | (uint32_t)(127 - 15 - e) << 23 | mant << 13);
  }
  if (exp == 0x1f)
    return bitsToFloat(sign | 0x7f800000u | mant << 13);
  return bitsToFloat(sign | (exp + 127 - 15) << 23 | mant << 13);
}

/// f32 to IEEE binary16, round to nearest even; overflow gives infinity.
inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000u) // inf or nan
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  if (absx >= 0x477ff000u) // rounds to >= 65520: infinity
    return (uint16_t)(sign | 0x7c00);
  if (absx < 0x38800000u) { // subnormal or zero in half
    if (absx < 0x33000000u) // < 2^-25: rounds to zero
      return (uint16_t)sign;
    uint32_t e = absx >> 23;
    uint32_t mant = (absx & 0x7fffff) | 0x800000;
    // value = mant * 2^(e-150); half subnormal unit = 2^-24 -> count = mant * 2^(e-126)
    uint32_t rshift = 126 - e;
    uint32_t q = mant >> rshift;
    uint32_t rem = mant & ((1u << rshift) - 1);
    uint32_t halfway = 1u << (rshift - 1);
    if (rem > halfway || (rem == halfway && (q & 1)))
      q++;
    return (uint16_t)(sign | q);
  }
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t mant = absx & 0x7fffff;
  uint32_t q = (e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
    q++;
  return (uint16_t)(sign | q);
}

/// bfloat16 to f32 (exact).
inline float bf16ToFloat(uint16_t b) { return bitsToFloat((uint32_t)b << 16); }

/// f32 to bfloat16, round to nearest even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffff) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return (uint16_t)((x + rounding) >> 16);
}

} // namespace nnc
