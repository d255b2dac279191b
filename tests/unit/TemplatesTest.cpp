// The kernel-template registry (codegen/lower/Templates.cpp): its names and spaces, and the
// template lowering picks for a few graphs after the standard pipeline (AVX2 target): a matmul
// by a constant weight, a 3x3 conv with enough channels (Winograd), a depthwise conv, a first
// layer, a matmul with an epilogue, an attention block; per-target pipelines as data; and a
// GPU's fusion groups (the work-group GEMM with its epilogue) run by the kernel evaluator
// against the interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>

#include <fmt/ranges.h>

#include "nnc/codegen/Lowering.h"
#include "nnc/codegen/OpenCLCodegen.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/Parser.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Interpreter.h"

#include "PinnedTarget.h"
#include "TestTarget.h"

using namespace nnc;

namespace {

/// A constant of `e` with values in [-1, 1).
std::string dense(const Extents &e) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  int64_t n = 1;
  for (int64_t d : e)
    n *= d;
  std::vector<std::string> vals;
  for (int64_t i = 0; i < n; ++i)
    vals.push_back(fmt::format("{:.3f}", u(rng)));
  std::string dims = fmt::format("{}", fmt::join(e, ","));
  return fmt::format("constant {{value = dense<f32[{0}]>[{1}]}} : f32[{0}]", dims,
                     fmt::join(vals, ", "));
}

/// Lowers every unit of `text`'s graph after `pipeline` (the standard CPU pipeline when null)
/// for x86-64-v3 with pinned caches (or, with `opencl`, for a generic OpenCL GPU after the
/// OpenCL pipeline), with `lo`'s hooks.
void lowerAll(const std::string &text, const char *pipeline, bool opencl, tuning::LowerOptions lo,
              const CpuTarget &cpu = pinned::pinnedCpuTarget(CpuTarget::Level::V3)) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  if (!g)
    return;
  PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
  Expected<PassPipeline> p =
      pipeline ? PassPipeline::parse(pipeline) : PassPipeline::forTarget(opencl ? "opencl" : "cpu");
  EXPECT_TRUE(p) << p.error().message();
  Error e = p->run(**g, ctx);
  EXPECT_FALSE(e) << e.message();
  lo.cpu = cpu;
  if (opencl)
    lo.gpu = GpuTarget::generic();
  Expected<std::vector<LoweringUnit>> units = loweringUnits(**g);
  EXPECT_TRUE(units) << units.error().message();
  for (const LoweringUnit &u : *units) {
    Expected<std::vector<kir::Kernel>> ks = lowerUnit(u, "k", lo);
    EXPECT_TRUE(ks) << ks.error().message();
  }
}

/// "op template" for every template choice of `text`'s graph (lowerAll).
std::vector<std::string> choices(const std::string &text, const char *pipeline = nullptr,
                                 bool opencl = false) {
  std::vector<std::string> out;
  tuning::LowerOptions lo(testenv::testCpu());
  lo.onTemplate = [&](const tuning::TemplateChoice &c) {
    out.push_back(c.op + " " + (c.name.empty() ? "generic" : c.name));
  };
  lowerAll(text, pipeline, opencl, lo);
  return out;
}

bool has(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string convGraph(int64_t c, int64_t k, int64_t hw, int64_t kernel, int64_t stride,
                      int64_t group, int64_t n = 1) {
  int64_t pad = kernel / 2, out = (hw + 2 * pad - kernel) / stride + 1;
  return fmt::format(R"(
graph @conv(%x: f32[{8},{0},{2},{2}]) -> (f32[{8},{1},{3},{3}]) {{
  %w = {4}
  %y = conv(%x, %w) {{dilations = [1, 1], group = {5}, pads = [{6}, {6}, {6}, {6}], strides = [{7}, {7}]}} : f32[{8},{1},{3},{3}]
  return %y
}})",
                     c, k, hw, out, dense({k, c / group, kernel, kernel}), group, pad, stride, n);
}

