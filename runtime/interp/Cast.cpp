// Interpreter kernels of cast (every dtype to every dtype, ONNX Cast semantics: ScalarOps.h's
// castNumber), bitcast (the bytes reinterpreted), quantize, dequantize (ONNX QuantizeLinear /
// DequantizeLinear as the reference computes them) and constant.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "nnc/ir/Quantize.h"
#include "nnc/ir/ShapeUtils.h"

#include "Scalar.h"
#include "nnc/ir/ScalarOps.h"
#include "nnc/support/FloatFormats.h"
#include "interp/Kernels.h"

namespace nnc::interp {
namespace {

using namespace nnc::fp;

using scalar::Number;

Number floatNumber(DType t, double f) {
  Number v;
  v.type = t;
  v.f = f;
  return v;
}

/// One source element, exactly; a storage-only element as its canonical arithmetic value
/// (storageCanonical: f64 for the float formats, i64/u64 for the sub-byte integers).
Number readElement(const Tensor &t, int64_t i) {
  const void *p = t.rawData();
  const uint8_t *u8 = static_cast<const uint8_t *>(p);
  DType d = t.dtype();
  switch (d) {
  case DType::F32: return floatNumber(d, static_cast<const float *>(p)[i]);
  case DType::F64: return floatNumber(d, static_cast<const double *>(p)[i]);
  case DType::F16: return floatNumber(d, halfToFloat(static_cast<const uint16_t *>(p)[i]));
  case DType::BF16: return floatNumber(d, bf16ToFloat(static_cast<const uint16_t *>(p)[i]));
  case DType::I8: return scalar::intNumber(d, static_cast<const int8_t *>(p)[i]);
  case DType::U8: return scalar::intNumber(d, u8[i]);
  case DType::I16: return scalar::intNumber(d, static_cast<const int16_t *>(p)[i]);
  case DType::U16: return scalar::intNumber(d, static_cast<const uint16_t *>(p)[i]);
  case DType::I32: return scalar::intNumber(d, static_cast<const int32_t *>(p)[i]);
  case DType::U32: return scalar::intNumber(d, static_cast<const uint32_t *>(p)[i]);
  case DType::I64: return scalar::intNumber(d, static_cast<const int64_t *>(p)[i]);
  case DType::U64: return scalar::intNumber(d, static_cast<const uint64_t *>(p)[i]);
  case DType::Bool: return scalar::intNumber(d, static_cast<const bool *>(p)[i] ? 1 : 0);
  case DType::F8E4M3FN: return floatNumber(DType::F64, fromF8E4M3FN(u8[i]));
  case DType::F8E4M3FNUZ: return floatNumber(DType::F64, fromF8E4M3FNUZ(u8[i]));
  case DType::F8E5M2: return floatNumber(DType::F64, fromF8E5M2(u8[i]));
  case DType::F8E5M2FNUZ: return floatNumber(DType::F64, fromF8E5M2FNUZ(u8[i]));
  case DType::F4E2M1: return floatNumber(DType::F64, fromF4E2M1(u8[i]));
  case DType::F8E8M0: return floatNumber(DType::F64, fromF8E8M0(u8[i]));
  case DType::U4: return scalar::intNumber(DType::U64, fromSubByteInt(u8[i], 4, false));
  case DType::I4:
    return scalar::intNumber(DType::I64, static_cast<uint64_t>(fromSubByteInt(u8[i], 4, true)));
  case DType::U2: return scalar::intNumber(DType::U64, fromSubByteInt(u8[i], 2, false));
  case DType::I2:
    return scalar::intNumber(DType::I64, static_cast<uint64_t>(fromSubByteInt(u8[i], 2, true)));
  }
  return Number();
}

struct CastOptions {
  bool saturate = true;
  E8M0Round roundMode = E8M0Round::Up;
};

/// Writes `v` converted to the tensor's dtype: ScalarOps.h's castNumber to the dtype (or to
/// the canonical type of a storage-only dtype, then encoded).
void writeElement(Tensor &t, int64_t i, const Number &v, const CastOptions &opt) {
  void *p = t.rawData();
  uint8_t *u8 = static_cast<uint8_t *>(p);
  DType d = t.dtype();
  Number c = scalar::castNumber(v, isStorageOnly(d) ? storageCanonical(d) : d);
  switch (d) {
  case DType::F32: static_cast<float *>(p)[i] = static_cast<float>(c.f); return;
  case DType::F64: static_cast<double *>(p)[i] = c.f; return;
  case DType::F16: static_cast<uint16_t *>(p)[i] = floatToHalf(static_cast<float>(c.f)); return;
  case DType::BF16: static_cast<uint16_t *>(p)[i] = floatToBf16(static_cast<float>(c.f)); return;
  case DType::Bool: static_cast<bool *>(p)[i] = c.i != 0; return;
  case DType::I8: static_cast<int8_t *>(p)[i] = static_cast<int8_t>(c.i); return;
  case DType::U8: u8[i] = static_cast<uint8_t>(c.i); return;
  case DType::I16: static_cast<int16_t *>(p)[i] = static_cast<int16_t>(c.i); return;
  case DType::U16: static_cast<uint16_t *>(p)[i] = static_cast<uint16_t>(c.i); return;
  case DType::I32: static_cast<int32_t *>(p)[i] = static_cast<int32_t>(c.i); return;
  case DType::U32: static_cast<uint32_t *>(p)[i] = static_cast<uint32_t>(c.i); return;
  case DType::I64: static_cast<int64_t *>(p)[i] = c.i; return;
  case DType::U64: static_cast<uint64_t *>(p)[i] = c.u(); return;
  // Sub-byte integers keep the low bits (two's complement), like numpy/ml_dtypes astype.
  case DType::U4:
  case DType::I4: u8[i] = toSubByteInt(c.u(), 4); return;
  case DType::U2:
  case DType::I2: u8[i] = toSubByteInt(c.u(), 2); return;
  case DType::F8E4M3FN: u8[i] = toF8E4M3FN(c.f, opt.saturate); return;
  case DType::F8E4M3FNUZ: u8[i] = toF8E4M3FNUZ(c.f, opt.saturate); return;
  case DType::F8E5M2: u8[i] = toF8E5M2(c.f, opt.saturate); return;
  case DType::F8E5M2FNUZ: u8[i] = toF8E5M2FNUZ(c.f, opt.saturate); return;
  case DType::F4E2M1: u8[i] = toF4E2M1(c.f); return;
  case DType::F8E8M0:
    u8[i] = toF8E8M0(static_cast<float>(c.f), opt.saturate, opt.roundMode);
    return;
  }
}

} // namespace

Expected<Tensor> castTensor(const Tensor &x, DType to, bool saturate,
                            const std::string &roundMode) {
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(to, x.extents()));
  if (x.dtype() == to) {
    if (x.byteSize())
      std::memcpy(out.rawData(), x.rawData(), x.byteSize());
    return out;
  }
  CastOptions opt{saturate, E8M0Round::Up};
  if (!parseE8M0Round(roundMode.c_str(), opt.roundMode))
    return makeError("round_mode must be up, down or nearest, got '{}'", roundMode);
  int64_t n = x.numElements();
  if (x.dtype() == DType::F32 && to == DType::F16) { // the common case, bit-exact and fast
    const float *s = x.data<float>();
    uint16_t *d = out.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      d[i] = floatToHalf(s[i]);
    return out;
  }
  for (int64_t i = 0; i < n; ++i)
    writeElement(out, i, readElement(x, i), opt);
  return out;
}

