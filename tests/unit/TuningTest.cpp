// Tuning: every point of the gemm space computes the interpreter's numbers, the tuning cache
// applies only records of this device and space version, and the tuner rejects candidates
// with wrong results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "PinnedTarget.h"
#include "TestTarget.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/ir/Parser.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/TuningCache.h"

using namespace nnc;

namespace {

// Odd sizes, so every config has edge tiles; a broadcast batch matmul; a conv with bias; a
// matmul whose bias and exp are fused (finished block by block).
const char *kGemms = R"(
graph @gemms(%a: f32[37,53], %b: f32[53,70], %x: f32[2,1,9,41], %y: f32[3,41,17], %img: f32[1,3,9,9], %k: f32[8,3,3,3], %kb: f32[8], %fb: f32[70]) -> (f32[37,70], f32[2,3,9,17], f32[1,8,9,9], f32[37,70]) {
  %mm = matmul(%a, %b) : f32[37,70]
  %bm = matmul(%x, %y) : f32[2,3,9,17]
  %c = conv(%img, %k, %kb) {pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 1} : f32[1,8,9,9]
  %fm = matmul(%a, %b) : f32[37,70]
  %fa = add(%fm, %fb) : f32[37,70]
  %fr = exp(%fa) : f32[37,70]
  return %mm, %bm, %c, %fr
}
)";

std::unique_ptr<Graph> parse(const std::string &text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  return g ? std::move(*g) : nullptr;
}

std::vector<Tensor> randomInputs(const Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<Tensor> in;
  for (const Value *v : g.inputs()) {
    Tensor t = Tensor::zeros(DType::F32, *staticExtents(v->shape()));
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data<float>()[i] = u(rng);
    in.push_back(std::move(t));
  }
  return in;
}

/// One config for every problem.
class Everywhere : public tuning::ConfigSource {
public:
  explicit Everywhere(tuning::Config c) : c_(std::move(c)) {}
  std::optional<tuning::Config> lookup(const tuning::Problem &) const override { return c_; }

private:
  tuning::Config c_;
};

std::string tempPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("nnc-tuning-test-{}-{}.db", getpid(), name))
      .string();
}

void removeDb(const std::string &path) {
  for (const char *suffix : {"", "-wal", "-shm"})
    std::remove((path + suffix).c_str());
}

} // namespace

TEST(Tuning, EveryGemmConfigComputesTheSameNumbers) {
  std::unique_ptr<Graph> g = parse(kGemms);
  ASSERT_TRUE(g);
  std::vector<Tensor> in = randomInputs(*g, 3);
  Expected<std::vector<Tensor>> want = interpret(*g, in);
  ASSERT_TRUE(want) << want.error().message();
  const tuning::Space *space = tuning::findSpace("gemm_cpu");
  ASSERT_TRUE(space);
  std::mt19937_64 rng(11);
  int checked = 0;
  int microkernel = 0;
  // Besides random points, microkernel configs whose 37 rows make several row blocks with a
  // row edge in the last one (mr 6, mc 24: blocks of 3 tiles, then one row), with k blocks
  // and with packed operands.
  const std::vector<std::string> fixed = {
      "kc=32,ku=1,mc=24,mk=1,mr=6,nc=32,nr=16,order=0,pa=1,par=1,pb=1,pf=1",
      "kc=0,ku=1,mc=24,mk=1,mr=4,nc=0,nr=8,order=0,pa=0,par=0,pb=0,pf=1",
  };
  for (int attempt = 0; attempt < 400 && checked < 24 + int(fixed.size()); ++attempt) {
    tuning::Config c;
    for (const tuning::Knob &k : space->knobs)
      c[k.name] = k.values[std::uniform_int_distribution<size_t>(0, k.values.size() - 1)(rng)];
    if (size_t(attempt) < fixed.size())
      c = *tuning::parseConfig(fixed[size_t(attempt)]);
    // The knobs of the path the config does not take keep their defaults.
    if (c["mk"] == 1)
      c["ku"] = 1, c["order"] = 0;
    else
      c["kc"] = 0, c["mc"] = 0, c["pb"] = 0, c["pa"] = 0, c["pf"] = 0;
    // Each problem applies the config only where valid for it; the big one decides here.
    tuning::Problem big;
    big.kind = "gemm_cpu";
    big.dims = {1, 37, 53, 70};
    big.cpu = testenv::testCpu(); // what the executables below compile for
    if (!space->valid(c, big))
      continue;
    ++checked;
    microkernel += c["mk"] == 1;
    CpuOptions o(testenv::testCpu());
    o.threads = 2;
    o.codegen.cacheDir = "";
    o.tuning = std::make_shared<Everywhere>(c);
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, o);
    ASSERT_TRUE(exe) << exe.error().message();
    EXPECT_GE((*exe)->tuningUse().tuned, 1) << tuning::configStr(c);
    Expected<std::vector<Tensor>> got = (*exe)->run(in);
    ASSERT_TRUE(got) << got.error().message();
    for (size_t r = 0; r < want->size(); ++r)
      for (int64_t i = 0; i < (*want)[r].numElements(); ++i) {
        double w = (*want)[r].elementAsDouble(i), v = (*got)[r].elementAsDouble(i);
        ASSERT_NEAR(v, w, 1e-4 + 1e-4 * std::fabs(w))
            << "result " << r << " element " << i << " config " << tuning::configStr(c);
      }
  }
  EXPECT_GE(checked, 10);
  EXPECT_GE(microkernel, 4);
}

