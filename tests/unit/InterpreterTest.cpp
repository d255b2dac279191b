// Unit tests of the reference interpreter: elementwise ops, cast, reductions and interpret().
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nnc/ir/Graph.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Float16.h"

using namespace nnc;

namespace {

/// Builds a one-node graph over `inputs`, runs it and returns its results.
Expected<std::vector<Tensor>> runOp(OpKind kind, const std::vector<Tensor> &inputs,
                                    AttrMap attrs = {}, int numResults = -1) {
  Graph g;
  std::vector<Value *> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(g.addInput("x" + std::to_string(i), inputs[i].type()));
  Expected<Node *> n = g.createInferred(kind, ins, std::move(attrs), "op", numResults);
  if (!n)
    return n.takeError();
  g.setOutputs((*n)->results());
  return interpret(g, inputs);
}

Tensor f32(const Extents &e, std::vector<float> v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}
Tensor boolTensor(const Extents &e, std::vector<bool> v) {
  Tensor t = Tensor::zeros(DType::Bool, e);
  for (size_t i = 0; i < v.size(); ++i)
    t.data<bool>()[i] = v[i];
  return t;
}
template <typename T> std::vector<T> values(const Tensor &t) {
  const T *p = t.data<T>();
  return std::vector<T>(p, p + t.numElements());
}

} // namespace

TEST(Interpreter, BroadcastsAdd) {
  auto r = runOp(OpKind::Add, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].extents(), (Extents{2, 3}));
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{11, 22, 33, 14, 25, 36}));

  auto c = runOp(OpKind::Mul, {f32({2, 1}, {1, 2}), f32({1, 3}, {1, 10, 100})});
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(values<float>((*c)[0]), (std::vector<float>{1, 10, 100, 2, 20, 200}));
}

TEST(Interpreter, SelectAndCompare) {
  Tensor cond = boolTensor({2}, {true, false});
  auto r = runOp(OpKind::Select, {cond, f32({2, 2}, {1, 2, 3, 4}), f32({}, {-1})});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{1, -1, 3, -1}));
  auto l = runOp(OpKind::Less, {f32({3}, {1, 2, 3}), f32({1}, {2})});
  ASSERT_TRUE(l);
  EXPECT_EQ((*l)[0].dtype(), DType::Bool);
  EXPECT_EQ(values<bool>((*l)[0]), (std::vector<bool>{true, false, false}));
}

TEST(Interpreter, IntegerArithmeticWraps) {
  Tensor a = Tensor::fromVector<int8_t>(DType::I8, {3}, {127, -128, 100});
  Tensor b = Tensor::fromVector<int8_t>(DType::I8, {3}, {1, -1, 2});
  auto s = runOp(OpKind::Add, {a, b});
  ASSERT_TRUE(s);
  EXPECT_EQ(values<int8_t>((*s)[0]), (std::vector<int8_t>{-128, 127, 102}));
  auto m = runOp(OpKind::Mul, {a, b});
  ASSERT_TRUE(m);
  EXPECT_EQ(values<int8_t>((*m)[0]), (std::vector<int8_t>{127, -128, -56}));
  Tensor big = Tensor::fromVector<int64_t>(DType::I64, {1}, {INT64_MIN});
  auto n = runOp(OpKind::Neg, {big});
  ASSERT_TRUE(n);
  EXPECT_EQ(values<int64_t>((*n)[0])[0], INT64_MIN);
  Tensor z = Tensor::fromVector<int32_t>(DType::I32, {2}, {7, INT32_MIN});
  Tensor d = Tensor::fromVector<int32_t>(DType::I32, {2}, {0, -1});
  auto q = runOp(OpKind::Div, {z, d});
  ASSERT_TRUE(q);
  EXPECT_EQ(values<int32_t>((*q)[0]), (std::vector<int32_t>{0, INT32_MIN}));
  Tensor u = Tensor::fromVector<uint8_t>(DType::U8, {3}, {1, 255, 16});
  Tensor sh = Tensor::fromVector<uint8_t>(DType::U8, {3}, {7, 1, 8});
  auto l = runOp(OpKind::ShiftLeft, {u, sh});
  ASSERT_TRUE(l);
  EXPECT_EQ(values<uint8_t>((*l)[0]), (std::vector<uint8_t>{128, 254, 0}));
  Tensor base = Tensor::fromVector<int32_t>(DType::I32, {3}, {2, -3, 5});
  Tensor ex = Tensor::fromVector<int32_t>(DType::I32, {3}, {10, 3, 0});
  auto p = runOp(OpKind::Pow, {base, ex});
  ASSERT_TRUE(p);
  EXPECT_EQ(values<int32_t>((*p)[0]), (std::vector<int32_t>{1024, -27, 1}));
}

