// conv_integer's CPU templates: "conv_integer.im2col_tiles" (group 1: im2col of u8 patches
// times the weight as u8s8s32 GemmTiles, the integer GEMM's microkernel) and
// "conv_integer.depthwise" (a direct integer loop nest vectorized along output rows).
//
// conv_integer.im2col_tiles, the integer GEMM C[p, m] = sum_k A[p, k] * B[k, m] over the
// output positions p (rows) and channels m (columns), k = (tap, c) in NHWC order:
//  1. B: the weight as the tile's panels of nr columns and groups of 4 k rows (an i8 weight
//     that pack-gemm-weights packed at compile time is read in place, with its column sums
//     from operand 4; otherwise it is packed here, a u8 one shifted to i8 by w - 128), and
//     colsum[m] = sum_k B'[k, m] when x's zero point term can be nonzero.
//  2. Per image, x transposed to NHWC with its padding made explicit: u8 (an i8 x as
//     x + 128), the padding holding x's (shifted) zero point, so that a padded tap adds
//     (x_zp - x_zp) * w = 0 like the interpreter's zero padding of x - x_zp. A channels_last
//     x (layout-nhwc) is copied row by row; a u8 one whose windows need no padding is not
//     copied at all: its rows are read where they are.
//  3. Per block of output rows, in parallel: the rows' patches (A, u8, K rounded up to 4 with
//     zeros; a pointwise conv whose C is a multiple of 4 reads the NHWC copy in place), their
//     sums rowsum[p] when w's zero point term can be nonzero, the GemmTiles into the block's
//     i32 [rows, M] sums, and the block stored (transposed to an NCHW output; a channels_last
//     output has the sums' own [positions, channels] order) with the zero
//     points by compensation: with ZA = x_zp (+ 128 for an i8 x) and ZB = w_zp[m] (- 128 for
//     a u8 w),
//       y[m, p] = C[p, m] - ZA * colsum[m] - ZB * rowsum[p] + K * ZA * ZB,
//     all in wrapping i32 arithmetic, so the identity holds exactly for any K. A fused
//     group's epilogue (the requantization: cast, scale, bias, relu, residual, quantize)
//     applies to y there, channels innermost, so the group's u8 result is stored once,
//     without an i32 copy of it.
//     The block's patches, row sums and i32 sums are the thread's own scratch (perThread),
//     reused block after block while they are in cache. Where the packed weight fits in half
//     the L1 and an epilogue is fused, the row tiles run outside the panels instead, and each
//     row tile is finished right after its tiles from a row tile's worth of sums, still in L1
//     (the block's sums, 400 KB for a 56 x 56 x 256 layer, went through the L2).
//
// conv_integer.depthwise (group == C == M): x - x_zp per image and channel as i16 with the
// padding explicit (zeros: the padded taps add nothing), then per (image, channel, output
// row) the row in vectors of up to 16 columns (the last vector moved back to end at the row's
// end), each tap a broadcast weight (w - w_zp) times 16 inputs. It leaves a fused group's
// epilogue to the planner's pass: applied to each vector of sums before its store, it
// measured slower on MobileNetV2's Q/DQ export.
#include <algorithm>

#include "ConvInteger.h"
#include "Epilogue.h"
#include "Gemm.h"
#include "Templates.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

using namespace nnl;
using kir::Expr;
using kir::Stmt;

namespace {

Expr c32(int64_t v) {
  return kir::constant(double(v), DType::I32);
}

/// The largest number of taps the depthwise template unrolls per vector of outputs.
constexpr int64_t kMaxDepthwiseTaps = 64;

/// The parallel groups of panels a conv with shared patches is split into, at the least
/// (fewer where it has fewer panels): each group makes its own copy of nothing, so more
/// groups than threads only balance the work.
constexpr int64_t kMinPanelGroups = 4;

/// The depth of a k block of a conv with shared patches: a panel's block (depth x nr bytes)
/// takes half of L1, where it stays while every row tile reads it beside the rows' slices.
/// Blocks of 256 (8 KiB of a 32-column panel) made a GemmTile call and a reload of the sums
/// per 64 k groups, which cost ResNet-50's int8 layer-4 convs a fifth of their time.
int64_t sharedKBlock(const CpuTarget &cpu, int64_t nr) {
  return std::max<int64_t>(256, cpu.l1dBytes / 2 / std::max<int64_t>(nr, 1) / 4 * 4);
}

} // namespace

bool convIntegerTilesApply(const Node &node) {
  Expected<IntConv> f = analyzeConvInteger(node);
  if (!f)
    return false; // the generic lowerer reports why
  return f->s.group == 1 && f->s.outN > 0 && f->s.C > 0;
}