TEST(Tuning, RecordsOfAnotherDeviceOrSpaceVersionAreIgnored) {
  std::unique_ptr<Graph> g = parse(kGemms);
  ASSERT_TRUE(g);
  std::string path = tempPath("device");
  removeDb(path);
  Expected<std::unique_ptr<TuningCache>> opened = TuningCache::open(path);
  ASSERT_TRUE(opened) << opened.error().message();
  std::shared_ptr<TuningCache> cache(std::move(*opened));
  std::string here = cpuDeviceFingerprint(1, testenv::testCpu());
  const tuning::Space &space = *tuning::findSpace("gemm_cpu");

  // The problems the graph has, from a compile without a cache.
  std::vector<tuning::Problem> problems;
  CpuOptions o(testenv::testCpu());
  o.threads = 1;
  o.codegen.cacheDir = "";
  {
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, o);
    ASSERT_TRUE(exe) << exe.error().message();
    EXPECT_EQ((*exe)->tuningUse().tunable, 3);
    EXPECT_EQ((*exe)->tuningUse().tuned, 0);
    for (const std::string &sig : (*exe)->tuningUse().missing) {
      problems.emplace_back();
      problems.back().kind = "gemm_cpu";
      problems.back().signature = sig;
    }
  }
  ASSERT_EQ(problems.size(), 3u);
  auto compileTuned = [&](const std::string &device) {
    CpuOptions oc = o;
    oc.tuning = std::make_shared<CachedConfigs>(cache, device);
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, oc);
    EXPECT_TRUE(exe) << exe.error().message();
    return exe ? (*exe)->tuningUse().tuned : -1;
  };
  std::string cfg = "kc=0,ku=1,mc=0,mk=0,mr=1,nc=0,nr=8,order=1,pa=0,par=0,pb=0,pf=0";
  for (const tuning::Problem &p : problems) {
    ASSERT_FALSE(cache->put({p.kind, p.signature, "cpu other | +sse2 | threads=1", space.version,
                             cfg, 1.0, 2.0, 1, ""}));
    ASSERT_FALSE(cache->put({p.kind, p.signature, here, space.version + 1, cfg, 1.0, 2.0, 1, ""}));
  }
  EXPECT_EQ(compileTuned(here), 0);
  EXPECT_EQ(compileTuned(cpuDeviceFingerprint(2, testenv::testCpu())), 0); // another thread count
  ASSERT_FALSE(cache->put({problems[0].kind, problems[0].signature, here, space.version, cfg,
                           1.0, 2.0, 1, ""}));
  EXPECT_EQ(compileTuned(here), 1);
  // A faster record replaces a slower one; a slower one does not.
  ASSERT_FALSE(cache->put({problems[0].kind, problems[0].signature, here, space.version,
                           "kc=0,ku=1,mc=0,mk=0,mr=2,nc=0,nr=8,order=0,pa=0,par=0,pb=0,pf=0", 5.0, 2.0, 1, ""}));
  Expected<std::optional<TuningRecord>> r =
      cache->find(problems[0].kind, problems[0].signature, here, space.version);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->config, cfg);
  EXPECT_EQ((*r)->trials, 2);
  // prune keeps this CPU's current records only.
  std::string prefix = here.substr(0, here.rfind("threads="));
  Expected<int64_t> pruned = cache->prune(prefix);
  ASSERT_TRUE(pruned);
  EXPECT_EQ(*pruned, 6);
  EXPECT_EQ(compileTuned(here), 1);
  removeDb(path);
}

