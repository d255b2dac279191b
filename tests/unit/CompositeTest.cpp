// Unit tests of the composite ops' shape rules and interpreter kernels: softmax family,
// normalizations, attention and rotary embedding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nnc/ir/Graph.h"
#include "nnc/runtime/Interpreter.h"

using namespace nnc;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Builds a one-node graph (a null Tensor is an absent operand), runs it, returns the results.
Expected<std::vector<Tensor>> runOp(OpKind kind, const std::vector<Tensor> &inputs,
                                    AttrMap attrs = {}, int numResults = -1) {
  Graph g;
  std::vector<Value *> ins;
  std::vector<Tensor> given;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].isNull()) {
      ins.push_back(nullptr);
      continue;
    }
    ins.push_back(g.addInput("x" + std::to_string(i), inputs[i].type()));
    given.push_back(inputs[i]);
  }
  Expected<Node *> n = g.createInferred(kind, ins, std::move(attrs), "op", numResults);
  if (!n)
    return n.takeError();
  g.setOutputs((*n)->results());
  return interpret(g, given);
}

/// The result types the shape rule gives for inputs of these types.
Expected<std::vector<TensorType>> inferTypes(OpKind kind, const std::vector<TensorType> &types,
                                             AttrMap attrs = {}, int numResults = -1) {
  Graph g;
  std::vector<Value *> ins;
  for (size_t i = 0; i < types.size(); ++i)
    ins.push_back(g.addInput("x" + std::to_string(i), types[i]));
  Expected<Node *> n = g.createInferred(kind, ins, std::move(attrs), "op", numResults);
  if (!n)
    return n.takeError();
  std::vector<TensorType> r;
  for (Value *v : (*n)->results())
    r.push_back(v->type());
  return r;
}

Tensor f32(const Extents &e, std::vector<float> v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}
std::vector<double> values(const Tensor &t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numElements(); ++i)
    r.push_back(t.elementAsDouble(i));
  return r;
}
/// Deterministic pseudo-random values in [-1, 1).
std::vector<float> ramp(size_t n, int seed) {
  std::vector<float> r(n);
  uint32_t s = 2463534242u + static_cast<uint32_t>(seed) * 7919u;
  for (float &x : r) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x = static_cast<float>(s % 2000) / 1000.0f - 1.0f;
  }
  return r;
}
void expectNear(const std::vector<double> &a, const std::vector<double> &b, double tol = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tol) << "at element " << i;
}

} // namespace

// ---- softmax family --------------------------------------------------------------------------

TEST(Composite, SoftmaxRowsSumToOne) {
  auto r =
      runOp(OpKind::Softmax, {f32({2, 3}, {1, 2, 3, 1000, 1000, 1000})}, {{"axis", int64_t(1)}});
  ASSERT_TRUE(r) << r.error().message();
  std::vector<double> y = values((*r)[0]);
  double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  expectNear(y, {e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3});

  // Along axis 0 of a [2, 2].
  auto c = runOp(OpKind::Softmax, {f32({2, 2}, {0, 5, 0, 5})}, {{"axis", int64_t(0)}});
  ASSERT_TRUE(c);
  expectNear(values((*c)[0]), {0.5, 0.5, 0.5, 0.5});
}

TEST(Composite, SoftmaxOfAllMinusInfIsNaN) {
  float ninf = -std::numeric_limits<float>::infinity();
  auto r = runOp(OpKind::Softmax, {f32({1, 2}, {ninf, ninf})}, {{"axis", int64_t(-1)}});
  ASSERT_TRUE(r);
  EXPECT_TRUE(std::isnan(values((*r)[0])[0]));
  auto m = runOp(OpKind::Softmax, {f32({1, 2}, {ninf, 0})}, {{"axis", int64_t(-1)}});
  ASSERT_TRUE(m);
  expectNear(values((*m)[0]), {0, 1});
}

