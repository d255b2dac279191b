// The bf16 convs of --precision bf16: the blocked weight's pairs of input lanes
// (packConvWeightBf16Pairs), a plain input's pairs of kernel columns (a stem), and whole conv
// graphs through the CPU pipeline, whose pack-gemm-weights turns their conv_nchwc into bf16
// ConvTiles (vdpbf16ps): bit for bit against the fp32 conv where bf16 holds the operands
// exactly and f32 the sums, within bf16's rounding of the fp32 result on random operands, and
// equal to the interpreter's definition of the rewritten graph.
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "LowerTestUtil.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/GemmPacking.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Float16.h"

using namespace nnc;

namespace {

using Ints = std::vector<int64_t>;

std::optional<CpuTarget> bf16Host() {
  CpuTarget cpu = CpuTarget::host();
  if (cpu.setPrecision("bf16") || cpu.vectorBits < 512)
    return std::nullopt;
  return cpu;
}

/// Multiples of 1/4 in [-4, 4]: exact in bf16, their products' sums exact in f32.
Tensor quarters(const Extents &e, std::mt19937 &rng) {
  Tensor t = Tensor::zeros(DType::F32, e);
  std::uniform_int_distribution<int> q(-16, 16);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = 0.25f * static_cast<float>(q(rng));
  return t;
}

struct ConvCase {
  Extents x, w;
  Ints strides, pads;
  bool bias;
  Ints dilations{1, 1};
};

/// relu(conv(x, w, b)), then (when `chained`) a 1x1 conv of 32 output channels of it, with
/// constant weights.
std::unique_ptr<Graph> convGraph(const ConvCase &c, const Tensor &w, const Tensor &b,
                                 const Tensor &w2, bool chained = true, bool reluOut = true) {
  auto g = std::make_unique<Graph>();
  Value *x = g->addInput("x", TensorType(DType::F32, shapeFromExtents(c.x)));
  std::vector<Value *> ops{x, lowertest::constantValue(*g, w)};
  if (c.bias)
    ops.push_back(lowertest::constantValue(*g, b));
  Expected<Node *> conv =
      g->createInferred(OpKind::Conv, ops,
                        {{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations},
                         {"group", int64_t{1}}},
                        "conv");
  EXPECT_TRUE(conv) << conv.error().message();
  Value *zero = lowertest::constantValue(*g, Tensor::zeros(DType::F32, {}));
  Expected<Node *> relu = g->createInferred(OpKind::Max, {(*conv)->result(), zero}, {}, "relu");
  EXPECT_TRUE(relu) << relu.error().message();
  Expected<Node *> conv2 = g->createInferred(
      OpKind::Conv, {(*relu)->result(), lowertest::constantValue(*g, w2)},
      {{"strides", Ints{1, 1}}, {"pads", Ints{0, 0, 0, 0}}, {"dilations", Ints{1, 1}},
       {"group", int64_t{1}}},
      "conv2");
  EXPECT_TRUE(conv2) << conv2.error().message();
  g->setOutputs({(*relu)->result(), (*conv2)->result()});
  if (!reluOut)
    g->setOutputs({(*conv2)->result()});
  if (!chained)
    g->setOutputs({(*relu)->result()});
  return g;
}

Error cpuPipeline(Graph &g, const CpuTarget &cpu) {
  PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) {
    return evaluateNode(n, ops);
  };
  // Without winograd, which takes 3x3 stride-1 convs off the conv_nchwc path (and keeps
  // its GEMMs f32).
  NNC_ASSIGN_OR_RETURN(PassPipeline cpuPipe, PassPipeline::forTarget("cpu"));
  std::string text = cpuPipe.str();
  size_t at = text.find("winograd,");
  EXPECT_NE(at, std::string::npos) << text;
  if (at != std::string::npos)
    text.erase(at, std::string("winograd,").size());
  NNC_ASSIGN_OR_RETURN(PassPipeline pipeline, PassPipeline::parse(text));
  return pipeline.run(g, ctx);
}

/// `g` compiled for `cpu` (no object cache) and run on `x`.
Expected<std::vector<Tensor>> compileAndRun(const Graph &g, const CpuTarget &cpu, int threads,
                                            const Tensor &x) {
  CpuOptions o(cpu);
  o.threads = threads;
  o.codegen.cacheDir = "";
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, Executable::compile(g, o));
  return exe->run({x});
}

