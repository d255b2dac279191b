// The register-blocked GEMM nest shared by matmul and conv, and the "gemm_cpu" tuning space.
//
// Microkernel path (knob mk=1, f32 operands described as strided matrices; microkernelNest):
//  1. Optionally copy B (pb=1) into panels of nr columns, contiguous over k, and A (pa=1)
//     into panels of mr rows, in scratch (a weight packed at compile time by
//     pack-gemm-weights, or conv's im2col written in panels, needs no copy: packedNr).
//  2. Four regions (full tiles, edge columns, edge rows, corner), each a loop over cache
//     blocks of mc rows x nc columns (parallel with par=1, else the batch loop); per block
//     (C = init first when there is one) the k blocks of kc, and per k block the column
//     tiles, and inside them the row tiles: one kir::GemmTile each, which the LLVM backend
//     emits as f32_gemm_<mr>x<nr>_<isa> (explicit <W x float> accumulators, broadcast A,
//     FMA, masked edge lanes). The first k block overwrites C, later ones accumulate. With
//     pf > 0 a block's first pf row tiles also prefetch the next B panel, 1/pf of it each (a
//     cold weight streams in while the other row tiles compute). Blocks are balanced (equal
//     tile counts).
//  3. With `ops.finish` (a fused epilogue), each block's elements are finished right after
//     its last k block, while the block is still in cache.
//
// Scalar path (mk=0, any dtype, generic index lambdas; gemmNest):
//  1. The rows split into full tiles of `mr` and one edge tile of M % mr rows; the columns
//     likewise by `nr`. Each of the (up to four) regions is its own loop nest of tiles, so
//     no tile carries a guard and every tile has a static shape.
//  2. A tile declares mr x nr accumulator locals (initialized from `init`), runs the k loop
//     (split by `ku` and unrolled), loading mr values of A and nr contiguous values of B per
//     step and updating every accumulator, then stores each C element once. LLVM keeps the
//     accumulators in vector registers (SLP) and contracts the multiply-add into FMAs.
//  3. Knobs: `order` puts the column-tile loop outside the row-tile loop, `nc` blocks the
//     columns (B panels of nc columns reused across all row tiles), `par` runs the
//     outermost loop of the main region in parallel.
//  4. With ops.sumRun (f32), the k loop runs inside a loop over runs: each run's products go
//     to locals from zero, added to the accumulators at the run's end (no k unroll then).
#include "Gemm.h"

#include <algorithm>
#include <array>
#include <limits>

#include "nnc/codegen/LLVMCodegen.h"

