// The bf16 GEMM of --precision bf16: the weight's bf16 panels, the bf16 tile (kir::GemmElems::BF16)
// in the evaluator and as the LLVM microkernel (vdpbf16ps), and whole matmuls compiled from a
// graph that pack-gemm-weights packed under bf16 precision: bit for bit against a reference
// that rounds both operands to bf16 (nearest even) and sums in f32 where that sum is exact
// (dyadic operands), and within bf16's rounding of the fp32 result on random operands. The
// option's errors on a CPU without AVX512-BF16.
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "LowerTestUtil.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/ir/GemmPacking.h"
#include "nnc/ir/Kernel.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/support/Float16.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

float roundBf16(float x) {
  return bf16ToFloat(floatToBf16(x));
}

/// The host with --precision bf16, or nullopt where it lacks AVX512-BF16 (the tests that run
/// bf16 code then say so and skip).
std::optional<CpuTarget> bf16Host() {
  CpuTarget cpu = CpuTarget::host();
  if (cpu.setPrecision("bf16"))
    return std::nullopt;
  return cpu;
}

/// Values whose bf16 rounding is a multiple of 1/4 of magnitude at most 4, each off that
/// value by a third of the smaller of the bf16 units on either side of it (a power of two has
/// a unit half as large below it), or by exactly half a unit away from zero, a tie that
/// rounds to the even neighbour: rounding must remove the offset, and sums of up to thousands
/// of their products are exact in f32, whatever the order.
std::vector<float> dyadicValues(int64_t n, std::mt19937 &rng) {
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_int_distribution<int> q(-16, 16), kind(0, 3);
  for (float &x : v) {
    float base = 0.25f * static_cast<float>(q(rng));
    int k = kind(rng);
    if (base == 0 || k == 0) {
      x = base;
      continue;
    }
    // One bf16 unit at |base| (8 significant bits): 2^(exponent - 7).
    float ulp = std::ldexp(1.0f, std::ilogb(base) - 7);
    // 1: a third of the unit below |base| above; 2: as much below; 3: a tie, broken toward the
    // even neighbour (base, a multiple of 1/4 with few significant bits, is even).
    x = k == 1   ? base + ulp / 6
        : k == 2 ? base - ulp / 6
                 : base + std::copysign(ulp / 2, base);
  }
  return v;
}

