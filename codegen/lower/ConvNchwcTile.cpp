// conv_nchwc's register tiles as ConvTile statements (ConvNchwcTile.h).
//
// A tile is one ConvTile over its columns, blocks and the pass's reduction (input blocks,
// kernel rows, kernel columns, input lanes): the kernel rows that fall outside the input are
// left out by starting at the first inside and counting only those, so no tap is guarded. An
// edge tile's ConvTile gives each kernel column the window of its columns that read inside
// the input there (ConvTileShape::kwCols), so its taps in the padding are never multiplied
// and its accumulators stay in registers across its kernel columns. The sums are stored to
// the output on the last pass, else to the partial sums' scratch; a fused epilogue then
// finishes the tile's elements in place.
#include "ConvNchwcTile.h"

#include <algorithm>

#include "ConvLowering.h"
#include "NNLowering.h"

namespace nnc::lower {

using kir::Expr;
using kir::Stmt;

std::vector<KwRun> kwRuns(int64_t first, int64_t R, const WindowAxis &aw, int64_t W,
                          int64_t KW) {
  // Column r reads inside the input for kw in [lo[r], hi[r]).
  std::vector<int64_t> lo(R), hi(R), cuts{0, KW};
  for (int64_t r = 0; r < R; ++r) {
    int64_t base = (first + r) * aw.stride - aw.padBegin, d = aw.dilation;
    // base + kw d >= 0 and base + kw d <= W - 1.
    lo[r] = base >= 0 ? 0 : (-base + d - 1) / d;
    hi[r] = W - 1 - base < 0 ? 0 : std::min(KW, (W - 1 - base) / d + 1);
    lo[r] = std::min(lo[r], KW);
    hi[r] = std::max(hi[r], lo[r]);
    cuts.push_back(lo[r]);
    cuts.push_back(hi[r]);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<KwRun> runs;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    KwRun run{cuts[c], cuts[c + 1], std::vector<bool>(R)};
    bool any = false;
    for (int64_t r = 0; r < R; ++r)
      any |= run.active[r] = lo[r] <= run.begin && run.end <= hi[r];
    if (any)
      runs.push_back(std::move(run));
  }
  return runs;
}

namespace {

Expr i64(int64_t v) {
  return kir::intImm(v);
}

} // namespace

Stmt nchwcVectorTile(KernelBuilder &kb, const NchwcTiles &g, const Expr &ow0, int64_t first,
                     int64_t R, int64_t Mt, const NchwcPass &pass, const Epilogue::InPlace *finish,
                     const Epilogue::FromScratch *finishFrom, std::vector<Stmt> &hoisted) {
  const WindowAxis &ah = g.ah, &aw = g.aw;
  std::vector<Stmt> s;
  // The kernel rows inside the input, [khLo, khLo + khCount): ih = oh*s - p + kh*d in [0, H).
  Expr khLo = i64(0), khCount = i64(g.KH);
  if (!g.hAlways) {
    Expr top = kir::sub(kir::mul(g.oh, i64(ah.stride)), i64(ah.padBegin));
    // The first kh with top + kh*d >= 0 (a non-positive numerator divides to <= 0 whichever
    // way it rounds, and the max makes it 0), and one past the last with top + kh*d <= H-1.
    Expr lo = kir::min(
        kir::max(i64(0), kir::div(kir::add(kir::sub(i64(0), top), i64(ah.dilation - 1)),
                                  i64(ah.dilation))),
        i64(g.KH));
    Expr hi = kir::min(
        i64(g.KH),
        kir::div(kir::max(i64(0), kir::add(kir::sub(i64(g.H - 1), top), i64(ah.dilation))),
                 i64(ah.dilation)));
    std::string loN = kb.freshName("khlo"), nN = kb.freshName("khn");
    s.push_back(kir::decl(loN, DType::I64, lo));
    s.push_back(kir::decl(nN, DType::I64, kir::max(i64(0), kir::sub(hi, kir::var(loN)))));
    khLo = kir::var(loN);
    khCount = kir::var(nN);
  }
  Expr ih0 = kir::add(kir::sub(kir::mul(g.oh, i64(ah.stride)), i64(ah.padBegin)),
                      kir::mul(khLo, i64(ah.dilation)));
  int64_t xLanes = g.plain ? 1 : g.b;
  kir::ConvTileShape shape;
  shape.elems = g.bf16 ? kir::GemmElems::BF16 : kir::GemmElems::F32;
  shape.x = g.x;
  shape.w = g.w;
  shape.blocks = Mt;
  shape.lanes = g.b;
  shape.depthwise = g.depthwise;
  shape.xcol = xLanes * aw.stride;
  shape.wblk = g.Kc * g.KH * g.KW * g.bi * g.b;
  int64_t ci = g.depthwise ? 1 : g.bi;
  // A kernel column's step in X: pairs of kernel columns step by two columns, their second
  // column the pair's second lane.
  int64_t kwStep = g.columnPairs ? 2 : aw.dilation;
  shape.xs = {g.H * g.W * xLanes, g.W * xLanes * ah.dilation, xLanes * kwStep,
              g.columnPairs ? 1 : g.plain || g.depthwise ? 0 : 1};
  shape.ws = {g.KH * g.KW * g.bi * g.b, g.KW * g.bi * g.b, g.bi * g.b, g.b};
  // Partial sums in runs of whole input blocks (convSumRunUnits; a depthwise tile's one block
  // per group is a short sum already).
  if (!g.depthwise) {
    int64_t perBlock = std::max<int64_t>(g.KH * g.KW * ci, 1);
    shape.sumEvery = nnl::convSumRunUnits(perBlock);
  }
  // The output position (one block's lanes) of block m of the tile, column col of the row.
  auto outPos = [&](const Expr &m, const Expr &col) {
    return kir::add(
        kir::mul(kir::add(kir::mul(kir::add(kir::mul(g.n, i64(g.Mb)), kir::add(g.block0, m)),
                                   i64(g.OH)),
                          g.oh),
                 i64(g.OW)),
        col);
  };
  // On the last pass, the lines of the epilogue's element-wise inputs (a residual) that the
  // tile's epilogue will read, one per column and block: they arrive while it multiplies.
  if (pass.last && (finish || finishFrom))
    for (int buf : g.epilogueReads)
      for (int64_t m = 0; m < Mt; ++m)
        for (int64_t r = 0; r < R; ++r)
          s.push_back(
              kir::prefetch(buf, kir::mul(outPos(i64(m), kir::add(ow0, i64(r))), i64(g.b))));
  // Where the sums go: the output on the last pass, else (and with sumsToScratch always) the
  // partial sums (slots of item q, block m, column, lane).
  const bool toOut = pass.last && !g.sumsToScratch;
  int c = toOut ? g.out : g.part;
  int64_t cblk = toOut ? g.OH * g.OW * g.b : g.OW * g.b;
  auto cAt = [&](int64_t r) {
    Expr col = kir::add(ow0, i64(r));
    if (toOut)
      return kir::mul(outPos(i64(0), col), i64(g.b));
    return kir::mul(kir::add(kir::mul(kir::mul(g.q, i64(g.M)), i64(g.OW)), col), i64(g.b));
  };
  // The tile's own initial values: the bias (or zero) on the first pass, else the partial sums.
  int init = pass.first ? g.bias : g.part;
  Expr initAt = pass.first ? (g.bias >= 0 ? kir::mul(g.block0, i64(g.b)) : i64(0))
                           : kir::mul(kir::add(kir::mul(kir::mul(g.q, i64(g.M)), i64(g.OW)), ow0),
                                      i64(g.b));
  int64_t icol = pass.first ? 0 : g.b, iblk = pass.first ? g.b : g.OW * g.b;
  // X at column r of the tile, kernel column kw, the pass's first input block and khLo.
  auto xAt = [&](int64_t r, int64_t kw) {
    Expr col = kir::add(kir::sub(kir::mul(kir::add(ow0, i64(r)), i64(aw.stride)),
                                 i64(aw.padBegin)),
                        i64(kw * kwStep));
    Expr blk = g.plain       ? pass.kcBase
               : g.depthwise ? g.block0 // the group's own input block
                             : kir::add(g.icb0, pass.kcBase);
    Expr pos = kir::add(
        kir::mul(kir::add(kir::mul(kir::add(kir::mul(g.n, i64(g.Cx)), blk), i64(g.H)), ih0),
                 i64(g.W)),
        col);
    return kir::mul(pos, i64(xLanes));
  };
  auto wAt = [&](int64_t kw) {
    return kir::mul(
        kir::add(kir::mul(kir::add(kir::mul(kir::add(kir::mul(g.block0, i64(g.Kc)), pass.kcBase),
                                            i64(g.KH)),
                                   khLo),
                          i64(g.KW)),
                 i64(kw)),
        i64(g.bi * g.b));
  };
  // One ConvTile over columns [r0, r0 + cols) and kernel columns [kw, kw + kwCount), from
  // the tile's initial values.
  auto call = [&](int64_t r0, int64_t cols, int64_t kw, int64_t kwCount) {
    kir::ConvTileShape t = shape;
    t.cols = cols;
    t.ccol = g.b;
    t.cblk = cblk;
    Expr iAt = i64(0);
    if (init >= 0) {
      t.init = init;
      t.icol = icol;
      t.iblk = iblk;
      iAt = kir::add(initAt, i64(r0 * icol));
    }
    return kb.convTile(t, c,
                       {xAt(r0, kw), wAt(kw), cAt(r0), iAt, i64(pass.kcCount), khCount,
                        i64(kwCount), i64(ci)});
  };
  if (first < 0) {
    s.push_back(call(0, R, 0, g.KW));
  } else {
    // An edge tile: one ConvTile whose kernel columns each take the columns that read inside
    // the input for them (a run's columns are contiguous: the left edge's first columns and
    // the right edge's last fall out), so its accumulators stay in registers across them.
    kir::Stmt one = call(0, R, 0, g.KW);
    std::vector<std::array<int64_t, 2>> cols(g.KW, {0, 0});
    for (const KwRun &run : kwRuns(first, R, aw, g.W, g.KW)) {
      int64_t lo = R, hi = 0;
      for (int64_t r = 0; r < R; ++r)
        if (run.active[r]) {
          lo = std::min(lo, r);
          hi = std::max(hi, r + 1);
        }
      for (int64_t kw = run.begin; kw < run.end; ++kw)
        cols[kw] = {lo, hi};
    }
    one->conv.kwCols = std::move(cols);
    s.push_back(one);
  }
  if (pass.last && (g.sumsToScratch ? finishFrom != nullptr : finish != nullptr)) {
    // The group's epilogue on each element of the tile, in place (or from the sums in
    // scratch): the result seen as rows of one block's lanes.
    std::string mv = kb.freshName("em"), rv = kb.freshName("er"), jv = kb.freshName("ej");
    Expr row = outPos(kir::var(mv), kir::add(ow0, kir::var(rv)));
    Stmt one;
    if (g.sumsToScratch) {
      Expr slot = kir::add(
          kir::mul(kir::add(kir::mul(kir::add(kir::mul(g.q, i64(g.M)), kir::var(mv)), i64(g.OW)),
                            kir::add(ow0, kir::var(rv))),
                   i64(g.b)),
          kir::var(jv));
      one = (*finishFrom)(row, kir::var(jv), g.part, slot, hoisted);
    } else {
      one = (*finish)(row, kir::var(jv), hoisted);
    }
    s.push_back(kir::forLoop(mv, i64(Mt),
                             kir::forLoop(rv, i64(R), kir::forLoop(jv, i64(g.b), one))));
    if (g.epilogueLaneLoops)
      g.epilogueLaneLoops->push_back(jv);
  }
  return kir::block(s);
}

} // namespace nnc::lower