/// The conv_nchwc nodes that run bf16 tiles, and all of them.
std::pair<int, int> bf16Convs(const Graph &g) {
  int n = 0, all = 0;
  for (const Node *node : g.nodes()) {
    all += node->kind() == OpKind::ConvNCHWc;
    n += node->kind() == OpKind::ConvNCHWc && node->getInt("bf16_pairs", 0) != 0;
  }
  return {n, all};
}

const ConvCase kCases[] = {
    // 3x3 same padding, a second input block; strided with bias; a 1x1 over 48 channels.
    {{1, 32, 9, 11}, {32, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, true},
    {{2, 16, 12, 12}, {48, 16, 3, 3}, {2, 2}, {1, 1, 1, 1}, true},
    {{1, 48, 7, 7}, {32, 48, 1, 1}, {1, 1}, {0, 0, 0, 0}, false},
    // Dilated (FCN-ResNet50's layer 3 and 4: dilation 2 and 4, padding as much).
    {{1, 32, 12, 12}, {32, 32, 3, 3}, {1, 1}, {2, 2, 2, 2}, true, {2, 2}},
    {{1, 32, 13, 13}, {16, 32, 3, 3}, {1, 1}, {4, 4, 4, 4}, false, {4, 4}},
    // Plain inputs of 3 channels (a stem), in pairs of kernel columns: 7x7 stride 2 with
    // the odd kernel's zero column (rows of 21 + 6 + 1 columns), an even 4x4 kernel without
    // padding, 3x3 with uneven padding.
    {{2, 3, 19, 21}, {32, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, true},
    {{1, 3, 9, 10}, {16, 3, 4, 4}, {1, 1}, {0, 0, 0, 0}, false},
    {{1, 3, 8, 13}, {16, 3, 3, 3}, {1, 2}, {1, 0, 2, 1}, true},
};

} // namespace

TEST(Bf16Conv, WeightPairsInterleaveInputLanesPerOutputLane) {
  // [1, 1, 1, 1, bi 4, b 3]: lane c of output j at (c/2)*6 + 2j + c%2, rounded to nearest even.
  Tensor w = Tensor::zeros(DType::F32, {1, 1, 1, 1, 4, 3});
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t j = 0; j < 3; ++j)
      w.data<float>()[c * 3 + j] = static_cast<float>(10 * c + j) + 1.0f / 1024;
  Tensor p = packConvWeightBf16Pairs(w);
  ASSERT_EQ(p.dtype(), DType::BF16);
  ASSERT_EQ(p.extents(), w.extents());
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(p.data<uint16_t>()[c / 2 * 6 + 2 * j + c % 2],
                floatToBf16(static_cast<float>(10 * c + j) + 1.0f / 1024))
          << "lane " << c << " of output " << j;
}

TEST(Bf16Conv, ConvsRunBf16TilesExactWhereBf16HoldsTheOperands) {
  std::optional<CpuTarget> cpu = bf16Host();
  if (!cpu)
    GTEST_SKIP() << "the host lacks AVX512-BF16: " << CpuTarget::host().str();
  std::mt19937 rng(7);
  for (const ConvCase &c : kCases) {
    Tensor w = quarters(c.w, rng), b = quarters({c.w[0]}, rng),
           w2 = quarters({32, c.w[0], 1, 1}, rng), x = quarters(c.x, rng);
    // One conv: its sums of products of quarters are exact in f32 (a second conv would read
    // them rounded to bf16).
    std::unique_ptr<Graph> g = convGraph(c, w, b, w2, /*chained=*/false);
    Expected<std::vector<Tensor>> want = interpret(*g, {x});
    ASSERT_TRUE(want) << want.error().message();
    std::unique_ptr<Graph> opt = g->clone();
    Error e = cpuPipeline(*opt, *cpu);
    ASSERT_FALSE(e) << e.message();
    std::string what = fmt::format("x {} w {}", extentsStr(c.x), extentsStr(c.w));
    EXPECT_EQ(bf16Convs(*opt), std::make_pair(1, 1)) << what << ": the conv runs bf16 tiles";
    // Named so in `nnc inspect --templates`.
    std::vector<std::string> names;
    tuning::LowerOptions lo(*cpu);
    lo.onTemplate = [&](const tuning::TemplateChoice &c) {
      if (c.op == "conv_nchwc")
        names.push_back(c.name);
    };
    Expected<std::vector<LoweringUnit>> units = loweringUnits(*opt);
    ASSERT_TRUE(units) << units.error().message();
    for (const LoweringUnit &u : *units) {
      Expected<std::vector<kir::Kernel>> ks = lowerUnit(u, "k", lo);
      ASSERT_TRUE(ks) << ks.error().message();
    }
    EXPECT_EQ(names, std::vector<std::string>{"conv_nchwc.bf16_direct"}) << what;
    for (int threads : {1, 2}) {
      Expected<std::vector<Tensor>> got = compileAndRun(*opt, *cpu, threads, x);
      ASSERT_TRUE(got) << got.error().message();
      for (size_t k = 0; k < want->size(); ++k) {
        const Tensor &a = (*got)[k], &r = (*want)[k];
        ASSERT_EQ(a.numElements(), r.numElements()) << what;
        ASSERT_EQ(std::memcmp(a.rawData(), r.rawData(), r.byteSize()), 0)
            << what << " output " << k << " on " << threads << " threads";
      }
    }
  }
}

