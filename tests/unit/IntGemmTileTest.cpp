// The integer GEMM tile (kir::GemmElems::U8S8S32): the evaluator against the tile's
// definition, and the LLVM microkernels of every ISA path the host runs against the evaluator,
// on odd tile sizes, partial vectors and extreme operands.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/ir/Kernel.h"

using namespace nnc;

namespace {

/// A u8s8s32 tile kernel over a (mr x lda), b (groups of 4*ldb4 bytes) and c (mr x ldc).
kir::Kernel intTileKernel(int64_t mr, int64_t nr, int64_t kc, int64_t lda, int64_t ldb,
                          int64_t ldc, bool accumulate) {
  kir::Kernel k;
  k.name = "itile";
  int64_t aN = std::max<int64_t>(mr * lda, 1), bN = std::max<int64_t>(kc / 4 * ldb, 1);
  k.buffers = {{"a", DType::U8, aN, kir::BufferRole::Operand, 0, false},
               {"b", DType::I8, bN, kir::BufferRole::Operand, 1, false},
               {"c", DType::I32, mr * ldc, kir::BufferRole::Result, 0, true}};
  kir::GemmTileShape s;
  s.elems = kir::GemmElems::U8S8S32;
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

struct TileCase {
  int64_t mr, nr, kc;
  bool accumulate;
};
const TileCase kTileCases[] = {{5, 21, 12, true}, {3, 32, 8, false}, {6, 16, 20, false},
                               {1, 5, 4, true},   {4, 16, 0, true},  {7, 3, 36, false},
                               {2, 48, 16, true}};

/// Operands of extreme and mixed values (255 x -128 included), and C's initial values.
void fillTile(std::vector<uint8_t> &a, std::vector<int8_t> &b, std::vector<int32_t> &c) {
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<uint8_t>(i % 5 == 0 ? 255 : (i * 37) % 256);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<int8_t>(i % 7 == 0 ? -128 : int((i * 53) % 256) - 128);
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = static_cast<int32_t>(i * 1000003 % 4001) - 2000;
}

} // namespace

TEST(IntGemmTile, EvaluatorMatchesDefinition) {
  for (const TileCase &tc : kTileCases) {
    int64_t lda = tc.kc + 4, ldb = 4 * tc.nr + 8, ldc = tc.nr + 3;
    kir::Kernel k = intTileKernel(tc.mr, tc.nr, tc.kc, lda, ldb, ldc, tc.accumulate);
    ASSERT_FALSE(kir::verifyKernel(k)) << kir::verifyKernel(k).message();
    std::vector<uint8_t> a(k.buffers[0].numElements);
    std::vector<int8_t> b(k.buffers[1].numElements);
    std::vector<int32_t> c(k.buffers[2].numElements);
    fillTile(a, b, c);
    std::vector<int32_t> want = c;
    for (int64_t r = 0; r < tc.mr; ++r)
      for (int64_t j = 0; j < tc.nr; ++j) {
        int64_t sum = tc.accumulate ? want[r * ldc + j] : 0;
        for (int64_t p = 0; p < tc.kc; ++p)
          sum += int64_t(a[r * lda + p]) * int64_t(b[p / 4 * ldb + 4 * j + p % 4]);
        want[r * ldc + j] = static_cast<int32_t>(static_cast<uint32_t>(sum));
      }
    ASSERT_FALSE(kir::evaluateKernel(k, {a.data(), b.data(), c.data()}));
    EXPECT_EQ(c, want) << tc.mr << "x" << tc.nr << " k " << tc.kc;
  }
}

TEST(IntGemmTile, EvaluatorRejectsPartialGroup) {
  kir::Kernel k = intTileKernel(2, 4, 8, 8, 16, 4, false);
  k.body->args[3] = kir::var("kk");
  k.body = kir::block({kir::decl("kk", DType::I64, kir::intImm(6)), k.body});
  std::vector<uint8_t> a(16);
  std::vector<int8_t> b(32);
  std::vector<int32_t> c(8);
  Error e = kir::evaluateKernel(k, {a.data(), b.data(), c.data()});
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("not a multiple of 4"), std::string::npos) << e.message();
}

TEST(IntGemmTile, JitMatchesEvaluatorOnEveryIsa) {
  // Each path the host can run: SSE2 and AVX2 (widened 16-bit multiply-adds), AVX-512 without
  // VNNI (the same, 512-bit), AVX-VNNI (vpdpbusd ymm) and AVX512-VNNI (zmm). Operands hold
  // 255 x -128 and 255 x 127 pairs, whose pair sums a saturating vpmaddubsw would clamp.
  const CpuTarget &host = CpuTarget::host();
  std::vector<CpuTarget> targets = {CpuTarget::forLevel(CpuTarget::Level::X86_64)};
  if (host.level >= CpuTarget::Level::V3) {
    targets.push_back(CpuTarget::forLevel(CpuTarget::Level::V3));
    if (host.avxvnni) {
      targets.push_back(CpuTarget::forLevel(CpuTarget::Level::V3));
      targets.back().avxvnni = true;
    }
  }
  if (host.level == CpuTarget::Level::V4) {
    targets.push_back(CpuTarget::forLevel(CpuTarget::Level::V4));
    targets.push_back(host);
  }
  for (const CpuTarget &cpu : targets)
    for (const TileCase &tc : kTileCases) {
      int64_t lda = tc.kc + 4, ldb = 4 * tc.nr + 8, ldc = tc.nr + 3;
      kir::Kernel k = intTileKernel(tc.mr, tc.nr, tc.kc, lda, ldb, ldc, tc.accumulate);
      std::vector<uint8_t> a(k.buffers[0].numElements);
      std::vector<int8_t> b(k.buffers[1].numElements);
      std::vector<int32_t> want(k.buffers[2].numElements);
      fillTile(a, b, want);
      std::vector<int32_t> got = want;
      ASSERT_FALSE(kir::evaluateKernel(k, {a.data(), b.data(), want.data()}));
      CodegenOptions o(cpu);
      o.cacheDir = "";
      auto m = compileKernels({k}, o);
      ASSERT_TRUE(m) << cpu.str() << ": " << m.error().message();
      void *bufs[] = {a.data(), b.data(), got.data()};
      (*m)->lookup("itile")(bufs);
      EXPECT_EQ(got, want) << cpu.str() << " " << tc.mr << "x" << tc.nr << " k " << tc.kc;
    }
}
