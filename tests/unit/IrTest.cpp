// Unit tests of the core IR: dtypes, tensors, graphs, the op table and the verifier.
#include <gtest/gtest.h>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Verifier.h"
#include "nnc/support/Float16.h"

using namespace nnc;

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(DType::I2); ++i) {
    DType t = static_cast<DType>(i);
    EXPECT_EQ(parseDType(dtypeName(t)), t);
    EXPECT_EQ(dtypeFromOnnx(dtypeToOnnx(t)), t);
  }
  EXPECT_FALSE(parseDType("f33").has_value());
}

TEST(Float16, RoundTripsAndRounds) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(halfToFloat(floatToHalf(f)), f);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);     // overflow -> inf
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 4096), 0x3c00); // ties to even
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.5f)), 1.5f);
}

TEST(Tensor, RefusesAbsurdSizes) {
  Expected<Tensor> t = Tensor::create(DType::F32, {int64_t(1) << 20, int64_t(1) << 20, 1024});
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message().find("limit"), std::string::npos);
  Expected<Tensor> o = Tensor::create(DType::F32, {INT64_MAX, 4});
  ASSERT_FALSE(o);
}

TEST(Graph, BuildVerifyAndBroadcast) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {Dim::symbol("N"), 4}));
  Value *y = g.addInput("y", TensorType(DType::F32, {4}));
  Expected<Node *> add = g.createInferred(OpKind::Add, {x, y});
  ASSERT_TRUE(add) << add.error().message();
  EXPECT_EQ((*add)->result()->type().str(), "f32[N,4]");
  g.setOutputs({(*add)->result()});
  EXPECT_FALSE(verify(g)) << verify(g).message();

  Value *z = g.addInput("z", TensorType(DType::F32, {3}));
  Expected<Node *> bad = g.createInferred(OpKind::Add, {x, z});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("do not broadcast"), std::string::npos);
  EXPECT_EQ(g.numNodes(), 1u);
}

TEST(Graph, TopologicalSortDetectsCycles) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  Node *a = g.createNode(OpKind::Neg, {x}, {TensorType(DType::F32, {2})});
  Node *b = g.createNode(OpKind::Neg, {a->result()}, {TensorType(DType::F32, {2})});
  a->setOperand(0, b->result());
  Error e = g.topologicalSort();
  ASSERT_TRUE(static_cast<bool>(e));
  EXPECT_NE(e.message().find("cycle"), std::string::npos);
}
