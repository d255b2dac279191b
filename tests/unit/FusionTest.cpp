// Graph optimization end to end: the fused graph's CPU executable against the interpreter on
// the unfused graph (random inputs), and the kernel counts of the shared models pinned so that
// a fusion regression fails.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Printer.h"
#include "nnc/passes/PassManager.h"
#include "nnc/passes/Specialize.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/OpenCL.h"

#include "PinnedTarget.h"
#include "TestTarget.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

PassContext::Evaluator interp() {
  return [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
}

std::unique_ptr<Graph> parse(const std::string &text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  return g ? std::move(*g) : nullptr;
}

Tensor random(const Value &v, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  Tensor t = Tensor::zeros(v.dtype(), *staticExtents(v.shape()));
  for (int64_t i = 0; i < t.numElements(); ++i) {
    if (v.dtype() == DType::F32)
      t.data<float>()[i] = static_cast<float>(u(rng));
    else if (v.dtype() == DType::F64)
      t.data<double>()[i] = u(rng);
  }
  return t;
}

/// Runs the default pipeline on a copy of `text`'s graph, checks it made at least
/// `minGroups` fusion groups, and compares the fused graph's CPU executable with the
/// interpreter on the unfused graph (and, with `onOpenCL` and a device, the fused graph's
/// OpenCL executable too). Returns the CPU executable's kernel count; adds the number of
/// multi-member groups and of anchored ones to `stats` (if given). `prepare` (if given) may
/// change the random inputs (special values); a NaN must then be NaN on both sides and an
/// infinity equal, and `referenceNaNs` (if given) gets the interpreter's count of NaN results.
size_t checkFusedMatchesUnfused(const std::string &text, size_t minGroups,
                                std::pair<int, int> *stats = nullptr, bool onOpenCL = false,
                                const std::function<void(std::vector<Tensor> &)> &prepare = nullptr,
                                size_t *referenceNaNs = nullptr) {
  std::unique_ptr<Graph> ref = parse(text);
  if (!ref)
    return 0;
  std::unique_ptr<Graph> fused = ref->clone();
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = interp();
  Error e = PassPipeline::defaultPipeline().run(*fused, ctx);
  EXPECT_FALSE(e) << e.message();
  Expected<std::vector<FusionGroup>> groups = fusionGroups(*fused);
  EXPECT_TRUE(groups) << groups.error().message();
  size_t multi = 0;
  for (const FusionGroup &fg : *groups) {
    multi += fg.members.size() > 1;
    if (stats) {
      stats->first += fg.members.size() > 1;
      stats->second += fg.anchor != nullptr;
    }
  }
  EXPECT_GE(multi, minGroups) << "too few fusion groups";
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < ref->inputs().size(); ++i)
    inputs.push_back(random(*ref->inputs()[i], 7 + static_cast<unsigned>(i)));
  if (prepare)
    prepare(inputs);
  Expected<std::vector<Tensor>> want = interpret(*ref, inputs);
  EXPECT_TRUE(want) << want.error().message();
  if (want && referenceNaNs)
    for (const Tensor &w : *want)
      for (int64_t i = 0; i < w.numElements(); ++i)
        *referenceNaNs += std::isnan(w.elementAsDouble(i));
  Expected<std::unique_ptr<Executable>> exe =
      Executable::compile(*fused, CpuOptions(testenv::testCpu()));
  EXPECT_TRUE(exe) << exe.error().message();
  if (!want || !exe)
    return 0;
  auto compare = [&](Executable &e, const char *target) {
    Expected<std::vector<Tensor>> got = e.run(inputs);
    EXPECT_TRUE(got) << target << ": " << got.error().message();
    if (!got)
      return;
    for (size_t k = 0; k < want->size(); ++k) {
      const Tensor &w = (*want)[k], &g = (*got)[k];
      EXPECT_EQ(w.extents(), g.extents());
      for (int64_t i = 0; i < w.numElements() && i < g.numElements(); ++i) {
        double a = w.elementAsDouble(i), b = g.elementAsDouble(i);
        if (std::isnan(a) || std::isnan(b))
          EXPECT_EQ(std::isnan(a), std::isnan(b)) << target << " output " << k << " element " << i;
        else if (std::isinf(a) || std::isinf(b))
          EXPECT_EQ(a, b) << target << " output " << k << " element " << i;
        else
          EXPECT_LE(std::fabs(a - b), 1e-5 + 1e-3 * std::fabs(a))
              << target << " output " << k << " element " << i;
      }
    }
  };
  compare(**exe, "cpu");
  if (onOpenCL && listOpenCLDevices()) {
    OpenCLOptions cl(testenv::testCpu(), testenv::testGpu());
    cl.cacheDir = "";
    cl.optimize = false;
    Expected<std::unique_ptr<OpenCLExecutable>> clExe = OpenCLExecutable::compile(*fused, cl);
    EXPECT_TRUE(clExe) << clExe.error().message();
    if (clExe)
      compare(**clExe, "opencl");
  }
  return (*exe)->kernels().size();
}

/// The one CPU kernel of `text` after the standard pipeline (an empty kernel, with a test
/// failure, when it does not compile to exactly one).
kir::Kernel onlyKernel(const std::string &text) {
  std::unique_ptr<Graph> g = parse(text);
  if (!g)
    return {};
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = interp();
  Error e = PassPipeline::defaultPipeline().run(*g, ctx);
  EXPECT_FALSE(e) << e.message();
  Expected<std::unique_ptr<Executable>> exe =
      Executable::compile(*g, CpuOptions(testenv::testCpu()));
  EXPECT_TRUE(exe) << exe.error().message();
  if (!exe)
    return {};
  EXPECT_EQ((*exe)->kernels().size(), 1u);
  return (*exe)->kernels().size() == 1 ? (*exe)->kernels()[0] : kir::Kernel{};
}

TEST(FusionTest, BroadcastTreeWithSharedValues) {
  // One group with a DAG (%a used twice), broadcast leaves, a recomputed cheap add.
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%x: f32[3,5,17], %b: f32[17], %c: f32[5,1]) -> (f32[3,5,17], f32[3,5,17]) {
  %zero = constant {value = dense<f32[]>[0]} : f32[]
  %a = add(%x, %b) : f32[3,5,17]
  %m = mul(%a, %a) : f32[3,5,17]
  %s = sub(%m, %c) : f32[3,5,17]
  %r = max(%s, %zero) : f32[3,5,17]
  %e = exp(%a) : f32[3,5,17]
  %t = tanh(%e) : f32[3,5,17]
  return %r, %t
})",
                                            2);
  EXPECT_EQ(kernels, 2u);
}

