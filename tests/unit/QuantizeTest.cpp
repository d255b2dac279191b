// Linear quantization: the interpreter's quantize / dequantize on their edge cases (ties, both
// saturation ends, NaN, negative scales), and the ONNX lowerings of QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul and QLinearConv (per-axis with a
// negative axis, blocked with a partial last block, the errors bad models get).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/runtime/Interpreter.h"
#include "tests/unit/OnnxTestModel.h"

namespace nnc {
namespace {

using namespace testonnx;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor f32(const Extents &e, const std::vector<float> &v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}
template <typename T> std::vector<T> values(const Tensor &t) {
  const T *p = t.data<T>();
  return std::vector<T>(p, p + t.numElements());
}
template <typename T> Tensor scalar(DType d, T v) {
  return Tensor::fromVector<T>(d, {}, {v});
}

/// Builds a one-node graph over `inputs`, runs it on the interpreter.
Expected<std::vector<Tensor>> runOp(OpKind kind, const std::vector<Tensor> &inputs,
                                    AttrMap attrs = {}) {
  Graph g;
  std::vector<Value *> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(g.addInput("x" + std::to_string(i), inputs[i].type()));
  Expected<Node *> n = g.createInferred(kind, ins, std::move(attrs), "op");
  if (!n)
    return n.takeError();
  g.setOutputs((*n)->results());
  return interpret(g, inputs);
}

TEST(Quantize, RoundsHalfToEvenAndSaturates) {
  Tensor x = f32({11}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1000, -1000, kNaN, kInf, -kInf});
  auto u =
      runOp(OpKind::Quantize, {x, scalar<float>(DType::F32, 1), scalar<uint8_t>(DType::U8, 0)});
  ASSERT_TRUE(u) << u.error().message();
  EXPECT_EQ(values<uint8_t>((*u)[0]), (std::vector<uint8_t>{0, 2, 2, 0, 0, 0, 255, 0, 0, 255, 0}));
  auto i = runOp(OpKind::Quantize, {x, scalar<float>(DType::F32, 1), scalar<int8_t>(DType::I8, 0)});
  ASSERT_TRUE(i) << i.error().message();
  EXPECT_EQ(values<int8_t>((*i)[0]),
            (std::vector<int8_t>{0, 2, 2, 0, -2, -2, 127, -128, -128, 127, -128}));
  // The zero point is added after rounding; with it the ends still saturate.
  auto z =
      runOp(OpKind::Quantize, {x, scalar<float>(DType::F32, 1), scalar<int8_t>(DType::I8, 100)});
  ASSERT_TRUE(z);
  EXPECT_EQ(values<int8_t>((*z)[0])[2], 102);
  EXPECT_EQ(values<int8_t>((*z)[0])[6], 127);
  EXPECT_EQ(values<int8_t>((*z)[0])[7], -128);
}

TEST(Quantize, NegativeScaleAndDivision) {
  // x / scale is a division, as in the reference, not a multiply by the reciprocal: in f32
  // 0.35 / 0.0056 is exactly 62.5 (a tie, to 62) where 0.35 * (1 / 0.0056) is 62.5000038.
  float x035 = 35 * 0.01f, s0056 = 56 * 0.0001f;
  auto d = runOp(OpKind::Quantize, {f32({2}, {x035, -x035}), scalar<float>(DType::F32, s0056),
                                    scalar<int8_t>(DType::I8, 0)});
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(values<int8_t>((*d)[0]), (std::vector<int8_t>{62, -62}));
  Tensor x = f32({3}, {2.5f, 0.15f, -0.15f});
  auto n =
      runOp(OpKind::Quantize, {x, scalar<float>(DType::F32, -1), scalar<uint8_t>(DType::U8, 10)});
  ASSERT_TRUE(n);
  EXPECT_EQ(values<uint8_t>((*n)[0]), (std::vector<uint8_t>{8, 10, 10}));
}

TEST(Quantize, SubByteAndFloatFormats) {
  Tensor x = f32({5}, {-9, -2.5f, 3.5f, 7.4f, 100});
  auto i4 =
      runOp(OpKind::Quantize, {x, scalar<float>(DType::F32, 1), Tensor::zeros(DType::I4, {})});
  ASSERT_TRUE(i4) << i4.error().message();
  EXPECT_EQ((*i4)[0].dtype(), DType::I4);
  // -8, -2, 4, 7, 7 as 4-bit two's complement.
  EXPECT_EQ(values<uint8_t>((*i4)[0]), (std::vector<uint8_t>{0x8, 0xe, 0x4, 0x7, 0x7}));
  auto u2 =
      runOp(OpKind::Quantize, {x, scalar<float>(DType::F32, 1), Tensor::zeros(DType::U2, {})});
  ASSERT_TRUE(u2);
  EXPECT_EQ(values<uint8_t>((*u2)[0]), (std::vector<uint8_t>{0, 0, 3, 3, 3}));
  // f8e4m3fn: 100 / 0.1 = 1000 saturates to 448 (0x7e), or becomes NaN (0x7f) with saturate=0.
  auto f8 = runOp(OpKind::Quantize,
                  {x, scalar<float>(DType::F32, 0.1f), Tensor::zeros(DType::F8E4M3FN, {})});
  ASSERT_TRUE(f8);
  EXPECT_EQ(values<uint8_t>((*f8)[0])[4], 0x7e);
  auto f8n = runOp(OpKind::Quantize,
                   {x, scalar<float>(DType::F32, 0.1f), Tensor::zeros(DType::F8E4M3FN, {})},
                   {{"saturate", int64_t(0)}});
  ASSERT_TRUE(f8n);
  EXPECT_EQ(values<uint8_t>((*f8n)[0])[4], 0x7f);
}

TEST(Quantize, Dequantize) {
  Tensor x = Tensor::fromVector<int8_t>(DType::I8, {3}, {-128, 127, 0});
  auto r =
      runOp(OpKind::Dequantize, {x, scalar<float>(DType::F32, 0.5f), scalar<int8_t>(DType::I8, -1)},
            {{"to", DType::F32}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{-63.5f, 64.0f, 0.5f}));
  // i4 sign-extends.
  Tensor q = Tensor::fromVector<uint8_t>(DType::I4, {2}, {0x8, 0x7});
  auto s =
      runOp(OpKind::Dequantize, {q, scalar<float>(DType::F32, 2), Tensor::zeros(DType::I4, {})},
            {{"to", DType::F32}});
  ASSERT_TRUE(s);
  EXPECT_EQ(values<float>((*s)[0]), (std::vector<float>{-16, 14}));
}

TEST(Quantize, ShapeRuleRejectsMismatchedDtypes) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {4}));
  Value *s = g.addInput("s", TensorType(DType::F16, {}));
  Value *z = g.addInput("z", TensorType(DType::U8, {}));
  Expected<Node *> n = g.createInferred(OpKind::Quantize, {x, s, z}, {}, "q");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("scale has dtype f16"), std::string::npos)
      << n.error().message();
  Value *zi = g.addInput("zi", TensorType(DType::I32, {}));
  Value *s32 = g.addInput("s32", TensorType(DType::F32, {}));
  Expected<Node *> m = g.createInferred(OpKind::Quantize, {x, s32, zi}, {}, "q2");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("not a quantized dtype"), std::string::npos);
}

