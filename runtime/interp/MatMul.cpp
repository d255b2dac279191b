// Interpreter kernels of matmul (numpy semantics) and einsum.
#include <algorithm>
#include <map>
#include <optional>

#include <Eigen/Dense>

#include "interp/Kernels.h"
#include "interp/NNSupport.h"
#include "nnc/ir/GemmPacking.h"
#include "nnc/ir/NNGeometry.h"
#include "nnc/ir/ShapeUtils.h"
#include "nnc/support/Float16.h"

namespace nnc::interp {

namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Offsets (in matrices) of each batch of `out` in an operand with batch extents `in`
/// (right-aligned numpy broadcasting).
std::vector<int64_t> batchOffsets(const Extents &out, const Extents &in) {
  size_t off = out.size() - in.size();
  std::vector<int64_t> stride(out.size(), 0);
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    stride[off + i] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  std::vector<int64_t> r;
  std::vector<int64_t> idx(out.size(), 0);
  int64_t n = nn::product(out);
  for (int64_t b = 0; b < n; ++b) {
    int64_t o = 0;
    for (size_t d = 0; d < out.size(); ++d)
      o += idx[d] * stride[d];
    r.push_back(o);
    nn::nextIndex(idx, out);
  }
  return r;
}

/// The numpy matmul geometry of operands a and b: M, K, N, the result's extents and each
/// batch entry's matrix offset in a and in b.
struct MatMulGeometry {
  int64_t m = 0, k = 0, n = 0;
  Extents out;
  std::vector<int64_t> aOff, bOff;
};

Expected<MatMulGeometry> matmulGeometry(const Node &node, const Tensor &a, const Tensor &b) {
  if (a.rank() < 1 || b.rank() < 1)
    return node.error("operands must have rank >= 1");
  Extents as = a.extents(), bs = b.extents();
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    return node.error("inner dims differ: {} and {}", extentsStr(a.extents()),
                      extentsStr(b.extents()));
  Extents batchA(as.begin(), as.end() - 2), batchB(bs.begin(), bs.end() - 2);
  std::optional<Extents> batch = broadcastExtents(batchA, batchB);
  if (!batch)
    return node.error("batch dims {} and {} do not broadcast", extentsStr(batchA),
                      extentsStr(batchB));
  Extents out = *batch;
  if (!aVec)
    out.push_back(m);
  if (!bVec)
    out.push_back(n);
  MatMulGeometry g;
  g.m = m;
  g.k = k;
  g.n = n;
  g.out = out;
  g.aOff = batchOffsets(*batch, batchA);
  g.bOff = batchOffsets(*batch, batchB);
  return g;
}

/// Integer matmul with wrap-around arithmetic (computed modulo 2^64, then truncated).
template <typename T>
void intMatMul(const T *a, const T *b, T *c, const std::vector<int64_t> &aOff,
               const std::vector<int64_t> &bOff, int64_t m, int64_t k, int64_t n) {
  std::vector<uint64_t> row(static_cast<size_t>(n));
  for (size_t bi = 0; bi < aOff.size(); ++bi) {
    const T *pa = a + aOff[bi] * m * k;
    const T *pb = b + bOff[bi] * k * n;
    T *pc = c + static_cast<int64_t>(bi) * m * n;
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0);
      for (int64_t p = 0; p < k; ++p) {
        uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(pa[i * k + p]));
        if constexpr (std::is_unsigned_v<T>)
          x = static_cast<uint64_t>(pa[i * k + p]);
        for (int64_t j = 0; j < n; ++j) {
          uint64_t y = std::is_unsigned_v<T>
                           ? static_cast<uint64_t>(pb[p * n + j])
                           : static_cast<uint64_t>(static_cast<int64_t>(pb[p * n + j]));
          row[j] += x * y;
        }
      }
      for (int64_t j = 0; j < n; ++j)
        pc[i * n + j] = static_cast<T>(row[j]);
    }
  }
}

} // namespace

