// Winograd minimal filtering F(m x m, 3 x 3) (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016): the transform matrices shared by the winograd pass,
// the interpreter and the lowering of winograd_input / winograd_output, and the weight
// transform U = G g G^T done at compile time.
//
// Data layout: a conv's output is cut into tiles of m x m positions, P = N * ceil(OH/m) *
// ceil(OW/m) of them, tile p = (n * tilesH + th) * tilesW + tw. Per tile and channel the
// alpha x alpha input patch d (alpha = m + 2) becomes V = B^T d B, stored as V[e, p, c] with
// e = i * alpha + j; U[e, c, k] = (G g_kc G^T)[i, j]; M[e, p, k] = sum_c V[e, p, c] U[e, c, k]
// (one batched matmul) and the output tile is Y = A^T M A.
#pragma once

#include <vector>

#include "nnc/ir/Tensor.h"

namespace nnc {

/// The transform matrices of F(m x m, 3 x 3), row-major: bt [alpha x alpha], g [alpha x 3],
/// at [m x alpha].
struct WinogradMatrices {
  int64_t m = 0, alpha = 0;
  std::vector<double> bt, g, at;
};

/// True for the tile sizes with matrices (2 and 4).
bool winogradTileSupported(int64_t m);
/// P, the tiles of F(m x m) over n images of oh x ow outputs.
inline int64_t winogradTiles(int64_t n, int64_t oh, int64_t ow, int64_t m) {
  return n * ((oh + m - 1) / m) * ((ow + m - 1) / m);
}
/// The matrices of F(m x m, 3 x 3); m must be supported.
const WinogradMatrices &winogradMatrices(int64_t m);

/// U [alpha^2, cPad, kPad] (f32) from an f32 conv weight w [K, C, 3, 3], zero past C and K.
Tensor winogradWeight(const Tensor &w, int64_t m, int64_t cPad, int64_t kPad);

} // namespace nnc