/// C = A x B with A, B rounded to bf16 and the products summed in f32 in k order.
std::vector<float> referenceBf16(const std::vector<float> &a, const std::vector<float> &b,
                                 int64_t m, int64_t k, int64_t n) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += roundBf16(a[i * k + p]) * roundBf16(b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

/// A bf16 tile kernel over a (mr x lda bf16), b (pairs of ldb bf16) and c (mr x ldc f32).
kir::Kernel bf16TileKernel(int64_t mr, int64_t nr, int64_t kc, int64_t lda, int64_t ldb,
                           int64_t ldc, bool accumulate) {
  kir::Kernel k;
  k.name = "btile";
  int64_t aN = std::max<int64_t>(mr * lda, 1), bN = std::max<int64_t>(kc / 2 * ldb, 1);
  k.buffers = {{"a", DType::BF16, aN, kir::BufferRole::Operand, 0, false},
               {"b", DType::BF16, bN, kir::BufferRole::Operand, 1, false},
               {"c", DType::F32, mr * ldc, kir::BufferRole::Result, 0, true}};
  kir::GemmTileShape s;
  s.elems = kir::GemmElems::BF16;
  s.a = 0;
  s.b = 1;
  s.mr = mr;
  s.nr = nr;
  s.lda = lda;
  s.ak = 1;
  s.ldb = ldb;
  s.ldc = ldc;
  s.accumulate = accumulate;
  k.body = kir::gemmTile(s, 2, kir::intImm(0), kir::intImm(0), kir::intImm(0), kir::intImm(kc));
  return k;
}

/// matmul(x, W) for an [m, k] input x and a constant [k, n] weight, packed by the CPU
/// pipeline's pack-gemm-weights for `cpu`.
std::unique_ptr<Graph> packedMatMul(const std::vector<float> &w, int64_t m, int64_t k, int64_t n,
                                    const CpuTarget &cpu) {
  auto g = std::make_unique<Graph>();
  Value *x = g->addInput("x", TensorType(DType::F32, shapeFromExtents({m, k})));
  Tensor wt = Tensor::fromVector(DType::F32, {k, n}, w);
  Expected<Node *> mm = g->createInferred(OpKind::MatMul, {x, constantValue(*g, wt)}, {}, "mm");
  EXPECT_TRUE(mm) << mm.error().message();
  g->setOutputs((*mm)->results());
  PassContext ctx;
  ctx.cpu = cpu;
  Expected<PassPipeline> pp = PassPipeline::parse("pack-gemm-weights,dce");
  EXPECT_TRUE(pp) << pp.error().message();
  Error e = pp->run(*g, ctx);
  EXPECT_FALSE(e) << e.message();
  return g;
}

Expected<std::vector<float>> runCompiled(const Graph &g, const CpuTarget &cpu,
                                         const std::vector<float> &x, int64_t m, int64_t k,
                                         int threads) {
  CpuOptions o(cpu);
  o.threads = threads;
  o.codegen.cacheDir = "";
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, Executable::compile(g, o));
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                       exe->run({Tensor::fromVector(DType::F32, {m, k}, x)}));
  const float *p = out[0].data<float>();
  return std::vector<float>(p, p + out[0].numElements());
}

} // namespace