/// A matmul with a bias and relu (an epilogue the GEMM finishes).
const char *const kMatMulBiasRelu = R"(
graph @g(%x: f32[8,64], %w: f32[64,48], %b: f32[48]) -> (f32[8,48]) {
  %zero = constant {value = dense<f32[]>[0]} : f32[]
  %m = matmul(%x, %w) : f32[8,48]
  %h = add(%m, %b) : f32[8,48]
  %r = max(%h, %zero) : f32[8,48]
  return %r
})";

} // namespace

TEST(Templates, RegistryNamesAndSpaces) {
  std::vector<TemplateInfo> cpu = kernelTemplates(tuning::CodeTarget::Cpu);
  ASSERT_FALSE(cpu.empty());
  std::set<std::string> names;
  for (const TemplateInfo &t : cpu) {
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate template " << t.name;
    EXPECT_EQ(t.group, t.ops.empty()) << t.name;
    EXPECT_FALSE(t.summary.empty()) << t.name;
    if (!t.space.empty())
      EXPECT_NE(tuning::findSpace(t.space), nullptr) << t.name << ": " << t.space;
  }
  // The tuner's spaces are the templates' spaces, each once.
  std::vector<std::string> spaces;
  for (const tuning::Space *s : tuning::allSpaces())
    spaces.push_back(s->kind);
  EXPECT_EQ(fmt::format("{}", fmt::join(spaces, ",")),
            "gemv_cpu,gemm_cpu,igemm_cpu,conv_nchwc_cpu,gemm_opencl,reduce_opencl");
  // OpenCL: its NDRange templates first, then the CPU's (Templates.cpp says why).
  std::vector<TemplateInfo> cl = kernelTemplates(tuning::CodeTarget::OpenCL);
  ASSERT_EQ(cl.size(), cpu.size() + 8);
  EXPECT_EQ(cl[0].name, "matmul.ndrange_tiles");
  EXPECT_EQ(cl[1].name, "epilogue.ndrange_gemm_finish");
  EXPECT_EQ(cl[2].name, "reduce.workgroup_tree");
  EXPECT_EQ(cl[3].name, "norm.workgroup_rows");
  EXPECT_EQ(cl[4].name, "reduce.per_output");
  EXPECT_EQ(cl[5].name, "arg.per_output");
  EXPECT_EQ(cl[6].name, "matmul_integer.loops");
  EXPECT_EQ(cl[7].name, "conv_integer.loops");
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_EQ(cl[i + 8].name, cpu[i].name);
}

TEST(Templates, MatMulOnOpenCL) {
  // f32 (and f16) matmuls take the NDRange GEMM, with or without an epilogue and whether
  // the OpenCL pipeline packed the weight; an integer matmul keeps the CPU's loop GEMM.
  std::string weight = fmt::format(R"(
graph @g(%x: f32[8,64]) -> (f32[8,48]) {{
  %w = {}
  %y = matmul(%x, %w) : f32[8,48]
  return %y
}})",
                                   dense({64, 48}));
  EXPECT_TRUE(has(choices(weight, nullptr, true), "matmul matmul.ndrange_tiles"));
  EXPECT_TRUE(has(choices(kMatMulBiasRelu, nullptr, true), "matmul epilogue.ndrange_gemm_finish"));
  auto inputs = [](const char *t) {
    return fmt::format(R"(
graph @g(%x: {0}[8,64], %w: {0}[64,48]) -> ({0}[8,48]) {{
  %y = matmul(%x, %w) : {0}[8,48]
  return %y
}})",
                       t);
  };
  EXPECT_TRUE(has(choices(inputs("f16"), nullptr, true), "matmul matmul.ndrange_tiles"));
  EXPECT_TRUE(has(choices(inputs("i32"), nullptr, true), "matmul matmul.gemm"));
}

