// Conv and conv_transpose as direct loops (the templates conv.direct and conv_transpose.direct,
// and their generic lowering) and the row-vectorized direct conv, with what every conv lowering
// shares (ConvLowering.h): the geometry, the checked operands, the explicitly padded input and
// where a fused epilogue runs in a kernel that accumulates onto its result. The im2col GEMM is
// ConvIm2col.cpp, conv_transpose's GEMM ConvTranspose.cpp. Semantics follow
// runtime/interp/Conv.cpp.
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "ConvLowering.h"
#include "Templates.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

using namespace nnl;
using kir::Expr;
using kir::Stmt;

namespace {

Expected<ConvGeometry> convGeometry(const Node &node, const Extents &xs, const Extents &ws,
                                    bool transpose) {
  if (xs.size() < 3 || ws.size() != xs.size())
    return node.error("input {} and weight {} must have one rank >= 3", extentsStr(xs),
                      extentsStr(ws));
  size_t n = xs.size() - 2;
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, n));
  ConvGeometry g;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = xs[i + 2], k = ws[i + 2];
    Expected<WindowAxis> ax =
        transpose ? transposeWindowAxis(node, a, i, in, k) : windowAxis(node, a, i, in, k);
    if (!ax)
      return ax.takeError();
    g.axes.push_back(*ax);
    g.inSpatial.push_back(in);
    g.outSpatial.push_back(ax->out);
    g.kernel.push_back(k);
    g.inSize *= in;
    g.outSize *= ax->out;
    g.kernelSize *= k;
  }
  return g;
}

} // namespace

Expected<ConvSetup> nnl::convSetup(const Node &node, bool transpose) {
  const Value *xv = node.operand(0), *wv = node.operand(1);
  // conv_integer: u8 or i8 operands, each its own, and no bias (operand 2 is x's zero point).
  const bool integer = node.kind() == OpKind::ConvInteger;
  const Value *biasV = integer ? nullptr : node.operand(2);
  DType t = xv->dtype();
  auto byte = [](DType d) { return d == DType::U8 || d == DType::I8; };
  if (integer ? !byte(t) || !byte(wv->dtype())
              : !isFloat(t) || wv->dtype() != t || (biasV && biasV->dtype() != t))
    return node.error("expects {} operands, got {} and {}",
                      integer ? "u8 or i8" : "float (one dtype)", dtypeName(t),
                      dtypeName(wv->dtype()));
  Extents xs = extentsOf(xv), ws = extentsOf(wv);
  // A channels_last conv_integer's geometry is that of its input with the channels first.
  if (channelsLast(node) && xs.size() >= 3)
    xs = permuted(xs, channelsPerm(xs.size(), false));
  if (integer && node.hasAttr("packed_m") && xs.size() >= 2) {
    // The weight the panels hold (its shape rule checked them).
    std::vector<int64_t> ks = node.getInts("kernel_shape", {});
    ws = {node.getInt("packed_m"), xs[1]};
    ws.insert(ws.end(), ks.begin(), ks.end());
  }
  NNC_ASSIGN_OR_RETURN(ConvGeometry geo, convGeometry(node, xs, ws, transpose));
  int64_t group = node.getInt("group", 1);
  int64_t N = xs[0], C = xs[1], M, cg, mg;
  if (!transpose) {
    M = ws[0];
    if (group < 1 || C % group != 0 || M % group != 0 || ws[1] * group != C)
      return node.error("input {} and weight {} do not match group {}", extentsStr(xs),
                        extentsStr(ws), group);
    cg = C / group;
    mg = M / group;
  } else {
    if (group < 1 || C % group != 0 || ws[0] != C)
      return node.error("input {} and weight {} do not match group {}", extentsStr(xs),
                        extentsStr(ws), group);
    cg = C / group;
    mg = ws[1];
    M = mg * group;
  }
  if (biasV && numElementsOf(extentsOf(biasV)) != M)
    return node.error("bias has {} values for {} output channels",
                      numElementsOf(extentsOf(biasV)), M);
  ConvSetup s{geo, N, C, M, cg, mg, group, N * M * geo.outSize, t, biasV != nullptr};
  return s;
}

