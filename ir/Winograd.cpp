// Winograd F(m x m, 3 x 3) transform matrices and the compile-time weight transform
// (include/nnc/ir/Winograd.h).
#include "nnc/ir/Winograd.h"

#include <algorithm>

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
  // Blocks of kB output channels (k innermost, so the compiler vectorizes each step over the
  // block): gather the block's 3 x 3 filters of input channel c, gg = G g (alpha x 3), then
  // U = gg G^T (alpha x alpha), in double, each U row written as kB contiguous floats.
  constexpr int64_t kB = 16;
  double g[9][kB], gg[6][3][kB], out[kB];
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k0 = 0; k0 < K; k0 += kB) {
      int64_t nk = std::min<int64_t>(kB, K - k0);
      for (int64_t q = 0; q < 9; ++q)
        for (int64_t kk = 0; kk < kB; ++kk)
          g[q][kk] = kk < nk ? src[((k0 + kk) * C + c) * 9 + q] : 0.0;
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t kk = 0; kk < kB; ++kk)
            gg[i][j][kk] = t.g[i * 3] * g[j][kk] + t.g[i * 3 + 1] * g[3 + j][kk] +
                           t.g[i * 3 + 2] * g[6 + j][kk];
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < a; ++j) {
          for (int64_t kk = 0; kk < kB; ++kk)
            out[kk] = gg[i][0][kk] * t.g[j * 3] + gg[i][1][kk] * t.g[j * 3 + 1] +
                      gg[i][2][kk] * t.g[j * 3 + 2];
          float *row = dst + ((i * a + j) * cPad + c) * kPad + k0;
          for (int64_t kk = 0; kk < nk; ++kk)
            row[kk] = static_cast<float>(out[kk]);
        }
    }
  return u;
}

} // namespace nnc