TEST(Composite, LogSoftmaxAndHardmax) {
  auto r = runOp(OpKind::LogSoftmax, {f32({3}, {1, 2, 3})}, {{"axis", int64_t(0)}});
  ASSERT_TRUE(r);
  double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  expectNear(values((*r)[0]), {1 - lse, 2 - lse, 3 - lse});

  auto h = runOp(OpKind::Hardmax, {f32({2, 3}, {3, 1, 3, 0, 0, 0})}, {{"axis", int64_t(1)}});
  ASSERT_TRUE(h);
  expectNear(values((*h)[0]), {1, 0, 0, 1, 0, 0}); // the first maximum wins
  auto b = runOp(OpKind::Hardmax, {f32({2, 2}, {1, 4, 2, 3})}, {{"axis", int64_t(0)}});
  ASSERT_TRUE(b);
  expectNear(values((*b)[0]), {0, 1, 1, 0});
}

TEST(Composite, SoftmaxF16AndBadAxis) {
  Tensor x = Tensor::fromVector<uint16_t>(DType::F16, {2}, {0x3c00, 0x3c00}); // 1, 1
  auto r = runOp(OpKind::Softmax, {x}, {{"axis", int64_t(0)}});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].dtype(), DType::F16);
  expectNear(values((*r)[0]), {0.5, 0.5});
  auto bad = inferTypes(OpKind::Softmax, {TensorType(DType::F32, {2, 3})}, {{"axis", int64_t(2)}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("axis"), std::string::npos);
  auto intIn = inferTypes(OpKind::Softmax, {TensorType(DType::I32, {2})}, {{"axis", int64_t(0)}});
  EXPECT_FALSE(intIn);
}

// ---- normalizations --------------------------------------------------------------------------

TEST(Composite, LayerNormResultsAndStatistics) {
  AttrMap a = {{"axis", int64_t(1)}, {"epsilon", 0.0}, {"stash_type", DType::F32}};
  Tensor x = f32({2, 2}, {1, 3, 2, 6});
  auto r = runOp(OpKind::LayerNorm, {x, f32({2}, {1, 2}), f32({2}, {0, 10})}, a, 3);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->size(), 3u);
  // Row 0: mean 2, std 1 -> (-1, 1); row 1: mean 4, std 2 -> (-1, 1).
  expectNear(values((*r)[0]), {-1, 12, -1, 12});
  EXPECT_EQ((*r)[1].extents(), (Extents{2, 1}));
  expectNear(values((*r)[1]), {2, 4});
  expectNear(values((*r)[2]), {1, 0.5});

  auto t =
      inferTypes(OpKind::LayerNorm,
                 {TensorType(DType::F16, {Dim::symbol("N"), 4, 8}), TensorType(DType::F16, {4, 8})},
                 {{"axis", int64_t(-2)}, {"epsilon", 1e-5}, {"stash_type", DType::F32}}, 3);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ((*t)[0].str(), "f16[N,4,8]");
  EXPECT_EQ((*t)[1].str(), "f32[N,1,1]");
  auto bad =
      inferTypes(OpKind::LayerNorm, {TensorType(DType::F32, {2, 4}), TensorType(DType::F32, {5})},
                 {{"axis", int64_t(-1)}, {"epsilon", 1e-5}, {"stash_type", DType::F32}});
  EXPECT_FALSE(bad);
}

TEST(Composite, RMSNorm) {
  AttrMap a = {{"axis", int64_t(-1)}, {"epsilon", 0.0}, {"stash_type", DType::F32}};
  auto r = runOp(OpKind::RMSNorm, {f32({2, 2}, {3, 4, 0, 2}), f32({2}, {1, 2})}, a);
  ASSERT_TRUE(r) << r.error().message();
  double rms0 = std::sqrt(12.5), rms1 = std::sqrt(2.0);
  expectNear(values((*r)[0]), {3 / rms0, 8 / rms0, 0, 4 / rms1});
}

