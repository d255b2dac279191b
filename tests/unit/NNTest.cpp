// Unit tests of the NN ops' shape rules and interpreter kernels: matmul, einsum, conv,
// conv_transpose, pools, lrn and resize.
#include <gtest/gtest.h>

#include <cmath>

#include "nnc/ir/Graph.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

TensorType f32(Shape s) {
  return TensorType(DType::F32, std::move(s));
}

std::vector<float> iota(int64_t n, float start = 1) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = start + static_cast<float>(i);
  return v;
}

Tensor tensor(const Extents &e, const std::vector<float> &v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}

std::vector<float> values(const Tensor &t) {
  const float *p = t.data<float>();
  return std::vector<float>(p, p + t.numElements());
}

Value *constant(Graph &g, const Tensor &t) {
  Expected<Node *> n = g.createInferred(OpKind::Constant, {}, {{"value", t}});
  EXPECT_TRUE(n) << n.error().message();
  return (*n)->result();
}

/// Runs a one-node graph over `inputs` (graph inputs get the tensors' types).
std::vector<Tensor> run1(OpKind kind, const std::vector<Tensor> &inputs, AttrMap attrs,
                         int numResults = -1, std::vector<Tensor> constants = {}) {
  Graph g;
  std::vector<Value *> ops;
  for (size_t i = 0; i < inputs.size(); ++i)
    ops.push_back(g.addInput("x" + std::to_string(i), inputs[i].type()));
  for (const Tensor &c : constants)
    ops.push_back(c.isNull() ? nullptr : constant(g, c));
  Expected<Node *> n = g.createInferred(kind, ops, std::move(attrs), "n", numResults);
  EXPECT_TRUE(n) << n.error().message();
  if (!n)
    return {};
  g.setOutputs((*n)->results());
  Expected<std::vector<Tensor>> r = interpret(g, inputs);
  EXPECT_TRUE(r) << r.error().message();
  return r ? *r : std::vector<Tensor>{};
}

AttrMap convAttrs(std::vector<int64_t> strides, std::vector<int64_t> pads,
                  std::vector<int64_t> dilations, int64_t group) {
  return {{"strides", strides}, {"pads", pads}, {"dilations", dilations}, {"group", group}};
}

AttrMap poolAttrs(std::vector<int64_t> kernel, std::vector<int64_t> strides,
                  std::vector<int64_t> pads, int64_t ceil = 0) {
  return {{"kernel_shape", kernel},
          {"strides", strides},
          {"pads", pads},
          {"dilations", std::vector<int64_t>{}},
          {"ceil_mode", ceil}};
}

} // namespace

TEST(NNShape, MatMulBroadcastAndVectors) {
  Graph g;
  Value *a = g.addInput("a", f32({Dim::symbol("N"), 1, 3, 4}));
  Value *b = g.addInput("b", f32({5, 4, 6}));
  Value *v = g.addInput("v", f32({4}));
  Expected<Node *> m = g.createInferred(OpKind::MatMul, {a, b});
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ((*m)->result()->type().str(), "f32[N,5,3,6]");
  Expected<Node *> mv = g.createInferred(OpKind::MatMul, {a, v});
  ASSERT_TRUE(mv) << mv.error().message();
  EXPECT_EQ((*mv)->result()->type().str(), "f32[N,1,3]");
  Expected<Node *> vv = g.createInferred(OpKind::MatMul, {v, v});
  ASSERT_TRUE(vv);
  EXPECT_EQ((*vv)->result()->type().str(), "f32[]");
  Value *bad = g.addInput("bad", f32({5, 6}));
  Expected<Node *> e = g.createInferred(OpKind::MatMul, {a, bad}, {}, "mm");
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("node 'mm'"), std::string::npos);
}

