// Conversions in the LLVM emitter: Kernel.h's Convert (the machine conversion of a value the
// expansion has kept in range; the ONNX Cast rules are ir/KernelExpand.cpp's) and the storage
// decodes and encodes, the casts the expansion leaves (KernelEmitter.h).
#include "llvm/KernelEmitter.h"

#include "nnc/support/FloatFormats.h"

namespace nnc::llvmcg {

/// A storage decode (a byte holding the format's bits to its canonical arithmetic type) or
/// encode (the canonical type to the byte): FloatFormats.h helpers of MathLib.cpp for the
/// float formats, masks for the sub-byte integers, like runtime/interp/Cast.cpp.
Value *KernelEmitter::emitStorageCast(Value *v, DType from, const kir::ExprNode &e) {
  DType to = e.type;
  Type *i8 = b_.getInt8Ty(), *i32 = b_.getInt32Ty();
  if (isStorageOnly(from)) {
    DType canon = storageCanonical(from);
    if (int w = subByteWidth(from)) {
      if (isSigned(canon)) {
        Value *sh = intConst(i8, 8 - w);
        v = b_.CreateSExt(b_.CreateAShr(b_.CreateShl(v, sh), sh), b_.getInt64Ty());
      } else {
        v = b_.CreateZExt(b_.CreateAnd(v, intConst(i8, (1u << w) - 1)), b_.getInt64Ty());
      }
    } else {
      v = callHelper(storageDecodeHelper(from).c_str(), b_.getDoubleTy(), {b_.CreateZExt(v, i32)});
    }
    if (to != canon) {
      fail("cast from {} to {} is not a storage decode", dtypeName(from), dtypeName(to));
      return poison(to);
    }
    return v;
  }
  if (!isStorageOnly(to) || from != storageCanonical(to)) {
    fail("cast from {} to {} is not a storage encode", dtypeName(from), dtypeName(to));
    return poison(to);
  }
  Value *c = v;
  if (int w = subByteWidth(to))
    return b_.CreateAnd(b_.CreateTrunc(c, i8), intConst(i8, (1u << w) - 1));
  fp::E8M0Round mode = fp::E8M0Round::Up;
  if (!e.roundMode.empty() && !fp::parseE8M0Round(e.roundMode.c_str(), mode)) {
    fail("cast to {} with round mode '{}'", dtypeName(to), e.roundMode);
    return poison(to);
  }
  Value *bits = callHelper(
      storageEncodeHelper(to).c_str(), i32,
      {c, intConst(i32, e.saturate ? 1 : 0), intConst(i32, static_cast<uint32_t>(mode))});
  return b_.CreateTrunc(bits, i8);
}

/// Kernel.h's Convert: floats round once to float types, integers wrap, and a float converts
/// to an integer type by truncation (its truncation fits: the expansion guards the rest).
Value *KernelEmitter::emitConvert(Value *v, DType from, DType to) {
  if (from == to)
    return v;
  Type *tt = computeType(to);
  if (isStorageOnly(from) || isStorageOnly(to) || to == DType::Bool) {
    fail("convert from {} to {}", dtypeName(from), dtypeName(to));
    return poison(to);
  }
  bool fromF = isFloat(from);
  if (isFloat(to)) {
    if (fromF) {
      // f16/bf16 compute values are floats holding exact values.
      if (to == DType::F32 || to == DType::F64)
        return b_.CreateFPCast(v, tt);
      if (v->getType()->isDoubleTy())
        return callHelper(to == DType::F16 ? kRoundF64ToF16 : kRoundF64ToBF16, b_.getFloatTy(),
                          {v});
      return roundTo(to, v);
    }
    bool s = isSigned(from);
    if (to == DType::F32 || to == DType::F64)
      return s ? b_.CreateSIToFP(v, tt) : b_.CreateUIToFP(v, tt);
    if (to == DType::F16) // every integer beyond 2^24 overflows f16, so one float rounding is exact
      return roundF16(s ? b_.CreateSIToFP(v, b_.getFloatTy())
                        : b_.CreateUIToFP(v, b_.getFloatTy()));
    Value *d = s ? b_.CreateSIToFP(v, b_.getDoubleTy()) : b_.CreateUIToFP(v, b_.getDoubleTy());
    return callHelper(kRoundF64ToBF16, b_.getFloatTy(), {d});
  }
  if (fromF)
    return isSigned(to) ? b_.CreateFPToSI(v, tt) : b_.CreateFPToUI(v, tt);
  return b_.CreateIntCast(v, tt, isSigned(from));
}

} // namespace nnc::llvmcg