TEST(Composite, GroupInstanceAndBatchNorm) {
  // N=1, C=4, spatial 2; two groups of two channels.
  std::vector<float> xv = {1, 2, 3, 4, 10, 10, 10, 14};
  Tensor x = f32({1, 4, 2}, xv);
  Tensor ones = f32({4}, {1, 1, 1, 1}), bias = f32({4}, {0, 0, 0, 5});
  auto g = runOp(OpKind::GroupNorm, {x, ones, bias},
                 {{"num_groups", int64_t(2)}, {"epsilon", 0.0}, {"stash_type", DType::F32}});
  ASSERT_TRUE(g) << g.error().message();
  double s0 = std::sqrt(1.25); // group 0: mean 2.5, var 1.25
  double s1 = std::sqrt(3.0);  // group 1: mean 11, var 3
  expectNear(values((*g)[0]),
             {-1.5 / s0, -0.5 / s0, 0.5 / s0, 1.5 / s0, -1 / s1, -1 / s1, -1 / s1 + 5, 3 / s1 + 5});

  Tensor x2 = f32({1, 4, 2}, {1, 2, 3, 4, 10, 12, 10, 14});
  auto in = runOp(OpKind::InstanceNorm, {x2, f32({4}, {1, 1, 2, 1}), bias}, {{"epsilon", 0.0}});
  ASSERT_TRUE(in) << in.error().message();
  expectNear(values((*in)[0]), {-1, 1, -1, 1, -2, 2, 4, 6});

  auto bn =
      runOp(OpKind::BatchNorm,
            {x, f32({4}, {1, 2, 1, 1}), bias, f32({4}, {1, 0, 0, 10}), f32({4}, {4, 1, 1, 4})},
            {{"epsilon", 0.0}});
  ASSERT_TRUE(bn) << bn.error().message();
  expectNear(values((*bn)[0]), {0, 0.5, 6, 8, 10, 10, 5, 7});

  auto bad = inferTypes(
      OpKind::GroupNorm,
      {TensorType(DType::F32, {1, 6, 2}), TensorType(DType::F32, {6}), TensorType(DType::F32, {6})},
      {{"num_groups", int64_t(4)}, {"epsilon", 0.0}, {"stash_type", DType::F32}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("num_groups"), std::string::npos);
}

TEST(Composite, LpNorm) {
  auto l2 = runOp(OpKind::LpNorm, {f32({2, 2}, {3, 4, 0, -2})},
                  {{"axis", int64_t(1)}, {"p", int64_t(2)}});
  ASSERT_TRUE(l2);
  expectNear(values((*l2)[0]), {0.6, 0.8, 0, -1});
  auto l1 = runOp(OpKind::LpNorm, {f32({2, 2}, {3, 4, 1, -3})},
                  {{"axis", int64_t(0)}, {"p", int64_t(1)}});
  ASSERT_TRUE(l1);
  expectNear(values((*l1)[0]), {0.75, 4.0 / 7, 0.25, -3.0 / 7});
  EXPECT_FALSE(inferTypes(OpKind::LpNorm, {TensorType(DType::F32, {2})},
                          {{"axis", int64_t(0)}, {"p", int64_t(3)}}));
}

// ---- attention -------------------------------------------------------------------------------

namespace {

/// A plain 4-D attention written independently of the kernel: q [B,Hq,S,D], k/v [B,Hk,T,*],
/// bias(b, h, i, j) added to the scaled scores.
template <typename BiasFn>
std::vector<double> naiveAttention(const std::vector<float> &q, const std::vector<float> &k,
                                   const std::vector<float> &v, int64_t B, int64_t Hq, int64_t Hk,
                                   int64_t S, int64_t T, int64_t D, int64_t Dv, double scale,
                                   BiasFn bias) {
  std::vector<double> y(B * Hq * S * Dv);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t kh = h / (Hq / Hk);
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> s(T);
        double m = -kInf, sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q[((b * Hq + h) * S + i) * D + d] * k[((b * Hk + kh) * T + j) * D + d];
          s[j] = dot * scale + bias(b, h, i, j);
          m = std::max(m, s[j]);
        }
        for (double &x : s)
          sum += (x = std::exp(x - m));
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < T; ++j)
            acc += s[j] / sum * v[((b * Hk + kh) * T + j) * Dv + d];
          y[((b * Hq + h) * S + i) * Dv + d] = acc;
        }
      }
    }
  return y;
}

AttrMap attentionAttrs(AttrMap extra = {}) {
  AttrMap a = {{"is_causal", int64_t(0)}, {"qk_matmul_output_mode", int64_t(0)}, {"softcap", 0.0}};
  for (auto &[k, v] : extra)
    a[k] = v;
  return a;
}

} // namespace

TEST(Composite, AttentionTinyByHand) {
  // One head, 1 query, 2 keys, head size 1: scores q*k/sqrt(1) = {0, 1}.
  Tensor q = f32({1, 1, 1, 1}, {1}), k = f32({1, 1, 2, 1}, {0, 1}), v = f32({1, 1, 2, 1}, {10, 20});
  auto r = runOp(OpKind::Attention, {q, k, v}, attentionAttrs(), 4);
  ASSERT_TRUE(r) << r.error().message();
  double p1 = std::exp(1.0) / (1 + std::exp(1.0));
  expectNear(values((*r)[0]), {10 * (1 - p1) + 20 * p1});
  expectNear(values((*r)[3]), {0, 1}); // mode 0: the scaled QK
  expectNear(values((*r)[1]), {0, 1}); // present_key = K
}