TEST(FusionTest, ChannelShuffleIsTwoKernels) {
  // ShuffleNet's unit tail: from_nchwc, concat, reshape, transpose, reshape, two slices (one
  // through relu into to_nchwc with padding lanes). Views fuse into their consumers: one
  // kernel writes the shuffled tensor, one the relu'd blocked half; the other slice reads
  // the shuffled tensor alone (its operand has two users).
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%x1: f32[1,6,4,5], %b: f32[1,1,4,5,8]) -> (f32[1,6,4,5], f32[1,1,4,5,8]) {
  %f = from_nchwc(%b) {axis = 1, channels = 6} : f32[1,6,4,5]
  %c = concat(%x1, %f) {axis = 1} : f32[1,12,4,5]
  %s0 = constant {value = dense<i64[5]>[1,2,6,4,5]} : i64[5]
  %r = reshape(%c, %s0) : f32[1,2,6,4,5]
  %t = transpose(%r) {perm = [0,2,1,3,4]} : f32[1,6,2,4,5]
  %s1 = constant {value = dense<i64[4]>[1,12,4,5]} : i64[4]
  %r2 = reshape(%t, %s1) : f32[1,12,4,5]
  %st0 = constant {value = dense<i64[1]>[0]} : i64[1]
  %en0 = constant {value = dense<i64[1]>[6]} : i64[1]
  %st1 = constant {value = dense<i64[1]>[6]} : i64[1]
  %en1 = constant {value = dense<i64[1]>[12]} : i64[1]
  %ax = constant {value = dense<i64[1]>[1]} : i64[1]
  %a = slice(%r2, %st0, %en0, %ax) : f32[1,6,4,5]
  %bb = slice(%r2, %st1, %en1, %ax) : f32[1,6,4,5]
  %z = constant {value = dense<f32[]>[0]} : f32[]
  %rl = max(%bb, %z) : f32[1,6,4,5]
  %n = to_nchwc(%rl) {block = 8, axis = 1} : f32[1,1,4,5,8]
  return %a, %n
})",
                                            2, nullptr, /*onOpenCL=*/true);
  EXPECT_EQ(kernels, 3u);
}

TEST(FusionTest, ConcatIntoABlockedLayoutRunsOneNestPerSource) {
  // A skip connection into a blocked conv: a blocked result (from_nchwc) and plain inputs
  // concatenated along the channels, converted to blocks of 16. Each source covers whole
  // blocks, so the kernel runs one nest per source: no select picks among them, no clamp or
  // division is left, and the blocked source is copied lane to lane. Three sources (two
  // cuts), and a boundary inside a block (8 channels: no cut, the select stays), match the
  // unfused graph on the CPU and OpenCL.
  const std::string text = R"(
graph @g(%b: f32[1,2,6,40,16], %x: f32[1,16,6,40], %y: f32[1,16,6,40]) -> (f32[1,4,6,40,16]) {
  %f = from_nchwc(%b) {axis = 1, channels = 32} : f32[1,32,6,40]
  %c = concat(%x, %f, %y) {axis = 1} : f32[1,64,6,40]
  %n = to_nchwc(%c) {axis = 1, block = 16} : f32[1,4,6,40,16]
  return %n
})";
  EXPECT_EQ(checkFusedMatchesUnfused(text, 1, nullptr, /*onOpenCL=*/true), 1u);
  std::string printed = kir::printKernel(onlyKernel(text));
  EXPECT_EQ(printed.find("select("), std::string::npos) << printed;
  EXPECT_EQ(printed.find("min("), std::string::npos) << printed;
  EXPECT_EQ(printed.find(" / "), std::string::npos) << printed;
  EXPECT_NE(printed.find("s2 in"), std::string::npos) << "three nests: " << printed;
  const std::string unaligned = R"(
graph @g(%b: f32[1,2,6,40,16], %x: f32[1,8,6,40]) -> (f32[1,3,6,40,16]) {
  %f = from_nchwc(%b) {axis = 1, channels = 32} : f32[1,32,6,40]
  %c = concat(%x, %f) {axis = 1} : f32[1,40,6,40]
  %n = to_nchwc(%c) {axis = 1, block = 16} : f32[1,3,6,40,16]
  return %n
})";
  EXPECT_EQ(checkFusedMatchesUnfused(unaligned, 1, nullptr, /*onOpenCL=*/true), 1u);
}

TEST(FusionTest, BlockedChannelsAtAnOffsetRunInRunsOfOneBlock) {
  // A detector's decode: a blocked conv result (90 channels in blocks of 16) viewed as 3
  // anchors of 30 and moved channels-last, so element (a, y, x, c) reads channel 30 a + c:
  // the block, (30 a + c) / 16, changes inside the contiguous loop c. The nest (2^18
  // elements or more) runs in parts of one anchor and one block each, with no division left,
  // and matches the unfused graph.
  const std::string text = R"(
graph @g(%b: f32[1,6,64,48,16]) -> (f32[1,3,64,48,30]) {
  %f = from_nchwc(%b) {axis = 1, channels = 90} : f32[1,90,64,48]
  %s = constant {value = dense<i64[5]>[1,3,30,64,48]} : i64[5]
  %r = reshape(%f, %s) : f32[1,3,30,64,48]
  %t = transpose(%r) {perm = [0,1,3,4,2]} : f32[1,3,64,48,30]
  return %t
})";
  EXPECT_EQ(checkFusedMatchesUnfused(text, 1, nullptr, /*onOpenCL=*/true), 1u);
  std::string printed = kir::printKernel(onlyKernel(text));
  EXPECT_EQ(printed.find(" / 16"), std::string::npos) << printed;
  EXPECT_EQ(printed.find(" % 16"), std::string::npos) << printed;
}

TEST(FusionTest, TranscendentalAfterFromNchwcRunsAlongTheBlock) {
  // MaxViT's MBConv: a GELU on a blocked conv's result, written plain. The from_nchwc + erf
  // kernel reads the blocked input along its channel lanes (that loop innermost, vectorized),
  // not in the 8 x 8 permutation tiles, which left erf scalar.
  const std::string text = R"(
graph @g(%b: f32[1,2,6,40,16]) -> (f32[1,32,6,40]) {
  %f = from_nchwc(%b) {axis = 1, channels = 32} : f32[1,32,6,40]
  %sqrt2 = constant {value = dense<f32[]>[1.4142135]} : f32[]
  %one = constant {value = dense<f32[]>[1]} : f32[]
  %half = constant {value = dense<f32[]>[0.5]} : f32[]
  %d = div(%f, %sqrt2) : f32[1,32,6,40]
  %e = erf(%d) : f32[1,32,6,40]
  %p = add(%e, %one) : f32[1,32,6,40]
  %q = mul(%f, %p) : f32[1,32,6,40]
  %y = mul(%q, %half) : f32[1,32,6,40]
  return %y
})";
  EXPECT_EQ(checkFusedMatchesUnfused(text, 1, nullptr, /*onOpenCL=*/true), 1u);
  kir::Kernel k = onlyKernel(text);
  std::string printed = kir::printKernel(k);
  ASSERT_FALSE(k.schedule.steps.empty()) << printed;
  const kir::ScheduleStep &order = k.schedule.steps.front();
  ASSERT_EQ(order.kind, kir::ScheduleStep::Reorder) << printed;
  const std::string &inner = order.loops.back();
  bool vectorized = false, split = false;
  for (const kir::ScheduleStep &st : k.schedule.steps) {
    vectorized |= st.kind == kir::ScheduleStep::Vectorize && st.loop == inner;
    split |= st.kind == kir::ScheduleStep::Split;
  }
  EXPECT_TRUE(vectorized) << printed;
  EXPECT_FALSE(split) << printed;
  // The innermost loop walks the 16 lanes of a block: its variable is the load's last term.
  EXPECT_NE(printed.find("+ " + inner + "]"), std::string::npos) << printed;
}

