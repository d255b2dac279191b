// Kernel IR -> LLVM IR: one function `void name(void** buffers)` per kernel, with the exact
// scalar semantics of the reference interpreter (the elementwise ops' in nnc/ir/ScalarOps.h,
// casts' in runtime/interp/Cast.cpp).
//
// Values are held in their compute type (float for f16/bf16, i1 for bool); loads and stores
// convert from and to the storage type. An op whose result is f16/bf16 is rounded to that
// format right away, so a fused chain gives the numbers of the node-by-node interpreter.
//
// KernelEmitter walks one kernel; private to codegen/llvm. Its parts: Emitter.cpp (the kernel's
// function, the module, streaming stores), EmitExpr.cpp (expressions), EmitCast.cpp (casts),
// EmitStmt.cpp (statements, loops, parallel loops), EmitGemmTile.cpp (the GemmTile
// microkernel), EmitIntGemmTile.cpp (its integer form), EmitConvTile.cpp (the ConvTile
// microkernel) and EmitTransposedTile.cpp (permutation tiles transposed in registers).
#pragma once

#include "nnc/ir/KernelHelpers.h"
#include "llvm/Emitter.h"

#include <array>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

namespace nnc::llvmcg {

using llvm::IRBuilder;
using llvm::Type;
using llvm::Value;

inline bool isSigned(DType t) {
  return isSignedInteger(t);
}

/// A name in scope: a loop variable (an i64 value) or a local (an alloca of its compute type).
struct Binding {
  Value *value = nullptr;
  Value *slot = nullptr; ///< The local's address (an alloca, or a pointer from a parallel ctx).
  DType type = DType::I64;
};
using Scope = std::map<std::string, Binding>;

/// The lane mask of a row's last vector in the GEMM microkernels: the first `lanes` of `w` lanes
/// on; null when the row fills its last vector (no masking needed).
inline llvm::Value *partialLaneMask(IRBuilder<> &b, unsigned w, unsigned lanes) {
  if (lanes == w)
    return nullptr;
  std::vector<llvm::Constant *> on;
  for (unsigned l = 0; l < w; ++l)
    on.push_back(b.getInt1(l < lanes));
  return llvm::ConstantVector::get(on);
}

inline bool mentionsVar(const kir::Expr &e, const std::string &var) {
  return kir::mentions(e, {var});
}

/// Emits one kernel into a module (emit); errors are kept as the first failure (fail) and
/// returned by emit naming the kernel.
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

  Value *emitConvert(Value *v, DType from, DType to);
  Value *emitStorageCast(Value *v, DType from, const kir::ExprNode &e);
  Value *emitOp(const kir::ExprNode &e);
  Value *emitOpOn(const kir::ExprNode &e, const std::vector<Value *> &a);
  /// The value of a pure integer op `key` (its kind, types and operand values): the one in
  /// values_, else make()'s, remembered in the innermost frame.
  Value *numbered(std::vector<uintptr_t> key, const std::function<Value *()> &make);
  Value *emitPrimitive(const kir::ExprNode &e);
  Value *emitPrimitiveOn(const kir::ExprNode &e, const std::vector<Value *> &a);
  Value *emitExpr(const kir::Expr &e);
  Value *libm(const char *fname, Value *a) {
    bool dbl = a->getType()->isDoubleTy();
    std::string name = dbl ? fname : std::string(fname) + "f";
    return callHelper(name.c_str(), a->getType(), {a});
  }
  Value *unaryIntrinsic(llvm::Intrinsic::ID id, Value *a) { return b_.CreateUnaryIntrinsic(id, a); }
  /// The C99 <math.h> function `name` (Ops.def's libm column, a Call's name) of `a`: LLVM's
  /// intrinsic where it has one (which it folds and vectorizes), else the libm function.
  Value *mathCall(std::string_view name, const std::vector<Value *> &a);