TEST(Interpreter, ModAndFModSigns) {
  Tensor a = Tensor::fromVector<int32_t>(DType::I32, {4}, {7, -7, 7, -7});
  Tensor b = Tensor::fromVector<int32_t>(DType::I32, {4}, {3, 3, -3, -3});
  auto m = runOp(OpKind::Mod, {a, b});
  ASSERT_TRUE(m);
  EXPECT_EQ(values<int32_t>((*m)[0]), (std::vector<int32_t>{1, 2, -2, -1}));
  auto f = runOp(OpKind::FMod, {a, b});
  ASSERT_TRUE(f);
  EXPECT_EQ(values<int32_t>((*f)[0]), (std::vector<int32_t>{1, -1, 1, -1}));
  auto fm = runOp(OpKind::Mod, {f32({2}, {-5.5f, 5.5f}), f32({2}, {2, -2})});
  ASSERT_TRUE(fm);
  EXPECT_EQ(values<float>((*fm)[0]), (std::vector<float>{0.5f, -0.5f}));
  auto ff = runOp(OpKind::FMod, {f32({2}, {-5.5f, 5.5f}), f32({2}, {2, -2})});
  ASSERT_TRUE(ff);
  EXPECT_EQ(values<float>((*ff)[0]), (std::vector<float>{-1.5f, 1.5f}));
}

TEST(Interpreter, MaxPropagatesNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = runOp(OpKind::Max, {f32({3}, {nan, 1, 2}), f32({3}, {0, nan, 3})});
  ASSERT_TRUE(r);
  std::vector<float> v = values<float>((*r)[0]);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], 3);
  auto red = runOp(OpKind::ReduceMax, {f32({3}, {1, nan, 2})},
                   {{"axes", std::vector<int64_t>{}}, {"keepdims", int64_t(0)}});
  ASSERT_TRUE(red);
  EXPECT_TRUE(std::isnan(values<float>((*red)[0])[0]));
}

TEST(Interpreter, HalfComputesInFloat) {
  Tensor a = Tensor::fromVector<uint16_t>(DType::F16, {2},
                                          {floatToHalf(1.0f), floatToHalf(65504.0f)});
  auto r = runOp(OpKind::Add, {a, a});
  ASSERT_TRUE(r);
  std::vector<uint16_t> v = values<uint16_t>((*r)[0]);
  EXPECT_EQ(halfToFloat(v[0]), 2.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(v[1])));
}

namespace {
std::vector<uint8_t> castToBytes(const Tensor &x, DType to, int64_t saturate = 1) {
  auto r = runOp(OpKind::Cast, {x}, {{"to", to}, {"saturate", saturate}});
  EXPECT_TRUE(r) << r.error().message();
  if (!r)
    return {};
  return values<uint8_t>((*r)[0]);
}
} // namespace

TEST(Interpreter, CastFloat8) {
  float inf = std::numeric_limits<float>::infinity();
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({7}, {1e6f, inf, -inf, nan, 0.4789254665f, -1e-7f, 464.0f});
  EXPECT_EQ(castToBytes(x, DType::F8E4M3FN),
            (std::vector<uint8_t>{0x7e, 0x7e, 0xfe, 0x7f, 0x2f, 0x80, 0x7e}));
  EXPECT_EQ(castToBytes(x, DType::F8E4M3FN, 0),
            (std::vector<uint8_t>{0x7f, 0x7f, 0xff, 0x7f, 0x2f, 0x80, 0x7e}));
  EXPECT_EQ(castToBytes(x, DType::F8E4M3FNUZ),
            (std::vector<uint8_t>{0x7f, 0x7f, 0xff, 0x80, 0x37, 0x00, 0x7f}));
  EXPECT_EQ(castToBytes(x, DType::F8E5M2),
            (std::vector<uint8_t>{0x7b, 0x7b, 0xfb, 0x7e, 0x38, 0x80, 0x5f}));
  EXPECT_EQ(castToBytes(x, DType::F8E5M2, 0),
            (std::vector<uint8_t>{0x7c, 0x7c, 0xfc, 0x7e, 0x38, 0x80, 0x5f}));
  EXPECT_EQ(castToBytes(x, DType::F8E5M2FNUZ, 0),
            (std::vector<uint8_t>{0x80, 0x80, 0x80, 0x80, 0x3c, 0x00, 0x63}));
  // And back: f8e4m3fn 0x7e is 448, 0x01 the smallest subnormal 2^-9.
  Tensor back = Tensor::fromVector<uint8_t>(DType::F8E4M3FN, {3}, {0x7e, 0x01, 0xff});
  auto r = runOp(OpKind::Cast, {back}, {{"to", DType::F32}});
  ASSERT_TRUE(r);
  std::vector<float> v = values<float>((*r)[0]);
  EXPECT_EQ(v[0], 448.0f);
  EXPECT_EQ(v[1], std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(v[2]));
}

