// The bf16 GemmTile (kir::GemmElems::BF16) and its microkernel (KernelEmitter.h): vdpbf16ps
// (AVX512-BF16) on pairs of k, f32 accumulators.
#include "llvm/KernelEmitter.h"

#include <llvm/IR/IntrinsicsX86.h>

namespace nnc::llvmcg {

namespace {

/// `void bf16_gemm_<mr>x<nr>_avx512bf16(ptr a, ptr b, ptr c, i64 kc, i64 lda, i64 ldb, i64 ldc,
/// i1 accumulate, i64 pfb)`: mr x ceil(nr / 16) accumulators of <16 x float> held in SSA
/// values across the loop over kc / 2 pairs of k. Per pair it loads ceil(nr / 16) vectors of
/// B's pair (16 columns of 2 interleaved bf16 each, one dword per column), and per row one
/// dword of A (the row's 2 bf16 of the pair) broadcast to every lane, then vdpbf16ps: lane j
/// += the 2 products of A's pair and column j's pair, in f32. A partial last vector uses
/// masked loads and stores. The `_pfb<s>` variant also prefetches, per pair g, B's pair row
/// g >> s at element offset pfb (GemmTileShape::prefetchB, prefetchShift: the tile's k step
/// is a pair). One definition per module and variant.
llvm::Function *bf16GemmMicrokernel(llvm::Module &m, llvm::TargetMachine &tm, const CpuTarget &cpu,
                                    int64_t mr, int64_t nr, bool prefetch, int shift) {
  constexpr unsigned w = 16;
  std::string name = fmt::format("bf16_gemm_{}x{}_avx512bf16{}", mr, nr,
                                 prefetch ? fmt::format("_pfb{}", shift) : std::string());
  if (llvm::Function *f = m.getFunction(name))
    return f;
  llvm::LLVMContext &ctx = m.getContext();
  IRBuilder<> b(ctx);
  Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty(), *i32 = b.getInt32Ty(), *i16 = b.getInt16Ty(),
       *f32 = b.getFloatTy();
  llvm::Function *f = microkernelFunction(
      m, tm, cpu, name,
      {{"a", ptr},
       {"b", ptr},
       {"c", ptr},
       {"kc", i64},
       {"lda", i64},
       {"ldb", i64},
       {"ldc", i64},
       {"accumulate", b.getInt1Ty()},
       {"pfb", i64}});
  Value *a = f->getArg(0), *bp = f->getArg(1), *c = f->getArg(2), *kc = f->getArg(3),
        *lda = f->getArg(4), *ldb = f->getArg(5), *ldc = f->getArg(6),
        *accumulate = f->getArg(7), *pfb = f->getArg(8);

  auto *entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto *loop = llvm::BasicBlock::Create(ctx, "k", f);
  auto *exit = llvm::BasicBlock::Create(ctx, "store", f);
  b.SetInsertPoint(entry);
  int64_t nv = (nr + w - 1) / w;
  unsigned lastLanes = static_cast<unsigned>(nr - (nv - 1) * w);
  auto *fty16 = llvm::FixedVectorType::get(f32, w);
  auto *ity16 = llvm::FixedVectorType::get(i32, w);
  Value *lastMask = partialLaneMask(b, w, lastLanes);
  auto cRow = [&](int64_t r, int64_t v) {
    return b.CreateInBoundsGEP(f32, c, b.CreateAdd(b.CreateMul(b.getInt64(r), ldc),
                                                   b.getInt64(v * w)));
  };
  auto loadC = [&](int64_t r, int64_t v) -> Value * {
    Value *zero = llvm::Constant::getNullValue(fty16);
    if (v == nv - 1 && lastMask)
      return b.CreateMaskedLoad(fty16, cRow(r, v), llvm::Align(4), lastMask, zero);
    return b.CreateAlignedLoad(fty16, cRow(r, v), llvm::Align(4));
  };
  std::vector<Value *> init;
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nv; ++v)
      init.push_back(
          b.CreateSelect(accumulate, loadC(r, v), llvm::Constant::getNullValue(fty16)));
  Value *pairs = b.CreateLShr(kc, b.getInt64(1));
  b.CreateCondBr(b.CreateICmpSGT(pairs, b.getInt64(0)), loop, exit);

