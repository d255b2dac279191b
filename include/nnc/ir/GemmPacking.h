// The packed-weight layout of matmul's `packed_n` form (passes/PackGemmWeights.cpp): a [K, N]
// matrix as P = ceil(N / nr) panels of nr columns, each contiguous over k, i.e. a [P, K, nr]
// tensor holding element (k, j) at ((j / nr) * K + k) * nr + j % nr, zero past column N (a
// batch of matrices [B..., K, N] is packed matrix by matrix as [B..., P, K, nr]). The
// GEMM microkernels read one panel's kc x nr block as one contiguous stream. The integer tile's
// panels (packGemmPanelsK4) interleave groups of 4 k rows per column instead.
#pragma once

#include "nnc/ir/Tensor.h"

namespace nnc {

/// `b` ([..., K, N], any dtype) as [..., ceil(N / nr), K, nr] panels (nr >= 1), each matrix
/// of the leading batch dims packed on its own.
Tensor packGemmPanels(const Tensor &b, int64_t nr);
/// The [..., K, n] matrices back from their panels `p` ([..., P, K, nr], P * nr >= n).
Tensor unpackGemmPanels(const Tensor &p, int64_t n);

/// The integer GEMM tile's layout (kir::GemmElems::U8S8S32) of `b` ([..., K, N], a byte
/// dtype): [..., ceil(N / nr), ceil(K / 4), nr, 4] panels of nr columns, each a run of groups
/// of 4 k rows interleaved per column, element (k, j) at
/// (((j / nr) * ceil(K / 4) + k / 4) * nr + j % nr) * 4 + k % 4, zero past K and past N.
Tensor packGemmPanelsK4(const Tensor &b, int64_t nr);
/// The [..., k, n] matrices back from their panels `p` ([..., P, G, nr, 4], 4G >= k).
Tensor unpackGemmPanelsK4(const Tensor &p, int64_t k, int64_t n);

/// The bf16 GEMM tile's layout (kir::GemmElems::BF16) of `b` ([..., K, N], f32 or bf16),
/// rounded to bf16 (nearest even): [..., ceil(N / nr), ceil(K / 2), nr, 2] bf16 panels of nr
/// columns, each a run of pairs of k rows interleaved per column, element (k, j) at
/// (((j / nr) * ceil(K / 2) + k / 2) * nr + j % nr) * 2 + k % 2, zero past K and past N.
Tensor packGemmPanelsBf16(const Tensor &b, int64_t nr);
/// The bf16 [..., k, n] matrices back from their panels `p` ([..., P, G, nr, 2], 2G >= k).
Tensor unpackGemmPanelsBf16(const Tensor &p, int64_t k, int64_t n);

/// A blocked conv weight [..., bi, b] (f32, pack_conv_weight's layout; bi even) rounded to bf16
/// (nearest even) with each [bi, b] as bi/2 rows of b pairs of input lanes: lane c of output
/// lane j at (c/2) * 2b + 2j + c%2 (conv_nchwc's bf16_pairs, vdpbf16ps's operand).
Tensor packConvWeightBf16Pairs(const Tensor &w);

} // namespace nnc
