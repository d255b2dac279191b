// Kernel IR -> LLVM IR: one function `void name(void** buffers)` per kernel, with the exact
// scalar semantics of the reference interpreter (the elementwise ops' in nnc/ir/ScalarOps.h,
// casts' in runtime/interp/Cast.cpp).
//
// Values are held in their compute type (float for f16/bf16, i1 for bool); loads and stores
// convert from and to the storage type. An op whose result is f16/bf16 is rounded to that
// format right away, so a fused chain gives the numbers of the node-by-node interpreter.
#include "llvm/Emitter.h"
#include "nnc/ir/KernelHelpers.h"
#include "nnc/support/FloatFormats.h"

#include <functional>
#include <map>
#include <optional>
#include <set>

#include <llvm/ADT/Triple.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

namespace nnc::llvmcg {
namespace {

using llvm::IRBuilder;
using llvm::Type;
using llvm::Value;

bool isSigned(DType t) {
  return isSignedInteger(t);
}

/// A name in scope: a loop variable (an i64 value) or a local (an alloca of its compute type).
struct Binding {
  Value *value = nullptr;
  Value *slot = nullptr; ///< The local's address (an alloca, or a pointer from a parallel ctx).
  DType type = DType::I64;
};
using Scope = std::map<std::string, Binding>;

bool mentionsVar(const kir::Expr &e, const std::string &var) {
  return kir::mentions(e, {var});
}

/// Whether the independent iterations of a vectorized loop over `var` may be declared
/// parallel to LLVM: a straight-line body (no loop, tile or barrier inside it, whose scratch
/// would be shared between iterations here, where OpenCL gives each work-item its own) whose
/// every store's index moves with `var`.
bool parallelAccessesHold(const std::string &var, const std::vector<kir::Stmt> &body) {
  for (const kir::Stmt &s : body) {
    if (!s)
      continue;
    switch (s->kind) {
    case kir::StmtKind::For:
    case kir::StmtKind::GemmTile:
    case kir::StmtKind::Barrier:
      return false;
    case kir::StmtKind::Store:
    case kir::StmtKind::VecStore:
      if (!mentionsVar(s->index, var))
        return false;
      break;
    default:
      break;
    }
    if (!parallelAccessesHold(var, s->body))
      return false;
  }
  return true;
}

/// The coefficient of loop variable `var` in the i64 index `e` when `e` is exactly affine in
/// it (terms without `var`, divisions and loads included, form its base); nullopt otherwise.
std::optional<int64_t> affineCoefficient(const kir::Expr &e, const std::string &var) {
  if (!mentionsVar(e, var))
    return 0;
  if (e->kind == kir::ExprKind::Var)
    return 1;
  if (e->kind != kir::ExprKind::Op || e->args.size() != 2 || e->type != DType::I64)
    return std::nullopt;
  const kir::Expr &a = e->args[0], &b = e->args[1];
  switch (e->op) {
  case OpKind::Add:
  case OpKind::Sub: {
    std::optional<int64_t> ca = affineCoefficient(a, var), cb = affineCoefficient(b, var);
    if (!ca || !cb)
      return std::nullopt;
    return e->op == OpKind::Add ? *ca + *cb : *ca - *cb;
  }
  case OpKind::Mul:
    if (b->kind == kir::ExprKind::IntImm)
      if (std::optional<int64_t> ca = affineCoefficient(a, var))
        return *ca * b->intValue;
    if (a->kind == kir::ExprKind::IntImm)
      if (std::optional<int64_t> cb = affineCoefficient(b, var))
        return *cb * a->intValue;
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

/// Whether `cond` is a conjunction of `x < y` whose x only grows with loop variables `a` and `b`
/// and whose y mentions neither (a split's tail guards): then it holds on a whole tile of a
/// and b when it holds at the tile's last corner.
bool holdsOnTileIfAtCorner(const kir::Expr &cond, const std::string &a, const std::string &b) {
  if (cond->kind != kir::ExprKind::Op || cond->args.size() != 2)
    return false;
  if (cond->op == OpKind::And)
    return holdsOnTileIfAtCorner(cond->args[0], a, b) && holdsOnTileIfAtCorner(cond->args[1], a, b);
  if (cond->op != OpKind::Less || mentionsVar(cond->args[1], a) || mentionsVar(cond->args[1], b))
    return false;
  std::optional<int64_t> ca = affineCoefficient(cond->args[0], a),
                         cb = affineCoefficient(cond->args[0], b);
  return ca && cb && *ca >= 0 && *cb >= 0;
}

class KernelEmitter {
public:
  KernelEmitter(llvm::Module &m, const kir::Kernel &k, llvm::TargetMachine &tm,
                const CpuTarget &cpu)
      : m_(m), c_(m.getContext()), b_(c_), k_(k), tm_(tm), cpu_(cpu) {
    // A multiply feeding an add may become one FMA (matmul/conv accumulators): a rounding
    // difference within float reassociation, which every schedule is allowed.
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
  }

  Error emit(const kir::Stmt &body);

private:
  // ---- Types and errors ----
  Type *computeType(DType t) {
    switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return b_.getFloatTy();
    case DType::F64:
      return b_.getDoubleTy();
    case DType::I8:
    case DType::U8:
      return b_.getInt8Ty();
    case DType::I16:
    case DType::U16:
      return b_.getInt16Ty();
    case DType::I32:
    case DType::U32:
      return b_.getInt32Ty();
    case DType::I64:
    case DType::U64:
      return b_.getInt64Ty();
    case DType::Bool:
      return b_.getInt1Ty();
    default:
      return b_.getInt8Ty(); // storage-only formats: raw bytes, moved but not computed
    }
  }
  Type *storageType(DType t) {
    if (t == DType::F16 || t == DType::BF16)
      return b_.getInt16Ty();
    if (t == DType::Bool)
      return b_.getInt8Ty();
    return computeType(t);
  }
  template <typename... Args> void fail(fmt::format_string<Args...> f, Args &&...args) {
    if (!error_)
      error_ = fmt::format(f, std::forward<Args>(args)...);
  }
  Value *poison(DType t) { return llvm::PoisonValue::get(computeType(t)); }

  // ---- Conversions ----
  Value *f32Const(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }
  Value *fpConst(Type *t, double v) { return llvm::ConstantFP::get(t, v); }
  Value *intConst(Type *t, uint64_t v) { return llvm::ConstantInt::get(t, v); }

  /// float -> the nearest bf16 (as float), ties to even; NaN stays NaN (floatToBf16).
  Value *roundBf16(Value *f) {
    Type *i32 = b_.getInt32Ty();
    Value *x = b_.CreateBitCast(f, i32);
    Value *absx = b_.CreateAnd(x, intConst(i32, 0x7fffffff));
    Value *isNan = b_.CreateICmpUGT(absx, intConst(i32, 0x7f800000));
    Value *lsb = b_.CreateAnd(b_.CreateLShr(x, 16), intConst(i32, 1));
    Value *rounded = b_.CreateAdd(x, b_.CreateAdd(intConst(i32, 0x7fff), lsb));
    Value *nanBits = b_.CreateOr(x, intConst(i32, 0x400000));
    Value *r = b_.CreateSelect(isNan, nanBits, rounded);
    r = b_.CreateAnd(r, intConst(i32, 0xffff0000u));
    return b_.CreateBitCast(r, b_.getFloatTy());
  }
  /// float -> the nearest f16 (as float), ties to even.
  Value *roundF16(Value *f) {
    return b_.CreateFPExt(b_.CreateFPTrunc(f, b_.getHalfTy()), b_.getFloatTy());
  }
  /// Rounds a compute value to the precision of `t` (f16/bf16); other types are exact.
  Value *roundTo(DType t, Value *v) {
    if (t == DType::F16)
      return roundF16(v);
    if (t == DType::BF16)
      return roundBf16(v);
    return v;
  }
  Value *callHelper(const char *name, Type *ret, std::vector<Value *> args) {
    std::vector<Type *> params;
    for (Value *a : args)
      params.push_back(a->getType());
    llvm::FunctionCallee f =
        m_.getOrInsertFunction(name, llvm::FunctionType::get(ret, params, false));
    if (auto *fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
      fn->addFnAttr(llvm::Attribute::NoUnwind);
      fn->addFnAttr(llvm::Attribute::ReadNone);
      fn->addFnAttr(llvm::Attribute::WillReturn);
    }
    llvm::CallInst *c = b_.CreateCall(f, args);
    c->setDoesNotThrow();
    c->setDoesNotAccessMemory();
    return c;
  }
  Value *loadValue(DType t, Value *stored) {
    switch (t) {
    case DType::F16:
      return b_.CreateFPExt(b_.CreateBitCast(stored, b_.getHalfTy()), b_.getFloatTy());
    case DType::BF16:
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(stored, b_.getInt32Ty()), 16),
                              b_.getFloatTy());
    case DType::Bool:
      return b_.CreateICmpNE(stored, intConst(b_.getInt8Ty(), 0));
    default:
      return stored;
    }
  }
  Value *storeValue(DType t, Value *v) {
    switch (t) {
    case DType::F16:
      return b_.CreateBitCast(b_.CreateFPTrunc(v, b_.getHalfTy()), b_.getInt16Ty());
    case DType::BF16:
      return b_.CreateTrunc(b_.CreateLShr(b_.CreateBitCast(roundBf16(v), b_.getInt32Ty()), 16),
                            b_.getInt16Ty());
    case DType::Bool:
      return b_.CreateZExt(v, b_.getInt8Ty());
    default:
      return v;
    }
  }

