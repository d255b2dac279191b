// Scalar helpers that generated code calls where LLVM has no exact instruction: correctly
// rounded f64 -> f16/bf16 (one rounding, like the interpreter's Cast), conversions to and from
// the float storage formats (f8*, f4e2m1, f8e8m0; FloatFormats.h, shared with the
// interpreter), and the process symbols bound into every JIT module.
#include <cmath>

#include "llvm/Emitter.h"
#include "nnc/support/FloatFormats.h"

// Weak: a program that does not link the runtime's thread pool still links codegen; kernels
// with parallel loops then fail to compile with a clear error.

namespace {

/// x rounded to nearest even in a binary format with `manBits` mantissa bits, smallest normal
/// exponent `minExp` and largest finite value `maxFinite` (overflow gives infinity).
double roundToFormat(double x, int manBits, int minExp, double maxFinite) {
  if (std::isnan(x) || std::isinf(x) || x == 0)
    return x;
  double a = std::fabs(x);
  int ex;
  std::frexp(a, &ex); // a = m * 2^ex, m in [0.5, 1)
  int e = ex - 1;
  int quantumExp = (e < minExp ? minExp : e) - manBits;
  double v = std::ldexp(std::nearbyint(std::ldexp(a, -quantumExp)), quantumExp);
  if (v > maxFinite)
    v = INFINITY;
  return std::copysign(v, x);
}

} // namespace

extern "C" float nnc_round_f64_to_f16(double x) {
  return static_cast<float>(roundToFormat(x, 10, -14, 65504.0));
}
extern "C" float nnc_round_f64_to_bf16(double x) {
  return static_cast<float>(roundToFormat(x, 7, -126, 3.3895313892515355e38));
}

// The float storage formats (FloatFormats.h), bits in an int32 so the ABI needs no
// zero-extension attributes.
#define NNC_STORAGE_FORMATS(X)                                                                     \
  X(f8e4m3fn, fp::toF8E4M3FN(v, saturate), fp::fromF8E4M3FN(b))                                    \
  X(f8e4m3fnuz, fp::toF8E4M3FNUZ(v, saturate), fp::fromF8E4M3FNUZ(b))                              \
  X(f8e5m2, fp::toF8E5M2(v, saturate), fp::fromF8E5M2(b))                                          \
  X(f8e5m2fnuz, fp::toF8E5M2FNUZ(v, saturate), fp::fromF8E5M2FNUZ(b))                              \
  X(f4e2m1, fp::toF4E2M1(v), fp::fromF4E2M1(b))                                                    \
  X(f8e8m0,                                                                                        \
    fp::toF8E8M0(static_cast<float>(v), saturate, static_cast<fp::E8M0Round>(roundMode)),          \
    fp::fromF8E8M0(b))

#define NNC_DEFINE_STORAGE_HELPERS(Name, Encode, Decode)                                           \
  extern "C" int32_t nnc_f64_to_##Name(double v, int32_t saturateArg, int32_t roundMode) {         \
    using namespace nnc;                                                                           \
    bool saturate = saturateArg != 0;                                                              \
    (void)saturate;                                                                                \
    (void)roundMode;                                                                               \
    return Encode;                                                                                 \
  }                                                                                                \
  extern "C" double nnc_##Name##_to_f64(int32_t bits) {                                            \
    using namespace nnc;                                                                           \
    uint8_t b = static_cast<uint8_t>(bits);                                                        \
    return Decode;                                                                                 \
  }
NNC_STORAGE_FORMATS(NNC_DEFINE_STORAGE_HELPERS)
#undef NNC_DEFINE_STORAGE_HELPERS

namespace nnc::llvmcg {

std::string storageEncodeHelper(DType t) { return "nnc_f64_to_" + std::string(dtypeName(t)); }
std::string storageDecodeHelper(DType t) { return "nnc_" + std::string(dtypeName(t)) + "_to_f64"; }

std::vector<std::pair<std::string, void *>> processSymbols(ParallelForFn parallelFor) {
  std::vector<std::pair<std::string, void *>> s;
  s.emplace_back(kRoundF64ToF16, reinterpret_cast<void *>(&nnc_round_f64_to_f16));
  s.emplace_back(kRoundF64ToBF16, reinterpret_cast<void *>(&nnc_round_f64_to_bf16));
#define NNC_REGISTER_STORAGE_HELPERS(Name, Encode, Decode)                                         \
  s.emplace_back("nnc_f64_to_" #Name, reinterpret_cast<void *>(&nnc_f64_to_##Name));              \
  s.emplace_back("nnc_" #Name "_to_f64", reinterpret_cast<void *>(&nnc_##Name##_to_f64));
  NNC_STORAGE_FORMATS(NNC_REGISTER_STORAGE_HELPERS)
#undef NNC_REGISTER_STORAGE_HELPERS
  if (parallelFor)
    s.emplace_back(kParallelFor, reinterpret_cast<void *>(parallelFor));
  return s;
}

} // namespace nnc::llvmcg
