// Unit tests of the data-movement ops: shape rules (static and symbolic) and interpreter values.
#include <gtest/gtest.h>

#include <limits>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Verifier.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

Tensor i64s(const Extents &e, const std::vector<int64_t> &v) {
  return Tensor::fromVector<int64_t>(DType::I64, e, v);
}
Tensor i64v(const std::vector<int64_t> &v) {
  return i64s({static_cast<int64_t>(v.size())}, v);
}
Tensor f32s(const Extents &e, const std::vector<float> &v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}
/// 0, 1, 2, ... as f32.
Tensor iota(const Extents &e) {
  Tensor t = Tensor::zeros(DType::F32, e);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = static_cast<float>(i);
  return t;
}

Value *constant(Graph &g, const Tensor &t) {
  Expected<Node *> n = g.createInferred(OpKind::Constant, {}, {{"value", t}});
  EXPECT_TRUE(n) << n.error().message();
  return (*n)->result();
}

Node *make(Graph &g, OpKind k, std::vector<Value *> ops, AttrMap attrs = {}, int numResults = -1) {
  Expected<Node *> n = g.createInferred(k, std::move(ops), std::move(attrs), "n", numResults);
  EXPECT_TRUE(n) << n.error().message();
  return n ? *n : nullptr;
}

std::string inferError(Graph &g, OpKind k, std::vector<Value *> ops, AttrMap attrs = {}) {
  Expected<Node *> n = g.createInferred(k, std::move(ops), std::move(attrs), "bad");
  EXPECT_FALSE(n);
  return n ? std::string() : n.error().message();
}

/// Runs g with its outputs set to `outs`.
std::vector<Tensor> run(Graph &g, std::vector<Value *> outs, std::vector<Tensor> inputs = {}) {
  g.setOutputs(outs);
  Error v = verify(g);
  EXPECT_FALSE(v) << v.message();
  Expected<std::vector<Tensor>> r = interpret(g, inputs);
  EXPECT_TRUE(r) << r.error().message();
  return r ? *r : std::vector<Tensor>{};
}

std::string runError(Graph &g, std::vector<Value *> outs, std::vector<Tensor> inputs = {}) {
  g.setOutputs(outs);
  Expected<std::vector<Tensor>> r = interpret(g, inputs);
  EXPECT_FALSE(r);
  return r ? std::string() : r.error().message();
}

std::vector<float> floats(const Tensor &t) {
  EXPECT_EQ(t.dtype(), DType::F32);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numElements());
}
std::vector<int64_t> ints(const Tensor &t) { return t.toInt64Vector(); }

Dim sym(const char *n) { return Dim::symbol(n); }

} // namespace

TEST(DataMovement, ShapeOfStartEnd) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {sym("N"), 3, 4, 5}));
  Node *a = make(g, OpKind::ShapeOf, {x}, {{"start", int64_t(1)}, {"end", int64_t(-1)}});
  EXPECT_EQ(a->result()->type().str(), "i64[2]");
  Node *b = make(g, OpKind::ShapeOf, {x}, {{"start", int64_t(-10)}, {"end", int64_t(10)}});
  EXPECT_EQ(b->result()->type().str(), "i64[4]");
  Node *c = make(g, OpKind::ShapeOf, {x}, {{"start", int64_t(3)}, {"end", int64_t(1)}});
  EXPECT_EQ(c->result()->type().str(), "i64[0]");
  auto r = run(g, {a->result(), b->result(), c->result()}, {iota({2, 3, 4, 5})});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(ints(r[0]), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ints(r[1]), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(r[2].numElements(), 0);
}