Results evalMatMul(const Node &node, const Operands &ops) {
  const Tensor &a = ops[0];
  // A packed weight (ir/GemmPacking.h) is unpacked to its [K, N] matrix first.
  std::optional<Tensor> unpacked;
  // bf16 panels (--precision bf16): A rounded to bf16, the products summed (here exactly, in
  // f64) into an f32 result.
  if (node.hasAttr("packed_n") && a.dtype() == DType::F32 && ops[1].dtype() == DType::BF16) {
    int64_t r = ops[1].rank(), n = node.getInt("packed_n");
    const Extents &e = ops[1].extents();
    if (a.rank() < 2 || r < 4 || e[r - 1] != 2 || e[r - 4] * e[r - 2] < n ||
        e[r - 3] != (a.extents().back() + 1) / 2)
      return node.error("packed operand 1 {} does not hold {} columns of {} rows in bf16 pairs",
                        extentsStr(e), n, a.rank() ? a.extents().back() : 0);
    Tensor b = unpackGemmPanelsBf16(ops[1], a.extents().back(), n);
    Tensor ra = Tensor::zeros(DType::BF16, a.extents());
    for (int64_t i = 0; i < a.numElements(); ++i)
      ra.data<uint16_t>()[i] = floatToBf16(a.data<float>()[i]);
    NNC_ASSIGN_OR_RETURN(MatMulGeometry g, matmulGeometry(node, ra, b));
    std::vector<double> av = nn::toDoubles(ra), bv = nn::toDoubles(b);
    std::vector<double> cv(static_cast<size_t>(nn::product(g.out)));
    for (size_t bi = 0; bi < g.aOff.size(); ++bi) {
      Eigen::Map<const RowMatrix> ma(av.data() + g.aOff[bi] * g.m * g.k, g.m, g.k);
      Eigen::Map<const RowMatrix> mb(bv.data() + g.bOff[bi] * g.k * g.n, g.k, g.n);
      Eigen::Map<RowMatrix> mc(cv.data() + static_cast<int64_t>(bi) * g.m * g.n, g.m, g.n);
      if (g.k == 0)
        mc.setZero();
      else
        mc.noalias() = ma * mb;
    }
    NNC_ASSIGN_OR_RETURN(Tensor out, nn::fromDoubles(DType::F32, g.out, cv));
    return std::vector<Tensor>{out};
  }
  if (node.hasAttr("packed_n")) {
    int64_t r = ops[1].rank();
    if (r < 3 || ops[1].extents()[r - 3] * ops[1].extents()[r - 1] < node.getInt("packed_n"))
      return node.error("packed operand 1 {} does not hold {} columns",
                        extentsStr(ops[1].extents()), node.getInt("packed_n"));
    unpacked = unpackGemmPanels(ops[1], node.getInt("packed_n"));
  }
  const Tensor &b = unpacked ? *unpacked : ops[1];
  if (a.dtype() != b.dtype())
    return node.error("operand dtypes differ: {} and {}", dtypeName(a.dtype()),
                      dtypeName(b.dtype()));
  NNC_ASSIGN_OR_RETURN(MatMulGeometry g, matmulGeometry(node, a, b));
  int64_t m = g.m, k = g.k, n = g.n;
  const Extents &out = g.out;
  const std::vector<int64_t> &aOff = g.aOff, &bOff = g.bOff;

  if (isFloat(a.dtype())) {
    std::vector<double> av = nn::toDoubles(a), bv = nn::toDoubles(b);
    std::vector<double> cv(static_cast<size_t>(nn::product(out)));
    for (size_t bi = 0; bi < aOff.size(); ++bi) {
      Eigen::Map<const RowMatrix> ma(av.data() + aOff[bi] * m * k, m, k);
      Eigen::Map<const RowMatrix> mb(bv.data() + bOff[bi] * k * n, k, n);
      Eigen::Map<RowMatrix> mc(cv.data() + static_cast<int64_t>(bi) * m * n, m, n);
      if (k == 0)
        mc.setZero();
      else
        mc.noalias() = ma * mb;
    }
    NNC_ASSIGN_OR_RETURN(Tensor r, nn::fromDoubles(a.dtype(), out, cv));
    return std::vector<Tensor>{r};
  }
  NNC_ASSIGN_OR_RETURN(Tensor r, Tensor::create(a.dtype(), out));
  switch (a.dtype()) {
#define NNC_INT_CASE(D, C)                                                                         \
  case DType::D:                                                                                   \
    intMatMul<C>(a.data<C>(), b.data<C>(), r.data<C>(), aOff, bOff, m, k, n);                      \
    break;
    NNC_INT_CASE(I8, int8_t)
    NNC_INT_CASE(U8, uint8_t)
    NNC_INT_CASE(I16, int16_t)
    NNC_INT_CASE(U16, uint16_t)
    NNC_INT_CASE(I32, int32_t)
    NNC_INT_CASE(U32, uint32_t)
    NNC_INT_CASE(I64, int64_t)
    NNC_INT_CASE(U64, uint64_t)
#undef NNC_INT_CASE
  default:
    return node.error("unsupported dtype {}", dtypeName(a.dtype()));
  }
  return std::vector<Tensor>{r};
}

