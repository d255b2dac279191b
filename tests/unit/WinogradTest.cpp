// Winograd convolution (the winograd pass, winograd_input / winograd_output): convs through
// the default pipeline with the pass forced on (balance=0, min-gain=0) against the interpreter on
// the untransformed graph, over F(2x2) and F(4x4), outputs not divisible by the tile, pads 0 and 1,
// channel counts that are not a multiple of the block, bias, and a fused relu and residual add; and
// the transforms on their own against the direct conv in the interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "LowerTestUtil.h"
#include "TestTarget.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Winograd.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/OpenCL.h"

using namespace nnc;

namespace {

struct Case {
  int64_t n, c, h, w, k, pad;
  bool bias, residual;
};

std::string dense(const Extents &e, std::mt19937 &rng) {
  Tensor t = lowertest::randomTensor(DType::F32, e, rng, -1, 1);
  std::vector<std::string> vals;
  for (int64_t i = 0; i < t.numElements(); ++i)
    vals.push_back(fmt::format("{:.6f}", t.data<float>()[i]));
  std::string dims = fmt::format("{}", fmt::join(e, ","));
  return fmt::format("constant {{value = dense<f32[{0}]>[{1}]}} : f32[{0}]", dims,
                     fmt::join(vals, ", "));
}

/// relu(conv(x, w, b?) (+ x)).
std::string convGraph(const Case &k) {
  std::mt19937 rng(7);
  int64_t oh = k.h + 2 * k.pad - 2, ow = k.w + 2 * k.pad - 2;
  std::string out = fmt::format("f32[{},{},{},{}]", k.n, k.k, oh, ow);
  std::string sum = k.residual ? fmt::format("  %s = add(%y, %x) : {}\n", out) : "";
  return fmt::format(R"(
graph @conv(%x: f32[{0},{1},{2},{3}]) -> ({4}) {{
  %w = {5}
  %b = {6}
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %y = conv(%x, %w{7}) {{dilations = [1, 1], group = 1, pads = [{8}, {8}, {8}, {8}], strides = [1, 1]}} : {4}
{9}  %r = max(%{10}, %zero) : {4}
  return %r
}})",
                     k.n, k.c, k.h, k.w, out, dense({k.k, k.c, 3, 3}, rng), dense({k.k}, rng),
                     k.bias ? ", %b" : "", k.pad, sum, k.residual ? "s" : "y");
}

int countKind(const Graph &g, OpKind kind) {
  int n = 0;
  for (const Node *node : g.nodes())
    n += node->kind() == kind;
  return n;
}

/// The default pipeline with layout-nchwc at block 8 and winograd up to `tile`, forced on.
PassPipeline pipeline(int tile) {
  std::string p = PassPipeline::defaultPipeline().str();
  for (auto [pass, opts] :
       {std::pair<std::string, std::string>{"layout-nchwc", "{block=8,min-fill=0}"},
        {"winograd", fmt::format("{{tile={},balance=0,min-gain=0}}", tile)}}) {
    size_t at = p.find(pass);
    EXPECT_NE(at, std::string::npos) << p;
    p.insert(at + pass.size(), opts);
  }
  Expected<PassPipeline> pp = PassPipeline::parse(p);
  EXPECT_TRUE(pp) << pp.error().message();
  return *pp;
}

