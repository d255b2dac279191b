// Interpreter kernels of the indexing and generator ops: gather*, scatter*, range,
// constant_of_shape, one_hot, eye_like, trilu, nonzero.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <fmt/ranges.h>

#include "interp/DataMovement.h"
#include "nnc/ir/ShapeUtils.h"
#include "nnc/support/Float16.h"

namespace nnc::interp {

using namespace dm;

namespace {

/// Calls f(multiIndex) for every index of `e` in row-major order.
template <typename F> void forEachIndex(const Extents &e, F f) {
  std::optional<int64_t> n = checkedNumElements(e);
  if (!n || *n == 0)
    return;
  std::vector<int64_t> m(e.size(), 0);
  for (int64_t k = 0; k < *n; ++k) {
    f(m);
    for (int64_t d = static_cast<int64_t>(e.size()) - 1; d >= 0; --d) {
      if (++m[d] < e[d])
        break;
      m[d] = 0;
    }
  }
}

int64_t product(const Extents &e, size_t b, size_t end) {
  int64_t p = 1;
  for (size_t i = b; i < end; ++i)
    p *= e[i];
  return p;
}

// ---- Scatter reductions ---------------------------------------------------------------------

enum class Reduction { None, Add, Mul, Max, Min };

Expected<Reduction> parseReduction(const Node &node, DType t) {
  std::string r = node.getString("reduction", "none");
  Reduction red;
  if (r == "none")
    red = Reduction::None;
  else if (r == "add")
    red = Reduction::Add;
  else if (r == "mul")
    red = Reduction::Mul;
  else if (r == "max")
    red = Reduction::Max;
  else if (r == "min")
    red = Reduction::Min;
  else
    return node.error("unknown reduction '{}'", r);
  if (red != Reduction::None && isStorageOnly(t))
    return node.error("reduction '{}' is not defined on {}", r, dtypeName(t));
  return red;
}

template <typename T> T combine(Reduction r, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return (r == Reduction::Add || r == Reduction::Max) ? (a || b) : (a && b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (r) {
    case Reduction::Add: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case Reduction::Mul: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case Reduction::Max: return std::max(a, b);
    case Reduction::Min: return std::min(a, b);
    default: return b;
    }
  } else {
    switch (r) {
    case Reduction::Add: return a + b;
    case Reduction::Mul: return a * b;
    case Reduction::Max: return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
    case Reduction::Min: return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
    default: return b;
    }
  }
}

template <typename T> void combineAt(Reduction r, char *dst, const char *src) {
  T a, b;
  std::memcpy(&a, dst, sizeof(T));
  std::memcpy(&b, src, sizeof(T));
  T c = combine(r, a, b);
  std::memcpy(dst, &c, sizeof(T));
}

/// dst = dst (reduction) src for one element of dtype t.
void applyReduction(DType t, Reduction r, char *dst, const char *src) {
  if (r == Reduction::None) {
    copyElement(dst, src, dtypeSize(t));
    return;
  }
  switch (t) {
  case DType::F32: return combineAt<float>(r, dst, src);
  case DType::F64: return combineAt<double>(r, dst, src);
  case DType::I8: return combineAt<int8_t>(r, dst, src);
  case DType::U8: return combineAt<uint8_t>(r, dst, src);
  case DType::I16: return combineAt<int16_t>(r, dst, src);
  case DType::U16: return combineAt<uint16_t>(r, dst, src);
  case DType::I32: return combineAt<int32_t>(r, dst, src);
  case DType::U32: return combineAt<uint32_t>(r, dst, src);
  case DType::I64: return combineAt<int64_t>(r, dst, src);
  case DType::U64: return combineAt<uint64_t>(r, dst, src);
  case DType::Bool: return combineAt<bool>(r, dst, src);
  case DType::F16:
  case DType::BF16: {
    uint16_t a, b;
    std::memcpy(&a, dst, 2);
    std::memcpy(&b, src, 2);
    bool half = t == DType::F16;
    float fa = half ? halfToFloat(a) : bf16ToFloat(a), fb = half ? halfToFloat(b) : bf16ToFloat(b);
    float c = combine(r, fa, fb);
    uint16_t bits = half ? floatToHalf(c) : floatToBf16(c);
    std::memcpy(dst, &bits, 2);
    return;
  }
  default: NNC_ASSERT(false, "reduction on storage-only dtype {}", dtypeName(t));
  }
}

// ---- Scalar writes ------------------------------------------------------------------------

/// Writes `v` (a double for float dtypes, else an exact integer) as one element of dtype t.
void storeNumber(DType t, char *dst, double fv, __int128 iv) {
  auto put = [&](auto x) { std::memcpy(dst, &x, sizeof(x)); };
  switch (t) {
  case DType::F32: return put(static_cast<float>(fv));
  case DType::F64: return put(fv);
  case DType::F16: return put(floatToHalf(static_cast<float>(fv)));
  case DType::BF16: return put(floatToBf16(static_cast<float>(fv)));
  case DType::I8: return put(static_cast<int8_t>(iv));
  case DType::U8: return put(static_cast<uint8_t>(iv));
  case DType::I16: return put(static_cast<int16_t>(iv));
  case DType::U16: return put(static_cast<uint16_t>(iv));
  case DType::I32: return put(static_cast<int32_t>(iv));
  case DType::U32: return put(static_cast<uint32_t>(iv));
  case DType::I64: return put(static_cast<int64_t>(iv));
  case DType::U64: return put(static_cast<uint64_t>(iv));
  case DType::Bool: return put(static_cast<bool>(iv != 0));
  default: NNC_ASSERT(false, "storeNumber on {}", dtypeName(t));
  }
}

/// The bit pattern of 1 in dtype t (storage-only formats included).
void storeOne(DType t, char *dst) {
  switch (t) {
  case DType::F8E4M3FN: *dst = 0x38; return;
  case DType::F8E4M3FNUZ: *dst = 0x40; return;
  case DType::F8E5M2: *dst = 0x3C; return;
  case DType::F8E5M2FNUZ: *dst = 0x40; return;
  case DType::F4E2M1: *dst = 0x2; return;
  case DType::F8E8M0: *dst = 0x7F; return;
  case DType::U4:
  case DType::I4:
  case DType::U2:
  case DType::I2: *dst = 1; return;
  default: storeNumber(t, dst, 1.0, 1); return;
  }
}

/// True when element i of t is not zero (NaN counts as non-zero; -0 as zero).
bool isNonZero(const Tensor &t, int64_t i) {
  uint8_t byte = t.data<uint8_t>()[i * static_cast<int64_t>(dtypeSize(t.dtype()))];
  switch (t.dtype()) {
  case DType::F8E4M3FN:
  case DType::F8E5M2: return (byte & 0x7F) != 0;
  case DType::F4E2M1: return (byte & 0x7) != 0;
  case DType::F8E8M0: return true;
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2FNUZ:
  case DType::U4:
  case DType::I4:
  case DType::U2:
  case DType::I2: return byte != 0;
  case DType::I64: return t.data<int64_t>()[i] != 0;
  case DType::U64: return t.data<uint64_t>()[i] != 0;
  default: return t.elementAsDouble(i) != 0.0;
  }
}

} // namespace

// ---- Gathers --------------------------------------------------------------------------------

Results evalGather(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &idxT = ops[1];
  if (x.rank() == 0)
    return node.error("cannot gather from a scalar");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x.rank(), node));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, intValues(node, ops, 1, "indices"));
  int64_t dim = x.dim(axis);
  for (int64_t &i : idx) {
    NNC_ASSIGN_OR_RETURN(i, checkIndex(node, i, dim));
  }
  Extents out(x.extents().begin(), x.extents().begin() + axis);
  out.insert(out.end(), idxT.extents().begin(), idxT.extents().end());
  out.insert(out.end(), x.extents().begin() + axis + 1, x.extents().end());
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(x.dtype(), out));
  int64_t outer = product(x.extents(), 0, axis);
  size_t row = static_cast<size_t>(product(x.extents(), axis + 1, x.rank())) * dtypeSize(x.dtype());
  char *dst = res.data<char>();
  const char *src = x.data<char>();
  for (int64_t o = 0; o < outer && row; ++o)
    for (int64_t i : idx) {
      std::memcpy(dst, src + (o * dim + i) * row, row);
      dst += row;
    }
  return std::vector<Tensor>{res};
}

