// Conv as im2col + GEMM (the tunable register-blocked GEMM of Gemm.h), with the col matrix
// made whole or a cache block at a time. Semantics follow runtime/interp/Conv.cpp.
#include <cstdlib>

#include "ConvLowering.h"
#include "Epilogue.h"
#include "Templates.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;

/// The first output axis of im2colBlock's rows: the rows are the last output axis, joined
/// with the axes outside it while the padded input continues them in the same order (the
/// inner axes' padded extents equal their output extents: kernel 1, stride 1; the joined axis
/// has stride 1). A temporal conv (kernel 3x1x1) copies whole T*H*W runs, not H*W/W pieces
/// of W columns.
size_t im2colRowAxis(const ConvGeometry &geo) {
  Extents padded = phasedExtents(paddedExtents(geo), geo.axes.back().stride);
  size_t first = geo.axes.size() - 1;
  while (first > 0 && padded[first] == geo.outSpatial[first] && geo.axes[first - 1].stride == 1)
    --first;
  return first;
}

/// The length of im2colBlock's rows: the output axes from im2colRowAxis on.
int64_t im2colRowLength(const ConvGeometry &geo) {
  return numElementsOf(Extents(geo.outSpatial.begin() + im2colRowAxis(geo), geo.outSpatial.end()));
}