std::pair<Expr, Expr> nnl::tapRange(const WindowAxis &a, const Expr &tap, int64_t fromCount,
                                    int64_t toCount) {
  // q = p*s + c with c = tap*d - padBegin; 0 <= q  <=>  p >= ceil(-c / s);
  // q <= toCount-1  <=>  p <= floor((toCount-1-c) / s).
  Expr negC = kir::sub(i64(a.padBegin), kir::mul(tap, i64(a.dilation)));
  Expr lo = kir::div(kir::add(kir::max(negC, i64(0)), i64(a.stride - 1)), i64(a.stride));
  Expr hiNum = kir::add(kir::add(i64(toCount - 1 + a.stride), negC), i64(0));
  Expr hi = kir::min(i64(fromCount), kir::div(kir::max(hiNum, i64(0)), i64(a.stride)));
  return {lo, kir::max(kir::sub(hi, lo), i64(0))};
}

Extents nnl::paddedExtents(const ConvGeometry &geo) {
  Extents e;
  for (const WindowAxis &a : geo.axes)
    e.push_back(
        std::max(a.in + a.padBegin, (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation + 1));
  return e;
}

nnl::PaddedRowRuns nnl::paddedRowRuns(const ConvGeometry &geo, int64_t channels) {
  PaddedRowRuns r;
  r.left = geo.axes.back().padBegin * channels;
  r.mid = geo.inSpatial.back() * channels;
  r.right = paddedExtents(geo).back() * channels - r.left - r.mid;
  return r;
}

Extents nnl::phasedExtents(const Extents &padded, int64_t phases) {
  Extents e = padded;
  e.back() = (e.back() + phases - 1) / phases * phases;
  return e;
}

kir::Kernel nnl::padInputKernel(const Node &node, const std::string &prefix,
                                const ConvGeometry &geo, int64_t N, int64_t C, DType t,
                                int64_t phases) {
  Extents padded = phasedExtents(paddedExtents(geo), phases);
  int64_t paddedSize = N * C * numElementsOf(padded), phaseWidth = padded.back() / phases;
  std::vector<int64_t> padStride = stridesOf(padded);
  size_t D = geo.axes.size();
  KernelBuilder kb(node, prefix + "_pad");
  int xb = kb.operand(0), pb = kb.scratch(0, t, paddedSize);
  // Padded position `at` along axis d, stored (the last axis' columns in phases).
  auto placed = [&](size_t d, Expr at) {
    if (d + 1 == D && phases > 1)
      at =
          kir::add(kir::mul(kir::mod(at, i64(phases)), i64(phaseWidth)), kir::div(at, i64(phases)));
    return kir::mul(at, i64(padStride[d]));
  };
  std::vector<Stmt> stmts;
  kir::Schedule sched;
  for (size_t d = 0; d < D; ++d) {
    // Axis d's positions outside [padBegin, padBegin + in): j < padBegin, else j + in.
    int64_t begin = geo.axes[d].padBegin, in = geo.inSpatial[d], outside = padded[d] - in;
    if (outside <= 0)
      continue;
    Extents slab{N * C};
    slab.insert(slab.end(), padded.begin(), padded.end());
    slab[d + 1] = outside;
    std::vector<std::string> zl;
    stmts.push_back(kb.loopNest(
        slab,
        [&](const std::vector<Expr> &idx) {
          Expr to = kir::mul(idx[0], i64(numElementsOf(padded)));
          for (size_t e = 0; e < D; ++e) {
            Expr at = idx[e + 1];
            if (e == d)
              at = begin == 0 ? kir::add(at, i64(in))
                              : kir::select(kir::lt(at, i64(begin)), at, kir::add(at, i64(in)));
            to = kir::add(to, placed(e, at));
          }
          return kb.store(pb, to, kir::constant(0, t));
        },
        &zl));
    for (const kir::ScheduleStep &step : defaultSchedule(zl, slab).steps)
      sched.steps.push_back(step);
  }
  std::vector<std::string> cl;
  Extents copyExtents{N * C};
  copyExtents.insert(copyExtents.end(), geo.inSpatial.begin(), geo.inSpatial.end());
  Stmt copy = kb.loopNest(
      copyExtents,
      [&](const std::vector<Expr> &idx) {
        Expr from = kir::mul(idx[0], i64(geo.inSize)),
             to = kir::mul(idx[0], i64(numElementsOf(padded)));
        std::vector<int64_t> inStride = stridesOf(geo.inSpatial);
        for (size_t d = 0; d < D; ++d) {
          from = kir::add(from, kir::mul(idx[d + 1], i64(inStride[d])));
          to = kir::add(to, placed(d, kir::add(idx[d + 1], i64(geo.axes[d].padBegin))));
        }
        return kb.store(pb, to, kb.load(xb, from));
      },
      &cl);
  stmts.push_back(copy);
  for (const kir::ScheduleStep &step : defaultSchedule(cl, copyExtents).steps)
    sched.steps.push_back(step);
  return kb.finish(kir::block(stmts), sched);
}

Stmt nnl::finishRow(KernelBuilder &kb, const Epilogue::InPlace &finish, const Expr &row,
                    int64_t cols, kir::Schedule &sched) {
  std::string c = kb.freshName("fc");
  std::vector<Stmt> stmts;
  Stmt elem = finish(row, kir::var(c), stmts);
  stmts.push_back(kir::forLoop(c, i64(cols), elem));
  if (cols >= 4)
    sched.steps.push_back({kir::ScheduleStep::Vectorize, c, 0, {}});
  return kir::block(stmts);
}

Stmt nnl::castResult(KernelBuilder &kb, int accb, int ob, DType t, int64_t rows, int64_t cols,
                     Epilogue *ep) {
  Nest fin;
  if (!ep) {
    Expr f = fin.add(kb, rows * cols, "f");
    return fin.wrap(kb.store(ob, f, kir::cast(kb.load(accb, f), t)));
  }
  Expr r = fin.add(kb, rows, "fr"), c = fin.add(kb, cols, "fc");
  Expr f = kir::add(kir::mul(r, i64(cols)), c);
  Epilogue::Inputs in = ep->inputsOf(kb);
  std::vector<Stmt> stmts, hoisted;
  Expr value = ep->applyAt(r, c, rows, cols, kir::cast(kb.load(accb, f), t), in, stmts, hoisted);
  stmts.push_back(kb.store(ob, f, value));
  hoisted.push_back(fin.wrap(kir::block(stmts)));
  return kir::block(hoisted);
}

namespace {

/// Convs with few taps per output (cg * KH * KW <= kRowConvTaps: the first layer of a small
/// CNN, a conv with one or three input channels) run directly, vectorized along the output
/// row, with no im2col copy and no GEMM of a handful of rows.
constexpr int64_t kRowConvTaps = 80;

bool rowConvApplies(const ConvGeometry &geo, int64_t cg, DType t) {
  if ((geo.axes.size() != 1 && geo.axes.size() != 2) || cg * geo.kernelSize > kRowConvTaps ||
      !isFloat(t))
    return false;
  const WindowAxis &w = geo.axes.back();
  // Contiguous vector loads need stride 1 along the row, and a row long enough to fill them.
  return w.stride == 1 && w.out >= 16;
}

/// The row-vectorized direct conv. A first kernel copies the input into scratch with its
/// padding made explicit (zeros), so that every tap of every output column lies inside it
/// (the input of such a conv has few channels: the copy is small next to the output).
/// The second runs, for each image n, block of up to 8 output channels of a group and output
/// row oh, the row in vectors of 16 columns (the last one shifted back to end at the row's
/// end, recomputing a few columns) with one accumulator per channel of the block: each tap
/// loads 16 consecutive padded inputs and multiplies them by the tap's weight. A fused
/// epilogue `ep` runs on the block's accumulators before their stores (the recomputed columns
/// of a row's last vector store the same final values again). (Finishing each block's rows
/// in place after their stores instead kept the epilogue out of the loop of FMAs, but a row
/// that is not whole vectors then finishes its last columns one by one: LeNet's 28-wide rows
/// ran slower than with the epilogue at the stores.)
Kernels lowerConvRows(const Node &node, const std::string &prefix, const ConvGeometry &geo,
                      int64_t N, int64_t C, int64_t M, int64_t cg, int64_t mg, DType t,
                      bool hasBias, Epilogue *ep) {
  // A 1-D conv is a 2-D one of a single row (a depthwise conv of a Conformer or a causal
  // conv of a state-space LM: one channel of many taps per output).
  bool oneD = geo.axes.size() == 1;
  WindowAxis unitRow;
  unitRow.in = unitRow.kernel = unitRow.out = 1;
  const WindowAxis &ah = oneD ? unitRow : geo.axes[0], &aw = geo.axes.back();
  int64_t OH = ah.out, OW = aw.out, KH = ah.kernel, KW = aw.kernel;
  // The padded input: every tap of every output inside it.
  Extents padded = paddedExtents(geo);
  int64_t HP = oneD ? 1 : padded[0], WP = padded.back();
  DType acc = accType(t, /*wide=*/false);
  Kernels kernels{padInputKernel(node, prefix, geo, N, C, t)};
  int64_t mt = 1; // channels of a block: the largest divisor of mg up to 8
  for (int64_t d = std::min<int64_t>(8, mg); d >= 1; --d)
    if (mg % d == 0) {
      mt = d;
      break;
    }
  int64_t blocks = M / mt, taps = cg * KH * KW;
  KernelBuilder kb(node, prefix);
  int pb = kb.scratch(0, t, N * C * HP * WP), wb = kb.operand(1),
      bb = hasBias ? kb.operand(2) : -1, ob = kb.result(0);
  // The epilogue's scalar inputs are read once, before the kernel's loops.
  std::optional<Epilogue::Inputs> epIn;
  std::vector<Stmt> epHoisted;
  if (ep)
    epIn = ep->inputsOf(kb);
  Nest outer;
  Expr q = outer.add(kb, N * blocks * OH, "q");
  Expr n = kir::div(q, i64(blocks * OH)), blk = kir::mod(kir::div(q, i64(OH)), i64(blocks)),
       oh = kir::mod(q, i64(OH));
  Expr m0 = kir::mul(blk, i64(mt));
  Expr c0 = kir::mul(kir::div(m0, i64(mg)), i64(cg)); // the group's first input channel
  std::vector<Stmt> row;
  // A tap's weight, uniform across the vectorized loop (a broadcast operand of the FMA).
  auto weight = [&](int64_t j, int64_t tap) {
    return kir::cast(kb.load(wb, kir::add(kir::mul(kir::add(m0, i64(j)), i64(taps)), i64(tap))),
                     acc);
  };
  // Vectors of 16 columns; the last starts at OW - 16.
  int64_t vectors = (OW + 15) / 16;
  std::string vN = kb.freshName("v"), lN = kb.freshName("l");
  Expr ow0 = kir::min(kir::mul(kir::var(vN), i64(16)), i64(OW - 16));
  Expr ow = kir::add(ow0, kir::var(lN));
  std::vector<Stmt> st;
  std::vector<std::string> aN(mt);
  for (int64_t j = 0; j < mt; ++j) {
    aN[j] = kb.freshName("acc");
    Expr init = bb >= 0 ? kir::cast(kb.load(bb, kir::add(m0, i64(j))), acc) : fc(0, acc);
    st.push_back(kir::decl(aN[j], acc, init));
  }
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        Expr ih = kir::add(kir::mul(oh, i64(ah.stride)), i64(kh * ah.dilation));
        Expr at = kir::add(
            kir::mul(kir::add(kir::mul(kir::add(kir::mul(n, i64(C)), kir::add(c0, i64(ci))),
                                       i64(HP)),
                              ih),
                     i64(WP)),
            kir::add(ow, i64(kw * aw.dilation)));
        std::string xN = kb.freshName("x");
        st.push_back(kir::decl(xN, acc, kir::cast(kb.load(pb, at), acc)));
        int64_t tap = (ci * KH + kh) * KW + kw;
        for (int64_t j = 0; j < mt; ++j)
          st.push_back(kir::assign(
              aN[j], kir::add(kir::var(aN[j], acc), kir::mul(kir::var(xN, acc), weight(j, tap)))));
      }
  for (int64_t j = 0; j < mt; ++j) {
    Expr plane = kir::add(kir::mul(n, i64(M)), kir::add(m0, i64(j)));
    Expr at = kir::add(kir::mul(kir::add(kir::mul(plane, i64(OH)), oh), i64(OW)), ow);
    Expr value = kir::cast(kir::var(aN[j], acc), t);
    if (ep)
      value = ep->applyAt(plane, kir::add(kir::mul(oh, i64(OW)), ow), N * M, OH * OW, value,
                          *epIn, st, epHoisted);
    st.push_back(kb.store(ob, at, value));
  }
  row.push_back(kir::forLoop(vN, i64(vectors), kir::forLoop(lN, i64(16), kir::block(st))));
  kir::Schedule sched = parallelOuter(outer, N * M * OH * OW * taps);
  sched.steps.push_back({kir::ScheduleStep::Vectorize, lN, 0, {}});
  Stmt body = outer.wrap(kir::block(row));
  if (ep) {
    ep->markApplied();
    epHoisted.push_back(body);
    body = kir::block(epHoisted);
  }
  kernels.push_back(kb.finish(body, sched));
  return kernels;
}

/// Conv and conv_transpose as direct loops, for any size (the templates conv.direct and
/// conv_transpose.direct, after those of faster paths that fit fewer convs; and the generic
/// lowering). They accumulate onto the result, so a fused epilogue `ep` finishes each output
/// row (conv) or plane (conv_transpose) in place once its last tap is added, or runs in the
/// final cast from a wider accumulator.
Expected<Kernels> lowerConvLike(const Node &node, const std::string &prefix, bool transpose,
                                Epilogue *ep = nullptr) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, transpose));
  const ConvGeometry &geo = s.geo;
  const Value *biasV = node.operand(2);
  DType t = s.t;
  int64_t N = s.N, C = s.C, M = s.M, cg = s.cg, mg = s.mg, outN = s.outN;
  if (outN == 0)
    return Kernels{emptyKernel(node, prefix)};
  size_t D = geo.axes.size(), L = D - 1;
  DType acc = accType(t, /*wide=*/false);
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), wb = kb.operand(1), bb = biasV ? kb.operand(2) : -1, ob = kb.result(0);
  int accb = acc != t ? kb.scratch(0, acc, outN) : ob;
  std::vector<int64_t> inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel);

  Nest outer;
  Expr n = outer.add(kb, N, "n"), m = outer.add(kb, M, "m");
  Expr g = kir::div(m, i64(mg)), mi = kir::mod(m, i64(mg));
  Expr plane = kir::mul(kir::add(kir::mul(n, i64(M)), m), i64(geo.outSize));
  Expr initValue = bb >= 0 ? kir::cast(kb.load(bb, m), acc) : fc(0, acc);
  const WindowAxis &last = geo.axes[L];
  // The epilogue in place, when the result is the accumulator.
  Epilogue::InPlace finish;
  kir::Schedule sched;
  int64_t cols = transpose ? geo.outSize : last.out;
  if (ep && accb == ob)
    finish = ep->inPlace(kb, outN / cols, cols);
  Stmt body;
  if (!transpose) {
    // for n, m, o[0..L): out row = bias; for ci, k[0..L) (if the taps are inside):
    //   for kw: for the ow whose tap is inside: out[ow] += w * x.
    std::vector<Expr> o(D), pos(D);
    std::vector<Expr> outTerms{plane}, conds;
    for (size_t d = 0; d < L; ++d) {
      o[d] = outer.add(kb, geo.outSpatial[d], "o");
      outTerms.push_back(kir::mul(o[d], i64(outStride[d])));
    }
    Expr rowBase = sumOf(outTerms);
    Nest initN;
    Expr ow0 = initN.add(kb, last.out, "ow");
    Stmt initS = initN.wrap(kb.store(accb, kir::add(rowBase, ow0), initValue));
    Nest red;
    Expr ci = red.add(kb, cg, "c");
    std::vector<Expr> kv(D);
    Expr xBase = kir::mul(kir::add(kir::mul(n, i64(C)), kir::add(kir::mul(g, i64(cg)), ci)),
                          i64(geo.inSize));
    Expr wBase = kir::mul(kir::add(kir::mul(m, i64(cg)), ci), i64(geo.kernelSize));
    std::vector<Expr> xTerms{xBase}, wTerms{wBase};
    for (size_t d = 0; d < L; ++d) {
      const WindowAxis &a = geo.axes[d];
      kv[d] = red.add(kb, a.kernel, "k");
      pos[d] = kir::add(kir::sub(kir::mul(o[d], i64(a.stride)), i64(a.padBegin)),
                        kir::mul(kv[d], i64(a.dilation)));
      bool always = a.padBegin == 0 && (a.out - 1) * a.stride + (a.kernel - 1) * a.dilation < a.in;
      if (!always)
        conds.push_back(inRange(pos[d], 0, a.in));
      xTerms.push_back(kir::mul(pos[d], i64(inStride[d])));
      wTerms.push_back(kir::mul(kv[d], i64(kStride[d])));
    }
    Nest kwN;
    Expr kw = kwN.add(kb, last.kernel, "kw");
    auto [lo, cnt] = tapRange(last, kw, last.out, last.in);
    Nest tN;
    Expr tt = tN.addDynamic(kb, cnt, "t");
    Expr ow = kir::add(lo, tt);
    Expr iw = kir::add(kir::sub(kir::mul(ow, i64(last.stride)), i64(last.padBegin)),
                       kir::mul(kw, i64(last.dilation)));
    std::string wname = kb.freshName("w");
    Expr oIdx = kir::add(rowBase, ow);
    Stmt upd = kb.store(
        accb, oIdx,
        kir::add(kb.load(accb, oIdx),
                 kir::mul(kir::var(wname, acc),
                          kir::cast(kb.load(xb, kir::add(sumOf(xTerms), iw)), acc))));
    Stmt kwS = kwN.wrap(kir::block(
        {kir::decl(wname, acc, kir::cast(kb.load(wb, kir::add(sumOf(wTerms), kw)), acc)),
         tN.wrap(upd)}));
    body = kir::block({initS, red.wrap(guarded(allOf(conds), kwS))});
    if (finish) {
      // Output row (n, m, o[0..L)) of the result seen as rows of the last axis.
      std::vector<Expr> rowTerms{kir::mul(kir::add(kir::mul(n, i64(M)), m), i64(geo.outSize / cols))};
      for (size_t d = 0; d < L; ++d)
        rowTerms.push_back(kir::mul(o[d], i64(outStride[d] / cols)));
      body = kir::block({body, finishRow(kb, finish, sumOf(rowTerms), cols, sched)});
    }
  } else {
    // for n, m: out plane = bias; for ci, i[0..L), k[0..L) (if the targets are inside):
    //   for kw: for the iw whose target is inside: out[...] += w * x[iw].
    Nest initN;
    Expr p0 = initN.add(kb, geo.outSize, "o");
    Stmt initS = initN.wrap(kb.store(accb, kir::add(plane, p0), initValue));
    Nest red;
    Expr ci = red.add(kb, cg, "c");
    Expr c = kir::add(kir::mul(g, i64(cg)), ci);
    std::vector<Expr> iv(D), kv(D), conds;
    std::vector<Expr> xTerms{kir::mul(kir::add(kir::mul(n, i64(C)), c), i64(geo.inSize))};
    std::vector<Expr> wTerms{
        kir::mul(kir::add(kir::mul(c, i64(mg)), mi), i64(geo.kernelSize))};
    std::vector<Expr> oTerms{plane};
    for (size_t d = 0; d < L; ++d)
      iv[d] = red.add(kb, geo.axes[d].in, "i");
    for (size_t d = 0; d < L; ++d) {
      const WindowAxis &a = geo.axes[d];
      kv[d] = red.add(kb, a.kernel, "k");
      Expr q = kir::add(kir::sub(kir::mul(iv[d], i64(a.stride)), i64(a.padBegin)),
                        kir::mul(kv[d], i64(a.dilation)));
      conds.push_back(inRange(q, 0, a.out));
      xTerms.push_back(kir::mul(iv[d], i64(inStride[d])));
      wTerms.push_back(kir::mul(kv[d], i64(kStride[d])));
      oTerms.push_back(kir::mul(q, i64(outStride[d])));
    }
    Nest kwN;
    Expr kw = kwN.add(kb, last.kernel, "kw");
    auto [lo, cnt] = tapRange(last, kw, last.in, last.out);
    Nest tN;
    Expr tt = tN.addDynamic(kb, cnt, "t");
    Expr iw = kir::add(lo, tt);
    Expr ow = kir::add(kir::sub(kir::mul(iw, i64(last.stride)), i64(last.padBegin)),
                       kir::mul(kw, i64(last.dilation)));
    std::string wname = kb.freshName("w");
    Expr oIdx = kir::add(sumOf(oTerms), ow);
    Stmt upd = kb.store(
        accb, oIdx,
        kir::add(kb.load(accb, oIdx),
                 kir::mul(kir::var(wname, acc),
                          kir::cast(kb.load(xb, kir::add(sumOf(xTerms), iw)), acc))));
    Stmt kwS = kwN.wrap(kir::block(
        {kir::decl(wname, acc, kir::cast(kb.load(wb, kir::add(sumOf(wTerms), kw)), acc)),
         tN.wrap(upd)}));
    body = kir::block({initS, red.wrap(guarded(allOf(conds), kwS))});
    if (finish)
      body = kir::block({body, finishRow(kb, finish, kir::add(kir::mul(n, i64(M)), m), cols,
                                         sched)});
  }
  std::vector<Stmt> stmts{outer.wrap(body)};
  if (accb != ob)
    stmts.push_back(castResult(kb, accb, ob, t, outN / cols, cols, ep));
  if (ep)
    ep->markApplied();
  int64_t work = N * M * (transpose ? geo.inSize : geo.outSize) * cg * geo.kernelSize;
  kir::Schedule outerSched = parallelOuter(outer, work);
  outerSched.steps.insert(outerSched.steps.end(), sched.steps.begin(), sched.steps.end());
  return Kernels{kb.finish(kir::block(stmts), outerSched)};
}

} // namespace