TEST(Tuning, TunerRejectsCandidatesWithWrongNumbers) {
  std::unique_ptr<Graph> g = parse(kGemms);
  ASSERT_TRUE(g);
  for (bool corrupt : {true, false}) {
    std::string path = tempPath(corrupt ? "corrupt" : "clean");
    removeDb(path);
    Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(path);
    ASSERT_TRUE(cache) << cache.error().message();
    TuneOptions opts(testenv::testCpu());
    opts.threads = 1;
    opts.budgetSeconds = 30;
    opts.maxTrials = 3;
    opts.progress = false;
    if (corrupt)
      opts.corrupt = [](std::vector<float *> &results, std::vector<int64_t> &) {
        results[0][0] += 1.0f;
      };
    Expected<TuneSummary> s = tuneGraph(*g, **cache, opts);
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_EQ(s->kernels.size(), 3u);
    for (const TuneSummary::Kernel &k : s->kernels) {
      EXPECT_GT(k.measured, 0) << k.problem.signature;
      if (corrupt) {
        EXPECT_EQ(k.rejected, k.measured) << k.problem.signature;
        // Only the default survives, and it is what the cache keeps.
        const tuning::Space &space = *tuning::findSpace(k.problem.kind);
        EXPECT_EQ(k.bestConfig, tuning::configStr(space.defaults(k.problem)));
      } else {
        EXPECT_EQ(k.rejected, 0) << k.problem.signature;
      }
      Expected<std::optional<TuningRecord>> r = (*cache)->find(
          k.problem.kind, k.problem.signature, cpuDeviceFingerprint(1, testenv::testCpu()),
          tuning::findSpace(k.problem.kind)->version);
      ASSERT_TRUE(r && *r) << k.problem.signature;
      EXPECT_EQ((*r)->config, k.bestConfig);
    }
    EXPECT_EQ(*(*cache)->integrityCheck(), "ok");
    removeDb(path);
  }
}

TEST(Tuning, TunerTunesTheKernelsOfALoopBody) {
  // A recurrent step (scan) whose body multiplies its state by a weight: the tuner finds the
  // body's GEMM (it refused the model before: "no CPU code generation for op 'scan'").
  std::unique_ptr<Graph> g = parse(R"(
graph @rnn(%h0: f32[4,32], %xs: f32[3,4,32], %w: f32[32,32]) -> (f32[4,32], f32[3,4,32]) {
  %h, %ys = scan(%h0, %xs, %w) {num_carried = 1, num_scan_inputs = 1, reverse = 0} body graph @step(%a: f32[4,32], %x: f32[4,32], %k: f32[32,32]) -> (f32[4,32], f32[4,32]) {
    %m = matmul(%a, %k) : f32[4,32]
    %s = add(%m, %x) : f32[4,32]
    return %s, %s
  } : f32[4,32], f32[3,4,32]
  return %h, %ys
}
)");
  ASSERT_TRUE(g);
  std::string path = tempPath("loop-body");
  removeDb(path);
  Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(path);
  ASSERT_TRUE(cache) << cache.error().message();
  TuneOptions opts(testenv::testCpu());
  opts.threads = 1;
  opts.budgetSeconds = 10;
  opts.maxTrials = 2;
  opts.progress = false;
  Expected<TuneSummary> s = tuneGraph(*g, **cache, opts);
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(s->kernels.size(), 1u);
  EXPECT_NE(s->kernels[0].problem.signature.find("m4 k32 n32"), std::string::npos)
      << s->kernels[0].problem.signature;
  EXPECT_GT(s->kernels[0].measured, 0);
  EXPECT_EQ(s->kernels[0].rejected, 0);
  removeDb(path);
}