TEST(Templates, MatMul) {
  // A constant weight is packed at compile time; a weight that is an input is packed (or
  // not) at run time by the plain GEMM template.
  EXPECT_TRUE(has(choices(fmt::format(R"(
graph @g(%x: f32[8,64]) -> (f32[8,48]) {{
  %w = {}
  %y = matmul(%x, %w) : f32[8,48]
  return %y
}})",
                                      dense({64, 48}))),
                  "matmul matmul.gemm_packed_b"));
  EXPECT_EQ(choices(R"(
graph @g(%x: f32[8,64], %w: f32[64,48]) -> (f32[8,48]) {
  %y = matmul(%x, %w) : f32[8,48]
  return %y
})"),
            std::vector<std::string>{"matmul matmul.gemm"});
  // Up to 4 rows (a batch dim over which the weight stays put counts: it folds into the rows)
  // by a packed weight stream it with the skinny GEMM, bare or with its epilogue; 5 rows, or a
  // weight that is an input, keep the GEMM.
  auto skinny = [](const char *x, const char *y, bool bias) {
    return fmt::format(R"(
graph @g(%x: f32[{0}]) -> (f32[{1}]) {{
  %w = {2}
  %b = {3}
  %y = matmul(%x, %w) : f32[{1}]
  %z = add(%y, %b) : f32[{1}]
  return %{4}
}})",
                       x, y, dense({64, 48}), dense({48}), bias ? "z" : "y");
  };
  EXPECT_TRUE(has(choices(skinny("1,64", "1,48", false)), "matmul matmul.gemv_packed_b"));
  EXPECT_TRUE(has(choices(skinny("2,2,64", "2,2,48", false)), "matmul matmul.gemv_packed_b"));
  EXPECT_TRUE(has(choices(skinny("4,64", "4,48", true)), "matmul epilogue.gemv_finish"));
  EXPECT_TRUE(has(choices(skinny("5,64", "5,48", false)), "matmul matmul.gemm_packed_b"));
  EXPECT_TRUE(has(choices(skinny("5,64", "5,48", true)), "matmul epilogue.gemm_finish"));
  EXPECT_EQ(choices(R"(
graph @g(%x: f32[1,64], %w: f32[64,48]) -> (f32[1,48]) {
  %y = matmul(%x, %w) : f32[1,48]
  return %y
})"),
            std::vector<std::string>{"matmul matmul.gemm"});
}

TEST(Templates, Conv) {
  // 3x3, stride 1, 64 channels on 28x28: Winograd (the pass rewrites it; the transforms and the
  // batched GEMM between them are templates).
  std::vector<std::string> w = choices(convGraph(64, 64, 28, 3, 1, 1));
  EXPECT_TRUE(has(w, "winograd_input winograd.input_transform"))
      << fmt::format("{}", fmt::join(w, "; "));
  EXPECT_TRUE(has(w, "winograd_output winograd.output_transform"))
      << fmt::format("{}", fmt::join(w, "; "));
  // Stride 2: the blocked direct conv.
  std::vector<std::string> s2 = choices(convGraph(64, 64, 28, 3, 2, 1));
  EXPECT_TRUE(has(s2, "conv_nchwc conv_nchwc.direct")) << fmt::format("{}", fmt::join(s2, "; "));
  // Depthwise.
  std::vector<std::string> dw = choices(convGraph(32, 32, 28, 3, 1, 32));
  EXPECT_TRUE(has(dw, "conv_nchwc conv_nchwc.depthwise")) << fmt::format("{}", fmt::join(dw, "; "));
}

/// The conv_nchwc_cpu configs lowering settles on for `text`'s graph after the standard CPU
/// pipeline (for `cpu`: x86-64-v3 with pinned caches by default), in order.
std::vector<tuning::Config>
convConfigs(const std::string &text,
            const CpuTarget &cpu = pinned::pinnedCpuTarget(CpuTarget::Level::V3)) {
  std::vector<tuning::Config> out;
  tuning::LowerOptions lo(cpu);
  lo.onConfig = [&](const tuning::Problem &p, const tuning::Config &c) {
    if (p.kind == "conv_nchwc_cpu")
      out.push_back(c);
  };
  lowerAll(text, nullptr, false, lo, cpu);
  return out;
}

/// The config of the one conv_nchwc_cpu problem of `text`'s graph (empty, and a failure, when
/// there is not exactly one).
tuning::Config
onlyConvConfig(const std::string &text,
               const CpuTarget &cpu = pinned::pinnedCpuTarget(CpuTarget::Level::V3)) {
  std::vector<tuning::Config> cs = convConfigs(text, cpu);
  EXPECT_EQ(cs.size(), 1u) << text;
  return cs.size() == 1 ? cs[0] : tuning::Config{};
}