TEST(DataMovement, ReshapeStaticSymbolicAndAllowZero) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {sym("N"), 3, 4}));
  Node *a = make(g, OpKind::Reshape, {x, constant(g, i64v({0, -1}))});
  EXPECT_EQ(a->result()->type().str(), "f32[N,12]");
  Node *b = make(g, OpKind::Reshape, {a->result(), constant(g, i64v({-1, 3, 2, 2}))});
  EXPECT_EQ(b->result()->type().str(), "f32[N,3,2,2]");
  Node *c = make(g, OpKind::Reshape, {x, constant(g, i64v({-1}))});
  EXPECT_TRUE(c->result()->shape()[0].isSymbolic());
  // A shape that is not a constant: the rank comes from its static length.
  Value *s = g.addInput("s", TensorType(DType::I64, {3}));
  Node *d = make(g, OpKind::Reshape, {x, s});
  EXPECT_EQ(d->result()->rank(), 3);
  EXPECT_TRUE(d->result()->shape()[1].isSymbolic());
  auto r = run(g, {b->result(), d->result()}, {iota({2, 3, 4}), i64v({4, 3, 2})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].extents(), (Extents{2, 3, 2, 2}));
  EXPECT_EQ(floats(r[0])[23], 23.0f);
  EXPECT_EQ(r[1].extents(), (Extents{4, 3, 2}));

  Graph h;
  Value *y = h.addInput("y", TensorType(DType::F32, {0, 3}));
  Node *z = make(h, OpKind::Reshape, {y, constant(h, i64v({3, 0}))}, {{"allowzero", int64_t(1)}});
  EXPECT_EQ(z->result()->type().str(), "f32[3,0]");
  EXPECT_NE(inferError(h, OpKind::Reshape, {y, constant(h, i64v({0, -1}))},
                      {{"allowzero", int64_t(1)}})
                .find("0 and -1"),
            std::string::npos);
  EXPECT_NE(inferError(h, OpKind::Reshape, {constant(h, iota({2, 3})), constant(h, i64v({4, 2}))})
                .find("cannot reshape"),
            std::string::npos);
}

TEST(DataMovement, FlattenSqueezeUnsqueeze) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {sym("N"), 1, 3, 1}));
  Node *f = make(g, OpKind::Flatten, {x}, {{"axis", int64_t(2)}});
  EXPECT_EQ(f->result()->type().str(), "f32[N,3]");
  Node *f0 = make(g, OpKind::Flatten, {x}, {{"axis", int64_t(0)}});
  EXPECT_EQ(f0->result()->shape()[0], Dim(1));
  Node *s = make(g, OpKind::Squeeze, {x}, {{"axes", std::vector<int64_t>{}}});
  EXPECT_EQ(s->result()->type().str(), "f32[N,3]");
  Node *s2 = make(g, OpKind::Squeeze, {x}, {{"axes", std::vector<int64_t>{-1}}});
  EXPECT_EQ(s2->result()->type().str(), "f32[N,1,3]");
  EXPECT_NE(inferError(g, OpKind::Squeeze, {x}, {{"axes", std::vector<int64_t>{2}}}).find("size is 3"),
            std::string::npos);
  Node *u = make(g, OpKind::Unsqueeze, {s->result()}, {{"axes", std::vector<int64_t>{-1, 0}}});
  EXPECT_EQ(u->result()->type().str(), "f32[1,N,3,1]");
  auto r = run(g, {f->result(), u->result()}, {iota({2, 1, 3, 1})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].extents(), (Extents{2, 3}));
  EXPECT_EQ(r[1].extents(), (Extents{1, 2, 3, 1}));
}

TEST(DataMovement, TransposeSymbolicAndValues) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::I64, {sym("N"), 2, 3}));
  Node *t = make(g, OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  EXPECT_EQ(t->result()->type().str(), "i64[3,N,2]");
  EXPECT_NE(inferError(g, OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{0, 0, 1}}})
                .find("not a permutation"),
            std::string::npos);
  std::vector<int64_t> v(12);
  for (int i = 0; i < 12; ++i)
    v[i] = i;
  auto r = run(g, {t->result()}, {i64s({2, 2, 3}, v)});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].extents(), (Extents{3, 2, 2}));
  // out[k][n][j] = x[n][j][k] = n*6 + j*3 + k
  EXPECT_EQ(ints(r[0]), (std::vector<int64_t>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
}

TEST(DataMovement, ExpandBothWays) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::U8, {3, 1}));
  Node *e = make(g, OpKind::Expand, {x, constant(g, i64v({2, 1, 4}))});
  EXPECT_EQ(e->result()->type().str(), "u8[2,3,4]");
  Value *s = g.addInput("s", TensorType(DType::I64, {2}));
  Node *e2 = make(g, OpKind::Expand, {x, s});
  EXPECT_EQ(e2->result()->shape()[0], Dim(3));
  EXPECT_TRUE(e2->result()->shape()[1].isSymbolic());
  auto r = run(g, {e->result()},
               {Tensor::fromVector<uint8_t>(DType::U8, {3, 1}, {7, 8, 9}), i64v({3, 5})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].extents(), (Extents{2, 3, 4}));
  EXPECT_EQ(r[0].data<uint8_t>()[4], 8);
  EXPECT_EQ(r[0].data<uint8_t>()[23], 9);
}