Results evalGatherElements(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &idxT = ops[1];
  int64_t r = x.rank();
  if (r == 0 || idxT.rank() != r)
    return node.error("data {} and indices {} must have one rank >= 1", extentsStr(x.extents()),
                      extentsStr(idxT.extents()));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && idxT.dim(d) > x.dim(d))
      return node.error("indices {} exceed data {} on axis {}", extentsStr(idxT.extents()),
                        extentsStr(x.extents()), d);
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, intValues(node, ops, 1, "indices"));
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(x.dtype(), idxT.extents()));
  Extents xs = stridesOf(x.extents());
  size_t es = dtypeSize(x.dtype());
  char *dst = res.data<char>();
  const char *src = x.data<char>();
  int64_t k = 0;
  Error err = Error::success();
  forEachIndex(idxT.extents(), [&](const std::vector<int64_t> &m) {
    if (err)
      return;
    Expected<int64_t> i = checkIndex(node, idx[k], x.dim(axis));
    if (!i) {
      err = i.takeError();
      return;
    }
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d)
      off += (d == axis ? *i : m[d]) * xs[d];
    copyElement(dst + (k++) * es, src + off * es, es);
  });
  if (err)
    return err;
  return std::vector<Tensor>{res};
}

Results evalGatherND(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &idxT = ops[1];
  int64_t b = node.getInt("batch_dims"), r = x.rank(), q = idxT.rank();
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q))
    return node.error("bad ranks: data {}, indices {}, batch_dims {}", extentsStr(x.extents()),
                      extentsStr(idxT.extents()), b);
  int64_t k = idxT.dim(q - 1);
  if (k < 1 || b + k > r)
    return node.error("indices {} index {} dims of data {} after {} batch dims",
                      extentsStr(idxT.extents()), k, extentsStr(x.extents()), b);
  for (int64_t d = 0; d < b; ++d)
    if (idxT.dim(d) != x.dim(d))
      return node.error("batch dims of data {} and indices {} differ", extentsStr(x.extents()),
                        extentsStr(idxT.extents()));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, intValues(node, ops, 1, "indices"));
  Extents out(idxT.extents().begin(), idxT.extents().end() - 1);
  out.insert(out.end(), x.extents().begin() + b + k, x.extents().end());
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(x.dtype(), out));
  Extents xs = stridesOf(x.extents());
  size_t es = dtypeSize(x.dtype());
  size_t sliceBytes = static_cast<size_t>(product(x.extents(), b + k, r)) * es;
  int64_t batches = product(idxT.extents(), 0, b), tuples = product(idxT.extents(), b, q - 1);
  int64_t batchStride = product(x.extents(), b, r);
  char *dst = res.data<char>();
  const char *src = x.data<char>();
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t *tuple = &idx[(bi * tuples + t) * k];
      int64_t off = bi * batchStride;
      for (int64_t j = 0; j < k; ++j) {
        NNC_ASSIGN_OR_RETURN(int64_t i, checkIndex(node, tuple[j], x.dim(b + j)));
        off += i * xs[b + j];
      }
      if (sliceBytes)
        std::memcpy(dst, src + off * es, sliceBytes);
      dst += sliceBytes;
    }
  return std::vector<Tensor>{res};
}

