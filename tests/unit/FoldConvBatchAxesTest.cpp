// fold-conv-batch-axes: 3-D convs with a depth kernel of 1 (R(2+1)D's (1, 3, 3) convs, a
// (1, 7, 7) stem, a depthwise one) compiled through the default CPU pipeline, where they run
// as 2-D convs of their depth slices, against the interpreter on the graph as built; convs
// with a depth kernel above 1 and a 3x3 stride-1 spatial window (R3D-18's 3x3x3) gather their
// depth taps into channels first; other convs with a depth stride or kernel stay 3-D. (The
// temporal (3, 1, 1) convs' blocked im2col: LowerNN.Conv.) Every case has a depth dilation
// of 2.
#include <gtest/gtest.h>

#include <random>

#include "LowerTestUtil.h"
#include "TestTarget.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/runtime/OpenCL.h"

using namespace nnc;

namespace {

struct Case {
  Extents x, w;
  std::vector<int64_t> strides, pads;
  int64_t group;
  bool bias;
  bool folds; ///< The pass rewrites it.
};

/// relu(conv(x, w, b?)) with constant weights drawn from [-1, 1).
std::unique_ptr<Graph> convGraph(const Case &c, std::mt19937 &rng) {
  auto g = std::make_unique<Graph>();
  Value *x = g->addInput("x", TensorType(DType::F32, shapeFromExtents(c.x)));
  auto constant = [&](const Extents &e, const std::string &name) {
    Tensor t = lowertest::randomTensor(DType::F32, e, rng, -1, 1);
    return g->createNode(OpKind::Constant, {}, {t.type()}, {{"value", Attribute(t)}}, "", {name})
        ->result();
  };
  std::vector<Value *> ops{x, constant(c.w, "w")};
  if (c.bias)
    ops.push_back(constant({c.w[0]}, "b"));
  Expected<Node *> conv = g->createInferred(OpKind::Conv, ops,
                                            {{"strides", c.strides},
                                             {"pads", c.pads},
                                             {"dilations", std::vector<int64_t>{2, 1, 1}},
                                             {"group", c.group}},
                                            "conv", 1, {"y"});
  EXPECT_TRUE(conv) << conv.error().message();
  Tensor zero = Tensor::zeros(DType::F32, {});
  Value *z =
      g->createNode(OpKind::Constant, {}, {zero.type()}, {{"value", Attribute(zero)}}, "", {"zero"})
          ->result();
  Expected<Node *> relu =
      g->createInferred(OpKind::Max, {(*conv)->result(), z}, {}, "relu", 1, {"r"});
  EXPECT_TRUE(relu) << relu.error().message();
  g->setOutputs({(*relu)->result()});
  return g;
}

} // namespace