namespace nnc::lower {

using kir::Expr;
using kir::Stmt;
using tuning::Config;

namespace {

Expr i64c(int64_t v) {
  return kir::intImm(v);
}

/// Vector width in f32 lanes and vector register count of the problem's target.
std::pair<int64_t, int64_t> vectorShape(const tuning::Problem &p) {
  return {p.cpu.f32Lanes(), p.cpu.vectorRegisters};
}

/// Accumulator registers a tile of mr x nr uses, plus the B vectors and one broadcast.
bool fitsRegisters(int64_t mr, int64_t nr, int64_t vw, int64_t regs) {
  int64_t vecs = (nr + vw - 1) / vw;
  return mr * vecs + vecs + 1 <= regs;
}

/// The parallel blocks a microkernel GEMM of m x n in mr x nr tiles wants at the least when
/// its blocks, not a batch loop, run on the thread pool: as many as the column-block rule of
/// the defaults asks for, so that 2 or 4 threads share them evenly.
constexpr int64_t kMinParallelBlocks = 4;

/// The cache blocks of the main region (full tiles) for row block mc and column block nc
/// (0: all), as the microkernel nest cuts them (`blocking` in microkernelNest).
int64_t mainRegionBlocks(int64_t m, int64_t n, int64_t mr, int64_t nr, int64_t mc, int64_t nc) {
  int64_t rt = std::max<int64_t>(m / mr, 1), ct = std::max<int64_t>(n / nr, 1);
  int64_t mcT = mc > 0 ? std::min(std::max<int64_t>(mc / mr, 1), rt) : rt;
  int64_t ncT = nc > 0 ? std::min(std::max<int64_t>(nc / nr, 1), ct) : ct;
  return ((rt + mcT - 1) / mcT) * ((ct + ncT - 1) / ncT);
}

/// The multiply-adds a parallel block must hold at the least for a split to pay: far more than
/// a fork and join of the thread pool costs (a batch-32 MLP's 32 x 400 x 120 layer stays one
/// block).
constexpr double kMinBlockWork = double(1 << 20);

/// The row block for a GEMM of m x k x n whose blocks run in parallel but number fewer than
/// kMinParallelBlocks with row block `mc`: the largest of the space's row blocks (at least
/// mr) that makes enough blocks, else the one that makes the most; `mc` when none makes more
/// or the blocks would hold less than kMinBlockWork each.
/// Rows rather than columns: every region (the column edge too) then splits, and B's columns,
/// too few for column blocks (a 1-D conv's 200 output positions), are read once per row block
/// while A is read once. A Conv1d of 256 channels, kernel 11, length 200 (one block of 256 x
/// 200: a 2816-deep GEMM) ran on one thread at any thread count.
int64_t parallelRowBlock(int64_t m, int64_t k, int64_t n, int64_t mr, int64_t nr, int64_t mc,
                         int64_t nc) {
  int64_t have = mainRegionBlocks(m, n, mr, nr, mc, nc);
  if (have >= kMinParallelBlocks)
    return mc;
  int64_t best = mc;
  for (int64_t cand : {192, 96, 48, 24}) {
    if (cand < mr || cand >= m)
      continue;
    int64_t blocks = mainRegionBlocks(m, n, mr, nr, cand, nc);
    if (double(m) * double(k) * double(n) / double(blocks) < kMinBlockWork)
      break;
    if (blocks >= kMinParallelBlocks)
      return cand;
    if (blocks > have) {
      have = blocks;
      best = cand;
    }
  }
  return best;
}

/// One region: row tiles [r0, r0 + rt*mr) x column tiles [c0, c0 + ct*nr).
Stmt tileRegion(KernelBuilder &kb, const GemmOperands &ops, int64_t r0, int64_t rt, int64_t mr,
                int64_t c0, int64_t ct, int64_t nr, int64_t k, const Config &cfg,
                std::vector<std::string> &outerLoops, kir::Schedule &schedule) {
  if (rt == 0 || ct == 0 || mr == 0 || nr == 0)
    return nullptr;
  int64_t ku = knob(cfg, "ku", 1);
  if (ku < 1 || k % ku != 0)
    ku = 1;
  // Runs of partial sums (ops.sumRun, f32): the products go to `part` locals from zero, and
  // each run of sumRun k steps ends by adding them to the accumulators (no k unroll then).
  const bool runs = ops.sumRun > 0 && ops.sumRun < k && ops.acc == DType::F32;
  if (runs)
    ku = 1;
  bool colsOuter = knob(cfg, "order", 0) == 1;
  int64_t nc = knob(cfg, "nc", 0);
  int64_t tilesPerBlock = nc > 0 ? std::max<int64_t>(nc / nr, 1) : ct;
  bool blocked = tilesPerBlock < ct;

  std::string iv = kb.freshName("it"), jv = kb.freshName("jt");
  Expr it = kir::var(iv), jt = kir::var(jv);
  Expr i0 = kir::add(i64c(r0), kir::mul(it, i64c(mr)));
  Expr jtAll = jt;
  std::string jbName;
  if (blocked) {
    jbName = kb.freshName("jb");
    jtAll = kir::add(kir::mul(kir::var(jbName), i64c(tilesPerBlock)), jt);
  }
  Expr j0 = kir::add(i64c(c0), kir::mul(jtAll, i64c(nr)));

  std::vector<Stmt> tile;
  std::vector<std::vector<std::string>> accName(mr, std::vector<std::string>(nr));
  for (int64_t r = 0; r < mr; ++r) {
    Expr init = ops.init ? ops.init(kir::add(i0, i64c(r))) : kir::constant(0, ops.acc);
    for (int64_t v = 0; v < nr; ++v) {
      accName[r][v] = kb.freshName("c");
      tile.push_back(kir::decl(accName[r][v], ops.acc, init));
    }
  }
  std::vector<std::vector<std::string>> partName = accName;
  if (runs)
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t v = 0; v < nr; ++v) {
        partName[r][v] = kb.freshName("part");
        tile.push_back(kir::decl(partName[r][v], ops.acc, kir::constant(0, ops.acc)));
      }
  std::string kiName = kb.freshName("k"), koName;
  Expr kk = kir::var(kiName);
  if (ku > 1 || runs) {
    koName = kb.freshName("k");
    kk = kir::add(kir::mul(kir::var(koName), i64c(runs ? ops.sumRun : ku)), kk);
  }
  std::vector<Stmt> step;
  std::vector<std::string> aName(mr), bName(nr);
  for (int64_t r = 0; r < mr; ++r) {
    aName[r] = kb.freshName("a");
    step.push_back(
        kir::decl(aName[r], ops.acc,
                  kir::cast(kb.load(ops.a, ops.aIndex(kir::add(i0, i64c(r)), kk)), ops.acc)));
  }
  for (int64_t v = 0; v < nr; ++v) {
    bName[v] = kb.freshName("b");
    step.push_back(
        kir::decl(bName[v], ops.acc,
                  kir::cast(kb.load(ops.b, ops.bIndex(kk, kir::add(j0, i64c(v)))), ops.acc)));
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nr; ++v) {
      Expr accE = kir::var(partName[r][v], ops.acc);
      step.push_back(kir::assign(
          partName[r][v],
          kir::add(accE, kir::mul(kir::var(aName[r], ops.acc), kir::var(bName[v], ops.acc)))));
    }
  Stmt kLoop = kir::block(step);
  if (runs) {
    // A loop over the runs, the run's k steps inside, then its end.
    Expr steps = k % ops.sumRun == 0
                     ? i64c(ops.sumRun)
                     : kir::min(i64c(ops.sumRun),
                                kir::sub(i64c(k), kir::mul(kir::var(koName), i64c(ops.sumRun))));
    kLoop = kir::forLoop(koName, i64c((k + ops.sumRun - 1) / ops.sumRun),
                         kir::block({kir::forLoop(kiName, steps, kLoop),
                                     endOfSumRun(accName, partName, ops.acc)}));
  } else if (k == 0) {
    kLoop = kir::block({}); // an empty sum: the accumulators keep their initial values
  } else if (k > 1 || ku > 1) {
    kLoop = kir::forLoop(kiName, i64c(ku > 1 ? ku : k), kLoop);
    if (ku > 1) {
      kLoop = kir::forLoop(koName, i64c(k / ku), kLoop);
      schedule.steps.push_back({kir::ScheduleStep::Unroll, kiName, 0, {}});
    }
  } else {
    // k == 1: the single step reads index 0.
    kLoop = kir::block({kir::decl(kiName, DType::I64, i64c(0)), kLoop});
  }
  tile.push_back(kLoop);
  DType outT = kb.bufferType(ops.c);
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nr; ++v)
      tile.push_back(kb.store(ops.c, ops.cIndex(kir::add(i0, i64c(r)), kir::add(j0, i64c(v))),
                              kir::cast(kir::var(accName[r][v], ops.acc), outT)));
  Stmt body = kir::block(tile);

  // Tile loops (extent-1 loops are kept simple: their variable is bound to 0).
  auto loop = [&](const std::string &name, Expr extent, Stmt inner) -> Stmt {
    if (kir::isIntImm(extent, 1))
      return kir::block({kir::decl(name, DType::I64, i64c(0)), inner});
    outerLoops.push_back(name);
    return kir::forLoop(name, extent, inner);
  };
  Expr jtExtent = i64c(ct);
  if (blocked) // the last block may hold fewer tiles
    jtExtent = kir::min(i64c(tilesPerBlock),
                        kir::sub(i64c(ct), kir::mul(kir::var(jbName), i64c(tilesPerBlock))));
  Stmt nest = colsOuter ? loop(jv, jtExtent, loop(iv, i64c(rt), body))
                        : loop(iv, i64c(rt), loop(jv, jtExtent, body));
  if (blocked)
    nest = loop(jbName, i64c((ct + tilesPerBlock - 1) / tilesPerBlock), nest);
  // outerLoops got the names innermost first; the caller wants outermost first.
  std::reverse(outerLoops.begin(), outerLoops.end());
  return nest;
}

