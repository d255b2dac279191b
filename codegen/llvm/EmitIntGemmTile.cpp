// The u8s8s32 GemmTile (kir::GemmElems::U8S8S32) and its microkernels (KernelEmitter.h):
// vpdpbusd where the target has an int8 dot product (AVX512-VNNI, AVX-VNNI), else 16-bit
// multiply-adds of the widened bytes (AVX2, AVX-512 without VNNI, SSE2).
#include "llvm/KernelEmitter.h"

#include <llvm/IR/IntrinsicsX86.h>

namespace nnc::llvmcg {

namespace {

/// `void u8s8s32_gemm_<mr>x<nr>_<isa>(ptr a, ptr b, ptr c, i64 kc, i64 lda, i64 ldb, i64 ldc,
/// i1 accumulate)`: mr x ceil(nr / W) accumulators of <W x i32> held in SSA values across the
/// loop over kc / 4 groups of k. Per group it loads ceil(nr / W) vectors of B's group (W
/// columns of 4 interleaved bytes each), and per row one dword of A (the row's 4 bytes of the
/// group) broadcast to every lane, then:
///  - with an int8 dot product (cpu.int8DotBits()): vpdpbusd, lane j += the 4 products of A's
///    unsigned bytes and column j's signed bytes;
///  - else: the bytes widened to i16 (A zero-extended, B sign-extended) and pmaddwd, each lane
///    the sum of two products. Not vpmaddubsw, which sums its pairs of u8 x s8 products in
///    saturating i16: 255 * 127 * 2 = 64770 exceeds 32767, so it would silently clamp;
///    pmaddwd's i16 products summed in i32 are exact. Each B vector then yields two of these
///    (the columns of its low and high half, two partial sums per column), added pairwise
///    into the columns' sums once, after the loop.
/// The i32 additions wrap, as the tile's sum is defined to. A partial last vector uses masked
/// loads and stores. One definition per module and variant.
llvm::Function *intGemmMicrokernel(llvm::Module &m, llvm::TargetMachine &tm, const CpuTarget &cpu,
                                   int64_t mr, int64_t nr) {
  int dot = cpu.int8DotBits();
  int bits = dot ? dot : cpu.vectorBits;
  unsigned w = static_cast<unsigned>(bits / 32);
  const char *isa = dot == 512         ? "avx512vnni"
                    : dot == 256       ? "avxvnni"
                    : bits == 512      ? "avx512"
                    : bits == 256      ? "avx2"
                                       : "sse2";
  std::string name = fmt::format("u8s8s32_gemm_{}x{}_{}", mr, nr, isa);
  if (llvm::Function *f = m.getFunction(name))
    return f;
  llvm::LLVMContext &ctx = m.getContext();
  IRBuilder<> b(ctx);
  Type *ptr = b.getPtrTy(), *i64 = b.getInt64Ty(), *i32 = b.getInt32Ty(), *i8 = b.getInt8Ty(),
       *i16 = b.getInt16Ty();
  llvm::Function *f = microkernelFunction(
      m, tm, cpu, name,
      {{"a", ptr},
       {"b", ptr},
       {"c", ptr},
       {"kc", i64},
       {"lda", i64},
       {"ldb", i64},
       {"ldc", i64},
       {"accumulate", b.getInt1Ty()}});
  Value *a = f->getArg(0), *bp = f->getArg(1), *c = f->getArg(2), *kc = f->getArg(3),
        *lda = f->getArg(4), *ldb = f->getArg(5), *ldc = f->getArg(6),
        *accumulate = f->getArg(7);

  auto *entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto *loop = llvm::BasicBlock::Create(ctx, "k", f);
  auto *exit = llvm::BasicBlock::Create(ctx, "store", f);
  b.SetInsertPoint(entry);
  int64_t nv = (nr + w - 1) / w;
  unsigned lastLanes = static_cast<unsigned>(nr - (nv - 1) * w);
  auto *vty = llvm::FixedVectorType::get(i32, w);
  Value *zero = llvm::Constant::getNullValue(vty);
  Value *lastMask = partialLaneMask(b, w, lastLanes);
  auto loadVec = [&](Value *p, int64_t v) -> Value * {
    if (v == nv - 1 && lastMask)
      return b.CreateMaskedLoad(vty, p, llvm::Align(1), lastMask, zero);
    return b.CreateAlignedLoad(vty, p, llvm::Align(1));
  };
  auto cRow = [&](int64_t r, int64_t v) {
    return b.CreateInBoundsGEP(i32, c, b.CreateAdd(b.CreateMul(b.getInt64(r), ldc),
                                                   b.getInt64(v * w)));
  };
  // Accumulators: C's values or zero (dot product); two pair-sum vectors per C vector from
  // zero (widened path, C added at the end).
  int64_t perVec = dot ? 1 : 2;
  std::vector<Value *> init;
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nv; ++v) {
      if (dot)
        init.push_back(b.CreateSelect(accumulate, loadVec(cRow(r, v), v), zero));
      else
        init.insert(init.end(), 2, zero);
    }
  Value *groups = b.CreateLShr(kc, b.getInt64(2));
  b.CreateCondBr(b.CreateICmpSGT(groups, b.getInt64(0)), loop, exit);