TEST(Templates, ConvTilesOfOneBlock) {
  // 104 channels are 13 blocks of 8. A pointwise conv on a 7x7 map takes tiles of 2 blocks
  // and one edge tile of the 13th (on 440 channels, 55 blocks, single-block tiles 10 columns
  // wide ran 8% slower; 13% on a 14x14 map); a 3x3 group conv of one block per group has tiles of
  // one block as wide as the registers allow (its 7-column row in one tile: RegNet-Y-400MF's
  // group convs ran 11-25% faster than with 5-6 columns), and 8 blocks (64 channels) share
  // tiles.
  auto one = [](int64_t c, int64_t k, int64_t group) {
    return onlyConvConfig(convGraph(c, c, 7, k, 1, group));
  };
  tuning::Config pw = one(104, 1, 1);
  EXPECT_EQ(pw["m"], 2);
  EXPECT_GE(pw["r"], 4);
  tuning::Config grouped = one(104, 3, 13);
  EXPECT_EQ(grouped["m"], 1);
  EXPECT_EQ(grouped["r"], 7);
  EXPECT_GE(one(64, 1, 1)["m"], 2);
}

TEST(Templates, ConvTilesOfGroupsAndPasses) {
  // RegNet's groups of 24 channels are 3 blocks of 8: tiles of the whole group (3 blocks x 4
  // columns, 12 accumulators), not of one block (6 accumulators for 7 loads).
  tuning::Config g = onlyConvConfig(convGraph(72, 72, 14, 3, 2, 3));
  EXPECT_EQ(g["m"], 3);
  EXPECT_EQ(g["r"], 4);
  // A pointwise conv over 512 channels (64 input blocks): a tile's weights for the whole
  // reduction exceed L1 (32 KiB here), so it runs in passes whose weights fit half of it.
  tuning::Config pw = onlyConvConfig(convGraph(512, 64, 7, 1, 1, 1));
  EXPECT_GT(pw["kc"], 0);
  EXPECT_LE(pw["m"] * pw["kc"] * 8 * 8 * 4, 16 << 10);
  EXPECT_GE(pw["m"] * pw["kc"] * 8 * 8 * 4 * 2, 16 << 10) << "passes no smaller than needed";
  // 256 to 128 channels on 56x56 (ResNeXt-50's layer 1): the weights alone would allow passes
  // of 16 input blocks, but the blocks are 98 KiB apart (24.5 x 4 KiB), so their lines share 2
  // of L1's 64 sets: passes of 8, half those sets' 16 ways. On 14x14 (6 KiB apart, 32 sets),
  // 16.
  tuning::Config wide = onlyConvConfig(convGraph(256, 128, 56, 1, 1, 1));
  EXPECT_EQ(wide["m"], 4);
  EXPECT_EQ(wide["kc"], 8);
  tuning::Config narrow = onlyConvConfig(convGraph(256, 128, 14, 1, 1, 1));
  EXPECT_EQ(narrow["m"], 4);
  EXPECT_EQ(narrow["kc"], 16);
  // AVX-512's 16-lane blocks on 56x56 are 196 KiB apart, 49 x 4 KiB: one set for all of
  // them, whose ways L1's size gives (8 in 32 KiB, 12 in 48 KiB), so passes of at most 4 and
  // 6 blocks. The weights of the tile's 3 blocks (3 KiB per input block) allow 4 in half of
  // 32 KiB, but 8 in half of 48 KiB: there the sets decide.
  CpuTarget v4 = pinned::pinnedCpuTarget(CpuTarget::Level::V4);
  tuning::Config small = onlyConvConfig(convGraph(256, 128, 56, 1, 1, 1), v4);
  EXPECT_EQ(small["m"], 3);
  EXPECT_EQ(small["kc"], 4);
  v4.l1dBytes = 48 << 10;
  EXPECT_EQ(onlyConvConfig(convGraph(256, 128, 56, 1, 1, 1), v4)["kc"], 6);
  // 256 channels on 14x14 (a 196 KiB input, within L2): tiles of whole cache lines (an even
  // number of 32-byte columns), so 4 x 2, whose 7 tiles cover the 14 columns exactly, over
  // 3 x 4 (a short last tile) and 2 x 6; never 4 x 3, whose 96-byte tiles share input lines.
  tuning::Config t = onlyConvConfig(convGraph(256, 256, 14, 1, 1, 1));
  EXPECT_EQ(t["m"], 4);
  EXPECT_EQ(t["r"], 2);
  // Stride 2: a 1x1 conv reads half of each column's line and a 3x3 shares one with the next
  // column, so their tiles too take columns in pairs: 4 x 2, not the 4 x 3 that the model
  // prices the same (ResNet-50's strided convs ran 25% faster). A patch-like conv (kernel width
  // = stride) reads its columns' lines whole and takes any width.
  tuning::Config s2 = onlyConvConfig(convGraph(256, 256, 28, 1, 2, 1));
  EXPECT_EQ(s2["m"], 4);
  EXPECT_EQ(s2["r"], 2);
  tuning::Config s2k3 = onlyConvConfig(convGraph(256, 256, 28, 3, 2, 1));
  EXPECT_EQ(s2k3["m"], 4);
  EXPECT_EQ(s2k3["r"], 2);
  EXPECT_EQ(onlyConvConfig(convGraph(256, 256, 28, 2, 2, 1))["r"], 3);
  // 192 to 48 channels on 96x96 (EfficientNetV2-S): the 6.75 MiB input streams from L3 once per
  // group of tile blocks, so the tie between 2 x 6 and 3 x 4 goes to 3 blocks (2 groups).
  EXPECT_EQ(onlyConvConfig(convGraph(192, 48, 96, 1, 1, 1))["m"], 3);
  // A depthwise conv's tiles: 7 columns (8 tiles on 56), not 4 (4 accumulator chains left the
  // FMAs latency-bound).
  tuning::Config dw = onlyConvConfig(convGraph(32, 32, 56, 3, 1, 32));
  EXPECT_EQ(dw["m"], 1);
  EXPECT_EQ(dw["r"], 7);
  // 64 channels: the whole reduction in one pass.
  EXPECT_EQ(onlyConvConfig(convGraph(64, 64, 7, 1, 1, 1))["kc"], 0);
}

