// Kernel IR statements -> LLVM IR: blocks, stores, conditions, loops with their metadata, and
// parallel loops outlined for the runtime's parallel-for (KernelEmitter.h).
#include "llvm/KernelEmitter.h"

#include <functional>
#include <set>

namespace nnc::llvmcg {
namespace {

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
    case kir::StmtKind::ConvTile:
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

} // namespace

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
  case kir::StmtKind::ConvTile:
    emitConvTile(s);
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
  case kir::StmtKind::Prefetch: {
    // Its address only, not an inbounds one: a prefetch past the buffer's end does not fault.
    DType dt;
    Value *p = bufferElement(s.buffer, s.index, dt, /*inBounds=*/false);
    if (!p)
      return;
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                       {p, b_.getInt32(s.write ? 1 : 0), b_.getInt32(3), b_.getInt32(1)});
    return;
  }
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
    // A local bound once is its value (i64 indices, float operands; a parallel body's
    // context carries either as such).
    if (!assigned_.count(s.name) && (s.type == DType::I64 || t->isFloatingPointTy())) {
      Value *v = emitExpr(s.value);
      if (error_)
        return;
      if (v->getType() != t) {
        fail("local '{}' of {} initialized with {}", s.name, dtypeName(s.type),
             printExpr(s.value));
        return;
      }
      scope_[s.name] = Binding{v, nullptr, s.type};
      return;
    }
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
      ValueFrame frame(*this);
      Scope saved = scope_;
      if (!s.body.empty())
        emitStmt(s.body[0]);
      scope_ = std::move(saved);
    }
    b_.CreateBr(join);
    if (elseB) {
      b_.SetInsertPoint(elseB);
      ValueFrame frame(*this);
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
    // A short loop (at most 4 vectors) with a remainder of 2 or more iterations (24 channels
    // in vectors of 16) runs the remainder masked in its last vector instead of as that many
    // scalar copies of the body, which for a requantizing epilogue of a few dozen operations
    // cost more than the vector part. Only with AVX-512, whose masked loads and stores of
    // every element width are single instructions (AVX2 has none for bytes, and its masked
    // version measured slower). A long loop keeps its scalar remainder: predication masks
    // every iteration, and a masked store cannot be a streaming one.
    if (cpu_.level == CpuTarget::Level::V4 && constExtent && n % w >= 2 && n <= 4 * w)
      flag("llvm.loop.vectorize.predicate.enable", i1(true));
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
  {
    ValueFrame frame(*this);
    for (const kir::Stmt &c : body)
      emitStmt(c);
  }
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
  // A value is passed as i64 (an integer) or as itself (a float local bound once).
  auto fieldType = [&](const Binding &bd) -> Type * {
    if (bd.slot)
      return ptr;
    return bd.value->getType()->isIntegerTy() ? i64 : bd.value->getType();
  };
  for (auto &[name, bd] : captured)
    fields.push_back(fieldType(bd));
  llvm::StructType *ctxTy = llvm::StructType::get(c_, fields);
  llvm::AllocaInst *ctx = entryAlloca(ctxTy, s.name + ".ctx");
  b_.CreateStore(buffersArg_, b_.CreateStructGEP(ctxTy, ctx, 0));
  for (size_t i = 0; i < captured.size(); ++i) {
    const Binding &bd = captured[i].second;
    Value *v = bd.slot ? static_cast<Value *>(bd.slot) : bd.value;
    if (!bd.slot && v->getType()->isIntegerTy() && !v->getType()->isIntegerTy(64))
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
  // The body is another function: none of this one's values.
  std::vector<std::map<ValueKey, Value *>> savedValues = std::move(values_);
  values_.assign(1, {});
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
    Value *v = b_.CreateLoad(fields[i + 1], b_.CreateStructGEP(ctxTy, ctxArg, i + 1),
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
  values_ = std::move(savedValues);
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

} // namespace nnc::llvmcg