TEST(Composite, AttentionCausalAndGqa) {
  int64_t B = 2, Hq = 4, Hk = 2, S = 3, D = 4, Dv = 2;
  std::vector<float> q = ramp(B * Hq * S * D, 1), k = ramp(B * Hk * S * D, 2),
                     v = ramp(B * Hk * S * Dv, 3);
  auto r = runOp(OpKind::Attention,
                 {f32({B, Hq, S, D}, q), f32({B, Hk, S, D}, k), f32({B, Hk, S, Dv}, v)},
                 attentionAttrs({{"is_causal", int64_t(1)}}));
  ASSERT_TRUE(r) << r.error().message();
  auto expect =
      naiveAttention(q, k, v, B, Hq, Hk, S, S, D, Dv, 0.5,
                     [](int64_t, int64_t, int64_t i, int64_t j) { return j > i ? -kInf : 0.0; });
  expectNear(values((*r)[0]), expect);
  // The first query row sees only key 0: y = v[kv head][0].
  EXPECT_NEAR(values((*r)[0])[0], v[0], 1e-6);
  // GQA mapping: q heads 2 and 3 use kv head 1, first row = v[(0*2+1)*3+0].
  EXPECT_NEAR(values((*r)[0])[(2 * S) * Dv], v[(1 * S) * Dv], 1e-6);
  EXPECT_NEAR(values((*r)[0])[(3 * S) * Dv], v[(1 * S) * Dv], 1e-6);
}

TEST(Composite, Attention3dMatches4d) {
  int64_t B = 1, Hq = 2, Hk = 1, S = 2, T = 3, D = 2, Dv = 3;
  std::vector<float> q = ramp(B * Hq * S * D, 4), k = ramp(B * Hk * T * D, 5),
                     v = ramp(B * Hk * T * Dv, 6);
  // Pack q [B,Hq,S,D] into [B,S,Hq*D].
  std::vector<float> q3(q.size());
  for (int64_t h = 0; h < Hq; ++h)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d)
        q3[(s * Hq + h) * D + d] = q[(h * S + s) * D + d];
  AttrMap a = attentionAttrs(
      {{"q_num_heads", int64_t(Hq)}, {"kv_num_heads", int64_t(Hk)}, {"scale", 0.25}});
  auto r = runOp(OpKind::Attention,
                 {f32({B, S, Hq * D}, q3), f32({B, T, Hk * D}, k), f32({B, T, Hk * Dv}, v)}, a, 3);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].extents(), (Extents{B, S, Hq * Dv}));
  EXPECT_EQ((*r)[1].extents(), (Extents{B, Hk, T, D}));
  auto expect = naiveAttention(q, k, v, B, Hq, Hk, S, T, D, Dv, 0.25,
                               [](int64_t, int64_t, int64_t, int64_t) { return 0.0; });
  std::vector<double> y = values((*r)[0]);
  for (int64_t h = 0; h < Hq; ++h)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < Dv; ++d)
        EXPECT_NEAR(y[(s * Hq + h) * Dv + d], expect[(h * S + s) * Dv + d], 1e-5);

  auto missingHeads =
      inferTypes(OpKind::Attention,
                 {TensorType(DType::F32, {1, 2, 4}), TensorType(DType::F32, {1, 2, 4}),
                  TensorType(DType::F32, {1, 2, 4})},
                 attentionAttrs());
  EXPECT_FALSE(missingHeads);
}