TEST(FusionTest, ViewsWithElementwiseWork) {
  // A window partition with a residual add (reshape, transpose, reshape into an add), a
  // constant-index gather of a head (Swin's qkv[1]), a negative-step slice under a reshape,
  // and a root concat of transposed and elementwise parts.
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%x: f32[1,4,6,3], %res: f32[4,2,3,3], %qkv: f32[3,2,5,7], %y: f32[2,12], %u: f32[3,2], %v: f32[2,5]) -> (f32[4,2,3,3], f32[2,5,7], f32[3,8], f32[2,10]) {
  %s0 = constant {value = dense<i64[6]>[1,2,2,3,2,3]} : i64[6]
  %w = reshape(%x, %s0) : f32[1,2,2,3,2,3]
  %wt = transpose(%w) {perm = [0,1,3,2,4,5]} : f32[1,2,3,2,2,3]
  %s1 = constant {value = dense<i64[4]>[4,2,3,3]} : i64[4]
  %wr = reshape(%wt, %s1) : f32[4,2,3,3]
  %o0 = add(%wr, %res) : f32[4,2,3,3]
  %i1 = constant {value = dense<i64[]>[-2]} : i64[]
  %k = gather(%qkv, %i1) {axis = 0} : f32[2,5,7]
  %e = exp(%k) : f32[2,5,7]
  %st = constant {value = dense<i64[1]>[-1]} : i64[1]
  %en = constant {value = dense<i64[1]>[-100]} : i64[1]
  %ax = constant {value = dense<i64[1]>[1]} : i64[1]
  %sp = constant {value = dense<i64[1]>[-1]} : i64[1]
  %rev = slice(%y, %st, %en, %ax, %sp) : f32[2,12]
  %s2 = constant {value = dense<i64[2]>[3,8]} : i64[2]
  %rr = reshape(%rev, %s2) : f32[3,8]
  %two = constant {value = dense<f32[]>[2]} : f32[]
  %o2 = mul(%rr, %two) : f32[3,8]
  %ut = transpose(%u) {perm = [1,0]} : f32[2,3]
  %vn = neg(%v) : f32[2,5]
  %vt = tanh(%vn) : f32[2,5]
  %cat = concat(%ut, %vt, %ut) {axis = 1} : f32[2,11]
  %s3 = constant {value = dense<i64[1]>[0]} : i64[1]
  %e3 = constant {value = dense<i64[1]>[10]} : i64[1]
  %one = constant {value = dense<i64[1]>[1]} : i64[1]
  %o3 = slice(%cat, %s3, %e3, %one) : f32[2,10]
  return %o0, %e, %o2, %o3
})",
                                            4, nullptr, /*onOpenCL=*/true);
  EXPECT_EQ(kernels, 4u);
}

TEST(FusionTest, NestedConcatsWriteTheirPieces) {
  // A concat of concats (a recurrence's gradient: steps of gates) is one kernel of one loop
  // nest per innermost piece.
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%a: f32[2,3], %b: f32[2,5], %c: f32[3,8], %d: f32[8,2]) -> (f32[5,8]) {
  %t = tanh(%b) : f32[2,5]
  %ab = concat(%a, %t) {axis = 1} : f32[2,8]
  %dt = transpose(%d) {perm = [1, 0]} : f32[2,8]
  %e = exp(%c) : f32[3,8]
  %cc = concat(%ab, %e) {axis = 0} : f32[5,8]
  %r = concat(%cc) {axis = 0} : f32[5,8]
  return %r
})",
                                            1, nullptr, /*onOpenCL=*/true);
  EXPECT_EQ(kernels, 1u);
}

