// Interpreter kernels of cast (every dtype to every dtype, ONNX Cast semantics) and constant.
#include <cmath>
#include <cstring>
#include <limits>

#include "Scalar.h"
#include "interp/Kernels.h"

namespace nnc::interp {
namespace {

/// A small binary float format: 1 sign bit, expBits, manBits. How the top exponent and NaN
/// are used differs between the IEEE-like formats and the f8 "fn"/"fnuz" variants.
enum class Special { IEEE, FN, FNUZ, NoNaN };
struct FloatFormat {
  int expBits;
  int manBits;
  int bias;
  Special special;

  int width() const { return 1 + expBits + manBits; }
  uint32_t signBit() const { return 1u << (expBits + manBits); }
  uint32_t expMask() const { return ((1u << expBits) - 1) << manBits; }
  int maxExpField() const {
    return special == Special::IEEE ? (1 << expBits) - 2 : (1 << expBits) - 1;
  }
  uint32_t maxMantissa() const {
    return special == Special::FN ? (1u << manBits) - 2 : (1u << manBits) - 1;
  }
  double maxFinite() const {
    return std::ldexp(1.0 + double(maxMantissa()) / double(1u << manBits), maxExpField() - bias);
  }
  uint32_t maxBits() const { return uint32_t(maxExpField()) << manBits | maxMantissa(); }
  uint32_t nanBits(bool negative) const {
    switch (special) {
    case Special::IEEE: return (negative ? signBit() : 0) | expMask() | (1u << (manBits - 1));
    case Special::FN: return (negative ? signBit() : 0) | expMask() | ((1u << manBits) - 1);
    case Special::FNUZ: return signBit();
    case Special::NoNaN: return signBit(); // ml_dtypes' float4_e2m1fn maps NaN to -0
    }
    return 0;
  }
};

constexpr FloatFormat kF16{5, 10, 15, Special::IEEE};
constexpr FloatFormat kBF16{8, 7, 127, Special::IEEE};
constexpr FloatFormat kE4M3FN{4, 3, 7, Special::FN};
constexpr FloatFormat kE4M3FNUZ{4, 3, 8, Special::FNUZ};
constexpr FloatFormat kE5M2{5, 2, 15, Special::IEEE};
constexpr FloatFormat kE5M2FNUZ{5, 2, 16, Special::FNUZ};
constexpr FloatFormat kF4E2M1{2, 1, 1, Special::NoNaN};

/// Rounds `x` to nearest even in format `f`. Out-of-range values (and infinities where the
/// format has none) become ±max when `saturate`, else infinity or NaN.
uint32_t encodeFloat(double x, const FloatFormat &f, bool saturate) {
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
  uint32_t mant =
      static_cast<uint32_t>(std::ldexp(v, f.manBits - vexp)) - (1u << f.manBits);
  return sign | uint32_t(vexp + f.bias) << f.manBits | mant;
}

double decodeFloat(uint32_t bits, const FloatFormat &f) {
  bits &= (1u << f.width()) - 1;
  bool neg = (bits & f.signBit()) != 0;
  uint32_t expField = (bits & f.expMask()) >> f.manBits;
  uint32_t mant = bits & ((1u << f.manBits) - 1);
  // NaN keeps the sign bit (fnuz's only NaN, 0x80, reads as -NaN like ml_dtypes).
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
  double v = expField == 0
                 ? std::ldexp(double(mant), 1 - f.bias - f.manBits)
                 : std::ldexp(1.0 + double(mant) / double(1u << f.manBits),
                              int(expField) - f.bias);
  return neg ? -v : v;
}

/// f32 to f8e8m0 (exponent only, no sign, 0xff is NaN) like onnx.numpy_helper.to_float8e8m0.
uint8_t encodeE8M0(float x, bool saturate, const std::string &roundMode) {
  uint32_t b = floatBits(x);
  uint32_t exponent = (b >> 23) & 0xff;
  if (exponent == 0xff)
    return 0xff;
  bool roundUp = false;
  if (roundMode == "nearest") {
    bool g = b & 0x400000, r = b & 0x200000, s = b & 0x1fffff;
    bool lsb = exponent > 0;
    roundUp = g && (r || s || lsb);
  } else if (roundMode == "up") {
    roundUp = (b & 0x7fffff) != 0;
  }
  if (roundUp && saturate && exponent == 0xfe)
    roundUp = false;
  return static_cast<uint8_t>(exponent + (roundUp ? 1 : 0));
}

/// One source element, read exactly: floats as double, integers as their 64-bit pattern.
struct Val {
  bool isFloat = false;
  bool isUnsigned = false;
  double f = 0;
  uint64_t bits = 0;

