// Packing of GEMM weights into column panels and back (include/nnc/ir/GemmPacking.h).
#include "nnc/ir/GemmPacking.h"

#include <cstring>

#include "nnc/support/Error.h"

namespace nnc {

namespace {

/// Copies element (k, j) between the [K, N] matrix `flat` and the panels `panels`.
template <typename Copy> void forEachElement(int64_t k, int64_t n, int64_t nr, Copy copy) {
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j)
      copy(p * n + j, ((j / nr) * k + p) * nr + j % nr);
}

} // namespace

Tensor packGemmPanels(const Tensor &b, int64_t nr) {
  NNC_ASSERT(b.rank() == 2 && nr >= 1, "packGemmPanels: expected a matrix and nr >= 1");
  int64_t k = b.extents()[0], n = b.extents()[1], panels = (n + nr - 1) / nr;
  Tensor out = Tensor::zeros(b.dtype(), {panels, k, nr});
  size_t es = dtypeSize(b.dtype());
  const char *src = static_cast<const char *>(b.rawData());
  char *dst = static_cast<char *>(out.rawData());
  forEachElement(k, n, nr, [&](int64_t flat, int64_t packed) {
    std::memcpy(dst + packed * es, src + flat * es, es);
  });
  return out;
}

Tensor unpackGemmPanels(const Tensor &p, int64_t n) {
  NNC_ASSERT(p.rank() == 3 && p.extents()[0] * p.extents()[2] >= n,
             "unpackGemmPanels: expected [P, K, nr] panels covering {} columns", n);
  int64_t k = p.extents()[1], nr = p.extents()[2];
  Tensor out = Tensor::zeros(p.dtype(), {k, n});
  size_t es = dtypeSize(p.dtype());
  const char *src = static_cast<const char *>(p.rawData());
  char *dst = static_cast<char *>(out.rawData());
  forEachElement(k, n, nr, [&](int64_t flat, int64_t packed) {
    std::memcpy(dst + flat * es, src + packed * es, es);
  });
  return out;
}

} // namespace nnc