TEST(Interpreter, CastSmallFormats) {
  float inf = std::numeric_limits<float>::infinity();
  Tensor x = f32({8}, {0.25f, 1.05f, -3.5f, 9.0f, -inf, 0.0f, -0.0f, 2.5f});
  EXPECT_EQ(castToBytes(x, DType::F4E2M1),
            (std::vector<uint8_t>{0x0, 0x2, 0xe, 0x7, 0xf, 0x0, 0x8, 0x4}));
  Tensor ints = f32({5}, {-9, -8, 7, 8, 15});
  EXPECT_EQ(castToBytes(ints, DType::I4), (std::vector<uint8_t>{0x7, 0x8, 0x7, 0x8, 0xf}));
  EXPECT_EQ(castToBytes(ints, DType::U2), (std::vector<uint8_t>{0x3, 0x0, 0x3, 0x0, 0x3}));
  Tensor e = f32({8}, {0.0f, 0.124f, 0.25f, 0.5f, 1.1f, 2.0f, 4.0f, 8.0f});
  EXPECT_EQ(castToBytes(e, DType::F8E8M0),
            (std::vector<uint8_t>{0x00, 0x7c, 0x7d, 0x7e, 0x80, 0x80, 0x81, 0x82}));
  Tensor i4 = Tensor::fromVector<uint8_t>(DType::I4, {2}, {0x8, 0x7});
  auto r = runOp(OpKind::Cast, {i4}, {{"to", DType::I32}});
  ASSERT_TRUE(r);
  EXPECT_EQ(values<int32_t>((*r)[0]), (std::vector<int32_t>{-8, 7}));
}

TEST(Interpreter, CastEdgeCases) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  auto r = runOp(OpKind::Cast, {f32({5}, {nan, inf, -inf, -2.7f, 2.7f})}, {{"to", DType::I32}});
  ASSERT_TRUE(r) << r.error().message();
  std::vector<int32_t> v = values<int32_t>((*r)[0]);
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[3], -2);
  EXPECT_EQ(v[4], 2);
  auto b = runOp(OpKind::Cast, {f32({3}, {0.0f, nan, -0.5f})}, {{"to", DType::Bool}});
  ASSERT_TRUE(b);
  EXPECT_EQ(values<bool>((*b)[0]), (std::vector<bool>{false, true, true}));
  // f32 -> f16 rounds to nearest even and overflows to infinity.
  auto h = runOp(OpKind::Cast, {f32({3}, {1.0f + 1.0f / 2048, 65520.0f, 1.0f + 3.0f / 2048})},
                 {{"to", DType::F16}});
  ASSERT_TRUE(h);
  EXPECT_EQ(values<uint16_t>((*h)[0]), (std::vector<uint16_t>{0x3c00, 0x7c00, 0x3c02}));
  Tensor d = Tensor::fromVector<double>(DType::F64, {1}, {1.0 + 1.0 / 2048 + 1e-12});
  auto hd = runOp(OpKind::Cast, {d}, {{"to", DType::F16}});
  ASSERT_TRUE(hd);
  EXPECT_EQ(values<uint16_t>((*hd)[0])[0], 0x3c01); // no double rounding through f32
}