TEST(FusionTest, SqueezeExcitationScaleFoldsIntoTheProjectionWeight) {
  // x * sigmoid(mean(x)) into a 1x1 conv, x blocked (a conv's result): the gate multiplies
  // the (smaller) weight, not x. At both vector widths (blocks of 8 and 16 channels), whatever
  // the host's.
  const char *src = R"(
graph @se(%in: f32[1,16,8,8]) -> (f32[1,16,8,8]) {
  %w0 = constant {value = dense<f32[16,16,1,1]>[0.123,0.242,0.295,0.442,0.240,0.422,-0.471,-0.034,0.443,0.149,0.401,-0.387,-0.031,-0.253,0.044,0.074,-0.487,-0.283,-0.221,0.416,0.266,-0.340,0.297,-0.361,0.117,-0.373,-0.498,0.371,-0.291,-0.285,0.482,0.372,-0.211,0.461,0.039,0.178,-0.295,0.441,0.191,0.467,0.394,-0.201,-0.139,-0.334,-0.354,-0.435,-0.199,0.103,-0.497,0.178,-0.162,-0.190,0.319,-0.019,-0.184,-0.019,0.205,-0.443,0.475,-0.477,0.250,0.345,-0.482,0.288,-0.134,0.079,-0.491,-0.453,-0.319,0.455,-0.303,0.256,0.430,0.442,-0.156,-0.145,0.025,0.276,-0.392,0.248,0.297,0.360,-0.463,0.446,-0.409,-0.159,0.111,0.418,-0.160,0.424,0.045,-0.188,-0.183,-0.323,-0.422,-0.351,0.189,0.497,-0.338,-0.451,0.487,0.034,-0.094,-0.263,0.094,0.326,-0.044,-0.078,-0.444,0.416,-0.467,-0.006,0.338,-0.369,0.232,0.450,0.130,0.288,-0.393,-0.065,-0.351,0.345,-0.205,-0.047,0.499,0.352,0.476,-0.046,-0.012,0.230,-0.021,-0.209,-0.096,-0.353,-0.123,0.488,0.460,0.127,-0.001,-0.162,-0.411,-0.228,0.282,0.367,-0.139,0.286,0.275,0.195,0.164,0.260,-0.137,0.204,-0.219,-0.014,0.270,0.191,-0.206,0.446,0.150,0.081,-0.488,0.047,-0.249,0.172,-0.037,0.317,0.147,0.298,-0.152,0.144,0.238,0.328,-0.150,0.343,0.370,0.188,0.476,0.457,0.018,0.029,-0.334,0.337,0.437,-0.023,0.191,0.220,0.230,-0.328,0.280,0.081,0.166,-0.079,0.124,0.275,0.137,0.220,-0.472,-0.340,-0.059,0.150,-0.281,0.186,0.131,-0.458,-0.028,-0.274,-0.446,-0.366,-0.183,-0.318,-0.307,-0.464,-0.035,-0.120,0.112,0.090,-0.262,0.403,-0.499,-0.095,-0.221,-0.090,-0.385,0.331,-0.126,-0.464,0.114,-0.405,0.045,-0.161,0.081,0.458,0.319,-0.081,0.313,0.142,-0.131,-0.358,0.096,0.064,0.457,0.468,0.109,-0.149,0.393,-0.499,-0.392,0.066,0.115,-0.359,0.129,0.391,-0.124,-0.068,-0.274,-0.209]} : f32[16,16,1,1]
  %x = conv(%in, %w0) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,16,8,8]
  %m = reduce_mean(%x) {axes = [2, 3], keepdims = 1} : f32[1,16,1,1]
  %s = sigmoid(%m) : f32[1,16,1,1]
  %y = mul(%x, %s) : f32[1,16,8,8]
  %w = constant {value = dense<f32[16,16,1,1]>[0.209,0.274,0.068,0.124,-0.391,-0.129,0.359,-0.115,-0.066,0.392,0.499,-0.393,0.149,-0.109,-0.468,-0.457,-0.064,-0.096,0.358,0.131,-0.142,-0.313,0.081,-0.319,-0.458,-0.081,0.161,-0.045,0.405,-0.114,0.464,0.126,-0.331,0.385,0.090,0.221,0.095,0.499,-0.403,0.262,-0.090,-0.112,0.120,0.035,0.464,0.307,0.318,0.183,0.366,0.446,0.274,0.028,0.458,-0.131,-0.186,0.281,-0.150,0.059,0.340,0.472,-0.220,-0.137,-0.275,-0.124,0.079,-0.166,-0.081,-0.280,0.328,-0.230,-0.220,-0.191,0.023,-0.437,-0.337,0.334,-0.029,-0.018,-0.457,-0.476,-0.188,-0.370,-0.343,0.150,-0.328,-0.238,-0.144,0.152,-0.298,-0.147,-0.317,0.037,-0.172,0.249,-0.047,0.488,-0.081,-0.150,-0.446,0.206,-0.191,-0.270,0.014,0.219,-0.204,0.137,-0.260,-0.164,-0.195,-0.275,-0.286,0.139,-0.367,-0.282,0.228,0.411,0.162,0.001,-0.127,-0.460,-0.488,0.123,0.353,0.096,0.209,0.021,-0.230,0.012,0.046,-0.476,-0.352,-0.499,0.047,0.205,-0.345,0.351,0.065,0.393,-0.288,-0.130,-0.450,-0.232,0.369,-0.338,0.006,0.467,-0.416,0.444,0.078,0.044,-0.326,-0.094,0.263,0.094,-0.034,-0.487,0.451,0.338,-0.497,-0.189,0.351,0.422,0.323,0.183,0.188,-0.045,-0.424,0.160,-0.418,-0.111,0.159,0.409,-0.446,0.463,-0.360,-0.297,-0.248,0.392,-0.276,-0.025,0.145,0.156,-0.442,-0.430,-0.256,0.303,-0.455,0.319,0.453,0.491,-0.079,0.134,-0.288,0.482,-0.345,-0.250,0.477,-0.475,0.443,-0.205,0.019,0.184,0.019,-0.319,0.190,0.162,-0.178,0.497,-0.103,0.199,0.435,0.354,0.334,0.139,0.201,-0.394,-0.467,-0.191,-0.441,0.295,-0.178,-0.039,-0.461,0.211,-0.372,-0.482,0.285,0.291,-0.371,0.498,0.373,-0.117,0.361,-0.297,0.340,-0.266,-0.416,0.221,0.283,0.487,-0.074,-0.044,0.253,0.031,0.387,-0.401,-0.149,-0.443,0.034,0.471,-0.422,-0.240,-0.442,-0.295,-0.242,-0.123]} : f32[16,16,1,1]
  %c = conv(%y, %w) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,16,8,8]
  return %c
})";
  for (CpuTarget::Level level : {CpuTarget::Level::V3, CpuTarget::Level::V4}) {
    std::unique_ptr<Graph> g = parse(src);
    ASSERT_TRUE(g);
    PassContext ctx;
    ctx.evaluate = interp();
    ctx.cpu = pinned::pinnedCpuTarget(level);
    ASSERT_FALSE(PassPipeline::defaultPipeline().run(*g, ctx));
    bool scaledWeight = false;
    for (const Node *n : g->nodes())
      if (n->kind() == OpKind::ConvNCHWc)
        scaledWeight = n->operand(1)->producer()->kind() == OpKind::Mul &&
                       n->operand(0)->producer()->kind() != OpKind::Mul;
    EXPECT_TRUE(scaledWeight) << "block " << ctx.cpu->f32Lanes() << "\n" << printGraph(*g);
  }
  checkFusedMatchesUnfused(src, 0);
}

TEST(FusionTest, MatMulEpilogueWithGelu) {
  // k = 80 accumulates in f64 scratch, k = 8 in f32 scratch: both end in the epilogue store.
  for (int k : {8, 80}) {
    std::string text = fmt::format(R"(
graph @g(%x: f32[2,7,{0}], %w: f32[{0},33], %b: f32[33], %r: f32[2,7,33]) -> (f32[2,7,33]) {{
  %sqrt2 = constant {{value = dense<f32[]>[1.4142135]}} : f32[]
  %one = constant {{value = dense<f32[]>[1]}} : f32[]
  %half = constant {{value = dense<f32[]>[0.5]}} : f32[]
  %m = matmul(%x, %w) : f32[2,7,33]
  %h = add(%b, %m) : f32[2,7,33]
  %d = div(%h, %sqrt2) : f32[2,7,33]
  %e = erf(%d) : f32[2,7,33]
  %p = add(%e, %one) : f32[2,7,33]
  %q = mul(%h, %p) : f32[2,7,33]
  %y = mul(%q, %half) : f32[2,7,33]
  %z = add(%y, %r) : f32[2,7,33]
  return %z
}})",
                                   k);
    EXPECT_EQ(checkFusedMatchesUnfused(text, 1), 1u) << "k = " << k;
  }
}

TEST(FusionTest, MatMulEpilogueBroadcastsAndTypes) {
  // Leaves broadcast along a middle dim and the last dim; a bool intermediate and a cast. The
  // cast changes the dtype, so the GEMM accumulates into scratch and the epilogue runs as a
  // pass over it at the end of the GEMM's kernel (the planner's rule for an epilogue that no
  // template applied at its stores).
  const std::string text = R"(
graph @g(%x: f32[2,7,8], %w: f32[8,33], %t: f32[7,1], %z: f32[33]) -> (f64[2,7,33]) {
  %m = matmul(%x, %w) : f32[2,7,33]
  %c = less(%m, %t) : bool[2,7,33]
  %s = select(%c, %m, %z) : f32[2,7,33]
  %d = cast(%s) {to = f64} : f64[2,7,33]
  return %d
})";
  EXPECT_EQ(checkFusedMatchesUnfused(text, 1), 1u);
  std::string printed = kir::printKernel(onlyKernel(text));
  EXPECT_NE(printed.find("for fz_r"), std::string::npos) << printed;
  EXPECT_NE(printed.find("scratch"), std::string::npos) << printed;
}