  double asDouble() const {
    if (isFloat)
      return f;
    return isUnsigned ? static_cast<double>(bits) : static_cast<double>(static_cast<int64_t>(bits));
  }
  bool nonZero() const { return isFloat ? f != 0 : bits != 0; }
  /// The integer pattern a conversion to an integer type wraps: floats truncate toward zero,
  /// NaN gives 0 and values beyond the 64-bit range saturate.
  uint64_t intBits(bool toUnsigned) const {
    if (!isFloat)
      return bits;
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
};

Val fromFloat(double d) {
  Val v;
  v.isFloat = true;
  v.f = d;
  return v;
}
Val fromSigned(int64_t i) {
  Val v;
  v.bits = static_cast<uint64_t>(i);
  return v;
}
Val fromUnsigned(uint64_t u) {
  Val v;
  v.isUnsigned = true;
  v.bits = u;
  return v;
}

int64_t signExtend(uint8_t b, int bitsWide) {
  int64_t v = b & ((1 << bitsWide) - 1);
  if (v & (int64_t(1) << (bitsWide - 1)))
    v -= int64_t(1) << bitsWide;
  return v;
}

Val readElement(const Tensor &t, int64_t i) {
  const void *p = t.rawData();
  const uint8_t *u8 = static_cast<const uint8_t *>(p);
  switch (t.dtype()) {
  case DType::F32: return fromFloat(static_cast<const float *>(p)[i]);
  case DType::F64: return fromFloat(static_cast<const double *>(p)[i]);
  case DType::F16: return fromFloat(halfToFloat(static_cast<const uint16_t *>(p)[i]));
  case DType::BF16: return fromFloat(bf16ToFloat(static_cast<const uint16_t *>(p)[i]));
  case DType::I8: return fromSigned(static_cast<const int8_t *>(p)[i]);
  case DType::U8: return fromUnsigned(u8[i]);
  case DType::I16: return fromSigned(static_cast<const int16_t *>(p)[i]);
  case DType::U16: return fromUnsigned(static_cast<const uint16_t *>(p)[i]);
  case DType::I32: return fromSigned(static_cast<const int32_t *>(p)[i]);
  case DType::U32: return fromUnsigned(static_cast<const uint32_t *>(p)[i]);
  case DType::I64: return fromSigned(static_cast<const int64_t *>(p)[i]);
  case DType::U64: return fromUnsigned(static_cast<const uint64_t *>(p)[i]);
  case DType::Bool: return fromUnsigned(static_cast<const bool *>(p)[i] ? 1 : 0);
  case DType::F8E4M3FN: return fromFloat(decodeFloat(u8[i], kE4M3FN));
  case DType::F8E4M3FNUZ: return fromFloat(decodeFloat(u8[i], kE4M3FNUZ));
  case DType::F8E5M2: return fromFloat(decodeFloat(u8[i], kE5M2));
  case DType::F8E5M2FNUZ: return fromFloat(decodeFloat(u8[i], kE5M2FNUZ));
  case DType::F4E2M1: return fromFloat(decodeFloat(u8[i], kF4E2M1));
  case DType::F8E8M0:
    return fromFloat(u8[i] == 0xff ? std::numeric_limits<double>::quiet_NaN()
                                   : std::ldexp(1.0, int(u8[i]) - 127));
  case DType::U4: return fromUnsigned(u8[i] & 0x0f);
  case DType::I4: return fromSigned(signExtend(u8[i], 4));
  case DType::U2: return fromUnsigned(u8[i] & 0x03);
  case DType::I2: return fromSigned(signExtend(u8[i], 2));
  }
  return Val();
}

struct CastOptions {
  bool saturate = true;
  std::string roundMode = "up";
};

void writeElement(Tensor &t, int64_t i, const Val &v, const CastOptions &opt) {
  void *p = t.rawData();
  uint8_t *u8 = static_cast<uint8_t *>(p);
  DType d = t.dtype();
  switch (d) {
  case DType::F32:
    static_cast<float *>(p)[i] =
        v.isFloat ? static_cast<float>(v.f)
                  : (v.isUnsigned ? static_cast<float>(v.bits)
                                  : static_cast<float>(static_cast<int64_t>(v.bits)));
    return;
  case DType::F64: static_cast<double *>(p)[i] = v.asDouble(); return;
  case DType::F16:
    static_cast<uint16_t *>(p)[i] = static_cast<uint16_t>(encodeFloat(v.asDouble(), kF16, false));
    return;
  case DType::BF16:
    static_cast<uint16_t *>(p)[i] =
        static_cast<uint16_t>(encodeFloat(v.asDouble(), kBF16, false));
    return;
  case DType::Bool: static_cast<bool *>(p)[i] = v.nonZero(); return;
  case DType::I8: static_cast<int8_t *>(p)[i] = static_cast<int8_t>(v.intBits(false)); return;
  case DType::U8: u8[i] = static_cast<uint8_t>(v.intBits(true)); return;
  case DType::I16: static_cast<int16_t *>(p)[i] = static_cast<int16_t>(v.intBits(false)); return;
  case DType::U16:
    static_cast<uint16_t *>(p)[i] = static_cast<uint16_t>(v.intBits(true));
    return;
  case DType::I32: static_cast<int32_t *>(p)[i] = static_cast<int32_t>(v.intBits(false)); return;
  case DType::U32:
    static_cast<uint32_t *>(p)[i] = static_cast<uint32_t>(v.intBits(true));
    return;
  case DType::I64: static_cast<int64_t *>(p)[i] = static_cast<int64_t>(v.intBits(false)); return;
  case DType::U64: static_cast<uint64_t *>(p)[i] = v.intBits(true); return;
  // Sub-byte integers keep the low bits (two's complement), like numpy/ml_dtypes astype.
  case DType::U4: u8[i] = static_cast<uint8_t>(v.intBits(true) & 0x0f); return;
  case DType::I4: u8[i] = static_cast<uint8_t>(v.intBits(false) & 0x0f); return;
  case DType::U2: u8[i] = static_cast<uint8_t>(v.intBits(true) & 0x03); return;
  case DType::I2: u8[i] = static_cast<uint8_t>(v.intBits(false) & 0x03); return;
  case DType::F8E4M3FN:
    u8[i] = static_cast<uint8_t>(encodeFloat(v.asDouble(), kE4M3FN, opt.saturate));
    return;
  case DType::F8E4M3FNUZ:
    u8[i] = static_cast<uint8_t>(encodeFloat(v.asDouble(), kE4M3FNUZ, opt.saturate));
    return;
  case DType::F8E5M2:
    u8[i] = static_cast<uint8_t>(encodeFloat(v.asDouble(), kE5M2, opt.saturate));
    return;
  case DType::F8E5M2FNUZ:
    u8[i] = static_cast<uint8_t>(encodeFloat(v.asDouble(), kE5M2FNUZ, opt.saturate));
    return;
  case DType::F4E2M1:
    u8[i] = static_cast<uint8_t>(encodeFloat(v.asDouble(), kF4E2M1, /*saturate=*/true));
    return;
  case DType::F8E8M0:
    u8[i] = encodeE8M0(static_cast<float>(v.asDouble()), opt.saturate, opt.roundMode);
    return;
  }
}

/// Converts `x` to `to`.
Expected<Tensor> castTensor(const Tensor &x, DType to, bool saturate,
                            const std::string &roundMode) {
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(to, x.extents()));
  if (x.dtype() == to) {
    if (x.byteSize())
      std::memcpy(out.rawData(), x.rawData(), x.byteSize());
    return out;
  }
  CastOptions opt{saturate, roundMode};
  int64_t n = x.numElements();
  if (x.dtype() == DType::F32 && to == DType::F16) { // the common case, bit-exact and fast
    const float *s = x.data<float>();
    uint16_t *d = out.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      d[i] = floatToHalf(s[i]);
    return out;
  }
  for (int64_t i = 0; i < n; ++i)
    writeElement(out, i, readElement(x, i), opt);
  return out;
}

} // namespace

Results evalCast(const Node &node, const Operands &ops) {
  if (ops.size() != 1 || ops[0].isNull())
    return node.error("expects 1 operand");
  DType to = node.getDType("to");
  bool saturate = node.getInt("saturate", 1) != 0;
  std::string roundMode = node.getString("round_mode", "up");
  if (roundMode != "up" && roundMode != "down" && roundMode != "nearest")
    return node.error("round_mode must be up, down or nearest, got '{}'", roundMode);
  Expected<Tensor> out = castTensor(ops[0], to, saturate, roundMode);
  if (!out)
    return out.takeError().withContext(node.describe());
  return std::vector<Tensor>{std::move(*out)};
}

Results evalConstant(const Node &node, const Operands &ops) {
  const Tensor &t = node.getTensor("value");
  if (t.isNull())
    return node.error("value is an empty tensor");
  return std::vector<Tensor>{t};
}

} // namespace nnc::interp