TEST(DataMovement, ConcatAndSplit) {
  Graph g;
  Value *a = g.addInput("a", TensorType(DType::F32, {sym("N"), 2}));
  Value *b = g.addInput("b", TensorType(DType::F32, {sym("M"), 2}));
  Value *c = g.addInput("c", TensorType(DType::F32, {3, 2}));
  Node *ab = make(g, OpKind::Concat, {a, b}, {{"axis", int64_t(0)}});
  EXPECT_TRUE(ab->result()->shape()[0].isSymbolic());
  EXPECT_NE(ab->result()->shape()[0], sym("N"));
  Node *cc = make(g, OpKind::Concat, {c, c}, {{"axis", int64_t(-2)}});
  EXPECT_EQ(cc->result()->type().str(), "f32[6,2]");
  Node *ac = make(g, OpKind::Concat, {a, c}, {{"axis", int64_t(1)}});
  EXPECT_EQ(ac->result()->type().str(), "f32[3,4]");
  Node *sp = make(g, OpKind::Split, {cc->result()},
                  {{"axis", int64_t(0)}, {"sizes", std::vector<int64_t>{1, 5}}}, 2);
  EXPECT_EQ(sp->result(0)->type().str(), "f32[1,2]");
  EXPECT_EQ(sp->result(1)->type().str(), "f32[5,2]");
  EXPECT_NE(inferError(g, OpKind::Split, {c}, {{"axis", int64_t(0)}, {"sizes", std::vector<int64_t>{1, 1}}})
                .find("sum to 2"),
            std::string::npos);
  Node *eq = make(g, OpKind::Split, {c},
                  {{"axis", int64_t(0)}, {"sizes", std::vector<int64_t>{}}}, 2);
  EXPECT_EQ(eq->result(0)->type().str(), "f32[2,2]");
  EXPECT_EQ(eq->result(1)->type().str(), "f32[1,2]");
  auto r = run(g, {ab->result(), sp->result(0), sp->result(1), eq->result(1)},
               {iota({3, 2}), iota({2, 2}), iota({3, 2})});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3}));
  EXPECT_EQ(floats(r[1]), (std::vector<float>{0, 1}));
  EXPECT_EQ(floats(r[2]), (std::vector<float>{2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(floats(r[3]), (std::vector<float>{4, 5}));
}

TEST(DataMovement, SliceNegativeStepsAndClamping) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {10}));
  Node *s = make(g, OpKind::Slice,
                 {x, constant(g, i64v({-1})), constant(g, i64v({INT64_MIN})),
                  constant(g, i64v({0})), constant(g, i64v({-3}))});
  EXPECT_EQ(s->result()->type().str(), "f32[4]");
  Node *s2 = make(g, OpKind::Slice, {x, constant(g, i64v({-100})), constant(g, i64v({INT64_MAX}))});
  EXPECT_EQ(s2->result()->type().str(), "f32[10]");
  Node *s3 = make(g, OpKind::Slice, {x, constant(g, i64v({20})), constant(g, i64v({3}))});
  EXPECT_EQ(s3->result()->type().str(), "f32[0]");
  Value *y = g.addInput("y", TensorType(DType::F32, {sym("N"), 4}));
  Node *s4 = make(g, OpKind::Slice,
                  {y, constant(g, i64v({1})), constant(g, i64v({-1})), constant(g, i64v({-1}))});
  EXPECT_EQ(s4->result()->shape()[0], sym("N"));
  EXPECT_EQ(s4->result()->shape()[1], Dim(2));
  EXPECT_NE(inferError(g, OpKind::Slice,
                      {x, constant(g, i64v({0})), constant(g, i64v({1})), constant(g, i64v({0})),
                       constant(g, i64v({0}))})
                .find("steps"),
            std::string::npos);
  auto r = run(g, {s->result(), s2->result(), s3->result(), s4->result()},
               {iota({10}), iota({3, 4})});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{9, 6, 3, 0}));
  EXPECT_EQ(r[1].numElements(), 10);
  EXPECT_EQ(r[2].numElements(), 0);
  EXPECT_EQ(floats(r[3]), (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TEST(DataMovement, PadModes) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {3}));
  Value *pads = constant(g, i64v({2, 2}));
  Node *c = make(g, OpKind::Pad, {x, pads, constant(g, Tensor::scalar<float>(DType::F32, 9.f))},
                 {{"mode", std::string("constant")}});
  EXPECT_EQ(c->result()->type().str(), "f32[7]");
  Node *rf = make(g, OpKind::Pad, {x, pads}, {{"mode", std::string("reflect")}});
  Node *ed = make(g, OpKind::Pad, {x, pads}, {{"mode", std::string("edge")}});
  Node *wr = make(g, OpKind::Pad, {x, pads}, {{"mode", std::string("wrap")}});
  Node *cr = make(g, OpKind::Pad, {x, constant(g, i64v({-1, 1}))}, {{"mode", std::string("edge")}});
  EXPECT_EQ(cr->result()->type().str(), "f32[3]");
  EXPECT_NE(inferError(g, OpKind::Pad, {x, constant(g, i64v({-2, -2}))},
                      {{"mode", std::string("constant")}})
                .find("below zero"),
            std::string::npos);
  EXPECT_NE(inferError(g, OpKind::Pad, {x, pads}, {{"mode", std::string("mirror")}}).find("mirror"),
            std::string::npos);
  auto r = run(g, {c->result(), rf->result(), ed->result(), wr->result(), cr->result()},
               {f32s({3}, {1, 2, 3})});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{9, 9, 1, 2, 3, 9, 9}));
  EXPECT_EQ(floats(r[1]), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(floats(r[2]), (std::vector<float>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(floats(r[3]), (std::vector<float>{2, 3, 1, 2, 3, 1, 2}));
  EXPECT_EQ(floats(r[4]), (std::vector<float>{2, 3, 3}));
}

TEST(DataMovement, Tile) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {sym("N"), 2}));
  Node *t = make(g, OpKind::Tile, {x, constant(g, i64v({1, 2}))});
  EXPECT_EQ(t->result()->type().str(), "f32[N,4]");
  auto r = run(g, {t->result()}, {iota({2, 2})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{0, 1, 0, 1, 2, 3, 2, 3}));
}

