// The LLVM emitter's entry points (Emitter.h): each kernel's function, the module and its
// verification, and the streaming stores marked after optimization. The kernel walker, and the
// semantics it keeps, are KernelEmitter.h.
#include "llvm/KernelEmitter.h"

#include <llvm/ADT/Triple.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

namespace nnc::llvmcg {

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
  std::function<void(const kir::Stmt &)> visit = [&](const kir::Stmt &st) {
    if (!st)
      return;
    if (st->kind == kir::StmtKind::Assign)
      assigned_.insert(st->name);
    for (const kir::Stmt &c : st->body)
      visit(c);
  };
  visit(body);
  emitStmt(body);
  b_.CreateRetVoid();
  if (error_)
    return makeError("kernel {}: {}", k_.name, *error_);
  return Error::success();
}
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
