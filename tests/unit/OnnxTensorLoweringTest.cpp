// Tests of the ONNX tensor and reduction lowerings: small one-node models imported and run.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <variant>

#include <gtest/gtest.h>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/runtime/Interpreter.h"
#include "onnx.pb.h"
#include "OnnxProtoUtil.h"

using namespace nnc;

namespace {

/// A dim of a graph input: a number or a dim_param name.
using TestDim = std::variant<int64_t, std::string>;

/// Builds a one-graph ONNX model in memory.
class ModelBuilder {
public:
  explicit ModelBuilder(int64_t opset) {
    model_.set_ir_version(8);
    onnx::OperatorSetIdProto *o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  void input(const std::string &name, DType t, const std::vector<TestDim> &dims) {
    onnx::ValueInfoProto *vi = model_.mutable_graph()->add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtypeToOnnx(t));
    auto *shape = tt->mutable_shape();
    for (const TestDim &d : dims) {
      auto *dp = shape->add_dim();
      if (std::holds_alternative<int64_t>(d))
        dp->set_dim_value(std::get<int64_t>(d));
      else
        dp->set_dim_param(std::get<std::string>(d));
    }
  }

  void initializer(const std::string &name, const std::vector<int64_t> &values) {
    onnx::TensorProto *t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values)
      t->add_int64_data(v);
  }

  void output(const std::string &name) { model_.mutable_graph()->add_output()->set_name(name); }

  onnx::NodeProto *node(const std::string &op, const std::vector<std::string> &ins,
                        const std::vector<std::string> &outs) {
    return testonnx::addNode(model_.mutable_graph(), op, op + "_node", ins, outs);
  }