TEST(FusionTest, MatMulEpilogueBroadcastOverBatchesKeepsColumnsContiguous) {
  // Swin's window attention scores plus a relative position bias: [4 windows, 3 heads, 7, 7]
  // + [1, 3, 7, 7]. The bias is read at (r % 21) * 7 + c for result row r and column c (a
  // vector load along c), not at the flat index modulo 147 (a gather per lane).
  const std::string text = R"(
graph @g(%q: f32[4,3,7,8], %k: f32[4,3,8,7], %b: f32[1,3,7,7]) -> (f32[4,3,7,7]) {
  %s = matmul(%q, %k) : f32[4,3,7,7]
  %y = add(%s, %b) : f32[4,3,7,7]
  return %y
})";
  EXPECT_EQ(checkFusedMatchesUnfused(text, 1), 1u);
  std::string printed = kir::printKernel(onlyKernel(text));
  EXPECT_NE(printed.find("% 21) * 7)"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("% 147)"), std::string::npos) << printed;
}

TEST(FusionTest, MatMulEpilogueInsideGemmBlocks) {
  // The epilogue runs per GEMM cache block: 200 rows (three uneven row blocks, edge tiles)
  // x 40 columns (an edge column tile); a batched B whose epilogue leaf is the matmul's own
  // operand; an f64 matmul (the scalar GEMM path finishes after its nest, in parallel rows).
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%x: f32[200,24], %w: f32[24,40], %b: f32[40], %s: f32[2,5,24], %v: f32[2,24,24],
         %dx: f64[70,32], %dw: f64[32,60], %db: f64[70,1]) -> (f32[200,40], f32[2,5,24], f64[70,60]) {
  %m1 = matmul(%x, %w) : f32[200,40]
  %h1 = add(%m1, %b) : f32[200,40]
  %y1 = tanh(%h1) : f32[200,40]
  %m2 = matmul(%s, %v) : f32[2,5,24]
  %y2 = add(%m2, %s) : f32[2,5,24]
  %m3 = matmul(%dx, %dw) : f64[70,60]
  %h3 = sub(%m3, %db) : f64[70,60]
  %y3 = mul(%h3, %m3) : f64[70,60]
  return %y1, %y2, %y3
})",
                                            3);
  EXPECT_EQ(kernels, 3u);
}

TEST(FusionTest, ConvBatchNormResidualRelu) {
  // batch_norm folds into the conv; the residual add and relu run after its accumulation.
  checkFusedMatchesUnfused(R"(
graph @g(%x: f32[2,3,6,6], %w: f32[4,3,3,3], %res: f32[2,4,6,6]) -> (f32[2,4,6,6]) {
  %zero = constant {value = dense<f32[]>[0]} : f32[]
  %scale = constant {value = dense<f32[4]>[1.5, 0.5, 2, 1]} : f32[4]
  %bias = constant {value = dense<f32[4]>[0.1, -0.2, 0.3, 0]} : f32[4]
  %mean = constant {value = dense<f32[4]>[0.5, 0, -0.5, 1]} : f32[4]
  %var = constant {value = dense<f32[4]>[1, 2, 0.5, 4]} : f32[4]
  %wc = constant {value = dense<f32[4,3,3,3]>[0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1, -0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1, 0.1, 0.2, -0.3, 0.4, 0.5, 0.6, -0.7, 0.8, 0.9, -1, 0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, 0.8, -0.9, 1, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, -1, 0.1, 0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, 0.9, 1, -0.1, 0.2, 0.3, 0.4, 0.5, 0.6, -0.7, 0.8, 0.9, 1, 0.1, -0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, -0.9, 1, 0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, 0.8, 0.9, -1, 0.1, 0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 1, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]} : f32[4,3,3,3]
  %c = conv(%x, %wc) {dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]} : f32[2,4,6,6]
  %n = batch_norm(%c, %scale, %bias, %mean, %var) {epsilon = 1e-05} : f32[2,4,6,6]
  %a = add(%n, %res) : f32[2,4,6,6]
  %r = max(%a, %zero) : f32[2,4,6,6]
  return %r
})",
                           1);
}

TEST(FusionTest, OneDRowConvsWithTheirEpilogues) {
  // 1-D convs that the row conv (conv.rows_direct) takes, each with a per-channel scale, a
  // residual add and a SiLU after it, in f32 and f16: a Conformer's depthwise conv (31 taps,
  // both sides padded), a state-space LM's causal one (4 taps, padded before only), a dilated
  // one, grouped channels, rows shorter and not a multiple of the 16-column vectors, and a
  // batch of two. Checked against the unfused graph on the interpreter, CPU and OpenCL.
  struct Case {
    int64_t n, c, group, len, kernel, dilation, padBegin, padEnd;
  };
  const Case cases[] = {
      {1, 32, 32, 100, 31, 1, 15, 15}, // depthwise, "same"
      {2, 16, 16, 37, 4, 1, 3, 0},     // causal
      {1, 8, 8, 50, 5, 3, 6, 6},       // dilated
      {1, 12, 3, 20, 3, 1, 1, 1},      // groups of 4 channels
  };
  for (const Case &c : cases)
    for (const char *t : {"f32", "f16"}) {
      int64_t out = c.len + c.padBegin + c.padEnd - c.dilation * (c.kernel - 1);
      std::string y = fmt::format("{},{},{}", c.n, c.c, out);
      std::string text = fmt::format(R"(
graph @g(%x: {0}[{1},{2},{3}], %w: {0}[{2},{4},{5}], %s: {0}[1,{2},1], %res: {0}[{6}]) -> ({0}[{6}]) {{
  %c = conv(%x, %w) {{dilations = [{7}], group = {8}, pads = [{9}, {10}], strides = [1]}} : {0}[{6}]
  %m = mul(%c, %s) : {0}[{6}]
  %a = add(%m, %res) : {0}[{6}]
  %g = sigmoid(%a) : {0}[{6}]
  %r = mul(%a, %g) : {0}[{6}]
  return %r
}})",
                                     t, c.n, c.c, c.len, c.c / c.group, c.kernel, y, c.dilation,
                                     c.group, c.padBegin, c.padEnd);
      SCOPED_TRACE(text);
      EXPECT_EQ(checkFusedMatchesUnfused(text, 1, nullptr, /*onOpenCL=*/true), 2u);
    }
}

