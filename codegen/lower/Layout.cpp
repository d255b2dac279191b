// Lowerers of the blocked channel layout: to_nchwc, from_nchwc, pack_conv_weight (index
// copies) and conv_nchwc, a register-blocked direct conv over [N, Cb, H, W, b] activations.
//
// Algorithm (conv_nchwc): for each image n, output channel block ob and output row oh, the
// output row is cut into register tiles of R positions x b lanes (the accumulators, which
// LLVM keeps in vector registers). A tile loops over the input channel blocks of its group,
// the kernel rows (skipped when outside the input) and columns and the b input lanes; each
// step loads the b contiguous packed weights w[ob, icb, kh, kw, ci, 0..b) once and one input
// value per position, and does R x b multiply-adds. Positions whose taps all lie inside the
// input form the interior (full tiles of R and one smaller tile, no guards); the few edge
// positions of the padding get one-position tiles whose loads of the padding read 0 (a row
// narrow enough for one tile, 7 or 14 wide, is one such tile). Depthwise
// convs (in_block 1, group = channels) multiply lane j of the input by lane j of the weight;
// a plain [N, C, H, W] input (in_block 1, group 1) is read directly.
#include <algorithm>

#include "Lowerers.h"
#include "NNLowering.h"
#include "nnc/ir/NNGeometry.h"

