// conv_transpose as GEMM + col2im: the CPU's register-blocked GEMM and scatter, or an OpenCL
// device's NDRange GEMM and gather. Semantics follow runtime/interp/Conv.cpp.
#include "ConvLowering.h"
#include "Templates.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;

/// conv_transpose's col2im on an OpenCL device: one work-item per output element, which
/// gathers the column entries of the taps that land on it (tap k of axis d reaches output q
/// from input i = (q + pad - k*dilation) / stride when that divides and lies in the input),
/// instead of the CPU's scatter of each tap row into the output plane (a plane per
/// work-item). Each output element is written once, with its bias, and a fused epilogue `ep`
/// applied there.
kir::Kernel col2imGather(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                         int64_t N, int64_t M, DType t, bool hasBias, int64_t colN,
                         Epilogue *ep) {
  size_t D = geo.axes.size();
  int64_t K = geo.kernelSize, I = geo.inSize;
  DType acc = accType(t, /*wide=*/false);
  KernelBuilder kb(node, prefix);
  int cb = kb.scratch(0, acc, colN);
  int bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  Nest outer;
  Expr n = outer.add(kb, N, "n"), m = outer.add(kb, M, "m");
  std::vector<Expr> q(D), k(D), i(D);
  for (size_t d = 0; d < D; ++d)
    q[d] = outer.add(kb, geo.axes[d].out, "q");
  Expr nm = kir::add(kir::mul(n, i64(M)), m);
  std::string sum = kb.freshName("sum");
  Nest taps;
  std::vector<Expr> conds;
  for (size_t d = 0; d < D; ++d) {
    const WindowAxis &a = geo.axes[d];
    k[d] = taps.add(kb, a.kernel, "k");
    Expr num = kir::sub(kir::add(q[d], i64(a.padBegin)), kir::mul(k[d], i64(a.dilation)));
    i[d] = a.stride == 1 ? num : kir::div(num, i64(a.stride));
    conds.push_back(kir::ge(num, i64(0)));
    if (a.stride != 1)
      conds.push_back(eq(kir::mod(num, i64(a.stride)), i64(0)));
    conds.push_back(kir::lt(i[d], i64(a.in)));
  }
  Expr colIdx = kir::add(kir::mul(kir::add(kir::mul(nm, i64(K)), flatIndex(k, kStride)), i64(I)),
                         flatIndex(i, inStride));
  Stmt add = kir::assign(sum, kir::add(kir::var(sum, acc), kb.load(cb, colIdx)));
  std::vector<Expr> oTerms{kir::mul(nm, i64(geo.outSize))};
  for (size_t d = 0; d < D; ++d)
    oTerms.push_back(kir::mul(q[d], i64(outStride[d])));
  std::vector<Stmt> stmts{
      kir::decl(sum, acc, hasBias ? kir::cast(kb.load(bb, m), acc) : fc(0, acc)),
      taps.wrap(guarded(allOf(conds), add))};
  Expr value = kir::cast(kir::var(sum, acc), t);
  // The epilogue's scalar inputs are read once, before the kernel's loops.
  std::vector<Stmt> hoisted;
  if (ep) {
    Epilogue::Inputs in = ep->inputsOf(kb);
    value = ep->applyAt(nm, flatIndex(q, outStride), N * M, geo.outSize, value, in, stmts,
                        hoisted);
    ep->markApplied();
  }
  stmts.push_back(kb.store(ob, sumOf(oTerms), value));
  int64_t outN = N * M * geo.outSize;
  hoisted.push_back(outer.wrap(kir::block(stmts)));
  return kb.finish(hoisted.size() == 1 ? hoisted[0] : kir::block(hoisted),
                   parallelOuter(outer, outN * K));
}