// ---- Scatters -------------------------------------------------------------------------------

Results evalScatterElements(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &idxT = ops[1], &upd = ops[2];
  int64_t r = x.rank();
  if (r == 0 || idxT.rank() != r || upd.extents() != idxT.extents() || upd.dtype() != x.dtype())
    return node.error("data {}, indices {} and updates {} do not fit together", x.type().str(),
                      idxT.type().str(), upd.type().str());
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), r, node));
  NNC_ASSIGN_OR_RETURN(Reduction red, parseReduction(node, x.dtype()));
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && idxT.dim(d) > x.dim(d))
      return node.error("indices {} exceed data {} on axis {}", extentsStr(idxT.extents()),
                        extentsStr(x.extents()), d);
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, intValues(node, ops, 1, "indices"));
  Tensor res = x.clone();
  Extents xs = stridesOf(x.extents());
  size_t es = dtypeSize(x.dtype());
  char *dst = res.data<char>();
  const char *src = upd.data<char>();
  int64_t k = 0;
  Error err = Error::success();
  forEachIndex(idxT.extents(), [&](const std::vector<int64_t> &m) {
    if (err)
      return;
    Expected<int64_t> i = checkIndex(node, idx[k], x.dim(axis));
    if (!i) {
      err = i.takeError();
      return;
    }
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d)
      off += (d == axis ? *i : m[d]) * xs[d];
    applyReduction(x.dtype(), red, dst + off * es, src + (k++) * es);
  });
  if (err)
    return err;
  return std::vector<Tensor>{res};
}

