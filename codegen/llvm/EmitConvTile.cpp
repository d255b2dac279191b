// The ConvTile statement and the direct-convolution microkernel it calls (KernelEmitter.h):
// f32 (fused multiply-adds) or bf16 (vdpbf16ps on pairs of input lanes, f32 sums).
#include "llvm/KernelEmitter.h"

#include <llvm/IR/IntrinsicsX86.h>

namespace nnc::llvmcg {

namespace {

/// A counted loop `for (i = 0; i < n; ++i) body(i)` at b's insertion point of `f`, skipped
/// when n <= 0; b continues after it.
void countedLoop(IRBuilder<> &b, llvm::Function *f, Value *n, const char *name,
                 const std::function<void(Value *)> &body) {
  llvm::LLVMContext &c = f->getContext();
  llvm::BasicBlock *pre = b.GetInsertBlock();
  auto *head = llvm::BasicBlock::Create(c, name, f);
  auto *exit = llvm::BasicBlock::Create(c, std::string(name) + ".end", f);
  b.CreateCondBr(b.CreateICmpSGT(n, b.getInt64(0)), head, exit);
  b.SetInsertPoint(head);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, name);
  i->addIncoming(b.getInt64(0), pre);
  body(i);
  Value *next = b.CreateAdd(i, b.getInt64(1), std::string(name) + ".next", true, true);
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(next, n), head, exit);
  b.SetInsertPoint(exit);
}

} // namespace

void KernelEmitter::emitConvTile(const kir::StmtNode &s) {
  const kir::ConvTileShape &t = s.conv;
  const bool bf16 = t.elems == kir::GemmElems::BF16;
  if (t.elems != kir::GemmElems::F32 && !bf16) {
    fail("{} conv_tile: only f32 and bf16 tiles have a microkernel", kir::gemmElemsName(t.elems));
    return;
  }
  if (bf16 && (!cpu_.avx512bf16 || cpu_.vectorBits < 512 || t.lanes != 16 || t.depthwise ||
               t.ws[3] != t.lanes)) {
    fail("bf16 conv_tile {}x{}x{}{} for CPU target {}: it needs AVX512-BF16, 16 lanes and "
         "pairs of input lanes in W",
         t.cols, t.blocks, t.lanes, t.depthwise ? " depthwise" : "", cpu_.levelName());
    return;
  }
  std::vector<int> operands{t.x, t.w, s.buffer};
  if (t.init >= 0)
    operands.push_back(t.init);
  for (int b : operands) {
    DType want = bf16 && (b == t.x || b == t.w) ? DType::BF16 : DType::F32;
    if (b < 0 || b >= static_cast<int>(k_.buffers.size()) || k_.buffers[b].dtype != want) {
      fail("conv_tile on buffer {}, which is not an {} buffer of the kernel", b,
           dtypeName(want));
      return;
    }
  }
  if (s.args.size() != 8) {
    fail("conv_tile without X, W, C and init offsets and four reduction extents");
    return;
  }
  std::array<Value *, 8> v;
  for (size_t i = 0; i < 8; ++i) {
    v[i] = emitExpr(s.args[i]);
    if (error_)
      return;
    if (!v[i]->getType()->isIntegerTy(64)) {
      fail("conv_tile argument {} is not i64", printExpr(s.args[i]));
      return;
    }
  }
  if (!t.kwCols.empty() && (s.args[6]->kind != kir::ExprKind::IntImm ||
                           s.args[6]->intValue != static_cast<int64_t>(t.kwCols.size()))) {
    fail("conv_tile with column windows over a kernel-column extent other than theirs");
    return;
  }
  Type *f32 = b_.getFloatTy(), *xw = bf16 ? b_.getInt16Ty() : f32;
  Value *px = b_.CreateGEP(xw, bufs_[t.x], v[0]); // an edge tile's may lie before X
  Value *pw = b_.CreateInBoundsGEP(xw, bufs_[t.w], v[1]);
  Value *pc = b_.CreateInBoundsGEP(f32, bufs_[s.buffer], v[2]);
  // Without initial values the tile reads C's own elements (never used) in their place.
  bool init = t.init >= 0;
  Value *pi = init ? b_.CreateInBoundsGEP(f32, bufs_[t.init], v[3]) : pc;
  auto i64 = [&](int64_t x) { return b_.getInt64(x); };
  // Constant extents of the two inner reduction dims (kernel columns, input lanes) are the
  // function's own, so that LLVM unrolls those loops (or drops a loop of one) once in the
  // shared function; -1: an argument.
  std::array<int64_t, 2> inner;
  for (int d = 0; d < 2; ++d) {
    const kir::Expr &e = s.args[6 + d];
    inner[d] = e->kind == kir::ExprKind::IntImm ? std::max<int64_t>(e->intValue, 0) : -1;
  }
  b_.CreateCall(convMicrokernel(t, inner),
                {px, pw, pc, pi, v[4], v[5], v[6], v[7], i64(t.xs[0]), i64(t.ws[0]),
                 i64(t.xs[1]), i64(t.ws[1]), i64(t.xs[2]), i64(t.ws[2]), i64(t.ccol),
                 i64(t.cblk), i64(init ? t.icol : t.ccol), i64(init ? t.iblk : t.cblk),
                 b_.getInt1(init)});
}

