// Kernel IR expressions -> LLVM values: immediates, variables, loads, the elementwise ops and
// the primitives beside them (KernelEmitter.h).
#include "llvm/KernelEmitter.h"

#include "nnc/support/FloatFormats.h"

namespace nnc::llvmcg {

Value *KernelEmitter::emitExpr(const kir::Expr &ep) {
  if (!ep) {
    fail("null expression");
    return b_.getInt64(0);
  }
  const kir::ExprNode &e = *ep;
  switch (e.kind) {
  case kir::ExprKind::IntImm: {
    Type *t = computeType(e.type);
    if (isFloat(e.type))
      return roundTo(e.type, fpConst(t, static_cast<double>(e.intValue)));
    return llvm::ConstantInt::get(t, static_cast<uint64_t>(e.intValue), /*isSigned=*/true);
  }
  case kir::ExprKind::FloatImm: {
    Type *t = computeType(e.type);
    if (isFloat(e.type)) {
      if (e.type == DType::F16 || e.type == DType::BF16) {
        // The builder folds the rounding of a constant.
        return roundTo(e.type, f32Const(static_cast<float>(e.floatValue)));
      }
      return fpConst(t, e.floatValue);
    }
    if (e.type == DType::Bool)
      return b_.getInt1(e.floatValue != 0);
    // An integer holding a float constant: ScalarOps.h's value of the cast, folded.
    return llvm::ConstantInt::get(
        t, fp::floatToIntBits(e.floatValue, isUnsignedInteger(e.type)), /*isSigned=*/false);
  }
  case kir::ExprKind::Var: {
    auto it = scope_.find(e.name);
    if (it == scope_.end()) {
      fail("variable '{}' is not in scope", e.name);
      return poison(e.type);
    }
    const Binding &bd = it->second;
    if (bd.slot)
      return b_.CreateLoad(computeType(bd.type), bd.slot, e.name);
    return bd.value;
  }
  case kir::ExprKind::Load: {
    DType dt;
    Value *p = bufferElement(e.buffer, e.args.empty() ? nullptr : e.args[0], dt);
    if (!p)
      return poison(e.type);
    llvm::LoadInst *ld = b_.CreateLoad(storageType(dt), p);
    tagAccess(ld);
    return loadValue(dt, ld);
  }
  case kir::ExprKind::Op:
    return emitOp(e);
  case kir::ExprKind::Cast: // left by the expansion: a storage decode or encode
    if (e.args.size() != 1) {
      fail("cast needs one operand");
      return poison(e.type);
    }
    return emitStorageCast(emitExpr(e.args[0]), e.args[0]->type, e);
  case kir::ExprKind::Convert:
    if (e.args.size() != 1) {
      fail("convert needs one operand");
      return poison(e.type);
    }
    return emitConvert(emitExpr(e.args[0]), e.args[0]->type, e.type);
  case kir::ExprKind::BitCast:
    return b_.CreateBitCast(emitExpr(e.args.at(0)), computeType(e.type));
  case kir::ExprKind::Fma:
  case kir::ExprKind::Rem:
  case kir::ExprKind::Quot:
  case kir::ExprKind::Shl:
  case kir::ExprKind::Shr:
  case kir::ExprKind::Call:
    return emitPrimitive(e);
  }
  fail("unknown expression kind");
  return poison(e.type);
}

Value *KernelEmitter::emitOp(const kir::ExprNode &e) {
  std::vector<Value *> a;
  for (const kir::Expr &x : e.args)
    a.push_back(emitExpr(x));
  if (error_)
    return poison(e.type);
  // Integer and bool ops are pure: the same op on the same values is the value already
  // emitted, where that one dominates (values_).
  bool pure = !e.args.empty() && !isFloat(e.type) && opInfo(e.op).libm.empty();
  for (const kir::Expr &x : e.args)
    pure = pure && !isFloat(x->type);
  if (!pure)
    return emitOpOn(e, a);
  ValueKey key{static_cast<uintptr_t>(e.kind), static_cast<uintptr_t>(e.op),
               static_cast<uintptr_t>(e.type), static_cast<uintptr_t>(e.strict)};
  for (const kir::Expr &x : e.args)
    key.push_back(static_cast<uintptr_t>(x->type));
  for (Value *v : a)
    key.push_back(reinterpret_cast<uintptr_t>(v));
  return numbered(std::move(key), [&] { return emitOpOn(e, a); });
}

Value *KernelEmitter::numbered(ValueKey key, const std::function<Value *()> &make) {
  for (auto f = values_.rbegin(); f != values_.rend(); ++f)
    if (auto it = f->find(key); it != f->end())
      return it->second;
  Value *r = make();
  if (!error_)
    values_.back().emplace(std::move(key), r);
  return r;
}

Value *KernelEmitter::emitOpOn(const kir::ExprNode &e, const std::vector<Value *> &a) {
  size_t typeArg = e.op == OpKind::Select ? 1 : 0;
  if (a.size() <= typeArg) {
    fail("op {} has {} operands", opInfo(e.op).name, a.size());
    return poison(e.type);
  }
  DType t = e.args[typeArg]->type;
  const OpInfo &info = opInfo(e.op);
  if (kir::isComposite(e)) {
    fail("composite {} reached the emitter (codegenBody expands it)",
         printExpr(std::make_shared<kir::ExprNode>(e)));
    return poison(e.type);
  }
  if (!info.elementwise || !typeClassAccepts(info.operandTypes, t)) {
    fail("op {} on {} is not supported", info.name, dtypeName(t));
    return poison(e.type);
  }
  bool f = isFloat(t), s = isSigned(t);
  Type *ty = a[typeArg]->getType();
  // Arithmetic of an expansion rounds as written (Kernel.h, ExprNode::strict).
  llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
  if (e.strict)
    b_.setFastMathFlags(llvm::FastMathFlags());
  auto need = [&](size_t n) {
    if (a.size() != n) {
      fail("op {} expects {} operands, got {}", opInfo(e.op).name, n, a.size());
      return false;
    }
    return true;
  };
  Value *zero = f ? fpConst(ty, 0) : llvm::ConstantInt::get(ty, 0);
  Value *r = nullptr;
  namespace I = llvm::Intrinsic;

  if (!info.libm.empty()) { // Ops.def's libm column
    if (need(1))
      r = mathCall(info.libm, {a[0]});
    return r ? roundTo(e.type, r) : poison(e.type);
  }
  switch (e.op) {
  // ---- Unary ----
  case OpKind::Neg:
    if (!need(1))
      break;
    r = f ? b_.CreateFNeg(a[0]) : b_.CreateSub(zero, a[0]);
    break;
  case OpKind::Abs:
    if (!need(1))
      break;
    if (f)
      r = unaryIntrinsic(I::fabs, a[0]);
    else if (s)
      r = b_.CreateSelect(b_.CreateICmpSLT(a[0], zero), b_.CreateSub(zero, a[0]), a[0]);
    else
      r = a[0];
    break;
  case OpKind::Not:
    if (need(1))
      r = b_.CreateNot(a[0]);
    break;
  case OpKind::BitNot:
    if (need(1))
      r = b_.CreateNot(a[0]);
    break;

  // ---- Binary ----
  case OpKind::Add:
    if (need(2))
      r = f ? b_.CreateFAdd(a[0], a[1]) : b_.CreateAdd(a[0], a[1]);
    break;
  case OpKind::Sub:
    if (need(2))
      r = f ? b_.CreateFSub(a[0], a[1]) : b_.CreateSub(a[0], a[1]);
    break;
  case OpKind::Mul:
    if (need(2))
      r = f ? b_.CreateFMul(a[0], a[1]) : b_.CreateMul(a[0], a[1]);
    break;
  case OpKind::Div: // floats (integer division is a Quot)
    if (need(2))
      r = b_.CreateFDiv(a[0], a[1]);
    break;
  case OpKind::Min: // integers (the expansion rewrites float min and max)
  case OpKind::Max: {
    if (!need(2))
      break;
    Value *x = a[0], *y = a[1];
    Value *lt = e.op == OpKind::Min ? (s ? b_.CreateICmpSLT(y, x) : b_.CreateICmpULT(y, x))
                                    : (s ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y));
    r = b_.CreateSelect(lt, y, x);
    break;
  }
  case OpKind::And:
  case OpKind::BitAnd:
    if (need(2))
      r = b_.CreateAnd(a[0], a[1]);
    break;
  case OpKind::Or:
  case OpKind::BitOr:
    if (need(2))
      r = b_.CreateOr(a[0], a[1]);
    break;
  case OpKind::Xor:
  case OpKind::BitXor:
    if (need(2))
      r = b_.CreateXor(a[0], a[1]);
    break;
  case OpKind::Equal:
    if (need(2))
      r = f ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
    break;
  case OpKind::Less:
    if (need(2))
      r = f ? b_.CreateFCmpOLT(a[0], a[1])
            : (s ? b_.CreateICmpSLT(a[0], a[1]) : b_.CreateICmpULT(a[0], a[1]));
    break;
  case OpKind::LessEqual:
    if (need(2))
      r = f ? b_.CreateFCmpOLE(a[0], a[1])
            : (s ? b_.CreateICmpSLE(a[0], a[1]) : b_.CreateICmpULE(a[0], a[1]));
    break;
  case OpKind::Greater:
    if (need(2))
      r = f ? b_.CreateFCmpOGT(a[0], a[1])
            : (s ? b_.CreateICmpSGT(a[0], a[1]) : b_.CreateICmpUGT(a[0], a[1]));
    break;
  case OpKind::GreaterEqual:
    if (need(2))
      r = f ? b_.CreateFCmpOGE(a[0], a[1])
            : (s ? b_.CreateICmpSGE(a[0], a[1]) : b_.CreateICmpUGE(a[0], a[1]));
    break;
  case OpKind::Select:
    if (need(3))
      r = b_.CreateSelect(a[0], a[1], a[2]);
    break;
  default:
    fail("op {} is not an elementwise op the LLVM backend supports", opInfo(e.op).name);
    break;
  }
  if (!r)
    return poison(e.type);
  if (r->getType()->isIntegerTy(1) || e.op == OpKind::Select)
    return r;
  return roundTo(e.type, r);
}