  b.SetInsertPoint(loop);
  llvm::PHINode *g = b.CreatePHI(i64, 2, "g");
  g->addIncoming(b.getInt64(0), entry);
  std::vector<llvm::PHINode *> acc;
  for (Value *v0 : init) {
    acc.push_back(b.CreatePHI(vty, 2, "acc"));
    acc.back()->addIncoming(v0, entry);
  }
  Value *brow = b.CreateInBoundsGEP(i8, bp, b.CreateMul(g, ldb));
  std::vector<Value *> bv;
  for (int64_t v = 0; v < nv; ++v)
    bv.push_back(loadVec(b.CreateInBoundsGEP(i8, brow, b.getInt64(v * w * 4)), v));
  // Widened path: each B vector's low and high halves as <2W x i16>, signed.
  auto *bytes = llvm::FixedVectorType::get(i8, 4 * w);
  auto *words = llvm::FixedVectorType::get(i16, 2 * w);
  std::vector<Value *> bHalf;
  if (!dot)
    for (int64_t v = 0; v < nv; ++v) {
      Value *by = b.CreateBitCast(bv[v], bytes);
      for (unsigned h = 0; h < 2; ++h) {
        std::vector<int> idx;
        for (unsigned l = 0; l < 2 * w; ++l)
          idx.push_back(static_cast<int>(h * 2 * w + l));
        bHalf.push_back(b.CreateSExt(b.CreateShuffleVector(by, idx), words));
      }
    }
  llvm::Intrinsic::ID op = dot == 512    ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                           : dot == 256  ? llvm::Intrinsic::x86_avx512_vpdpbusd_256
                           : bits == 512 ? llvm::Intrinsic::x86_avx512_pmaddw_d_512
                           : bits == 256 ? llvm::Intrinsic::x86_avx2_pmadd_wd
                                         : llvm::Intrinsic::x86_sse2_pmadd_wd;
  llvm::Function *opFn = llvm::Intrinsic::getDeclaration(&m, op);
  std::vector<Value *> next(acc.size());
  Value *aCol = b.CreateMul(g, b.getInt64(4));
  for (int64_t r = 0; r < mr; ++r) {
    Value *pa = b.CreateInBoundsGEP(i8, a, b.CreateAdd(b.CreateMul(b.getInt64(r), lda), aCol));
    Value *dw = b.CreateAlignedLoad(i32, pa, llvm::Align(1));
    Value *aArg;
    if (dot) {
      aArg = b.CreateVectorSplat(w, dw);
    } else {
      // The row's 4 bytes zero-extended, repeated across the 2W words.
      Value *a4 = b.CreateZExt(b.CreateBitCast(dw, llvm::FixedVectorType::get(i8, 4)),
                               llvm::FixedVectorType::get(i16, 4));
      std::vector<int> idx;
      for (unsigned l = 0; l < 2 * w; ++l)
        idx.push_back(static_cast<int>(l % 4));
      aArg = b.CreateShuffleVector(a4, idx);
    }
    for (int64_t v = 0; v < nv; ++v) {
      size_t at = static_cast<size_t>((r * nv + v) * perVec);
      if (dot) {
        next[at] = b.CreateCall(opFn, {acc[at], aArg, bv[v]});
      } else {
        for (unsigned h = 0; h < 2; ++h)
          next[at + h] = b.CreateAdd(acc[at + h], b.CreateCall(opFn, {aArg, bHalf[v * 2 + h]}));
      }
    }
  }
  Value *gNext = b.CreateAdd(g, b.getInt64(1), "g.next", /*HasNUW=*/true, /*HasNSW=*/true);
  b.CreateCondBr(b.CreateICmpSLT(gNext, groups), loop, exit);
  g->addIncoming(gNext, loop);
  for (size_t i = 0; i < acc.size(); ++i)
    acc[i]->addIncoming(next[i], loop);