namespace {

/// For each element of `out` (row-major), the flat offset of the element of an operand of
/// extents `in` that numpy broadcasting reads there.
std::vector<int64_t> broadcastOffsets(const Extents &out, const Extents &in) {
  size_t r = out.size();
  std::vector<int64_t> stride(r, 0);
  int64_t s = 1;
  for (size_t j = 0; j < in.size(); ++j) {
    size_t d = in.size() - 1 - j;
    stride[r - 1 - j] = in[d] == 1 ? 0 : s;
    s *= in[d];
  }
  int64_t n = 1;
  for (int64_t e : out)
    n *= e;
  std::vector<int64_t> offs(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    offs[static_cast<size_t>(i)] = off;
    for (size_t j = r; j-- > 0;) {
      ++idx[j];
      off += stride[j];
      if (idx[j] < out[j])
        break;
      off -= stride[j] * out[j];
      idx[j] = 0;
    }
  }
  return offs;
}

/// The broadcast extents of the three operands of quantize / dequantize, with each one's
/// offsets per result element.
Expected<Extents> broadcastThree(const Node &node, const Operands &ops,
                                 std::vector<int64_t> (&offs)[3]) {
  if (ops.size() != 3)
    return node.error("expects 3 operands, got {}", ops.size());
  for (size_t k = 0; k < 3; ++k)
    if (ops[k].isNull())
      return node.error("operand {} is missing", k);
  Extents out = ops[0].extents();
  for (size_t k = 1; k < 3; ++k) {
    std::optional<Extents> b = broadcastExtents(out, ops[k].extents());
    if (!b)
      return node.error("operand shapes {}, {} and {} do not broadcast",
                        extentsStr(ops[0].extents()), extentsStr(ops[1].extents()),
                        extentsStr(ops[2].extents()));
    out = *b;
  }
  for (size_t k = 0; k < 3; ++k)
    offs[k] = broadcastOffsets(out, ops[k].extents());
  return out;
}

/// x / scale as numpy divides two arrays of x's dtype: f16 and bf16 divide in f32 and round
/// back.
double quotient(DType t, double x, double s) {
  switch (t) {
  case DType::F64: return x / s;
  case DType::F16: return halfToFloat(floatToHalf(static_cast<float>(x) / static_cast<float>(s)));
  case DType::BF16:
    return bf16ToFloat(floatToBf16(static_cast<float>(x) / static_cast<float>(s)));
  default: return static_cast<float>(x) / static_cast<float>(s);
  }
}

} // namespace

