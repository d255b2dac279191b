// Casts in the LLVM emitter: between compute values, and to and from the storage-only formats
// (KernelEmitter.h).
#include "llvm/KernelEmitter.h"

#include "nnc/support/FloatFormats.h"

namespace nnc::llvmcg {

/// A cast with a storage-only side (a byte holding the format's bits): decode to the
/// canonical arithmetic type, cast, encode (FloatFormats.h helpers of MathLib.cpp for the
/// float formats, masks for the sub-byte integers), like runtime/interp/Cast.cpp.
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
    from = canon;
    if (!isStorageOnly(to))
      return emitCast(v, from, to);
  }
  DType canon = storageCanonical(to);
  Value *c = emitCast(v, from, canon);
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

/// ONNX Cast between compute values (interp/Cast.cpp: floats to integers truncate, NaN is 0,
/// values beyond the 64-bit range saturate, then the 64-bit pattern wraps to the target).
Value *KernelEmitter::emitCast(Value *v, DType from, DType to) {
  if (from == to)
    return v;
  Type *tt = computeType(to);
  if (isStorageOnly(from) || isStorageOnly(to)) {
    fail("cast from {} to {}: the LLVM backend has no arithmetic on storage-only dtypes",
         dtypeName(from), dtypeName(to));
    return poison(to);
  }
  bool fromF = isFloat(from);
  if (to == DType::Bool)
    return fromF ? b_.CreateFCmpUNE(v, fpConst(v->getType(), 0))
                 : b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
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
  // Integer targets.
  Type *i64 = b_.getInt64Ty();
  Value *bits;
  if (fromF) {
    Type *ft = v->getType();
    Value *sgn = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, ft}, {v});
    if (isUnsignedInteger(to)) {
      Value *uns = b_.CreateIntrinsic(llvm::Intrinsic::fptoui_sat, {i64, ft}, {v});
      Value *big = b_.CreateFCmpOGE(v, fpConst(ft, 9223372036854775808.0));
      bits = b_.CreateSelect(big, uns, sgn);
    } else {
      bits = sgn;
    }
  } else {
    bits = isSigned(from) ? b_.CreateSExt(v, i64) : b_.CreateZExt(v, i64);
  }
  return b_.CreateTrunc(bits, tt);
}

} // namespace nnc::llvmcg
