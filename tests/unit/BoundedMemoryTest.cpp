// Memory that stays bounded (issue 18): a model with a symbolic batch run with 200 distinct
// batch sizes (the cache of specialized programs drops the least recently used and says so),
// and one compiled model run 2,000 times (bench/memory_check.py runs 100,000).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "TestTarget.h"
#include "nnc/driver/Driver.h"
#include "nnc/ir/Parser.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Debug.h"

using namespace nnc;

namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define NNC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NNC_SANITIZED 1
#endif

/// The resident set of this process in bytes (nnc::residentMiB); -1 where unknown.
int64_t residentBytes() {
  double mib = residentMiB().first;
  return mib < 0 ? -1 : static_cast<int64_t>(mib * 1048576.0);
}

/// Sanitizer runtimes keep freed memory in quarantine: RSS says nothing there.
#define SKIP_UNLESS_RSS_MEANINGFUL()                                                               \
  do {                                                                                             \
    if (kSanitized)                                                                                \
      GTEST_SKIP() << "built with a sanitizer: freed memory is quarantined, RSS grows";            \
    if (residentBytes() < 0)                                                                       \
      GTEST_SKIP() << "no /proc/self/statm";                                                       \
  } while (0)

#ifdef NNC_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

const char *kBatched = R"(
graph @batched(%x: f32[N,2,3]) -> (f32[N,4]) {
  %s0 = shape(%x) {end = 1} : i64[1]
  %m1 = constant {value = dense<i64[1]>[-1]} : i64[1]
  %ns = concat(%s0, %m1) {axis = 0} : i64[2]
  %flat = reshape(%x, %ns) : f32[N,6]
  %w = constant {value = dense<f32[6,4]>[0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5, 0.5, -1, 1.5, 2, -0.25, 0.75, 1, 0, -2, 0.5, 0.25, -1.5]} : f32[6,4]
  %mm = matmul(%flat, %w) : f32[N,4]
  %t = tanh(%mm) : f32[N,4]
  %y = softmax(%t) {axis = 1} : f32[N,4]
  return %y
}
)";

Tensor input(int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(n));
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Tensor t = Tensor::zeros(DType::F32, {n, 2, 3});
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
  return t;
}

std::unique_ptr<CpuModel> batchedModel(bool verbose) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(kBatched);
  EXPECT_TRUE(g) << g.error().message();
  if (!g)
    return nullptr;
  CpuOptions opts(testenv::testCpu());
  opts.threads = 1;
  opts.codegen.cacheDir = ""; // no files written: every size is compiled
  opts.verbose = verbose;
  Expected<std::unique_ptr<CpuModel>> m = CpuModel::create(std::move(*g), opts, driver::shapeSpecializer());
  EXPECT_TRUE(m) << m.error().message();
  return m ? std::move(*m) : nullptr;
}

// 200 batch sizes, each compiled on first use: the cache keeps 16 programs, drops one per new
// size beyond that (184 notes under verbose), and the resident set stops growing once it is
// full. (Before the fix, one map entry per shape signature ever seen was kept as well.)
TEST(BoundedMemory, TwoHundredBatchSizes) {
  SKIP_UNLESS_RSS_MEANINGFUL();
  std::unique_ptr<CpuModel> m = batchedModel(/*verbose=*/true);
  ASSERT_TRUE(m);
  testing::internal::CaptureStderr();
  int64_t warm = 0;
  for (int64_t n = 1; n <= 200; ++n) {
    Expected<std::vector<Tensor>> r = m->run({input(n)});
    if (!r) {
      testing::internal::GetCapturedStderr();
      FAIL() << "batch " << n << ": " << r.error().message();
    }
    ASSERT_EQ((*r)[0].extents(), (Extents{n, 4}));
    if (n == 50)
      warm = residentBytes();
  }
  int64_t end = residentBytes();
  std::string notes = testing::internal::GetCapturedStderr();
  int drops = 0;
  for (size_t at = 0; (at = notes.find("dropped the least recently used", at)) != std::string::npos;
       ++at)
    ++drops;
  EXPECT_EQ(drops, 200 - 16) << notes.substr(0, 2000);
  // The last size dropped is 184 (16 kept: 185 to 200).
  EXPECT_NE(notes.find("for input shapes [184,2,3]\n"), std::string::npos);
  EXPECT_EQ(notes.find("for input shapes [185,2,3]\n"), std::string::npos);
  // 150 sizes after the cache filled: compiling and dropping each leaves at most 4 MiB behind
  // (allocator slack), where keeping them would take well over 100 MiB.
  EXPECT_LT(end - warm, int64_t(4) << 20)
      << "RSS " << warm / 1024 << " KiB after 50 sizes, " << end / 1024 << " KiB after 200";
}

// One compiled model run 2,000 times: the resident set after run 200 and after run 2,000
// within 1% (each run takes an arena and output buffers and gives them back).
TEST(BoundedMemory, RepeatedRunsDoNotGrow) {
  SKIP_UNLESS_RSS_MEANINGFUL();
  std::unique_ptr<CpuModel> m = batchedModel(/*verbose=*/false);
  ASSERT_TRUE(m);
  Tensor x = input(64);
  int64_t after200 = 0;
  for (int run = 1; run <= 2000; ++run) {
    Expected<std::vector<Tensor>> r = m->run({x});
    ASSERT_TRUE(r) << r.error().message();
    if (run == 200)
      after200 = residentBytes();
  }
  int64_t after2000 = residentBytes();
  EXPECT_LE(std::abs(double(after2000 - after200)), 0.01 * double(after200))
      << "RSS " << after200 / 1024 << " KiB after run 200, " << after2000 / 1024
      << " KiB after run 2000";
}

} // namespace