TEST(Templates, ConvTilesOfStreamingInputs) {
  // A pointwise conv whose batch input exceeds L3 (32 MiB here) reads it from memory: tiles of
  // all output blocks up to 4 with 8 accumulators, passes of one input block (ResNet-50's
  // 256-to-64 conv at batch 16, 51 MB of input, ran at twice the rate so).
  CpuTarget v4 = pinned::pinnedCpuTarget(CpuTarget::Level::V4);
  tuning::Config big = onlyConvConfig(convGraph(256, 64, 56, 1, 1, 1, 16), v4);
  EXPECT_EQ(big["m"], 4);
  EXPECT_EQ(big["r"], 2);
  EXPECT_EQ(big["kc"], 1);
  // One output block: 8 columns, 8 accumulators.
  tuning::Config one = onlyConvConfig(convGraph(256, 16, 56, 1, 1, 1, 16), v4);
  EXPECT_EQ(one["m"], 1);
  EXPECT_EQ(one["r"], 8);
  // AVX2's 8-lane blocks: 8 output blocks, tiles of 4.
  EXPECT_EQ(onlyConvConfig(convGraph(256, 64, 56, 1, 1, 1, 16))["m"], 4);
  // Batch 4 (13 MB, held by L3) and a strided 1x1 conv of the same input keep the cache
  // defaults (the strided one measured slower with these tiles).
  tuning::Config held = onlyConvConfig(convGraph(256, 64, 56, 1, 1, 1, 4), v4);
  EXPECT_FALSE(held["r"] == 2 && held["kc"] == 1) << held["m"] << " " << held["r"];
  tuning::Config s2 = onlyConvConfig(convGraph(256, 64, 56, 1, 2, 1, 16), v4);
  EXPECT_FALSE(s2["r"] == 2 && s2["kc"] == 1) << s2["m"] << " " << s2["r"];
}

