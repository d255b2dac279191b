// The GemmTile statement and the f32 GEMM microkernel it calls (KernelEmitter.h).
#include "llvm/KernelEmitter.h"

namespace nnc::llvmcg {

bool KernelEmitter::gemmTileArgs(const kir::StmtNode &s, const std::array<DType, 3> &want,
                                 std::string_view what, bool unitAk,
                                 std::array<Value *, 4> &out) {
  const kir::GemmTileShape &t = s.tile;
  const int operands[3] = {t.a, t.b, s.buffer};
  for (int o = 0; o < 3; ++o) {
    int b = operands[o];
    if (b < 0 || b >= static_cast<int>(k_.buffers.size()) || k_.buffers[b].dtype != want[o]) {
      fail("{} on buffer {}, which is not a buffer of the kernel of dtype {}", what, b,
           dtypeName(want[o]));
      return false;
    }
  }
  if (s.args.size() != 4 || (unitAk && t.ak != 1)) {
    fail("{} without A, B, C offsets and a k extent{}", what, unitAk ? ", or with ak != 1" : "");
    return false;
  }
  for (size_t i = 0; i < 4; ++i) {
    out[i] = emitExpr(s.args[i]);
    if (error_)
      return false;
    if (!out[i]->getType()->isIntegerTy(64)) {
      fail("gemm_tile offset {} is not i64", printExpr(s.args[i]));
      return false;
    }
  }
  return true;
}

llvm::Function *
microkernelFunction(llvm::Module &m, llvm::TargetMachine &tm, const CpuTarget &cpu,
                    const std::string &name,
                    const std::vector<std::pair<const char *, llvm::Type *>> &params) {
  std::vector<llvm::Type *> types;
  for (const auto &p : params)
    types.push_back(p.second);
  auto *fty = llvm::FunctionType::get(llvm::Type::getVoidTy(m.getContext()), types, false);
  llvm::Function *f = llvm::Function::Create(fty, llvm::Function::InternalLinkage, name, m);
  setTargetAttributes(f, tm, cpu);
  for (unsigned i = 0; i < params.size(); ++i)
    f->getArg(i)->setName(params[i].first);
  for (unsigned i = 0; i < 3; ++i)
    f->addParamAttr(i, llvm::Attribute::NoAlias);
  return f;
}

void KernelEmitter::emitGemmTile(const kir::StmtNode &s) {
  const kir::GemmTileShape &t = s.tile;
  if (t.elems == kir::GemmElems::BF16)
    return emitBf16GemmTile(s);
  if (t.elems != kir::GemmElems::F32)
    return emitIntGemmTile(s);
  std::array<Value *, 4> v;
  if (!gemmTileArgs(s, {DType::F32, DType::F32, DType::F32}, "gemm_tile", false, v))
    return;
  Type *f32 = b_.getFloatTy();
  Value *pa = b_.CreateInBoundsGEP(f32, bufs_[t.a], v[0]);
  Value *pb = b_.CreateInBoundsGEP(f32, bufs_[t.b], v[1]);
  Value *pc = b_.CreateInBoundsGEP(f32, bufs_[s.buffer], v[2]);
  b_.CreateCall(gemmMicrokernel(t.mr, t.nr, t.prefetchB != 0, t.prefetchShift, t.sumEvery),
                {pa, pb, pc, v[3], b_.getInt64(t.lda), b_.getInt64(t.ak), b_.getInt64(t.ldb),
                 b_.getInt64(t.ldc), b_.getInt1(t.accumulate), b_.getInt64(t.prefetchB)});
}
/// `void f32_gemm_<mr>x<nr>_<isa>(ptr a, ptr b, ptr c, i64 kc, i64 lda, i64 ak, i64 ldb,
/// i64 ldc, i1 accumulate, i64 pfb)`: the GemmTile microkernel with mr x ceil(nr / W) accumulators
/// of <W x float> (W: the target's f32 lanes) held in SSA values across the k loop; per k step it
/// loads ceil(nr / W) vectors of B's row, broadcasts one A value per row and multiply-adds
/// (llvm.fmuladd: an FMA where the target has one). A partial last vector uses masked loads
/// and stores. The `_pfb<s>` variant also prefetches, per k step p, the B row at element offset
/// pfb from row p >> s (GemmTileShape::prefetchB, prefetchShift). The `_s<n>` variant sums in
/// runs of n k steps (GemmTileShape::sumEvery): its accumulators start each run at zero and
/// the run's end adds them to C (to zero on the first run without `accumulate`). One
/// definition per module and variant.
llvm::Function *KernelEmitter::gemmMicrokernel(int64_t mr, int64_t nr, bool prefetch, int shift,
                                               int64_t sumEvery) {
  unsigned w = static_cast<unsigned>(cpu_.f32Lanes());
  const char *isa = cpu_.level == CpuTarget::Level::V4   ? "avx512"
                    : cpu_.level == CpuTarget::Level::V3 ? "avx2"
                                                         : "vec4";
  std::string name = fmt::format("f32_gemm_{}x{}_{}{}{}", mr, nr, isa,
                                 prefetch ? fmt::format("_pfb{}", shift) : std::string(),
                                 sumEvery > 0 ? fmt::format("_s{}", sumEvery) : std::string());
  if (llvm::Function *f = m_.getFunction(name))
    return f;
  Type *ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty(), *f32 = b_.getFloatTy();
  llvm::Function *f = microkernelFunction(m_, tm_, cpu_, name,
                                          {{"a", ptr},
                                           {"b", ptr},
                                           {"c", ptr},
                                           {"kc", i64},
                                           {"lda", i64},
                                           {"ak", i64},
                                           {"ldb", i64},
                                           {"ldc", i64},
                                           {"accumulate", b_.getInt1Ty()},
                                           {"pfb", i64}});
  Value *a = f->getArg(0), *bp = f->getArg(1), *c = f->getArg(2), *kc = f->getArg(3),
        *lda = f->getArg(4), *ak = f->getArg(5), *ldb = f->getArg(6), *ldc = f->getArg(7),
        *accumulate = f->getArg(8), *pfb = f->getArg(9);

  IRBuilder<> b(c_);
  auto *entry = llvm::BasicBlock::Create(c_, "entry", f);
  b.SetInsertPoint(entry);
  int64_t nv = (nr + w - 1) / w;
  unsigned lastLanes = static_cast<unsigned>(nr - (nv - 1) * w);
  auto *vty = llvm::FixedVectorType::get(f32, w);
  Value *zero = llvm::Constant::getNullValue(vty);
  Value *lastMask = partialLaneMask(b, w, lastLanes);
  llvm::Align align(4);
  auto loadVec = [&](Value *p, int64_t v) -> Value * {
    if (v == nv - 1 && lastMask)
      return b.CreateMaskedLoad(vty, p, align, lastMask, zero);
    return b.CreateAlignedLoad(vty, p, align);
  };
  // Accumulator i = r * nv + v's place in C.
  auto cAt = [&](int64_t r, int64_t v) {
    Value *row = b.CreateInBoundsGEP(f32, c, b.CreateMul(b.getInt64(r), ldc));
    return b.CreateInBoundsGEP(f32, row, b.getInt64(v * w));
  };
  auto storeVec = [&](Value *x, Value *p, int64_t v) {
    if (v == nv - 1 && lastMask)
      b.CreateMaskedStore(x, p, align, lastMask);
    else
      b.CreateAlignedStore(x, p, align);
  };
  const size_t nacc = static_cast<size_t>(mr * nv);
  // The k loop over [from, to) on accumulators starting at `init` (one per accumulator,
  // defined in `pred`, the block that enters it); returns their sums, defined in the block
  // the builder is left in (the loop's exit).
  auto kLoop = [&](llvm::BasicBlock *pred, Value *from, Value *to,
                   const std::vector<Value *> &init) {
    auto *loop = llvm::BasicBlock::Create(c_, "k", f);
    auto *exit = llvm::BasicBlock::Create(c_, "k.end", f);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    llvm::PHINode *kv = b.CreatePHI(i64, 2, "p");
    kv->addIncoming(from, pred);
    std::vector<llvm::PHINode *> acc;
    for (size_t i = 0; i < nacc; ++i) {
      acc.push_back(b.CreatePHI(vty, 2, "acc"));
      acc.back()->addIncoming(init[i], pred);
    }
    Value *brow = b.CreateInBoundsGEP(f32, bp, b.CreateMul(kv, ldb));
    std::vector<Value *> bv;
    for (int64_t v = 0; v < nv; ++v)
      bv.push_back(loadVec(b.CreateInBoundsGEP(f32, brow, b.getInt64(v * w)), v));
    if (prefetch) {
      // One prefetch per 64-byte line of the row (a hint: never faults, so no bounds).
      Value *from = brow;
      if (shift > 0)
        from =
            b.CreateInBoundsGEP(f32, bp, b.CreateMul(b.CreateLShr(kv, b.getInt64(shift)), ldb));
      Value *prow = b.CreateGEP(f32, from, pfb);
      for (int64_t l = 0; l * 16 < nr; ++l)
        b.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr},
                          {b.CreateGEP(f32, prow, b.getInt64(l * 16)), b.getInt32(0),
                           b.getInt32(3), b.getInt32(1)});
    }
    Value *acol = b.CreateInBoundsGEP(f32, a, b.CreateMul(kv, ak));
    std::vector<Value *> next(nacc);
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
    for (size_t i = 0; i < nacc; ++i)
      acc[i]->addIncoming(next[i], loop);
    b.CreateCondBr(b.CreateICmpSLT(kn, to), loop, exit);
    b.SetInsertPoint(exit);
    return next;
  };
  auto *done = llvm::BasicBlock::Create(c_, "done", f);
  if (sumEvery <= 0) {
    // One chain per accumulator from its initial value, C's or zero.
    std::vector<Value *> init;
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t v = 0; v < nv; ++v)
        init.push_back(b.CreateSelect(accumulate, loadVec(cAt(r, v), v), zero));
    auto *body = llvm::BasicBlock::Create(c_, "body", f);
    auto *none = llvm::BasicBlock::Create(c_, "none", f);
    b.CreateCondBr(b.CreateICmpSGT(kc, b.getInt64(0)), body, none);
    b.SetInsertPoint(none);
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t v = 0; v < nv; ++v)
        storeVec(init[static_cast<size_t>(r * nv + v)], cAt(r, v), v);
    b.CreateBr(done);
    b.SetInsertPoint(body);
    std::vector<Value *> sums = kLoop(body, b.getInt64(0), kc, init);
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t v = 0; v < nv; ++v)
        storeVec(sums[static_cast<size_t>(r * nv + v)], cAt(r, v), v);
    b.CreateBr(done);
  } else {
    // Runs of sumEvery k steps, each summed from zero and then added to C: the first run to
    // C's value (accumulate) or zero, later runs to C's running sum.
    auto *none = llvm::BasicBlock::Create(c_, "none", f);
    auto *run = llvm::BasicBlock::Create(c_, "run", f);
    b.CreateCondBr(b.CreateICmpSGT(kc, b.getInt64(0)), run, none);
    b.SetInsertPoint(none);
    auto *clear = llvm::BasicBlock::Create(c_, "clear", f);
    b.CreateCondBr(accumulate, done, clear);
    b.SetInsertPoint(clear);
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t v = 0; v < nv; ++v)
        storeVec(zero, cAt(r, v), v);
    b.CreateBr(done);
    b.SetInsertPoint(run);
    llvm::PHINode *q = b.CreatePHI(i64, 2, "run.from");
    q->addIncoming(b.getInt64(0), entry);
    Value *end = b.CreateAdd(q, b.getInt64(sumEvery), "run.to", true, true);
    Value *to = b.CreateSelect(b.CreateICmpSLT(end, kc), end, kc);
    std::vector<Value *> sums = kLoop(run, q, to, std::vector<Value *>(nacc, zero));
    Value *fresh = b.CreateAnd(b.CreateICmpEQ(q, b.getInt64(0)), b.CreateNot(accumulate));
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t v = 0; v < nv; ++v) {
        Value *p = cAt(r, v);
        Value *before = b.CreateSelect(fresh, zero, loadVec(p, v));
        storeVec(b.CreateFAdd(before, sums[static_cast<size_t>(r * nv + v)]), p, v);
      }
    q->addIncoming(to, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpSLT(to, kc), run, done);
  }
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  return f;
}

} // namespace nnc::llvmcg
