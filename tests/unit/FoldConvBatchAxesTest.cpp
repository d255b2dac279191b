// fold-conv-batch-axes: 3-D convs with a depth kernel of 1 (R(2+1)D's (1, 3, 3) convs, a
// (1, 7, 7) stem, a depthwise one) compiled through the default CPU pipeline, where they run
// as 2-D convs of their depth slices, against the interpreter on the graph as built; convs
// with a depth stride or kernel stay 3-D. (The temporal (3, 1, 1) convs' blocked im2col:
// LowerNN.Conv.)
#include <gtest/gtest.h>

#include <random>

#include "LowerTestUtil.h"
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
      // A depth stride or a depth kernel keeps the conv 3-D.
      {{1, 4, 5, 6, 6}, {4, 4, 1, 3, 3}, {2, 1, 1}, {0, 1, 1, 0, 1, 1}, 1, true, false},
      {{1, 4, 5, 6, 6}, {4, 4, 3, 1, 1}, {1, 1, 1}, {1, 0, 0, 1, 0, 0}, 1, true, false},
  };
  std::mt19937 rng(5);
  for (const Case &c : cases) {
    std::unique_ptr<Graph> g = convGraph(c, rng);
    SCOPED_TRACE(fmt::format("x {} w {} strides [{}] pads [{}] group {}", extentsStr(c.x),
                             extentsStr(c.w), fmt::join(c.strides, ","), fmt::join(c.pads, ","),
                             c.group));
    // The default pipeline leaves no 3-D conv where the pass applies.
    std::unique_ptr<Graph> opt = g->clone();
    PassContext ctx;
    ctx.evaluate = [](const Node &n, const std::vector<Tensor> &ops) {
      return evaluateNode(n, ops);
    };
    Error e = PassPipeline::defaultPipeline().run(*opt, ctx);
    ASSERT_FALSE(e) << e.message();
    int convs3d = 0;
    for (const Node *n : opt->nodes())
      convs3d += n->kind() == OpKind::Conv && n->result()->rank() == 5;
    EXPECT_EQ(convs3d, c.folds ? 0 : 1);
    std::vector<Tensor> inputs{lowertest::randomTensor(DType::F32, c.x, rng, -2, 2)};
    Expected<std::vector<Tensor>> want = interpret(*g, inputs);
    ASSERT_TRUE(want) << want.error().message();
    Expected<std::unique_ptr<Executable>> exe = Executable::compile(*g, CpuOptions{});
    ASSERT_TRUE(exe) << exe.error().message();
    Expected<std::vector<Tensor>> got = (*exe)->run(inputs);
    ASSERT_TRUE(got) << got.error().message();
    lowertest::expectClose((*got)[0], (*want)[0], "cpu", 1e-4);
    // The OpenCL CPU device's pipeline folds too (one case: a PoCL build takes seconds).
    if (&c != &cases[0])
      continue;
    Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
    if (!devices || devices->empty())
      continue;
    OpenCLOptions opts;
    opts.cacheDir = "";
    opts.optimize = false;
    Expected<std::unique_ptr<OpenCLExecutable>> cl = OpenCLExecutable::compile(*g, opts);
    ASSERT_TRUE(cl) << cl.error().message();
    Expected<std::vector<Tensor>> clGot = (*cl)->run(inputs);
    ASSERT_TRUE(clGot) << clGot.error().message();
    lowertest::expectClose((*clGot)[0], (*want)[0], "opencl", 1e-4);
  }
}
