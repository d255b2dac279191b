// nnc::Target as the entry points make it and hand it down: the CPU is always stated, an
// OpenCL target's device is chosen once, and code below refuses to guess a missing target.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "PinnedTarget.h"
#include "TestTarget.h"
#include "nnc/driver/Driver.h"
#include "nnc/ir/Parser.h"
#include "nnc/ir/Printer.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/OpenCL.h"

namespace nnc {
namespace {

/// A 3x3 conv of 16 to 32 channels (zero weights: only the layout matters here).
std::string convText() {
  return fmt::format(R"(
graph @c(%x: f32[1,16,10,10]) -> (f32[1,32,10,10]) {{
  %w = constant {{value = dense<f32[32,16,3,3]> hex "{}"}} : f32[32,16,3,3]
  %y = conv(%x, %w) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : f32[1,32,10,10]
  return %y
}}
)",
                     std::string(2 * 32 * 16 * 9 * 4, '0'));
}

TEST(Target, ParseCarriesTheGivenCpuAndNamesWhatWasAsked) {
  CpuTarget v3 = pinned::pinnedCpuTarget(CpuTarget::Level::V3);
  for (const char *name : {"interp", "cpu", "opencl", "opencl:0.1", "opencl:2"}) {
    Expected<Target> t = driver::parseTarget(name, v3);
    ASSERT_TRUE(t) << name << ": " << t.error().message();
    EXPECT_EQ(t->cpu, v3) << name;
    EXPECT_EQ(t->name(), std::string(name) == "opencl:2" ? "opencl:2.0" : name);
    // Parsing an explicit opencl target chooses no device: chooseDevice does, once.
    EXPECT_FALSE(t->gpu.has_value()) << name;
  }
  Expected<Target> bad = driver::parseTarget("tpu", v3);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("unknown target 'tpu'"), std::string::npos);
}

TEST(Target, ChooseDeviceRecordsTheDeviceOnce) {
  Expected<Target> t = driver::parseTarget("opencl", testenv::testCpu());
  ASSERT_TRUE(t);
  if (Error e = driver::chooseDevice(*t))
    GTEST_SKIP() << "no OpenCL device on this machine: " << e.message();
  ASSERT_TRUE(t->gpu.has_value());
  EXPECT_GE(t->gpu->platform, 0);
  EXPECT_GE(t->gpu->device, 0);
  // A chosen device stays: a second call does not choose again.
  GpuTarget marked = *t->gpu;
  marked.name = "kept";
  t->gpu = marked;
  ASSERT_FALSE(driver::chooseDevice(*t));
  EXPECT_EQ(t->gpu->name, "kept");
  // The graph passes follow the chosen device's type.
  EXPECT_EQ(driver::pipelineTarget(*t), t->gpu->type == "cpu" ? "opencl-cpu" : "opencl");
}

TEST(Target, APassThatReadsTheCpuFailsWithoutOne) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(convText());
  ASSERT_TRUE(g) << g.error().message();
  Expected<PassPipeline> p = PassPipeline::parse("layout-nchwc");
  ASSERT_TRUE(p);
  PassContext ctx; // a target-independent pipeline's context: no CPU
  Error e = p->run(**g, ctx);
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("pass layout-nchwc: needs the CPU target"), std::string::npos)
      << e.message();
  // Shape inference needs none.
  Expected<PassPipeline> shapes = PassPipeline::parse("shape-inference,dce");
  ASSERT_TRUE(shapes);
  EXPECT_FALSE(shapes->run(**g, ctx));
}

TEST(Target, LayoutBlocksFollowTheTargetCpu) {
  for (CpuTarget::Level level : {CpuTarget::Level::V3, CpuTarget::Level::V4}) {
    Expected<std::unique_ptr<Graph>> g = parseGraph(convText());
    ASSERT_TRUE(g) << g.error().message();
    PassContext ctx;
    ctx.cpu = pinned::pinnedCpuTarget(level);
    ASSERT_FALSE(PassPipeline::parse("layout-nchwc")->run(**g, ctx));
    std::string text = printGraph(**g);
    int64_t lanes = ctx.cpu->f32Lanes();
    EXPECT_NE(text.find(fmt::format("block = {}", lanes)), std::string::npos)
        << "lanes " << lanes << "\n"
        << text;
  }
}

TEST(Target, AnOpenCLExecutableNeedsADevice) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(convText());
  ASSERT_TRUE(g) << g.error().message();
  OpenCLOptions o(testenv::testCpu(), GpuTarget::generic());
  Expected<std::unique_ptr<OpenCLExecutable>> exe = OpenCLExecutable::compile(**g, o);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.error().message().find("names no OpenCL device"), std::string::npos)
      << exe.error().message();
}

TEST(Target, HostCoresIsProbedOnceAndPositive) {
  int n = CpuTarget::hostCores();
  EXPECT_GE(n, 1);
  EXPECT_EQ(CpuTarget::hostCores(), n);
}

} // namespace
} // namespace nnc