TEST(Templates, PlainConv) {
  // Without the layout passes: few taps and long rows run the row-vectorized direct conv,
  // more taps im2col + GEMM, and NNC_CONV_ALGO=direct the direct loops.
  const char *none = "shape-inference";
  EXPECT_EQ(choices(convGraph(1, 6, 28, 5, 1, 1), none),
            std::vector<std::string>{"conv conv.rows_direct"});
  EXPECT_EQ(choices(convGraph(16, 16, 14, 3, 1, 1), none),
            std::vector<std::string>{"conv conv.im2col_gemm"});
  // 1-D: a depthwise conv of 31 taps (a Conformer's) runs the row conv too; 256 channels of 3
  // taps per output are GEMM work.
  auto conv1d = [](int64_t c, int64_t group, int64_t kernel) {
    int64_t pad = kernel / 2;
    return fmt::format(R"(
graph @conv(%x: f32[1,{0},100]) -> (f32[1,{0},100]) {{
  %w = {1}
  %y = conv(%x, %w) {{dilations = [1], group = {2}, pads = [{3}, {3}], strides = [1]}} : f32[1,{0},100]
  return %y
}})",
                       c, dense({c, c / group, kernel}), group, pad);
  };
  EXPECT_EQ(choices(conv1d(64, 64, 31), none), std::vector<std::string>{"conv conv.rows_direct"});
  EXPECT_EQ(choices(conv1d(256, 1, 3), none), std::vector<std::string>{"conv conv.im2col_gemm"});
  setenv("NNC_CONV_ALGO", "direct", 1);
  EXPECT_EQ(choices(convGraph(16, 16, 14, 3, 1, 1), none),
            std::vector<std::string>{"conv conv.direct"});
  unsetenv("NNC_CONV_ALGO");
}

TEST(Templates, Groups) {
  // A matmul with a bias and relu finishes its elementwise epilogue inside the GEMM.
  std::vector<std::string> ep = choices(kMatMulBiasRelu);
  EXPECT_EQ(ep, std::vector<std::string>{"matmul epilogue.gemm_finish"});
  // softmax(Q K^T) V is one fused attention group.
  std::vector<std::string> at = choices(R"(
graph @g(%q: f32[2,3,5,8], %kt: f32[2,3,8,7], %v: f32[2,3,7,4]) -> (f32[2,3,5,4]) {
  %s = matmul(%q, %kt) : f32[2,3,5,7]
  %p = softmax(%s) {axis = -1} : f32[2,3,5,7]
  %y = matmul(%p, %v) : f32[2,3,5,4]
  return %y
})");
  EXPECT_EQ(at, std::vector<std::string>{"matmul attention.fused_group"});
}