/// conv_transpose as GEMM + col2im (the interpreter's method): a first kernel computes, per
/// image n and group g, col[n, g] (R x I, R = mg * taps) = W_g^T (R x cg) * x[n, g] (cg x I),
/// w[g*cg + ci, r] being A(r, ci) (strided: rows 1 apart, columns R apart), as the tunable
/// register-blocked GEMM (Gemm.h: microkernels for f32); the second scatter-adds each
/// (channel, tap) row of col into the output plane (only the taps that land inside it), then
/// finishes the plane with a fused epilogue, in place while it is in cache (or in the final
/// cast from a wider accumulator). On an OpenCL device the GEMM is the NDRange GEMM and
/// col2im gathers (col2imGather), applying the epilogue at its stores.
Kernels lowerConvTransposeGemm(const Node &node, const std::string &prefix,
                               const ConvGeometry &geo, int64_t N, int64_t C, int64_t M,
                               int64_t cg, int64_t mg, int64_t group, DType t, bool hasBias,
                               const tuning::LowerOptions *opts) {
  Epilogue *ep = opts ? opts->epilogue : nullptr;
  size_t D = geo.axes.size(), L = D - 1;
  int64_t K = geo.kernelSize, I = geo.inSize, P = geo.outSize, R = mg * K;
  DType acc = accType(t, /*wide=*/false);
  int64_t colN = N * M * K * I;
  Kernels kernels;
  {
    KernelBuilder ka(node, prefix + "_gemm");
    int xb = ka.operand(0), wb = ka.operand(1), cb = ka.scratch(0, acc, colN);
    Nest outer;
    Expr n = outer.add(ka, N, "n"), g = outer.add(ka, group, "g");
    Expr w0 = kir::mul(g, i64(cg * R));
    Expr x0 = kir::mul(kir::add(kir::mul(n, i64(C)), kir::mul(g, i64(cg))), i64(I));
    Expr c0 = kir::mul(kir::add(kir::mul(n, i64(group)), g), i64(R * I));
    GemmOperands go;
    go.a = wb;
    go.b = xb;
    go.c = cb;
    go.acc = acc;
    go.aIndex = [&](Expr r, Expr ci) { return kir::add(w0, kir::add(kir::mul(ci, i64(R)), r)); };
    go.bIndex = [&](Expr ci, Expr i) { return kir::add(x0, kir::add(kir::mul(ci, i64(I)), i)); };
    go.cIndex = [&](Expr r, Expr i) { return kir::add(c0, kir::add(kir::mul(r, i64(I)), i)); };
    go.strided = GemmOperands::Strided{w0, x0, c0, 1, R, I, I};
    // Scratch 0 is col and 1 the f16/bf16 accumulator of the second kernel: the GEMM may pack
    // into 2 and 3.
    std::string layout = fmt::format("conv_transpose n{} group{}", N, group);
    if (opts && opts->gpu && acc == DType::F32) {
      // On an OpenCL device: the NDRange GEMM (GpuGemm.cpp), one product per image and group
      // on NDRange dimension 2 (the CPU's register-tile nest ran there as one work-item).
      kernels.push_back(
          ndrangeGemm(ka, go, t, N * group, R, cg, I, outer.loops, layout, opts));
    } else {
      go.packScratch = 2;
      tuning::Problem p = gemmProblem(t, N * group, R, cg, I, layout);
      tuning::Config cfg = tuning::chooseConfig(p, opts);
      kir::Schedule sched;
      Stmt body = gemmNest(ka, go, R, cg, I, cfg, outer.loops, sched);
      kernels.push_back(ka.finish(body, sched));
      kernels.back().flops = p.flops;
    }
  }
  if (opts && opts->gpu) {
    kernels.push_back(col2imGather(node, prefix, geo, N, M, t, hasBias, colN, ep));
    return kernels;
  }
  KernelBuilder kb(node, prefix);
  int cb = kb.scratch(0, acc, colN);
  int bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  int64_t outN = N * M * P;
  int accb = acc != t ? kb.scratch(1, acc, outN) : ob;
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  Nest outer;
  Expr n = outer.add(kb, N, "n"), m = outer.add(kb, M, "m");
  Expr nm = kir::add(kir::mul(n, i64(M)), m);
  Expr plane = kir::mul(nm, i64(P));
  Nest initN, taps;
  Expr p0 = initN.add(kb, P, "o");
  Stmt initS = initN.wrap(
      kb.store(accb, kir::add(plane, p0), hasBias ? kir::cast(kb.load(bb, m), acc) : fc(0, acc)));
  std::vector<Expr> k(D), iv(D), conds;
  for (size_t d = 0; d < D; ++d)
    k[d] = taps.add(kb, geo.axes[d].kernel, "k");
  for (size_t d = 0; d < L; ++d)
    iv[d] = taps.add(kb, geo.axes[d].in, "i");
  const WindowAxis &last = geo.axes[L];
  auto [lo, cnt] = tapRange(last, k[L], last.in, last.out);
  iv[L] = kir::add(lo, taps.addDynamic(kb, cnt, "t"));
  std::vector<Expr> oTerms{plane};
  for (size_t d = 0; d < D; ++d) {
    const WindowAxis &a = geo.axes[d];
    Expr q = kir::add(kir::sub(kir::mul(iv[d], i64(a.stride)), i64(a.padBegin)),
                      kir::mul(k[d], i64(a.dilation)));
    if (d < L)
      conds.push_back(inRange(q, 0, a.out));
    oTerms.push_back(kir::mul(q, i64(outStride[d])));
  }
  Expr colIdx = kir::add(kir::mul(kir::add(kir::mul(nm, i64(K)), flatIndex(k, kStride)), i64(I)),
                         flatIndex(iv, inStride));
  Expr oIdx = sumOf(oTerms);
  Stmt upd = kb.store(accb, oIdx, kir::add(kb.load(accb, oIdx), kb.load(cb, colIdx)));
  // The guard of the outer axes sits around the last axis' loop.
  Nest lastN;
  lastN.loops.push_back(taps.loops.back());
  taps.loops.pop_back();
  Stmt scatter = taps.wrap(guarded(allOf(conds), lastN.wrap(upd)));
  std::vector<Stmt> perPlane{initS, scatter};
  kir::Schedule sched;
  if (ep && accb == ob)
    perPlane.push_back(finishRow(kb, ep->inPlace(kb, N * M, P), nm, P, sched));
  std::vector<Stmt> stmts{outer.wrap(kir::block(perPlane))};
  if (accb != ob)
    stmts.push_back(castResult(kb, accb, ob, t, N * M, P, ep));
  if (ep)
    ep->markApplied();
  kir::Schedule outerSched = parallelOuter(outer, outN + colN);
  outerSched.steps.insert(outerSched.steps.end(), sched.steps.begin(), sched.steps.end());
  kernels.push_back(kb.finish(kir::block(stmts), outerSched));
  return kernels;
}

} // namespace

Expected<Kernels> lowerConvTransposeGemmCol2im(const Node &node, const std::string &prefix,
                                               const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, true));
  return lowerConvTransposeGemm(node, prefix, s.geo, s.N, s.C, s.M, s.cg, s.mg, s.group, s.t,
                                s.hasBias, opts);
}

} // namespace nnc::lower