TEST(Bf16Conv, ConvsWithinBf16RoundingOfFp32AndTheirInterpretedGraph) {
  std::optional<CpuTarget> cpu = bf16Host();
  if (!cpu)
    GTEST_SKIP() << "the host lacks AVX512-BF16: " << CpuTarget::host().str();
  std::mt19937 rng(11);
  for (const ConvCase &c : kCases) {
    for (bool reluOut : {true, false}) {
      Tensor w = lowertest::randomTensor(DType::F32, c.w, rng, -1, 1),
             b = lowertest::randomTensor(DType::F32, {c.w[0]}, rng, -1, 1),
             w2 = lowertest::randomTensor(DType::F32, {32, c.w[0], 1, 1}, rng, -1, 1),
             x = lowertest::randomTensor(DType::F32, c.x, rng, -1, 1);
      std::unique_ptr<Graph> g = convGraph(c, w, b, w2, /*chained=*/true, reluOut);
      Expected<std::vector<Tensor>> fp32 = interpret(*g, {x});
      ASSERT_TRUE(fp32) << fp32.error().message();
      Error e = cpuPipeline(*g, *cpu);
      ASSERT_FALSE(e) << e.message();
      ASSERT_EQ(bf16Convs(*g), std::make_pair(2, 2));
      // The second conv's input cast is the root of the first conv's group (its relu'd sums
      // stored once, as bf16) unless the relu's result is also a graph output. The cast before
      // the first conv reads a graph input: no group.
      int fused = 0;
      for (const Node *n : g->nodes())
        fused += n->kind() == OpKind::Cast && fusionGroupOf(*n) >= 0;
      EXPECT_EQ(fused, reluOut ? 0 : 1) << "x " << extentsStr(c.x);
      Expected<std::vector<Tensor>> defined = interpret(*g, {x});
      ASSERT_TRUE(defined) << defined.error().message();
      Expected<std::vector<Tensor>> got = compileAndRun(*g, *cpu, /*threads=*/0, x);
      ASSERT_TRUE(got) << got.error().message();
      std::string what = fmt::format("x {} w {}", extentsStr(c.x), extentsStr(c.w));
      for (size_t k = 0; k < fp32->size(); ++k) {
        const float *a = (*got)[k].data<float>(), *r = (*fp32)[k].data<float>(),
                    *d = (*defined)[k].data<float>();
        double range = 0, far = 0, fromDefined = 0;
        for (int64_t i = 0; i < (*fp32)[k].numElements(); ++i) {
          range = std::max(range, std::fabs(double(r[i])));
          far = std::max(far, std::fabs(double(a[i]) - r[i]));
          fromDefined = std::max(fromDefined, std::fabs(double(a[i]) - d[i]));
        }
        // bf16 keeps 8 significant bits: each operand within 2^-9 of itself.
        EXPECT_LT(far, 2e-2 * range) << what << " output " << k << ": from fp32";
        EXPECT_GT(far, 0.0) << what << " output " << k << ": bf16 rounding shows";
        // The same bf16 operands, summed in another order.
        EXPECT_LT(fromDefined, 1e-5 * range) << what << " output " << k << ": from its graph";
      }
    }
  }
}
