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
  // F(2x2): interpolation points 0, 1, -1 and infinity (Lavin & Gray's matrices).
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
  // F(4x4): points 0, 3/2, -3/2, 2/3, -2/3 and infinity rather than Lavin & Gray's 0, +-1,
  // +-2. Their A^T spans 1 .. 8 (the output transform scales the GEMM's rounding by up to 8^2)
  // and B^T 1 .. 5; these keep both within 1 .. 3.4, and the f32 conv's error against the
  // exact one falls about 2.2x in rms and 3.8-4.5x at its largest (bench/winograd_points.py:
  // numpy emulation of the three f32 steps, relu'd, normal and shifted inputs, 256 channels;
  // its search over 5 of 0, +-1/4, +-1/3, +-1/2, +-2/3, +-1, +-3/2, +-2, +-3, +-4, at 128
  // channels, found none better). A^T is the Vandermonde matrix of the
  // points, G holds the 1 / prod(p_j - p_l) factors (applied in double at compile time) and
  // B^T is what makes A^T ((G g) . (B^T d)) the exact correlation; the coefficients that are
  // not dyadic (2/3, 4/9, 97/36, ...) round to f32 in the transforms, far below the GEMM's
  // rounding.
  static const WinogradMatrices f4{4,
                                   6,
                                   {1, 0, -97.0 / 36, 0, 1, 0,                  //
                                    0, -2.0 / 3, -4.0 / 9, 1.5, 1, 0,           //
                                    0, 2.0 / 3, -4.0 / 9, -1.5, 1, 0,           //
                                    0, -1.5, -2.25, 2.0 / 3, 1, 0,              //
                                    0, 1.5, -2.25, -2.0 / 3, 1, 0,              //
                                    0, 1, 0, -97.0 / 36, 0, 1},
                                   {1, 0, 0,                                    //
                                    8.0 / 65, 12.0 / 65, 18.0 / 65,             //
                                    8.0 / 65, -12.0 / 65, 18.0 / 65,            //
                                    -81.0 / 130, -27.0 / 65, -18.0 / 65,        //
                                    -81.0 / 130, 27.0 / 65, -18.0 / 65,         //
                                    0, 0, 1},
                                   {1, 1, 1, 1, 1, 0,                           //
                                    0, 1.5, -1.5, 2.0 / 3, -2.0 / 3, 0,         //
                                    0, 2.25, 2.25, 4.0 / 9, 4.0 / 9, 0,         //
                                    0, 3.375, -3.375, 8.0 / 27, -8.0 / 27, 1}};
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