  Value *emitCast(Value *v, DType from, DType to);
  Value *emitStorageCast(Value *v, DType from, const kir::ExprNode &e);
  Value *emitOp(const kir::ExprNode &e);
  Value *emitPrimitive(const kir::ExprNode &e);
  Value *emitExpr(const kir::Expr &e);
  Value *libm(const char *fname, Value *a) {
    bool dbl = a->getType()->isDoubleTy();
    std::string name = dbl ? fname : std::string(fname) + "f";
    return callHelper(name.c_str(), a->getType(), {a});
  }
  Value *unaryIntrinsic(llvm::Intrinsic::ID id, Value *a) { return b_.CreateUnaryIntrinsic(id, a); }

  // ---- Statements ----
  void emitStmt(const kir::Stmt &s);
  void emitFor(const kir::StmtNode &s);
  void emitParallelFor(const kir::StmtNode &s, Value *extent);
  void emitGemmTile(const kir::StmtNode &s);
  bool emitTransposedTile(const kir::StmtNode &s);
  llvm::Function *gemmMicrokernel(int64_t mr, int64_t nr, bool prefetch, int shift = 0);
  /// A counted loop over [begin, end) of `var`; `kind` selects the loop metadata.
  /// `independent`: the KIR loop's iterations are independent (a gpu_grid loop).
  void emitLoop(const std::string &var, Value *begin, Value *end, kir::LoopKind kind,
                const kir::Expr &extentExpr, const std::vector<kir::Stmt> &body,
                bool independent = false);
  llvm::MDNode *loopMetadata(kir::LoopKind kind, const kir::Expr &extent,
                             llvm::MDNode *accessGroup);
  /// Tags a buffer load or store with the access group of the vectorized loop around it whose
  /// iterations are independent (see emitLoop; such a loop holds no other loop, so there is at
  /// most one).
  void tagAccess(llvm::Instruction *i) {
    if (accessGroup_)
      i->setMetadata(llvm::LLVMContext::MD_access_group, accessGroup_);
  }
  llvm::MDNode *accessGroup_ = nullptr;
  llvm::AllocaInst *entryAlloca(Type *t, const std::string &name) {
    llvm::BasicBlock &entry = fn_->getEntryBlock();
    IRBuilder<> eb(&entry, entry.getFirstInsertionPt());
    return eb.CreateAlloca(t, nullptr, name);
  }
  void loadBuffers(Value *buffersArg) {
    bufs_.clear();
    Type *ptr = b_.getPtrTy();
    const llvm::DataLayout &dl = m_.getDataLayout();
    int64_t workspaces = 0;
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const kir::BufferDecl &d = k_.buffers[i];
      if (d.perThread) {
        // This thread's own (a chunk of a parallel loop, or the serial kernel), from the
        // runtime: distinct from every parameter, as malloc's memory is.
        if (workspaces == kWorkspaceSlots)
          fail("kernel has more than {} per-thread scratch buffers", kWorkspaceSlots);
        llvm::FunctionCallee f = m_.getOrInsertFunction(
            kWorkspace, llvm::FunctionType::get(ptr, {b_.getInt64Ty(), b_.getInt64Ty()}, false));
        if (auto *fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
          fn->addFnAttr(llvm::Attribute::NoUnwind);
          fn->addRetAttr(llvm::Attribute::NoAlias);
        }
        llvm::CallInst *c =
            b_.CreateCall(f,
                          {b_.getInt64(workspaces++),
                           b_.getInt64(d.numElements * static_cast<int64_t>(dtypeSize(d.dtype)))},
                          d.name);
        c->setDoesNotThrow();
        bufs_.push_back(c);
        continue;
      }
      Value *slot = b_.CreateConstInBoundsGEP1_64(ptr, buffersArg, i);
      llvm::LoadInst *p = b_.CreateLoad(ptr, slot, d.name);
      bufs_.push_back(p);
      if (!d.written || d.role != kir::BufferRole::Result || cpu_.streamingStoreBytes <= 0 ||
          d.numElements * int64_t(dtypeSize(d.dtype)) < cpu_.streamingStoreBytes)
        continue;
      // A streaming result: the runtime binds it at a kBufferAlignment boundary (arena
      // offsets, tensor storage), so the optimizer may align its vector stores, which
      // markStreamingStores then makes non-temporal.
      b_.CreateAlignmentAssumption(dl, p, kBufferAlignment);
      p->setMetadata(kStreamingMetadata, llvm::MDNode::get(c_, {}));
    }
  }
  Value *bufferElement(int buffer, const kir::Expr &index, DType &dtype) {
    if (buffer < 0 || buffer >= static_cast<int>(k_.buffers.size())) {
      fail("access to buffer {} of {}", buffer, k_.buffers.size());
      return nullptr;
    }
    dtype = k_.buffers[buffer].dtype;
    Value *idx = emitExpr(index);
    if (!index || !(isInteger(index->type) || index->type == DType::Bool)) {
      fail("buffer {} indexed with a non-integer expression", k_.buffers[buffer].name);
      return nullptr;
    }
    if (!idx->getType()->isIntegerTy(64))
      idx = isSignedInteger(index->type) ? b_.CreateSExtOrTrunc(idx, b_.getInt64Ty())
                                         : b_.CreateZExtOrTrunc(idx, b_.getInt64Ty());
    return b_.CreateInBoundsGEP(storageType(dtype), bufs_[buffer], idx);
  }

