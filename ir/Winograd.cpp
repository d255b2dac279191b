// Winograd F(m x m, 3 x 3) transform matrices and the compile-time weight transform
// (include/nnc/ir/Winograd.h).
#include "nnc/ir/Winograd.h"

#include "nnc/support/Error.h"

namespace nnc {

bool winogradTileSupported(int64_t m) {
  return m == 2 || m == 4;
}

const WinogradMatrices &winogradMatrices(int64_t m) {
  NNC_ASSERT(winogradTileSupported(m), "winogradMatrices: no matrices for F({}, 3)", m);
  // Interpolation points 0, 1, -1 (and 2, -2 for m = 4) plus the point at infinity.
  static const WinogradMatrices f2{2,
                                   4,
                                   {1, 0, -1, 0, //
                                    0, 1, 1, 0,  //
                                    0, -1, 1, 0, //
                                    0, 1, 0, -1},
                                   {1, 0, 0,        //
                                    0.5, 0.5, 0.5,  //
                                    0.5, -0.5, 0.5, //
                                    0, 0, 1},
                                   {1, 1, 1, 0, //
                                    0, 1, -1, -1}};
  static const WinogradMatrices f4{4,
                                   6,
                                   {4, 0,  -5, 0,  1, 0, //
                                    0, -4, -4, 1,  1, 0, //
                                    0, 4,  -4, -1, 1, 0, //
                                    0, -2, -1, 2,  1, 0, //
                                    0, 2,  -1, -2, 1, 0, //
                                    0, 4,  0,  -5, 0, 1},
                                   {1.0 / 4, 0, 0,                //
                                    -1.0 / 6, -1.0 / 6, -1.0 / 6, //
                                    -1.0 / 6, 1.0 / 6, -1.0 / 6,  //
                                    1.0 / 24, 1.0 / 12, 1.0 / 6,  //
                                    1.0 / 24, -1.0 / 12, 1.0 / 6, //
                                    0, 0, 1},
                                   {1, 1, 1,  1, 1,  0, //
                                    0, 1, -1, 2, -2, 0, //
                                    0, 1, 1,  4, 4,  0, //
                                    0, 1, -1, 8, -8, 1}};
  return m == 2 ? f2 : f4;
}

Tensor winogradWeight(const Tensor &w, int64_t m, int64_t cPad, int64_t kPad) {
  NNC_ASSERT(w.dtype() == DType::F32 && w.rank() == 4 && w.dim(2) == 3 && w.dim(3) == 3 &&
                 w.dim(0) <= kPad && w.dim(1) <= cPad,
             "winogradWeight: expected an f32 [K, C, 3, 3] weight within [{}, {}]", kPad, cPad);
  const WinogradMatrices &t = winogradMatrices(m);
  int64_t a = t.alpha, K = w.dim(0), C = w.dim(1);
  Tensor u = Tensor::zeros(DType::F32, {a * a, cPad, kPad});
  const float *src = w.data<float>();
  float *dst = u.data<float>();
  std::vector<double> gg(a * 3);
  // c outer, k inner: the alpha * alpha rows of U are each written in order.
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < K; ++k) {
      const float *g = src + (k * C + c) * 9;
      // gg = G g (alpha x 3), then U = gg G^T (alpha x alpha), in double.
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double s = 0;
          for (int64_t q = 0; q < 3; ++q)
            s += t.g[i * 3 + q] * g[q * 3 + j];
          gg[i * 3 + j] = s;
        }
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < a; ++j) {
          double s = 0;
          for (int64_t q = 0; q < 3; ++q)
            s += gg[i * 3 + q] * t.g[j * 3 + q];
          dst[((i * a + j) * cPad + c) * kPad + k] = static_cast<float>(s);
        }
    }
  return u;
}

} // namespace nnc