TEST(Bf16Gemm, PanelsRoundToNearestEvenAndRoundTrip) {
  // 5 x 3 by panels of 2 columns: odd K (a zero row pads the last pair), an edge panel.
  std::vector<float> w = {1.0f + 0x1p-8f,  1.0f + 0x3p-8f, -2.5f, 0.1f, 3.0f, -1.0f - 0x1p-9f,
                          65536.0f + 128, 7.0f,           0.0f,  -0.3f, 1e-3f, 2.0f,
                          -4.0f,          0.5f,           9.75f};
  Tensor t = Tensor::fromVector(DType::F32, {5, 3}, w);
  Tensor p = packGemmPanelsBf16(t, 2);
  ASSERT_EQ(dtypeName(p.dtype()), "bf16");
  ASSERT_EQ(extentsStr(p.extents()), extentsStr({2, 3, 2, 2}));
  Tensor back = unpackGemmPanelsBf16(p, 5, 3);
  for (int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(bf16ToFloat(back.data<uint16_t>()[i]), roundBf16(w[i])) << "element " << i;
  // Ties go to the even neighbour: 1 + 2^-8 to 1, 1 + 3 * 2^-8 to 1 + 2^-6.
  EXPECT_EQ(bf16ToFloat(back.data<uint16_t>()[0]), 1.0f);
  EXPECT_EQ(bf16ToFloat(back.data<uint16_t>()[1]), 1.0f + 0x1p-6f);
  // Element (k=4, j=2) sits in panel 1, pair 2, column 0, slot 0; its pair's slot 1 is zero.
  EXPECT_EQ(bf16ToFloat(p.data<uint16_t>()[((1 * 3 + 2) * 2 + 0) * 2 + 0]), 9.75f);
  EXPECT_EQ(p.data<uint16_t>()[((1 * 3 + 2) * 2 + 0) * 2 + 1], 0);
  // Past N (column 3 of panel 1) is zero.
  for (int64_t g = 0; g < 3; ++g)
    EXPECT_EQ(p.data<uint16_t>()[((1 * 3 + g) * 2 + 1) * 2], 0);
}

TEST(Bf16Gemm, TileJitMatchesEvaluator) {
  std::optional<CpuTarget> cpu = bf16Host();
  if (!cpu)
    GTEST_SKIP() << "the host lacks AVX512-BF16: " << CpuTarget::host().str();
  struct Case {
    int64_t mr, nr, kc;
    bool accumulate;
  } cases[] = {{5, 21, 12, true}, {3, 32, 8, false}, {6, 16, 20, false}, {1, 5, 2, true},
               {4, 16, 0, true},  {7, 3, 36, false}, {2, 48, 16, true},  {8, 64, 130, false}};
  std::mt19937 rng(16);
  for (const Case &c : cases) {
    int64_t lda = c.kc + 2, ldb = 2 * c.nr + 4, ldc = c.nr + 3;
    kir::Kernel k = bf16TileKernel(c.mr, c.nr, c.kc, lda, ldb, ldc, c.accumulate);
    ASSERT_FALSE(kir::verifyKernel(k));
    std::vector<uint16_t> a(static_cast<size_t>(k.buffers[0].numElements)),
        b(static_cast<size_t>(k.buffers[1].numElements));
    std::vector<float> av = dyadicValues(static_cast<int64_t>(a.size()), rng),
                       bv = dyadicValues(static_cast<int64_t>(b.size()), rng),
                       want = dyadicValues(k.buffers[2].numElements, rng);
    for (float &c0 : want) // C's initial values exact too
      c0 = roundBf16(c0);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = floatToBf16(av[i]);
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = floatToBf16(bv[i]);
    std::vector<float> got = want;
    ASSERT_FALSE(kir::evaluateKernel(k, {a.data(), b.data(), want.data()}));
    CodegenOptions o(*cpu);
    o.cacheDir = "";
    auto m = compileKernels({k}, o);
    ASSERT_TRUE(m) << m.error().message();
    void *bufs[] = {a.data(), b.data(), got.data()};
    (*m)->lookup("btile")(bufs);
    EXPECT_EQ(got, want) << c.mr << "x" << c.nr << " k " << c.kc;
  }
}

TEST(Bf16Gemm, TileVerifierAndEvaluatorRejectMisuse) {
  kir::Kernel k = bf16TileKernel(2, 16, 6, 8, 32, 16, false);
  k.body->tile.ldb = 16; // below 2 * nr
  Error e = kir::verifyKernel(k);
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("below 2 * nr"), std::string::npos) << e.message();
  kir::Kernel odd = bf16TileKernel(2, 16, 5, 8, 32, 16, false);
  std::vector<uint16_t> a(16), b(96);
  std::vector<float> c(32);
  Error oe = kir::evaluateKernel(odd, {a.data(), b.data(), c.data()});
  ASSERT_TRUE(oe);
  EXPECT_NE(oe.message().find("not a multiple of 2"), std::string::npos) << oe.message();
}