  llvm::Module &m_;
  llvm::LLVMContext &c_;
  IRBuilder<> b_;
  const kir::Kernel &k_;
  llvm::TargetMachine &tm_;
  const CpuTarget &cpu_;
  llvm::Function *fn_ = nullptr;
  Value *buffersArg_ = nullptr; ///< The current function's `void** buffers`.
  std::vector<Value *> bufs_;
  Scope scope_;
  bool inParallel_ = false;
  int outlined_ = 0;
  std::optional<std::string> error_;
};

/// The ISA (the target machine's level and features) and, stated by nnc rather than inherited
/// from LLVM's tuning for a CPU model name, the vector width: the loop vectorizer and the code
/// generator use `cpu`'s full width (LLVM 15 tunes AVX-512 Intel models to prefer 256-bit
/// vectors, which halved the width of every kernel there). Scheduling is LLVM's generic model.
void setTargetAttributes(llvm::Function *f, llvm::TargetMachine &tm, const CpuTarget &cpu) {
  f->addFnAttr("target-cpu", tm.getTargetCPU());
  f->addFnAttr("target-features", tm.getTargetFeatureString());
  f->addFnAttr("tune-cpu", "generic");
  std::string width = std::to_string(cpu.vectorBits);
  f->addFnAttr("prefer-vector-width", width);
  f->addFnAttr("min-legal-vector-width", width);
  f->addFnAttr(llvm::Attribute::NoUnwind);
}

Error KernelEmitter::emit(const kir::Stmt &body) {
  Type *ptr = b_.getPtrTy();
  auto *fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false);
  if (m_.getFunction(k_.name))
    return makeError("kernel {}: duplicate kernel name", k_.name);
  fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, k_.name, m_);
  setTargetAttributes(fn_, tm_, cpu_);
  buffersArg_ = fn_->getArg(0);
  buffersArg_->setName("buffers");
  llvm::BasicBlock *entry = llvm::BasicBlock::Create(c_, "entry", fn_);
  b_.SetInsertPoint(entry);
  loadBuffers(buffersArg_);
  emitStmt(body);
  b_.CreateRetVoid();
  if (error_)
    return makeError("kernel {}: {}", k_.name, *error_);
  return Error::success();
}

// ---- Expressions -----------------------------------------------------------------------------

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
    return emitCast(fpConst(b_.getDoubleTy(), e.floatValue), DType::F64, e.type);
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
  case kir::ExprKind::Cast: {
    if (e.args.size() != 1) {
      fail("cast needs one operand");
      return poison(e.type);
    }
    DType from = e.args[0]->type;
    if (from != e.type && (isStorageOnly(from) || isStorageOnly(e.type)))
      return emitStorageCast(emitExpr(e.args[0]), from, e);
    return emitCast(emitExpr(e.args[0]), from, e.type);
  }
  case kir::ExprKind::BitCast:
    return b_.CreateBitCast(emitExpr(e.args.at(0)), computeType(e.type));
  case kir::ExprKind::Fma:
  case kir::ExprKind::Rem:
  case kir::ExprKind::Call:
    return emitPrimitive(e);
  }
  fail("unknown expression kind");
  return poison(e.type);
}

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

Value *KernelEmitter::emitOp(const kir::ExprNode &e) {
  std::vector<Value *> a;
  for (const kir::Expr &x : e.args)
    a.push_back(emitExpr(x));
  if (error_)
    return poison(e.type);
  size_t typeArg = e.op == OpKind::Select ? 1 : 0;
  if (a.size() <= typeArg) {
    fail("op {} has {} operands", opInfo(e.op).name, a.size());
    return poison(e.type);
  }
  DType t = e.args[typeArg]->type;
  const OpInfo &info = opInfo(e.op);
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
  Value *one = f ? fpConst(ty, 1) : llvm::ConstantInt::get(ty, 1);
  Value *r = nullptr;
  namespace I = llvm::Intrinsic;

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
  case OpKind::Log:
    if (need(1))
      r = unaryIntrinsic(I::log, a[0]);
    break;
  case OpKind::Sqrt:
    if (need(1))
      r = unaryIntrinsic(I::sqrt, a[0]);
    break;
  case OpKind::Sin:
    if (need(1))
      r = unaryIntrinsic(I::sin, a[0]);
    break;
  case OpKind::Cos:
    if (need(1))
      r = unaryIntrinsic(I::cos, a[0]);
    break;
  case OpKind::Floor:
    if (need(1))
      r = unaryIntrinsic(I::floor, a[0]);
    break;
  case OpKind::Ceil:
    if (need(1))
      r = unaryIntrinsic(I::ceil, a[0]);
    break;
  case OpKind::Tan:
    if (need(1))
      r = libm("tan", a[0]);
    break;
  case OpKind::Asin:
    if (need(1))
      r = libm("asin", a[0]);
    break;
  case OpKind::Acos:
    if (need(1))
      r = libm("acos", a[0]);
    break;
  case OpKind::Atan:
    if (need(1))
      r = libm("atan", a[0]);
    break;
  case OpKind::Sinh:
    if (need(1))
      r = libm("sinh", a[0]);
    break;
  case OpKind::Cosh:
    if (need(1))
      r = libm("cosh", a[0]);
    break;
  case OpKind::Asinh:
    if (need(1))
      r = libm("asinh", a[0]);
    break;
  case OpKind::Acosh:
    if (need(1))
      r = libm("acosh", a[0]);
    break;
  case OpKind::Atanh:
    if (need(1))
      r = libm("atanh", a[0]);
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
  case OpKind::Div: {
    if (!need(2))
      break;
    Value *x = a[0], *y = a[1];
    if (f) {
      r = b_.CreateFDiv(x, y);
      break;
    }
    // Integers: division by zero gives 0; for signed types b == -1 is handled apart
    // (INT_MIN / -1 would trap).
    auto *cy = llvm::dyn_cast<llvm::ConstantInt>(y);
    bool safeConst = cy && !cy->isZero() && !(s && cy->isMinusOne());
    Value *isZero = b_.CreateICmpEQ(y, zero);
    Value *isM1 = s ? b_.CreateICmpEQ(y, llvm::ConstantInt::getSigned(ty, -1)) : b_.getFalse();
    Value *safeY = safeConst ? y : b_.CreateSelect(b_.CreateOr(isZero, isM1), one, y);
    Value *q = s ? b_.CreateSDiv(x, safeY) : b_.CreateUDiv(x, safeY);
    if (!safeConst)
      q = b_.CreateSelect(isZero, zero, s ? b_.CreateSelect(isM1, b_.CreateSub(zero, x), q) : q);
    r = q;
    break;
  }
  case OpKind::Min:
  case OpKind::Max: {
    if (!need(2))
      break;
    Value *x = a[0], *y = a[1];
    bool isMin = e.op == OpKind::Min;
    if (f) {
      // b < a ? b : a (min), a < b ? b : a (max); NaN when either is NaN.
      Value *pick = isMin ? b_.CreateSelect(b_.CreateFCmpOLT(y, x), y, x)
                          : b_.CreateSelect(b_.CreateFCmpOLT(x, y), y, x);
      r = b_.CreateSelect(b_.CreateFCmpUNO(x, y), llvm::ConstantFP::getQNaN(ty), pick);
    } else {
      Value *lt = isMin ? (s ? b_.CreateICmpSLT(y, x) : b_.CreateICmpULT(y, x))
                        : (s ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y));
      r = b_.CreateSelect(lt, y, x);
    }
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
  case OpKind::ShiftLeft:
  case OpKind::ShiftRight: {
    if (!need(2))
      break;
    unsigned bits = ty->getIntegerBitWidth();
    Value *tooBig = b_.CreateICmpUGE(a[1], llvm::ConstantInt::get(ty, bits));
    Value *amount = b_.CreateSelect(tooBig, zero, a[1]);
    Value *sh =
        e.op == OpKind::ShiftLeft ? b_.CreateShl(a[0], amount) : b_.CreateLShr(a[0], amount);
    r = b_.CreateSelect(tooBig, zero, sh);
    break;
  }
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
  case kir::ExprKind::Call:
    if (e.name == "exp" && a.size() == 1)
      return unaryIntrinsic(I::exp, a[0]);
    if (e.name == "pow" && a.size() == 2)
      return b_.CreateBinaryIntrinsic(I::pow, a[0], a[1]);
    if ((e.name == "tanh" || e.name == "erf") && a.size() == 1)
      return libm(e.name.c_str(), a[0]);
    fail("call of math function '{}' with {} operands", e.name, a.size());
    return poison(e.type);
  default:
    break;
  }
  fail("{} with {} operands", printExpr(std::make_shared<kir::ExprNode>(e)), a.size());
  return poison(e.type);
}

