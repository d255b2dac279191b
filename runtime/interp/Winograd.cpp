// Interpreter kernels of the Winograd conv transforms (winograd_input, winograd_output):
// straight products with the matrices of include/nnc/ir/Winograd.h, in double.
#include "nnc/ir/Winograd.h"
#include "interp/Kernels.h"

namespace nnc::interp {

namespace {

/// r = L x R^T for row-major L [p x q], x [q x q], R [p x q] (so r is p x p).
void sandwich(const std::vector<double> &l, const std::vector<double> &x, int64_t p, int64_t q,
              std::vector<double> &r) {
  std::vector<double> t(p * q, 0.0);
  for (int64_t i = 0; i < p; ++i)
    for (int64_t j = 0; j < q; ++j)
      for (int64_t s = 0; s < q; ++s)
        t[i * q + j] += l[i * q + s] * x[s * q + j];
  r.assign(p * p, 0.0);
  for (int64_t i = 0; i < p; ++i)
    for (int64_t j = 0; j < p; ++j)
      for (int64_t s = 0; s < q; ++s)
        r[i * p + j] += t[i * q + s] * l[j * q + s];
}

} // namespace

Results evalWinogradInput(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  const WinogradMatrices &t = winogradMatrices(node.getInt("tile", 0));
  std::vector<int64_t> pads = node.getInts("pads", {});
  int64_t N = x.dim(0), Cb = x.dim(1), H = x.dim(2), W = x.dim(3), b = x.dim(4);
  int64_t m = t.m, a = t.alpha;
  int64_t th = (H + pads[0] + pads[2] - 2 + m - 1) / m,
          tw = (W + pads[1] + pads[3] - 2 + m - 1) / m;
  int64_t P = N * th * tw, C = Cb * b;
  // Rows past the tiles (`rows`) stay 0.
  int64_t R = node.getInt("rows", P);
  Tensor v = Tensor::zeros(DType::F32, {a * a, R, C});
  const float *src = x.data<float>();
  float *dst = v.data<float>();
  std::vector<double> d(a * a), r;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < th; ++i)
      for (int64_t j = 0; j < tw; ++j)
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t u = 0; u < a; ++u)
            for (int64_t w = 0; w < a; ++w) {
              int64_t ih = i * m + u - pads[0], iw = j * m + w - pads[1];
              bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
              d[u * a + w] = in ? src[(((n * Cb + c / b) * H + ih) * W + iw) * b + c % b] : 0.0;
            }
          sandwich(t.bt, d, a, a, r);
          int64_t p = (n * th + i) * tw + j;
          for (int64_t e = 0; e < a * a; ++e)
            dst[(e * R + p) * C + c] = static_cast<float>(r[e]);
        }
  return std::vector<Tensor>{v};
}

Results evalWinogradOutput(const Node &node, const Operands &ops) {
  const Tensor &mt = ops[0];
  const WinogradMatrices &t = winogradMatrices(node.getInt("tile", 0));
  int64_t H = node.getInt("height", 1), W = node.getInt("width", 1), b = node.getInt("block", 1);
  int64_t m = t.m, a = t.alpha, P = mt.dim(1), K = mt.dim(2), Kb = K / b;
  int64_t th = (H + m - 1) / m, tw = (W + m - 1) / m;
  int64_t N = node.getInt("images", P / (th * tw));
  bool hasBias = ops.size() > 1 && !ops[1].isNull();
  Tensor y = Tensor::zeros(DType::F32, {N, Kb, H, W, b});
  const float *src = mt.data<float>();
  const float *bias = hasBias ? ops[1].data<float>() : nullptr;
  float *dst = y.data<float>();
  std::vector<double> mm(a * a), r;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < th; ++i)
      for (int64_t j = 0; j < tw; ++j)
        for (int64_t k = 0; k < K; ++k) {
          int64_t p = (n * th + i) * tw + j;
          for (int64_t e = 0; e < a * a; ++e)
            mm[e] = src[(e * P + p) * K + k];
          sandwich(t.at, mm, m, a, r);
          for (int64_t u = 0; u < m; ++u)
            for (int64_t w = 0; w < m; ++w) {
              int64_t oh = i * m + u, ow = j * m + w;
              if (oh < H && ow < W)
                dst[(((n * Kb + k / b) * H + oh) * W + ow) * b + k % b] =
                    static_cast<float>(r[u * m + w] + (bias ? bias[k] : 0.0));
            }
        }
  return std::vector<Tensor>{y};
}

} // namespace nnc::interp