Results evalScatterND(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0], &idxT = ops[1], &upd = ops[2];
  int64_t r = x.rank(), q = idxT.rank();
  if (r < 1 || q < 1 || upd.dtype() != x.dtype())
    return node.error("data {}, indices {} and updates {} do not fit together", x.type().str(),
                      idxT.type().str(), upd.type().str());
  int64_t k = idxT.dim(q - 1);
  if (k > r)
    return node.error("indices {} index {} dims of data {}", extentsStr(idxT.extents()), k,
                      extentsStr(x.extents()));
  Extents want(idxT.extents().begin(), idxT.extents().end() - 1);
  want.insert(want.end(), x.extents().begin() + k, x.extents().end());
  if (upd.extents() != want)
    return node.error("updates {} should be {}", extentsStr(upd.extents()), extentsStr(want));
  NNC_ASSIGN_OR_RETURN(Reduction red, parseReduction(node, x.dtype()));
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, intValues(node, ops, 1, "indices"));
  Tensor res = x.clone();
  Extents xs = stridesOf(x.extents());
  size_t es = dtypeSize(x.dtype());
  int64_t sliceElems = product(x.extents(), k, r), tuples = product(idxT.extents(), 0, q - 1);
  char *dst = res.data<char>();
  const char *src = upd.data<char>();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      NNC_ASSIGN_OR_RETURN(int64_t i, checkIndex(node, idx[t * k + j], x.dim(j)));
      off += i * xs[j];
    }
    for (int64_t e = 0; e < sliceElems; ++e)
      applyReduction(x.dtype(), red, dst + (off + e) * es, src + (t * sliceElems + e) * es);
  }
  return std::vector<Tensor>{res};
}

// ---- Generators -----------------------------------------------------------------------------

Results evalRange(const Node &node, const Operands &ops) {
  DType t = ops[0].dtype();
  for (int i = 0; i < 3; ++i)
    if (ops[i].dtype() != t || ops[i].numElements() != 1)
      return node.error("start, limit and delta must be scalars of one dtype");
  if (!isNumeric(t))
    return node.error("range needs a numeric dtype, got {}", dtypeName(t));
  int64_t count;
  if (isFloat(t)) {
    double start = ops[0].elementAsDouble(0), limit = ops[1].elementAsDouble(0),
           delta = ops[2].elementAsDouble(0);
    if (delta == 0)
      return node.error("delta must not be 0");
    double c = t == DType::F64 ? std::ceil((limit - start) / delta)
                               : std::ceil(static_cast<float>(static_cast<float>(limit - start) /
                                                              static_cast<float>(delta)));
    if (!(c < 9.2e18))
      return node.error("range has too many elements");
    // An empty range can be any negative count, -inf included (a limit of -inf), which
    // does not convert to an integer.
    count = c > 0 ? static_cast<int64_t>(c) : 0;
    NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(t, {count}));
    size_t es = dtypeSize(t);
    for (int64_t i = 0; i < count; ++i)
      storeNumber(t, res.data<char>() + i * es, start + static_cast<double>(i) * delta, 0);
    return std::vector<Tensor>{res};
  }
  __int128 start = ops[0].elementAsInt(0), limit = ops[1].elementAsInt(0),
           delta = ops[2].elementAsInt(0);
  if (t == DType::U64) {
    start = ops[0].data<uint64_t>()[0];
    limit = ops[1].data<uint64_t>()[0];
    delta = ops[2].data<uint64_t>()[0];
  }
  if (delta == 0)
    return node.error("delta must not be 0");
  __int128 diff = limit - start;
  __int128 c = delta > 0 ? (diff > 0 ? (diff + delta - 1) / delta : 0)
                         : (diff < 0 ? (diff + delta + 1) / delta : 0);
  count = static_cast<int64_t>(c);
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(t, {count}));
  size_t es = dtypeSize(t);
  for (int64_t i = 0; i < count; ++i)
    storeNumber(t, res.data<char>() + i * es, 0, start + static_cast<__int128>(i) * delta);
  return std::vector<Tensor>{res};
}

Results evalConstantOfShape(const Node &node, const Operands &ops) {
  const Tensor &value = node.getTensor("value");
  if (value.isNull() || value.numElements() != 1)
    return node.error("value must hold exactly one element");
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, intValues(node, ops, 0, "shape"));
  for (int64_t d : shape)
    if (d < 0)
      return node.error("shape [{}] has a negative dim", fmt::join(shape, ","));
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(value.dtype(), shape));
  size_t es = dtypeSize(value.dtype());
  for (int64_t i = 0; i < res.numElements(); ++i)
    copyElement(res.data<char>() + i * es, value.data<char>(), es);
  return std::vector<Tensor>{res};
}