Results evalCast(const Node &node, const Operands &ops) {
  if (ops.size() != 1 || ops[0].isNull())
    return node.error("expects 1 operand");
  DType to = node.getDType("to");
  bool saturate = node.getInt("saturate", 1) != 0;
  std::string roundMode = node.getString("round_mode", "up");
  if (roundMode != "up" && roundMode != "down" && roundMode != "nearest")
    return node.error("round_mode must be up, down or nearest, got '{}'", roundMode);
  Expected<Tensor> out = castTensor(ops[0], to, saturate, roundMode);
  if (!out)
    return out.takeError().withContext(node.describe());
  return std::vector<Tensor>{std::move(*out)};
}

Results evalQuantize(const Node &node, const Operands &ops) {
  std::vector<int64_t> offs[3];
  NNC_ASSIGN_OR_RETURN(Extents ext, broadcastThree(node, ops, offs));
  DType xt = ops[0].dtype(), zt = ops[2].dtype();
  if (!isFloat(xt) || ops[1].dtype() != xt || !isQuantizedType(zt))
    return node.error("expects a float x and scale of one dtype and a quantized zero_point, "
                      "got {}, {} and {}",
                      dtypeName(xt), dtypeName(ops[1].dtype()), dtypeName(zt));
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(zt, ext));
  CastOptions opt{node.getInt("saturate", 1) != 0, E8M0Round::Up};
  bool f32 = xt != DType::F64;
  int64_t lo = 0, hi = 0;
  bool integer = quantizedIntRange(zt, lo, hi);
  for (size_t i = 0; i < offs[0].size(); ++i) {
    double q = quotient(xt, readElement(ops[0], offs[0][i]).f, readElement(ops[1], offs[1][i]).f);
    double zp = readElement(ops[2], offs[2][i]).asDouble();
    Number v;
    if (integer) {
      // Round half to even (the default rounding mode), then saturate; NaN gives lo.
      double r = std::nearbyint(q);
      r = f32 ? static_cast<float>(r) + static_cast<float>(zp) : r + zp;
      r = r >= static_cast<double>(lo) ? std::min(r, static_cast<double>(hi))
                                       : static_cast<double>(lo);
      v = scalar::intNumber(DType::I64, static_cast<uint64_t>(static_cast<int64_t>(r)));
    } else if (zt == DType::F4E2M1) {
      v = floatNumber(DType::F64, f32 ? static_cast<float>(q) + static_cast<float>(zp) : q + zp);
    } else {
      v = floatNumber(DType::F64, q); // f8: the zero point is zero by the spec, and the reference skips it
    }
    writeElement(out, static_cast<int64_t>(i), v, opt);
  }
  return std::vector<Tensor>{std::move(out)};
}