namespace nnc::lower {

namespace {

using namespace nnl;
using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;

/// A copy kernel over the result's extents reading `src(idx)` (null: 0 when `valid(idx)` is
/// false).
Kernels copyKernel(const Node &node, const std::string &prefix,
                   const std::function<Expr(const std::vector<Expr> &)> &src,
                   const std::function<Expr(const std::vector<Expr> &)> &valid) {
  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), ob = kb.result(0);
  Extents out = extentsOf(node.result());
  std::vector<int64_t> os = stridesOf(out);
  DType t = kb.bufferType(ob);
  std::vector<std::string> loops;
  Stmt body = kb.loopNest(
      out,
      [&](const std::vector<Expr> &idx) {
        Expr at = flatIndex(idx, os);
        Expr ok = valid ? valid(idx) : nullptr;
        if (!ok)
          return kb.store(ob, at, kb.load(xb, src(idx)));
        return kir::ifThen(ok, kb.store(ob, at, kb.load(xb, src(idx))),
                           kb.store(ob, at, kir::constant(0, t)));
      },
      &loops);
  return Kernels{kb.finish(body, defaultSchedule(loops, out, /*vectorize=*/false))};
}

Expected<Kernels> lowerToNCHWc(const Node &node, const std::string &prefix) {
  Extents in = extentsOf(node.operand(0));
  int64_t axis = node.getInt("axis", 1), b = node.getInt("block", 1), c = in[axis];
  std::vector<int64_t> is = stridesOf(in);
  auto channel = [&](const std::vector<Expr> &idx) {
    return kir::add(kir::mul(idx[axis], i64(b)), idx.back());
  };
  return copyKernel(
      node, prefix,
      [&](const std::vector<Expr> &idx) {
        std::vector<Expr> src(idx.begin(), idx.end() - 1);
        src[axis] = kir::min(channel(idx), i64(c - 1));
        return flatIndex(src, is);
      },
      [&](const std::vector<Expr> &idx) -> Expr {
        return c % b == 0 ? nullptr : kir::lt(channel(idx), i64(c));
      });
}

Expected<Kernels> lowerFromNCHWc(const Node &node, const std::string &prefix) {
  Extents in = extentsOf(node.operand(0));
  int64_t axis = node.getInt("axis", 1), b = in.back();
  std::vector<int64_t> is = stridesOf(in);
  return copyKernel(
      node, prefix,
      [&](const std::vector<Expr> &idx) {
        std::vector<Expr> src = idx;
        src[axis] = kir::div(idx[axis], i64(b));
        src.push_back(kir::mod(idx[axis], i64(b)));
        return flatIndex(src, is);
      },
      nullptr);
}

Expected<Kernels> lowerPackConvWeight(const Node &node, const std::string &prefix) {
  Extents in = extentsOf(node.operand(0));
  int64_t bi = node.getInt("in_block", 1), bo = node.getInt("out_block", 1);
  std::vector<int64_t> is = stridesOf(in);
  size_t r = in.size();
  auto chan = [&](const std::vector<Expr> &idx, size_t d, int64_t blk, size_t lane) {
    return kir::add(kir::mul(idx[d], i64(blk)), idx[lane]);
  };
  return copyKernel(
      node, prefix,
      [&](const std::vector<Expr> &idx) {
        std::vector<Expr> src(idx.begin(), idx.begin() + r);
        src[0] = kir::min(chan(idx, 0, bo, r + 1), i64(in[0] - 1));
        src[1] = kir::min(chan(idx, 1, bi, r), i64(in[1] - 1));
        return flatIndex(src, is);
      },
      [&](const std::vector<Expr> &idx) -> Expr {
        return kir::land(kir::lt(chan(idx, 0, bo, r + 1), i64(in[0])),
                         kir::lt(chan(idx, 1, bi, r), i64(in[1])));
      });
}

/// Positions of one output row of a conv_nchwc.
struct RowGeometry {
  WindowAxis h, w;
  int64_t lo = 0, hi = 0; ///< Interior output columns [lo, hi): every tap inside the input.
};

Expected<Kernels> lowerConvNCHWc(const Node &node, const std::string &prefix) {
  const Value *xv = node.operand(0), *wv = node.operand(1), *biasV = node.operand(2);
  Extents xs = extentsOf(xv), ws = extentsOf(wv), os = extentsOf(node.result());
  DType t = xv->dtype();
  DType acc = accType(t, /*wide=*/false);
  NNC_ASSIGN_OR_RETURN(WindowAttrs a, readWindowAttrs(node, 2));
  RowGeometry g;
  NNC_ASSIGN_OR_RETURN(g.h, windowAxis(node, a, 0, xs[2], ws[2]));
  NNC_ASSIGN_OR_RETURN(g.w, windowAxis(node, a, 1, xs[3], ws[3]));
  const WindowAxis &ah = g.h, &aw = g.w;
  int64_t N = xs[0], H = xs[2], W = xs[3], OH = os[2], OW = os[3];
  int64_t Mb = ws[0], Kc = ws[1], KH = ws[2], KW = ws[3], bi = ws[4], b = ws[5];
  int64_t group = node.getInt("group", 1);
  bool plain = xs.size() == 4;
  int64_t Cx = xs[1]; // channels (plain) or channel blocks (blocked) of the input
  bool depthwise = !plain && bi == 1 && Kc == 1 && group == Mb * b;
  if (numElementsOf(os) == 0)
    return Kernels{emptyKernel(node, prefix)};
  // Interior columns: ow*s - p >= 0 and ow*s - p + (KW-1)*d < W.
  g.lo = std::min(OW, (aw.padBegin + aw.stride - 1) / aw.stride);
  int64_t last = W - 1 + aw.padBegin - (KW - 1) * aw.dilation;
  g.hi = last < 0 ? 0 : std::min(OW, last / aw.stride + 1);
  if (g.hi < g.lo)
    g.hi = g.lo;

  KernelBuilder kb(node, prefix);
  int xb = kb.operand(0), wb = kb.operand(1), bb = biasV ? kb.operand(2) : -1,
      ob = kb.result(0);
  Nest outer;
  Expr n = outer.add(kb, N, "n"), o = outer.add(kb, Mb, "ob"), oh = outer.add(kb, OH, "oh");
  // The first input block of this output block's group (blocked, not depthwise).
  int64_t mg = Mb * b / group;
  Expr icb0 = depthwise || plain ? i64(0) : kir::mul(kir::div(kir::mul(o, i64(b)), i64(mg)), i64(Kc));
  bool hAlways = ah.padBegin == 0 && (OH - 1) * ah.stride + (KH - 1) * ah.dilation < H;
  // One tile: output columns [ow0, ow0 + R) of row oh; `guard` skips taps outside the input.
  auto tile = [&](Expr ow0, int64_t R, bool guard) -> Stmt {
    std::vector<Stmt> s;
    std::vector<std::vector<std::string>> accN(R, std::vector<std::string>(b));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < b; ++j) {
        accN[r][j] = kb.freshName("c");
        Expr init = bb >= 0 ? kir::cast(kb.load(bb, kir::add(kir::mul(o, i64(b)), i64(j))), acc)
                            : fc(0, acc);
        s.push_back(kir::decl(accN[r][j], acc, init));
      }
    Nest red;
    Expr kc = red.add(kb, depthwise ? 1 : Kc, "kc");
    Expr kh = red.add(kb, KH, "kh");
    Expr ih = kir::add(kir::sub(kir::mul(oh, i64(ah.stride)), i64(ah.padBegin)),
                       kir::mul(kh, i64(ah.dilation)));
    Nest kwN;
    Expr kw = kwN.add(kb, KW, "kw");
    Nest ciN;
    Expr ci = ciN.add(kb, depthwise ? 1 : bi, "ci");
    std::vector<Expr> iw(R);
    for (int64_t r = 0; r < R; ++r)
      iw[r] = kir::add(kir::sub(kir::mul(kir::add(ow0, i64(r)), i64(aw.stride)),
                                i64(aw.padBegin)),
                       kir::mul(kw, i64(aw.dilation)));
    // Input element (position r, lane) and packed weight element (lane j).
    // With `guard`, a position outside the input reads 0 (from a clamped, valid address).
    auto xIndex = [&](int64_t r, Expr lane) {
      Expr col = guard ? kir::min(kir::max(iw[r], i64(0)), i64(W - 1)) : iw[r];
      if (plain)
        return kir::add(
            kir::mul(kir::add(kir::mul(kir::add(kir::mul(n, i64(Cx)), kc), i64(H)), ih), i64(W)),
            col);
      Expr blk = depthwise ? o : kir::add(icb0, kc);
      Expr pos = kir::add(
          kir::mul(kir::add(kir::mul(kir::add(kir::mul(n, i64(Cx)), blk), i64(H)), ih), i64(W)),
          col);
      return kir::add(kir::mul(pos, i64(b)), lane);
    };
    Expr wRow = kir::add(
        kir::mul(kir::add(kir::mul(kir::add(kir::mul(kir::add(kir::mul(o, i64(Kc)), kc), i64(KH)),
                                            kh),
                                   i64(KW)),
                          kw),
                 i64(bi)),
        ci);
    auto xLoad = [&](int64_t r, Expr lane) {
      Expr v = kir::cast(kb.load(xb, xIndex(r, std::move(lane))), acc);
      bool always = !guard || (iw[r]->kind == kir::ExprKind::IntImm && iw[r]->intValue >= 0 &&
                               iw[r]->intValue < W);
      return always ? v : kir::select(inRange(iw[r], 0, W), v, fc(0, acc));
    };
    std::vector<Stmt> step;
    std::vector<std::string> wN(b), aN(R);
    for (int64_t j = 0; j < b; ++j) {
      wN[j] = kb.freshName("w");
      step.push_back(kir::decl(
          wN[j], acc, kir::cast(kb.load(wb, kir::add(kir::mul(wRow, i64(b)), i64(j))), acc)));
    }
    if (depthwise) {
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < b; ++j)
          step.push_back(kir::assign(
              accN[r][j],
              kir::add(kir::var(accN[r][j], acc),
                       kir::mul(xLoad(r, i64(j)), kir::var(wN[j], acc)))));
    } else {
      for (int64_t r = 0; r < R; ++r) {
        aN[r] = kb.freshName("a");
        step.push_back(kir::decl(aN[r], acc, xLoad(r, ci)));
      }
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < b; ++j)
          step.push_back(kir::assign(
              accN[r][j], kir::add(kir::var(accN[r][j], acc),
                                   kir::mul(kir::var(aN[r], acc), kir::var(wN[j], acc)))));
    }
    Stmt inner = kwN.wrap(ciN.wrap(kir::block(step)));
    if (!hAlways)
      inner = kir::ifThen(inRange(ih, 0, H), inner);
    s.push_back(red.wrap(inner));
    Expr row = kir::add(kir::mul(kir::add(kir::mul(n, i64(Mb)), o), i64(OH)), oh);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < b; ++j) {
        Expr at = kir::add(kir::mul(kir::add(kir::mul(row, i64(OW)), kir::add(ow0, i64(r))),
                                    i64(b)),
                           i64(j));
        s.push_back(kb.store(ob, at, kir::cast(kir::var(accN[r][j], acc), t)));
      }
    return kir::block(s);
  };
  // Register tile: R positions x b lanes of accumulators, plus the b weights and a broadcast.
  int64_t R = std::max<int64_t>(1, std::min<int64_t>(b >= 16 ? 12 : 6, g.hi - g.lo));
  if (depthwise)
    R = std::max<int64_t>(1, std::min<int64_t>(4, g.hi - g.lo));
  std::vector<Stmt> row;
  auto loopOver = [&](int64_t first, int64_t count, int64_t step, int64_t rows, bool guard) {
    if (count <= 0)
      return;
    if (count == 1) {
      row.push_back(tile(i64(first), rows, guard));
      return;
    }
    std::string v = kb.freshName("t");
    row.push_back(kir::forLoop(
        v, i64(count), tile(kir::add(i64(first), kir::mul(kir::var(v), i64(step))), rows, guard)));
  };
  int64_t interior = g.hi - g.lo, full = interior / R, rem = interior % R;
  int64_t rowTile = depthwise ? 4 : b >= 16 ? 14 : 8; // the most positions a tile can hold
  if (OW <= rowTile && interior < OW) {
    // A narrow row: one tile whose loads of the padding read 0 (not one-position edge
    // tiles, which would reload the weights for every multiply-add).
    loopOver(0, 1, OW, OW, true);
  } else {
    loopOver(0, g.lo, 1, 1, true);
    loopOver(g.lo, full, R, R, false);
    if (rem > 0)
      loopOver(g.lo + full * R, 1, rem, rem, false);
    loopOver(g.hi, OW - g.hi, 1, 1, true);
  }
  int64_t work = N * Mb * b * OH * OW * (depthwise ? 1 : Kc * bi) * KH * KW;
  return Kernels{kb.finish(outer.wrap(kir::block(row)), parallelOuter(outer, work))};
}

} // namespace

void registerLayoutLowerers(LowererTable &t) {
  t[OpKind::ToNCHWc] = lowerToNCHWc;
  t[OpKind::FromNCHWc] = lowerFromNCHWc;
  t[OpKind::PackConvWeight] = lowerPackConvWeight;
  t[OpKind::ConvNCHWc] = lowerConvNCHWc;
}

} // namespace nnc::lower