TEST(Templates, PipelinesPerTarget) {
  std::vector<std::string> targets;
  for (const TargetPipeline &t : targetPipelines()) {
    targets.push_back(t.target);
    EXPECT_TRUE(PassPipeline::parse(t.pipeline)) << t.target;
  }
  EXPECT_EQ(fmt::format("{}", fmt::join(targets, ",")), "cpu,opencl,opencl-cpu");
  // A GPU's convs stay plain (im2col + the NDRange GEMM) and its attention unfused (batched
  // NDRange GEMMs); an OpenCL CPU device takes the CPU's blocked layout and Winograd.
  std::string gpu = PassPipeline::forTarget("opencl")->str(),
              cpuDevice = PassPipeline::forTarget("opencl-cpu")->str();
  EXPECT_EQ(gpu.find("layout-nchwc"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("winograd"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("fuse-attention"), std::string::npos) << gpu;
  EXPECT_NE(cpuDevice.find("layout-nchwc"), std::string::npos) << cpuDevice;
  EXPECT_NE(cpuDevice.find("winograd"), std::string::npos) << cpuDevice;
  EXPECT_EQ(cpuDevice.find("pack-gemm-weights"), std::string::npos) << cpuDevice;
  EXPECT_EQ(PassPipeline::forTarget("cpu")->str(), PassPipeline::defaultPipeline().str());
  Expected<PassPipeline> bad = PassPipeline::forTarget("tpu");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("cpu, opencl"), std::string::npos) << bad.error().message();
}

namespace {

/// Runs `text`'s graph through the OpenCL GPU pipeline, lowers every unit for a generic GPU
/// and runs the kernels in the kernel evaluator (work-group nests, barriers and local memory
/// included); compares each output with the interpreter on the graph as written, and prints
/// the kernels as OpenCL C (a work-group nest must be the whole kernel).
void checkGpuUnits(const std::string &text, const std::string &what,
                   const GpuTarget &device = GpuTarget::generic()) {
  Expected<std::unique_ptr<Graph>> ref = parseGraph(text);
  ASSERT_TRUE(ref) << ref.error().message();
  std::unique_ptr<Graph> g = (*ref)->clone();
  PassContext ctx;
  ctx.cpu = pinned::pinnedCpuTarget(CpuTarget::Level::V3);
  ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
  Error e = PassPipeline::forTarget("opencl")->run(*g, ctx);
  ASSERT_FALSE(e) << e.message();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<Tensor> inputs;
  std::map<const Value *, Tensor> values;
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    Tensor t = Tensor::zeros(DType::F32, *staticExtents(g->inputs()[i]->shape()));
    for (int64_t k = 0; k < t.numElements(); ++k)
      t.data<float>()[k] = u(rng);
    inputs.push_back(t);
    values[g->inputs()[i]] = t;
  }
  tuning::LowerOptions lo(*ctx.cpu);
  lo.gpu = device;
  Expected<std::vector<LoweringUnit>> units = loweringUnits(*g);
  ASSERT_TRUE(units) << units.error().message();
  std::vector<kir::Kernel> all;
  for (const LoweringUnit &unit : *units) {
    Expected<std::vector<kir::Kernel>> ks = lowerUnit(unit, "k" + std::to_string(all.size()), lo);
    ASSERT_TRUE(ks) << what << ": " << ks.error().message();
    all.insert(all.end(), ks->begin(), ks->end());
    std::vector<Tensor> results;
    for (size_t r = 0; r < unit.node->numResults(); ++r)
      results.push_back(Tensor::zeros(unit.node->result(r)->dtype(),
                                      *staticExtents(unit.node->result(r)->shape())));
    std::map<int, std::vector<char>> scratch;
    for (const kir::Kernel &k : *ks) {
      std::vector<void *> bufs;
      for (const kir::BufferDecl &b : k.buffers) {
        if (b.role == kir::BufferRole::Operand) {
          const Value *v = unit.operands.at(b.index);
          if (!values.count(v) && v->producer() && v->producer()->kind() == OpKind::Constant)
            values[v] = v->producer()->getTensor("value");
          ASSERT_TRUE(values.count(v)) << what << ": no value for %" << v->name();
          bufs.push_back(const_cast<void *>(values[v].rawData()));
        } else if (b.role == kir::BufferRole::Result) {
          bufs.push_back(results.at(b.index).rawData());
        } else {
          std::vector<char> &v = scratch[b.index];
          v.resize(std::max(v.size(), static_cast<size_t>(b.numElements) * dtypeSize(b.dtype)));
          bufs.push_back(v.data());
        }
      }
      Error err = kir::evaluateKernel(k, bufs);
      ASSERT_FALSE(err) << what << ": " << k.name << ": " << err.message() << "\n"
                        << kir::printKernel(k);
    }
    for (size_t r = 0; r < results.size(); ++r)
      values[unit.node->result(r)] = results[r];
  }
  Expected<OpenCLProgram> cl = emitOpenCL(all, device);
  EXPECT_TRUE(cl) << what << ": " << cl.error().message();
  Expected<std::vector<Tensor>> want = interpret(**ref, inputs);
  ASSERT_TRUE(want) << want.error().message();
  for (size_t o = 0; o < want->size(); ++o) {
    const Tensor &w = (*want)[o], &got = values.at(g->outputs()[o]);
    ASSERT_EQ(w.extents(), got.extents()) << what;
    for (int64_t i = 0; i < w.numElements(); ++i) {
      double a = w.elementAsDouble(i), b = got.elementAsDouble(i);
      ASSERT_LE(std::fabs(a - b), 1e-4 + 1e-4 * std::fabs(a))
          << what << ": output " << o << " element " << i << " " << b << " want " << a;
    }
  }
}

} // namespace