// ---- Statements ------------------------------------------------------------------------------

void KernelEmitter::emitStmt(const kir::Stmt &sp) {
  if (!sp || error_)
    return;
  const kir::StmtNode &s = *sp;
  switch (s.kind) {
  case kir::StmtKind::Block: {
    Scope saved = scope_;
    for (const kir::Stmt &c : s.body)
      emitStmt(c);
    scope_ = std::move(saved);
    return;
  }
  case kir::StmtKind::For:
    emitFor(s);
    return;
  case kir::StmtKind::GemmTile:
    emitGemmTile(s);
    return;
  case kir::StmtKind::VecLoad: // lane by lane; LLVM's vectorizers see the adjacent accesses
    for (size_t l = 0; l < s.names.size(); ++l)
      emitStmt(kir::decl(
          s.names[l], s.type,
          kir::load(s.buffer, s.type, kir::add(s.index, kir::intImm(static_cast<int64_t>(l))))));
    return;
  case kir::StmtKind::VecStore:
    for (size_t l = 0; l < s.args.size(); ++l)
      emitStmt(
          kir::store(s.buffer, kir::add(s.index, kir::intImm(static_cast<int64_t>(l))), s.args[l]));
    return;
  case kir::StmtKind::Barrier:
    fail("a work-group barrier on the CPU");
    return;
  case kir::StmtKind::Store: {
    DType dt;
    Value *p = bufferElement(s.buffer, s.index, dt);
    if (!p)
      return;
    Value *v = emitExpr(s.value);
    if (error_)
      return;
    if (v->getType() != computeType(dt)) {
      fail("store of a {} value into buffer {} of {}", printExpr(s.value),
           k_.buffers[s.buffer].name, dtypeName(dt));
      return;
    }
    tagAccess(b_.CreateStore(storeValue(dt, v), p));
    return;
  }
  case kir::StmtKind::Decl: {
    Type *t = computeType(s.type);
    llvm::AllocaInst *slot = entryAlloca(t, s.name);
    Value *v = emitExpr(s.value);
    if (error_)
      return;
    if (v->getType() != t) {
      fail("local '{}' of {} initialized with {}", s.name, dtypeName(s.type), printExpr(s.value));
      return;
    }
    b_.CreateStore(v, slot);
    scope_[s.name] = Binding{nullptr, slot, s.type};
    return;
  }
  case kir::StmtKind::Assign: {
    auto it = scope_.find(s.name);
    if (it == scope_.end() || !it->second.slot) {
      fail("assignment to '{}', which is not a local in scope", s.name);
      return;
    }
    Value *v;
    if (s.ignoresNaN) {
      // max(name, x) / min(name, x) whose NaN operands may be ignored: maxnum / minnum with
      // nnan and nsz, which the loop vectorizer keeps in vector lanes (the target's max/min).
      const kir::ExprNode &e = *s.value;
      if (e.kind != kir::ExprKind::Op || (e.op != OpKind::Max && e.op != OpKind::Min) ||
          e.args.size() != 2 || !isFloat(it->second.type)) {
        fail("NaN-ignoring accumulation into '{}' is not a float max or min: {}", s.name,
             printExpr(s.value));
        return;
      }
      Value *x = emitExpr(e.args[0]), *y = error_ ? nullptr : emitExpr(e.args[1]);
      if (error_)
        return;
      auto *call = b_.CreateBinaryIntrinsic(
          e.op == OpKind::Max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, x, y);
      llvm::FastMathFlags fmf;
      fmf.setNoNaNs();
      fmf.setNoSignedZeros();
      llvm::cast<llvm::Instruction>(call)->setFastMathFlags(fmf);
      v = call;
    } else {
      llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
      if (s.reassociate) {
        llvm::FastMathFlags fmf = b_.getFastMathFlags();
        fmf.setAllowReassoc(true);
        b_.setFastMathFlags(fmf);
      }
      v = emitExpr(s.value);
    }
    if (error_)
      return;
    if (v->getType() != computeType(it->second.type)) {
      fail("local '{}' of {} assigned {}", s.name, dtypeName(it->second.type), printExpr(s.value));
      return;
    }
    b_.CreateStore(v, it->second.slot);
    return;
  }
  case kir::StmtKind::If: {
    Value *cond = emitExpr(s.value);
    if (error_)
      return;
    if (!cond->getType()->isIntegerTy(1)) {
      fail("if condition {} is not bool", printExpr(s.value));
      return;
    }
    auto *thenB = llvm::BasicBlock::Create(c_, "then", fn_);
    auto *elseB =
        s.body.size() > 1 && s.body[1] ? llvm::BasicBlock::Create(c_, "else", fn_) : nullptr;
    auto *join = llvm::BasicBlock::Create(c_, "endif", fn_);
    b_.CreateCondBr(cond, thenB, elseB ? elseB : join);
    b_.SetInsertPoint(thenB);
    {
      Scope saved = scope_;
      if (!s.body.empty())
        emitStmt(s.body[0]);
      scope_ = std::move(saved);
    }
    b_.CreateBr(join);
    if (elseB) {
      b_.SetInsertPoint(elseB);
      Scope saved = scope_;
      emitStmt(s.body[1]);
      scope_ = std::move(saved);
      b_.CreateBr(join);
    }
    b_.SetInsertPoint(join);
    return;
  }
  }
  fail("unknown statement kind");
}