TEST(DataMovement, GatherNegativeAndOutOfRange) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {3, 2}));
  Value *idx = g.addInput("i", TensorType(DType::I32, {2, 2}));
  Node *n = make(g, OpKind::Gather, {x, idx}, {{"axis", int64_t(0)}});
  EXPECT_EQ(n->result()->type().str(), "f32[2,2,2]");
  Tensor good = Tensor::fromVector<int32_t>(DType::I32, {2, 2}, {0, -1, 2, 1});
  auto r = run(g, {n->result()}, {iota({3, 2}), good});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{0, 1, 4, 5, 4, 5, 2, 3}));
  Tensor bad = Tensor::fromVector<int32_t>(DType::I32, {2, 2}, {0, 3, 0, 0});
  std::string e = runError(g, {n->result()}, {iota({3, 2}), bad});
  EXPECT_NE(e.find("'n'"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST(DataMovement, GatherElementsAndND) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 3}));
  Value *i = g.addInput("i", TensorType(DType::I64, {2, 2}));
  Node *ge = make(g, OpKind::GatherElements, {x, i}, {{"axis", int64_t(1)}});
  EXPECT_EQ(ge->result()->type().str(), "f32[2,2]");
  Value *y = g.addInput("y", TensorType(DType::F32, {2, 2, 2}));
  Value *j = g.addInput("j", TensorType(DType::I64, {2, 1}));
  Node *gn = make(g, OpKind::GatherND, {y, j}, {{"batch_dims", int64_t(1)}});
  EXPECT_EQ(gn->result()->type().str(), "f32[2,2]");
  auto r = run(g, {ge->result(), gn->result()},
               {iota({2, 3}), i64s({2, 2}, {-1, 0, 1, 1}), iota({2, 2, 2}), i64s({2, 1}, {1, 0})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{2, 0, 4, 4}));
  EXPECT_EQ(floats(r[1]), (std::vector<float>{2, 3, 4, 5}));
  std::string e = runError(g, {gn->result()},
                           {iota({2, 3}), i64s({2, 2}, {0, 0, 0, 0}), iota({2, 2, 2}),
                            i64s({2, 1}, {2, 0})});
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST(DataMovement, ScatterReductions) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {1, 5}));
  Value *i = g.addInput("i", TensorType(DType::I64, {1, 3}));
  Value *u = g.addInput("u", TensorType(DType::F32, {1, 3}));
  Node *add = make(g, OpKind::ScatterElements, {x, i, u},
                   {{"axis", int64_t(1)}, {"reduction", std::string("add")}});
  Node *none = make(g, OpKind::ScatterElements, {x, i, u},
                    {{"axis", int64_t(1)}, {"reduction", std::string("none")}});
  Value *d = g.addInput("d", TensorType(DType::I32, {4, 2}));
  Value *k = g.addInput("k", TensorType(DType::I64, {2, 1}));
  Value *v = g.addInput("v", TensorType(DType::I32, {2, 2}));
  Node *mul = make(g, OpKind::ScatterND, {d, k, v}, {{"reduction", std::string("mul")}});
  Node *mx = make(g, OpKind::ScatterND, {d, k, v}, {{"reduction", std::string("max")}});
  EXPECT_EQ(mul->result()->type().str(), "i32[4,2]");
  EXPECT_NE(inferError(g, OpKind::ScatterND, {d, k, v}, {{"reduction", std::string("avg")}})
                .find("avg"),
            std::string::npos);
  Tensor dv = Tensor::fromVector<int32_t>(DType::I32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor vv = Tensor::fromVector<int32_t>(DType::I32, {2, 2}, {10, 1, 2, 20});
  auto r = run(g, {add->result(), none->result(), mul->result(), mx->result()},
               {f32s({1, 5}, {1, 2, 3, 4, 5}), i64s({1, 3}, {1, -1, 1}), f32s({1, 3}, {10, 20, 30}),
                dv, i64s({2, 1}, {-1, 1}), vv});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{1, 42, 3, 4, 25}));
  EXPECT_EQ(floats(r[1]), (std::vector<float>{1, 30, 3, 4, 20}));
  EXPECT_EQ(ints(r[2]), (std::vector<int64_t>{1, 2, 6, 80, 5, 6, 70, 8}));
  EXPECT_EQ(ints(r[3]), (std::vector<int64_t>{1, 2, 3, 20, 5, 6, 10, 8}));
  std::string e = runError(g, {add->result()},
                           {f32s({1, 5}, {1, 2, 3, 4, 5}), i64s({1, 3}, {1, -6, 1}),
                            f32s({1, 3}, {10, 20, 30}), dv, i64s({2, 1}, {0, 1}), vv});
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST(DataMovement, RangeAndConstantOfShape) {
  Graph g;
  auto i32 = [&](int32_t v) { return constant(g, Tensor::scalar<int32_t>(DType::I32, v)); };
  Node *r1 = make(g, OpKind::Range, {i32(10), i32(4), i32(-3)});
  EXPECT_EQ(r1->result()->type().str(), "i32[2]");
  auto f = [&](float v) { return constant(g, Tensor::scalar<float>(DType::F32, v)); };
  Node *r2 = make(g, OpKind::Range, {f(1), f(2), f(0.25f)});
  EXPECT_EQ(r2->result()->type().str(), "f32[4]");
  Value *lim = g.addInput("lim", TensorType(DType::I32, {}));
  Node *r3 = make(g, OpKind::Range, {i32(0), lim, i32(1)});
  EXPECT_TRUE(r3->result()->shape()[0].isSymbolic());
  Node *c = make(g, OpKind::ConstantOfShape, {constant(g, i64v({2, 3}))},
                 {{"value", Tensor::fromVector<int64_t>(DType::I64, {1}, {7})}});
  EXPECT_EQ(c->result()->type().str(), "i64[2,3]");
  Value *shp = g.addInput("shp", TensorType(DType::I64, {2}));
  Node *c2 = make(g, OpKind::ConstantOfShape, {shp},
                  {{"value", Tensor::fromVector<float>(DType::F32, {1}, {1.5f})}});
  EXPECT_EQ(c2->result()->rank(), 2);
  auto r = run(g, {r1->result(), r2->result(), r3->result(), c->result(), c2->result()},
               {Tensor::scalar<int32_t>(DType::I32, 3), i64v({1, 2})});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(ints(r[0]), (std::vector<int64_t>{10, 7}));
  EXPECT_EQ(floats(r[1]), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(ints(r[2]), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(ints(r[3]), (std::vector<int64_t>(6, 7)));
  EXPECT_EQ(floats(r[4]), (std::vector<float>{1.5f, 1.5f}));
}

// A limit of -inf makes a count of -inf, which no integer holds (converting it was undefined
// behaviour, UBSan's float-cast-overflow): the range is empty, at shape inference (constant
// operands) and in the interpreter (a runtime limit). The same graph in text form is kept in
// tests/fuzz/regressions/text_ir/range-to-minus-inf.nir.
TEST(DataMovement, RangeToMinusInfinityIsEmpty) {
  Graph g;
  auto f = [&](float v) { return constant(g, Tensor::scalar<float>(DType::F32, v)); };
  float inf = std::numeric_limits<float>::infinity();
  Node *r1 = make(g, OpKind::Range, {f(0), f(-inf), f(1)});
  EXPECT_EQ(r1->result()->type().str(), "f32[0]");
  Value *lim = g.addInput("lim", TensorType(DType::F32, {}));
  Node *r2 = make(g, OpKind::Range, {f(0), lim, f(1)});
  auto r = run(g, {r1->result(), r2->result()}, {Tensor::scalar<float>(DType::F32, -inf)});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].numElements(), 0);
  EXPECT_EQ(r[1].numElements(), 0);
}