// ---- ONNX lowerings ------------------------------------------------------------------------

Pb named(Pb n, const std::string &name) {
  return n.s(3, name);
}

Expected<std::vector<Tensor>> runModel(int64_t opset, const Pb &theNode,
                                       const std::vector<std::pair<std::string, Tensor>> &inputs,
                                       const std::vector<std::string> &outputs) {
  std::vector<Tensor> vals;
  for (const auto &in : inputs)
    vals.push_back(in.second);
  Expected<std::unique_ptr<Graph>> g = importModel(opset, {theNode}, inputs, {}, outputs);
  if (!g)
    return g.takeError();
  return interpret(**g, vals);
}

TEST(QuantizeLinear, PerAxisWithNegativeAxis) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = f32({3}, {1, 2, 4});
  Tensor z = Tensor::fromVector<int8_t>(DType::I8, {3}, {0, 10, -10});
  auto r = runModel(13, node("QuantizeLinear", {"x", "s", "z"}, {"y"}, {attrInt("axis", -1)}),
                    {{"x", x}, {"s", s}, {"z", z}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  // Column j: round(x / s[j]) + z[j]; 2 / 2 = 1, 3 / 4 = 0.75 -> 1, 6 / 4 = 1.5 -> 2.
  EXPECT_EQ(values<int8_t>((*r)[0]), (std::vector<int8_t>{1, 11, -9, 4, 12, -8}));
}

TEST(QuantizeLinear, BlockedWithPartialBlock) {
  // x [2, 5], blocks of 2 along axis 1: scale [2, 3], the last block has one element.
  Tensor x = f32({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor s = f32({2, 3}, {1, 2, 5, 1, 1, 0.5f});
  auto r = runModel(
      21, node("QuantizeLinear", {"x", "s"}, {"y"}, {attrInt("axis", 1), attrInt("block_size", 2)}),
      {{"x", x}, {"s", s}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].dtype(), DType::U8);
  EXPECT_EQ(values<uint8_t>((*r)[0]), (std::vector<uint8_t>{1, 2, 2, 2, 1, 6, 7, 8, 9, 20}));
}

TEST(QuantizeLinear, DequantizePerAxisBlockedRoundTrip) {
  Tensor q = Tensor::fromVector<uint8_t>(DType::U8, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor s = f32({1, 4}, {1, 2, 3, 4});
  Tensor z = Tensor::fromVector<uint8_t>(DType::U8, {1, 4}, {1, 1, 1, 1});
  auto r = runModel(21,
                    node("DequantizeLinear", {"q", "s", "z"}, {"y"},
                         {attrInt("axis", 0), attrInt("block_size", 2)}),
                    {{"q", q}, {"s", s}, {"z", z}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{-1, 0, 3, 8, 3, 8, 15, 24}));
}

/// Imports `n` (named "bad") and expects an error naming the node and containing `what`.
void expectImportError(int64_t opset, const Pb &n,
                       const std::vector<std::pair<std::string, Tensor>> &inputs,
                       const std::string &what) {
  Expected<std::unique_ptr<Graph>> g = importModel(opset, {named(n, "bad")}, inputs, {}, {"y"});
  ASSERT_FALSE(g) << what;
  std::string m = g.error().message();
  EXPECT_NE(m.find("'bad'"), std::string::npos) << m;
  EXPECT_NE(m.find(what), std::string::npos) << m;
}

TEST(QuantizeLinear, BadModelsGetOneClearError) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s3 = f32({3}, {1, 2, 4});
  Tensor z8 = Tensor::fromVector<int8_t>(DType::I8, {3}, {0, 0, 0});
  // output_dtype (u8 = 2) against an i8 zero point.
  expectImportError(21,
                    node("QuantizeLinear", {"x", "s", "z"}, {"y"},
                         {attrInt("axis", 1), attrInt("output_dtype", 2)}),
                    {{"x", x}, {"s", s3}, {"z", z8}}, "disagrees with y_zero_point");
  // A per-axis scale whose length is not the axis' extent.
  expectImportError(13, node("QuantizeLinear", {"x", "s", "z"}, {"y"}, {attrInt("axis", 0)}),
                    {{"x", x}, {"s", s3}, {"z", z8}}, "axis 0 of x");
  // Scale and zero point of different shapes.
  expectImportError(13, node("QuantizeLinear", {"x", "s", "z"}, {"y"}),
                    {{"x", x},
                     {"s", f32({3}, {1, 1, 1})},
                     {"z", Tensor::fromVector<int8_t>(DType::I8, {1}, {0})}},
                    "they must agree");
  // Blocks that do not cover x: 3 elements in blocks of 2 need 2 scales, not 1.
  expectImportError(
      21, node("QuantizeLinear", {"x", "s"}, {"y"}, {attrInt("axis", 1), attrInt("block_size", 2)}),
      {{"x", x}, {"s", f32({2, 1}, {1, 1})}}, "block_size 2");
  // An axis out of range.
  expectImportError(13, node("QuantizeLinear", {"x", "s", "z"}, {"y"}, {attrInt("axis", 2)}),
                    {{"x", x}, {"s", s3}, {"z", z8}}, "out of range");
  // Dequantize: a zero point of another dtype than x.
  expectImportError(13, node("DequantizeLinear", {"q", "s", "z"}, {"y"}),
                    {{"q", Tensor::fromVector<uint8_t>(DType::U8, {3}, {1, 2, 3})},
                     {"s", f32({}, {1})},
                     {"z", Tensor::fromVector<int8_t>(DType::I8, {}, {0})}},
                    "x_zero_point has dtype i8");
  // Quantize to a type that is not quantized.
  expectImportError(
      13, node("QuantizeLinear", {"x", "s", "z"}, {"y"}),
      {{"x", x}, {"s", f32({}, {1})}, {"z", Tensor::fromVector<int32_t>(DType::I32, {}, {0})}},
      "cannot quantize to i32");
}

TEST(QuantizeLinear, DynamicQuantizeLinear) {
  Tensor x = f32({4}, {-1, 0, 2, 3});
  auto r = runModel(11, node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"}), {{"x", x}},
                    {"y", "s", "z"});
  ASSERT_TRUE(r) << r.error().message();
  // Range [-1, 3]: scale 4 / 255, zero point round(63.75) = 64; 2 / scale is 127.49999 in f32.
  EXPECT_EQ(values<float>((*r)[1])[0], 4.0f / 255.0f);
  EXPECT_EQ(values<uint8_t>((*r)[2])[0], 64);
  EXPECT_EQ(values<uint8_t>((*r)[0]), (std::vector<uint8_t>{0, 64, 191, 255}));
  // All zeros: scale 1, zero point 0 (not 0 / 0).
  auto z = runModel(11, node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"}),
                    {{"x", f32({2}, {0, 0})}}, {"y", "s", "z"});
  ASSERT_TRUE(z) << z.error().message();
  EXPECT_EQ(values<float>((*z)[1])[0], 1.0f);
  EXPECT_EQ(values<uint8_t>((*z)[2])[0], 0);
}

TEST(QuantizeLinear, QLinearMatMulPerColumnScale) {
  Tensor a = Tensor::fromVector<uint8_t>(DType::U8, {1, 2}, {10, 20});
  Tensor b = Tensor::fromVector<int8_t>(DType::I8, {2, 2}, {1, -1, 2, 3});
  auto r =
      runModel(10, node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"}),
               {{"a", a},
                {"as", f32({}, {0.5f})},
                {"az", Tensor::fromVector<uint8_t>(DType::U8, {}, {10})},
                {"b", b},
                {"bs", f32({2}, {1, 0.25f})},
                {"bz", Tensor::fromVector<int8_t>(DType::I8, {2}, {0, 1})},
                {"ys", f32({}, {1})},
                {"yz", Tensor::fromVector<int8_t>(DType::I8, {}, {-3})}},
               {"y"});
  ASSERT_TRUE(r) << r.error().message();
  // (a - 10) = [0, 10], b - bz = [[1, -2], [2, 2]]: accumulators [20, 20], multipliers
  // [0.5, 0.125]: 10 -> 7 and 2.5 -> 2 (ties to even) -> -1.
  EXPECT_EQ(values<int8_t>((*r)[0]), (std::vector<int8_t>{7, -1}));
}

} // namespace
} // namespace nnc