llvm::MDNode *KernelEmitter::loopMetadata(kir::LoopKind kind, const kir::Expr &extent,
                                          llvm::MDNode *accessGroup) {
  std::vector<llvm::Metadata *> ops;
  ops.push_back(nullptr); // self reference
  auto flag = [&](const char *name, llvm::Metadata *v) {
    ops.push_back(llvm::MDNode::get(c_, {llvm::MDString::get(c_, name), v}));
  };
  auto i1 = [&](bool v) { return llvm::ConstantAsMetadata::get(b_.getInt1(v)); };
  auto i32 = [&](int v) { return llvm::ConstantAsMetadata::get(b_.getInt32(v)); };
  bool constExtent = extent && extent->kind == kir::ExprKind::IntImm;
  int64_t n = constExtent ? extent->intValue : 0;
  switch (kind) {
  case kir::LoopKind::Vectorized: {
    flag("llvm.loop.vectorize.enable", i1(true));
    // At most 16 lanes: the vector math functions (libmvec) come 16 f32 lanes wide at the
    // most, and a loop forced wider calls the scalar function once per lane (a softmax row of
    // 49 took 32-wide vectors and 32 expf calls each); the vectorizer interleaves for more.
    int64_t w = 16;
    if (constExtent && n > 0) {
      w = 1;
      while (w * 2 <= n && w < 16)
        w *= 2;
    }
    if (w >= 2)
      flag("llvm.loop.vectorize.width", i32(static_cast<int>(w)));
    // The vectorizer, not the full unroller that runs before it, takes the loop: unrolled
    // into 16 scalar copies (a cheap body of a 16-wide split), it was left scalar.
    ops.push_back(llvm::MDNode::get(c_, {llvm::MDString::get(c_, "llvm.loop.unroll.disable")}));
    if (accessGroup)
      flag("llvm.loop.parallel_accesses", accessGroup);
    break;
  }
  case kir::LoopKind::Unrolled:
    if (constExtent && n > 0 && n <= 64)
      ops.push_back(llvm::MDNode::get(c_, {llvm::MDString::get(c_, "llvm.loop.unroll.full")}));
    else
      ops.push_back(llvm::MDNode::get(c_, {llvm::MDString::get(c_, "llvm.loop.unroll.enable")}));
    break;
  case kir::LoopKind::Scalar:
    flag("llvm.loop.vectorize.enable", i1(false));
    break;
  default:
    return nullptr;
  }
  llvm::MDNode *md = llvm::MDNode::getDistinct(c_, ops);
  md->replaceOperandWith(0, md);
  return md;
}

