// The packed-weight layout of matmul's `packed_n` form (passes/PackGemmWeights.cpp): a [K, N]
// matrix as P = ceil(N / nr) panels of nr columns, each contiguous over k, i.e. a [P, K, nr]
// tensor holding element (k, j) at ((j / nr) * K + k) * nr + j % nr, zero past column N (a
// batch of matrices [B..., K, N] is packed matrix by matrix as [B..., P, K, nr]). The
// GEMM microkernels read one panel's kc x nr block as one contiguous stream.
#pragma once

#include "nnc/ir/Tensor.h"

namespace nnc {

/// `b` ([..., K, N], any dtype) as [..., ceil(N / nr), K, nr] panels (nr >= 1), each matrix
/// of the leading batch dims packed on its own.
Tensor packGemmPanels(const Tensor &b, int64_t nr);
/// The [..., K, n] matrices back from their panels `p` ([..., P, K, nr], P * nr >= n).
Tensor unpackGemmPanels(const Tensor &p, int64_t n);

} // namespace nnc