/// The microkernel path of gemmNest (Gemm.h): regions of full and edge tiles, each a loop
/// over cache blocks (mc rows x nc columns, in tiles) whose body runs the k blocks (kc)
/// and, per k block, the GemmTile microkernels of the block's tiles (column tiles outside,
/// so one B panel of kc x nr stays in L1 while the block's row tiles stream past it).
Stmt microkernelNest(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k, int64_t n,
                     const Config &cfg, const std::vector<std::pair<std::string, Expr>> &batchLoops,
                     kir::Schedule &schedule) {
  const GemmOperands::Strided &st = *ops.strided;
  // bf16 tiles take k in pairs: A's packed rows and B's panels run to K rounded up to even
  // (zeros past K), and every k block but the last ends on a pair.
  const int64_t kReal = k;
  if (ops.bf16)
    k = (k + 1) / 2 * 2;
  int64_t mr = std::min(knob(cfg, "mr", 6), m);
  int64_t nr = std::min(ops.packedNr > 0 ? ops.packedNr : knob(cfg, "nr", 32), n);
  int64_t kc = knob(cfg, "kc", 0);
  if (kc <= 0 || kc > k)
    kc = k;
  if (ops.bf16 && k > 0)
    kc = std::max<int64_t>(kc / 2 * 2, 2);
  int64_t mc = knob(cfg, "mc", 0), nc = knob(cfg, "nc", 0);
  int64_t mcT = mc > 0 ? std::max<int64_t>(mc / mr, 1) : std::numeric_limits<int64_t>::max();
  int64_t ncT = nc > 0 ? std::max<int64_t>(nc / nr, 1) : std::numeric_limits<int64_t>::max();
  int64_t batchCount = 1;
  for (const auto &bl : batchLoops)
    batchCount *= kir::isIntImm(bl.second, 0)
                      ? 0
                      : (bl.second->kind == kir::ExprKind::IntImm ? bl.second->intValue : 2);
  // B produced per block and k block (ops.produceB) lives in the thread's own scratch, filled
  // per block: the blocks, not the batch loop, run in parallel.
  bool produced = bool(ops.produceB) && ops.packScratch >= 0 && k > 0 && ops.packedNr == 0;
  bool par = knob(cfg, "par", 0) == 1;
  bool parBatch = par && !batchLoops.empty() && batchCount >= 4 && !produced;
  bool parBlocks = par && !parBatch;
  // B is packed once, before the batch loops, when no batch moves it.
  bool pack = !produced && ops.packedNr == 0 && knob(cfg, "pb", 0) == 1 && ops.packScratch >= 0 &&
              k > 0 && st.bBase->kind == kir::ExprKind::IntImm;
  int64_t rowTiles = m / mr, mRem = m % mr, colTiles = n / nr, nRem = n % nr;
  int64_t kBlocks = k == 0 ? 1 : (k + kc - 1) / kc;
  // A is packed once, before the batch loops, when no batch moves it.
  bool packA = knob(cfg, "pa", 0) == 1 && ops.packScratch >= 0 && k > 0 &&
               st.aBase->kind == kir::ExprKind::IntImm && !ops.bf16;
  // A produced block was just written: it is in cache already.
  bool prefetch = knob(cfg, "pf", 0) > 0 && !produced;

  std::vector<Stmt> before;
  int bsrc = ops.b, asrc = ops.a;
  // Copies lines (rows of A or columns of B) [l0 + q*width, +width) of `src`, over all k,
  // into panels of `dst`: element (p, line l0 + q*width + w) at l0*k + q*k*width + p*width + w,
  // so one k step of a tile reads `width` contiguous values. `srcIndex(line, p)` addresses
  // the operand; `contiguous`: the source lines are adjacent (the copy vectorizes).
  auto packPanels = [&](int dst, int src, const std::function<Expr(Expr, Expr)> &srcIndex,
                        int64_t l0, int64_t panels, int64_t width, bool contiguous) {
    if (panels == 0 || width == 0)
      return;
    std::string qv = kb.freshName("pq"), pv = kb.freshName("pk"), wv = kb.freshName("pw");
    Expr q = kir::var(qv), p = kir::var(pv), w = kir::var(wv);
    Expr line = kir::add(kir::add(i64c(l0), kir::mul(q, i64c(width))), w);
    Expr at = kir::add(kir::add(i64c(l0 * k), kir::mul(q, i64c(k * width))),
                       kir::add(kir::mul(p, i64c(width)), w));
    Stmt s = kb.store(dst, at, kb.load(src, srcIndex(line, p)));
    s = kir::forLoop(qv, i64c(panels), kir::forLoop(pv, i64c(k), kir::forLoop(wv, i64c(width), s)));
    if (contiguous && width >= 8)
      schedule.steps.push_back({kir::ScheduleStep::Vectorize, wv, 0, {}});
    if (par && panels > 1)
      schedule.steps.push_back({kir::ScheduleStep::Parallel, qv, 0, {}});
    before.push_back(s);
  };
  if (packA) {
    int abuf = kb.scratch(ops.packScratch + 1, DType::F32, m * k);
    auto aIdx = [&](Expr row, Expr p) {
      return kir::add(kir::add(st.aBase, kir::mul(row, i64c(st.aRow))), kir::mul(p, i64c(st.aCol)));
    };
    packPanels(abuf, ops.a, aIdx, 0, rowTiles, mr, false);
    packPanels(abuf, ops.a, aIdx, rowTiles * mr, 1, mRem, false);
    asrc = abuf;
  }
  if (ops.bf16 && k > 0) {
    // A rounded to bf16 (nearest even) into rows of k (even) values, zero past K.
    NNC_ASSERT(ops.packedNr > 0 && ops.packScratch >= 0 && st.aBase->kind == kir::ExprKind::IntImm,
               "bf16 GEMM without compile-time B panels, or with A at a moving base");
    asrc = kb.scratch(ops.packScratch + 1, DType::BF16, m * k);
    std::string iv = kb.freshName("ai"), pv = kb.freshName("ap");
    Expr i = kir::var(iv), p = kir::var(pv);
    Expr src = kir::add(kir::add(st.aBase, kir::mul(i, i64c(st.aRow))), kir::mul(p, i64c(st.aCol)));
    std::vector<Stmt> row = {kir::forLoop(
        pv, i64c(kReal),
        kb.store(asrc, kir::add(kir::mul(i, i64c(k)), p), kir::cast(kb.load(ops.a, src), DType::BF16)))};
    if (kReal < k)
      row.push_back(kb.store(asrc, kir::add(kir::mul(i, i64c(k)), i64c(kReal)),
                             kir::constant(0, DType::BF16)));
    if (st.aCol == 1 && kReal >= 8)
      schedule.steps.push_back({kir::ScheduleStep::Vectorize, pv, 0, {}});
    if (par && m > 1)
      schedule.steps.push_back({kir::ScheduleStep::Parallel, iv, 0, {}});
    before.push_back(kir::forLoop(iv, i64c(m), kir::block(row)));
  }
  if (pack) {
    int pbuf = kb.scratch(ops.packScratch, DType::F32, k * n);
    auto bIdx = [&](Expr col, Expr p) {
      return kir::add(kir::add(st.bBase, kir::mul(p, i64c(st.bRow))), col);
    };
    packPanels(pbuf, ops.b, bIdx, 0, colTiles, nr, true);
    packPanels(pbuf, ops.b, bIdx, colTiles * nr, 1, nRem, true);
    bsrc = pbuf;
  }

  // The cache blocks of a region of rt row tiles x ct column tiles: as many as mc and nc ask
  // for, of balanced sizes (128 rows with mc=96: two blocks of 64, not 96 and 32), so
  // parallel blocks take equal time. {row blocks, column blocks, row tiles per block,
  // column tiles per block}.
  auto blocking = [&](int64_t rt, int64_t ct) -> std::array<int64_t, 4> {
    int64_t nIb = (rt + std::min(mcT, rt) - 1) / std::min(mcT, rt),
            nJb = (ct + std::min(ncT, ct) - 1) / std::min(ncT, ct);
    return {nIb, nJb, (rt + nIb - 1) / nIb, (ct + nJb - 1) / nJb};
  };
  // A produced B block's rows are whole cache lines apart, an odd number of them: a tile's
  // panel (kc rows of nr columns) then spreads over every L1 set. (256 columns apart, a
  // 256 x 16 panel fell in 4 of an 8-way 32 KiB L1's 64 sets and was read from L2.)
  auto producedStride = [](int64_t width) {
    int64_t lines = (width + 15) / 16;
    return (lines % 2 == 0 ? lines + 1 : lines) * 16;
  };
  // A produced B block takes kc rows of the block's width, in scratch of the thread's own
  // (perThread): each chunk of the parallel blocks reuses it while it is in cache (with a slot
  // per block in the arena, R(2+1)D's 3x1x1 convs wrote 27 MB of fresh lines per run, and
  // writing lines that were never cached costs memory traffic that a reused slot does not).
  // The regions run one after another.
  if (produced) {
    int64_t size = 1;
    if (rowTiles > 0 && colTiles > 0)
      size = std::max(size, kc * producedStride(blocking(rowTiles, colTiles)[3] * nr));
    if (rowTiles > 0 && nRem > 0)
      size = std::max(size, kc * producedStride(nRem));
    bsrc = kb.scratch(ops.packScratch, DType::F32, size, /*perThread=*/true);
  }

  // One region: row tiles [r0, r0 + rt*mrR) x column tiles [c0, c0 + ct*nrR), as a loop over
  // cache blocks. With eRows > 0 the last row block also takes one tile of eRows rows after
  // its rt-th row tile (the row edge, r0 + rt*mrR onwards) under each of its column tiles,
  // while that column's B panel is still in cache: as a region of its own, the row edge
  // would stream every B panel once more (from L3 or memory for a cold weight, and a short
  // tile leaves no compute to hide it behind).
  auto region = [&](int64_t r0, int64_t rt, int64_t mrR, int64_t c0, int64_t ct, int64_t nrR,
                    int64_t eRows) -> Stmt {
    if (rt == 0 || ct == 0 || mrR == 0 || nrR == 0)
      return nullptr;
    // Plain variables, not a structured binding: the lambdas below capture them, which C++17
    // (and clang) does not allow for structured bindings.
    const std::array<int64_t, 4> blocks = blocking(rt, ct);
    const int64_t nIb = blocks[0], nJb = blocks[1], rbT = blocks[2], cbT = blocks[3];
    std::string blkV = kb.freshName("blk"), pcV = kb.freshName("kb"), jtV = kb.freshName("jt"),
                itV = kb.freshName("it");
    Expr blk = kir::var(blkV), pc = kir::var(pcV), jt = kir::var(jtV), it = kir::var(itV);
    Expr ib = nIb == 1 ? i64c(0) : kir::mod(blk, i64c(nIb));
    Expr jb = nIb == 1 ? blk : kir::div(blk, i64c(nIb));
    Expr rowT0 = kir::mul(ib, i64c(rbT)), colT0 = kir::mul(jb, i64c(cbT));
    Expr J = kir::add(colT0, jt);
    Expr col0 = kir::add(i64c(c0), kir::mul(J, i64c(nrR)));
    Expr kOff = kir::mul(pc, i64c(kc));
    Expr kCur =
        k % std::max<int64_t>(kc, 1) == 0 ? i64c(kc) : kir::min(i64c(kc), kir::sub(i64c(k), kOff));
    Expr bOff;
    int64_t ldb;
    if (produced) {
      // The block's B rows [kOff, kOff + kCur), cbT*nrR wide, in the thread's scratch.
      ldb = producedStride(cbT * nrR);
      bOff = kir::mul(jt, i64c(nrR));
    } else if (pack || ops.packedNr > 0) {
      // Panels of width w (the edge panel of a run-time pack is nRem wide; compile-time
      // panels are all packedNr wide, zero-padded) start at c0*k + J*k*w.
      int64_t w = ops.packedNr > 0 ? ops.packedNr : nrR;
      ldb = ops.bf16 ? 2 * w : w; // bf16: the stride of a pair of k rows
      bOff = kir::add(kir::add(pack ? i64c(0) : st.bBase, i64c(c0 * k)),
                      kir::add(kir::mul(J, i64c(k * w)), kir::mul(kOff, i64c(w))));
    } else {
      ldb = st.bRow;
      bOff = kir::add(kir::add(st.bBase, kir::mul(kOff, i64c(st.bRow))), col0);
    }
    // A tile's shape for `rows` rows; tileAt places it at row `row0` (`aPanel`: where those
    // rows start in packed A, panels of `rows` rows, k-major) and this block's column tile.
    auto tileShape = [&](int64_t rows) {
      kir::GemmTileShape shape;
      shape.a = asrc;
      shape.b = bsrc;
      shape.mr = rows;
      shape.nr = nrR;
      shape.ldc = st.cRow;
      shape.lda = ops.bf16 ? k : packA ? 1 : st.aRow;
      shape.ak = ops.bf16 ? 1 : packA ? rows : st.aCol;
      shape.ldb = ldb;
      if (ops.bf16)
        shape.elems = kir::GemmElems::BF16;
      else
        shape.sumEvery = ops.sumRun;
      return shape;
    };
    auto tileAt = [&](const kir::GemmTileShape &shape, Expr row0, Expr aPanel) -> Stmt {
      Expr aOff = ops.bf16 ? kir::add(kir::mul(row0, i64c(k)), kOff)
                  : packA  ? kir::add(aPanel, kir::mul(kOff, i64c(shape.mr)))
                           : kir::add(kir::add(st.aBase, kir::mul(row0, i64c(st.aRow))),
                                      kir::mul(kOff, i64c(st.aCol)));
      Expr cOff = kir::add(kir::add(st.cBase, kir::mul(row0, i64c(st.cRow))), col0);
      if (ops.init || kBlocks > 1) {
        kir::GemmTileShape sh = shape;
        sh.accumulate = true;
        Stmt acc = kb.gemmTile(sh, ops.c, aOff, bOff, cOff, kCur);
        if (ops.init)
          return acc;
        sh.accumulate = false;
        return kir::ifThen(kir::lt(pc, i64c(1)), kb.gemmTile(sh, ops.c, aOff, bOff, cOff, kCur),
                           acc);
      }
      return kb.gemmTile(shape, ops.c, aOff, bOff, cOff, kCur);
    };
    Expr rowTile = kir::add(rowT0, it);
    Expr row0 = kir::add(i64c(r0), kir::mul(rowTile, i64c(mrR)));
    Expr aPanel = kir::add(i64c(r0 * k), kir::mul(rowTile, i64c(k * mrR)));
    kir::GemmTileShape shape = tileShape(mrR);
    Stmt tile = tileAt(shape, row0, aPanel);
    if (prefetch && rbT > 1) {
      // The block's first row tiles also prefetch the same k rows of the next panel (the
      // next column tile: k * w further in panels, nrR columns further in place), which the
      // block's other row tiles leave time to arrive (with one row tile there is no such
      // time, and a whole panel ahead overshoots L1). pf tiles share it (a power of two, at
      // most half the block's tiles): tile t takes the t-th 1/pf of the rows, one row per pf
      // k steps (GemmTileShape::prefetchShift), so a cold panel streams in at 1/pf of the
      // rate that one tile would ask of memory.
      int64_t share = 1;
      int shift = 0;
      while (share * 2 <= knob(cfg, "pf", 1) && share * 2 <= rbT / 2) {
        share *= 2;
        ++shift;
      }
      // A bf16 tile steps (and prefetches) by pairs of k rows, ldb apart.
      int64_t steps = ops.bf16 ? kc / 2 : kc;
      int64_t rowsPerTile = (steps + share - 1) / share;
      kir::GemmTileShape pf = shape;
      pf.prefetchShift = shift;
      int64_t next = ops.bf16                          ? k / 2 * shape.ldb
                     : (pack || ops.packedNr > 0) ? k * shape.ldb
                                                  : nrR;
      for (int64_t t = share - 1; t >= 0; --t) {
        pf.prefetchB = next + t * rowsPerTile * shape.ldb;
        tile = kir::ifThen(kir::lt(it, i64c(t + 1)), tileAt(pf, row0, aPanel), tile);
      }
    }
    // Tiles in this block (the last block may hold fewer).
    Expr itExt = rt % rbT == 0 ? i64c(rbT) : kir::min(i64c(rbT), kir::sub(i64c(rt), rowT0));
    Expr jtExt = ct % cbT == 0 ? i64c(cbT) : kir::min(i64c(cbT), kir::sub(i64c(ct), colT0));
    // The row edge belongs to the last row block.
    int64_t eRow0 = r0 + rt * mrR;
    auto inLastRowBlock = [&](Stmt s) {
      return nIb == 1 ? s : kir::ifThen(kir::lt(i64c(nIb - 2), ib), s);
    };
    Stmt colBody = kir::forLoop(itV, itExt, tile);
    if (eRows > 0)
      colBody = kir::block(
          {colBody, inLastRowBlock(tileAt(tileShape(eRows), i64c(eRow0), i64c(eRow0 * k)))});
    Expr cols = ct % cbT == 0 ? i64c(cbT * nrR) : kir::mul(jtExt, i64c(nrR));
    Stmt kBody = kir::forLoop(jtV, jtExt, colBody);
    if (produced)
      kBody = kir::block({ops.produceB(bsrc, ldb, kir::add(i64c(c0), kir::mul(colT0, i64c(nrR))),
                                       cols, kOff, kCur),
                          kBody});
    Stmt body = kir::forLoop(pcV, i64c(kBlocks), kBody);
    // A loop nest over `rows` rows from `rowStart` and the block's columns, of `elem(i, j)`.
    auto overBlock = [&](Expr rowStart, Expr rows, const char *iName, const char *jName,
                         bool vectorize, auto elem) {
      std::string iV = kb.freshName(iName), jV = kb.freshName(jName);
      Expr i = kir::add(rowStart, kir::var(iV));
      Expr j = kir::add(i64c(c0), kir::add(kir::mul(colT0, i64c(nrR)), kir::var(jV)));
      if (vectorize)
        schedule.steps.push_back({kir::ScheduleStep::Vectorize, jV, 0, {}});
      return elem(i, j, [&](Stmt s) { return kir::forLoop(iV, rows, kir::forLoop(jV, cols, s)); });
    };
    Expr blockRow0 = kir::add(i64c(r0), kir::mul(rowT0, i64c(mrR)));
    Expr blockRows = rt % rbT == 0 ? i64c(rbT * mrR) : kir::mul(itExt, i64c(mrR));
    if (ops.init) {
      // C = init(row) over the block first; every k block then accumulates onto it.
      auto initNest = [&](Expr i, Expr j, auto nest) {
        return nest(kb.store(ops.c, ops.cIndex(i, j), ops.init(i)));
      };
      std::vector<Stmt> inits = {overBlock(blockRow0, blockRows, "ii", "jj", false, initNest)};
      if (eRows > 0)
        inits.push_back(
            inLastRowBlock(overBlock(i64c(eRow0), i64c(eRows), "ii", "jj", false, initNest)));
      inits.push_back(body);
      body = kir::block(inits);
    }
    if (ops.finish) {
      // The block's elements are final now: finish them while they are in cache.
      auto finishNest = [&](Expr i, Expr j, auto nest) {
        std::vector<Stmt> fin;
        Stmt elem = ops.finish(i, j, fin);
        fin.push_back(nest(elem));
        return kir::block(fin);
      };
      std::vector<Stmt> fins = {body,
                                overBlock(blockRow0, blockRows, "fi", "fj", true, finishNest)};
      if (eRows > 0)
        fins.push_back(
            inLastRowBlock(overBlock(i64c(eRow0), i64c(eRows), "fi", "fj", true, finishNest)));
      body = kir::block(fins);
    }
    if (parBlocks && nIb * nJb > 1)
      schedule.steps.push_back({kir::ScheduleStep::Parallel, blkV, 0, {}});
    return kir::forLoop(blkV, i64c(nIb * nJb), body);
  };
  // The row edge (mRem rows) rides along in the last row block of the full-width columns and
  // of the column edge.
  std::vector<Stmt> regions;
  for (Stmt s : {region(0, rowTiles, mr, 0, colTiles, nr, mRem),
                 region(0, rowTiles, mr, colTiles * nr, 1, nRem, mRem)})
    if (s)
      regions.push_back(s);
  Stmt body = regions.size() == 1 ? regions[0] : kir::block(regions);
  for (size_t d = batchLoops.size(); d-- > 0;)
    body = kir::forLoop(batchLoops[d].first, batchLoops[d].second, body);
  if (parBatch)
    schedule.steps.push_back({kir::ScheduleStep::Parallel, batchLoops[0].first, 0, {}});
  before.push_back(body);
  return before.size() == 1 ? before[0] : kir::block(before);
}

