// Casts to and from the storage-only dtypes (f8*, f4e2m1, f8e8m0, i4, u4, i2, u2) in generated
// code: lowered, run by the kernel evaluator (unscheduled and scheduled) and by the LLVM JIT,
// and compared bit for bit with the interpreter on edge values.
#include <cmath>
#include <limits>
#include <random>

#include "LowerTestUtil.h"
#include "TestTarget.h"
#include "nnc/support/FloatFormats.h"

namespace nnc {
namespace {

using namespace lowertest;

const DType kStorage[] = {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ,
                          DType::F4E2M1,   DType::F8E8M0,     DType::I4,     DType::U4,
                          DType::I2,       DType::U2};

/// Edge values of every format: NaN (both signs), infinities, zeros, each format's max and
/// min subnormal, halfway ties, values beyond every range, integers near the sub-byte wraps.
std::vector<double> edgeValues() {
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v = {nan, -nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5,
                           1.0625, 1.1875, 1.125, 3.0, 5.0, 6.0, 7.0, -7.0, 8.0, 15.0, 16.0,
                           17.0, -8.0, -9.0, 3.75, 255.0, 256.0, -129.0, 1e6, -1e6, 1e30, 3e38,
                           -3e38, 1e-30, 1e-45, 1e19, -1e19, 2e19, 0.3, -0.7, 1e-3, 2.75};
  const fp::FloatFormat fmts[] = {fp::kE4M3FN, fp::kE4M3FNUZ, fp::kE5M2, fp::kE5M2FNUZ,
                                  fp::kF4E2M1};
  for (const fp::FloatFormat &f : fmts) {
    double mx = f.maxFinite();
    double minSub = std::ldexp(1.0, 1 - f.bias - f.manBits);
    double ulpAtMax = std::ldexp(1.0, f.maxExpField() - f.bias - f.manBits);
    for (double x : {mx, -mx, mx + ulpAtMax / 2, mx + ulpAtMax / 4, mx + ulpAtMax, 2 * mx, minSub,
                     -minSub, minSub / 2, minSub * 0.75, minSub * 1.5, minSub * 2.5,
                     std::ldexp(1.0, 1 - f.bias)})
      v.push_back(x);
  }
  for (int e = -130; e <= 130; e += 7) // f8e8m0 exponents, off powers of two
    for (double m : {1.0, 1.25, 1.5, 1.75})
      v.push_back(std::ldexp(m, e));
  return v;
}

Tensor tensorOf(DType t, const std::vector<double> &vals) {
  Tensor x = Tensor::zeros(t, {static_cast<int64_t>(vals.size())});
  for (size_t i = 0; i < vals.size(); ++i) {
    double d = vals[i];
    switch (t) {
    case DType::F32: x.data<float>()[i] = static_cast<float>(d); break;
    case DType::F64: x.data<double>()[i] = d; break;
    case DType::F16: x.data<uint16_t>()[i] = floatToHalf(static_cast<float>(d)); break;
    case DType::I32:
      x.data<int32_t>()[i] = static_cast<int32_t>(fp::floatToIntBits(d, false));
      break;
    case DType::I64: x.data<int64_t>()[i] = static_cast<int64_t>(fp::floatToIntBits(d, false)); break;
    case DType::U64: x.data<uint64_t>()[i] = fp::floatToIntBits(d, true); break;
    case DType::Bool: x.data<bool>()[i] = d != 0; break;
    default: ADD_FAILURE() << "tensorOf " << dtypeName(t);
    }
  }
  return x;
}

/// Every byte (the formats keep their bits in the low bits).
Tensor allBytes(DType t) {
  Tensor x = Tensor::zeros(t, {256});
  for (int i = 0; i < 256; ++i)
    x.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  return x;
}

/// checkNode (evaluator, unscheduled and scheduled) plus the JIT, against the interpreter.
void checkCast(DType from, DType to, const Tensor &input, AttrMap extra, const std::string &what) {
  Graph g;
  Value *x = g.addInput("x", TensorType(from, {input.numElements()}));
  extra["to"] = to;
  AttrMap attrs = extra;
  Expected<Node *> n = g.createInferred(OpKind::Cast, {x}, attrs);
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  checkNode(**n, {input}, what);
  std::vector<Tensor> ops = bindOperands(**n, {input});
  Expected<std::vector<Tensor>> want = evaluateNode(**n, ops);
  ASSERT_TRUE(want) << what;
  Expected<std::vector<Tensor>> got = runJit(**n, ops);
  ASSERT_TRUE(got) << what << " (jit): " << got.error().message();
  expectClose((*got)[0], (*want)[0], what + " (jit)");
}

std::string name(DType from, DType to, const std::string &opts = "") {
  return "cast " + std::string(dtypeName(from)) + " -> " + std::string(dtypeName(to)) + opts;
}

TEST(StorageCast, ToStorageFormats) {
  std::vector<double> vals = edgeValues();
  for (DType to : kStorage)
    for (DType from : {DType::F32, DType::F64, DType::F16, DType::I32, DType::I64, DType::U64,
                       DType::Bool})
      for (int sat = 0; sat < 2; ++sat)
        checkCast(from, to, tensorOf(from, vals), {{"saturate", int64_t(sat)}},
                  name(from, to, sat ? "" : " saturate=0"));
}

TEST(StorageCast, E8M0RoundModes) {
  std::vector<double> vals = edgeValues();
  for (const char *mode : {"up", "down", "nearest"})
    for (int sat = 0; sat < 2; ++sat)
      for (DType from : {DType::F32, DType::F64})
        checkCast(from, DType::F8E8M0, tensorOf(from, vals),
                  {{"saturate", int64_t(sat)}, {"round_mode", std::string(mode)}},
                  name(from, DType::F8E8M0, std::string(" round_mode=") + mode +
                                                (sat ? "" : " saturate=0")));
}

TEST(StorageCast, FromStorageFormats) {
  for (DType from : kStorage)
    for (DType to : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::U8,
                     DType::I32, DType::I64, DType::U64, DType::Bool})
      checkCast(from, to, allBytes(from), {}, name(from, to));
}

TEST(StorageCast, BetweenStorageFormats) {
  for (DType from : kStorage)
    for (DType to : kStorage)
      checkCast(from, to, allBytes(from), {{"saturate", int64_t(0)}}, name(from, to));
}

TEST(StorageCast, LargeScheduledCast) {
  std::mt19937 rng(7);
  checkCast(DType::F32, DType::F8E4M3FN, randomTensor(DType::F32, {70000}, rng, -600, 600), {},
            "large cast f32 -> f8e4m3fn");
}

TEST(StorageCast, KernelTextShowsOptions) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {4}));
  Expected<Node *> n = g.createInferred(
      OpKind::Cast, {x},
      {{"to", DType::F8E8M0}, {"saturate", int64_t(0)},
       {"round_mode", std::string("nearest")}});
  ASSERT_TRUE(n) << n.error().message();
  Expected<std::vector<kir::Kernel>> ks = lowerNode(**n, "c", testenv::testLowerOptions());
  ASSERT_TRUE(ks) << ks.error().message();
  std::string text = kir::printKernel((*ks)[0]);
  EXPECT_NE(text.find("cast<f8e8m0, saturate=0, round_mode=nearest>"), std::string::npos) << text;
  EXPECT_FALSE(kir::verifyKernel((*ks)[0]));
}

TEST(StorageCast, VerifierRejectsBadRoundMode) {
  kir::Kernel k;
  k.name = "bad";
  k.buffers = {{"in0", DType::F32, 1, kir::BufferRole::Operand, 0, false},
               {"out0", DType::F8E8M0, 1, kir::BufferRole::Result, 0, true}};
  k.body = kir::store(1, kir::intImm(0),
                      kir::cast(kir::load(0, DType::F32, kir::intImm(0)), DType::F8E8M0, true,
                                "sideways"));
  Error e = kir::verifyKernel(k);
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("sideways"), std::string::npos) << e.message();
}

} // namespace
} // namespace nnc