Results evalDequantize(const Node &node, const Operands &ops) {
  std::vector<int64_t> offs[3];
  NNC_ASSIGN_OR_RETURN(Extents ext, broadcastThree(node, ops, offs));
  DType xt = ops[0].dtype(), st = ops[1].dtype(), to = node.getDType("to");
  if ((!isQuantizedType(xt) && xt != DType::I32) || ops[2].dtype() != xt || !isFloat(st) ||
      !isFloat(to))
    return node.error("expects a quantized x and zero_point of one dtype, a float scale and "
                      "a float `to`, got {}, {}, {} and {}",
                      dtypeName(xt), dtypeName(st), dtypeName(ops[2].dtype()), dtypeName(to));
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(to, ext));
  // The reference's arithmetic: f32, or f64 for an f64 scale and for i32 x (whose f32 value
  // numpy subtracts an i32 zero point from in f64).
  bool f64 = st == DType::F64 || xt == DType::I32;
  int64_t lo = 0, hi = 0;
  bool integer = xt == DType::I32 || quantizedIntRange(xt, lo, hi);
  for (size_t i = 0; i < offs[0].size(); ++i) {
    double x = readElement(ops[0], offs[0][i]).asDouble();
    double s = readElement(ops[1], offs[1][i]).f;
    double y;
    if (f64) {
      double d = static_cast<float>(x);
      if (integer)
        d -= readElement(ops[2], offs[2][i]).asDouble();
      y = d * s;
    } else {
      float d = static_cast<float>(x);
      if (integer)
        d -= static_cast<float>(readElement(ops[2], offs[2][i]).asDouble());
      y = d * static_cast<float>(s);
    }
    writeElement(out, static_cast<int64_t>(i), floatNumber(DType::F64, y), CastOptions{});
  }
  return std::vector<Tensor>{std::move(out)};
}

Results evalBitCast(const Node &node, const Operands &ops) {
  const Tensor &x = ops[0];
  DType to = node.getDType("to");
  if (dtypeBits(x.dtype()) != dtypeBits(to))
    return node.error("cannot reinterpret {} as {}: the bit widths differ",
                      dtypeName(x.dtype()), dtypeName(to));
  NNC_ASSIGN_OR_RETURN(Tensor out, Tensor::create(to, x.extents()));
  size_t bytes = static_cast<size_t>(x.numElements()) * dtypeSize(to);
  if (bytes)
    std::memcpy(out.rawData(), x.rawData(), bytes);
  // A bool holds 0 or 1: other bytes are true.
  if (to == DType::Bool && x.dtype() != DType::Bool) {
    uint8_t *p = static_cast<uint8_t *>(out.rawData());
    for (size_t i = 0; i < bytes; ++i)
      p[i] = p[i] != 0;
  }
  return std::vector<Tensor>{std::move(out)};
}

Results evalConstant(const Node &node, const Operands &ops) {
  const Tensor &t = node.getTensor("value");
  if (t.isNull())
    return node.error("value is an empty tensor");
  return std::vector<Tensor>{t};
}

} // namespace nnc::interp