/// Fma, Rem and Call: the primitives beside the elementwise ops (Kernel.h).
Value *KernelEmitter::emitPrimitive(const kir::ExprNode &e) {
  std::vector<Value *> a;
  for (const kir::Expr &x : e.args)
    a.push_back(emitExpr(x));
  if (error_)
    return poison(e.type);
  // Integer remainders, quotients and shifts (index arithmetic) are numbered like ops.
  if (!isFloat(e.type) && (e.kind == kir::ExprKind::Rem || e.kind == kir::ExprKind::Quot ||
                           e.kind == kir::ExprKind::Shl || e.kind == kir::ExprKind::Shr)) {
    ValueKey key{static_cast<uintptr_t>(e.kind), 0, static_cast<uintptr_t>(e.type), 0};
    for (const kir::Expr &x : e.args)
      key.push_back(static_cast<uintptr_t>(x->type));
    for (Value *v : a)
      key.push_back(reinterpret_cast<uintptr_t>(v));
    if (a.size() == 2)
      return numbered(std::move(key), [&] { return emitPrimitiveOn(e, a); });
  }
  return emitPrimitiveOn(e, a);
}

Value *KernelEmitter::emitPrimitiveOn(const kir::ExprNode &e, const std::vector<Value *> &a) {
  // Only the expansions build these: no contraction or reassociation around them.
  llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
  b_.setFastMathFlags(llvm::FastMathFlags());
  namespace I = llvm::Intrinsic;
  switch (e.kind) {
  case kir::ExprKind::Fma:
    if (a.size() == 3)
      return b_.CreateIntrinsic(I::fma, {a[0]->getType()}, a);
    break;
  case kir::ExprKind::Rem:
    if (a.size() != 2)
      break;
    if (isFloat(e.type))
      return roundTo(e.type, b_.CreateFRem(a[0], a[1]));
    return isSigned(e.type) ? b_.CreateSRem(a[0], a[1]) : b_.CreateURem(a[0], a[1]);
  case kir::ExprKind::Quot:
    if (a.size() == 2)
      return isSigned(e.type) ? b_.CreateSDiv(a[0], a[1]) : b_.CreateUDiv(a[0], a[1]);
    break;
  case kir::ExprKind::Shl:
    if (a.size() == 2)
      return b_.CreateShl(a[0], a[1]);
    break;
  case kir::ExprKind::Shr:
    if (a.size() == 2)
      return b_.CreateLShr(a[0], a[1]);
    break;
  case kir::ExprKind::Call:
    for (const kir::MathFunction &m : kir::kMathFunctions)
      if (e.name == m.name && a.size() == static_cast<size_t>(m.arity))
        return mathCall(e.name, a);
    fail("call of math function '{}' with {} operands", e.name, a.size());
    return poison(e.type);
  default:
    break;
  }
  fail("{} with {} operands", printExpr(std::make_shared<kir::ExprNode>(e)), a.size());
  return poison(e.type);
}

Value *KernelEmitter::mathCall(std::string_view name, const std::vector<Value *> &a) {
  namespace I = llvm::Intrinsic;
  static const std::pair<std::string_view, llvm::Intrinsic::ID> kIntrinsics[] = {
      {"log", I::log},       {"sqrt", I::sqrt}, {"sin", I::sin}, {"cos", I::cos},
      {"floor", I::floor},   {"ceil", I::ceil}, {"exp", I::exp}, {"pow", I::pow},
      {"rint", I::roundeven}}; // round half to even: vrndscaleps / vroundps
  for (const auto &[n, id] : kIntrinsics)
    if (n == name)
      return a.size() == 1 ? b_.CreateUnaryIntrinsic(id, a[0])
                           : b_.CreateBinaryIntrinsic(id, a[0], a[1]);
  return libm(std::string(name).c_str(), a[0]);
}

} // namespace nnc::llvmcg