TEST(FoldConvBatchAxesTest, ConvsMatchInterpreter) {
  const Case cases[] = {
      // (1, 3, 3), padded, bias: 2-D convs of 3 frames.
      {{1, 8, 3, 10, 10}, {12, 8, 1, 3, 3}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}, 1, true, true},
      // Batch 2 x 2 frames, spatial stride 2, no bias.
      {{2, 16, 2, 12, 12}, {16, 16, 1, 3, 3}, {1, 2, 2}, {0, 1, 1, 0, 1, 1}, 1, false, true},
      // Depthwise, asymmetric pads.
      {{1, 8, 4, 9, 7}, {8, 1, 1, 3, 3}, {1, 1, 1}, {0, 0, 1, 0, 2, 1}, 8, true, true},
      // A (1, 7, 7) stride-2 stem on 3 channels.
      {{1, 3, 2, 20, 20}, {8, 3, 1, 7, 7}, {1, 2, 2}, {0, 3, 3, 0, 3, 3}, 1, true, true},
      // 3x3x3, padded: the taps gathered (tap 0 of the first and last frames in the pad).
      {{1, 8, 4, 10, 10}, {12, 8, 3, 3, 3}, {1, 1, 1}, {2, 1, 1, 2, 1, 1}, 1, true, true},
      // Batch 2, two taps, depth stride 2, depth padded at the front only, odd spatial pads.
      {{2, 6, 5, 9, 7}, {16, 6, 2, 3, 3}, {2, 1, 1}, {1, 0, 1, 0, 2, 1}, 1, false, true},
      // A depth stride with a depth kernel of 1, a spatial window other than 3x3 stride 1, a
      // pointwise one, or groups keep the conv 3-D.
      {{1, 4, 5, 6, 6}, {4, 4, 1, 3, 3}, {2, 1, 1}, {0, 1, 1, 0, 1, 1}, 1, true, false},
      {{1, 4, 5, 6, 6}, {4, 4, 3, 1, 1}, {1, 1, 1}, {1, 0, 0, 1, 0, 0}, 1, true, false},
      {{1, 4, 5, 6, 6}, {4, 4, 3, 3, 3}, {1, 2, 2}, {2, 1, 1, 2, 1, 1}, 1, true, false},
      {{1, 4, 5, 6, 6}, {4, 2, 3, 3, 3}, {1, 1, 1}, {2, 1, 1, 2, 1, 1}, 2, true, false},
  };
  std::mt19937 rng(5);
  for (const Case &c : cases) {
    std::unique_ptr<Graph> g = convGraph(c, rng);
    SCOPED_TRACE(fmt::format("x {} w {} strides [{}] pads [{}] group {}", extentsStr(c.x),
                             extentsStr(c.w), fmt::join(c.strides, ","), fmt::join(c.pads, ","),
                             c.group));
    // The target's pipeline leaves no 3-D conv where the pass applies; the graph it leaves
    // is what runs (Executable::compile runs no passes of its own).
    PassContext ctx;
    ctx.cpu = testenv::testCpu();
    ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) {
      return evaluateNode(n, ops);
    };
    auto optimized = [&](const char *target) -> std::unique_ptr<Graph> {
      std::unique_ptr<Graph> opt = g->clone();
      Expected<PassPipeline> pipeline = PassPipeline::forTarget(target);
      EXPECT_TRUE(pipeline) << pipeline.error().message();
      if (!pipeline)
        return nullptr;
      Error e = pipeline->run(*opt, ctx);
      EXPECT_FALSE(e) << e.message();
      int convs3d = 0;
      for (const Node *n : opt->nodes())
        convs3d += n->kind() == OpKind::Conv && n->result()->rank() == 5;
      EXPECT_EQ(convs3d, c.folds ? 0 : 1) << target;
      return e ? nullptr : std::move(opt);
    };
    std::unique_ptr<Graph> opt = optimized("cpu");
    ASSERT_TRUE(opt);
    std::vector<Tensor> inputs{lowertest::randomTensor(DType::F32, c.x, rng, -2, 2)};
    Expected<std::vector<Tensor>> want = interpret(*g, inputs);
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::unique_ptr<Executable>> exe =
        Executable::compile(*opt, CpuOptions(testenv::testCpu()));
    ASSERT_TRUE(exe) << exe.error().message();
    Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
    ASSERT_TRUE(got) << got.error().message();
    lowertest::expectClose((*got)[0], (*want)[0], "cpu", 1e-4);
    // The OpenCL CPU device's pipeline folds too (two cases: a PoCL build takes seconds).
    if (&c != &cases[0] && &c != &cases[4])
      continue;
    Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
    if (!devices || devices->empty())
      continue;
    std::unique_ptr<Graph> clOpt = optimized("opencl-cpu");
    ASSERT_TRUE(clOpt);
    OpenCLOptions opts(testenv::testCpu(), testenv::testGpu());
    opts.cacheDir = "";
    opts.optimize = false;
    Expected<std::unique_ptr<OpenCLExecutable>> cl = OpenCLExecutable::compile(*clOpt, opts);
    ASSERT_TRUE(cl) << cl.error().message();
    Expected<std::vector<Tensor>> clGot = (*cl)->run(inputs);
    ASSERT_TRUE(clGot) << clGot.error().message();
    lowertest::expectClose((*clGot)[0], (*want)[0], "opencl", 1e-4);
  }
}