  // ---- Statements ----
  void emitStmt(const kir::Stmt &s);
  void emitFor(const kir::StmtNode &s);
  void emitParallelFor(const kir::StmtNode &s, Value *extent);
  void emitGemmTile(const kir::StmtNode &s);
  /// The A, B and C offsets and the k extent of GemmTile `s` as i64 values, after checking that
  /// its A, B and C buffers have the dtypes `want` and its arguments are the four offsets (and,
  /// with `unitAk`, that A's k stride is 1). False after fail() naming `what` (the tile kind).
  bool gemmTileArgs(const kir::StmtNode &s, const std::array<DType, 3> &want,
                    std::string_view what, bool unitAk, std::array<Value *, 4> &out);
  /// The ConvTile and its f32 microkernel (EmitConvTile.cpp).
  void emitConvTile(const kir::StmtNode &s);
  /// `inner`: the extents of the two inner reduction dims where constant (else -1), made the
  /// function's.
  llvm::Function *convMicrokernel(const kir::ConvTileShape &t,
                                  const std::array<int64_t, 2> &inner);
  /// The u8s8s32 GemmTile (EmitIntGemmTile.cpp).
  void emitIntGemmTile(const kir::StmtNode &s);
  /// The bf16 GemmTile (EmitBf16GemmTile.cpp).
  void emitBf16GemmTile(const kir::StmtNode &s);
  bool emitTransposedTile(const kir::StmtNode &s);
  llvm::Function *gemmMicrokernel(int64_t mr, int64_t nr, bool prefetch, int shift = 0,
                                  int64_t sumEvery = 0);
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
  Value *bufferElement(int buffer, const kir::Expr &index, DType &dtype, bool inBounds = true) {
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
    return inBounds ? b_.CreateInBoundsGEP(storageType(dtype), bufs_[buffer], idx)
                    : b_.CreateGEP(storageType(dtype), bufs_[buffer], idx);
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
  /// Local value numbering of integer and bool ops (index arithmetic, bounds tests): the op,
  /// its types and its operands' values -> the value emitted for them, in frames that follow
  /// the control flow (ValueFrame), so that a value is reused only where its definition
  /// dominates. A kernel's index expressions repeat the same subterms per lane, tap and tile
  /// (a blocked conv's weight and accumulator offsets), and LLVM's passes spent most of a
  /// large kernel's compile time simplifying the copies.
  using ValueKey = std::vector<uintptr_t>;
  std::vector<std::map<ValueKey, Value *>> values_{1};
  /// A frame of values_ for code emitted in blocks that do not dominate what follows them (a
  /// loop body, an if's branches); the values it holds are forgotten when it ends.
  struct ValueFrame {
    explicit ValueFrame(KernelEmitter &e) : e_(e) { e_.values_.emplace_back(); }
    ~ValueFrame() { e_.values_.pop_back(); }
    ValueFrame(const ValueFrame &) = delete;
    ValueFrame &operator=(const ValueFrame &) = delete;
    KernelEmitter &e_;
  };
  /// Locals that some Assign updates; an i64 local that none does (an index bound once) is
  /// its value, not a stack slot, so value numbering sees through it.
  std::set<std::string> assigned_;
  bool inParallel_ = false;
  int outlined_ = 0;
  std::optional<std::string> error_;
};

/// The ISA (the target machine's level and features) and, stated by nnc rather than inherited
/// from LLVM's tuning for a CPU model name, the vector width: the loop vectorizer and the code
/// generator use `cpu`'s full width (LLVM 15 tunes AVX-512 Intel models to prefer 256-bit
/// vectors, which halved the width of every kernel there). Scheduling is LLVM's generic model.
void setTargetAttributes(llvm::Function *f, llvm::TargetMachine &tm, const CpuTarget &cpu);

/// A GemmTile microkernel's function `name` in `m`: internal, returning void, its parameters
/// `params` (name and type, in order; the first three are the A, B and C pointers, marked
/// noalias), with `cpu`'s target attributes.
llvm::Function *
microkernelFunction(llvm::Module &m, llvm::TargetMachine &tm, const CpuTarget &cpu,
                    const std::string &name,
                    const std::vector<std::pair<const char *, llvm::Type *>> &params);

} // namespace nnc::llvmcg