void KernelEmitter::emitLoop(const std::string &var, Value *begin, Value *end, kir::LoopKind kind,
                             const kir::Expr &extentExpr, const std::vector<kir::Stmt> &body,
                             bool independent) {
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  auto *header = llvm::BasicBlock::Create(c_, var + ".header", fn_);
  auto *bodyB = llvm::BasicBlock::Create(c_, var + ".body", fn_);
  auto *exit = llvm::BasicBlock::Create(c_, var + ".exit", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode *iv = b_.CreatePHI(b_.getInt64Ty(), 2, var);
  iv->addIncoming(begin, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(iv, end), bodyB, exit);
  b_.SetInsertPoint(bodyB);
  Scope saved = scope_;
  scope_[var] = Binding{iv, nullptr, DType::I64};
  // A vectorized loop whose iterations are independent (a gpu_grid loop, whose iterations
  // OpenCL runs as separate work-items) says so to LLVM: its buffer accesses form an access
  // group the loop declares parallel. Without it, kernel buffers may alias as far as LLVM
  // knows (an elementwise result may share its operand's storage, read only at the index being
  // written), and the vectorizer checked the pointers' overlap at run time on every entry: once
  // per vector of an NCHWc kernel's 8-lane inner loop, where the check cost more than the
  // work (DenseNet-121's BatchNorm + ReLU kernels).
  llvm::MDNode *group = nullptr;
  if (kind == kir::LoopKind::Vectorized && independent && parallelAccessesHold(var, body)) {
    group = llvm::MDNode::getDistinct(c_, {});
    accessGroup_ = group;
  }
  for (const kir::Stmt &c : body)
    emitStmt(c);
  if (group)
    accessGroup_ = nullptr;
  scope_ = std::move(saved);
  Value *next = b_.CreateAdd(iv, b_.getInt64(1), var + ".next", /*HasNUW=*/true,
                             /*HasNSW=*/true);
  llvm::BranchInst *latch = b_.CreateBr(header);
  if (llvm::MDNode *md = loopMetadata(kind, extentExpr, group))
    latch->setMetadata(llvm::LLVMContext::MD_loop, md);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.SetInsertPoint(exit);
}

void KernelEmitter::emitGemmTile(const kir::StmtNode &s) {
  const kir::GemmTileShape &t = s.tile;
  for (int b : {t.a, t.b, s.buffer})
    if (b < 0 || b >= static_cast<int>(k_.buffers.size()) || k_.buffers[b].dtype != DType::F32) {
      fail("gemm_tile on buffer {}, which is not an f32 buffer of the kernel", b);
      return;
    }
  if (s.args.size() != 4) {
    fail("gemm_tile without A, B, C offsets and a k extent");
    return;
  }
  std::vector<Value *> v;
  for (const kir::Expr &e : s.args) {
    v.push_back(emitExpr(e));
    if (error_)
      return;
    if (!v.back()->getType()->isIntegerTy(64)) {
      fail("gemm_tile offset {} is not i64", printExpr(e));
      return;
    }
  }
  Type *f32 = b_.getFloatTy();
  Value *pa = b_.CreateInBoundsGEP(f32, bufs_[t.a], v[0]);
  Value *pb = b_.CreateInBoundsGEP(f32, bufs_[t.b], v[1]);
  Value *pc = b_.CreateInBoundsGEP(f32, bufs_[s.buffer], v[2]);
  b_.CreateCall(gemmMicrokernel(t.mr, t.nr, t.prefetchB != 0, t.prefetchShift),
                {pa, pb, pc, v[3], b_.getInt64(t.lda), b_.getInt64(t.ak), b_.getInt64(t.ldb),
                 b_.getInt64(t.ldc), b_.getInt1(t.accumulate), b_.getInt64(t.prefetchB)});
}

/// A permutation's tile (permuteSchedule): `for a < W { for b < W' { [if (guard)]
/// out[i(a, b)] = in[j(a, b)] } }`, W in {4, 8, 16} and W' = W or a split tail's min(W, X): a
/// pure copy whose load is contiguous along a and whose store is contiguous along b. Emitted as
/// W vector loads along a, a transpose of the W x W block in registers (log2 W stages of
/// two-vector shuffles, each swapping one bit of the row and column positions) and W vector
/// stores along b, instead of W*W scalar copies with one side striding through memory (ViT's
/// K^T copy reads rows 9 KiB apart). A guard (a split's tail) is tested at the tile's last
/// corner, and X >= W: where either fails, the loops run as written. Returns false, emitting
/// nothing, for any other loop.
bool KernelEmitter::emitTransposedTile(const kir::StmtNode &s) {
  auto constExtent = [](const kir::StmtNode &l) {
    return l.extent && l.extent->kind == kir::ExprKind::IntImm ? l.extent->intValue : -1;
  };
  int64_t w = constExtent(s);
  if (s.loopKind != kir::LoopKind::Serial || (w != 4 && w != 8 && w != 16) || s.body.size() != 1 ||
      !s.body[0] || s.body[0]->kind != kir::StmtKind::For)
    return false;
  const kir::StmtNode &in = *s.body[0];
  const std::string &av = s.name, &bv = in.name;
  // The inner extent: W, or min(W, X) from a split's tightened tail guard (tightenGuardedLoops),
  // whose tiles are whole where X >= W.
  kir::Expr innerLimit;
  if (constExtent(in) != w) {
    const kir::Expr &e = in.extent;
    if (!e || e->kind != kir::ExprKind::Op || e->op != OpKind::Min || e->args.size() != 2)
      return false;
    int imm = e->args[0]->kind == kir::ExprKind::IntImm ? 0 : 1;
    if (e->args[imm]->kind != kir::ExprKind::IntImm || e->args[imm]->intValue != w ||
        mentionsVar(e->args[1 - imm], av) || mentionsVar(e->args[1 - imm], bv))
      return false;
    innerLimit = e->args[1 - imm];
  }
  if (in.loopKind != kir::LoopKind::Serial || in.body.size() != 1 || !in.body[0])
    return false;
  // Guards (split tails: one If per tiled loop whose extent the factor does not divide).
  kir::Expr guard;
  const kir::StmtNode *st = in.body[0].get();
  while (st->kind == kir::StmtKind::If) {
    if (st->body.empty() || !st->body[0] || (st->body.size() > 1 && st->body[1]) ||
        !holdsOnTileIfAtCorner(st->value, av, bv))
      return false;
    guard = guard ? kir::land(guard, st->value) : st->value;
    st = st->body[0].get();
  }
  if (st->kind != kir::StmtKind::Store || !st->value || st->value->kind != kir::ExprKind::Load ||
      st->value->args.size() != 1)
    return false;
  const kir::ExprNode &ld = *st->value;
  int nb = static_cast<int>(k_.buffers.size());
  if (st->buffer < 0 || st->buffer >= nb || ld.buffer < 0 || ld.buffer >= nb ||
      ld.buffer == st->buffer || k_.buffers[ld.buffer].dtype != k_.buffers[st->buffer].dtype ||
      ld.type != k_.buffers[ld.buffer].dtype)
    return false;
  Type *et = storageType(k_.buffers[st->buffer].dtype);
  unsigned bits = et->getPrimitiveSizeInBits();
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return false;
  const kir::Expr &li = ld.args[0], &si = st->index;
  if (affineCoefficient(li, av) != std::optional<int64_t>(1) || !affineCoefficient(li, bv) ||
      affineCoefficient(si, bv) != std::optional<int64_t>(1) || !affineCoefficient(si, av))
    return false;

  Scope saved = scope_;
  auto at = [&](int64_t a, int64_t b) {
    scope_[av] = Binding{b_.getInt64(a), nullptr, DType::I64};
    scope_[bv] = Binding{b_.getInt64(b), nullptr, DType::I64};
  };
  llvm::BasicBlock *scalarB = nullptr, *join = nullptr;
  if (guard || innerLimit) {
    at(w - 1, w - 1);
    Value *ok = nullptr;
    if (guard)
      ok = emitExpr(guard);
    if (innerLimit && !error_) {
      Value *limit = emitExpr(innerLimit);
      if (!error_ && !limit->getType()->isIntegerTy(64))
        fail("loop {} has a non-i64 extent {}", bv, printExpr(in.extent));
      if (!error_) {
        Value *whole = b_.CreateICmpSGE(limit, b_.getInt64(w));
        ok = ok ? b_.CreateAnd(ok, whole) : whole;
      }
    }
    if (error_) {
      scope_ = std::move(saved);
      return true;
    }
    auto *vecB = llvm::BasicBlock::Create(c_, av + ".tile", fn_);
    scalarB = llvm::BasicBlock::Create(c_, av + ".edge", fn_);
    join = llvm::BasicBlock::Create(c_, av + ".tiled", fn_);
    b_.CreateCondBr(ok, vecB, scalarB);
    b_.SetInsertPoint(vecB);
  }
  unsigned lanes = static_cast<unsigned>(w);
  auto *vt = llvm::FixedVectorType::get(et, lanes);
  llvm::Align align(bits / 8);
  // rows[b]: the elements at a = 0..W-1 of column b.
  std::vector<Value *> rows(lanes);
  DType dt;
  for (unsigned b = 0; b < lanes; ++b) {
    at(0, b);
    Value *p = bufferElement(ld.buffer, li, dt);
    if (!p) {
      scope_ = std::move(saved);
      return true;
    }
    rows[b] = b_.CreateAlignedLoad(vt, p, align);
  }
  // The stage of k = 1, 2, 4, ... swaps the bit of value k between the row and column
  // positions: rows i (that bit clear) and i + k exchange the elements where it differs.
  for (unsigned k = 1; k < lanes; k <<= 1)
    for (unsigned i = 0; i < lanes; ++i) {
      if (i & k)
        continue;
      std::vector<int> lo(lanes), hi(lanes);
      for (unsigned c = 0; c < lanes; ++c) {
        lo[c] = static_cast<int>((c & k) ? lanes + c - k : c);
        hi[c] = static_cast<int>((c & k) ? lanes + c : c + k);
      }
      Value *x = rows[i], *y = rows[i + k];
      rows[i] = b_.CreateShuffleVector(x, y, lo);
      rows[i + k] = b_.CreateShuffleVector(x, y, hi);
    }
  for (unsigned a = 0; a < lanes; ++a) {
    at(a, 0);
    Value *p = bufferElement(st->buffer, si, dt);
    if (!p) {
      scope_ = std::move(saved);
      return true;
    }
    b_.CreateAlignedStore(rows[a], p, align);
  }
  scope_ = saved;
  if (scalarB) {
    b_.CreateBr(join);
    b_.SetInsertPoint(scalarB);
    emitLoop(s.name, b_.getInt64(0), b_.getInt64(w), s.loopKind, s.extent, s.body, s.independent);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }
  return true;
}

/// `void f32_gemm_<mr>x<nr>_<isa>(ptr a, ptr b, ptr c, i64 kc, i64 lda, i64 ak, i64 ldb,
/// i64 ldc, i1 accumulate, i64 pfb)`: the GemmTile microkernel with mr x ceil(nr / W) accumulators
/// of <W x float> (W: the target's f32 lanes) held in SSA values across the k loop; per k step it
/// loads ceil(nr / W) vectors of B's row, broadcasts one A value per row and multiply-adds
/// (llvm.fmuladd: an FMA where the target has one). A partial last vector uses masked loads
/// and stores. The `_pfb<s>` variant also prefetches, per k step p, the B row at element offset
/// pfb from row p >> s (GemmTileShape::prefetchB, prefetchShift). One definition per module
/// and variant.
llvm::Function *KernelEmitter::gemmMicrokernel(int64_t mr, int64_t nr, bool prefetch, int shift) {
  unsigned w = static_cast<unsigned>(cpu_.f32Lanes());
  const char *isa = cpu_.level == CpuTarget::Level::V4   ? "avx512"
                    : cpu_.level == CpuTarget::Level::V3 ? "avx2"
                                                         : "vec4";
  std::string name = fmt::format("f32_gemm_{}x{}_{}{}", mr, nr, isa,
                                 prefetch ? fmt::format("_pfb{}", shift) : std::string());
  if (llvm::Function *f = m_.getFunction(name))
    return f;
  Type *ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty(), *f32 = b_.getFloatTy();
  auto *fty = llvm::FunctionType::get(
      b_.getVoidTy(), {ptr, ptr, ptr, i64, i64, i64, i64, i64, b_.getInt1Ty(), i64}, false);
  llvm::Function *f = llvm::Function::Create(fty, llvm::Function::InternalLinkage, name, m_);
  setTargetAttributes(f, tm_, cpu_);
  const char *argNames[] = {"a", "b", "c", "kc", "lda", "ak", "ldb", "ldc", "accumulate", "pfb"};
  for (unsigned i = 0; i < 10; ++i)
    f->getArg(i)->setName(argNames[i]);
  Value *a = f->getArg(0), *bp = f->getArg(1), *c = f->getArg(2), *kc = f->getArg(3),
        *lda = f->getArg(4), *ak = f->getArg(5), *ldb = f->getArg(6), *ldc = f->getArg(7),
        *accumulate = f->getArg(8), *pfb = f->getArg(9);
  for (unsigned i = 0; i < 3; ++i)
    f->addParamAttr(i, llvm::Attribute::NoAlias);

  IRBuilder<> b(c_);
  auto *entry = llvm::BasicBlock::Create(c_, "entry", f);
  auto *loop = llvm::BasicBlock::Create(c_, "k", f);
  auto *exit = llvm::BasicBlock::Create(c_, "store", f);
  b.SetInsertPoint(entry);
  int64_t nv = (nr + w - 1) / w;
  unsigned lastLanes = static_cast<unsigned>(nr - (nv - 1) * w);
  auto *vty = llvm::FixedVectorType::get(f32, w);
  Value *zero = llvm::Constant::getNullValue(vty);
  Value *lastMask = nullptr;
  if (lastLanes != w) {
    std::vector<llvm::Constant *> bits;
    for (unsigned l = 0; l < w; ++l)
      bits.push_back(b.getInt1(l < lastLanes));
    lastMask = llvm::ConstantVector::get(bits);
  }
  llvm::Align align(4);
  auto loadVec = [&](Value *p, int64_t v) -> Value * {
    if (v == nv - 1 && lastMask)
      return b.CreateMaskedLoad(vty, p, align, lastMask, zero);
    return b.CreateAlignedLoad(vty, p, align);
  };
  // Initial accumulators: C's values or zero.
  std::vector<Value *> init;
  for (int64_t r = 0; r < mr; ++r) {
    Value *row = b.CreateInBoundsGEP(f32, c, b.CreateMul(b.getInt64(r), ldc));
    for (int64_t v = 0; v < nv; ++v) {
      Value *p = b.CreateInBoundsGEP(f32, row, b.getInt64(v * w));
      init.push_back(b.CreateSelect(accumulate, loadVec(p, v), zero));
    }
  }
  b.CreateCondBr(b.CreateICmpSGT(kc, b.getInt64(0)), loop, exit);

  b.SetInsertPoint(loop);
  llvm::PHINode *kv = b.CreatePHI(i64, 2, "p");
  kv->addIncoming(b.getInt64(0), entry);
  std::vector<llvm::PHINode *> acc;
  for (size_t i = 0; i < init.size(); ++i) {
    acc.push_back(b.CreatePHI(vty, 2, "acc"));
    acc.back()->addIncoming(init[i], entry);
  }
  Value *brow = b.CreateInBoundsGEP(f32, bp, b.CreateMul(kv, ldb));
  std::vector<Value *> bv;
  for (int64_t v = 0; v < nv; ++v)
    bv.push_back(loadVec(b.CreateInBoundsGEP(f32, brow, b.getInt64(v * w)), v));
  if (prefetch) {
    // One prefetch per 64-byte line of the row (a hint: never faults, so no bounds).
    Value *from = brow;
    if (shift > 0)
      from = b.CreateInBoundsGEP(f32, bp, b.CreateMul(b.CreateLShr(kv, b.getInt64(shift)), ldb));
    Value *prow = b.CreateGEP(f32, from, pfb);
    for (int64_t l = 0; l * 16 < nr; ++l)
      b.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr},
                        {b.CreateGEP(f32, prow, b.getInt64(l * 16)), b.getInt32(0), b.getInt32(3),
                         b.getInt32(1)});
  }
  Value *acol = b.CreateInBoundsGEP(f32, a, b.CreateMul(kv, ak));
  std::vector<Value *> next(init.size());
  for (int64_t r = 0; r < mr; ++r) {
    Value *ap = b.CreateInBoundsGEP(f32, acol, b.CreateMul(b.getInt64(r), lda));
    Value *splat = b.CreateVectorSplat(w, b.CreateAlignedLoad(f32, ap, align));
    for (int64_t v = 0; v < nv; ++v) {
      size_t i = static_cast<size_t>(r * nv + v);
      next[i] = b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vty}, {splat, bv[v], acc[i]});
    }
  }
  Value *kn = b.CreateAdd(kv, b.getInt64(1), "p.next", true, true);
  kv->addIncoming(kn, loop);
  for (size_t i = 0; i < acc.size(); ++i)
    acc[i]->addIncoming(next[i], loop);
  b.CreateCondBr(b.CreateICmpSLT(kn, kc), loop, exit);

  b.SetInsertPoint(exit);
  std::vector<Value *> sums;
  for (size_t i = 0; i < init.size(); ++i) {
    llvm::PHINode *fin = b.CreatePHI(vty, 2, "sum");
    fin->addIncoming(init[i], entry);
    fin->addIncoming(next[i], loop);
    sums.push_back(fin);
  }
  for (int64_t r = 0; r < mr; ++r) {
    Value *row = b.CreateInBoundsGEP(f32, c, b.CreateMul(b.getInt64(r), ldc));
    for (int64_t v = 0; v < nv; ++v) {
      Value *sum = sums[static_cast<size_t>(r * nv + v)];
      Value *p = b.CreateInBoundsGEP(f32, row, b.getInt64(v * w));
      if (v == nv - 1 && lastMask)
        b.CreateMaskedStore(sum, p, align, lastMask);
      else
        b.CreateAlignedStore(sum, p, align);
    }
  }
  b.CreateRetVoid();
  return f;
}

