// The kernel-template registry (codegen/lower/Templates.cpp): its names and spaces, and the
// template lowering picks for a few graphs after the standard pipeline (AVX2 target): a matmul
// by a constant weight, a 3x3 conv with enough channels (Winograd), a depthwise conv, a first
// layer, a matmul with an epilogue, an attention block; and per-target pipelines as data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>

#include <fmt/ranges.h>

#include "nnc/codegen/Lowering.h"
#include "nnc/ir/Parser.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Interpreter.h"

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

/// "op template" for every template choice of `text`'s graph after `pipeline` (the standard
/// CPU pipeline when null), lowered for x86-64-v3 (or, with `opencl`, for a generic OpenCL
/// GPU after the OpenCL pipeline).
std::vector<std::string> choices(const std::string &text, const char *pipeline = nullptr,
                                 bool opencl = false) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  if (!g)
    return {};
  CpuTarget cpu = CpuTarget::forLevel(CpuTarget::Level::V3);
  PassContext ctx;
  ctx.cpu = cpu;
  ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) { return evaluateNode(n, ops); };
  Expected<PassPipeline> p =
      pipeline ? PassPipeline::parse(pipeline) : PassPipeline::forTarget(opencl ? "opencl" : "cpu");
  EXPECT_TRUE(p) << p.error().message();
  Error e = p->run(**g, ctx);
  EXPECT_FALSE(e) << e.message();
  std::vector<std::string> out;
  tuning::LowerOptions lo;
  lo.cpu = cpu;
  if (opencl)
    lo.gpu = GpuTarget::generic();
  lo.onTemplate = [&](const tuning::TemplateChoice &c) {
    out.push_back(c.op + " " + (c.name.empty() ? "generic" : c.name));
  };
  Expected<std::vector<LoweringUnit>> units = loweringUnits(**g);
  EXPECT_TRUE(units) << units.error().message();
  for (const LoweringUnit &u : *units) {
    Expected<std::vector<kir::Kernel>> ks = lowerUnit(u, "k", lo);
    EXPECT_TRUE(ks) << ks.error().message();
  }
  return out;
}

bool has(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string convGraph(int64_t c, int64_t k, int64_t hw, int64_t kernel, int64_t stride,
                      int64_t group) {
  int64_t pad = kernel / 2, out = (hw + 2 * pad - kernel) / stride + 1;
  return fmt::format(R"(
graph @conv(%x: f32[1,{0},{2},{2}]) -> (f32[1,{1},{3},{3}]) {{
  %w = {4}
  %y = conv(%x, %w) {{dilations = [1, 1], group = {5}, pads = [{6}, {6}, {6}, {6}], strides = [{7}, {7}]}} : f32[1,{1},{3},{3}]
  return %y
}})",
                     c, k, hw, out, dense({k, c / group, kernel, kernel}), group, pad, stride);
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
            "gemm_cpu,conv_nchwc_cpu,gemm_opencl,reduce_opencl");
  // OpenCL: its NDRange templates first, then the CPU's (Templates.cpp says why).
  std::vector<TemplateInfo> cl = kernelTemplates(tuning::CodeTarget::OpenCL);
  ASSERT_EQ(cl.size(), cpu.size() + 3);
  EXPECT_EQ(cl[0].name, "matmul.ndrange_tiles");
  EXPECT_EQ(cl[1].name, "epilogue.ndrange_gemm_finish");
  EXPECT_EQ(cl[2].name, "reduce.workgroup_tree");
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_EQ(cl[i + 3].name, cpu[i].name);
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

TEST(Templates, PlainConv) {
  // Without the layout passes: few taps and long rows run the row-vectorized direct conv,
  // more taps im2col + GEMM, and NNC_CONV_ALGO=direct the generic direct loops.
  const char *none = "shape-inference";
  EXPECT_EQ(choices(convGraph(1, 6, 28, 5, 1, 1), none),
            std::vector<std::string>{"conv conv.rows_direct"});
  EXPECT_EQ(choices(convGraph(16, 16, 14, 3, 1, 1), none),
            std::vector<std::string>{"conv conv.im2col_gemm"});
  setenv("NNC_CONV_ALGO", "direct", 1);
  EXPECT_EQ(choices(convGraph(16, 16, 14, 3, 1, 1), none),
            std::vector<std::string>{"conv generic"});
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
