// Interpreter kernels of cast (every dtype to every dtype, ONNX Cast semantics: ScalarOps.h's
// castNumber) and constant.
#include <cmath>
#include <cstring>
#include <limits>

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

/// Converts `x` to `to`.
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

Results evalConstant(const Node &node, const Operands &ops) {
  const Tensor &t = node.getTensor("value");
  if (t.isNull())
    return node.error("value is an empty tensor");
  return std::vector<Tensor>{t};
}

} // namespace nnc::interp