TEST(WinogradTest, ConvsMatchInterpreter) {
  const Case cases[] = {
      {1, 12, 7, 9, 12, 1, true, true},    // odd output (7x9), 12 channels on 8 lanes, residual
      {2, 16, 8, 8, 16, 0, true, false},   // pad 0 (6x6 output), batch 2
      {1, 16, 10, 6, 20, 1, false, false}, // no bias, K not a multiple of the block
      {1, 8, 14, 13, 8, 1, true, false},   // interior tiles inside a border on all sides
      // 64 tiles of F(4x4), 256 of F(2x2), 16 channels: the planes of V and M would be a
      // multiple of 4 KiB apart, so V and M take zero rows past the tiles.
      {1, 16, 32, 32, 16, 1, true, false},
      // 8 images of 7x7: F(4x4) has no interior tiles (one guarded nest over images and
      // tiles, whose first tile writes the zero rows); 32 and 128 tiles of 16 channels: 2 and
      // 8 KiB apart, padded.
      {8, 16, 7, 7, 16, 1, true, false},
  };
  for (const Case &k : cases)
    for (int tile : {2, 4}) {
      std::string text = convGraph(k);
      SCOPED_TRACE(fmt::format("tile {}: {}", tile, text.substr(0, 80)));
      Expected<std::unique_ptr<Graph>> ref = parseGraph(text);
      ASSERT_TRUE(ref) << ref.error().message();
      std::unique_ptr<Graph> opt = (*ref)->clone();
      PassContext ctx;
      ctx.cpu = testenv::testCpu();
      ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) {
        return evaluateNode(n, ops);
      };
      Error e = pipeline(tile).run(*opt, ctx);
      ASSERT_FALSE(e) << e.message();
      EXPECT_EQ(countKind(*opt, OpKind::WinogradInput), 1);
      EXPECT_EQ(countKind(*opt, OpKind::WinogradOutput), 1);
      EXPECT_EQ(countKind(*opt, OpKind::ConvNCHWc), 0);
      for (Node *node : opt->nodes())
        if (node->kind() == OpKind::WinogradInput) {
          int64_t tiles = k.n * ((k.h + 2 * k.pad - 2 + tile - 1) / tile) *
                          ((k.w + 2 * k.pad - 2 + tile - 1) / tile);
          int64_t rows = node->result()->shape()[1].value();
          if (k.h == 32 || k.n == 8)
            EXPECT_GT(rows, tiles) << "the planes of V stay crowded in L1 sets";
          else
            EXPECT_EQ(rows, tiles);
        }
      std::mt19937 rng(11);
      std::vector<Tensor> inputs{
          lowertest::randomTensor(DType::F32, {k.n, k.c, k.h, k.w}, rng, -2, 2)};
      Expected<std::vector<Tensor>> want = interpret(**ref, inputs);
      ASSERT_TRUE(want) << want.error().message();
      Expected<std::vector<Tensor>> viaInterp = interpret(*opt, inputs);
      ASSERT_TRUE(viaInterp) << viaInterp.error().message();
      lowertest::expectClose((*viaInterp)[0], (*want)[0], "interpreter", 1e-4);
      // The input transform's two loop orders: an L2 of 1 KiB makes every V outgrow it (tile
      // rows outermost where there are as many as channel blocks), one of 1 GiB none (channel
      // blocks outermost), whatever the host's caches.
      for (int64_t l2 : {int64_t(1) << 10, int64_t(1) << 30}) {
        CpuOptions cpu(testenv::testCpu());
        cpu.codegen.cpu.l2Bytes = l2;
        Expected<std::unique_ptr<Executable>> exe = Executable::compile(*opt, cpu);
        ASSERT_TRUE(exe) << exe.error().message();
        Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
        ASSERT_TRUE(got) << got.error().message();
        lowertest::expectClose((*got)[0], (*want)[0], fmt::format("cpu, L2 {}", l2), 1e-4);
      }
      // The OpenCL C printer takes the same kernels (three times, two of them with zero rows,
      // one without interior tiles: a PoCL build takes seconds).
      if ((&k != &cases[0] && &k != &cases[4] && &k != &cases[5]) || tile != 4)
        continue;
      Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
      if (!devices)
        continue;
      OpenCLOptions opts(testenv::testCpu(), testenv::testGpu());
      opts.cacheDir = "";
      opts.optimize = false;
      Expected<std::unique_ptr<OpenCLExecutable>> cl = OpenCLExecutable::compile(*opt, opts);
      ASSERT_TRUE(cl) << cl.error().message();
      Expected<std::vector<Tensor>> clGot = (*cl)->run(inputs);
      ASSERT_TRUE(clGot) << clGot.error().message();
      lowertest::expectClose((*clGot)[0], (*want)[0], "opencl", 1e-4);
    }
}