  b.SetInsertPoint(loop);
  llvm::PHINode *g = b.CreatePHI(i64, 2, "g");
  g->addIncoming(b.getInt64(0), entry);
  std::vector<llvm::PHINode *> acc;
  for (Value *v0 : init) {
    acc.push_back(b.CreatePHI(fty16, 2, "acc"));
    acc.back()->addIncoming(v0, entry);
  }
  // B's pair row g: ldb bf16 elements per pair, a column's 2 values one dword.
  Value *brow = b.CreateInBoundsGEP(i16, bp, b.CreateMul(g, ldb));
  std::vector<Value *> bv;
  for (int64_t v = 0; v < nv; ++v) {
    Value *p = b.CreateInBoundsGEP(i16, brow, b.getInt64(v * w * 2));
    if (v == nv - 1 && lastMask)
      bv.push_back(b.CreateMaskedLoad(ity16, p, llvm::Align(2), lastMask,
                                      llvm::Constant::getNullValue(ity16)));
    else
      bv.push_back(b.CreateAlignedLoad(ity16, p, llvm::Align(2)));
  }
  if (prefetch) {
    // One prefetch per 64-byte line (32 bf16) of the pair row (a hint: never faults).
    Value *from = shift > 0 ? b.CreateInBoundsGEP(
                                  i16, bp, b.CreateMul(b.CreateLShr(g, b.getInt64(shift)), ldb))
                            : brow;
    Value *prow = b.CreateGEP(i16, from, pfb);
    for (int64_t l = 0; l * 32 < 2 * nr; ++l)
      b.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr},
                        {b.CreateGEP(i16, prow, b.getInt64(l * 32)), b.getInt32(0), b.getInt32(3),
                         b.getInt32(1)});
  }
  llvm::Function *dp =
      llvm::Intrinsic::getDeclaration(&m, llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512);
  std::vector<Value *> next(acc.size());
  Value *aCol = b.CreateMul(g, b.getInt64(2));
  for (int64_t r = 0; r < mr; ++r) {
    Value *pa = b.CreateInBoundsGEP(i16, a, b.CreateAdd(b.CreateMul(b.getInt64(r), lda), aCol));
    Value *pair = b.CreateVectorSplat(w, b.CreateAlignedLoad(i32, pa, llvm::Align(2)));
    for (int64_t v = 0; v < nv; ++v) {
      size_t at = static_cast<size_t>(r * nv + v);
      next[at] = b.CreateCall(dp, {acc[at], pair, bv[v]});
    }
  }
  Value *gNext = b.CreateAdd(g, b.getInt64(1), "g.next", /*HasNUW=*/true, /*HasNSW=*/true);
  b.CreateCondBr(b.CreateICmpSLT(gNext, pairs), loop, exit);
  g->addIncoming(gNext, loop);
  for (size_t i = 0; i < acc.size(); ++i)
    acc[i]->addIncoming(next[i], loop);

  b.SetInsertPoint(exit);
  std::vector<Value *> sums;
  for (size_t i = 0; i < acc.size(); ++i) {
    llvm::PHINode *sum = b.CreatePHI(fty16, 2, "sum");
    sum->addIncoming(init[i], entry);
    sum->addIncoming(next[i], loop);
    sums.push_back(sum);
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nv; ++v) {
      Value *sum = sums[static_cast<size_t>(r * nv + v)];
      if (v == nv - 1 && lastMask)
        b.CreateMaskedStore(sum, cRow(r, v), llvm::Align(4), lastMask);
      else
        b.CreateAlignedStore(sum, cRow(r, v), llvm::Align(4));
    }
  b.CreateRetVoid();
  return f;
}

} // namespace

void KernelEmitter::emitBf16GemmTile(const kir::StmtNode &s) {
  const kir::GemmTileShape &t = s.tile;
  if (!cpu_.avx512bf16 || cpu_.vectorBits < 512) {
    fail("bf16 gemm_tile for CPU target {}, which lacks AVX512-BF16 on 512-bit vectors",
         cpu_.levelName());
    return;
  }
  std::array<Value *, 4> v;
  if (!gemmTileArgs(s, {DType::BF16, DType::BF16, DType::F32}, "bf16 gemm_tile",
                    /*unitAk=*/true, v))
    return;
  Value *pa = b_.CreateInBoundsGEP(b_.getInt16Ty(), bufs_[t.a], v[0]);
  Value *pb = b_.CreateInBoundsGEP(b_.getInt16Ty(), bufs_[t.b], v[1]);
  Value *pc = b_.CreateInBoundsGEP(b_.getFloatTy(), bufs_[s.buffer], v[2]);
  b_.CreateCall(bf16GemmMicrokernel(m_, tm_, cpu_, t.mr, t.nr, t.prefetchB != 0, t.prefetchShift),
                {pa, pb, pc, v[3], b_.getInt64(t.lda), b_.getInt64(t.ldb), b_.getInt64(t.ldc),
                 b_.getInt1(t.accumulate), b_.getInt64(t.prefetchB)});
}

} // namespace nnc::llvmcg