bool convIntegerDepthwiseApplies(const Node &node) {
  Expected<IntConv> f = analyzeConvInteger(node);
  if (!f)
    return false; // the generic lowerer reports why
  const ConvSetup &s = f->s;
  return !f->last && s.group > 1 && s.cg == 1 && s.mg == 1 && s.outN > 0 &&
         s.geo.kernelSize <= kMaxDepthwiseTaps;
}

Expected<Kernels> lowerConvIntegerTiles(const Node &node, const std::string &prefix,
                                        const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(IntConv f, analyzeConvInteger(node));
  const ConvSetup &s = f.s;
  const ConvGeometry &geo = s.geo;
  const size_t D = geo.axes.size();
  const int64_t N = s.N, C = s.C, M = s.M, P = geo.outSize, KS = geo.kernelSize;
  const int64_t K = C * KS, Kp = (K + 3) / 4 * 4, groups = Kp / 4;
  Extents padded = paddedExtents(geo);
  const int64_t PS = numElementsOf(padded);
  std::vector<int64_t> padStride = stridesOf(padded), outStride = stridesOf(geo.outSpatial),
                       kStride = stridesOf(geo.kernel), inStride = stridesOf(geo.inSpatial);
  bool pointwise = true;
  for (const WindowAxis &a : geo.axes)
    pointwise = pointwise && a.kernel == 1 && a.stride == 1 && a.padBegin == 0 && a.out == a.in;
  // A u8 channels_last input that needs no padding is read where it is (no NHWC copy).
  bool unpadded = true;
  for (size_t d = 0; d < D; ++d)
    unpadded = unpadded && padded[d] == geo.inSpatial[d];
  const bool direct = f.last && !f.xSigned && unpadded;
  // A pointwise conv's NHWC rows are its A when they are whole groups of 4.
  const bool inPlace = pointwise && Kp == K;

  // The tile and the parallel split from the integer GEMM's space (igemm_cpu).
  tuning::Problem prob;
  prob.kind = "igemm_cpu";
  prob.signature = fmt::format(
      "igemm_cpu conv {}x{} n{} p{} k{} m{} za{} zb{}{}", dtypeName(node.operand(0)->dtype()),
      dtypeName(node.operand(1)->dtype()), N, P, K, M, f.zx, f.zw, f.zwPerChannel);
  // A weight packed at compile time (i8 only) fixes the panels' width.
  const bool prepacked = f.packedNr > 0 && !f.wUnsigned;
  prob.dims = {N, P, Kp, M, prepacked ? f.packedNr : 0};
  prob.flops = 2.0 * double(N) * double(P) * double(K) * double(M);
  tuning::Config cfg = tuning::chooseConfig(prob, opts);
  const int64_t mr = std::max<int64_t>(1, std::min(knob(cfg, "mr", 4), P));
  const int64_t nr = prepacked ? f.packedNr : knob(cfg, "nr", 16);
  const bool par = knob(cfg, "par", 1) == 1;
  const int64_t panels = (M + nr - 1) / nr, panelSize = groups * 4 * nr;
  const bool zaTerm = f.zx || f.xSigned, zbTerm = f.zw || f.wUnsigned;
  // Rows per parallel block: whole tiles, the block's patches (about 32 KiB) in cache while
  // every panel passes them, and at least 8 blocks where there are rows enough (a share for
  // each thread of a small image).
  int64_t rb = std::max<int64_t>(mr, std::min<int64_t>(std::max<int64_t>(32768 / Kp, mr), P / 8));
  rb = std::max<int64_t>(mr, rb / mr * mr);
  // A weight too big to stay in the L2 from one block to the next (a deep layer: few
  // positions, many channels) would stream from memory once per block of rows. Where the
  // image's patches fit in half the L2, they are made once, shared, and the threads split
  // the panels instead: groups of whole panels, each group's tiles over all rows, so every
  // weight byte is read once (ResNet-50's 7x7 3x3 convs: 7 blocks of 8 rows each streamed
  // all 2.4 MB of the weight).
  const int64_t l2 = cpuOf(opts).l2Bytes;
  int64_t cg = 1;
  if (Kp * M > l2 / 2 && P * Kp <= l2 / 2 && M % nr == 0 && panels >= 2 && par) {
    cg = panels;
    for (int64_t d = 1; d <= panels; ++d)
      if (panels % d == 0 && d >= kMinPanelGroups) {
        cg = d;
        break;
      }
  }
  const bool shared = cg > 1;
  if (shared)
    rb = P;
  const int64_t fullBlocks = P / rb, lastRows = P % rb;

  KernelBuilder kb(node, prefix);
  // A fused group's epilogue applies at the output's stores (step 3); its scalar inputs are
  // read once, before the kernel's loops.
  Epilogue *ep = opts ? opts->epilogue : nullptr;
  std::optional<Epilogue::Inputs> epIn;
  std::vector<Stmt> epHoisted;
  const int xb = kb.operand(0), wb = kb.operand(1);
  const int ob = ep ? ep->resultBuffer(kb) : kb.result(0);
  if (ep)
    epIn = ep->inputsOf(kb);
  const int bp = prepacked ? wb : kb.scratch(0, DType::I8, panels * panelSize);
  const int xp = direct ? xb : kb.scratch(1, DType::U8, PS * C);
  // Per block (the thread's own): patches, i32 sums and row sums of its rows, indexed from
  // the block's first row (the NHWC copy that a pointwise conv reads in place: from image
  // row 0).
  const int64_t blockRows = std::min(rb, P);
  const int ap = inPlace ? xp : kb.scratch(2, DType::U8, blockRows * Kp, /*perThread=*/!shared);
  // A weight small enough to stay in L1 while every row tile passes all of it: row tiles
  // outside, and each finished from a tile of sums that stays in L1 (not a block's).
  const bool rowsOuter = !shared && ep && panels * panelSize <= cpuOf(opts).l1dBytes / 2;
  const int cs = kb.scratch(3, DType::I32, (rowsOuter ? std::min(mr, P) : blockRows) * M,
                            /*perThread=*/true);
  const bool sumsGiven = prepacked && f.colSums;
  const int colsum = !zaTerm ? -1 : sumsGiven ? kb.operand(4) : kb.scratch(4, DType::I32, M);
  const int rowsum = zbTerm ? kb.scratch(5, DType::I32, blockRows, /*perThread=*/!shared) : -1;
  // Per channel: ZB, and ZA * colsum - K * ZA * ZB (the terms that do not vary along p).
  const int zbv = zbTerm ? kb.scratch(6, DType::I32, M) : -1;
  const int mterm = zaTerm ? kb.scratch(7, DType::I32, M) : -1;
  kir::Schedule sched;
  auto parallel = [&](const std::string &loop, int64_t extent) {
    if (par && extent > 1)
      sched.steps.push_back({kir::ScheduleStep::Parallel, loop, 0, {}});
  };
  std::vector<Stmt> all;

  // ZA as i32 and as the u8 the padding holds.
  Expr za = convZeroPoint(kb, f, 2, i64(0));
  if (f.xSigned)
    za = kir::add(za, c32(128));

  // Step 1: B' panels, element (kk, col) = w[col, c, tap] with kk = tap * C + c, zero past K
  // and past M.
  if (!prepacked) {
    std::string qv;
    all.push_back(packIntGemmPanels(
        kb, bp, K, M, nr, f.wUnsigned,
        [&](Expr kc, Expr cc) {
          return kb.load(wb, f.wIndex(cc, kir::mod(kc, i64(C)), kir::div(kc, i64(C))));
        },
        qv));
    parallel(qv, panels);
  }
  if (zaTerm && !sumsGiven) {
    std::string cv = kb.freshName("cj"), sv = kb.freshName("cs"), pv = kb.freshName("ck");
    Expr cj = kir::var(cv), pk = kir::var(pv);
    Expr idx =
        kir::add(kir::add(kir::mul(kir::div(cj, i64(nr)), i64(panelSize)),
                          kir::mul(kir::mod(cj, i64(nr)), i64(4))),
                 kir::add(kir::mul(kir::div(pk, i64(4)), i64(4 * nr)), kir::mod(pk, i64(4))));
    Expr sum = kir::var(sv, DType::I32);
    all.push_back(kir::forLoop(
        cv, i64(M),
        kir::block(
            {kir::decl(sv, DType::I32, c32(0)),
             kir::forLoop(pv, i64(K),
                          kir::assign(sv, kir::add(sum, kir::cast(kb.load(bp, idx), DType::I32)))),
             kb.store(colsum, cj, sum)})));
  }

  if (zaTerm || zbTerm) {
    std::string mv = kb.freshName("zm");
    Expr m = kir::var(mv);
    Expr zb = convZeroPoint(kb, f, 3, m);
    if (f.wUnsigned)
      zb = kir::sub(zb, c32(128));
    std::vector<Stmt> perM;
    Expr zbV = zbTerm ? kb.bind(perM, "zb", DType::I32, zb) : c32(0);
    if (zbTerm)
      perM.push_back(kb.store(zbv, m, zbV));
    if (zaTerm) {
      Expr t = kir::mul(za, kb.load(colsum, m));
      if (zbTerm)
        t = kir::sub(t, kir::mul(c32(K), kir::mul(za, zbV)));
      perM.push_back(kb.store(mterm, m, t));
    }
    all.push_back(kir::forLoop(mv, i64(M), kir::block(perM)));
  }

  std::vector<Stmt> perImage;
  std::string nv = kb.freshName("n");
  Expr n = N > 1 ? kir::var(nv) : i64(0);
  // Image n's first element in xp: x itself, or the copy of one image.
  Expr xImage = direct ? kir::mul(n, i64(PS * C)) : i64(0);
  // Step 2: the padded NHWC copy of image n, one pass over the padded positions writing each
  // once along channels (ZA where the input does not cover; filling it all with ZA and then
  // copying the input's channels to their strided places measured slower).
  // x as the tiles' u8: an i8 x shifted by 128.
  auto asU8 = [&](Expr v) {
    return f.xSigned ? kir::cast(kir::add(kir::cast(v, DType::I32), c32(128)), DType::U8) : v;
  };
  if (!direct && f.last && D > 0) {
    // A channels-last x: each padded row is the left padding, the input row's W x C
    // contiguous bytes and the right padding, three runs that vectorize (per element, a
    // compare and a select of clamped loads: a 3-channel stem conv's copy ran a byte at a
    // time). The rows outside the input along the outer axes hold ZA throughout.
    Extents outer(padded.begin(), padded.end() - 1);
    std::vector<std::string> names;
    Stmt fill = kb.loopNest(
        outer,
        [&](const std::vector<Expr> &pos) {
          std::vector<Expr> conds, inPos(D), padPos(D);
          for (size_t d = 0; d + 1 < D; ++d) {
            Expr p = kir::sub(pos[d], i64(geo.axes[d].padBegin));
            conds.push_back(inRange(p, 0, geo.inSpatial[d]));
            inPos[d] = kir::max(kir::min(p, i64(geo.inSpatial[d] - 1)), i64(0));
            padPos[d] = pos[d];
          }
          inPos[D - 1] = i64(0);
          padPos[D - 1] = i64(0);
          Expr cond = allOf(conds);
          std::vector<Stmt> row;
          Expr dst = kb.bind(row, "xd", DType::I64, kir::mul(flatIndex(padPos, padStride), i64(C)));
          Expr src =
              kb.bind(row, "xs", DType::I64, f.xIndex(n, i64(0), flatIndex(inPos, inStride)));
          Expr zpU8 = kir::cast(za, DType::U8);
          const auto [left, mid, right] = paddedRowRuns(geo, C);
          auto run = [&](int64_t from, int64_t count, bool input) {
            if (count <= 0)
              return;
            std::string jv = kb.freshName("xj");
            Expr j = kir::var(jv), val = zpU8;
            if (input) {
              Expr v = kb.load(xb, kir::add(src, j));
              Expr vu = asU8(v);
              val = isTrue(cond) ? vu : kir::select(cond, vu, zpU8);
            }
            row.push_back(kir::forLoop(jv, i64(count),
                                       kb.store(xp, kir::add(dst, kir::add(i64(from), j)), val)));
          };
          run(0, left, false);
          run(left, mid, true);
          run(left + mid, right, false);
          return kir::block(row);
        },
        &names);
    perImage.push_back(fill);
    if (!names.empty())
      parallel(names[0], padded[0]);
  } else if (!direct) {
    std::vector<std::string> names;
    Extents loops = padded;
    Stmt fill = kb.loopNest(
        loops,
        [&](const std::vector<Expr> &pos) {
          std::vector<Expr> conds, inPos(D);
          for (size_t d = 0; d < D; ++d) {
            inPos[d] = kir::sub(pos[d], i64(geo.axes[d].padBegin));
            conds.push_back(inRange(inPos[d], 0, geo.inSpatial[d]));
          }
          Expr cond = allOf(conds);
          Expr inFlat = flatIndex(inPos, inStride), padFlat = flatIndex(pos, padStride);
          std::string cv = kb.freshName("xc");
          Expr c = kir::var(cv);
          // Loads clamped into range: the select keeps the padding's value.
          Expr at = f.xIndex(n, c, kir::max(kir::min(inFlat, i64(geo.inSize - 1)), i64(0)));
          Expr v = kb.load(xb, at);
          Expr vu = asU8(v);
          Expr val = isTrue(cond) ? vu : kir::select(cond, vu, kir::cast(za, DType::U8));
          return kir::forLoop(cv, i64(C),
                              kb.store(xp, kir::add(kir::mul(padFlat, i64(C)), c), val));
        },
        &names);
    perImage.push_back(fill);
    if (!names.empty())
      parallel(names[0], padded[0]);
  }

  // Step 3: blocks of output rows. Row r of a block is output position row0 + r; the block's
  // patches, row sums and sums are indexed by r, a pointwise conv's A in place by position.
  // `part`: Whole, the whole block; with shared patches, Patches (the patches and row sums,
  // rows in parallel) or Group (the tiles and stores of panel group g).
  enum class Part { Whole, Patches, Group };
  const int64_t groupPanels = (M / nr) / cg, groupCols = groupPanels * nr;
  auto block = [&](Expr row0, int64_t rows, Part part, Expr g) {
    std::vector<Stmt> st;
    auto aRowAt = [&](Expr r) {
      if (!inPlace)
        return kir::mul(std::move(r), i64(Kp));
      return kir::add(xImage, kir::mul(kir::add(row0, std::move(r)), i64(Kp)));
    };
    // Patches: row r, tap t: C bytes of the NHWC copy.
    if (!inPlace && part != Part::Group) {
      std::string pv = kb.freshName("ar");
      Expr p = kir::add(row0, kir::var(pv));
      std::vector<Stmt> row;
      Expr base = i64(0);
      for (size_t d = 0; d < D; ++d) {
        Expr o = kir::mod(kir::div(p, i64(outStride[d])), i64(geo.outSpatial[d]));
        base = kir::add(base, kir::mul(o, i64(geo.axes[d].stride * padStride[d])));
      }
      Expr src0 = kb.bind(row, "asrc", DType::I64, kir::add(xImage, kir::mul(base, i64(C))));
      Expr dst0 = kb.bind(row, "adst", DType::I64, aRowAt(kir::var(pv)));
      // The last kernel axis, undilated, and the channels are one contiguous run in both the
      // copy and the patch (KW * C bytes: 9 for a 3 x 3 stem on 3 channels): one loop,
      // vectorized and independent (the copy and the patches are different scratch), which
      // left to LLVM was copied byte by byte, every store ordered before the next load.
      const bool mergeLast = geo.axes[D - 1].dilation == 1;
      const size_t tapDims = mergeLast ? D - 1 : D;
      Nest taps;
      std::vector<Expr> k(D);
      for (size_t d = 0; d < tapDims; ++d)
        k[d] = taps.add(kb, geo.kernel[d], "at");
      Expr tapOff = i64(0), tapFlat = i64(0);
      for (size_t d = 0; d < tapDims; ++d) {
        tapOff = kir::add(tapOff, kir::mul(k[d], i64(geo.axes[d].dilation * padStride[d] * C)));
        tapFlat = kir::add(tapFlat, kir::mul(k[d], i64(kStride[d] * C)));
      }
      std::string cv = kb.freshName("ac");
      Expr c = kir::var(cv);
      const int64_t run = mergeLast ? geo.kernel[D - 1] * C : C;
      if (run >= 8) {
        sched.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {cv}});
        sched.steps.push_back({kir::ScheduleStep::Vectorize, cv, 0, {}});
      }
      row.push_back(
          taps.wrap(kir::forLoop(cv, i64(run),
                                 kb.store(ap, kir::add(dst0, kir::add(tapFlat, c)),
                                          kb.load(xp, kir::add(src0, kir::add(tapOff, c)))))));
      if (Kp > K) {
        std::string zv = kb.freshName("az");
        row.push_back(kir::forLoop(zv, i64(Kp - K),
                                   kb.store(ap, kir::add(dst0, kir::add(i64(K), kir::var(zv))),
                                            kir::constant(0, DType::U8))));
      }
      st.push_back(kir::forLoop(pv, i64(rows), kir::block(row)));
      if (part == Part::Patches)
        parallel(pv, rows);
    }
    if (zbTerm && part != Part::Group) {
      std::string pv = kb.freshName("rr"), sv = kb.freshName("rs"), qv = kb.freshName("rk");
      Expr r = kir::var(pv);
      Expr sum = kir::var(sv, DType::I32);
      st.push_back(kir::forLoop(
          pv, i64(rows),
          kir::block(
              {kir::decl(sv, DType::I32, c32(0)),
               kir::forLoop(
                   qv, i64(K),
                   kir::assign(
                       sv, kir::add(sum, kir::cast(kb.load(ap, kir::add(aRowAt(r), kir::var(qv))),
                                                   DType::I32)))),
               kb.store(rowsum, r, sum)})));
      if (part == Part::Patches)
        parallel(pv, rows);
    }
    if (part == Part::Patches)
      return kir::block(st);
    // The tiles: panels outside, row tiles inside (the panel stays in cache).
    int64_t tiles = rows / mr, mRem = rows % mr, fullPanels = M / nr, nRem = M % nr;
    // A tile over k in [k0, k0 + kc), adding to the sums after the first k block.
    auto tile = [&](int64_t tr, int64_t tc, Expr r0, Expr panel, Expr k0, int64_t kc,
                    bool accumulate, Expr cRow = nullptr) {
      kir::GemmTileShape sh;
      sh.elems = kir::GemmElems::U8S8S32;
      sh.a = ap;
      sh.b = bp;
      sh.mr = tr;
      sh.nr = tc;
      sh.lda = Kp;
      sh.ak = 1;
      sh.ldb = 4 * nr;
      sh.ldc = M;
      sh.accumulate = accumulate;
      return kb.gemmTile(sh, cs, kir::add(aRowAt(r0), k0),
                         kir::add(kir::mul(panel, i64(panelSize)), kir::mul(k0, i64(nr))),
                         kir::add(kir::mul(cRow ? cRow : r0, i64(M)), kir::mul(panel, i64(nr))),
                         i64(kc));
    };
    auto rowTiles = [&](int64_t cols, Expr panel, Expr k0, int64_t kc, bool accumulate) {
      std::vector<Stmt> body;
      if (tiles > 0) {
        std::string tv = kb.freshName("tr");
        body.push_back(kir::forLoop(
            tv, i64(tiles),
            tile(mr, cols, kir::mul(kir::var(tv), i64(mr)), panel, k0, kc, accumulate)));
      }
      if (mRem > 0)
        body.push_back(tile(mRem, cols, i64(tiles * mr), panel, k0, kc, accumulate));
      return kir::block(body);
    };
    // With shared patches all rows pass each panel: in k blocks of about sharedKBlock, so
    // that the panel's block (kc x nr bytes) stays in L1 while every row tile reads it (the
    // whole panel, 4608 x 32 bytes for a 3x3 conv of 512 channels, streamed from L2 per tile).
    const int64_t kBlock = sharedKBlock(cpuOf(opts), nr);
    const int64_t kBlocks = part == Part::Group ? (Kp + kBlock - 1) / kBlock : 1;
    const int64_t kc = (groups + kBlocks - 1) / kBlocks * 4, kLast = Kp - (kBlocks - 1) * kc;
    auto panelBody = [&](int64_t cols, Expr panel) {
      if (kBlocks == 1)
        return rowTiles(cols, panel, i64(0), Kp, false);
      std::vector<Stmt> body{rowTiles(cols, panel, i64(0), kc, false)};
      if (kBlocks > 2) {
        std::string kv = kb.freshName("kb");
        body.push_back(kir::forLoop(
            kv, i64(kBlocks - 2),
            rowTiles(cols, panel, kir::mul(kir::add(kir::var(kv), i64(1)), i64(kc)), kc, true)));
      }
      body.push_back(rowTiles(cols, panel, i64((kBlocks - 1) * kc), kLast, true));
      return kir::block(body);
    };
    // The rows [rBase, rBase + count) stored to the output (NCHW, or channels_last: the sums'
    // own layout) with the compensation terms; row rBase + r's sums are row r of the scratch.
    auto stores = [&](Expr rBase, int64_t count) -> Stmt {
      // Group g's columns: m is a local of extent M (as the position is below).
      std::string mv = kb.freshName("om"), rv = kb.freshName("op");
      std::string colv = part == Part::Group ? kb.freshName("ocol") : mv;
      const int64_t cols = part == Part::Group ? groupCols : M;
      Expr m = kir::var(colv), r = kir::add(rBase, kir::var(rv));
      auto withCol = [&](std::vector<Stmt> body) {
        if (part == Part::Group)
          body.insert(body.begin(), kir::decl(colv, DType::I64,
                                              kir::add(kir::mul(g, i64(groupCols)), kir::var(mv))));
        return kir::block(body);
      };
      Expr v = kb.load(cs, kir::add(kir::mul(kir::var(rv), i64(M)), m));
      if (zbTerm)
        v = kir::sub(v, kir::mul(kb.load(zbv, m), kb.load(rowsum, r)));
      if (zaTerm)
        v = kir::sub(v, kb.load(mterm, m));
      Expr at = f.yIndex(n, m, kir::add(row0, r));
      if (!ep && f.last) {
        sched.steps.push_back({kir::ScheduleStep::Vectorize, mv, 0, {}});
        return kir::forLoop(rv, i64(count),
                            kir::forLoop(mv, i64(cols), withCol({kb.store(ob, at, v)})));
      }
      if (!ep) // read along channels, written along positions (tiles of 8 x 8 measured no faster)
        return kir::forLoop(mv, i64(cols),
                            withCol({kir::forLoop(rv, i64(count), kb.store(ob, at, v))}));
      // Through the fused epilogue, channels innermost: the sums, the per-channel scales and
      // biases are read contiguously and the epilogue vectorizes over channels, in loops as
      // long as M. (Positions innermost, the loops are as long as a block's rows, a few for
      // deep layers, and ResNet-50's Q/DQ export measured slower than with the epilogue as a
      // pass.) The channels are independent: no run-time overlap checks. The output position
      // is a local of extent P, so that the epilogue's inputs are indexed by (image, channel,
      // position) without divisions.
      std::string posv = kb.freshName("opos");
      std::vector<Stmt> inner{kir::decl(posv, DType::I64, kir::add(row0, r))};
      Expr epAt = f.yIndex(n, m, kir::var(posv));
      LoopExtents env{{colv, M}, {posv, P}, {nv, N}};
      inner.push_back(kb.store(ob, at, ep->apply(epAt, v, env, *epIn, inner, epHoisted)));
      sched.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {mv}});
      sched.steps.push_back({kir::ScheduleStep::Vectorize, mv, 0, {}});
      return kir::forLoop(rv, i64(count), kir::forLoop(mv, i64(cols), withCol(inner)));
    };
    if (rowsOuter && part == Part::Whole) {
      // Row tiles outside, every panel inside (the whole weight stays in L1), each row tile
      // finished right after its tiles from the thread's tile of sums while it is in L1.
      auto rowTile = [&](Expr r0, int64_t tr) {
        std::vector<Stmt> body;
        if (fullPanels > 0) {
          Nest q;
          Expr panel = q.add(kb, fullPanels, "tq");
          body.push_back(q.wrap(tile(tr, nr, r0, panel, i64(0), Kp, false, i64(0))));
        }
        if (nRem > 0)
          body.push_back(tile(tr, nRem, r0, i64(fullPanels), i64(0), Kp, false, i64(0)));
        body.push_back(stores(r0, tr));
        return kir::block(body);
      };
      if (tiles > 0) {
        Nest t;
        Expr tr = t.add(kb, tiles, "tr");
        st.push_back(t.wrap(rowTile(kir::mul(tr, i64(mr)), mr)));
      }
      if (mRem > 0)
        st.push_back(rowTile(i64(tiles * mr), mRem));
      return kir::block(st);
    }
    if (part == Part::Group) { // group g's panels (whole ones: M is a multiple of nr)
      std::string qv = kb.freshName("tq");
      st.push_back(
          kir::forLoop(qv, i64(groupPanels),
                       panelBody(nr, kir::add(kir::mul(g, i64(groupPanels)), kir::var(qv)))));
    } else if (fullPanels > 0) {
      std::string qv = kb.freshName("tq");
      st.push_back(kir::forLoop(qv, i64(fullPanels), panelBody(nr, kir::var(qv))));
    }
    if (nRem > 0)
      st.push_back(panelBody(nRem, i64(fullPanels)));
    st.push_back(stores(i64(0), rows));
    return kir::block(st);
  };
  if (shared) {
    perImage.push_back(block(i64(0), P, Part::Patches, nullptr));
    std::string gv = kb.freshName("grp");
    perImage.push_back(kir::forLoop(gv, i64(cg), block(i64(0), P, Part::Group, kir::var(gv))));
    parallel(gv, cg);
  } else {
    // The rows past the last whole block are the parallel loop's last step (run by a thread
    // that is free then; after the loop, the other threads waited for them).
    std::string bv = kb.freshName("blk");
    Expr b = kir::var(bv);
    Stmt whole = fullBlocks > 0 ? block(kir::mul(b, i64(rb)), rb, Part::Whole, nullptr) : nullptr;
    Stmt last =
        lastRows > 0 ? block(i64(fullBlocks * rb), lastRows, Part::Whole, nullptr) : nullptr;
    const bool joined = whole && last && par;
    if (whole) {
      const int64_t steps = fullBlocks + (joined ? 1 : 0);
      perImage.push_back(kir::forLoop(
          bv, i64(steps), joined ? kir::ifThen(kir::lt(b, i64(fullBlocks)), whole, last) : whole));
      parallel(bv, steps);
    }
    if (last && !joined)
      perImage.push_back(last);
  }
  all.push_back(N > 1 ? kir::forLoop(nv, i64(N), kir::block(perImage)) : kir::block(perImage));
  if (ep) {
    ep->markApplied();
    epHoisted.insert(epHoisted.end(), all.begin(), all.end());
    all = std::move(epHoisted);
  }
  kir::Kernel k = kb.finish(kir::block(all), sched);
  k.flops = prob.flops;
  k.flopsElems = kir::GemmElems::U8S8S32;
  return Kernels{std::move(k)};
}