TEST(NNKernel, MatMulBatchBroadcastAnd1D) {
  // [2,2,3] x [3,2] -> [2,2,2]
  Tensor a = tensor({2, 2, 3}, iota(12));
  Tensor b = tensor({3, 2}, {1, 0, 0, 1, 1, 1});
  auto r = run1(OpKind::MatMul, {a, b}, {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].extents(), (Extents{2, 2, 2}));
  EXPECT_EQ(values(r[0]), (std::vector<float>{4, 5, 10, 11, 16, 17, 22, 23}));
  // 1-D x 2-D
  auto r2 = run1(OpKind::MatMul, {tensor({3}, {1, 2, 3}), b}, {});
  EXPECT_EQ(r2[0].extents(), (Extents{2}));
  EXPECT_EQ(values(r2[0]), (std::vector<float>{4, 5}));
  // integer matmul wraps
  Tensor ia = Tensor::fromVector<int32_t>(DType::I32, {1, 2}, {2, 3});
  Tensor ib = Tensor::fromVector<int32_t>(DType::I32, {2, 1}, {4, 5});
  auto r3 = run1(OpKind::MatMul, {ia, ib}, {});
  EXPECT_EQ(r3[0].data<int32_t>()[0], 23);
}

TEST(NNKernel, EinsumTransposeDiagonalAndImplicit) {
  Tensor a = tensor({2, 3}, iota(6));
  auto t = run1(OpKind::Einsum, {a}, {{"equation", std::string("ij->ji")}});
  EXPECT_EQ(t[0].extents(), (Extents{3, 2}));
  EXPECT_EQ(values(t[0]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor sq = tensor({3, 3}, iota(9));
  auto d = run1(OpKind::Einsum, {sq}, {{"equation", std::string("ii->i")}});
  EXPECT_EQ(values(d[0]), (std::vector<float>{1, 5, 9}));
  auto tr = run1(OpKind::Einsum, {sq}, {{"equation", std::string("ii")}});
  EXPECT_EQ(tr[0].rank(), 0);
  EXPECT_EQ(values(tr[0]), (std::vector<float>{15}));
  // implicit output: alphabetical letters used once -> "ik"
  Tensor b = tensor({3, 2}, {1, 0, 0, 1, 1, 1});
  auto mm = run1(OpKind::Einsum, {a, b}, {{"equation", std::string("ij,jk")}});
  EXPECT_EQ(values(mm[0]), (std::vector<float>{4, 5, 10, 11}));
  // ellipsis batch matmul
  Tensor x = tensor({2, 2, 3}, iota(12));
  auto bm = run1(OpKind::Einsum, {x, b}, {{"equation", std::string("...ij,jk->...ik")}});
  EXPECT_EQ(bm[0].extents(), (Extents{2, 2, 2}));
  EXPECT_EQ(values(bm[0]), (std::vector<float>{4, 5, 10, 11, 16, 17, 22, 23}));
}

TEST(NNShape, ConvRejectsBadAttributes) {
  Graph g;
  Value *x = g.addInput("x", f32({Dim::symbol("N"), 4, 8, 8}));
  Value *w = g.addInput("w", f32({6, 2, 3, 3}));
  Expected<Node *> ok =
      g.createInferred(OpKind::Conv, {x, w}, convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 2));
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ((*ok)->result()->type().str(), "f32[N,6,4,4]");
  Expected<Node *> badGroup =
      g.createInferred(OpKind::Conv, {x, w}, convAttrs({}, {}, {}, 3), "c3");
  ASSERT_FALSE(badGroup);
  EXPECT_NE(badGroup.error().message().find("group"), std::string::npos);
  Expected<Node *> badChannels = g.createInferred(OpKind::Conv, {x, w}, convAttrs({}, {}, {}, 1));
  ASSERT_FALSE(badChannels);
  Expected<Node *> badStrides =
      g.createInferred(OpKind::Conv, {x, w}, convAttrs({1, 1, 1}, {}, {}, 2));
  ASSERT_FALSE(badStrides);
  Value *big = g.addInput("big", f32({6, 2, 11, 11}));
  Expected<Node *> tooBig = g.createInferred(OpKind::Conv, {x, big}, convAttrs({}, {}, {}, 2));
  ASSERT_FALSE(tooBig);
  Expected<Node *> pool = g.createInferred(OpKind::MaxPool, {x}, poolAttrs({3}, {}, {}));
  ASSERT_FALSE(pool);
  EXPECT_NE(pool.error().message().find("kernel_shape"), std::string::npos);
}

TEST(NNKernel, ConvPaddingStrideDilationGroup) {
  // 1x1x3x3 input 1..9, 2x2 kernel of ones, pad 1, stride 2.
  Tensor x = tensor({1, 1, 3, 3}, iota(9));
  Tensor w = tensor({1, 1, 2, 2}, {1, 1, 1, 1});
  auto r = run1(OpKind::Conv, {x, w}, convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 1));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].extents(), (Extents{1, 1, 2, 2}));
  // windows start at -1 and 1: {1}, {2+3}, {4+7}, {5+6+8+9}
  EXPECT_EQ(values(r[0]), (std::vector<float>{1, 5, 11, 28}));
  // dilation 2, no pad: single window over the corners + bias
  Tensor bias = tensor({1}, {0.5f});
  auto d = run1(OpKind::Conv, {x, w, bias}, convAttrs({1, 1}, {0, 0, 0, 0}, {2, 2}, 1));
  EXPECT_EQ(d[0].extents(), (Extents{1, 1, 1, 1}));
  EXPECT_EQ(values(d[0]), (std::vector<float>{1 + 3 + 7 + 9 + 0.5f}));
  // depthwise (group 2): channel 0 scaled by 1, channel 1 by 2
  Tensor x2 = tensor({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor w2 = tensor({2, 1, 1, 1}, {1, 2});
  auto gr = run1(OpKind::Conv, {x2, w2}, convAttrs({}, {}, {}, 2));
  EXPECT_EQ(values(gr[0]), (std::vector<float>{1, 2, 6, 8}));
  // SAME_UPPER keeps the size at stride 1
  AttrMap same = convAttrs({}, {}, {}, 1);
  same["auto_pad"] = std::string("SAME_UPPER");
  auto s = run1(OpKind::Conv, {x, w}, same);
  EXPECT_EQ(s[0].extents(), (Extents{1, 1, 3, 3}));
  EXPECT_EQ(values(s[0])[0], 1 + 2 + 4 + 5);
  EXPECT_EQ(values(s[0])[8], 9);
}

TEST(NNKernel, ConvTransposeStrideAndOutputPadding) {
  Tensor x = tensor({1, 1, 2}, {1, 2});
  Tensor w = tensor({1, 1, 3}, {1, 1, 1});
  AttrMap a = convAttrs({2}, {0, 0}, {1}, 1);
  a["output_padding"] = std::vector<int64_t>{1};
  auto r = run1(OpKind::ConvTranspose, {x, w}, a);
  ASSERT_EQ(r.size(), 1u);
  // full = 2*(2-1) + 3 + 1 = 6: [1,1,1+2,2,2,0]
  EXPECT_EQ(values(r[0]), (std::vector<float>{1, 1, 3, 2, 2, 0}));
  a["pads"] = std::vector<int64_t>{1, 1};
  auto p = run1(OpKind::ConvTranspose, {x, w}, a);
  EXPECT_EQ(values(p[0]), (std::vector<float>{1, 3, 2, 2}));
}

TEST(NNKernel, MaxPoolIndicesAndStorageOrder) {
  Tensor x = tensor({1, 1, 3, 3}, {1, 9, 2, 3, 4, 5, 8, 6, 7});
  AttrMap a = poolAttrs({2, 2}, {1, 1}, {0, 0, 0, 0});
  auto r = run1(OpKind::MaxPool, {x}, a, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(values(r[0]), (std::vector<float>{9, 9, 8, 7}));
  const int64_t *idx = r[1].data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(idx, idx + 4), (std::vector<int64_t>{1, 1, 6, 8}));
  a["storage_order"] = int64_t(1);
  auto c = run1(OpKind::MaxPool, {x}, a, 2);
  const int64_t *cidx = c[1].data<int64_t>();
  // column-major: (h, w) -> w*3 + h
  EXPECT_EQ(std::vector<int64_t>(cidx, cidx + 4), (std::vector<int64_t>{3, 3, 2, 8}));
  // ceil_mode: 3 wide, kernel 2, stride 2 -> 2 outputs (last window starts inside)
  auto ceil = run1(OpKind::MaxPool, {x}, poolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0}, 1));
  EXPECT_EQ(ceil[0].extents(), (Extents{1, 1, 2, 2}));
  EXPECT_EQ(values(ceil[0]), (std::vector<float>{9, 5, 8, 7}));
}