TEST(Tuning, GemmRowsStayOneBlockWhenBsColumnBlocksOutgrowTheL2) {
  // The default GEMM schedule past 192 rows (pinned caches: L2 512 KiB). When a column block
  // of the weight (k x nc) is larger than the L2, the rows stay one block (a k blocked in 512
  // is blocked in 256; up to 1024 it stays whole) and the column blocks narrow in their stead,
  // so a cold weight streams once, and a matmul's A (the activations) is packed; when it fits,
  // or A's block of 256 k rows would not fit in half the L2, rows of 96 and A in place.
  const tuning::Space *space = tuning::findSpace("gemm_cpu");
  ASSERT_NE(space, nullptr);
  // "mc kc nc pa" of the default for an m x k x n product with a packed weight (or, with
  // `conv`, the im2col GEMM of a conv, whose A is its weight).
  auto blocks = [&](int64_t m, int64_t k, int64_t n, bool conv = false) {
    tuning::Problem p;
    p.kind = "gemm_cpu";
    p.signature =
        conv ? fmt::format("gemm_cpu f32 b1 m{} k{} n{} conv n1 group1 bias1 im2col", m, k, n)
             : fmt::format("gemm_cpu f32 b1 m{} k{} n{} matmul batch[1] sa[0] sb[0] packed16", m, k,
                           n);
    p.dims = {1, m, k, n, 0};
    p.cpu = pinned::pinnedCpuTarget(CpuTarget::Level::V3);
    tuning::Config c = space->defaults(p);
    return fmt::format("{} {} {} {}", c["mc"], c["kc"], c["nc"], c["pa"]);
  };
  // ViT-B/16's MLP: column blocks of 3072 x 128 and 768 x 512 floats (1.5 MiB).
  EXPECT_EQ(blocks(197, 3072, 768), "0 256 64 1");
  EXPECT_EQ(blocks(197, 768, 3072), "0 0 256 1");
  // A conv's im2col GEMM merges its rows alike, but its A is a weight: not copied per run.
  EXPECT_EQ(blocks(256, 3456, 392, /*conv=*/true), "0 256 64 0");
  // ConvNeXt-T's stage-3 MLP: column blocks of 384 x 256 floats stay in the L2.
  EXPECT_EQ(blocks(196, 384, 1536), "96 0 256 0");
  // Up to 192 rows one block as before (k blocks of 512); 300 rows take 300 KiB for A's block.
  EXPECT_EQ(blocks(192, 3072, 768), "0 512 128 0");
  EXPECT_EQ(blocks(300, 3072, 768), "96 512 128 0");
}

