// Interpreter kernel of det (ONNX Det): each matrix's LU factorization with partial pivoting,
// in the compute type (f32 for f16/bf16), in the order the lowering (codegen/lower/Det.cpp)
// computes it.
#include <cmath>
#include <utility>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"

namespace nnc::interp {

namespace {

/// The determinant of the m x m row-major matrix `a` (overwritten by its elimination): the
/// product of the pivots, negated per row swap. The pivot of column k is the first largest
/// |a[i][k]| for i >= k; a zero pivot makes the determinant 0 and skips that elimination.
template <typename C> C determinant(C *a, int64_t m) {
  C det = C(1);
  for (int64_t k = 0; k < m; ++k) {
    int64_t p = k;
    C best = std::abs(a[k * m + k]);
    for (int64_t i = k + 1; i < m; ++i) {
      C v = std::abs(a[i * m + k]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    if (p != k) {
      for (int64_t j = k; j < m; ++j)
        std::swap(a[k * m + j], a[p * m + j]);
      det = -det;
    }
    C pivot = a[k * m + k];
    det = det * pivot;
    if (pivot == C(0))
      continue;
    for (int64_t i = k + 1; i < m; ++i) {
      C f = a[i * m + k] / pivot;
      for (int64_t j = k + 1; j < m; ++j)
        a[i * m + j] = a[i * m + j] - f * a[k * m + j];
    }
  }
  return det;
}

template <typename C>
std::vector<double> determinants(const std::vector<double> &x, int64_t batch, int64_t m) {
  std::vector<double> out(static_cast<size_t>(batch));
  std::vector<C> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < m * m; ++i)
      a[static_cast<size_t>(i)] = static_cast<C>(x[static_cast<size_t>(b * m * m + i)]);
    out[static_cast<size_t>(b)] = static_cast<double>(determinant(a.data(), m));
  }
  return out;
}

} // namespace

Results evalDet(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  const Extents &e = x.extents();
  if (e.size() < 2 || e[e.size() - 1] != e[e.size() - 2])
    return node.error("operand {} is not a batch of square matrices", extentsStr(e));
  int64_t m = e.back();
  Extents out(e.begin(), e.end() - 2);
  int64_t batch = nn::product(out);
  std::vector<double> xv = nn::toDoubles(x);
  std::vector<double> det = x.dtype() == DType::F64 ? determinants<double>(xv, batch, m)
                                                    : determinants<float>(xv, batch, m);
  NNC_ASSIGN_OR_RETURN(Tensor y, nn::fromDoubles(x.dtype(), out, det));
  return std::vector<Tensor>{std::move(y)};
}

} // namespace nnc::interp