TEST(Templates, GpuFusionGroupsMatchTheInterpreter) {
  // A conv with its bias, a residual and relu, and a conv with SiLU (x * sigmoid(x)). On a
  // GPU the work-group GEMM after im2col stores each output once, its epilogue in those
  // stores, and the scalar leaf (relu's 0) read inside the nest; 33 output columns give a
  // partial vector store at the edge. On an OpenCL CPU device (8-wide float vectors, no
  // local memory) a work-item's tile is one GemmTile accumulating onto the bias, and the
  // epilogue is a kernel of its own.
  std::string convs = fmt::format(R"(
graph @g(%x: f32[1,8,11,3], %r: f32[1,16,11,3]) -> (f32[1,16,11,3], f32[1,16,9,1]) {{
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %w = {}
  %b = {}
  %c = conv(%x, %w, %b) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,16,11,3]
  %a = add(%c, %r) : f32[1,16,11,3]
  %y = max(%a, %zero) : f32[1,16,11,3]
  %c2 = conv(%x, %w, %b) {{dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]}} : f32[1,16,9,1]
  %s = sigmoid(%c2) : f32[1,16,9,1]
  %z = mul(%c2, %s) : f32[1,16,9,1]
  return %y, %z
}})",
                                  dense({16, 8, 3, 3}), dense({16}));
  // A linear layer with GELU and a residual (a transformer's MLP).
  std::string mlp = fmt::format(R"(
graph @g(%x: f32[2,24,40], %r: f32[2,24,72]) -> (f32[2,24,72]) {{
  %w = {}
  %b = {}
  %sqrt2 = constant {{value = dense<f32[]>[1.4142135]}} : f32[]
  %one = constant {{value = dense<f32[]>[1]}} : f32[]
  %half = constant {{value = dense<f32[]>[0.5]}} : f32[]
  %m = matmul(%x, %w) : f32[2,24,72]
  %h = add(%m, %b) : f32[2,24,72]
  %d = div(%h, %sqrt2) : f32[2,24,72]
  %e = erf(%d) : f32[2,24,72]
  %p = add(%e, %one) : f32[2,24,72]
  %q = mul(%h, %p) : f32[2,24,72]
  %y = mul(%q, %half) : f32[2,24,72]
  %z = add(%y, %r) : f32[2,24,72]
  return %z
}})",
                                dense({40, 72}), dense({72}));
  GpuTarget cpuDevice = GpuTarget::generic();
  cpuDevice.type = "cpu";
  cpuDevice.preferredFloatVector = 8;
  // A grouped conv_transpose with stride 2 and output padding: its column GEMM is the NDRange
  // GEMM (one product per image and group), then col2im sums the taps.
  std::string convT = fmt::format(R"(
graph @g(%x: f32[2,6,5,7]) -> (f32[2,4,10,14]) {{
  %w = {}
  %b = {}
  %y = conv_transpose(%x, %w, %b) {{dilations = [1, 1], group = 2, output_padding = [1, 1], pads = [1, 1, 1, 1], strides = [2, 2]}} : f32[2,4,10,14]
  return %y
}})",
                                  dense({6, 2, 3, 3}), dense({4}));
  // A segmentation head's arg_max over channels (and arg_min keeping the last of equals): one
  // scan per output pixel.
  const char *arg = R"(
graph @g(%x: f32[2,5,6,7]) -> (i64[2,1,6,7], i64[2,6,7]) {
  %a = argmax(%x) {axis = 1, keepdims = 1, select_last_index = 0} : i64[2,1,6,7]
  %b = argmin(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[2,6,7]
  return %a, %b
})";
  EXPECT_EQ(choices(arg, nullptr, true),
            (std::vector<std::string>{"argmax arg.per_output", "argmin arg.per_output"}));
  for (const GpuTarget &device : {GpuTarget::generic(), cpuDevice}) {
    checkGpuUnits(convs, "conv epilogues on " + device.type, device);
    checkGpuUnits(mlp, "matmul epilogue on " + device.type, device);
    checkGpuUnits(convT, "conv_transpose on " + device.type, device);
    checkGpuUnits(arg, "arg_max/arg_min on " + device.type, device);
  }
}