TEST(Tuning, GemmRowsSplitWhenTheColumnsGiveTooFewParallelBlocks) {
  // A parallel GEMM of one batch runs its cache blocks on the thread pool: four of them at the
  // least. A 1-D conv's im2col GEMM (256 channels, kernel 11, length 200) has too few columns
  // for column blocks and its rows merged into one block (the weight's column block outgrows
  // the pinned 512 KiB L2): its rows split instead. Shapes that had enough blocks keep theirs.
  const tuning::Space *space = tuning::findSpace("gemm_cpu");
  ASSERT_NE(space, nullptr);
  // "mc nc par" of the default for an m x k x n problem of `batch` products.
  auto blocks = [&](CpuTarget::Level level, int64_t batch, int64_t m, int64_t k, int64_t n) {
    tuning::Problem p;
    p.kind = "gemm_cpu";
    p.signature = fmt::format("gemm_cpu f32 b{} m{} k{} n{} conv n{} group1 bias1 im2col", batch,
                              m, k, n, batch);
    p.dims = {batch, m, k, n, 0};
    p.cpu = pinned::pinnedCpuTarget(level);
    tuning::Config c = space->defaults(p);
    return fmt::format("{} {} {}", c["mc"], c["nc"], c["par"]);
  };
  using L = CpuTarget::Level;
  // 42 row tiles of 6 (AVX2) or 32 of 8 (AVX-512) in blocks of 48 rows: 6 blocks.
  EXPECT_EQ(blocks(L::V3, 1, 256, 2816, 200), "48 0 1");
  EXPECT_EQ(blocks(L::V4, 1, 256, 2816, 200), "48 0 1");
  // Four column blocks already: the rows stay as they were.
  EXPECT_EQ(blocks(L::V3, 1, 256, 3456, 392), "0 64 1");
  // Blocks of fewer than 2^20 multiply-adds do not pay for a fork and join: a batch-32 MLP's
  // 32 x 400 x 120 layer stays one block.
  EXPECT_EQ(blocks(L::V4, 1, 32, 400, 120), "0 0 1");
  // A batch of four runs its products in parallel instead; too little work runs on one thread.
  EXPECT_EQ(blocks(L::V4, 4, 256, 2816, 200), "0 0 1");
  EXPECT_EQ(blocks(L::V4, 1, 16, 64, 50), "0 0 0");
}

TEST(Tuning, GemmKBlocksKeepTheBPanelInL1WhenTheTileDrawsBFast) {
  // An mr x nr tile reads 8 * vw / mr bytes of B a cycle: AVX2's 6 x 16 tile 10.7, whose
  // panels of all k stream from the L2; AVX-512's 8 x 32 tile 16, whose panels are blocked in
  // k to at most half of the L1 once all of k overflows it (pinned caches: L1 32 KiB).
  const tuning::Space *space = tuning::findSpace("gemm_cpu");
  ASSERT_NE(space, nullptr);
  // "mr nr kc" of the default for an m x k x n matmul with a packed weight.
  auto tile = [&](CpuTarget::Level level, int64_t m, int64_t k, int64_t n, int64_t l1 = 32 << 10) {
    tuning::Problem p;
    p.kind = "gemm_cpu";
    p.signature =
        fmt::format("gemm_cpu f32 b1 m{} k{} n{} matmul batch[] sa[] sb[] packed32", m, k, n);
    p.dims = {1, m, k, n, 0};
    p.cpu = pinned::pinnedCpuTarget(level);
    p.cpu.l1dBytes = l1;
    tuning::Config c = space->defaults(p);
    return fmt::format("{} {} {}", c["mr"], c["nr"], c["kc"]);
  };
  using L = CpuTarget::Level;
  // ViT-B/16's QKV, MLP and projection GEMMs.
  EXPECT_EQ(tile(L::V3, 197, 768, 2304), "6 16 0");
  EXPECT_EQ(tile(L::V4, 197, 768, 2304), "8 32 128");
  EXPECT_EQ(tile(L::V4, 197, 3072, 768), "8 32 128");
  // A 48 KiB L1 holds no deeper block from the candidates (192 would be half of it).
  EXPECT_EQ(tile(L::V4, 197, 768, 2304, 48 << 10), "8 32 128");
  // C's rows a multiple of 4 KiB apart (3072 and 1024 floats) fold onto a fraction of the
  // cache sets, where a C block re-read per k block misses: all of k in one block.
  EXPECT_EQ(tile(L::V4, 197, 768, 3072), "8 32 0");
  EXPECT_EQ(tile(L::V4, 197, 768, 3072, 48 << 10), "8 32 0");
  EXPECT_EQ(tile(L::V4, 512, 1024, 1024), "8 32 0");
  // 1.5 and 1.375 pages apart, they spread over the sets: blocked as before.
  EXPECT_EQ(tile(L::V4, 196, 768, 1536), "8 32 128");
  EXPECT_EQ(tile(L::V4, 196, 384, 1408), "8 32 128");
  // A panel of all k within the L1 stays whole (256 x 32 floats: 32 KiB of a 48 KiB L1).
  EXPECT_EQ(tile(L::V4, 197, 256, 768, 48 << 10), "8 32 0");
  // One row tile reads each panel once: nothing to keep.
  EXPECT_EQ(tile(L::V4, 8, 768, 2304), "8 32 0");
  // Two or three row tiles by a weight beyond the L2 (a decoder's GEMMs at 16 tokens): k
  // blocks of 64; four tiles, or a weight within the L2 (512 KiB here), as before.
  EXPECT_EQ(tile(L::V4, 16, 2048, 512), "8 32 64");
  EXPECT_EQ(tile(L::V4, 24, 512, 2048), "8 32 64");
  EXPECT_EQ(tile(L::V4, 32, 512, 2048), "8 32 0");
  EXPECT_EQ(tile(L::V4, 16, 256, 256), "8 32 0");
  // AVX2's 6 x 16 tiles: not measured there, the rules above (12 rows by 4 MiB).
  EXPECT_EQ(tile(L::V3, 12, 2048, 512), "6 16 0");
  // AVX2 past 1024: the L2 rule's blocks of 512, untouched.
  EXPECT_EQ(tile(L::V3, 100, 3072, 768), "6 16 512");
}