TEST(Composite, AttentionPastMaskAndModes) {
  // Past of length 2, one new step, a float mask shorter than the total (3): padded with -inf.
  int64_t D = 2;
  std::vector<float> q = {1, 0}, k = {0, 1}, v = {5}, pk = {1, 0, 2, 0}, pv = {1, 2};
  Tensor mask = f32({1, 2}, {0.5f, 0});
  auto r = runOp(OpKind::Attention,
                 {f32({1, 1, 1, D}, q), f32({1, 1, 1, D}, k), f32({1, 1, 1, 1}, v), mask,
                  f32({1, 1, 2, D}, pk), f32({1, 1, 2, 1}, pv)},
                 attentionAttrs({{"qk_matmul_output_mode", int64_t(2)}, {"scale", 1.0}}), 4);
  ASSERT_TRUE(r) << r.error().message();
  // present_key = past ++ new.
  expectNear(values((*r)[1]), {1, 0, 2, 0, 0, 1});
  expectNear(values((*r)[2]), {1, 2, 5});
  // Scores 1, 2, 0 plus mask 0.5, 0, -inf.
  std::vector<double> qk = values((*r)[3]);
  EXPECT_NEAR(qk[0], 1.5, 1e-6);
  EXPECT_NEAR(qk[1], 2.0, 1e-6);
  EXPECT_EQ(qk[2], -kInf);
  double e0 = std::exp(1.5), e1 = std::exp(2.0);
  expectNear(values((*r)[0]), {(e0 * 1 + e1 * 2) / (e0 + e1)});

  // Causal with a past: the single query (position 2) sees everything.
  auto c =
      runOp(OpKind::Attention,
            {f32({1, 1, 1, D}, q), f32({1, 1, 1, D}, k), f32({1, 1, 1, 1}, v), Tensor(),
             f32({1, 1, 2, D}, pk), f32({1, 1, 2, 1}, pv)},
            attentionAttrs(
                {{"is_causal", int64_t(1)}, {"scale", 1.0}, {"qk_matmul_output_mode", int64_t(3)}}),
            4);
  ASSERT_TRUE(c) << c.error().message();
  std::vector<double> p = values((*c)[3]);
  double s = std::exp(1.0) + std::exp(2.0) + 1;
  expectNear(p, {std::exp(1.0) / s, std::exp(2.0) / s, 1 / s});
}

TEST(Composite, AttentionBoolMaskSoftcapAndNonpad) {
  Tensor q = f32({1, 1, 1, 1}, {2}), k = f32({1, 1, 3, 1}, {1, 2, 3}),
         v = f32({1, 1, 3, 1}, {1, 2, 3});
  Tensor mask = Tensor::zeros(DType::Bool, {3});
  mask.data<bool>()[0] = true;
  mask.data<bool>()[2] = true;
  auto r = runOp(
      OpKind::Attention, {q, k, v, mask},
      attentionAttrs({{"softcap", 2.0}, {"scale", 1.0}, {"qk_matmul_output_mode", int64_t(1)}}), 4);
  ASSERT_TRUE(r) << r.error().message();
  double c0 = 2 * std::tanh(1.0), c2 = 2 * std::tanh(3.0);
  expectNear(values((*r)[3]), {c0, 2 * std::tanh(2.0), c2});
  double w0 = std::exp(c0), w2 = std::exp(c2);
  expectNear(values((*r)[0]), {(w0 * 1 + w2 * 3) / (w0 + w2)});

  // nonpad_kv_seqlen = 2 hides key 2.
  Tensor nonpad = Tensor::fromVector<int64_t>(DType::I64, {1}, {2});
  auto n = runOp(OpKind::Attention, {q, k, v, Tensor(), Tensor(), Tensor(), nonpad},
                 attentionAttrs({{"scale", 1.0}}));
  ASSERT_TRUE(n) << n.error().message();
  double a0 = std::exp(2.0), a1 = std::exp(4.0);
  expectNear(values((*n)[0]), {(a0 * 1 + a1 * 2) / (a0 + a1)});
}

// ---- rotary embedding ------------------------------------------------------------------------

TEST(Composite, RotaryInterleavedVersusHalves) {
  // One head of size 4, one position: angle pair (cos, sin) = (0, 1) and (1, 0).
  Tensor x = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  Tensor cosC = f32({1, 1, 2}, {0, 1}), sinC = f32({1, 1, 2}, {1, 0});
  AttrMap a = {{"interleaved", int64_t(0)}, {"rotary_embedding_dim", int64_t(0)}};
  auto halves = runOp(OpKind::RotaryEmbedding, {x, cosC, sinC}, a);
  ASSERT_TRUE(halves) << halves.error().message();
  // Pairs (x0, x2) and (x1, x3): (1,3) rotated by 90 degrees -> (-3, 1); (2,4) unchanged.
  expectNear(values((*halves)[0]), {-3, 2, 1, 4});
  a["interleaved"] = int64_t(1);
  auto inter = runOp(OpKind::RotaryEmbedding, {x, cosC, sinC}, a);
  ASSERT_TRUE(inter);
  // Pairs (x0, x1) and (x2, x3): (1,2) -> (-2, 1); (3,4) unchanged.
  expectNear(values((*inter)[0]), {-2, 1, 3, 4});
}