TEST(NNKernel, AvgPoolCountIncludePad) {
  Tensor x = tensor({1, 1, 2, 2}, {1, 2, 3, 4});
  AttrMap a = poolAttrs({2, 2}, {1, 1}, {1, 1, 0, 0});
  a["count_include_pad"] = int64_t(0);
  auto r = run1(OpKind::AvgPool, {x}, a);
  EXPECT_EQ(r[0].extents(), (Extents{1, 1, 2, 2}));
  EXPECT_EQ(values(r[0]), (std::vector<float>{1, 1.5f, 2, 2.5f}));
  a["count_include_pad"] = int64_t(1);
  auto p = run1(OpKind::AvgPool, {x}, a);
  EXPECT_EQ(values(p[0]), (std::vector<float>{0.25f, 0.75f, 1, 2.5f}));
}

TEST(NNKernel, LRNMatchesFormula) {
  Tensor x = tensor({1, 3, 1, 1}, {1, 2, 3});
  AttrMap a{{"size", int64_t(3)}, {"alpha", 0.3}, {"beta", 0.75}, {"bias", 2.0}};
  auto r = run1(OpKind::LRN, {x}, a);
  std::vector<float> v = values(r[0]);
  EXPECT_NEAR(v[0], 1 / std::pow(2 + 0.1 * (1 + 4), 0.75), 1e-6);
  EXPECT_NEAR(v[1], 2 / std::pow(2 + 0.1 * (1 + 4 + 9), 0.75), 1e-6);
  EXPECT_NEAR(v[2], 3 / std::pow(2 + 0.1 * (4 + 9), 0.75), 1e-6);
}