/// `void f32_conv_<cols>x<blocks>x<lanes>[_dw]_c<xcol>_b<wblk>_k<xs3>_<ws3>_<isa>(ptr x, ptr w,
/// ptr c, ptr init, i64 n0..n3, i64 xs0, ws0, xs1, ws1, xs2, ws2, i64 ccol, cblk, icol, iblk,
/// i1 hasInit)`: the ConvTile microkernel with blocks x cols accumulators of <lanes x float>
/// (locals that SROA keeps in registers across the reduction's loops). Per innermost step it
/// loads the blocks' weight vectors and, per column, broadcasts one input value (depthwise:
/// loads the column's input vector) and multiply-adds (llvm.fmuladd). The strides that the
/// innermost step uses (the column, block and innermost reduction strides) are constants of
/// the function, so its addresses are immediate offsets; the outer strides are arguments.
/// bf16 (`bf16_conv_..._avx512bf16`): X and W are bf16 (i16) and the innermost step is a pair
/// of input lanes: one dword of X (the pair) broadcast, one <16 x i32> of W per block (16
/// output lanes' pairs), vdpbf16ps into the f32 accumulators; n3 counts lanes (even).
/// One definition per module and variant.
llvm::Function *KernelEmitter::convMicrokernel(const kir::ConvTileShape &t,
                                               const std::array<int64_t, 2> &inner) {
  const bool bf16 = t.elems == kir::GemmElems::BF16;
  const char *isa = bf16                                 ? "avx512bf16"
                    : cpu_.level == CpuTarget::Level::V4 ? "avx512"
                    : cpu_.level == CpuTarget::Level::V3 ? "avx2"
                                                         : "vec4";
  std::string name =
      fmt::format("{}_conv_{}x{}x{}{}_c{}_b{}_k{}_{}{}{}_{}", kir::gemmElemsName(t.elems), t.cols,
                  t.blocks, t.lanes,
                  t.depthwise ? "_dw" : "", t.xcol, t.wblk, t.xs[3], t.ws[3],
                  inner[0] >= 0 ? fmt::format("_kw{}x{}_{}", inner[0], t.xs[2], t.ws[2])
                                : std::string(),
                  inner[1] >= 0 ? fmt::format("_n{}", inner[1]) : std::string(), isa);
  if (!t.kwCols.empty()) {
    name += "_cols";
    for (const auto &w : t.kwCols)
      name += fmt::format("_{}_{}", w[0], w[1]);
  }
  if (t.sumEvery > 0)
    name += fmt::format("_s{}", t.sumEvery);
  if (llvm::Function *f = m_.getFunction(name))
    return f;
  Type *ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty(), *f32 = b_.getFloatTy();
  // X's and W's elements: f32, or bf16 as i16.
  Type *xw = bf16 ? b_.getInt16Ty() : f32;
  llvm::Function *f = microkernelFunction(
      m_, tm_, cpu_, name,
      {{"x", ptr},   {"w", ptr},    {"c", ptr},    {"init", ptr},       {"n0", i64},
       {"n1", i64},  {"n2", i64},   {"n3", i64},   {"xs0", i64},        {"ws0", i64},
       {"xs1", i64}, {"ws1", i64},  {"xs2", i64},  {"ws2", i64},        {"ccol", i64},
       {"cblk", i64}, {"icol", i64}, {"iblk", i64}, {"hasInit", b_.getInt1Ty()}});
  // The initial values may be C's own elements: C is not noalias.
  f->removeParamAttr(2, llvm::Attribute::NoAlias);
  // One copy per shape, not one per tile: inlined at each call, every tile's copy went through
  // the optimizer again (a slower compile, and no faster run).
  f->addFnAttr(llvm::Attribute::NoInline);
  Value *x = f->getArg(0), *w = f->getArg(1), *c = f->getArg(2), *ini = f->getArg(3);
  auto fixedOr = [&](int64_t v, Value *arg) -> Value * {
    return v >= 0 ? b_.getInt64(v) : arg;
  };
  Value *n[4] = {f->getArg(4), f->getArg(5), fixedOr(inner[0], f->getArg(6)),
                 fixedOr(inner[1], f->getArg(7))};
  Value *xs[3] = {f->getArg(8), f->getArg(10),
                  fixedOr(inner[0] >= 0 ? t.xs[2] : -1, f->getArg(12))};
  Value *ws[3] = {f->getArg(9), f->getArg(11),
                  fixedOr(inner[0] >= 0 ? t.ws[2] : -1, f->getArg(13))};
  Value *ccol = f->getArg(14), *cblk = f->getArg(15), *icol = f->getArg(16),
        *iblk = f->getArg(17), *hasInit = f->getArg(18);

  IRBuilder<> b(c_);
  b.SetInsertPoint(llvm::BasicBlock::Create(c_, "entry", f));
  unsigned lanes = static_cast<unsigned>(t.lanes);
  auto *vty = llvm::FixedVectorType::get(f32, lanes);
  llvm::Align align(4);
  Value *zero = llvm::Constant::getNullValue(vty);
  auto at = [&](Value *base, Value *m, Value *mStride, Value *r, Value *rStride) {
    return b.CreateInBoundsGEP(f32, base, b.CreateAdd(b.CreateMul(m, mStride), b.CreateMul(r, rStride)));
  };
  // Accumulator (m, r) in a local, initialized from `init` or zero. With runs of partial
  // sums (sumEvery), the accumulators start at zero and each run's end stores to C the
  // initial value (the first run) or C's running sum (later runs) plus the run's sums: a
  // pass of one run costs one addition per accumulator more than one chain.
  const bool runs = t.sumEvery > 0;
  // Element (m, r)'s initial value: `init`'s, or zero.
  auto initialAt = [&](int64_t m, int64_t r) {
    Value *p = at(ini, b.getInt64(m), iblk, b.getInt64(r), icol);
    return b.CreateSelect(hasInit, b.CreateAlignedLoad(vty, p, align), zero);
  };
  std::vector<llvm::AllocaInst *> acc;
  for (int64_t m = 0; m < t.blocks; ++m)
    for (int64_t r = 0; r < t.cols; ++r) {
      acc.push_back(b.CreateAlloca(vty, nullptr, "acc"));
      b.CreateAlignedStore(runs ? zero : initialAt(m, r), acc.back(), llvm::Align(4 * lanes));
    }
  auto accAt = [&](int64_t m, int64_t r) { return acc[static_cast<size_t>(m * t.cols + r)]; };
  // A run's end: C = (first ? the initial value or zero : C) + the sums; zeroes the sums.
  auto addRun = [&](Value *first) {
    Value *fromZero = b.CreateAnd(first, b.CreateNot(hasInit));
    for (int64_t m = 0; m < t.blocks; ++m)
      for (int64_t r = 0; r < t.cols; ++r) {
        Value *pc = at(c, b.getInt64(m), cblk, b.getInt64(r), ccol);
        Value *pi = at(ini, b.getInt64(m), iblk, b.getInt64(r), icol);
        Value *base = b.CreateAlignedLoad(vty, b.CreateSelect(first, pi, pc), align);
        llvm::AllocaInst *a = accAt(m, r);
        Value *sum = b.CreateFAdd(b.CreateSelect(fromZero, zero, base),
                                  b.CreateAlignedLoad(vty, a, llvm::Align(4 * lanes)));
        b.CreateAlignedStore(sum, pc, align);
        b.CreateAlignedStore(zero, a, llvm::Align(4 * lanes));
      }
  };
  if (runs) {
    // No run at all (an empty reduction): C takes the initial values.
    auto *none = llvm::BasicBlock::Create(c_, "runs.none", f);
    auto *some = llvm::BasicBlock::Create(c_, "runs", f);
    b.CreateCondBr(b.CreateICmpSGT(n[0], b.getInt64(0)), some, none);
    b.SetInsertPoint(none);
    for (int64_t m = 0; m < t.blocks; ++m)
      for (int64_t r = 0; r < t.cols; ++r)
        b.CreateAlignedStore(initialAt(m, r), at(c, b.getInt64(m), cblk, b.getInt64(r), ccol),
                             align);
    b.CreateBr(some);
    b.SetInsertPoint(some);
  }
  // The reduction: loops stepping x and w by argument strides, the innermost by the
  // function's constants. X's pointers are not inbounds: an edge tile's first column may lie
  // before its row (its window leaves it out there), even before X's buffer.
  // bf16: vdpbf16ps on pairs of input lanes (a step is a pair: X's at 2 i xs3, a dword
  // broadcast; W's at 2 i ws3, <16 x i32> per block, ws3 = lanes).
  llvm::Function *dp =
      bf16 ? llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512)
           : nullptr;
  const int64_t per = bf16 ? 2 : 1; // input lanes per step
  Type *xStep = bf16 ? b.getInt32Ty() : f32;
  Type *wStep = bf16 ? static_cast<Type *>(llvm::FixedVectorType::get(b.getInt32Ty(), lanes))
                     : static_cast<Type *>(vty);
  auto steps = [&](Value *xp, Value *wp, int64_t lo, int64_t hi) {
    Value *count = bf16 ? b.CreateSDiv(n[3], b.getInt64(2)) : n[3];
    countedLoop(b, f, count, "i3", [&](Value *i) {
      Value *xi = b.CreateGEP(xw, xp, b.CreateMul(i, b.getInt64(per * t.xs[3])));
      Value *wi = b.CreateInBoundsGEP(xw, wp, b.CreateMul(i, b.getInt64(per * t.ws[3])));
      std::vector<Value *> wv;
      for (int64_t m = 0; m < t.blocks; ++m)
        wv.push_back(b.CreateAlignedLoad(
            wStep, b.CreateInBoundsGEP(xw, wi, b.getInt64(m * t.wblk)), align));
      for (int64_t r = lo; r < hi; ++r) {
        Value *xr = b.CreateGEP(xw, xi, b.getInt64(r * t.xcol));
        Value *xv = t.depthwise ? b.CreateAlignedLoad(vty, xr, align)
                                : b.CreateVectorSplat(lanes, b.CreateAlignedLoad(xStep, xr, align));
        for (int64_t m = 0; m < t.blocks; ++m) {
          llvm::AllocaInst *a = accAt(m, r);
          Value *accV = b.CreateAlignedLoad(vty, a, llvm::Align(4 * lanes));
          Value *wm = wv[static_cast<size_t>(m)];
          Value *sum = bf16 ? b.CreateCall(dp, {accV, xv, wm})
                            : b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vty}, {xv, wm, accV});
          b.CreateAlignedStore(sum, a, llvm::Align(4 * lanes));
        }
      }
    });
  };
  std::function<void(int, Value *, Value *)> level = [&](int d, Value *xp, Value *wp) {
    if (d == 2 && !t.kwCols.empty()) {
      // Each kernel column over its window of columns.
      for (size_t k = 0; k < t.kwCols.size(); ++k)
        if (t.kwCols[k][0] < t.kwCols[k][1])
          steps(b.CreateGEP(xw, xp, b.getInt64(int64_t(k) * t.xs[2])),
                b.CreateInBoundsGEP(xw, wp, b.getInt64(int64_t(k) * t.ws[2])), t.kwCols[k][0],
                t.kwCols[k][1]);
      return;
    }
    if (d == 3)
      return steps(xp, wp, 0, t.cols);
    countedLoop(b, f, n[d], d == 0 ? "i0" : d == 1 ? "i1" : "i2", [&](Value *i) {
      level(d + 1, b.CreateGEP(xw, xp, b.CreateMul(i, xs[d])),
            b.CreateInBoundsGEP(xw, wp, b.CreateMul(i, ws[d])));
      if (d != 0 || !runs)
        return;
      // The end of a run: every sumEvery input blocks, and the last.
      Value *next = b.CreateAdd(i, b.getInt64(1));
      Value *end = b.CreateOr(
          b.CreateICmpEQ(b.CreateURem(next, b.getInt64(t.sumEvery)), b.getInt64(0)),
          b.CreateICmpEQ(next, n[0]));
      auto *flush = llvm::BasicBlock::Create(c_, "run.end", f);
      auto *cont = llvm::BasicBlock::Create(c_, "run.next", f);
      b.CreateCondBr(end, flush, cont);
      b.SetInsertPoint(flush);
      addRun(b.CreateICmpSLT(i, b.getInt64(t.sumEvery)));
      b.CreateBr(cont);
      b.SetInsertPoint(cont);
    });
  };
  level(0, x, w);
  if (!runs)
    for (int64_t m = 0; m < t.blocks; ++m)
      for (int64_t r = 0; r < t.cols; ++r)
        b.CreateAlignedStore(b.CreateAlignedLoad(vty, accAt(m, r), llvm::Align(4 * lanes)),
                             at(c, b.getInt64(m), cblk, b.getInt64(r), ccol), align);
  b.CreateRetVoid();
  return f;
}

} // namespace nnc::llvmcg