Results evalMatMulInteger(const Node &node, const Operands &ops) {
  const Tensor &a = ops[0];
  // A packed weight (ir/GemmPacking.h) is unpacked to its [K, N] matrix first.
  std::optional<Tensor> unpacked;
  if (node.hasAttr("packed_n")) {
    int64_t r = ops[1].rank(), n = node.getInt("packed_n");
    const Extents &e = ops[1].extents();
    if (a.rank() < 2 || r < 4 || e[r - 1] != 4 || e[r - 4] * e[r - 2] < n ||
        e[r - 3] != (a.extents().back() + 3) / 4)
      return node.error("packed operand 1 {} does not hold {} columns of {} rows",
                        extentsStr(e), n, a.rank() ? a.extents().back() : 0);
    unpacked = unpackGemmPanelsK4(ops[1], a.extents().back(), n);
  }
  const Tensor &b = unpacked ? *unpacked : ops[1];
  for (const Tensor *t : {&a, &b})
    if (t->dtype() != DType::U8 && t->dtype() != DType::I8)
      return node.error("expects u8 or i8 operands, got {}", dtypeName(t->dtype()));
  NNC_ASSIGN_OR_RETURN(MatMulGeometry g, matmulGeometry(node, a, b));
  int64_t m = g.m, k = g.k, n = g.n;
  const Extents &out = g.out;
  const std::vector<int64_t> &aOff = g.aOff, &bOff = g.bOff;
  // Zero points as one value per row of A / column of B (a scalar repeated).
  auto zeroPoints = [&](size_t z, int64_t count) -> Expected<std::vector<int64_t>> {
    std::vector<int64_t> v(static_cast<size_t>(count), 0);
    if (ops.size() <= z || ops[z].isNull())
      return v;
    const Tensor &t = ops[z];
    if (t.rank() > 1 || (t.numElements() != 1 && t.numElements() != count))
      return node.error("zero point {} {} must be a scalar or hold {} values", z,
                        extentsStr(t.extents()), count);
    std::vector<double> d = nn::toDoubles(t);
    for (int64_t i = 0; i < count; ++i)
      v[static_cast<size_t>(i)] = static_cast<int64_t>(d[t.numElements() == 1 ? 0 : i]);
    return v;
  };
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> za, zeroPoints(2, m));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> zb, zeroPoints(3, n));
  std::vector<double> av = nn::toDoubles(a), bv = nn::toDoubles(b);
  NNC_ASSIGN_OR_RETURN(Tensor r, Tensor::create(DType::I32, out));
  int32_t *c = r.data<int32_t>();
  // Exact in i64 (|products| < 2^16, so any K below 2^47 fits), then wrapped to i32 as the
  // integer matmul's i32 sum is defined to wrap.
  for (size_t bi = 0; bi < aOff.size(); ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += (static_cast<int64_t>(av[(aOff[bi] * m + i) * k + p]) - za[i]) *
                 (static_cast<int64_t>(bv[(bOff[bi] * k + p) * n + j]) - zb[j]);
        c[(static_cast<int64_t>(bi) * m + i) * n + j] =
            static_cast<int32_t>(static_cast<uint32_t>(acc));
      }
  return std::vector<Tensor>{r};
}

namespace {

/// The einsum loop: the output labels are the outer loop, the summed labels the inner one.
/// `Acc` is double for floats and uint64_t (wrap-around) for integers.
template <typename Acc, typename Load>
std::vector<Acc> einsumLoop(const std::vector<std::vector<int64_t>> &outStride,
                            const std::vector<std::vector<int64_t>> &sumStride,
                            const Extents &outExt, const Extents &sumExt, size_t numOps,
                            Load load) {
  int64_t outN = nn::product(outExt), sumN = nn::product(sumExt);
  std::vector<Acc> result(static_cast<size_t>(outN));
  std::vector<int64_t> oi(outExt.size(), 0), si(sumExt.size(), 0);
  std::vector<int64_t> base(numOps), off(numOps);
  for (int64_t o = 0; o < outN; ++o) {
    for (size_t j = 0; j < numOps; ++j) {
      base[j] = 0;
      for (size_t d = 0; d < oi.size(); ++d)
        base[j] += oi[d] * outStride[j][d];
    }
    Acc acc = 0;
    std::fill(si.begin(), si.end(), 0);
    for (int64_t s = 0; s < sumN; ++s) {
      Acc prod = 1;
      for (size_t j = 0; j < numOps; ++j) {
        int64_t p = base[j];
        for (size_t d = 0; d < si.size(); ++d)
          p += si[d] * sumStride[j][d];
        prod *= load(j, p);
      }
      acc += prod;
      nn::nextIndex(si, sumExt);
    }
    result[static_cast<size_t>(o)] = acc;
    nn::nextIndex(oi, outExt);
  }
  return result;
}

} // namespace