TEST(FusionTest, ConvEpiloguesInEveryConvTemplate) {
  // A per-channel scale, a residual add and a clip after the kernel of each conv template: the
  // row conv, im2col + GEMM (the col matrix whole, or produced per cache block), the direct
  // loops, and conv_transpose's GEMM + col2im and direct loops, in f32 and f16 (accumulating
  // in f32 scratch). The template applies the epilogue where it writes final elements, so the
  // group is the anchor's kernels alone, on the CPU and on an OpenCL device.
  struct Case {
    const char *algo; // NNC_CONV_ALGO
    const char *x, *w, *y;
    int64_t channels, group;
    bool transpose;
    size_t kernels;
  };
  const Case cases[] = {
      {"", "2,3,20,20", "4,3,3,3", "2,4,20,20", 4, 1, false, 2},         // conv.rows_direct
      {"", "2,16,9,9", "24,8,3,3", "2,24,9,9", 24, 2, false, 2},         // conv.im2col_gemm
      {"blocked", "2,16,9,9", "24,8,3,3", "2,24,9,9", 24, 2, false, 2},  // padding, GEMM
      {"direct", "2,16,9,9", "24,8,3,3", "2,24,9,9", 24, 2, false, 1},   // conv.direct
      {"", "2,8,5,5", "8,2,3,3", "2,4,11,11", 4, 2, true, 2},     // conv_transpose.gemm_col2im
      {"direct", "2,8,5,5", "8,2,3,3", "2,4,11,11", 4, 2, true, 1}, // conv_transpose.direct
  };
  for (const Case &c : cases)
    for (const char *t : {"f32", "f16"}) {
      std::string conv =
          c.transpose ? fmt::format("conv_transpose(%x, %w) {{dilations = [1, 1], group = {}, "
                                    "output_padding = [0, 0], pads = [0, 0, 0, 0], strides = "
                                    "[2, 2]}}",
                                    c.group)
                      : fmt::format("conv(%x, %w) {{dilations = [1, 1], group = {}, pads = [1, "
                                    "1, 1, 1], strides = [1, 1]}}",
                                    c.group);
      std::string text = fmt::format(R"(
graph @g(%x: {0}[{1}], %w: {0}[{2}], %s: {0}[1,{4},1,1], %res: {0}[{3}]) -> ({0}[{3}]) {{
  %lo = constant {{value = dense<{0}[]>[-1]}} : {0}[]
  %hi = constant {{value = dense<{0}[]>[2]}} : {0}[]
  %c = {5} : {0}[{3}]
  %m = mul(%c, %s) : {0}[{3}]
  %a = add(%m, %res) : {0}[{3}]
  %u = max(%a, %lo) : {0}[{3}]
  %r = min(%u, %hi) : {0}[{3}]
  return %r
}})",
                                     t, c.x, c.w, c.y, c.channels, conv);
      SCOPED_TRACE(std::string(c.algo) + " " + t + text);
      if (*c.algo)
        setenv("NNC_CONV_ALGO", c.algo, 1);
      EXPECT_EQ(checkFusedMatchesUnfused(text, 1, nullptr, /*onOpenCL=*/true), c.kernels);
      unsetenv("NNC_CONV_ALGO");
    }
}

TEST(FusionTest, EinsumProductsAsMatMul) {
  // canonicalize rewrites these einsums as matmuls between transposes and reshapes (MaxViT's
  // attention products, a result transposed, rows and columns of several labels); the
  // interpreter runs the einsums themselves on the unfused graph.
  checkFusedMatchesUnfused(R"(
graph @g(%q: f32[2,3,9,4], %k: f32[2,3,7,4], %v: f32[2,3,7,5], %a: f64[3,4], %b: f64[4,7], %x: f32[2,5,3], %w: f32[3,4,6]) -> (f32[2,3,9,5], f64[7,3], f32[5,4,2,6]) {
  %s = einsum(%q, %k) {equation = "bhid,bhjd->bhij"} : f32[2,3,9,7]
  %e = exp(%s) : f32[2,3,9,7]
  %o = einsum(%e, %v) {equation = "bhij,bhjd->bhid"} : f32[2,3,9,5]
  %t = einsum(%a, %b) {equation = "ij,jk->ki"} : f64[7,3]
  %u = einsum(%x, %w) {equation = "nbc,cde->bdne"} : f32[5,4,2,6]
  %ro = neg(%o) : f32[2,3,9,5]
  %rt = neg(%t) : f64[7,3]
  %ru = neg(%u) : f32[5,4,2,6]
  return %ro, %rt, %ru
})",
                           0);
}

TEST(FusionTest, ConvTapsThatReadOnlyPaddingDropped) {
  // canonicalize slices away the taps that reach only padding (a 3x3 conv of dilation 24 on a
  // 14x14 map keeps its centre tap: a 1x1 conv; a 1-D conv loses its last tap and part of
  // its end pad; dilation 12 keeps all taps); the interpreter runs the convs as written.
  checkFusedMatchesUnfused(R"(
graph @g(%x: f32[1,8,14,14], %w: f32[4,8,3,3], %u: f32[1,2,5], %v: f32[3,2,3]) -> (f32[1,4,14,14], f32[1,4,14,14], f32[1,3,4]) {
  %far = conv(%x, %w) {dilations = [24, 24], group = 1, pads = [24, 24, 24, 24], strides = [1, 1]} : f32[1,4,14,14]
  %near = conv(%x, %w) {dilations = [12, 12], group = 1, pads = [12, 12, 12, 12], strides = [1, 1]} : f32[1,4,14,14]
  %right = conv(%u, %v) {dilations = [3], group = 1, pads = [1, 4], strides = [1]} : f32[1,3,4]
  return %far, %near, %right
})",
                           0);
}

TEST(FusionTest, AttentionInRowBlocks) {
  // Scale and a broadcast mask in the scores' epilogue, softmax, the product with V. S = 5 is
  // one partial block of query rows; S = 70 is two full blocks of 32 and a tail of 6.
  for (auto [d, t, s] :
       {std::tuple<int, int, int>{8, 7, 5}, std::tuple<int, int, int>{80, 70, 70}}) {
    std::string text = fmt::format(R"(
graph @g(%q: f32[2,3,{2},{0}], %kt: f32[2,3,{0},{1}], %v: f32[2,3,{1},4], %mask: f32[2,1,1,{1}]) -> (f32[2,3,{2},4]) {{
  %c = constant {{value = dense<f32[]>[0.35]}} : f32[]
  %s = matmul(%q, %kt) : f32[2,3,{2},{1}]
  %d = mul(%s, %c) : f32[2,3,{2},{1}]
  %m = add(%d, %mask) : f32[2,3,{2},{1}]
  %p = softmax(%m) {{axis = -1}} : f32[2,3,{2},{1}]
  %y = matmul(%p, %v) : f32[2,3,{2},4]
  return %y
}})",
                                   d, t, s);
    EXPECT_EQ(checkFusedMatchesUnfused(text, 1), 1u) << "D = " << d << ", S = " << s;
  }
}

TEST(FusionTest, AttentionWithoutEpilogue) {
  // softmax straight on the scores (the scale already in Q, as torchvision's ViT exports it):
  // max and exp read the scores' scratch, the division by the row sum finishes P·V. S = 70:
  // blocks of whole 6-row tiles on an AVX2 or AVX-512 CPU (two of 30, a tail of 10); f64
  // takes the scalar GEMM path, whose finish runs after the nest.
  for (const char *t : {"f32", "f64"}) {
    std::string text = fmt::format(R"(
graph @g(%q: {0}[2,3,70,16], %kt: {0}[2,3,16,70], %v: {0}[2,3,70,24]) -> ({0}[2,3,70,24]) {{
  %s = matmul(%q, %kt) : {0}[2,3,70,70]
  %p = softmax(%s) {{axis = -1}} : {0}[2,3,70,70]
  %y = matmul(%p, %v) : {0}[2,3,70,24]
  return %y
}})",
                                   t);
    EXPECT_EQ(checkFusedMatchesUnfused(text, 1), 1u) << t;
  }
}