TEST(WinogradTest, WeightTransformOfADeltaFilter) {
  // The centre tap alone makes the conv the identity: U = G g G^T is then the outer product
  // of G's middle column, for both tile sizes.
  for (int64_t m : {2, 4}) {
    Tensor w = Tensor::zeros(DType::F32, {1, 1, 3, 3});
    w.data<float>()[4] = 1;
    const WinogradMatrices &t = winogradMatrices(m);
    Tensor u = winogradWeight(w, m, 2, 3);
    ASSERT_EQ(u.extents(), (Extents{t.alpha * t.alpha, 2, 3}));
    for (int64_t i = 0; i < t.alpha; ++i)
      for (int64_t j = 0; j < t.alpha; ++j) {
        int64_t e = i * t.alpha + j;
        EXPECT_NEAR(u.data<float>()[e * 6], t.g[i * 3 + 1] * t.g[j * 3 + 1], 1e-7);
        for (int64_t q = 1; q < 6; ++q) // padding channels stay zero
          EXPECT_EQ(u.data<float>()[e * 6 + q], 0.0f);
      }
  }
}

TEST(WinogradTest, TransformMatricesAreExact) {
  // A^T ((G g) . (B^T d)) is the correlation of d with g: sum_e AT[i][e] G[e][k] BT[e][t] is 1
  // where t = i + k and 0 elsewhere, for the matrices as written (fractions in double).
  for (int64_t m : {2, 4}) {
    const WinogradMatrices &t = winogradMatrices(m);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < 3; ++k)
        for (int64_t s = 0; s < t.alpha; ++s) {
          double sum = 0;
          for (int64_t e = 0; e < t.alpha; ++e)
            sum += t.at[i * t.alpha + e] * t.g[e * 3 + k] * t.bt[e * t.alpha + s];
          EXPECT_NEAR(sum, s == i + k ? 1.0 : 0.0, 1e-12) << "F(" << m << "): " << i << k << s;
        }
  }
}

TEST(WinogradTest, F4RoundingOfA256ChannelConv) {
  // A 256-channel conv with non-negative inputs (as after a ReLU): F(4x4)'s f32 result against
  // the interpreter's direct conv (summed in double), rms error over rms value. With Lavin &
  // Gray's points (0, +-1, +-2) it read 1.8e-6 here, with winogradMatrices' 8.4e-7 (8.6e-7 on
  // x86-64 without FMA), both with the GEMM's sums in one chain: the bound below fails a
  // change back to points that round worse, or back to one chain.
  const int64_t C = 256, K = 64, H = 16;
  std::mt19937 rng(5);
  std::string text = fmt::format(R"(
graph @conv(%x: f32[1,{0},{1},{1}]) -> (f32[1,{2},{1},{1}]) {{
  %w = {3}
  %y = conv(%x, %w) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,{2},{1},{1}]
  return %y
}})",
                                 C, H, K, dense({K, C, 3, 3}, rng));
  Expected<std::unique_ptr<Graph>> ref = parseGraph(text);
  ASSERT_TRUE(ref) << ref.error().message();
  std::unique_ptr<Graph> opt = (*ref)->clone();
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
  Error e = pipeline(4).run(*opt, ctx);
  ASSERT_FALSE(e) << e.message();
  ASSERT_EQ(countKind(*opt, OpKind::WinogradInput), 1);
  std::vector<Tensor> inputs{lowertest::randomTensor(DType::F32, {1, C, H, H}, rng, 0, 1)};
  Expected<std::vector<Tensor>> want = interpret(**ref, inputs);
  ASSERT_TRUE(want) << want.error().message();
  Expected<std::unique_ptr<Executable>> exe =
      Executable::compile(*opt, CpuOptions(testenv::testCpu()));
  ASSERT_TRUE(exe) << exe.error().message();
  Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
  ASSERT_TRUE(got) << got.error().message();
  double err = 0, val = 0;
  for (int64_t i = 0; i < (*want)[0].numElements(); ++i) {
    double w = (*want)[0].data<float>()[i], d = (*got)[0].data<float>()[i] - w;
    err += d * d;
    val += w * w;
  }
  // The GEMM's sums over C in runs (matmul's sum_run): 3.7e-7 with them (3.9e-7 on x86-64
  // without FMA), 8.4e-7 in one chain.
  EXPECT_LT(std::sqrt(err / val), 5.5e-7);
}

} // namespace
