// What lowering records on its kernels for the launch plan (kir::BufferDecl::inPlaceOver: the
// operands a result may be written over; kir::Kernel::flops: the work of the kernel that runs a
// GEMM), and what the plan makes of it: results written over operands that die there, and each
// kernel's work in a profile.
#include <gtest/gtest.h>

#include "TestTarget.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/ir/Parser.h"
#include "nnc/runtime/Executable.h"

using namespace nnc;

namespace {

std::unique_ptr<Graph> parse(const std::string &text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g) << g.error().message();
  return g ? std::move(*g) : nullptr;
}

/// The kernels of each lowering unit of `g`, in order.
std::vector<std::vector<kir::Kernel>> lowerUnits(const Graph &g, const tuning::LowerOptions &o) {
  std::vector<std::vector<kir::Kernel>> out;
  Expected<std::vector<LoweringUnit>> units = loweringUnits(g);
  EXPECT_TRUE(units) << units.error().message();
  if (!units)
    return out;
  for (size_t u = 0; u < units->size(); ++u) {
    Expected<std::vector<kir::Kernel>> ks = lowerUnit((*units)[u], "u" + std::to_string(u), o);
    EXPECT_TRUE(ks) << ks.error().message();
    out.push_back(ks ? *ks : std::vector<kir::Kernel>{});
  }
  return out;
}

/// The parameters the one result of `k` is in place over, by name (in_place's text).
std::string inPlaceOf(const kir::Kernel &k) {
  std::string names;
  for (const kir::BufferDecl &b : k.buffers) {
    if (b.role != kir::BufferRole::Result)
      continue;
    for (int o : b.inPlaceOver)
      names += (names.empty() ? "" : ", ") + k.buffers[o].name;
  }
  return names;
}

CpuOptions testOptions() {
  CpuOptions o(testenv::testCpu());
  o.threads = 1;
  o.codegen.cacheDir = "";
  return o;
}

} // namespace

TEST(LaunchPlanFacts, ElementwiseResultsAreInPlaceOverOperandsReadAtTheirIndex) {
  // A broadcast operand is read at other indices than the one stored; an operand passed twice
  // is two parameters, both read there; a cast reads its operand where it stores too.
  auto g = parse(R"(
graph @g(%x: f32[4,8], %b: f32[8]) -> (f32[4,8], f32[4,8], i32[4,8], f32[8]) {
  %a = add(%x, %b) : f32[4,8]
  %m = mul(%x, %x) : f32[4,8]
  %c = cast(%x) {to = i32} : i32[4,8]
  %r = add(%b, %b) : f32[8]
  return %a, %m, %c, %r
}
)");
  ASSERT_TRUE(g);
  tuning::LowerOptions cpu(testenv::testCpu());
  std::vector<std::vector<kir::Kernel>> ks = lowerUnits(*g, cpu);
  ASSERT_EQ(ks.size(), 4u);
  for (const auto &unit : ks)
    ASSERT_EQ(unit.size(), 1u);
  EXPECT_EQ(inPlaceOf(ks[0][0]), "in0");
  EXPECT_EQ(inPlaceOf(ks[1][0]), "in0, in1");
  EXPECT_EQ(inPlaceOf(ks[2][0]), "in0");
  EXPECT_EQ(inPlaceOf(ks[3][0]), "in0, in1");
  for (const auto &unit : ks) {
    EXPECT_FALSE(kir::verifyKernel(unit[0])) << kir::printKernel(unit[0]);
    EXPECT_EQ(unit[0].flops, 0);
  }
}