/// Writes rows [k0, k0 + kCount) x columns [col0, col0 + cols) of image n and group g's
/// im2col matrix (row r: input channel g*cg + r / K, kernel tap r % K; column p: output
/// position p) at dst[r*ldb + (p - col0)]: the GEMM's B produced per cache block
/// (GemmOperands::produceB). It reads the padded input `xp` (padInputKernel), where every
/// tap lies inside and rows come in phases of the last axis' stride. The columns meet a few
/// output rows (im2colRowAxis); per output row q and B row, the row's part of the block is
/// one copy of consecutive input columns, of the same length for every B row (B rows inside
/// output rows: one length per inner loop, which the branches predict).
Stmt im2colBlock(KernelBuilder &kb, const ConvGeometry &geo, int64_t C, int64_t cg, int xp, Expr n,
                 Expr g, int dst, int64_t ldb, Expr col0, Expr cols, Expr k0, Expr kCount) {
  size_t D = geo.axes.size(), first = im2colRowAxis(geo);
  int64_t K = geo.kernelSize, OW = im2colRowLength(geo);
  // Rows in phases of the last axis' stride (padInputKernel): output column ow's tap kw
  // reads padded column ow*s + kw*dil, which is column ow + (kw*dil) / s of phase
  // (kw*dil) % s, so a run of output columns reads consecutive columns.
  const WindowAxis &aw = geo.axes[D - 1];
  int64_t phases = aw.stride;
  Extents padded = phasedExtents(paddedExtents(geo), phases);
  int64_t paddedSize = numElementsOf(padded), phaseWidth = padded.back() / phases;
  std::vector<int64_t> padStride = stridesOf(padded), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  // Values are bound to locals where they are loop-invariant: per output row, per B row.
  auto bind = [&](std::vector<Stmt> &at, const char *name, Expr e) {
    return kb.bind(at, name, DType::I64, std::move(e));
  };
  std::string qv = kb.freshName("bq"), rv = kb.freshName("br");
  // Per output row q (positions [q*OW, (q+1)*OW)): its part [lo, hi) of the block and the
  // padded input offset of its first column's window.
  std::vector<Stmt> perQ;
  Expr q0 = kir::div(col0, i64(OW));
  Expr nq =
      kir::sub(kir::div(kir::add(col0, kir::sub(cols, i64(1))), i64(OW)), kir::sub(q0, i64(1)));
  Expr q = bind(perQ, "bqq", kir::add(q0, kir::var(qv)));
  Expr qStart = bind(perQ, "bqs", kir::mul(q, i64(OW)));
  Expr lo = bind(perQ, "blo", kir::max(kir::sub(col0, qStart), i64(0)));
  Expr hi = bind(perQ, "bhi", kir::min(kir::sub(kir::add(col0, cols), qStart), i64(OW)));
  Expr len = bind(perQ, "blen", kir::sub(hi, lo));
  Expr qSrc = lo;
  for (size_t d = 0; d < first; ++d) {
    Expr o = kir::mod(kir::div(q, i64(outStride[d] / OW)), i64(geo.axes[d].out));
    qSrc = kir::add(qSrc, kir::mul(o, i64(geo.axes[d].stride * padStride[d])));
  }
  qSrc = bind(perQ, "bqsrc", qSrc);
  Expr qDst = bind(perQ, "bqdst", kir::sub(kir::add(qStart, lo), col0));
  // Per B row r: its channel and kernel taps.
  std::vector<Stmt> perRow;
  Expr row = bind(perRow, "brow", kir::add(k0, kir::var(rv)));
  Expr c = kir::add(kir::mul(g, i64(cg)), kir::div(row, i64(K)));
  Expr tap = bind(perRow, "btap", kir::mod(row, i64(K)));
  Expr src = kir::add(kir::mul(kir::add(kir::mul(n, i64(C)), c), i64(paddedSize)), qSrc);
  for (size_t d = 0; d < D; ++d) {
    Expr kd = kir::mod(kir::div(tap, i64(kStride[d])), i64(geo.kernel[d]));
    if (d + 1 < D) {
      src = kir::add(src, kir::mul(kd, i64(geo.axes[d].dilation * padStride[d])));
    } else {
      Expr at = kir::mul(kd, i64(aw.dilation));
      src = kir::add(src, kir::add(kir::mul(kir::mod(at, i64(phases)), i64(phaseWidth)),
                                   kir::div(at, i64(phases))));
    }
  }
  src = bind(perRow, "bsrc", src);
  Expr out = bind(perRow, "bdst", kir::add(qDst, kir::mul(kir::var(rv), i64(ldb))));
  auto value = [&](Expr x) { return kb.load(xp, kir::add(src, x)); };
  // Runs of 8 or more go in 8-lane vector stores (the last one moved back to end at the
  // run's end, rewriting a few lanes with the same values); shorter runs lane by lane.
  // (LLVM's loop vectorizer, given these loops of 50-odd trips, spent more in its alias
  // checks and scalar remainders than in the copy.) All lanes are read before the store:
  // stores between the loads would keep LLVM's SLP vectorizer from joining them (the buffers
  // may alias as far as it knows).
  std::string vv = kb.freshName("bv"), xv = kb.freshName("bx");
  std::vector<Stmt> vec;
  Expr s0 = bind(vec, "bs", kir::min(kir::mul(kir::var(vv), i64(8)), kir::sub(len, i64(8))));
  std::vector<Expr> lanes;
  for (int64_t l = 0; l < 8; ++l) {
    std::string lv = kb.freshName("bl");
    vec.push_back(kir::decl(lv, DType::F32, value(kir::add(s0, i64(l)))));
    lanes.push_back(kir::var(lv, DType::F32));
  }
  vec.push_back(kb.vecStore(dst, kir::add(out, s0), lanes));
  Stmt vectors = kir::forLoop(vv, kir::div(kir::add(len, i64(7)), i64(8)), kir::block(vec));
  Stmt scalars = kir::forLoop(xv, kir::max(len, i64(0)),
                              kb.store(dst, kir::add(out, kir::var(xv)), value(kir::var(xv))));
  perRow.push_back(kir::ifThen(kir::lt(len, i64(8)), scalars, vectors));
  perQ.push_back(kir::forLoop(rv, kCount, kir::block(perRow)));
  return kir::forLoop(qv, nq, kir::block(perQ));
}