  static void intAttr(onnx::NodeProto *n, const std::string &name, int64_t v) {
    testonnx::addIntAttr(n, name, v);
  }
  static void intsAttr(onnx::NodeProto *n, const std::string &name, const std::vector<int64_t> &v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void floatAttr(onnx::NodeProto *n, const std::string &name, float v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void stringAttr(onnx::NodeProto *n, const std::string &name, const std::string &v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  /// Writes the model to a temporary file and imports it.
  Expected<std::unique_ptr<Graph>> import(const ImportOptions &opts = {}) {
    static int counter = 0;
    std::filesystem::path p = std::filesystem::path(testing::TempDir()) /
                              ("nnc_onnxtensor_" + std::to_string(::getpid()) + "_" +
                               std::to_string(counter++) + ".onnx");
    {
      std::ofstream f(p, std::ios::binary);
      model_.SerializeToOstream(&f);
    }
    auto g = importOnnxFile(p.string(), opts);
    std::filesystem::remove(p);
    return g;
  }

private:
  onnx::ModelProto model_;
};

Tensor f32(const Extents &e, const std::vector<float> &v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}
Tensor i64(const Extents &e, const std::vector<int64_t> &v) {
  return Tensor::fromVector<int64_t>(DType::I64, e, v);
}

std::vector<double> values(const Tensor &t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numElements(); ++i)
    r.push_back(t.elementAsDouble(i));
  return r;
}

/// Imports and runs; fails the test on any error.
std::vector<Tensor> importAndRun(ModelBuilder &b, const std::vector<Tensor> &inputs,
                                 const ImportOptions &opts = {}) {
  auto g = b.import(opts);
  EXPECT_TRUE(bool(g)) << g.error().message();
  if (!g)
    return {};
  auto outs = interpret(**g, inputs);
  EXPECT_TRUE(bool(outs)) << outs.error().message();
  if (!outs)
    return {};
  return *outs;
}

TEST(OnnxTensorLowering, SplitNumOutputsUnevenOnSymbolicDim) {
  ModelBuilder b(18);
  b.input("x", DType::F32, {std::string("N")});
  auto *n = b.node("Split", {"x"}, {"a", "b", "c"});
  ModelBuilder::intAttr(n, "num_outputs", 3);
  for (const char *o : {"a", "b", "c"})
    b.output(o);
  auto outs = importAndRun(b, {f32({7}, {0, 1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(values(outs[1]), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(values(outs[2]), (std::vector<double>{6}));
}

TEST(OnnxTensorLowering, SplitNumOutputsUnevenStatic) {
  ModelBuilder b(18);
  b.input("x", DType::F32, {int64_t(2), int64_t(8)});
  auto *n = b.node("Split", {"x"}, {"a", "b", "c"});
  ModelBuilder::intAttr(n, "num_outputs", 3);
  ModelBuilder::intAttr(n, "axis", -1);
  for (const char *o : {"a", "b", "c"})
    b.output(o);
  auto g = b.import();
  ASSERT_TRUE(bool(g)) << g.error().message();
  const auto &outs = (*g)->outputs();
  EXPECT_EQ(outs[0]->type().str(), "f32[2,3]");
  EXPECT_EQ(outs[2]->type().str(), "f32[2,2]");
}

TEST(OnnxTensorLowering, SplitNumOutputsMismatchIsAnError) {
  ModelBuilder b(18);
  b.input("x", DType::F32, {int64_t(6)});
  auto *n = b.node("Split", {"x"}, {"a", "b"});
  ModelBuilder::intAttr(n, "num_outputs", 3);
  b.output("a");
  b.output("b");
  auto g = b.import();
  ASSERT_FALSE(bool(g));
  EXPECT_NE(g.error().message().find("num_outputs"), std::string::npos) << g.error().message();
  EXPECT_NE(g.error().message().find("Split_node"), std::string::npos) << g.error().message();
}

TEST(OnnxTensorLowering, SplitAttributeForm) {
  ModelBuilder b(2);
  b.input("x", DType::F32, {int64_t(5)});
  auto *n = b.node("Split", {"x"}, {"a", "b"});
  ModelBuilder::intsAttr(n, "split", {2, 3});
  b.output("a");
  b.output("b");
  auto outs = importAndRun(b, {f32({5}, {1, 2, 3, 4, 5})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(values(outs[1]), (std::vector<double>{3, 4, 5}));
}

TEST(OnnxTensorLowering, SplitSizesFromRuntimeInputIsAClearError) {
  ModelBuilder b(13);
  b.input("x", DType::F32, {int64_t(5)});
  b.input("s", DType::I64, {int64_t(2)});
  b.node("Split", {"x", "s"}, {"a", "b"});
  b.output("a");
  b.output("b");
  auto g = b.import();
  ASSERT_FALSE(bool(g));
  EXPECT_NE(g.error().message().find("compile time"), std::string::npos) << g.error().message();
}

TEST(OnnxTensorLowering, FlattenAndSqueezeKeepSymbolicDims) {
  ModelBuilder b(13);
  b.input("x", DType::F32, {std::string("N"), int64_t(1), int64_t(3)});
  b.initializer("axes", {1});
  b.node("Squeeze", {"x", "axes"}, {"s"});
  b.node("Flatten", {"x"}, {"f"});
  b.output("s");
  b.output("f");
  auto g = b.import();
  ASSERT_TRUE(bool(g)) << g.error().message();
  EXPECT_EQ((*g)->outputs()[0]->type().str(), "f32[N,3]");
  EXPECT_EQ((*g)->outputs()[1]->type().str(), "f32[N,3]");
}

TEST(OnnxTensorLowering, Pad18WithRuntimePadsAndConstantAxes) {
  ModelBuilder b(18);
  b.input("x", DType::F32, {int64_t(2), int64_t(2)});
  b.input("pads", DType::I64, {int64_t(2)});
  b.initializer("axes", {-1});
  auto *n = b.node("Pad", {"x", "pads", "", "axes"}, {"y"});
  ModelBuilder::stringAttr(n, "mode", "edge");
  b.output("y");
  auto outs = importAndRun(b, {f32({2, 2}, {1, 2, 3, 4}), i64({2}, {1, 0})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].extents(), (Extents{2, 3}));
  EXPECT_EQ(values(outs[0]), (std::vector<double>{1, 1, 2, 3, 3, 4}));
}

TEST(OnnxTensorLowering, Pad2AttributesWithValue) {
  ModelBuilder b(2);
  b.input("x", DType::F32, {int64_t(2)});
  auto *n = b.node("Pad", {"x"}, {"y"});
  ModelBuilder::intsAttr(n, "pads", {1, 2});
  ModelBuilder::floatAttr(n, "value", 7.0f);
  b.output("y");
  auto outs = importAndRun(b, {f32({2}, {1, 2})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{7, 1, 2, 7, 7}));
}

TEST(OnnxTensorLowering, Slice1Attributes) {
  ModelBuilder b(1);
  b.input("x", DType::F32, {int64_t(2), int64_t(4)});
  auto *n = b.node("Slice", {"x"}, {"y"});
  ModelBuilder::intsAttr(n, "starts", {1});
  ModelBuilder::intsAttr(n, "ends", {1000});
  ModelBuilder::intsAttr(n, "axes", {1});
  b.output("y");
  auto outs = importAndRun(b, {f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{1, 2, 3, 5, 6, 7}));
}

TEST(OnnxTensorLowering, CompressWithoutAxisAndShortCondition) {
  ModelBuilder b(11);
  b.input("x", DType::F32, {int64_t(2), int64_t(2)});
  b.input("c", DType::Bool, {int64_t(3)});
  b.node("Compress", {"x", "c"}, {"y"});
  b.output("y");
  Tensor c = Tensor::zeros(DType::Bool, {3});
  c.data<bool>()[1] = c.data<bool>()[2] = true;
  auto outs = importAndRun(b, {f32({2, 2}, {1, 2, 3, 4}), c});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{2, 3}));
}

TEST(OnnxTensorLowering, ReduceLogSumExpIsStable) {
  ModelBuilder b(18);
  b.input("x", DType::F32, {int64_t(2), int64_t(2)});
  b.initializer("axes", {1});
  auto *n = b.node("ReduceLogSumExp", {"x", "axes"}, {"y"});
  ModelBuilder::intAttr(n, "keepdims", 0);
  b.output("y");
  float inf = std::numeric_limits<float>::infinity();
  auto outs = importAndRun(b, {f32({2, 2}, {1000, 1000, -inf, -inf})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].extents(), (Extents{2}));
  std::vector<double> v = values(outs[0]);
  EXPECT_NEAR(v[0], 1000 + std::log(2.0), 1e-3);
  EXPECT_TRUE(std::isinf(v[1]) && v[1] < 0) << v[1];
}

TEST(OnnxTensorLowering, ReduceSumSquareNoopIsSquare) {
  ModelBuilder b(18);
  b.input("x", DType::F32, {int64_t(3)});
  auto *n = b.node("ReduceSumSquare", {"x"}, {"y"});
  ModelBuilder::intAttr(n, "noop_with_empty_axes", 1);
  b.output("y");
  auto outs = importAndRun(b, {f32({3}, {1, -2, 3})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{1, 4, 9}));
}

TEST(OnnxTensorLowering, ReduceMeanAttributeAxes) {
  ModelBuilder b(13);
  b.input("x", DType::F32, {int64_t(2), int64_t(2)});
  auto *n = b.node("ReduceMean", {"x"}, {"y"});
  ModelBuilder::intsAttr(n, "axes", {-2});
  b.output("y");
  auto outs = importAndRun(b, {f32({2, 2}, {1, 2, 3, 4})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].extents(), (Extents{1, 2}));
  EXPECT_EQ(values(outs[0]), (std::vector<double>{2, 3}));
}

TEST(OnnxTensorLowering, TopK1AttributeK) {
  ModelBuilder b(1);
  b.input("x", DType::F32, {int64_t(4)});
  auto *n = b.node("TopK", {"x"}, {"v", "i"});
  ModelBuilder::intAttr(n, "k", 2);
  b.output("v");
  b.output("i");
  auto outs = importAndRun(b, {f32({4}, {3, 9, 1, 7})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(values(outs[0]), (std::vector<double>{9, 7}));
  EXPECT_EQ(values(outs[1]), (std::vector<double>{1, 3}));
}

TEST(OnnxTensorLowering, Tile1AlongOneAxis) {
  ModelBuilder b(1);
  b.input("x", DType::F32, {int64_t(1), int64_t(2)});
  b.initializer("tiles", {3});
  b.initializer("axis", {0});
  b.node("Tile", {"x", "tiles", "axis"}, {"y"});
  b.output("y");
  auto outs = importAndRun(b, {f32({1, 2}, {1, 2})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].extents(), (Extents{3, 2}));
}

TEST(OnnxTensorLowering, ConstantOfShapeDefaultsToFloatZero) {
  ModelBuilder b(9);
  b.initializer("s", {2, 3});
  b.node("ConstantOfShape", {"s"}, {"y"});
  b.output("y");
  auto g = b.import();
  ASSERT_TRUE(bool(g)) << g.error().message();
  EXPECT_EQ((*g)->outputs()[0]->type().str(), "f32[2,3]");
}

TEST(OnnxTensorLowering, TransposeDefaultReverses) {
  ModelBuilder b(13);
  b.input("x", DType::F32, {int64_t(2), int64_t(3), int64_t(4)});
  b.node("Transpose", {"x"}, {"y"});
  b.output("y");
  auto g = b.import();
  ASSERT_TRUE(bool(g)) << g.error().message();
  EXPECT_EQ((*g)->outputs()[0]->type().str(), "f32[4,3,2]");
}

} // namespace