/// True when `ops` can take the microkernel path: strided operands in f32 buffers.
bool microkernelEligible(KernelBuilder &kb, const GemmOperands &ops) {
  return ops.strided && ops.acc == DType::F32 && kb.bufferType(ops.a) == DType::F32 &&
         kb.bufferType(ops.b) == DType::F32 && kb.bufferType(ops.c) == DType::F32;
}

} // namespace

tuning::Problem gemmProblem(DType t, int64_t batch, int64_t m, int64_t k, int64_t n,
                            const std::string &layout, bool producedB, int64_t bMatrices) {
  tuning::Problem p;
  p.kind = "gemm_cpu";
  p.signature = fmt::format("gemm_cpu {} b{} m{} k{} n{} {}{}", dtypeName(t), batch, m, k, n,
                            layout, producedB ? " producedB" : "");
  p.dims = {batch, m, k, n, producedB ? 1 : 0, std::max<int64_t>(bMatrices, 1)};
  p.flops = 2.0 * double(batch) * double(m) * double(k) * double(n);
  return p;
}

Stmt endOfSumRun(const std::vector<std::vector<std::string>> &acc,
                 const std::vector<std::vector<std::string>> &part, DType t) {
  std::vector<Stmt> s;
  for (size_t r = 0; r < acc.size(); ++r)
    for (size_t c = 0; c < acc[r].size(); ++c) {
      s.push_back(
          kir::assign(acc[r][c], kir::add(kir::var(acc[r][c], t), kir::var(part[r][c], t))));
      s.push_back(kir::assign(part[r][c], kir::constant(0, t)));
    }
  return kir::block(s);
}