TEST(Bf16Gemm, MatMulBitExactAgainstRoundedOperands) {
  std::optional<CpuTarget> cpu = bf16Host();
  if (!cpu)
    GTEST_SKIP() << "the host lacks AVX512-BF16: " << CpuTarget::host().str();
  // Odd k (a zero pair half), edge rows and columns, one row (panels of 64), odd k in k
  // blocks (72 x 1537), rows past one parallel block, and a weight beyond the L2 whose first
  // row tiles prefetch the next panel (the _pfb tile variants).
  struct Case {
    int64_t m, k, n;
  } cases[] = {{7, 33, 70},     {1, 96, 40},   {2, 5, 3},
               {72, 1537, 48},  {200, 64, 96}, {130, 2048, 288}};
  std::mt19937 rng(47);
  for (const Case &c : cases)
    for (int threads : {1, 2}) {
      std::vector<float> x = dyadicValues(c.m * c.k, rng), w = dyadicValues(c.k * c.n, rng);
      std::unique_ptr<Graph> g = packedMatMul(w, c.m, c.k, c.n, *cpu);
      const Node *mm = nullptr;
      for (const Node *n : g->nodes())
        mm = n->kind() == OpKind::MatMul ? n : mm;
      ASSERT_TRUE(mm);
      ASSERT_EQ(dtypeName(mm->operand(1)->dtype()), "bf16") << "pack-gemm-weights under bf16";
      Expected<std::vector<float>> got = runCompiled(*g, *cpu, x, c.m, c.k, threads);
      ASSERT_TRUE(got) << got.error().message();
      std::vector<float> want = referenceBf16(x, w, c.m, c.k, c.n);
      std::string what = fmt::format("{}x{}x{} on {} threads", c.m, c.k, c.n, threads);
      ASSERT_EQ(got->size(), want.size()) << what;
      int bad = 0;
      for (size_t i = 0; i < want.size() && bad < 5; ++i)
        if (std::memcmp(&(*got)[i], &want[i], sizeof(float)) != 0) {
          ADD_FAILURE() << what << ": element " << i << " is " << (*got)[i] << ", expected "
                        << want[i];
          ++bad;
        }
      // The interpreter's definition of the packed matmul (exact sums) agrees.
      Expected<std::vector<Tensor>> viaInterp =
          interpret(*g, {Tensor::fromVector(DType::F32, {c.m, c.k}, x)});
      ASSERT_TRUE(viaInterp) << viaInterp.error().message();
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ((*viaInterp)[0].data<float>()[i], want[i]) << what << " interpreter " << i;
    }
}

TEST(Bf16Gemm, MatMulWithinBf16RoundingOfFp32) {
  std::optional<CpuTarget> cpu = bf16Host();
  if (!cpu)
    GTEST_SKIP() << "the host lacks AVX512-BF16: " << CpuTarget::host().str();
  const int64_t m = 33, k = 300, n = 80;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(m * k), w(k * n);
  for (float &v : x)
    v = u(rng);
  for (float &v : w)
    v = u(rng);
  std::unique_ptr<Graph> g = packedMatMul(w, m, k, n, *cpu);
  Expected<std::vector<float>> got = runCompiled(*g, *cpu, x, m, k, 0);
  ASSERT_TRUE(got) << got.error().message();
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        exact += double(x[i * k + p]) * double(w[p * n + j]);
        mag += std::fabs(double(x[i * k + p]) * double(w[p * n + j]));
      }
      // Each operand is off by at most 2^-8 relatively (8 significant bits), a product by
      // about 2^-7; the f32 sum adds k roundings of 2^-24.
      double bound = mag * (0x1p-7 * 1.01 + double(k) * 0x1p-24);
      double err = std::fabs((*got)[i * n + j] - exact);
      worst = std::max(worst, err / mag);
      ASSERT_LE(err, bound) << "element " << i << ", " << j;
    }
  // And bf16 rounding is really there: far from f32's own error.
  EXPECT_GT(worst, 1e-5);
}

TEST(Bf16Gemm, PrecisionOptionNamesWhatIsMissing) {
  CpuTarget v3 = CpuTarget::forLevel(CpuTarget::Level::V3);
  Error e = v3.setPrecision("bf16");
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("--precision bf16 needs AVX512-BF16"), std::string::npos)
      << e.message();
  CpuTarget v4 = CpuTarget::forLevel(CpuTarget::Level::V4); // no extensions beyond the level
  EXPECT_TRUE(v4.setPrecision("bf16"));
  Error unknown = v4.setPrecision("fp8");
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown.message().find("available: fp32, bf16"), std::string::npos);
  v4.avx512bf16 = true;
  ASSERT_FALSE(v4.setPrecision("bf16"));
  EXPECT_NE(v4.str().find("precision bf16"), std::string::npos) << v4.str();
  EXPECT_FALSE(v4 == CpuTarget::forLevel(CpuTarget::Level::V4));
  ASSERT_FALSE(v4.setPrecision("fp32"));
  EXPECT_EQ(v4.str().find("precision"), std::string::npos) << v4.str();
}
