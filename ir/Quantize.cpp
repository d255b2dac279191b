// The element types of linear quantization and their integer ranges.
#include "nnc/ir/Quantize.h"

namespace nnc {

bool isQuantizedType(DType t) {
  switch (t) {
  case DType::I8:
  case DType::U8:
  case DType::I16:
  case DType::U16:
  case DType::I4:
  case DType::U4:
  case DType::I2:
  case DType::U2:
  case DType::F8E4M3FN:
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2:
  case DType::F8E5M2FNUZ:
  case DType::F4E2M1:
    return true;
  default:
    return false;
  }
}

bool quantizedIntRange(DType t, int64_t &lo, int64_t &hi) {
  int bits = 0;
  bool isSigned = false;
  switch (t) {
  case DType::I8:
    bits = 8, isSigned = true;
    break;
  case DType::U8:
    bits = 8;
    break;
  case DType::I16:
    bits = 16, isSigned = true;
    break;
  case DType::U16:
    bits = 16;
    break;
  case DType::I4:
    bits = 4, isSigned = true;
    break;
  case DType::U4:
    bits = 4;
    break;
  case DType::I2:
    bits = 2, isSigned = true;
    break;
  case DType::U2:
    bits = 2;
    break;
  default:
    return false;
  }
  lo = isSigned ? -(int64_t(1) << (bits - 1)) : 0;
  hi = isSigned ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
  return true;
}

} // namespace nnc
