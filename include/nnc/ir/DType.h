// Element types of tensors, their names in the text IR and their ONNX codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nnc {

/// Every element type nnc can hold. Arithmetic is defined on f32, f64, f16, bf16 and the
/// integer types and bool. The 8-bit, 4-bit and 2-bit float and integer formats are storage
/// types: they can be constants, inputs, outputs and the source or target of `cast`.
/// In memory every element takes dtypeSize() bytes; sub-byte types take one byte each and
/// are only packed in ONNX TensorProto files.
#define NNC_DTYPES(X)                                                                              \
  X(F32, "f32", 4, 1)                                                                              \
  X(F64, "f64", 8, 11)                                                                             \
  X(F16, "f16", 2, 10)                                                                             \
  X(BF16, "bf16", 2, 16)                                                                           \
  X(I8, "i8", 1, 3)                                                                                \
  X(U8, "u8", 1, 2)                                                                                \
  X(I16, "i16", 2, 5)                                                                              \
  X(U16, "u16", 2, 4)                                                                              \
  X(I32, "i32", 4, 6)                                                                              \
  X(U32, "u32", 4, 12)                                                                             \
  X(I64, "i64", 8, 7)                                                                              \
  X(U64, "u64", 8, 13)                                                                             \
  X(Bool, "bool", 1, 9)                                                                            \
  X(F8E4M3FN, "f8e4m3fn", 1, 17)                                                                   \
  X(F8E4M3FNUZ, "f8e4m3fnuz", 1, 18)                                                               \
  X(F8E5M2, "f8e5m2", 1, 19)                                                                       \
  X(F8E5M2FNUZ, "f8e5m2fnuz", 1, 20)                                                               \
  X(U4, "u4", 1, 21)                                                                               \
  X(I4, "i4", 1, 22)                                                                               \
  X(F4E2M1, "f4e2m1", 1, 23)                                                                       \
  X(F8E8M0, "f8e8m0", 1, 24)                                                                       \
  X(U2, "u2", 1, 25)                                                                               \
  X(I2, "i2", 1, 26)

enum class DType : uint8_t {
#define NNC_X(id, name, size, onnx) id,
  NNC_DTYPES(NNC_X)
#undef NNC_X
};

/// The text-IR name ("f32").
std::string_view dtypeName(DType t);
/// Parses a text-IR name; nullopt when unknown.
std::optional<DType> parseDType(std::string_view name);
/// Bytes one element takes in memory.
size_t dtypeSize(DType t);
/// ONNX TensorProto.DataType code.
int dtypeToOnnx(DType t);
/// nullopt for codes nnc does not support (string, complex).
std::optional<DType> dtypeFromOnnx(int code);

bool isFloat(DType t);          ///< f32, f64, f16, bf16 (types with arithmetic).
bool isInteger(DType t);        ///< i8..u64 (not bool, not sub-byte).
bool isSignedInteger(DType t);  ///< i8, i16, i32, i64.
bool isUnsignedInteger(DType t);///< u8, u16, u32, u64.
bool isStorageOnly(DType t);    ///< f8*, f4, i4, u4, i2, u2.
inline bool isNumeric(DType t) { return isFloat(t) || isInteger(t); }
/// The arithmetic dtype a storage-only dtype converts through (what the interpreter's Cast
/// reads it as): f64 for the float formats, i64/u64 for the sub-byte integers.
DType storageCanonical(DType t);
/// The bits of a sub-byte integer (4 for i4/u4, 2 for i2/u2), else 0.
int subByteWidth(DType t);
/// The bits of one value: 4 for i4, u4 and f4e2m1, 2 for i2 and u2, else 8 * dtypeSize (bool
/// 8), which is ONNX BitCast's bit width.
int dtypeBits(DType t);
/// The unsigned integer dtype of t's size in memory (u8 for the one-byte and sub-byte types):
/// what a kernel that only moves t's bytes may see them as.
DType bitsType(DType t);

} // namespace nnc