Stmt gemmNest(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k, int64_t n,
              const Config &cfg, const std::vector<std::pair<std::string, Expr>> &batchLoops,
              kir::Schedule &schedule) {
  if (ops.bf16) // only the bf16 tiles read B's pairs and round A
    return microkernelNest(kb, ops, m, k, n, cfg, batchLoops, schedule);
  if (knob(cfg, "mk", 0) == 1 && microkernelEligible(kb, ops))
    return microkernelNest(kb, ops, m, k, n, cfg, batchLoops, schedule);
  int64_t mr = std::min(knob(cfg, "mr", 1), m), nr = std::min(knob(cfg, "nr", 8), n);
  int64_t rowTiles = m / mr, colTiles = n / nr, mRem = m % mr, nRem = n % nr;
  std::vector<Stmt> regions;
  std::vector<std::string> mainLoops;
  Stmt main = tileRegion(kb, ops, 0, rowTiles, mr, 0, colTiles, nr, k, cfg, mainLoops, schedule);
  std::vector<std::string> ignored;
  for (Stmt s :
       {main,
        tileRegion(kb, ops, 0, rowTiles, mr, colTiles * nr, 1, nRem, k, cfg, ignored, schedule),
        tileRegion(kb, ops, rowTiles * mr, 1, mRem, 0, colTiles, nr, k, cfg, ignored, schedule),
        tileRegion(kb, ops, rowTiles * mr, 1, mRem, colTiles * nr, 1, nRem, k, cfg, ignored,
                   schedule)})
    if (s)
      regions.push_back(s);
  if (ops.finish && m > 0 && n > 0) {
    std::string iV = kb.freshName("fi"), jV = kb.freshName("fj");
    std::vector<Stmt> fin;
    Stmt elem = ops.finish(kir::var(iV), kir::var(jV), fin);
    fin.push_back(kir::forLoop(iV, i64c(m), kir::forLoop(jV, i64c(n), elem)));
    schedule.steps.push_back({kir::ScheduleStep::Vectorize, jV, 0, {}});
    // Outside the parallel tile loop (no batch loop to carry it): parallel rows of its own.
    if (knob(cfg, "par", 0) == 1 && batchLoops.empty() && m > 1)
      schedule.steps.push_back({kir::ScheduleStep::Parallel, iV, 0, {}});
    regions.push_back(kir::block(fin));
  }
  Stmt body = regions.size() == 1 ? regions[0] : kir::block(regions);
  for (size_t d = batchLoops.size(); d-- > 0;)
    body = kir::forLoop(batchLoops[d].first, batchLoops[d].second, body);
  if (knob(cfg, "par", 0) == 1) {
    // The batch loop when there is one, else the main region's outermost tile loop.
    std::string outer = !batchLoops.empty()  ? batchLoops[0].first
                        : !mainLoops.empty() ? mainLoops[0]
                                             : std::string();
    if (!outer.empty())
      schedule.steps.push_back({kir::ScheduleStep::Parallel, outer, 0, {}});
  }
  return body;
}