/// Conv as im2col + GEMM (the interpreter's method): a first kernel copies each window tap
/// of the input (0 in the padding) into a scratch matrix col[n, c, k, p]; the second computes
/// out[n, m, p] = bias[m] + sum_r w[m, r] * col[n, g*cg.., r, p] as the tunable
/// register-blocked GEMM (Gemm.h). A pointwise conv (1x1, stride 1, no padding) reads the
/// input directly. When the col matrix outgrows the L2 (3-D convs: R3D-18's first blocks take
/// 173 MB), the GEMM produces it a cache block at a time instead (im2colBlock, blocked): a
/// first kernel only makes the input's padding explicit (padInputKernel, where there is
/// padding or a stride along rows), and each block's columns are read while in cache.
Kernels lowerConvIm2col(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                        int64_t N, int64_t C, int64_t M, int64_t cg, int64_t mg, DType t,
                        bool hasBias, const tuning::LowerOptions *opts) {
  size_t D = geo.axes.size();
  int64_t K = geo.kernelSize, P = geo.outSize, R = cg * K;
  bool pointwise = true;
  for (const WindowAxis &a : geo.axes)
    pointwise = pointwise && a.kernel == 1 && a.stride == 1 && a.padBegin == 0 && a.out == a.in;
  DType acc = accType(t, /*wide=*/false);
  Kernels kernels;
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);
  int64_t group = C / cg;
  std::string layout = fmt::format("conv n{} group{} bias{} {}", N, group, hasBias ? 1 : 0,
                                   pointwise ? "pointwise" : "im2col");
  // The col matrix of image n and group g is R x P, row-major: im2col's stores run along p
  // (writing it directly in the GEMM's column panels instead needs a div and mod per element
  // for the panel index, which cost more than the panels saved).
  int64_t colN = N * C * K * P;
  auto colIndex = [&](Expr mat, Expr r, Expr p) {
    return kir::add(kir::mul(mat, i64(R * P)), kir::add(kir::mul(r, i64(P)), p));
  };
  bool gpu = opts && opts->gpu;
  // Blocked when the col matrix would outgrow the L2 and its blocks pay for producing them
  // (or NNC_CONV_ALGO=blocked asks), on the CPU for f32 with the microkernel GEMM (the config
  // of the blocked problem may say not). A block's copies run along output rows
  // (im2colRowAxis), and each row block of the GEMM produces its B again: rows of 16 or more
  // and 1024 or more columns (R3D-18's convs with 56-wide rows of 25088 and 28-wide of 1568
  // columns measured faster blocked; its 14- and 7-wide rows of 392 and 49 columns slower,
  // their short copies costing more than the cache misses they save).
  const char *algo = std::getenv("NNC_CONV_ALGO");
  bool pays = colN * 4 > cpuOf(opts).l2Bytes && im2colRowLength(geo) >= 16 && P >= 1024;
  bool blocked =
      !pointwise && !gpu && t == DType::F32 && (pays || (algo && std::string(algo) == "blocked"));
  tuning::Config cfg;
  tuning::Problem problem = gemmProblem(t, N * group, mg, R, P, layout, blocked);
  if (!gpu) {
    cfg = tuning::chooseConfig(problem, opts);
    blocked = blocked && cfg.count("mk") && cfg.at("mk") == 1;
  }
  // The producer reads the input with its padding made explicit (none to add: in place).
  bool padded = paddedExtents(geo) != geo.inSpatial;
  for (const WindowAxis &a : geo.axes)
    padded = padded || a.padBegin != 0;
  int64_t phases = geo.axes.back().stride;
  padded = padded || phases > 1;
  if (blocked && padded)
    kernels.push_back(padInputKernel(node, prefix, geo, N, C, t, phases));
  if (!pointwise && !blocked) {
    KernelBuilder ka(node, prefix + "_im2col");
    int xb = ka.operand(0), cb = ka.scratch(0, t, colN);
    Nest nest;
    Expr n = nest.add(ka, N, "n"), c = nest.add(ka, C, "c");
    std::vector<Expr> k(D), o(D), pos(D), conds;
    for (size_t d = 0; d < D; ++d)
      k[d] = nest.add(ka, geo.axes[d].kernel, "k");
    for (size_t d = 0; d < D; ++d)
      o[d] = nest.add(ka, geo.axes[d].out, "o");
    std::vector<Expr> xTerms{kir::mul(kir::add(kir::mul(n, i64(C)), c), i64(geo.inSize))};
    for (size_t d = 0; d < D; ++d) {
      const WindowAxis &a = geo.axes[d];
      pos[d] = kir::add(kir::sub(kir::mul(o[d], i64(a.stride)), i64(a.padBegin)),
                        kir::mul(k[d], i64(a.dilation)));
      bool always = a.padBegin == 0 && (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation < a.in;
      if (!always)
        conds.push_back(inRange(pos[d], 0, a.in));
      xTerms.push_back(kir::mul(pos[d], i64(inStride[d])));
    }
    // Row (c, k) of image n: matrix n*group + c/cg, row (c % cg)*K + k.
    Expr colIdx = colIndex(kir::add(kir::mul(n, i64(group)), kir::div(c, i64(cg))),
                           kir::add(kir::mul(kir::mod(c, i64(cg)), i64(K)), flatIndex(k, kStride)),
                           flatIndex(o, outStride));
    Expr cond = allOf(conds);
    Stmt copy = ka.store(cb, colIdx, ka.load(xb, sumOf(xTerms)));
    Stmt body = isTrue(cond) ? copy : kir::ifThen(cond, copy, ka.store(cb, colIdx, fc(0, t)));
    kernels.push_back(ka.finish(nest.wrap(body), parallelOuter(nest, colN)));
  }
  // Per image and group: out[n, g*mg + i, p] = bias + sum_r w[g*mg + i, r] * src[row(r), p],
  // the register-blocked GEMM of an mg x R weight block by an R x P column block.
  KernelBuilder kb(node, prefix);
  int src =
      pointwise ? kb.operand(0)
      : blocked
          ? (padded ? kb.scratch(0, t,
                                 N * C * numElementsOf(phasedExtents(paddedExtents(geo), phases)))
                    : kb.operand(0))
          : kb.scratch(0, t, colN);
  int wb = kb.operand(1), bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  Nest outer;
  Expr n = outer.add(kb, N, "n"), g = outer.add(kb, group, "g");
  Expr m0 = kir::mul(g, i64(mg));
  Expr srcRow0 = kir::mul(kir::add(kir::mul(n, i64(C)), kir::mul(g, i64(cg))), i64(K));
  Expr outRow0 = kir::add(kir::mul(n, i64(M)), m0);
  GemmOperands go;
  go.a = wb;
  go.b = src;
  go.c = ob;
  go.acc = acc;
  go.aIndex = [&](Expr i, Expr r) { return kir::add(kir::mul(kir::add(m0, i), i64(R)), r); };
  Expr mat = kir::add(kir::mul(n, i64(group)), g);
  go.bIndex = [&](Expr r, Expr p) {
    return pointwise ? kir::add(kir::mul(kir::add(srcRow0, r), i64(P)), p) : colIndex(mat, r, p);
  };
  go.cIndex = [&](Expr i, Expr p) { return kir::add(kir::mul(kir::add(outRow0, i), i64(P)), p); };
  if (hasBias)
    go.init = [&](Expr i) { return kir::cast(kb.load(bb, kir::add(m0, i)), acc); };
  go.strided = GemmOperands::Strided{
      kir::mul(m0, i64(R)),
      pointwise ? kir::mul(srcRow0, i64(P)) : kir::mul(mat, i64(R * P)),
      kir::mul(outRow0, i64(P)), R, 1, P, P};
  // k runs over input channels, K taps each: partial sums in runs of whole channels.
  if (acc == DType::F32)
    go.sumRun = K * convSumRunUnits(K);
  if (opts && opts->gpu && acc == DType::F32) {
    // On an OpenCL device: the NDRange GEMM (GpuGemm.cpp), one product per image and group
    // on NDRange dimension 2, its work-groups over tiles of the mg x P result (the direct
    // loops give a GPU a work-item per output row at most).
    go.epilogue = opts->epilogue;
    kernels.push_back(ndrangeGemm(kb, go, t, N * group, mg, R, P, outer.loops, layout, opts));
    return kernels;
  }
  go.packScratch = 1;
  if (Epilogue *ep = opts ? opts->epilogue : nullptr) {
    // A fused epilogue finishes each element in place once its sum is complete: per cache
    // block on the microkernel path, while the block is in cache (Gemm.h finish).
    Epilogue::InPlace finish = ep->inPlace(kb, N * M, P);
    go.finish = [finish, outRow0](Expr i, Expr p, std::vector<Stmt> &hoisted) {
      return finish(kir::add(outRow0, i), p, hoisted);
    };
    ep->markApplied();
  }
  kir::Schedule sched;
  if (blocked)
    go.produceB = [&](int dst, int64_t ldb, Expr col0, Expr cols, Expr k0, Expr kCount) {
      return im2colBlock(kb, geo, C, cg, src, n, g, dst, ldb, col0, cols, k0, kCount);
    };
  Stmt body = gemmNest(kb, go, mg, R, P, cfg, outer.loops, sched);
  kernels.push_back(kb.finish(body, sched));
  kernels.back().flops = problem.flops;
  return kernels;
}

} // namespace

Expected<Kernels> lowerConvIm2colGemm(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, false));
  return lowerConvIm2col(node, prefix, s.geo, s.N, s.C, s.M, s.cg, s.mg, s.t, s.hasBias, opts);
}

} // namespace nnc::lower