TEST(DataMovement, OneHotEyeLikeTrilu) {
  Graph g;
  Value *i = g.addInput("i", TensorType(DType::I64, {3}));
  Node *oh = make(g, OpKind::OneHot,
                  {i, constant(g, Tensor::scalar<float>(DType::F32, 3.f)),
                   constant(g, f32s({2}, {0, 5}))},
                  {{"axis", int64_t(-1)}});
  EXPECT_EQ(oh->result()->type().str(), "f32[3,3]");
  Node *oh0 = make(g, OpKind::OneHot,
                   {i, constant(g, Tensor::scalar<int64_t>(DType::I64, 3)),
                    constant(g, f32s({2}, {0, 1}))},
                   {{"axis", int64_t(0)}});
  Value *m = g.addInput("m", TensorType(DType::F32, {2, 3}));
  Node *eye = make(g, OpKind::EyeLike, {m}, {{"k", int64_t(1)}, {"dtype", DType::I32}});
  EXPECT_EQ(eye->result()->type().str(), "i32[2,3]");
  Node *up = make(g, OpKind::Trilu, {m, constant(g, Tensor::scalar<int64_t>(DType::I64, -1))},
                  {{"upper", int64_t(1)}});
  Node *lo = make(g, OpKind::Trilu, {m}, {{"upper", int64_t(0)}});
  auto r = run(g, {oh->result(), oh0->result(), eye->result(), up->result(), lo->result()},
               {i64v({-1, 0, 5}), f32s({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{0, 0, 5, 5, 0, 0, 0, 0, 0}));
  EXPECT_EQ(floats(r[1]), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(ints(r[2]), (std::vector<int64_t>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(floats(r[3]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(floats(r[4]), (std::vector<float>{1, 0, 0, 4, 5, 0}));
}

TEST(DataMovement, NonZero) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 3}));
  Node *n = make(g, OpKind::NonZero, {x});
  EXPECT_EQ(n->result()->shape()[0], Dim(2));
  EXPECT_TRUE(n->result()->shape()[1].isSymbolic());
  auto r = run(g, {n->result()}, {f32s({2, 3}, {0, 1, 0, -2, 0, 3})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].extents(), (Extents{2, 3}));
  EXPECT_EQ(ints(r[0]), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
}

TEST(DataMovement, DepthToSpaceAndBack) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {1, 8, 2, 3}));
  Node *dcr = make(g, OpKind::DepthToSpace, {x},
                   {{"blocksize", int64_t(2)}, {"mode", std::string("DCR")}});
  EXPECT_EQ(dcr->result()->type().str(), "f32[1,2,4,6]");
  Node *crd = make(g, OpKind::DepthToSpace, {x},
                   {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
  Node *back = make(g, OpKind::SpaceToDepth, {dcr->result()}, {{"blocksize", int64_t(2)}});
  EXPECT_EQ(back->result()->type().str(), "f32[1,8,2,3]");
  EXPECT_NE(inferError(g, OpKind::DepthToSpace, {x},
                      {{"blocksize", int64_t(3)}, {"mode", std::string("DCR")}})
                .find("divisible"),
            std::string::npos);
  auto r = run(g, {dcr->result(), crd->result(), back->result()}, {iota({1, 8, 2, 3})});
  ASSERT_EQ(r.size(), 3u);
  // DCR: out[0, c, 2h+i, 2w+j] = x[0, (2i+j)*2 + c, h, w]; CRD: x[0, c*4 + 2i+j, h, w].
  auto at = [](const Tensor &t, int c, int y, int x) { return t.data<float>()[(c * 4 + y) * 6 + x]; };
  EXPECT_EQ(at(r[0], 1, 3, 2), ((1 * 2 + 0) * 2 + 1) * 6 + 1 * 3 + 1);
  EXPECT_EQ(at(r[1], 1, 3, 2), (1 * 4 + 2) * 6 + 1 * 3 + 1);
  EXPECT_EQ(floats(r[2]), floats(iota({1, 8, 2, 3})));
}

TEST(DataMovement, AnyDTypeIsAByteMove) {
  Graph g;
  Value *h = g.addInput("h", TensorType(DType::F16, {2, 2}));
  Value *q = g.addInput("q", TensorType(DType::F8E4M3FN, {3}));
  Node *t = make(g, OpKind::Transpose, {h}, {{"perm", std::vector<int64_t>{1, 0}}});
  Node *p = make(g, OpKind::Pad, {q, constant(g, i64v({1, 1}))}, {{"mode", std::string("wrap")}});
  Node *ga = make(g, OpKind::Gather, {q, constant(g, i64v({-1, 0}))}, {{"axis", int64_t(0)}});
  EXPECT_EQ(ga->result()->type().str(), "f8e4m3fn[2]");
  Node *eye = make(g, OpKind::EyeLike, {h}, {{"k", int64_t(0)}, {"dtype", DType::F8E4M3FN}});
  uint8_t qb[3] = {0x38, 0x40, 0x48};
  auto r = run(g, {t->result(), p->result(), ga->result(), eye->result()},
               {Tensor::fromVector<uint16_t>(DType::F16, {2, 2}, {1, 2, 3, 4}),
                Tensor::fromBytes(DType::F8E4M3FN, {3}, qb)});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(std::vector<uint16_t>(r[0].data<uint16_t>(), r[0].data<uint16_t>() + 4),
            (std::vector<uint16_t>{1, 3, 2, 4}));
  EXPECT_EQ(std::vector<uint8_t>(r[1].data<uint8_t>(), r[1].data<uint8_t>() + 5),
            (std::vector<uint8_t>{0x48, 0x38, 0x40, 0x48, 0x38}));
  EXPECT_EQ(std::vector<uint8_t>(r[2].data<uint8_t>(), r[2].data<uint8_t>() + 2),
            (std::vector<uint8_t>{0x48, 0x38}));
  EXPECT_EQ(std::vector<uint8_t>(r[3].data<uint8_t>(), r[3].data<uint8_t>() + 4),
            (std::vector<uint8_t>{0x38, 0, 0, 0x38}));
}

TEST(DataMovement, NonConstantOperandsGiveFreshDims) {
  Graph g;
  Value *x = g.addInput("x", TensorType(DType::F32, {sym("N"), 4}));
  Value *st = g.addInput("st", TensorType(DType::I64, {1}));
  Value *pads = g.addInput("pads", TensorType(DType::I64, {4}));
  Node *s = make(g, OpKind::Slice, {x, st, constant(g, i64v({INT64_MAX})),
                                    constant(g, i64v({1}))});
  EXPECT_EQ(s->result()->shape()[0], sym("N"));
  EXPECT_TRUE(s->result()->shape()[1].isSymbolic());
  Node *p = make(g, OpKind::Pad, {x, pads}, {{"mode", std::string("constant")}});
  EXPECT_EQ(p->result()->rank(), 2);
  Value *bad = g.addInput("bad", TensorType(DType::I64, {sym("K")}));
  EXPECT_NE(inferError(g, OpKind::Reshape, {x, bad}).find("unknown length"), std::string::npos);
  auto r = run(g, {s->result(), p->result()},
               {iota({2, 4}), i64v({-3}), i64v({0, 1, 1, 0}), i64v({1})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(floats(r[0]), (std::vector<float>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(r[1].extents(), (Extents{3, 5}));
}