TEST(LaunchPlanFacts, FusedGroupIsInPlaceOverItsFullSizeInputs) {
  // Inputs of the group: %x and %y (read at the stored index), %b (broadcast), %zero (one
  // element, read once before the loops). A matmul anchor's kernel states nothing.
  auto g = parse(R"(
graph @g(%x: f32[4,8], %b: f32[8], %y: f32[4,8], %w: f32[8,8]) -> (f32[4,8], f32[4,8]) {
  %zero = constant {value = dense<f32[]>[0]} : f32[]
  %a = add(%x, %b) {fusion_group = 1} : f32[4,8]
  %s = add(%a, %y) {fusion_group = 1} : f32[4,8]
  %r = max(%s, %zero) {fusion_group = 1} : f32[4,8]
  %mm = matmul(%x, %w) {fusion_group = 2} : f32[4,8]
  %o = add(%mm, %y) {fusion_group = 2} : f32[4,8]
  return %r, %o
}
)");
  ASSERT_TRUE(g);
  tuning::LowerOptions cpu(testenv::testCpu());
  std::vector<std::vector<kir::Kernel>> ks = lowerUnits(*g, cpu);
  ASSERT_EQ(ks.size(), 2u);
  ASSERT_EQ(ks[0].size(), 1u);
  EXPECT_EQ(inPlaceOf(ks[0][0]), "in0, in2") << kir::printKernel(ks[0][0]);
  for (const kir::Kernel &k : ks[1])
    EXPECT_EQ(inPlaceOf(k), "") << kir::printKernel(k);
}

TEST(LaunchPlanFacts, GemmWorkIsOnTheKernelThatRunsIt) {
  // A matmul is one kernel; conv as im2col + GEMM is a copy kernel, then the GEMM's; on an
  // OpenCL device the NDRange GEMM carries it.
  auto g = parse(R"(
graph @g(%x: f32[4,32], %w: f32[32,24], %img: f32[1,8,10,10], %k: f32[16,8,3,3]) -> (f32[4,24], f32[1,16,8,8]) {
  %mm = matmul(%x, %w) : f32[4,24]
  %c = conv(%img, %k) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,16,8,8]
  return %mm, %c
}
)");
  ASSERT_TRUE(g);
  tuning::LowerOptions cpu(testenv::testCpu()), gpu(testenv::testCpu());
  gpu.gpu = GpuTarget::generic();
  for (const tuning::LowerOptions *o : {&cpu, &gpu}) {
    SCOPED_TRACE(o->gpu ? "opencl" : "cpu");
    std::vector<std::vector<kir::Kernel>> ks = lowerUnits(*g, *o);
    ASSERT_EQ(ks.size(), 2u);
    ASSERT_EQ(ks[0].size(), 1u);
    EXPECT_EQ(ks[0][0].flops, 2.0 * 4 * 32 * 24);
    ASSERT_GE(ks[1].size(), 2u);
    double total = 0;
    for (const kir::Kernel &k : ks[1])
      total += k.flops;
    EXPECT_EQ(ks[1].back().flops, 2.0 * 16 * (8 * 3 * 3) * 64);
    EXPECT_EQ(total, ks[1].back().flops);
  }
}

TEST(LaunchPlanFacts, PlanWritesResultsOverDyingOperandsAndCarriesTheWork) {
  // %t dies at the group (its result takes %t's buffer) and %u at the cast (same bytes); %v is
  // read again after the add, so the add's result cannot take it. The matmul's work reaches
  // the profile of its kernel.
  auto g = parse(R"(
graph @g(%x: f32[16,32], %b: f32[32], %w: f32[32,32]) -> (f32[16,32], i32[16,32]) {
  %t = tanh(%x) : f32[16,32]
  %a = add(%t, %b) {fusion_group = 1} : f32[16,32]
  %r = exp(%a) {fusion_group = 1} : f32[16,32]
  %v = matmul(%r, %w) : f32[16,32]
  %s = add(%v, %x) : f32[16,32]
  %y = mul(%s, %v) : f32[16,32]
  %u = sigmoid(%x) : f32[16,32]
  %c = cast(%u) {to = i32} : i32[16,32]
  %d = add(%c, %c) : i32[16,32]
  return %y, %d
}
)");
  ASSERT_TRUE(g);
  Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, testOptions());
  ASSERT_TRUE(exe) << exe.error().message();
  std::map<std::string, std::string> reuses;
  for (const BufferPlan::Entry &e : (*exe)->plan().entries)
    reuses[e.name] = e.reuses;
  EXPECT_EQ(reuses["r"], "t");
  EXPECT_EQ(reuses["s"], "");
  EXPECT_EQ(reuses["v"], "");
  EXPECT_EQ(reuses["c"], "u");
  double gemm = 0, rest = 0;
  for (const KernelProfile &k : (*exe)->kernelProfile())
    (k.name.find("matmul") != std::string::npos ? gemm : rest) += k.flops;
  EXPECT_EQ(gemm, 2.0 * 16 * 32 * 32);
  EXPECT_EQ(rest, 0);
}