TEST(Interpreter, Reductions) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto all = runOp(OpKind::ReduceSum, {x}, {{"axes", std::vector<int64_t>{}},
                                            {"keepdims", int64_t(1)}});
  ASSERT_TRUE(all) << all.error().message();
  EXPECT_EQ((*all)[0].extents(), (Extents{1, 1}));
  EXPECT_EQ(values<float>((*all)[0])[0], 21);
  auto mean = runOp(OpKind::ReduceMean, {x}, {{"axes", std::vector<int64_t>{-1}},
                                              {"keepdims", int64_t(0)}});
  ASSERT_TRUE(mean);
  EXPECT_EQ((*mean)[0].extents(), (Extents{2}));
  EXPECT_EQ(values<float>((*mean)[0]), (std::vector<float>{2, 5}));
  auto prod = runOp(OpKind::ReduceProd, {x}, {{"axes", std::vector<int64_t>{0}},
                                              {"keepdims", int64_t(1)}});
  ASSERT_TRUE(prod);
  EXPECT_EQ(values<float>((*prod)[0]), (std::vector<float>{4, 10, 18}));
  Tensor empty = Tensor::zeros(DType::F32, {2, 0, 4});
  auto es = runOp(OpKind::ReduceSum, {empty}, {{"axes", std::vector<int64_t>{1}},
                                               {"keepdims", int64_t(1)}});
  ASSERT_TRUE(es);
  EXPECT_EQ((*es)[0].extents(), (Extents{2, 1, 4}));
  EXPECT_EQ(values<float>((*es)[0]), std::vector<float>(8, 0.0f));
  auto emn = runOp(OpKind::ReduceMin, {empty}, {{"axes", std::vector<int64_t>{1}},
                                                {"keepdims", int64_t(0)}});
  ASSERT_TRUE(emn);
  EXPECT_EQ(values<float>((*emn)[0])[0], std::numeric_limits<float>::infinity());
  auto ep = runOp(OpKind::ReduceProd, {empty}, {{"axes", std::vector<int64_t>{1}},
                                                {"keepdims", int64_t(0)}});
  ASSERT_TRUE(ep);
  EXPECT_EQ(values<float>((*ep)[0])[0], 1.0f);
  Tensor bools = boolTensor({2, 2}, {true, false, false, false});
  auto bm = runOp(OpKind::ReduceMax, {bools}, {{"axes", std::vector<int64_t>{1}},
                                               {"keepdims", int64_t(0)}});
  ASSERT_TRUE(bm) << bm.error().message();
  EXPECT_EQ(values<bool>((*bm)[0]), (std::vector<bool>{true, false}));
}

TEST(Interpreter, ArgMaxAndCumSum) {
  Tensor x = f32({2, 3}, {1, 3, 3, 5, 0, 5});
  auto a = runOp(OpKind::ArgMax, {x}, {{"axis", int64_t(1)}, {"keepdims", int64_t(0)},
                                       {"select_last_index", int64_t(0)}});
  ASSERT_TRUE(a);
  EXPECT_EQ(values<int64_t>((*a)[0]), (std::vector<int64_t>{1, 0}));
  auto al = runOp(OpKind::ArgMax, {x}, {{"axis", int64_t(1)}, {"keepdims", int64_t(1)},
                                        {"select_last_index", int64_t(1)}});
  ASSERT_TRUE(al);
  EXPECT_EQ((*al)[0].extents(), (Extents{2, 1}));
  EXPECT_EQ(values<int64_t>((*al)[0]), (std::vector<int64_t>{2, 2}));
  auto c = runOp(OpKind::CumSum, {f32({4}, {1, 2, 3, 4})},
                 {{"axis", int64_t(0)}, {"exclusive", int64_t(1)}, {"reverse", int64_t(1)}});
  ASSERT_TRUE(c);
  EXPECT_EQ(values<float>((*c)[0]), (std::vector<float>{9, 7, 4, 0}));
  auto p = runOp(OpKind::CumProd, {f32({4}, {1, 2, 3, 4})},
                 {{"axis", int64_t(0)}, {"exclusive", int64_t(1)}, {"reverse", int64_t(1)}});
  ASSERT_TRUE(p);
  EXPECT_EQ(values<float>((*p)[0]), (std::vector<float>{24, 12, 4, 1}));
  auto pi = runOp(OpKind::CumProd, {f32({4}, {1, 2, 3, 4})},
                  {{"axis", int64_t(0)}, {"exclusive", int64_t(0)}, {"reverse", int64_t(0)}});
  ASSERT_TRUE(pi);
  EXPECT_EQ(values<float>((*pi)[0]), (std::vector<float>{1, 2, 6, 24}));
}