Expected<Kernels> lowerConvIntegerDepthwise(const Node &node, const std::string &prefix) {
  NNC_ASSIGN_OR_RETURN(IntConv f, analyzeConvInteger(node));
  const ConvSetup &s = f.s;
  const ConvGeometry &geo = s.geo;
  const size_t D = geo.axes.size();
  const int64_t N = s.N, C = s.C, P = geo.outSize, KS = geo.kernelSize;
  Extents padded = paddedExtents(geo);
  const int64_t PS = numElementsOf(padded);
  std::vector<int64_t> padStride = stridesOf(padded), kStride = stridesOf(geo.kernel),
                       inStride = stridesOf(geo.inSpatial), outStride = stridesOf(geo.outSpatial);
  KernelBuilder kb(node, prefix);
  const int xb = kb.operand(0), wb = kb.operand(1), ob = kb.result(0);
  const int xp = kb.scratch(0, DType::I16, N * C * PS);
  kir::Schedule sched;
  std::vector<Stmt> all;
  // x - x_zp as i16 with the padding explicit (zeros), per image and channel: zeros, then the
  // input's rows at their padded place (both plain runs that vectorize; a select per element
  // over the padded positions did not).
  {
    Nest zero;
    Expr nc = zero.add(kb, N * C, "pc");
    Expr i = zero.add(kb, PS, "pz");
    all.push_back(
        zero.wrap(kb.store(xp, kir::add(kir::mul(nc, i64(PS)), i), kir::constant(0, DType::I16))));
    Nest copy;
    Expr cc = copy.add(kb, N * C, "pc");
    std::vector<Expr> in(D), at(D);
    for (size_t d = 0; d < D; ++d) {
      in[d] = copy.add(kb, geo.inSpatial[d], "pi");
      at[d] = kir::add(in[d], i64(geo.axes[d].padBegin));
    }
    Expr v = kir::sub(
        kir::cast(kb.load(xb, kir::add(kir::mul(cc, i64(geo.inSize)), flatIndex(in, inStride))),
                  DType::I32),
        convZeroPoint(kb, f, 2, i64(0)));
    all.push_back(copy.wrap(kb.store(xp, kir::add(kir::mul(cc, i64(PS)), flatIndex(at, padStride)),
                                     kir::cast(v, DType::I16))));
    if (N * C > 1 && N * C * PS >= (int64_t(1) << 15)) {
      sched.steps.push_back({kir::ScheduleStep::Parallel, zero.loops[0].first, 0, {}});
      sched.steps.push_back({kir::ScheduleStep::Parallel, copy.loops[0].first, 0, {}});
    }
  }
  // Per (image, channel, output row): vectors of L columns along the last output axis.
  const WindowAxis &aw = geo.axes[D - 1];
  const int64_t OW = aw.out, rowsPer = P / OW, L = std::min<int64_t>(16, OW);
  Nest outer;
  Expr q = outer.add(kb, N * C * rowsPer, "q");
  Expr nc = kir::div(q, i64(rowsPer)), r = kir::mod(q, i64(rowsPer));
  Expr c = kir::mod(nc, i64(C));
  // The row's padded offset: its outer output coordinates times their strides.
  Expr rowBase = kir::mul(nc, i64(PS));
  for (size_t d = 0; d + 1 < D; ++d) {
    Expr o = kir::mod(kir::div(r, i64(outStride[d] / OW)), i64(geo.outSpatial[d]));
    rowBase = kir::add(rowBase, kir::mul(o, i64(geo.axes[d].stride * padStride[d])));
  }
  std::vector<Stmt> row;
  Expr base = kb.bind(row, "drow", DType::I64, rowBase);
  Expr zw = kb.bind(row, "dzw", DType::I32, convZeroPoint(kb, f, 3, c));
  std::vector<Expr> wts;
  for (int64_t t = 0; t < KS; ++t)
    wts.push_back(kb.bind(
        row, "dw", DType::I32,
        kir::sub(kir::cast(kb.load(wb, kir::add(kir::mul(c, i64(KS)), i64(t))), DType::I32), zw)));
  int64_t vectors = (OW + L - 1) / L;
  std::string vN = kb.freshName("v"), lN = kb.freshName("l");
  Expr ow = kir::add(kir::min(kir::mul(kir::var(vN), i64(L)), i64(OW - L)), kir::var(lN));
  std::string acc = kb.freshName("acc");
  std::vector<Stmt> st{kir::decl(acc, DType::I32, c32(0))};
  for (int64_t t = 0; t < KS; ++t) {
    Expr off = kir::mul(ow, i64(aw.stride));
    for (size_t d = 0; d < D; ++d) {
      int64_t kd = (t / kStride[d]) % geo.kernel[d];
      off = kir::add(off, i64(kd * geo.axes[d].dilation * padStride[d]));
    }
    Expr xv = kir::cast(kb.load(xp, kir::add(base, off)), DType::I32);
    st.push_back(kir::assign(acc, kir::add(kir::var(acc, DType::I32), kir::mul(xv, wts[t]))));
  }
  Expr outAt = kir::add(kir::add(kir::mul(nc, i64(P)), kir::mul(r, i64(OW))), ow);
  st.push_back(kb.store(ob, outAt, kir::var(acc, DType::I32)));
  row.push_back(kir::forLoop(vN, i64(vectors), kir::forLoop(lN, i64(L), kir::block(st))));
  kir::Schedule rs = parallelOuter(outer, N * C * P * KS);
  for (const kir::ScheduleStep &step : rs.steps)
    if (step.kind == kir::ScheduleStep::Parallel)
      sched.steps.push_back(step);
  if (L > 1)
    sched.steps.push_back({kir::ScheduleStep::Vectorize, lN, 0, {}});
  all.push_back(outer.wrap(kir::block(row)));
  return Kernels{kb.finish(kir::block(all), sched)};
}

} // namespace nnc::lower