TEST(Tuning, StreamedWeightGemmTakesOneColumnBlockPerThread) {
  // A 16-row GEMM by a weight beyond the L2 streams it once per run: one column block per
  // thread (nc, in whole tiles), no row blocks; all of n in one block on one thread.
  const tuning::Space *space = tuning::findSpace("gemm_cpu");
  ASSERT_NE(space, nullptr);
  auto blocks = [&](int threads, int64_t n) {
    tuning::Problem p;
    p.kind = "gemm_cpu";
    p.signature = fmt::format("gemm_cpu f32 b1 m16 k512 n{} matmul batch[] sa[] sb[] packed32", n);
    p.dims = {1, 16, 512, n, 0};
    p.cpu = pinned::pinnedCpuTarget(CpuTarget::Level::V4);
    p.threads = threads;
    tuning::Config c = space->defaults(p);
    return fmt::format("kc={} mc={} nc={}", c["kc"], c["mc"], c["nc"]);
  };
  EXPECT_EQ(blocks(1, 8000), "kc=64 mc=0 nc=0");
  EXPECT_EQ(blocks(2, 8000), "kc=64 mc=0 nc=4000");
  EXPECT_EQ(blocks(3, 2048), "kc=64 mc=0 nc=704"); // 683 columns, rounded up to tiles of 32
}

TEST(Tuning, DeepInt8ConvOnOneThreadTakesTallTilesInRowBlocks) {
  // A conv whose weight overflows half the L2 and whose patches fit there: on two threads the
  // panels are split (par 1, ConvIntegerTiles' shared patches); on one, row blocks of the
  // tallest tile the registers hold (AVX-512 VNNI: 14 x 32 in 31 registers).
  const tuning::Space *space = tuning::findSpace("igemm_cpu");
  ASSERT_NE(space, nullptr);
  CpuTarget cpu = pinned::pinnedCpuTarget(CpuTarget::Level::V4);
  cpu.avx512vnni = true;
  auto config = [&](int threads, int64_t p, int64_t kp, int64_t m) {
    tuning::Problem pr;
    pr.kind = "igemm_cpu";
    pr.signature = fmt::format("igemm_cpu conv u8xi8 n1 p{} k{} m{} za1 zb0", p, kp, m);
    pr.dims = {1, p, kp, m, cpu.int8PanelWidth()};
    pr.cpu = cpu;
    pr.threads = threads;
    tuning::Config c = space->defaults(pr);
    return fmt::format("mr={} par={}", c["mr"], c["par"]);
  };
  ASSERT_EQ(cpu.int8PanelWidth(), 32);
  EXPECT_EQ(config(2, 49, 4608, 512), "mr=8 par=1");
  EXPECT_EQ(config(1, 49, 4608, 512), "mr=14 par=0");
  // A weight within half the L2 keeps the default on one thread too.
  EXPECT_EQ(config(1, 196, 576, 64), "mr=8 par=1");
}