void KernelEmitter::emitFor(const kir::StmtNode &s) {
  Value *extent = emitExpr(s.extent);
  if (error_)
    return;
  if (!extent->getType()->isIntegerTy(64)) {
    fail("loop {} has a non-i64 extent {}", s.name, printExpr(s.extent));
    return;
  }
  if (s.loopKind == kir::LoopKind::Parallel && !inParallel_) {
    emitParallelFor(s, extent);
    return;
  }
  if (emitTransposedTile(s))
    return;
  emitLoop(s.name, b_.getInt64(0), extent, s.loopKind, s.extent, s.body, s.independent);
}

/// Outlines the loop body into `void body(void* ctx, i64 begin, i64 end)`, where ctx holds the
/// kernel's buffer array, the loop variables in scope and the addresses of the locals in scope,
/// and calls nnc_parallel_for(body, ctx, extent).
void KernelEmitter::emitParallelFor(const kir::StmtNode &s, Value *extent) {
  Type *ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty();
  // The context: buffers, then each scope entry (i64 value or local's address).
  std::vector<std::pair<std::string, Binding>> captured(scope_.begin(), scope_.end());
  std::vector<Type *> fields{ptr};
  for (auto &[name, bd] : captured)
    fields.push_back(bd.slot ? ptr : i64);
  llvm::StructType *ctxTy = llvm::StructType::get(c_, fields);
  llvm::AllocaInst *ctx = entryAlloca(ctxTy, s.name + ".ctx");
  b_.CreateStore(buffersArg_, b_.CreateStructGEP(ctxTy, ctx, 0));
  for (size_t i = 0; i < captured.size(); ++i) {
    const Binding &bd = captured[i].second;
    Value *v = bd.slot ? static_cast<Value *>(bd.slot) : bd.value;
    if (!bd.slot && !v->getType()->isIntegerTy(64))
      v = b_.CreateSExtOrTrunc(v, i64);
    b_.CreateStore(v, b_.CreateStructGEP(ctxTy, ctx, i + 1));
  }

  auto *bodyTy = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false);
  auto *bodyFn = llvm::Function::Create(bodyTy, llvm::Function::InternalLinkage,
                                        fmt::format("{}.par{}", k_.name, outlined_++), m_);
  setTargetAttributes(bodyFn, tm_, cpu_);

  // Emit the body function with fresh state, then come back.
  llvm::Function *savedFn = fn_;
  Value *savedArg = buffersArg_;
  std::vector<Value *> savedBufs = bufs_;
  Scope savedScope = scope_;
  llvm::BasicBlock *savedBlock = b_.GetInsertBlock();
  fn_ = bodyFn;
  inParallel_ = true;
  auto *entry = llvm::BasicBlock::Create(c_, "entry", bodyFn);
  b_.SetInsertPoint(entry);
  Value *ctxArg = bodyFn->getArg(0);
  buffersArg_ = b_.CreateLoad(ptr, b_.CreateStructGEP(ctxTy, ctxArg, 0), "buffers");
  loadBuffers(buffersArg_);
  scope_.clear();
  // Locals the body assigns stay shared through their address; the others (read-only here,
  // e.g. a scalar operand loaded once before the loop) are copied into a private local, so
  // LLVM sees them as loop-invariant values instead of loads that any store may change.
  std::set<std::string> assigned;
  std::function<void(const kir::Stmt &)> visit = [&](const kir::Stmt &st) {
    if (!st)
      return;
    if (st->kind == kir::StmtKind::Assign)
      assigned.insert(st->name);
    for (const kir::Stmt &c : st->body)
      visit(c);
  };
  for (const kir::Stmt &c : s.body)
    visit(c);
  for (size_t i = 0; i < captured.size(); ++i) {
    Binding bd = captured[i].second;
    Value *v = b_.CreateLoad(bd.slot ? ptr : i64, b_.CreateStructGEP(ctxTy, ctxArg, i + 1),
                             captured[i].first);
    // A local lives in the caller's frame and is reached through its address.
    if (bd.slot && !assigned.count(captured[i].first)) {
      Type *t = computeType(bd.type);
      llvm::AllocaInst *copy = entryAlloca(t, captured[i].first);
      b_.CreateStore(b_.CreateLoad(t, v), copy);
      bd.slot = copy;
    } else if (bd.slot) {
      bd.slot = v;
    } else {
      bd.value = v;
    }
    scope_[captured[i].first] = bd;
  }
  emitLoop(s.name, bodyFn->getArg(1), bodyFn->getArg(2), kir::LoopKind::Serial, s.extent, s.body);
  b_.CreateRetVoid();

  fn_ = savedFn;
  buffersArg_ = savedArg;
  bufs_ = std::move(savedBufs);
  scope_ = std::move(savedScope);
  inParallel_ = false;
  b_.SetInsertPoint(savedBlock);

  llvm::FunctionCallee pf = m_.getOrInsertFunction(
      kParallelFor, llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64}, false));
  auto *run = llvm::BasicBlock::Create(c_, s.name + ".par", fn_);
  auto *after = llvm::BasicBlock::Create(c_, s.name + ".par.done", fn_);
  b_.CreateCondBr(b_.CreateICmpSGT(extent, b_.getInt64(0)), run, after);
  b_.SetInsertPoint(run);
  b_.CreateCall(pf, {bodyFn, ctx, extent});
  b_.CreateBr(after);
  b_.SetInsertPoint(after);
}

} // namespace