Results evalEinsum(const Node &node, const Operands &ops) {
  std::vector<int64_t> ranks;
  for (const Tensor &t : ops) {
    if (t.dtype() != ops[0].dtype())
      return node.error("operand dtypes differ");
    ranks.push_back(t.rank());
  }
  NNC_ASSIGN_OR_RETURN(EinsumLabels labels, parseEinsum(node, ranks));
  std::map<int, int64_t> size;
  for (size_t j = 0; j < ops.size(); ++j)
    for (size_t d = 0; d < labels.operands[j].size(); ++d) {
      int l = labels.operands[j][d];
      int64_t e = ops[j].dim(static_cast<int64_t>(d));
      auto it = size.find(l);
      if (it == size.end() || it->second == 1)
        size[l] = e;
      else if (e != 1 && e != it->second)
        return node.error("label '{}' has sizes {} and {}",
                          l < 256 ? std::string(1, static_cast<char>(l)) : "...", it->second, e);
    }
  std::vector<int> outLabels = labels.output, sumLabels;
  for (auto [l, e] : size)
    if (std::find(outLabels.begin(), outLabels.end(), l) == outLabels.end())
      sumLabels.push_back(l);
  Extents outExt, sumExt;
  for (int l : outLabels)
    outExt.push_back(size[l]);
  for (int l : sumLabels)
    sumExt.push_back(size[l]);
  // Stride of each label in each operand (a repeated label walks the diagonal; a broadcast
  // size-1 axis has stride 0).
  std::vector<std::vector<int64_t>> outStride(ops.size()), sumStride(ops.size());
  for (size_t j = 0; j < ops.size(); ++j) {
    std::vector<int64_t> st = nn::stridesOf(ops[j].extents());
    std::map<int, int64_t> ls;
    for (size_t d = 0; d < labels.operands[j].size(); ++d)
      if (ops[j].dim(static_cast<int64_t>(d)) != 1)
        ls[labels.operands[j][d]] += st[d];
    for (int l : outLabels)
      outStride[j].push_back(ls.count(l) ? ls[l] : 0);
    for (int l : sumLabels)
      sumStride[j].push_back(ls.count(l) ? ls[l] : 0);
  }
  DType t = ops[0].dtype();
  if (isFloat(t)) {
    std::vector<std::vector<double>> vals;
    for (const Tensor &op : ops)
      vals.push_back(nn::toDoubles(op));
    std::vector<double> r =
        einsumLoop<double>(outStride, sumStride, outExt, sumExt, ops.size(),
                           [&](size_t j, int64_t p) { return vals[j][static_cast<size_t>(p)]; });
    NNC_ASSIGN_OR_RETURN(Tensor res, nn::fromDoubles(t, outExt, r));
    return std::vector<Tensor>{res};
  }
  if (!isInteger(t))
    return node.error("unsupported dtype {}", dtypeName(t));
  std::vector<std::vector<uint64_t>> vals;
  for (const Tensor &op : ops) {
    std::vector<uint64_t> v(static_cast<size_t>(op.numElements()));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<uint64_t>(op.elementAsInt(static_cast<int64_t>(i)));
    vals.push_back(std::move(v));
  }
  std::vector<uint64_t> r =
      einsumLoop<uint64_t>(outStride, sumStride, outExt, sumExt, ops.size(),
                           [&](size_t j, int64_t p) { return vals[j][static_cast<size_t>(p)]; });
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(t, outExt));
  switch (t) {
#define NNC_INT_CASE(D, C)                                                                         \
  case DType::D:                                                                                   \
    for (size_t i = 0; i < r.size(); ++i)                                                          \
      res.data<C>()[i] = static_cast<C>(r[i]);                                                     \
    break;
    NNC_INT_CASE(I8, int8_t)
    NNC_INT_CASE(U8, uint8_t)
    NNC_INT_CASE(I16, int16_t)
    NNC_INT_CASE(U16, uint16_t)
    NNC_INT_CASE(I32, int32_t)
    NNC_INT_CASE(U32, uint32_t)
    NNC_INT_CASE(I64, int64_t)
    NNC_INT_CASE(U64, uint64_t)
#undef NNC_INT_CASE
  default:
    break;
  }
  return std::vector<Tensor>{res};
}

} // namespace nnc::interp