TEST(FusionTest, SoftmaxRowsWithNaNAndInfinities) {
  // The row maxima of softmax, log_softmax and the attention group take vector lanes that
  // may ignore NaN: rows holding a NaN (first, in the vector body, in the scalar tail), a
  // +inf, only -inf, or -inf among finite values must still give what the interpreter's
  // NaN-propagating maximum gives (NaN rows where it has NaN, the same values elsewhere).
  const char *text = R"(
graph @g(%x: f32[6,37], %q: f32[1,2,40,16], %kt: f32[1,2,16,40], %v: f32[1,2,40,8])
    -> (f32[6,37], f32[6,37], f32[1,2,40,8]) {
  %sm = softmax(%x) {axis = -1} : f32[6,37]
  %ls = log_softmax(%x) {axis = -1} : f32[6,37]
  %s = matmul(%q, %kt) : f32[1,2,40,40]
  %p = softmax(%s) {axis = -1} : f32[1,2,40,40]
  %y = matmul(%p, %v) : f32[1,2,40,8]
  return %sm, %ls, %y
})";
  auto special = [](std::vector<Tensor> &inputs) {
    const float nan = std::numeric_limits<float>::quiet_NaN(),
                inf = std::numeric_limits<float>::infinity();
    float *x = inputs[0].data<float>();
    x[0 * 37 + 0] = nan;  // row 0: NaN first
    x[1 * 37 + 20] = nan; // row 1: NaN in the vector body
    x[2 * 37 + 36] = nan; // row 2: NaN in the tail
    x[3 * 37 + 5] = inf;  // row 3: +inf
    for (int j = 0; j < 37; ++j)
      x[4 * 37 + j] = -inf; // row 4: all -inf
    x[5 * 37 + 9] = -inf;   // row 5: -inf among finite values
    float *q = inputs[1].data<float>(), *kt = inputs[2].data<float>();
    q[3 * 16 + 2] = nan;             // head 0, query 3: a NaN score row
    kt[40 * 16 + 7 * 40 + 33] = inf; // head 1, key 33: infinite scores in every row
  };
  size_t nanCount = 0;
  checkFusedMatchesUnfused(text, 1, nullptr, false, special, &nanCount);
  // Rows 0-4 of both softmaxes and the two attention heads' affected rows are NaN.
  EXPECT_GE(nanCount, 2u * 5 * 37 + 8);
}

TEST(FusionTest, DecomposedLayerNorm) {
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%x: f32[3,4,32]) -> (f32[3,4,32]) {
  %two = constant {value = dense<f32[]>[2]} : f32[]
  %eps = constant {value = dense<f32[]>[1e-05]} : f32[]
  %gm = constant {value = dense<f32[]>[1.5]} : f32[]
  %bt = constant {value = dense<f32[]>[-0.25]} : f32[]
  %m = reduce_mean(%x) {axes = [2], keepdims = 1} : f32[3,4,1]
  %d = sub(%x, %m) : f32[3,4,32]
  %p = pow(%d, %two) : f32[3,4,32]
  %v = reduce_mean(%p) {axes = [2], keepdims = 1} : f32[3,4,1]
  %ve = add(%v, %eps) : f32[3,4,1]
  %s = sqrt(%ve) : f32[3,4,1]
  %n = div(%d, %s) : f32[3,4,32]
  %sc = mul(%n, %gm) : f32[3,4,32]
  %y = add(%sc, %bt) : f32[3,4,32]
  return %y
})",
                                            0);
  EXPECT_EQ(kernels, 1u);
}

TEST(FusionTest, DecomposedRMSNorm) {
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%x: f32[3,4,32]) -> (f32[3,4,32]) {
  %eps = constant {value = dense<f32[]>[1e-06]} : f32[]
  %gm = constant {value = dense<f32[]>[0.75]} : f32[]
  %p = mul(%x, %x) : f32[3,4,32]
  %ms = reduce_mean(%p) {axes = [2], keepdims = 1} : f32[3,4,1]
  %e = add(%ms, %eps) : f32[3,4,1]
  %s = sqrt(%e) : f32[3,4,1]
  %r = reciprocal(%s) : f32[3,4,1]
  %n = mul(%x, %r) : f32[3,4,32]
  %y = mul(%n, %gm) : f32[3,4,32]
  return %y
})",
                                            0);
  EXPECT_EQ(kernels, 1u);
}

TEST(FusionTest, DecomposedSoftmaxAndLogSoftmax) {
  size_t kernels = checkFusedMatchesUnfused(R"(
graph @g(%x: f32[3,7,9]) -> (f32[3,7,9], f32[3,7,9], f32[3,7,9]) {
  %m = reduce_max(%x) {axes = [1], keepdims = 1} : f32[3,1,9]
  %d = sub(%x, %m) : f32[3,7,9]
  %e = exp(%d) : f32[3,7,9]
  %s = reduce_sum(%e) {axes = [1], keepdims = 1} : f32[3,1,9]
  %y = div(%e, %s) : f32[3,7,9]
  %m2 = reduce_max(%x) {axes = [-1], keepdims = 1} : f32[3,7,1]
  %d2 = sub(%x, %m2) : f32[3,7,9]
  %e2 = exp(%d2) : f32[3,7,9]
  %s2 = reduce_sum(%e2) {axes = [2], keepdims = 1} : f32[3,7,1]
  %l2 = log(%s2) : f32[3,7,1]
  %z = sub(%d2, %l2) : f32[3,7,9]
  %e3 = exp(%x) : f32[3,7,9]
  %s3 = reduce_sum(%e3) {axes = [2], keepdims = 1} : f32[3,7,1]
  %w = div(%e3, %s3) : f32[3,7,9]
  return %y, %z, %w
})",
                                            0);
  EXPECT_EQ(kernels, 3u);
}