int markStreamingStores(llvm::Module &m) {
  llvm::Triple triple(m.getTargetTriple());
  if (!triple.isX86())
    return 0;
  int marked = 0;
  llvm::LLVMContext &ctx = m.getContext();
  llvm::MDNode *nontemporal = llvm::MDNode::get(
      ctx, llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), 1)));
  for (llvm::Function &f : m) {
    bool any = false;
    for (llvm::BasicBlock &bb : f)
      for (llvm::Instruction &i : bb) {
        auto *st = llvm::dyn_cast<llvm::StoreInst>(&i);
        if (!st || st->isVolatile() || !st->getValueOperand()->getType()->isVectorTy())
          continue;
        uint64_t bytes = m.getDataLayout().getTypeStoreSize(st->getValueOperand()->getType());
        // Whole aligned vectors only: x86's non-temporal stores need both.
        if (bytes < 16 || !llvm::isPowerOf2_64(bytes) || st->getAlign().value() < bytes)
          continue;
        auto *base = llvm::dyn_cast<llvm::LoadInst>(
            llvm::getUnderlyingObject(st->getPointerOperand(), /*MaxLookup=*/0));
        if (!base || !base->getMetadata(kStreamingMetadata))
          continue;
        st->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
        any = true;
        ++marked;
      }
    if (!any)
      continue;
    // Non-temporal stores are weakly ordered: drain them before the function returns (the
    // runtime then publishes the results to other threads or the caller).
    llvm::Function *sfence = llvm::Intrinsic::getDeclaration(&m, llvm::Intrinsic::x86_sse_sfence);
    for (llvm::BasicBlock &bb : f)
      if (auto *ret = llvm::dyn_cast<llvm::ReturnInst>(bb.getTerminator()))
        llvm::CallInst::Create(sfence, {}, "", ret);
  }
  return marked;
}

Expected<std::unique_ptr<llvm::Module>> emitModule(llvm::LLVMContext &ctx,
                                                   const std::vector<kir::Kernel> &kernels,
                                                   llvm::TargetMachine &tm, const CpuTarget &cpu) {
  auto m = std::make_unique<llvm::Module>("nnc", ctx);
  m->setDataLayout(tm.createDataLayout());
  m->setTargetTriple(tm.getTargetTriple().str());
  for (const kir::Kernel &k : kernels) {
    // Work-group memory and barriers have no meaning on the CPU, where gpu loops are plain
    // loops (vector loads and stores have one: their lanes, which the emitter writes).
    if (k.usesWorkGroupMemory())
      return makeError("kernel {}: local buffers and barriers run on an OpenCL device only",
                       k.name);
    Expected<kir::Stmt> body = kir::codegenBody(k);
    if (!body)
      return body.takeError().withContext("kernel " + k.name);
    KernelEmitter em(*m, k, tm, cpu);
    NNC_TRY(em.emit(*body));
  }
  std::string msg;
  llvm::raw_string_ostream os(msg);
  if (llvm::verifyModule(*m, &os))
    return makeError("internal error: invalid LLVM IR generated: {}", os.str());
  return m;
}

} // namespace nnc::llvmcg