TEST(Interpreter, TopKTiesAndErrors) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {5}));
  Tensor kt = Tensor::fromVector<int64_t>(DType::I64, {1}, {3});
  Node *k = *g.createInferred(OpKind::Constant, {}, {{"value", kt}});
  Expected<Node *> t = g.createInferred(OpKind::TopK, {x, k->result()},
                                        {{"axis", int64_t(0)}, {"largest", int64_t(1)},
                                         {"sorted", int64_t(1)}},
                                        "topk", 2);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ((*t)->result(0)->type().str(), "f32[3]");
  g.setOutputs((*t)->results());
  auto r = interpret(g, {f32({5}, {2, 5, 2, 5, 1})});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{5, 5, 2}));
  EXPECT_EQ(values<int64_t>((*r)[1]), (std::vector<int64_t>{1, 3, 0}));

  // k larger than the axis: a clear error from the shape rule.
  Tensor big = Tensor::fromVector<int64_t>(DType::I64, {1}, {9});
  Node *k9 = *g.createInferred(OpKind::Constant, {}, {{"value", big}});
  Expected<Node *> bad = g.createInferred(OpKind::TopK, {x, k9->result()},
                                          {{"axis", int64_t(0)}, {"largest", int64_t(1)},
                                           {"sorted", int64_t(1)}},
                                          "", 2);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("larger than"), std::string::npos);

  // Smallest, with k from a graph input: the k dim is a fresh symbol.
  Graph g2;
  Value *x2 = g2.addInput("x", TensorType(DType::F32, {5}));
  Value *k2 = g2.addInput("k", TensorType(DType::I64, {1}));
  Expected<Node *> t2 = g2.createInferred(OpKind::TopK, {x2, k2},
                                          {{"axis", int64_t(-1)}, {"largest", int64_t(0)},
                                           {"sorted", int64_t(1)}},
                                          "", 2);
  ASSERT_TRUE(t2) << t2.error().message();
  EXPECT_TRUE((*t2)->result(0)->shape()[0].isSymbolic());
  g2.setOutputs((*t2)->results());
  auto r2 = interpret(g2, {f32({5}, {2, 5, 2, 5, 1}),
                           Tensor::fromVector<int64_t>(DType::I64, {1}, {2})});
  ASSERT_TRUE(r2) << r2.error().message();
  EXPECT_EQ(values<int64_t>((*r2)[1]), (std::vector<int64_t>{4, 0}));
  auto r3 = interpret(g2, {f32({5}, {2, 5, 2, 5, 1}),
                           Tensor::fromVector<int64_t>(DType::I64, {1}, {6})});
  ASSERT_FALSE(r3);
  EXPECT_NE(r3.error().message().find("larger than"), std::string::npos);
}

TEST(Interpreter, RejectsWrongInputShape) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {Dim::symbol("N"), 3}));
  Value *y = g.addInput("y", TensorType(DType::F32, {Dim::symbol("N"), 3}));
  Node *n = *g.createInferred(OpKind::Add, {x, y});
  g.setOutputs({n->result()});
  auto r = interpret(g, {f32({2, 4}, std::vector<float>(8, 0)),
                         f32({2, 3}, std::vector<float>(6, 0))});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "input 'x': expected f32[N,3] but got f32[2,4]");
  auto s = interpret(g, {f32({2, 3}, std::vector<float>(6, 0)),
                         f32({1, 3}, std::vector<float>(3, 0))});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("input 'y'"), std::string::npos);
  auto c = interpret(g, {f32({2, 3}, std::vector<float>(6, 0))});
  ASSERT_FALSE(c);
  auto ok = interpret(g, {f32({1, 3}, {1, 2, 3}), f32({1, 3}, {1, 1, 1})});
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(values<float>((*ok)[0]), (std::vector<float>{2, 3, 4}));
}

TEST(Interpreter, OutputMayBeAnInput) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2}));
  Node *n = *g.createInferred(OpKind::Neg, {x});
  g.setOutputs({x, n->result(), n->result()});
  auto r = interpret(g, {f32({2}, {1, 2})});
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(values<float>((*r)[2]), (std::vector<float>{-1, -2}));
}