/// Random DAGs of broadcasting elementwise ops, reductions and matmuls (shared values,
/// outputs in the middle): whatever the passes group, the fused executable must match the
/// interpreter on the unfused graph.
TEST(FusionTest, RandomElementwiseGraphs) {
  std::mt19937 rng(2024);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const char *unary[] = {"neg", "tanh", "sigmoid", "abs", "exp"};
  const char *binary[] = {"add", "sub", "mul", "max", "min"};
  std::pair<int, int> stats{0, 0};
  for (int round = 0; round < 30; ++round) {
    struct V {
      std::string name;
      Extents e;
    };
    std::vector<V> pool{{"x0", {4, 5, 6}}, {"x1", {5, 6}}, {"x2", {4, 1, 6}}, {"x3", {6}}};
    auto type = [](const Extents &e) {
      std::string t = "f32[";
      for (size_t i = 0; i < e.size(); ++i)
        t += (i ? "," : "") + std::to_string(e[i]);
      return t + "]";
    };
    std::string body = "  %w = constant {value = dense<f32[6,6]>[" + [] {
      std::string v;
      for (int i = 0; i < 36; ++i)
        v += (i ? ", " : "") + std::to_string((i * 7 % 11 - 5) / 10.0);
      return v;
    }() + "]} : f32[6,6]\n";
    for (int i = 0; i < 10; ++i) {
      std::string name = "v" + std::to_string(i);
      size_t kind = pick(11);
      const V &a = pool[pick(pool.size())];
      if (kind < 3) {
        body += fmt::format("  %{} = {}(%{}) : {}\n", name, unary[pick(5)], a.name, type(a.e));
        pool.push_back({name, a.e});
      } else if (kind < 8) {
        const V &b = pool[pick(pool.size())];
        Extents e = a.e.size() >= b.e.size() ? a.e : b.e;
        for (size_t d = 0; d < std::min(a.e.size(), b.e.size()); ++d) {
          int64_t x = a.e[a.e.size() - 1 - d], y = b.e[b.e.size() - 1 - d];
          e[e.size() - 1 - d] = std::max(x, y);
        }
        body += fmt::format("  %{} = {}(%{}, %{}) : {}\n", name, binary[pick(5)], a.name, b.name,
                            type(e));
        pool.push_back({name, e});
      } else if (kind == 8 && a.e.size() == 3) {
        Extents e = a.e;
        e[1] = 1;
        body += fmt::format("  %{} = reduce_sum(%{}) {{axes = [1], keepdims = 1}} : {}\n", name,
                            a.name, type(e));
        pool.push_back({name, e});
      } else if (a.e.back() == 6) {
        body += fmt::format("  %{} = matmul(%{}, %w) : {}\n", name, a.name, type(a.e));
        pool.push_back({name, a.e});
      }
    }
    const V &last = pool.back(), &mid = pool[4 + pick(pool.size() - 4)];
    std::string text = fmt::format(
        "graph @r(%x0: f32[4,5,6], %x1: f32[5,6], %x2: f32[4,1,6], %x3: f32[6]) -> ({}, {}) "
        "{{\n{}  return %{}, %{}\n}}",
        type(last.e), type(mid.e), body, last.name, mid.name);
    SCOPED_TRACE(text);
    checkFusedMatchesUnfused(text, 0, &stats);
  }
  // The generator exercises both kinds of groups.
  EXPECT_GE(stats.first, 20) << "groups";
  EXPECT_GE(stats.second, 3) << "anchored groups";
}

// ---- The shared models -------------------------------------------------------------------------

struct ModelKernels {
  const char *name;
  size_t kernels;
};

/// The CPU executable of a shared model after the default pipeline, for `cpu` (compiled on any
/// host; not run).
std::unique_ptr<Executable>
compileModel(const std::string &name,
             const CpuTarget &cpu = pinned::withPinnedCaches(CpuTarget::host())) {
  fs::path path = fs::path(NNC_SHARED_DIR) / "models" / name / "model.onnx";
  ImportOptions io;
  io.evaluate = interp();
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(path.string(), io);
  EXPECT_TRUE(g) << g.error().message();
  if (!g)
    return nullptr;
  PassContext ctx;
  ctx.evaluate = interp();
  ctx.cpu = cpu;
  Error e = PassPipeline::defaultPipeline().run(**g, ctx);
  EXPECT_FALSE(e) << e.message();
  std::vector<Extents> shapes;
  for (const Value *v : (*g)->inputs())
    shapes.push_back(*staticExtents(v->shape()));
  Expected<std::unique_ptr<Graph>> s = specializeShapes(**g, shapes, interp());
  EXPECT_TRUE(s) << s.error().message();
  if (!s)
    return nullptr;
  CpuOptions opts(testenv::testCpu());
  opts.codegen.cpu = cpu;
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(**s, opts);
  EXPECT_TRUE(exe) << exe.error().message();
  return exe ? std::move(*exe) : nullptr;
}

bool haveModels() {
  return fs::exists(fs::path(NNC_SHARED_DIR) / "models" / "mlp_b1");
}

TEST(FusionTest, SharedModelKernelCounts) {
  if (!haveModels())
    GTEST_SKIP() << "shared models not found at " << NNC_SHARED_DIR << "/models";
  // Measured with the default pipeline (fusion on); a higher count is a fusion regression.
  // Reshapes and flattens launch nothing (the executable binds them to their operand).
  // ResNet-18: each conv is one direct conv_nchwc kernel (layout-nchwc) instead of im2col +
  // GEMM, with one from_nchwc before the flatten. LeNet: its second conv is direct (-1) plus
  // one from_nchwc (+1); the first (6 of 16 lanes) stays im2col + GEMM. The residual
  // add + relu of each ResNet block is its second conv's epilogue (8 kernels fewer): the
  // relu result, which the next conv reads from memory anyway, is not recomputed. ResNet-18's
  // ten 3x3 stride-1 convs of layer1-3 run as Winograd (56x56, 28x28: F(4x4); 14x14: F(2x2);
  // 7x7 stays direct): winograd_input, the batched GEMM and winograd_output (with the
  // epilogue), +2 each. The counts are the same for AVX-512 (16-channel blocks) and AVX2
  // (8-channel blocks) but for LeNet: its first conv's 6 channels fill most of one 8-lane block,
  // so it runs direct in the blocked layout as well (-1: no im2col + GEMM pair); and
  // ResNet-18's three 3x3 convs at 7x7 run as Winograd too (+2 each: Winograd's balance is
  // the target's lanes, 8).
  const std::vector<ModelKernels> avx512 = {{"mlp_b1", 3},       {"mlp_b32", 3},
                                            {"lenet_b1", 9},     {"lenet_b32", 9},
                                            {"resnet18_b1", 44}, {"bert_layer_b1", 13}};
  const std::vector<ModelKernels> avx2 = {{"mlp_b1", 3},       {"mlp_b32", 3},
                                          {"lenet_b1", 8},     {"lenet_b32", 8},
                                          {"resnet18_b1", 50}, {"bert_layer_b1", 13}};
  for (const auto &[level, expected] :
       {std::pair{CpuTarget::Level::V4, avx512}, std::pair{CpuTarget::Level::V3, avx2}}) {
    CpuTarget cpu = pinned::pinnedCpuTarget(level);
    for (const ModelKernels &m : expected) {
      std::unique_ptr<Executable> exe = compileModel(m.name, cpu);
      ASSERT_TRUE(exe) << m.name;
      EXPECT_EQ(exe->kernels().size(), m.kernels) << m.name << " for " << cpu.levelName();
    }
  }
}

TEST(FusionTest, BertLayerNormAndGeluKernels) {
  if (!haveModels())
    GTEST_SKIP() << "shared models not found at " << NNC_SHARED_DIR << "/models";
  std::unique_ptr<Executable> exe = compileModel("bert_layer_b1");
  ASSERT_TRUE(exe);
  int layerNorms = 0, reductions = 0, erfKernels = 0;
  for (const kir::Kernel &k : exe->kernels()) {
    std::string text = kir::printKernel(k);
    layerNorms += k.name.find("layer_norm") != std::string::npos;
    reductions += k.name.find("reduce") != std::string::npos;
    if (text.find("erf(") != std::string::npos) {
      ++erfKernels;
      // GELU runs in the epilogue of the intermediate matmul: the kernel that computes erf
      // is that matmul's.
      EXPECT_NE(k.name.find("matmul_fused"), std::string::npos) << k.name;
    }
  }
  // Each of the two LayerNorms is one kernel; no reduce_mean is left.
  EXPECT_EQ(layerNorms, 2);
  EXPECT_EQ(reductions, 0);
  EXPECT_EQ(erfKernels, 1);
}

} // namespace
