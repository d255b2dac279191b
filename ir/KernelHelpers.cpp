// The helpers of generated kernels (include/nnc/ir/KernelHelpers.h).
#include "nnc/ir/KernelHelpers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "nnc/support/FloatFormats.h"

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
  int32_t nnc_f64_to_##Name(double v, int32_t saturateArg, int32_t roundMode) {         \
    using namespace nnc;                                                                           \
    bool saturate = saturateArg != 0;                                                              \
    (void)saturate;                                                                                \
    (void)roundMode;                                                                               \
    return Encode;                                                                                 \
  }                                                                                                \
  double nnc_##Name##_to_f64(int32_t bits) {                                            \
    using namespace nnc;                                                                           \
    uint8_t b = static_cast<uint8_t>(bits);                                                        \
    return Decode;                                                                                 \
  }
extern "C" {
NNC_STORAGE_FORMATS(NNC_DEFINE_STORAGE_HELPERS)
}
#undef NNC_DEFINE_STORAGE_HELPERS

namespace {

/// One thread's workspace slots: each a 64-byte-aligned block that only grows.
struct Workspace {
  static constexpr int kSlots = nnc::kWorkspaceSlots;
  void *data[kSlots] = {};
  int64_t size[kSlots] = {};
  ~Workspace() {
    for (void *p : data)
      std::free(p);
  }
};
thread_local Workspace tlsWorkspace;

} // namespace

extern "C" void *nnc_workspace(int64_t slot, int64_t bytes) {
  if (slot < 0 || slot >= Workspace::kSlots) {
    std::fprintf(stderr, "nnc: kernel asked for workspace slot %lld of %d\n",
                 static_cast<long long>(slot), Workspace::kSlots);
    std::abort();
  }
  Workspace &w = tlsWorkspace;
  if (w.size[slot] < bytes) {
    std::free(w.data[slot]);
    size_t rounded = static_cast<size_t>(std::max<int64_t>((bytes + 63) / 64, 1) * 64);
    w.data[slot] = std::aligned_alloc(64, rounded);
    if (!w.data[slot]) {
      std::fprintf(stderr, "nnc: out of memory for a %lld-byte kernel workspace\n",
                   static_cast<long long>(bytes));
      std::abort();
    }
    w.size[slot] = bytes;
  }
  return w.data[slot];
}

namespace nnc {

const KernelHelper *kernelHelpers(int *count) {
  static const KernelHelper helpers[] = {
      {"nnc_round_f64_to_f16", reinterpret_cast<void *>(&nnc_round_f64_to_f16)},
      {"nnc_round_f64_to_bf16", reinterpret_cast<void *>(&nnc_round_f64_to_bf16)},
      {"nnc_workspace", reinterpret_cast<void *>(&nnc_workspace)},
#define NNC_LIST_STORAGE_HELPERS(Name, Encode, Decode)                                             \
  {"nnc_f64_to_" #Name, reinterpret_cast<void *>(&nnc_f64_to_##Name)},                            \
      {"nnc_" #Name "_to_f64", reinterpret_cast<void *>(&nnc_##Name##_to_f64)},
      NNC_STORAGE_FORMATS(NNC_LIST_STORAGE_HELPERS)
#undef NNC_LIST_STORAGE_HELPERS
  };
  *count = static_cast<int>(sizeof helpers / sizeof helpers[0]);
  return helpers;
}

} // namespace nnc