const tuning::Space &gemmCpuSpace() {
  static const tuning::Space space = [] {
    tuning::Space s;
    s.kind = "gemm_cpu";
    s.version = 3;
    s.knobs = {
        {"mk", {0, 1}, "1: explicit-vector microkernels over cache blocks (f32 strided operands)"},
        {"mr", {1, 2, 3, 4, 5, 6, 8, 10, 12, 14}, "rows of a register tile"},
        {"nr", {8, 16, 32, 48, 64}, "columns of a register tile (contiguous in B and C)"},
        {"ku", {1, 2, 4}, "mk=0: unroll of the k loop (must divide k)"},
        {"order", {0, 1}, "mk=0: 0: row tiles outside column tiles; 1: column tiles outside"},
        {"kc", {0, 32, 64, 128, 256, 384, 512}, "mk=1: k block (0: all of k)"},
        {"mc", {0, 24, 48, 96, 192, 384}, "mk=1: row block (0: all rows)"},
        {"nc", {0, 64, 128, 256, 512, 1024}, "column block (B panel width) or 0 for none"},
        {"pb", {0, 1}, "mk=1: 1: B packed at run time into panels of nr columns"},
        {"pa", {0, 1}, "mk=1: 1: A packed at run time into panels of mr rows"},
        {"par", {0, 1}, "1: blocks (or the batch loop) run on the thread pool"},
        {"pf",
         {0, 1, 2, 4, 8, 16},
         "mk=1: the first pf row tiles of a block prefetch the next B panel, 1/pf each (0: none)"},
    };
    s.valid = [](const Config &c, const tuning::Problem &p) {
      if (!tuning::namesEveryKnob(gemmCpuSpace(), c))
        return false;
      bool dims = p.dims.size() >= 4;
      int64_t m = dims ? p.dims[1] : 1, k = dims ? p.dims[2] : 1, n = dims ? p.dims[3] : 1;
      auto [vw, regs] = vectorShape(p);
      int64_t mr = c.at("mr"), nr = c.at("nr"), nc = c.at("nc");
      bool mk = c.at("mk") == 1;
      if (mr > std::max<int64_t>(m, 1) && mr != 1)
        return false;
      // mk=1 covers a column edge with masked vector lanes.
      if ((mk ? nr >= n + vw : nr > std::max<int64_t>(n, 8)) || !fitsRegisters(mr, nr, vw, regs))
        return false;
      if (nc != 0 && (nc % nr != 0 || (!mk && nc >= n)))
        return false;
      if (!mk) // the knobs of the other path keep their defaults
        return k % c.at("ku") == 0 && c.at("kc") == 0 && c.at("mc") == 0 && c.at("pb") == 0 &&
               c.at("pa") == 0 && c.at("pf") == 0;
      // Blocks larger than the problem mean one block (mc below mr: one row tile).
      (void)k;
      return c.at("ku") == 1 && c.at("order") == 0;
    };
    s.defaults = [](const tuning::Problem &p) {
      int64_t batch = p.dims[0], m = p.dims[1], k = p.dims[2], n = p.dims[3];
      bool produced = p.dims.size() > 4 && p.dims[4] != 0;
      auto [vw, regs] = vectorShape(p);
      double work = double(batch) * double(m) * double(k) * double(n);
      int64_t par = work >= double(1 << 17) ? 1 : 0;
      // The microkernel path needs f32 operands (the problem's dtype) and vector registers.
      bool f32 = p.signature.rfind("gemm_cpu f32 ", 0) == 0;
      if (f32 && vw >= 8) {
        // 2 vectors wide (4 for matrix-vector like shapes), as many rows as registers allow.
        int64_t nr = m <= 2 ? 4 * vw : 2 * vw;
        while (nr > 8 && nr >= 2 * n)
          nr /= 2;
        int64_t mr = 1;
        for (int64_t cand : {8, 6, 5, 4, 3, 2, 1})
          if (cand <= m && fitsRegisters(cand, nr, vw, regs)) {
            mr = cand;
            break;
          }
        // k blocks: all of k up to 1024, or while a B panel of k x nr floats takes at most a
        // quarter of the target's L2; else 512. The panel then lives in L2 rather than L1,
        // which the L2's bandwidth covers (2 vectors per k step), while fewer k blocks re-read
        // C less (K = 3072 on a 1 MiB L2, a transformer's second MLP GEMM, measured faster
        // whole than in blocks of 512).
        // Bytes of a B element: 2 for bf16 panels (--precision bf16), whose k blocks then hold
        // twice the rows in the same bytes of cache.
        const int64_t eb = p.signature.find(" bf16packed") != std::string::npos ? 2 : 4;
        int64_t kc = k <= 1024 || k * nr * eb <= p.cpu.l2Bytes / 4 ? 0 : 512;
        // Unless the tile draws B faster than the L2 was seen to deliver it. Every row tile of
        // a block reads the column tile's panel (kc x nr) whole; a k step of an mr x nr tile
        // takes mr * nr / vw FMAs, on two FMA pipes half as many cycles, and reads nr * 4 bytes
        // of B: 8 * vw / mr bytes a cycle. At AVX2's 6 x 16 tile (10.7) a panel of all k from
        // the L2 was the faster; at AVX-512's 8 x 32 (16), k blocks of 128 whose panels stay in
        // the L1 were (ViT-B/16's GEMMs on both; bench/results/measurements-behind-defaults.md).
        // So past 12 bytes a cycle, a panel of all k that overflows the L1 is blocked in k to
        // the deepest block whose panel takes at most half of it. One row tile reads the panel
        // once, blocked or not: such shapes keep theirs.
        // Nor when C's rows (n apart for every caller) are a multiple of 4 KiB apart: each k
        // block re-reads the cache block's C, and rows at one offset of their pages fold onto
        // a fraction of the cache's sets (a quarter of a 1 MiB, 8-way L2 for 256-column
        // blocks 12 KiB apart), where A's block and B's stream evict them between k blocks.
        // On ViT-B/16's 197 x 768 x 3072 GEMM every k-block depth measured slower than one
        // block, and the shallower the slower (bench/results/measurements-behind-defaults.md).
        bool cRowsShareSets = (n * 4) % 4096 == 0;
        // Nor for a skinny GEMM (at most 64 rows, a few row tiles): a panel then serves only
        // those few tiles, and blocks of k cut a cold B's stream into short runs, one per
        // panel and k block, that the hardware prefetcher restarts on (a decoder's LM head at
        // 16 tokens measured faster in one block; bench/results/measurements-behind-defaults.md).
        bool skinny = m <= 64;
        if (8 * vw > 12 * mr && m > mr && k * nr * eb > p.cpu.l1dBytes && !cRowsShareSets &&
            !skinny)
          for (int64_t cand : {512, 384, 256, 128, 64, 32})
            if (cand * nr * eb <= p.cpu.l1dBytes / 2) {
              kc = kc == 0 ? cand : std::min(kc, cand);
              break;
            }
        // A produced B block (kc x nc) is written, then read from cache by every row tile:
        // k blocks of 256 rows (all of k up to 384), and column blocks the widest that keep
        // a block within half of the L2 (A's block beside it), 64 at the least.
        int64_t ncProduced = 0;
        if (produced) {
          kc = k <= 384 ? 0 : 256;
          int64_t rows = kc == 0 ? k : kc;
          for (int64_t cand : {1024, 512, 256, 128, 64})
            if (cand % nr == 0 && (rows * cand * 4 <= p.cpu.l2Bytes / 2 || cand == 64)) {
              ncProduced = cand;
              break;
            }
        }
        // All rows in one block up to 192 (A's 192 x kc block is 192 KiB): a cold B is then
        // streamed once.
        int64_t mc = m > 192 ? 96 : 0;
        if (mc != 0 && mc < mr)
          mc = 0;
        // Column blocks: at least four when the work is worth spreading over threads.
        int64_t nc = 0;
        if (par)
          for (int64_t cand : {1024, 512, 256, 128, 64})
            if (cand % nr == 0 && cand * 4 <= n) {
              nc = cand;
              break;
            }
        // Past 192 rows, the row blocks of 96 read each column block of B (k x nc) in turn; when
        // that is larger than the L2, the later row blocks take it from the L3 or, when another
        // tenant holds the shared L3, from memory again: a cold B (a weight last touched a whole
        // model run ago) then streams once per row block. So the rows stay one block while A's
        // block of 256 k rows fits in half the L2, a k blocked in 512 is blocked in 256 instead,
        // and the column blocks narrow by as many times as there would have been row blocks, so
        // the thread pool keeps as many blocks (a stack of ViT-B/16 MLPs, B column blocks of
        // 1.5 MiB, measured faster in one row block, and the narrower column blocks even with
        // the wider). A k of up to 1024 stays one block, though A is then read whole per column
        // tile (605 KB for 197 x 768 x 3072, beyond a 512 KiB L2): 256-deep blocks measured
        // even or slower there. ConvNeXt-T's 196 x 384 x 1536 GEMMs, whose B column blocks
        // (384 KiB) stay in the L2, measured slower in one block, so they keep the row blocks.
        bool rowsMerged = false;
        if (mc != 0 && !produced && k * (nc == 0 ? n : nc) * eb > p.cpu.l2Bytes &&
            m * 256 * 4 <= p.cpu.l2Bytes / 2) {
          rowsMerged = true;
          int64_t merged = m / mc;
          mc = 0;
          if (kc > 256)
            kc = 256;
          for (int64_t cand : {1024, 512, 256, 128, 64})
            if (nc != 0 && cand % nr == 0 && (cand * merged <= nc || cand == 64)) {
              nc = cand;
              break;
            }
        }
        if (produced && n > ncProduced)
          nc = nc == 0 ? ncProduced : std::min(nc, ncProduced);
        // A GEMM of two or three row tiles by an f32 weight packed at compile time and beyond
        // the L2 (a decoder's weight GEMMs at 16-24 tokens) streams that weight from memory
        // once per run with little compute per panel: k blocks of 64, so that A's block (16 x
        // 64, 4 KiB) stays in the L1 instead of A's whole rows (128 KiB at 16 x 2048) being
        // read from the L2 by every column tile, in one column block per thread (all of n on
        // one), so that each thread streams its share of the weight once and no row block
        // streams it again. Both parts together: k blocks under the usual column blocks
        // measured slower. One row tile (8-12 rows) measured far slower in k blocks of 64, and
        // four or more rows of tiles, whose compute per panel hides the stream, no faster, nor
        // a weight within the L2: those keep the rules above
        // (bench/results/measurements-behind-defaults.md). Measured with AVX-512's 8 x 32
        // tiles only: AVX2's 6 x 16 tiles keep the rules above until measured.
        const bool streamedWeight = vw >= 16 && m >= 2 * mr && m <= 3 * mr && !produced &&
                                    k > 64 && k * n * eb > p.cpu.l2Bytes &&
                                    p.signature.find(" packed") != std::string::npos;
        if (streamedWeight && par) {
          kc = 64;
          int64_t share = (n + p.threads - 1) / std::max(p.threads, 1);
          nc = p.threads > 1 ? (share + nr - 1) / nr * nr : 0;
        }
        // Blocks, not the batch loop, run in parallel (batches of fewer than four, or a
        // produced B: microkernelNest's parBlocks): enough of them for the threads, by row
        // blocks where the columns gave too few.
        if (par && (batch < 4 || produced) && !streamedWeight)
          mc = parallelRowBlock(m, k, n, mr, nr, mc, nc);
        // Packing B pays when many rows reuse it.
        int64_t pb = m >= 16 ? 1 : 0;
        // A stays in place by default: its run-time copy (a scalar strided gather) costs more
        // than the contiguous panels gain.
        // A produced B (conv's im2col) is read a block at a time, and its A (the weights)
        // once per column block: packed A then pays (it measured faster on R3D-18's 64 x 1728
        // conv).
        // A matmul whose rows stay one block (above) walks all of A's rows under every column
        // tile: packed, they are one contiguous stream instead of mr strided rows restarted
        // per row tile, for one copy of the activations (m x k) per run (on ViT-B/16's GEMMs,
        // packed came out ahead in most runs, by about the noise). A conv's A is its weight,
        // packed at compile time or not at all.
        bool matmul = p.signature.find(" matmul ") != std::string::npos;
        int64_t pa = produced || (rowsMerged && matmul) ? 1 : 0;
        // Prefetching the next B panel hides a cold B (a weight last touched a whole model
        // run ago); a B within the target's L2 stays warm, where the prefetches only take load
        // slots. A B as large as the L2 does not stay there beside the activations (a
        // decoder's 512 x 512 projections on a 1 MiB L2 measured faster with the prefetch
        // inside the model). Four row tiles share each panel's prefetch: all of it in the
        // first tile asks memory for a 768-deep, 16-wide panel (48 KiB) within one tile's
        // time, most of what one core draws, and that tile waits on it (measured on
        // transformers' weight GEMMs:
        // bench/results/measurements-behind-defaults.md).
        // Skinny GEMMs (a decoder's or a short sequence's weight GEMMs) too: their panels are
        // streamed by the first row tile with little compute to hide the stream behind, which
        // the prefetch covers where the hardware prefetcher does not keep up. Machines differ
        // here (one measured a skinny LM head slower with it, another whole decoders and
        // encoders faster: bench/results/measurements-behind-defaults.md); the tuner, which
        // times a weight evicted, settles it per machine.
        // The bytes that count are all of B's matrices: a batch of distinct B matrices (a
        // Winograd conv's transformed weights, one K x N matrix per point of the tile) is
        // streamed whole by every run even where each matrix fits the L2 (the next panel
        // after a matrix's last is the next matrix's first).
        int64_t bMatrices = p.dims.size() > 5 ? p.dims[5] : 1;
        int64_t pf = bMatrices * k * n * eb >= p.cpu.l2Bytes && !produced ? 4 : 0;
        return Config{{"mk", 1},  {"mr", mr}, {"nr", nr}, {"ku", 1},  {"order", 0}, {"kc", kc},
                      {"mc", mc}, {"nc", nc}, {"pb", pb}, {"pa", pa}, {"par", par}, {"pf", pf}};
      }
      // Wide tiles for few rows (matrix-vector like), 6 x 2 vectors otherwise.
      int64_t nr = m <= 2 ? 4 * vw : 2 * vw;
      while (nr > 8 && nr > n)
        nr /= 2;
      nr = std::max<int64_t>(nr, 8);
      // LLVM fully unrolls a column-tile loop of two trips and its SLP vectorizer then leaves
      // the accumulators scalar: avoid exactly two column tiles. The tuner still measures such
      // points.
      if (n / nr == 2 && n % nr == 0) {
        if (fitsRegisters(std::min<int64_t>(m, 6), 2 * nr, vw, regs))
          nr *= 2;
        else if (nr > 8)
          nr /= 2;
      }
      int64_t mr = 1;
      for (int64_t cand : {6, 5, 4, 3, 2, 1})
        if (cand <= m && fitsRegisters(cand, nr, vw, regs)) {
          mr = cand;
          break;
        }
      return Config{{"mk", 0}, {"mr", mr}, {"nr", nr}, {"ku", 1}, {"order", 0}, {"kc", 0},
                    {"mc", 0}, {"nc", 0},  {"pb", 0},  {"pa", 0}, {"par", par}, {"pf", 0}};
    };
    return s;
  }();
  return space;
}

} // namespace nnc::lower
