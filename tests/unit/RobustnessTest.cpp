// Reduced regression tests of crashes, hangs and huge allocations the ONNX fuzzer
// (OnnxFuzzTest) found: each input must give a clear Error (or the right answer) quickly.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Graph.h"
#include "nnc/runtime/Interpreter.h"
#include "onnx.pb.h"

using namespace nnc;

namespace {

Tensor f32(const Extents &e, float start = 1) {
  Tensor t = Tensor::zeros(DType::F32, e);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

Tensor i64(const std::vector<int64_t> &v) {
  return Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v);
}

/// Builds a one-node graph whose operands are graph inputs (`inputs`) and runs it. Returns the
/// error of building (shape rule) or running, or the results.
Expected<std::vector<Tensor>> run1(OpKind kind, const std::vector<Tensor> &inputs,
                                   AttrMap attrs) {
  Graph g;
  std::vector<Value *> ops;
  for (size_t i = 0; i < inputs.size(); ++i)
    ops.push_back(inputs[i].isNull() ? nullptr
                                     : g.addInput("x" + std::to_string(i), inputs[i].type()));
  NNC_ASSIGN_OR_RETURN(Node * n, g.createInferred(kind, ops, std::move(attrs), "n"));
  g.setOutputs(n->results());
  std::vector<Tensor> present;
  for (const Tensor &t : inputs)
    if (!t.isNull())
      present.push_back(t);
  return interpret(g, present);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Fuzz: test_resize_downsample_sizes_nearest with graph input 'sizes' elem_type=23 (f4e2m1)
// aborted in elementAsDouble; sizes must be i64 and scales/roi floating-point.
TEST(Robustness, ResizeRejectsBadOperandDtypes) {
  Tensor x = f32({1, 1, 2, 2});
  Tensor sizes = Tensor::zeros(DType::F4E2M1, {4});
  Expected<std::vector<Tensor>> r =
      run1(OpKind::Resize, {x, Tensor(), Tensor(), sizes}, {{"mode", std::string("nearest")}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("sizes must be i64"), std::string::npos)
      << r.error().message();
  Tensor scales = i64({1, 1, 2, 2});
  r = run1(OpKind::Resize, {x, Tensor(), scales}, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("scales must be floating-point"), std::string::npos)
      << r.error().message();
}

// Fuzz: test_resize_downsample_sizes_linear_antialias with sizes[3] = 2^62 threw
// std::length_error building per-position tap tables before the output size was checked.
TEST(Robustness, ResizeHugeSizesIsAnError) {
  Tensor x = f32({1, 1, 2, 2});
  Expected<std::vector<Tensor>> r =
      run1(OpKind::Resize, {x, Tensor(), Tensor(), i64({1, 1, 2, int64_t(1) << 62})},
           {{"mode", std::string("linear")}, {"antialias", int64_t(1)}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  // Absurd scales are refused by the shape rule.
  Tensor scales = Tensor::fromVector<float>(DType::F32, {4}, {1, 1, 1e30f, 1});
  r = run1(OpKind::Resize, {x, Tensor(), scales}, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
}

// Fuzz: test_maxpool_2d_same_lower with kernel_shape[1] = 2^40 hung: the kernel visited every
// tap of the (mostly padding) window. Pools now visit only taps inside the input.
TEST(Robustness, PoolWithHugeKernelIsFast) {
  Tensor x = f32({1, 1, 3, 3});
  auto t0 = std::chrono::steady_clock::now();
  AttrMap attrs{{"kernel_shape", std::vector<int64_t>{1, int64_t(1) << 40}},
                {"auto_pad", std::string("SAME_LOWER")}};
  Expected<std::vector<Tensor>> r = run1(OpKind::MaxPool, {x}, attrs);
  ASSERT_TRUE(r) << r.error().message();
  // Each window covers its whole row.
  const float *y = (*r)[0].data<float>();
  for (int64_t i = 0; i < 9; ++i)
    EXPECT_EQ(y[i], static_cast<float>(3 * (i / 3) + 3)) << i;
  attrs["count_include_pad"] = int64_t(0);
  r = run1(OpKind::AvgPool, {x}, attrs);
  ASSERT_TRUE(r) << r.error().message();
  const float *a = (*r)[0].data<float>();
  for (int64_t i = 0; i < 9; ++i)
    EXPECT_EQ(a[i], static_cast<float>(3 * (i / 3) + 2)) << i;
  EXPECT_LT(secondsSince(t0), 2.0);
}

// Window arithmetic that overflows int64 (dilation * kernel, pads) is an error, not UB.
TEST(Robustness, PoolWindowOverflowIsAnError) {
  Tensor x = f32({1, 1, 3, 3});
  Expected<std::vector<Tensor>> r =
      run1(OpKind::MaxPool, {x},
           {{"kernel_shape", std::vector<int64_t>{2, int64_t(1) << 40}},
            {"dilations", std::vector<int64_t>{1, int64_t(1) << 40}}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  r = run1(OpKind::MaxPool, {x},
           {{"kernel_shape", std::vector<int64_t>{2, 2}},
            {"pads", std::vector<int64_t>{0, INT64_MAX, 0, INT64_MAX}}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
}

// Fuzz: test_tile_precomputed with repeats[0] = INT64_MAX threw std::length_error (the
// per-axis offset table was sized by the overflowed output extent).
TEST(Robustness, TileHugeRepeatsIsAnError) {
  Tensor x = f32({2, 2});
  Expected<std::vector<Tensor>> r = run1(OpKind::Tile, {x, i64({INT64_MAX, 1})}, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  r = run1(OpKind::Tile, {x, i64({int64_t(1) << 40, 1})}, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
}

// Fuzz: test_center_crop_pad_crop_and_pad_expanded with a shape entry of INT64_MAX: pads of
// that size overflowed and sized a huge table. An empty result with one absurd axis must not
// build tables either.
TEST(Robustness, PadAndExpandHugeExtents) {
  Tensor x = f32({2, 2});
  Expected<std::vector<Tensor>> r =
      run1(OpKind::Pad, {x, i64({0, INT64_MAX, 0, INT64_MAX})}, {{"mode", std::string("edge")}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  r = run1(OpKind::Pad, {x, i64({0, int64_t(1) << 40, 0, 0})},
           {{"mode", std::string("constant")}});
  ASSERT_FALSE(r);
  Tensor empty = f32({0, 1});
  auto t0 = std::chrono::steady_clock::now();
  r = run1(OpKind::Expand, {empty, i64({0, int64_t(1) << 62})}, {});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].extents(), (Extents{0, int64_t(1) << 62}));
  r = run1(OpKind::Tile, {empty, i64({1, int64_t(1) << 61})}, {});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].numElements(), 0);
  EXPECT_LT(secondsSince(t0), 2.0);
}

// Found by probing ops with extreme attributes: blocksize 2^32 made blocksize^2 overflow to 0
// and depth_to_space divided by it (SIGFPE); an empty input with a huge blocksize built
// offset tables as long as the blocksize.
TEST(Robustness, DepthToSpaceHugeBlocksize) {
  AttrMap attrs{{"blocksize", int64_t(1) << 32}, {"mode", std::string("DCR")}};
  Expected<std::vector<Tensor>> r = run1(OpKind::DepthToSpace, {f32({1, 4, 2, 2})}, attrs);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  attrs["blocksize"] = int64_t(1) << 30;
  r = run1(OpKind::DepthToSpace, {f32({1, 0, 2, 2})}, attrs);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].numElements(), 0);
}

AttrMap convAttrs(std::vector<int64_t> pads, int64_t group) {
  return {{"strides", std::vector<int64_t>{1, 1}},
          {"pads", std::move(pads)},
          {"dilations", std::vector<int64_t>{1, 1}},
          {"group", group}};
}

// Found by probing: conv with pads 2^40 threw std::bad_alloc (im2col buffer sized before the
// output was checked); conv_transpose with output_shape [2^40, 2^40] overflowed its buffer size
// and wrote out of bounds (SIGSEGV); group = INT64_MAX over 0 channels looped ~forever.
TEST(Robustness, ConvAbsurdSizesAreErrors) {
  Tensor x = f32({1, 1, 3, 3}), w = f32({1, 1, 1, 1});
  Expected<std::vector<Tensor>> r =
      run1(OpKind::Conv, {x, w}, convAttrs({int64_t(1) << 40, 0, 0, 0}, 1));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  AttrMap t = convAttrs({0, 0, 0, 0}, 1);
  t["output_padding"] = std::vector<int64_t>{0, 0};
  t["output_shape"] = std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40};
  r = run1(OpKind::ConvTranspose, {x, w}, t);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  auto t0 = std::chrono::steady_clock::now();
  r = run1(OpKind::Conv, {f32({1, 0, 3, 3}), f32({0, 0, 1, 1})}, convAttrs({0, 0, 0, 0}, INT64_MAX));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("group"), std::string::npos) << r.error().message();
  // An empty batch gives an empty result without allocating for the huge spatial output.
  r = run1(OpKind::Conv, {f32({0, 1, 3, 3}), w},
           convAttrs({int64_t(1) << 40, 0, int64_t(1) << 40, 0}, 1));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].numElements(), 0);
  EXPECT_LT(secondsSince(t0), 2.0);
}

// Kernel errors from helpers such as Tensor::create name the node.
TEST(Robustness, KernelErrorsNameTheNode) {
  Expected<std::vector<Tensor>> r = run1(
      OpKind::ConstantOfShape, {i64({int64_t(1) << 40, int64_t(1) << 40})},
      {{"value", Tensor::fromVector<float>(DType::F32, {1}, {1.0f})}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("node 'n'"), std::string::npos) << r.error().message();
}

/// Writes a one-node ONNX model `op(x) -> y` with x of ONNX elem_type `elemType`.
std::string writeOneNodeModel(const std::string &op, int elemType) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto *o = m.add_opset_import();
  o->set_version(13);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("g");
  onnx::NodeProto *n = g->add_node();
  n->set_op_type(op);
  n->add_input("x");
  if (op == "PRelu")
    n->add_input("x");
  n->add_output("y");
  for (const char *name : {"x", "y"}) {
    onnx::ValueInfoProto *vi = name[0] == 'x' ? g->add_input() : g->add_output();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
  }
  std::string path = (std::filesystem::temp_directory_path() /
                      ("nnc-robust-" + std::to_string(getpid()) + "-" + op + ".onnx"))
                         .string();
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

// Fuzz: test_prelu_example with graph input 'x' elem_type=19 (f8e5m2) aborted: the lowering
// built a scalar constant of a storage-only type. It is now an error naming the node.
TEST(Robustness, StorageOnlyInputsToArithmeticLoweringsAreErrors) {
  for (const char *op : {"PRelu", "Selu", "Elu", "HardSigmoid", "Softplus"}) {
    std::string path = writeOneNodeModel(op, /*FLOAT8E5M2=*/19);
    Expected<std::unique_ptr<Graph>> g = importOnnxFile(path);
    std::filesystem::remove(path);
    ASSERT_FALSE(g) << op;
    EXPECT_NE(g.error().message().find("f8e5m2"), std::string::npos) << g.error().message();
  }
}

} // namespace
