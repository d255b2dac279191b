// Lowering of grid_sample and roi_align checked against the interpreter with the kernel
// evaluator (unscheduled and scheduled) on random inputs, and the errors of the vision ops:
// bad shapes named at the node, an out-of-range batch index stopped on every path.
#include "LowerTestUtil.h"

#include <fmt/format.h>

#include "TestTarget.h"
#include "nnc/codegen/Lowering.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

/// One node over graph inputs `inputs`; its kernels' results against the interpreter's, with
/// an absolute tolerance for sums whose terms cancel (cubic weights are negative).
void checkVision(OpKind kind, const std::vector<Tensor> &inputs, AttrMap attrs,
                 const std::string &what) {
  Graph g;
  std::vector<Value *> ops;
  for (size_t i = 0; i < inputs.size(); ++i)
    ops.push_back(g.addInput("x" + std::to_string(i), inputs[i].type()));
  Expected<Node *> n = g.createInferred(kind, ops, std::move(attrs), "n");
  ASSERT_TRUE(n) << what << ": " << n.error().message();
  g.setOutputs((*n)->results());
  Expected<std::vector<Tensor>> want = evaluateNode(**n, inputs);
  ASSERT_TRUE(want) << what << ": interpreter: " << want.error().message();
  for (bool scheduled : {false, true}) {
    Expected<std::vector<Tensor>> got = runLowered(**n, inputs, scheduled);
    ASSERT_TRUE(got) << what << ": " << got.error().message();
    expectClose((*got)[0], (*want)[0], what + (scheduled ? " (scheduled)" : ""), 1e-5);
  }
}

} // namespace

TEST(LowerVision, GridSampleEveryModeAndPadding) {
  std::mt19937 rng(48);
  struct Case {
    Extents x, grid;
  };
  // 2-D and 3-D (volumetric), one 1-D; grids reach past [-1, 1] so that every padding rule
  // is taken, and an axis of one exercises align_corners' zero-width range.
  const Case cases[] = {{{2, 3, 5, 7}, {2, 4, 6, 2}},
                        {{1, 2, 1, 4}, {1, 3, 3, 2}},
                        {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 3}},
                        {{2, 2, 6}, {2, 5, 1}}};
  for (const Case &c : cases)
    for (const char *mode : {"linear", "nearest", "cubic"})
      for (const char *pad : {"zeros", "border", "reflection"})
        for (int64_t align : {0, 1})
          for (DType t : {DType::F32, DType::F64}) {
            Tensor x = randomTensor(t, c.x, rng);
            Tensor grid = randomTensor(t, c.grid, rng, -1.6, 1.6);
            checkVision(OpKind::GridSample, {x, grid},
                        {{"mode", std::string(mode)},
                         {"padding_mode", std::string(pad)},
                         {"align_corners", align}},
                        fmt::format("grid_sample {} {} {} align {} x {} grid {}", dtypeName(t),
                                    mode, pad, align, extentsStr(c.x), extentsStr(c.grid)));
          }
}

TEST(LowerVision, GridSampleOfTheWrongGridIsTheNodesError) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {1, 2, 4, 4}));
  Value *grid = g.addInput("grid", TensorType(DType::F32, {1, 3, 3, 3}));
  Expected<Node *> n = g.createInferred(OpKind::GridSample, {x, grid},
                                        {{"mode", std::string("linear")},
                                         {"padding_mode", std::string("zeros")},
                                         {"align_corners", int64_t(0)}},
                                        "gs");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("'gs'"), std::string::npos) << n.error().message();
  EXPECT_NE(n.error().message().find("dim 3 must be 2"), std::string::npos) << n.error().message();
  Value *grid2 = g.addInput("grid2", TensorType(DType::F32, {1, 3, 3, 2}));
  Expected<Node *> m = g.createInferred(OpKind::GridSample, {x, grid2},
                                        {{"mode", std::string("bilinear")},
                                         {"padding_mode", std::string("zeros")},
                                         {"align_corners", int64_t(0)}},
                                        "gs2");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("unknown mode 'bilinear'"), std::string::npos)
      << m.error().message();
}

TEST(LowerVision, RoiAlign) {
  std::mt19937 rng(16);
  for (const char *mode : {"avg", "max"})
    for (const char *ctm : {"half_pixel", "output_half_pixel"})
      for (int64_t ratio : {0, 2})
        for (DType t : {DType::F32, DType::F64}) {
          Tensor x = randomTensor(t, {2, 3, 9, 11}, rng);
          // Corners (x0, y0, x1, y1) in input pixels at scale 0.5, some past the image and
          // one inverted.
          Tensor rois = randomTensor(t, {5, 4}, rng, -4, 26);
          Tensor bi = Tensor::fromVector<int64_t>(DType::I64, {5}, {0, 1, 1, 0, 1});
          checkVision(OpKind::RoiAlign, {x, rois, bi},
                      {{"mode", std::string(mode)},
                       {"output_height", int64_t(3)},
                       {"output_width", int64_t(4)},
                       {"sampling_ratio", ratio},
                       {"spatial_scale", 0.5},
                       {"coordinate_transformation_mode", std::string(ctm)}},
                      fmt::format("roi_align {} {} {} ratio {}", dtypeName(t), mode, ctm, ratio));
        }
}

TEST(LowerVision, RoiAlignBatchIndexOutOfRangeStopsEveryPath) {
  Graph g;
  Tensor x = Tensor::zeros(DType::F32, {2, 1, 4, 4});
  Tensor rois = Tensor::fromVector<float>(DType::F32, {1, 4}, {0, 0, 2, 2});
  Tensor bi = Tensor::fromVector<int64_t>(DType::I64, {1}, {2});
  std::vector<Value *> ops{g.addInput("x", x.type()), g.addInput("rois", rois.type()),
                           g.addInput("bi", bi.type())};
  Expected<Node *> n =
      g.createInferred(OpKind::RoiAlign, ops,
                       {{"mode", std::string("avg")},
                        {"output_height", int64_t(1)},
                        {"output_width", int64_t(1)},
                        {"sampling_ratio", int64_t(0)},
                        {"spatial_scale", 1.0},
                        {"coordinate_transformation_mode", std::string("half_pixel")}},
                       "ra");
  ASSERT_TRUE(n) << n.error().message();
  g.setOutputs((*n)->results());
  const std::string want = "batch index 2 is out of range for a batch of 2";
  Expected<std::vector<Tensor>> interp = evaluateNode(**n, {x, rois, bi});
  ASSERT_FALSE(interp);
  EXPECT_NE(interp.error().message().find(want), std::string::npos) << interp.error().message();
  EXPECT_NE(interp.error().message().find("'ra'"), std::string::npos);
  Expected<std::vector<Tensor>> lowered = runLowered(**n, {x, rois, bi}, true);
  ASSERT_FALSE(lowered);
  EXPECT_EQ(lowered.error().message(), interp.error().message());
}