namespace {
AttrMap resizeAttrs(const std::string &mode, const std::string &ctm,
                    const std::string &nearest = "round_prefer_floor") {
  return {{"mode", mode},
          {"coordinate_transformation_mode", ctm},
          {"nearest_mode", nearest},
          {"cubic_coeff_a", -0.75},
          {"exclude_outside", int64_t(0)},
          {"extrapolation_value", 0.0},
          {"antialias", int64_t(0)},
          {"keep_aspect_ratio_policy", std::string("stretch")}};
}
} // namespace

TEST(NNKernel, ResizeNearestAndLinear) {
  Tensor x = tensor({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor scales = tensor({4}, {1, 1, 2, 2});
  auto n = run1(OpKind::Resize, {x}, resizeAttrs("nearest", "asymmetric", "floor"), -1,
                {Tensor(), scales});
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].extents(), (Extents{1, 1, 4, 4}));
  EXPECT_EQ(values(n[0]), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  auto l = run1(OpKind::Resize, {x}, resizeAttrs("linear", "half_pixel"), -1, {Tensor(), scales});
  // ONNX's test_resize_upsample_scales_linear expected output.
  EXPECT_EQ(values(l[0]), (std::vector<float>{1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f,
                                              2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4}));
  // sizes with axes
  AttrMap ax = resizeAttrs("nearest", "half_pixel");
  ax["axes"] = std::vector<int64_t>{3};
  Tensor sizes = Tensor::fromVector<int64_t>(DType::I64, {1}, {3});
  auto s = run1(OpKind::Resize, {x}, ax, -1, {Tensor(), Tensor(), sizes});
  EXPECT_EQ(s[0].extents(), (Extents{1, 1, 2, 3}));
}

TEST(NNShape, ResizeSymbolicAndConstant) {
  Graph g;
  Value *x = g.addInput("x", f32({Dim::symbol("N"), 3, 10, 10}));
  Value *sc = constant(g, tensor({4}, {1, 1, 0.5f, 2}));
  Expected<Node *> r =
      g.createInferred(OpKind::Resize, {x, nullptr, sc}, resizeAttrs("linear", "half_pixel"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)->result()->type().str(), "f32[N,3,5,20]");
  Value *dyn = g.addInput("s", f32({4}));
  Expected<Node *> d =
      g.createInferred(OpKind::Resize, {x, nullptr, dyn}, resizeAttrs("linear", "half_pixel"));
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ((*d)->result()->rank(), 4);
  EXPECT_TRUE((*d)->result()->shape()[2].isSymbolic());
  Expected<Node *> none =
      g.createInferred(OpKind::Resize, {x}, resizeAttrs("linear", "half_pixel"));
  ASSERT_FALSE(none);
}

TEST(NNKernel, Conv3DMatchesDirectLoops) {
  // N=2, C=4, group 2, M=4, 3-D input 5x4x6, kernel 2x3x2, strides (2,1,2), dilations
  // (1,2,2), asymmetric pads; compared with the convolution written out as loops.
  const int64_t N = 2, C = 4, G = 2, M = 4, D = 5, H = 4, W = 6, KD = 2, KH = 3, KW = 2;
  std::vector<int64_t> st{2, 1, 2}, dil{1, 2, 2}, pads{1, 0, 2, 0, 2, 1};
  std::vector<float> xv(N * C * D * H * W), wv(M * (C / G) * KD * KH * KW), bv{1, -1, 2, 0.5f};
  for (size_t i = 0; i < xv.size(); ++i)
    xv[i] = static_cast<float>((i * 37 % 23)) - 11;
  for (size_t i = 0; i < wv.size(); ++i)
    wv[i] = static_cast<float>((i * 11 % 7)) - 3;
  Tensor x = tensor({N, C, D, H, W}, xv), w = tensor({M, C / G, KD, KH, KW}, wv),
         b = tensor({M}, bv);
  auto r = run1(OpKind::Conv, {x, w, b}, convAttrs(st, pads, dil, G));
  ASSERT_EQ(r.size(), 1u);
  int64_t in[3] = {D, H, W}, k[3] = {KD, KH, KW}, out[3];
  for (int i = 0; i < 3; ++i)
    out[i] = (in[i] + pads[i] + pads[i + 3] - dil[i] * (k[i] - 1) - 1) / st[i] + 1;
  ASSERT_EQ(r[0].extents(), (Extents{N, M, out[0], out[1], out[2]}));
  std::vector<float> got = values(r[0]);
  size_t at = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t od = 0; od < out[0]; ++od)
        for (int64_t oh = 0; oh < out[1]; ++oh)
          for (int64_t ow = 0; ow < out[2]; ++ow, ++at) {
            double s = bv[m];
            int64_t g = m / (M / G);
            for (int64_t c = 0; c < C / G; ++c)
              for (int64_t a = 0; a < KD; ++a)
                for (int64_t bb = 0; bb < KH; ++bb)
                  for (int64_t e = 0; e < KW; ++e) {
                    int64_t id = od * st[0] - pads[0] + a * dil[0];
                    int64_t ih = oh * st[1] - pads[1] + bb * dil[1];
                    int64_t iw = ow * st[2] - pads[2] + e * dil[2];
                    if (id < 0 || id >= D || ih < 0 || ih >= H || iw < 0 || iw >= W)
                      continue;
                    s += xv[(((n * C + g * (C / G) + c) * D + id) * H + ih) * W + iw] *
                         wv[(((m * (C / G) + c) * KD + a) * KH + bb) * KW + e];
                  }
            ASSERT_FLOAT_EQ(got[at], static_cast<float>(s)) << "at " << at;
          }
}
