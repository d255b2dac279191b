// Tables behind DType.h.
#include "nnc/ir/DType.h"

namespace nnc {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  int onnx;
};
constexpr DTypeInfo kInfos[] = {
#define NNC_X(id, name, size, onnx) {DType::id, name, size, onnx},
    NNC_DTYPES(NNC_X)
#undef NNC_X
};
const DTypeInfo &info(DType t) { return kInfos[static_cast<int>(t)]; }
} // namespace

std::string_view dtypeName(DType t) { return info(t).name; }
size_t dtypeSize(DType t) { return info(t).size; }
int dtypeToOnnx(DType t) { return info(t).onnx; }

std::optional<DType> parseDType(std::string_view name) {
  for (const auto &i : kInfos)
    if (i.name == name)
      return i.type;
  return std::nullopt;
}

std::optional<DType> dtypeFromOnnx(int code) {
  for (const auto &i : kInfos)
    if (i.onnx == code)
      return i.type;
  return std::nullopt;
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
bool isSignedInteger(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
bool isUnsignedInteger(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
bool isInteger(DType t) { return isSignedInteger(t) || isUnsignedInteger(t); }
bool isStorageOnly(DType t) { return !isFloat(t) && !isInteger(t) && t != DType::Bool; }

DType storageCanonical(DType t) {
  switch (t) {
  case DType::I4:
  case DType::I2: return DType::I64;
  case DType::U4:
  case DType::U2: return DType::U64;
  default: return DType::F64;
  }
}

int subByteWidth(DType t) {
  return t == DType::I4 || t == DType::U4 ? 4 : (t == DType::I2 || t == DType::U2 ? 2 : 0);
}

int dtypeBits(DType t) {
  if (t == DType::F4E2M1)
    return 4;
  int sub = subByteWidth(t);
  return sub ? sub : 8 * static_cast<int>(dtypeSize(t));
}

DType bitsType(DType t) {
  switch (dtypeSize(t)) {
  case 2: return DType::U16;
  case 4: return DType::U32;
  case 8: return DType::U64;
  default: return DType::U8;
  }
}

} // namespace nnc