  b.SetInsertPoint(exit);
  std::vector<llvm::PHINode *> fin;
  for (size_t i = 0; i < acc.size(); ++i) {
    fin.push_back(b.CreatePHI(vty, 2));
    fin.back()->addIncoming(init[i], entry);
    fin.back()->addIncoming(next[i], loop);
  }
  std::vector<int> evens, odds;
  for (unsigned l = 0; l < w; ++l) {
    evens.push_back(static_cast<int>(2 * l));
    odds.push_back(static_cast<int>(2 * l + 1));
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nv; ++v) {
      size_t at = static_cast<size_t>((r * nv + v) * perVec);
      Value *sum = fin[at];
      if (!dot) {
        // Lanes 2i and 2i+1 of the low half's vector are column i's two partial sums (i < W/2),
        // those of the high half's vector column W/2 + i's.
        Value *lo = fin[at], *hi = fin[at + 1];
        sum = b.CreateAdd(b.CreateShuffleVector(lo, hi, evens),
                          b.CreateShuffleVector(lo, hi, odds));
        sum = b.CreateAdd(sum, b.CreateSelect(accumulate, loadVec(cRow(r, v), v), zero));
      }
      Value *p = cRow(r, v);
      if (v == nv - 1 && lastMask)
        b.CreateMaskedStore(sum, p, llvm::Align(1), lastMask);
      else
        b.CreateAlignedStore(sum, p, llvm::Align(1));
    }
  b.CreateRetVoid();
  return f;
}

} // namespace

void KernelEmitter::emitIntGemmTile(const kir::StmtNode &s) {
  const kir::GemmTileShape &t = s.tile;
  std::array<Value *, 4> v;
  if (!gemmTileArgs(s, {DType::U8, DType::I8, DType::I32}, "u8s8s32 gemm_tile",
                    /*unitAk=*/true, v))
    return;
  Value *pa = b_.CreateInBoundsGEP(b_.getInt8Ty(), bufs_[t.a], v[0]);
  Value *pb = b_.CreateInBoundsGEP(b_.getInt8Ty(), bufs_[t.b], v[1]);
  Value *pc = b_.CreateInBoundsGEP(b_.getInt32Ty(), bufs_[s.buffer], v[2]);
  b_.CreateCall(intGemmMicrokernel(m_, tm_, cpu_, t.mr, t.nr),
                {pa, pb, pc, v[3], b_.getInt64(t.lda), b_.getInt64(t.ldb), b_.getInt64(t.ldc),
                 b_.getInt1(t.accumulate)});
}

} // namespace nnc::llvmcg
