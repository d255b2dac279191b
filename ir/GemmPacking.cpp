// Packing of GEMM weights into column panels and back (include/nnc/ir/GemmPacking.h).
#include "nnc/ir/GemmPacking.h"

#include <algorithm>
#include <cstring>

#include "nnc/support/Error.h"

namespace nnc {

namespace {

/// Calls copy(flat, packed, count) for each run of `count` contiguous elements that move
/// between the [K, N] matrix (offset `flat`) and its panels (offset `packed`): one row of a
/// panel, nr elements (fewer in the last panel).
template <typename Copy> void forEachRun(int64_t k, int64_t n, int64_t nr, Copy copy) {
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j0 = 0, panel = 0; j0 < n; j0 += nr, ++panel)
      copy(p * n + j0, (panel * k + p) * nr, std::min(nr, n - j0));
}

} // namespace

Tensor packGemmPanels(const Tensor &b, int64_t nr) {
  NNC_ASSERT(b.rank() >= 2 && nr >= 1, "packGemmPanels: expected a matrix and nr >= 1");
  int64_t r = b.rank(), k = b.extents()[r - 2], n = b.extents()[r - 1];
  int64_t panels = (n + nr - 1) / nr, batch = b.numElements() / std::max<int64_t>(k * n, 1);
  Extents shape(b.extents().begin(), b.extents().end() - 2);
  shape.insert(shape.end(), {panels, k, nr});
  Tensor out = Tensor::zeros(b.dtype(), shape);
  size_t es = dtypeSize(b.dtype());
  const char *src = static_cast<const char *>(b.rawData());
  char *dst = static_cast<char *>(out.rawData());
  for (int64_t q = 0; q < batch; ++q)
    forEachRun(k, n, nr, [&](int64_t flat, int64_t packed, int64_t count) {
      std::memcpy(dst + (q * panels * k * nr + packed) * es, src + (q * k * n + flat) * es,
                  count * es);
    });
  return out;
}

Tensor unpackGemmPanels(const Tensor &p, int64_t n) {
  int64_t r = p.rank();
  NNC_ASSERT(r >= 3 && p.extents()[r - 3] * p.extents()[r - 1] >= n,
             "unpackGemmPanels: expected [..., P, K, nr] panels covering {} columns", n);
  int64_t panels = p.extents()[r - 3], k = p.extents()[r - 2], nr = p.extents()[r - 1];
  int64_t batch = p.numElements() / std::max<int64_t>(panels * k * nr, 1);
  Extents shape(p.extents().begin(), p.extents().end() - 3);
  shape.insert(shape.end(), {k, n});
  Tensor out = Tensor::zeros(p.dtype(), shape);
  size_t es = dtypeSize(p.dtype());
  const char *src = static_cast<const char *>(p.rawData());
  char *dst = static_cast<char *>(out.rawData());
  for (int64_t q = 0; q < batch; ++q)
    forEachRun(k, n, nr, [&](int64_t flat, int64_t packed, int64_t count) {
      std::memcpy(dst + (q * k * n + flat) * es, src + (q * panels * k * nr + packed) * es,
                  count * es);
    });
  return out;
}

Tensor packGemmPanelsK4(const Tensor &b, int64_t nr) {
  NNC_ASSERT(b.rank() >= 2 && nr >= 1 && dtypeSize(b.dtype()) == 1,
             "packGemmPanelsK4: expected a byte matrix and nr >= 1");
  int64_t r = b.rank(), k = b.extents()[r - 2], n = b.extents()[r - 1];
  int64_t panels = (n + nr - 1) / nr, groups = (k + 3) / 4;
  int64_t batch = b.numElements() / std::max<int64_t>(k * n, 1);
  Extents shape(b.extents().begin(), b.extents().end() - 2);
  shape.insert(shape.end(), {panels, groups, nr, 4});
  Tensor out = Tensor::zeros(b.dtype(), shape);
  const uint8_t *src = static_cast<const uint8_t *>(b.rawData());
  uint8_t *dst = static_cast<uint8_t *>(out.rawData());
  int64_t matrix = panels * groups * nr * 4;
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        dst[q * matrix + (((j / nr) * groups + p / 4) * nr + j % nr) * 4 + p % 4] =
            src[(q * k + p) * n + j];
  return out;
}

Tensor unpackGemmPanelsK4(const Tensor &p, int64_t k, int64_t n) {
  int64_t r = p.rank();
  NNC_ASSERT(r >= 4 && p.extents()[r - 1] == 4 && p.extents()[r - 4] * p.extents()[r - 2] >= n &&
                 p.extents()[r - 3] * 4 >= k && dtypeSize(p.dtype()) == 1,
             "unpackGemmPanelsK4: expected [..., P, G, nr, 4] byte panels covering {} x {}", k,
             n);
  int64_t panels = p.extents()[r - 4], groups = p.extents()[r - 3], nr = p.extents()[r - 2];
  int64_t matrix = panels * groups * nr * 4;
  int64_t batch = p.numElements() / std::max<int64_t>(matrix, 1);
  Extents shape(p.extents().begin(), p.extents().end() - 4);
  shape.insert(shape.end(), {k, n});
  Tensor out = Tensor::zeros(p.dtype(), shape);
  const uint8_t *src = static_cast<const uint8_t *>(p.rawData());
  uint8_t *dst = static_cast<uint8_t *>(out.rawData());
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j)
        dst[(q * k + i) * n + j] =
            src[q * matrix + (((j / nr) * groups + i / 4) * nr + j % nr) * 4 + i % 4];
  return out;
}

} // namespace nnc
