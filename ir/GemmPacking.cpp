// Packing of GEMM weights into column panels and back (include/nnc/ir/GemmPacking.h).
#include "nnc/ir/GemmPacking.h"

#include <algorithm>
#include <cstring>

#include "nnc/support/Error.h"
#include "nnc/support/Float16.h"

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

namespace {

/// Panels of nr columns over groups of `G` k rows interleaved per column ([..., P, ceil(K/G),
/// nr, G]) of the matrices `b` of elements E, zero past K and N: the dot-product tiles' layout.
template <typename E, int64_t G> Tensor packGrouped(const Tensor &b, int64_t nr, DType dtype) {
  int64_t r = b.rank(), k = b.extents()[r - 2], n = b.extents()[r - 1];
  int64_t panels = (n + nr - 1) / nr, groups = (k + G - 1) / G;
  int64_t batch = b.numElements() / std::max<int64_t>(k * n, 1);
  Extents shape(b.extents().begin(), b.extents().end() - 2);
  shape.insert(shape.end(), {panels, groups, nr, G});
  Tensor out = Tensor::zeros(dtype, shape);
  const E *src = static_cast<const E *>(b.rawData());
  E *dst = static_cast<E *>(out.rawData());
  int64_t matrix = panels * groups * nr * G;
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        dst[q * matrix + (((j / nr) * groups + p / G) * nr + j % nr) * G + p % G] =
            src[(q * k + p) * n + j];
  return out;
}

/// The [..., k, n] matrices back from grouped panels `p` ([..., P, groups, nr, G]).
template <typename E, int64_t G> Tensor unpackGrouped(const Tensor &p, int64_t k, int64_t n) {
  int64_t r = p.rank();
  int64_t panels = p.extents()[r - 4], groups = p.extents()[r - 3], nr = p.extents()[r - 2];
  int64_t matrix = panels * groups * nr * G;
  int64_t batch = p.numElements() / std::max<int64_t>(matrix, 1);
  Extents shape(p.extents().begin(), p.extents().end() - 4);
  shape.insert(shape.end(), {k, n});
  Tensor out = Tensor::zeros(p.dtype(), shape);
  const E *src = static_cast<const E *>(p.rawData());
  E *dst = static_cast<E *>(out.rawData());
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j)
        dst[(q * k + i) * n + j] =
            src[q * matrix + (((j / nr) * groups + i / G) * nr + j % nr) * G + i % G];
  return out;
}

} // namespace

Tensor packGemmPanelsK4(const Tensor &b, int64_t nr) {
  NNC_ASSERT(b.rank() >= 2 && nr >= 1 && dtypeSize(b.dtype()) == 1,
             "packGemmPanelsK4: expected a byte matrix and nr >= 1");
  return packGrouped<uint8_t, 4>(b, nr, b.dtype());
}

Tensor unpackGemmPanelsK4(const Tensor &p, int64_t k, int64_t n) {
  int64_t r = p.rank();
  NNC_ASSERT(r >= 4 && p.extents()[r - 1] == 4 && p.extents()[r - 4] * p.extents()[r - 2] >= n &&
                 p.extents()[r - 3] * 4 >= k && dtypeSize(p.dtype()) == 1,
             "unpackGemmPanelsK4: expected [..., P, G, nr, 4] byte panels covering {} x {}", k,
             n);
  return unpackGrouped<uint8_t, 4>(p, k, n);
}

Tensor packGemmPanelsBf16(const Tensor &b, int64_t nr) {
  NNC_ASSERT(b.rank() >= 2 && nr >= 1 && (b.dtype() == DType::F32 || b.dtype() == DType::BF16),
             "packGemmPanelsBf16: expected an f32 or bf16 matrix and nr >= 1");
  if (b.dtype() == DType::BF16)
    return packGrouped<uint16_t, 2>(b, nr, DType::BF16);
  Tensor rounded = Tensor::zeros(DType::BF16, b.extents());
  const float *src = b.data<float>();
  uint16_t *dst = rounded.data<uint16_t>();
  for (int64_t i = 0; i < b.numElements(); ++i)
    dst[i] = floatToBf16(src[i]);
  return packGrouped<uint16_t, 2>(rounded, nr, DType::BF16);
}

Tensor packConvWeightBf16Pairs(const Tensor &w) {
  int64_t r = w.rank();
  NNC_ASSERT(r >= 2 && w.dtype() == DType::F32 && w.extents()[r - 2] % 2 == 0,
             "packConvWeightBf16Pairs: expected an f32 [..., bi, b] weight with bi even");
  const int64_t bi = w.extents()[r - 2], b = w.extents()[r - 1], blocks = w.numElements() / (bi * b);
  Tensor out = Tensor::zeros(DType::BF16, w.extents());
  const float *src = w.data<float>();
  uint16_t *dst = out.data<uint16_t>();
  for (int64_t k = 0; k < blocks; ++k)
    for (int64_t c = 0; c < bi; ++c)
      for (int64_t j = 0; j < b; ++j)
        dst[k * bi * b + c / 2 * 2 * b + 2 * j + c % 2] = floatToBf16(src[k * bi * b + c * b + j]);
  return out;
}

Tensor unpackGemmPanelsBf16(const Tensor &p, int64_t k, int64_t n) {
  int64_t r = p.rank();
  NNC_ASSERT(r >= 4 && p.extents()[r - 1] == 2 && p.extents()[r - 4] * p.extents()[r - 2] >= n &&
                 p.extents()[r - 3] * 2 >= k && p.dtype() == DType::BF16,
             "unpackGemmPanelsBf16: expected [..., P, G, nr, 2] bf16 panels covering {} x {}", k,
             n);
  return unpackGrouped<uint16_t, 2>(p, k, n);
}

} // namespace nnc