std::optional<ConvFacts> convFacts(const Node &node, bool transpose) {
  Expected<ConvSetup> s = convSetup(node, transpose);
  if (!s)
    return std::nullopt; // the generic lowerer reports the error
  ConvFacts f;
  f.outElements = s->outN;
  f.rowsFit = !transpose && rowConvApplies(s->geo, s->cg, s->t);
  f.taps = s->cg * s->geo.kernelSize;
  f.colBytes = transpose
                   ? s->N * s->M * s->geo.kernelSize * s->geo.inSize *
                         int64_t(dtypeSize(accType(s->t, /*wide=*/false)))
                   : s->N * s->C * s->geo.kernelSize * s->geo.outSize * int64_t(dtypeSize(s->t));
  const char *algo = std::getenv("NNC_CONV_ALGO");
  f.forceDirect = algo && std::string(algo) == "direct";
  return f;
}

Expected<Kernels> lowerConvRowsDirect(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(ConvSetup s, convSetup(node, false));
  return lowerConvRows(node, prefix, s.geo, s.N, s.C, s.M, s.cg, s.mg, s.t, s.hasBias,
                       opts ? opts->epilogue : nullptr);
}

Expected<Kernels> lowerConvDirect(const Node &node, const std::string &prefix,
                                  const tuning::LowerOptions *opts) {
  return lowerConvLike(node, prefix, node.kind() == OpKind::ConvTranspose,
                       opts ? opts->epilogue : nullptr);
}

void registerConvLowerers(LowererTable &t) {
  t[OpKind::Conv] = [](const Node &n, const std::string &p) { return lowerConvLike(n, p, false); };
  t[OpKind::ConvTranspose] = [](const Node &n, const std::string &p) {
    return lowerConvLike(n, p, true);
  };
}

} // namespace nnc::lower