Results evalOneHot(const Node &node, const Operands &ops) {
  const Tensor &idxT = ops[0], &depthT = ops[1], &values = ops[2];
  if (depthT.numElements() != 1 || !isNumeric(depthT.dtype()))
    return node.error("depth must be a numeric scalar");
  if (values.numElements() != 2)
    return node.error("values must have 2 elements [off, on], got {}",
                      extentsStr(values.extents()));
  if (!isNumeric(idxT.dtype()))
    return node.error("indices must be numeric, got {}", dtypeName(idxT.dtype()));
  double dv = depthT.elementAsDouble(0);
  if (!(dv >= 1) || dv > 9.2e18)
    return node.error("depth must be positive, got {}", dv);
  int64_t depth = static_cast<int64_t>(dv);
  int64_t r = idxT.rank(), axis = node.getInt("axis");
  if (axis < -(r + 1) || axis > r)
    return node.error("axis {} is out of range for rank {}", axis, r + 1);
  if (axis < 0)
    axis += r + 1;
  Extents out = idxT.extents();
  out.insert(out.begin() + axis, depth);
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(values.dtype(), out));
  size_t es = dtypeSize(values.dtype());
  const char *off = values.data<char>(), *on = off + es;
  char *dst = res.data<char>();
  for (int64_t i = 0; i < res.numElements(); ++i)
    copyElement(dst + i * es, off, es);
  int64_t outer = product(idxT.extents(), 0, axis), inner = product(idxT.extents(), axis, r);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t raw;
      if (isFloat(idxT.dtype())) {
        double v = idxT.elementAsDouble(o * inner + in);
        if (!(std::fabs(v) < 9.2e18))
          continue;
        raw = static_cast<int64_t>(v);
      } else {
        raw = idxT.elementAsInt(o * inner + in);
      }
      if (raw < -depth || raw >= depth)
        continue; // out of range: all `off`, as ONNX specifies
      int64_t i = raw < 0 ? raw + depth : raw;
      copyElement(dst + ((o * depth + i) * inner + in) * es, on, es);
    }
  return std::vector<Tensor>{res};
}

Results evalEyeLike(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.rank() != 2)
    return node.error("needs a 2-D operand, got {}", extentsStr(x.extents()));
  DType t = node.getDType("dtype", x.dtype());
  int64_t k = node.getInt("k", 0);
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(t, x.extents()));
  size_t es = dtypeSize(t);
  int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t j = i + k;
    if (j >= 0 && j < cols)
      storeOne(t, res.data<char>() + (i * cols + j) * es);
  }
  return std::vector<Tensor>{res};
}

Results evalTrilu(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  if (x.rank() < 2)
    return node.error("needs rank >= 2, got {}", extentsStr(x.extents()));
  int64_t k = 0;
  if (ops.size() > 1 && !ops[1].isNull()) {
    if (ops[1].numElements() != 1 || !isInteger(ops[1].dtype()))
      return node.error("k must be an integer scalar");
    k = ops[1].elementAsInt(0);
  }
  bool upper = node.getInt("upper") != 0;
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(x.dtype(), x.extents()));
  size_t es = dtypeSize(x.dtype());
  int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  int64_t mats = product(x.extents(), 0, x.rank() - 2);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        // j - i compared with k, in 128 bits so extreme k cannot overflow.
        __int128 diff = static_cast<__int128>(j) - i;
        bool keep = upper ? diff >= k : diff <= k;
        if (keep) {
          int64_t at = (m * rows + i) * cols + j;
          copyElement(res.data<char>() + at * es, x.data<char>() + at * es, es);
        }
      }
  return std::vector<Tensor>{res};
}

Results evalNonZero(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  int64_t r = x.rank();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numElements(); ++i)
    if (isNonZero(x, i))
      hits.push_back(i);
  int64_t n = static_cast<int64_t>(hits.size());
  NNC_ASSIGN_OR_RETURN(Tensor res, Tensor::create(DType::I64, {r, n}));
  Extents xs = stridesOf(x.extents());
  int64_t *out = res.data<int64_t>();
  for (int64_t c = 0; c < n; ++c)
    for (int64_t d = 0; d < r; ++d)
      out[d * n + c] = (hits[c] / xs[d]) % x.dim(d);
  return std::vector<Tensor>{res};
}

} // namespace nnc::interp