TEST(Composite, RotaryPositionIdsPartialDimAnd3d) {
  // 3-D input [B=1, S=2, 2 heads x 4], rotary dim 2, caches indexed by position ids.
  Tensor x = f32({1, 2, 8}, {1, 2, 3, 4, 5, 6, 7, 8, 1, 1, 1, 1, 2, 2, 2, 2});
  Tensor cosC = f32({3, 1}, {1, 0, -1}), sinC = f32({3, 1}, {0, 1, 0});
  Tensor ids = Tensor::fromVector<int64_t>(DType::I64, {1, 2}, {2, 1});
  AttrMap a = {
      {"interleaved", int64_t(0)}, {"rotary_embedding_dim", int64_t(2)}, {"num_heads", int64_t(2)}};
  auto r = runOp(OpKind::RotaryEmbedding, {x, cosC, sinC, ids}, a);
  ASSERT_TRUE(r) << r.error().message();
  // Position 2: cos -1, sin 0 -> first two dims negated. Position 1: (a, b) -> (-b, a).
  expectNear(values((*r)[0]), {-1, -2, 3, 4, -5, -6, 7, 8, -1, 1, 1, 1, -2, 2, 2, 2});

  Tensor badIds = Tensor::fromVector<int64_t>(DType::I64, {1, 2}, {0, 3});
  auto bad = runOp(OpKind::RotaryEmbedding, {x, cosC, sinC, badIds}, a);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("position id"), std::string::npos);
  EXPECT_FALSE(inferTypes(OpKind::RotaryEmbedding,
                          {TensorType(DType::F32, {1, 2, 8}), TensorType(DType::F32, {1, 2, 2}),
                           TensorType(DType::F32, {1, 2, 2})},
                          {{"interleaved", int64_t(0)}, {"rotary_embedding_dim", int64_t(0)}}));
}

TEST(Composite, SymbolicShapesPropagate) {
  Dim n = Dim::symbol("N"), s = Dim::symbol("S"), t = Dim::symbol("T"), p = Dim::symbol("P");
  auto a = inferTypes(OpKind::Attention,
                      {TensorType(DType::F32, {n, 4, s, 8}), TensorType(DType::F32, {n, 2, t, 8}),
                       TensorType(DType::F32, {n, 2, t, 6}), TensorType(DType::F32, {s, t}),
                       TensorType(DType::F32, {n, 2, p, 8}), TensorType(DType::F32, {n, 2, p, 6})},
                      attentionAttrs(), 4);
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ((*a)[0].str(), "f32[N,4,S,6]");
  EXPECT_EQ((*a)[1].shape[0], n);
  EXPECT_TRUE((*a)[1].shape[2].isSymbolic()); // P + T
  EXPECT_EQ((*a)[3].shape[3], (*a)[1].shape[2]);

  auto a3 =
      inferTypes(OpKind::Attention,
                 {TensorType(DType::F16, {n, s, 32}), TensorType(DType::F16, {n, t, 16}),
                  TensorType(DType::F16, {n, t, 8})},
                 attentionAttrs({{"q_num_heads", int64_t(4)}, {"kv_num_heads", int64_t(2)}}), 3);
  ASSERT_TRUE(a3) << a3.error().message();
  EXPECT_EQ((*a3)[0].str(), "f16[N,S,16]");
  EXPECT_EQ((*a3)[2].str(), "f16[N,2,T,4]");

  auto r = inferTypes(OpKind::RotaryEmbedding,
                      {TensorType(DType::F32, {n, s, 16}), TensorType(DType::F32, {64, 4}),
                       TensorType(DType::F32, {64, 4}), TensorType(DType::I64, {n, s})},
                      {{"interleaved", int64_t(1)},
                       {"rotary_embedding_dim", int64_t(8)},
                       {"num_heads", int64_t(2)}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].str(), "f32[N,S,16]");
}
