// Tests of the ONNX NN lowerings in the opset forms the ONNX node tests do not cover (legacy
// Softmax coercion, Upsample, Resize-10, GroupNormalization-18, Gemm-6, integer matmul), the
// loss ops' bad labels and LSTM's attributes.
// Models are written with a minimal protobuf encoder, imported and run on the interpreter.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/runtime/Interpreter.h"
#include "tests/unit/OnnxTestModel.h"

namespace nnc {
namespace {

using namespace testonnx;

/// Writes a one-node model whose inputs are `inputs` (name, value) and runs it.
Expected<std::vector<Tensor>> runModel(int64_t opset, const Pb &theNode,
                                       const std::vector<std::pair<std::string, Tensor>> &inputs,
                                       const std::vector<std::string> &outputs) {
  std::vector<Tensor> values;
  for (const auto &in : inputs)
    values.push_back(in.second);
  Expected<std::unique_ptr<Graph>> g = importModel(opset, {theNode}, inputs, {}, outputs);
  if (!g)
    return g.takeError();
  return interpret(**g, values);
}

Tensor f32(const Extents &e, const std::vector<float> &v) {
  return Tensor::fromVector<float>(DType::F32, e, v);
}

void expectNear(const Tensor &t, const std::vector<float> &want, float tol = 1e-5f) {
  ASSERT_EQ(t.dtype(), DType::F32);
  ASSERT_EQ(t.numElements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.data<float>()[i], want[i], tol) << "element " << i;
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::sin(static_cast<float>(i) * 1.7f) * 3.0f;
  return v;
}

TEST(OnnxNNLowering, LegacySoftmaxCoercesTo2D) {
  std::vector<float> x = ramp(24);
  // Opset 11, default axis 1 on [2,3,4]: softmax over the 12 trailing elements of each batch.
  auto r = runModel(11, node("Softmax", {"x"}, {"y"}), {{"x", f32({2, 3, 4}, x)}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  std::vector<float> want(24);
  for (int b = 0; b < 2; ++b) {
    float mx = -1e30f, sum = 0;
    for (int i = 0; i < 12; ++i)
      mx = std::max(mx, x[b * 12 + i]);
    for (int i = 0; i < 12; ++i)
      sum += std::exp(x[b * 12 + i] - mx);
    for (int i = 0; i < 12; ++i)
      want[b * 12 + i] = std::exp(x[b * 12 + i] - mx) / sum;
  }
  expectNear((*r)[0], want);
  EXPECT_EQ((*r)[0].extents(), (Extents{2, 3, 4}));
}

TEST(OnnxNNLowering, LegacyHardmaxDefaultAxis) {
  std::vector<float> x = ramp(24);
  auto r = runModel(1, node("Hardmax", {"x"}, {"y"}), {{"x", f32({2, 3, 4}, x)}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  std::vector<float> want(24, 0.0f);
  for (int b = 0; b < 2; ++b)
    want[b * 12 + (std::max_element(x.begin() + b * 12, x.begin() + b * 12 + 12) -
                   (x.begin() + b * 12))] = 1.0f;
  expectNear((*r)[0], want);
}

TEST(OnnxNNLowering, Upsample7NearestFromAttribute) {
  auto r = runModel(7,
                    node("Upsample", {"x"}, {"y"}, {attrFloats("scales", {1, 1, 2, 3})}),
                    {{"x", f32({1, 1, 2, 2}, {1, 2, 3, 4})}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)[0].extents(), (Extents{1, 1, 4, 6}));
  expectNear((*r)[0], {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
}

TEST(OnnxNNLowering, Resize10LinearIsAsymmetric) {
  auto r = runModel(10, node("Resize", {"x", "s"}, {"y"}, {attrString("mode", "linear")}),
                    {{"x", f32({1, 1, 2, 2}, {1, 2, 3, 4})}, {"s", f32({4}, {1, 1, 2, 2})}},
                    {"y"});
  ASSERT_TRUE(r) << r.error().message();
  expectNear((*r)[0], {1, 1.5, 2, 2, 2, 2.5, 3, 3, 3, 3.5, 4, 4, 3, 3.5, 4, 4});
}

TEST(OnnxNNLowering, GroupNorm18PerGroupScale) {
  std::vector<float> x = ramp(12); // [1, 4, 3], 2 groups of 2 channels.
  std::vector<float> scale = {1.5f, -0.5f}, bias = {0.25f, 2.0f};
  auto r = runModel(18,
                    node("GroupNormalization", {"x", "s", "b"}, {"y"},
                         {attrInt("num_groups", 2)}),
                    {{"x", f32({1, 4, 3}, x)}, {"s", f32({2}, scale)}, {"b", f32({2}, bias)}},
                    {"y"});
  ASSERT_TRUE(r) << r.error().message();
  std::vector<float> want(12);
  for (int g = 0; g < 2; ++g) {
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i)
      mean += x[g * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i)
      var += (x[g * 6 + i] - mean) * (x[g * 6 + i] - mean) / 6.0;
    for (int i = 0; i < 6; ++i)
      want[g * 6 + i] =
          static_cast<float>((x[g * 6 + i] - mean) / std::sqrt(var + 1e-5) * scale[g] + bias[g]);
  }
  expectNear((*r)[0], want, 1e-4f);
}

TEST(OnnxNNLowering, Gemm6BroadcastAlphaBetaTransA) {
  // A stored 3x2 (transA), B 3x2, C a row vector.
  auto r = runModel(6,
                    node("Gemm", {"a", "b", "c"}, {"y"},
                         {attrInt("broadcast", 1), attrInt("transA", 1), attrFloat("alpha", 0.5f),
                          attrFloat("beta", 2.0f)}),
                    {{"a", f32({3, 2}, {1, 2, 3, 4, 5, 6})},
                     {"b", f32({3, 2}, {1, 0, 2, 1, 1, 0})},
                     {"c", f32({2}, {10, 20})}},
                    {"y"});
  ASSERT_TRUE(r) << r.error().message();
  // A^T = [[1,3,5],[2,4,6]]; A^T B = [[12,3],[16,4]].
  expectNear((*r)[0], {0.5f * 12 + 20, 0.5f * 3 + 40, 0.5f * 16 + 20, 0.5f * 4 + 40});
}

TEST(OnnxNNLowering, MatMulIntegerPerRowZeroPoint) {
  auto i32 = [](const Extents &e, const std::vector<int32_t> &v) {
    return Tensor::fromVector<int32_t>(DType::I32, e, v);
  };
  auto r = runModel(10, node("MatMulInteger", {"a", "b", "az", "bz"}, {"y"}),
                    {{"a", Tensor::fromVector<uint8_t>(DType::U8, {2, 2}, {10, 20, 30, 40})},
                     {"b", Tensor::fromVector<uint8_t>(DType::U8, {2, 2}, {1, 2, 3, 4})},
                     {"az", Tensor::fromVector<uint8_t>(DType::U8, {2}, {1, 2})},
                     {"bz", Tensor::fromVector<uint8_t>(DType::U8, {2}, {1, 0})}},
                    {"y"});
  ASSERT_TRUE(r) << r.error().message();
  // (A - [[1],[2]]) @ (B - [1,0]) = [[9,19],[28,38]] @ [[0,2],[2,4]].
  EXPECT_TRUE((*r)[0].bitwiseEqual(i32({2, 2}, {38, 94, 76, 208})));
}

TEST(OnnxNNLowering, QLinearConvImportsAsConvInteger) {
  // Grouped, padded, per-channel w scale and zero point, an i32 bias: one conv_integer, the
  // bias added after it, then the requantization (the multiplier in f32, the product in f64,
  // rounded half to even).
  const int64_t C = 4, M = 6, H = 5, W = 5, G = 2, cg = C / G, mg = M / G;
  std::vector<uint8_t> x(C * H * W);
  std::vector<int8_t> w(M * cg * 9), wz(M);
  std::vector<float> ws(M);
  std::vector<int32_t> bias(M);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<int8_t>((i * 53 + 5) % 256);
  for (int64_t m = 0; m < M; ++m) {
    wz[m] = static_cast<int8_t>(m * 40 - 128);
    ws[m] = 0.001f * static_cast<float>(m + 1);
    bias[m] = static_cast<int32_t>(m * 1000 - 2500);
  }
  auto scalarF = [](float v) { return Tensor::fromVector<float>(DType::F32, {}, {v}); };
  auto scalarU = [](uint8_t v) { return Tensor::fromVector<uint8_t>(DType::U8, {}, {v}); };
  Pb conv = node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"}, {"y"},
                 {attrInt("group", G), Pb().s(1, "pads").i(20, 7).i(8, 1).i(8, 1).i(8, 1).i(8, 1)});
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"x", Tensor::fromVector<uint8_t>(DType::U8, {1, C, H, W}, x)}};
  std::vector<std::pair<std::string, Tensor>> inits = {
      {"xs", scalarF(0.1f)},
      {"xz", scalarU(7)},
      {"w", Tensor::fromVector<int8_t>(DType::I8, {M, cg, 3, 3}, w)},
      {"ws", Tensor::fromVector<float>(DType::F32, {M}, ws)},
      {"wz", Tensor::fromVector<int8_t>(DType::I8, {M}, wz)},
      {"ys", scalarF(0.3f)},
      {"yz", scalarU(5)},
      {"b", Tensor::fromVector<int32_t>(DType::I32, {M}, bias)}};
  Expected<std::unique_ptr<Graph>> g = importModel(10, {conv}, inputs, inits, {"y"});
  ASSERT_TRUE(g) << g.error().message();
  int convs = 0, integerConvs = 0;
  for (const Node *n : (*g)->nodes()) {
    convs += n->kind() == OpKind::Conv;
    integerConvs += n->kind() == OpKind::ConvInteger;
  }
  EXPECT_EQ(convs, 0);
  EXPECT_EQ(integerConvs, 1);
  Expected<std::vector<Tensor>> r = interpret(**g, {inputs[0].second});
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ((*r)[0].dtype(), DType::U8);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t oh = 0; oh < H; ++oh)
      for (int64_t ow = 0; ow < W; ++ow) {
        int64_t acc = bias[m];
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              int64_t ih = oh - 1 + kh, iw = ow - 1 + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                continue;
              int64_t xv = x[((m / mg * cg + c) * H + ih) * W + iw] - 7;
              acc += xv * (w[((m * cg + c) * 3 + kh) * 3 + kw] - wz[m]);
            }
        double mult = static_cast<double>(0.1f * ws[m] / 0.3f);
        double q = std::nearbyint(static_cast<double>(acc) * mult) + 5;
        int want = static_cast<int>(std::min(255.0, std::max(0.0, q)));
        EXPECT_EQ((*r)[0].data<uint8_t>()[(m * H + oh) * W + ow], want)
            << "channel " << m << " at " << oh << "," << ow;
      }
}

TEST(OnnxNNLowering, ConvKernelShapeMismatchIsAnError) {
  auto r = runModel(11,
                    node("Conv", {"x", "w"}, {"y"},
                         {Pb().s(1, "kernel_shape").i(20, 7).i(8, 3).i(8, 3)}),
                    {{"x", f32({1, 1, 3, 3}, std::vector<float>(9, 0.0f))},
                     {"w", f32({1, 1, 2, 2}, std::vector<float>(4, 0.0f))}},
                    {"y"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("kernel_shape"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("Conv"), std::string::npos) << r.error().message();
}

TEST(OnnxNNLowering, NllLossOutOfRangeLabelsAreNaNNotOutOfBounds) {
  // log-probs [N=4, C=3]; labels 5 and -3 are out of range, -1 is ignore_index.
  std::vector<float> lp = {-1, -2, -3, -4, -5, -6, -7, -8, -9, -0.5f, -1.5f, -2.5f};
  Tensor labels = Tensor::fromVector<int64_t>(DType::I64, {4}, {2, 5, -1, -3});
  auto r = runModel(13,
                    node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"},
                         {attrString("reduction", "none"), attrInt("ignore_index", -1)}),
                    {{"x", f32({4, 3}, lp)}, {"t", labels}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  const float *y = (*r)[0].data<float>();
  EXPECT_FLOAT_EQ(y[0], 3.0f);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_TRUE(std::isnan(y[3]));
  // The mean flags the bad label as NaN too.
  auto m = runModel(13, node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"}),
                    {{"x", f32({4, 3}, lp)}, {"t", labels}}, {"y"});
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_TRUE(std::isnan((*m)[0].data<float>()[0]));
}

TEST(OnnxNNLowering, SoftmaxCrossEntropyWeightedMeanSkipsIgnored) {
  // mean = sum(w[l] * -log_softmax[l]) / sum(w[l]) over the labels that are not ignored.
  std::vector<float> x = ramp(6); // [N=2, C=3]
  Tensor labels = Tensor::fromVector<int64_t>(DType::I64, {2}, {1, 0});
  std::vector<float> w = {0.5f, 2.0f, 1.0f};
  auto r = runModel(
      13, node("SoftmaxCrossEntropyLoss", {"x", "t", "w"}, {"y"}, {attrInt("ignore_index", 0)}),
      {{"x", f32({2, 3}, x)}, {"t", labels}, {"w", f32({3}, w)}}, {"y"});
  ASSERT_TRUE(r) << r.error().message();
  double lse = std::log(std::exp(x[0]) + std::exp(x[1]) + std::exp(x[2]));
  expectNear((*r)[0], {static_cast<float>(lse - x[1])}, 1e-5f);
}

TEST(OnnxNNLowering, LossLabelRankMismatchIsAnError) {
  auto r = runModel(
      13, node("SoftmaxCrossEntropyLoss", {"x", "t"}, {"y"}),
      {{"x", f32({2, 3}, ramp(6))}, {"t", Tensor::fromVector<int64_t>(DType::I64, {2, 1}, {0, 1})}},
      {"y"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("SoftmaxCrossEntropyLoss"), std::string::npos)
      << r.error().message();
}

/// The ONNX LSTM equations written out plainly, in layout 0 ([T, N, I], states [D, N, H]),
/// with f = HardSigmoid(alpha, beta), g = tanh, h = softsign as in the test below.
struct LstmRef {
  int64_t T, N, I, H, D;
  double clip, alpha, beta;
  bool inputForget;
  std::vector<float> x, w, r, b, p, h0, c0;
  std::vector<int64_t> lens;
  std::vector<float> y, yh, yc; // [T, D, N, H], [D, N, H], [D, N, H]

  void run() {
    y.assign(T * D * N * H, 0.0f);
    yh.assign(D * N * H, 0.0f);
    yc.assign(D * N * H, 0.0f);
    auto cl = [&](double v) { return std::max(-clip, std::min(clip, v)); };
    auto f = [&](double v) { return std::max(0.0, std::min(1.0, alpha * cl(v) + beta)); };
    auto soft = [](double v) { return v / (1 + std::abs(v)); };
    for (int64_t d = 0; d < D; ++d)
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> h(H), c(H);
        for (int64_t j = 0; j < H; ++j) {
          h[j] = h0[(d * N + n) * H + j];
          c[j] = c0[(d * N + n) * H + j];
        }
        for (int64_t k = 0; k < lens[n]; ++k) {
          int64_t t = d == 1 ? lens[n] - 1 - k : k;
          std::vector<double> pre(4 * H);
          for (int64_t gj = 0; gj < 4 * H; ++gj) {
            double v = b[d * 8 * H + gj] + b[d * 8 * H + 4 * H + gj];
            for (int64_t i = 0; i < I; ++i)
              v += x[(t * N + n) * I + i] * w[(d * 4 * H + gj) * I + i];
            for (int64_t i = 0; i < H; ++i)
              v += h[i] * r[(d * 4 * H + gj) * H + i];
            pre[gj] = v;
          }
          std::vector<double> hn(H), cn(H);
          for (int64_t j = 0; j < H; ++j) {
            const float *pp = &p[d * 3 * H];
            double ig = f(pre[j] + pp[j] * c[j]);
            double fg = inputForget ? 1 - ig : f(pre[2 * H + j] + pp[2 * H + j] * c[j]);
            double cc = std::tanh(cl(pre[3 * H + j]));
            cn[j] = fg * c[j] + ig * cc;
            double og = f(pre[H + j] + pp[H + j] * cn[j]);
            hn[j] = og * soft(cn[j]);
          }
          h = hn;
          c = cn;
          for (int64_t j = 0; j < H; ++j)
            y[((t * D + d) * N + n) * H + j] = static_cast<float>(h[j]);
        }
        for (int64_t j = 0; j < H; ++j) {
          yh[(d * N + n) * H + j] = static_cast<float>(h[j]);
          yc[(d * N + n) * H + j] = static_cast<float>(c[j]);
        }
      }
  }
};

/// [a, b, rest] -> [b, a, rest].
std::vector<float> swap01(const std::vector<float> &v, int64_t a, int64_t b, int64_t rest) {
  std::vector<float> o(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < rest; ++k)
        o[(j * a + i) * rest + k] = v[(i * b + j) * rest + k];
  return o;
}

TEST(OnnxNNLowering, LstmEveryAttributeAgainstReference) {
  // Bidirectional, layout 1, clip, input_forget, peepholes, sequence_lens, initial states and
  // activations with alpha/beta: what the ONNX node tests leave out.
  for (int64_t layout : {0, 1}) {
    LstmRef ref;
    ref.T = 4, ref.N = 3, ref.I = 2, ref.H = 3, ref.D = 2;
    ref.clip = 0.9, ref.alpha = 0.3, ref.beta = 0.45, ref.inputForget = true;
    auto fill = [](size_t n, float scale, float phase) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i)
        v[i] = std::sin(static_cast<float>(i) * 1.3f + phase) * scale;
      return v;
    };
    const int64_t T = ref.T, N = ref.N, I = ref.I, H = ref.H, D = ref.D;
    ref.x = fill(T * N * I, 1.0f, 0.1f);
    ref.w = fill(D * 4 * H * I, 0.8f, 0.2f);
    ref.r = fill(D * 4 * H * H, 0.6f, 0.3f);
    ref.b = fill(D * 8 * H, 0.3f, 0.4f);
    ref.p = fill(D * 3 * H, 0.5f, 0.5f);
    ref.h0 = fill(D * N * H, 0.4f, 0.6f);
    ref.c0 = fill(D * N * H, 0.7f, 0.7f);
    ref.lens = {4, 2, 3};
    ref.run();
    std::vector<float> x = ref.x, h0 = ref.h0, c0 = ref.c0;
    Extents xs = {T, N, I}, ss = {D, N, H};
    if (layout == 1) {
      x = swap01(x, T, N, I);
      h0 = swap01(h0, D, N, H);
      c0 = swap01(c0, D, N, H);
      xs = {N, T, I};
      ss = {N, D, H};
    }
    std::vector<Pb> attrs = {attrString("direction", "bidirectional"),
                             attrInt("hidden_size", H),
                             attrInt("layout", layout),
                             attrInt("input_forget", 1),
                             attrFloat("clip", 0.9f),
                             attrStrings("activations", {"HardSigmoid", "Tanh", "Softsign",
                                                         "HardSigmoid", "Tanh", "Softsign"}),
                             attrFloats("activation_alpha", {0.3f, 0.3f}),
                             attrFloats("activation_beta", {0.45f, 0.45f})};
    auto r = runModel(
        14, node("LSTM", {"x", "w", "r", "b", "lens", "h0", "c0", "p"}, {"y", "yh", "yc"}, attrs),
        {{"x", f32(xs, x)},
         {"w", f32({D, 4 * H, I}, ref.w)},
         {"r", f32({D, 4 * H, H}, ref.r)},
         {"b", f32({D, 8 * H}, ref.b)},
         {"lens", Tensor::fromVector<int32_t>(DType::I32, {N}, {4, 2, 3})},
         {"h0", f32(ss, h0)},
         {"c0", f32(ss, c0)},
         {"p", f32({D, 3 * H}, ref.p)}},
        {"y", "yh", "yc"});
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->size(), 3u);
    std::vector<float> y = ref.y, yh = ref.yh, yc = ref.yc;
    if (layout == 1) { // Y [N, T, D, H]; states [N, D, H].
      std::vector<float> yy(y.size());
      for (int64_t t = 0; t < T; ++t) // [T, D, N, H] -> [N, T, D, H]
        for (int64_t d = 0; d < D; ++d)
          for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < H; ++j)
              yy[((n * T + t) * D + d) * H + j] = ref.y[((t * D + d) * N + n) * H + j];
      y = yy;
      yh = swap01(yh, D, N, H);
      yc = swap01(yc, D, N, H);
    }
    SCOPED_TRACE("layout " + std::to_string(layout));
    expectNear((*r)[0], y, 1e-5f);
    expectNear((*r)[1], yh, 1e-5f);
    expectNear((*r)[2], yc, 1e-5f);
  }
}

} // namespace
} // namespace nnc
