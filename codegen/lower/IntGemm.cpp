// matmul_integer: its generic loop nest, and the CPU template "matmul_integer.tiles", an
// integer GEMM of u8s8s32 GemmTile microkernels (vpdpbusd where the target has VNNI) with its
// tuning space "igemm_cpu".
//
// The template, per batch entry (the B steps once, before the batch loops, when B has no
// batch of its own):
//  1. The operands are brought to the tile's types by shifts: A' = A + 128 for an i8 A (u8),
//     B' = B - 128 for a u8 B (i8). A' is packed into rows of K rounded up to 4 (zeros after
//     K; a u8 A whose K is a multiple of 4 is read in place); B' into panels of nr columns,
//     each a run of groups of 4 k rows interleaved per column (kir::GemmElems::U8S8S32's
//     layout), zero past K and past the last column (an i8 weight arrives packed so from
//     pack-gemm-weights).
//  2. The GEMM of A' and B' as GemmTiles: panels outside (one panel stays in cache while the
//     row tiles stream past it), row tiles inside; the panel loop runs in parallel (knob par).
//  3. Zero points by compensation: with ZA = za + (128 for an i8 A) and ZB = zb - (128 for a
//     u8 B), (A - za)(B - zb) summed over k is
//       sum A'B' - ZA_i * colsum(B')_j - ZB_j * rowsum(A')_i + K * ZA_i * ZB_j,
//     the sums taken while packing (B's column sums of a weight packed at compile time come
//     with it, operand 4), the terms that are zero left out. Everything wraps in
//     i32, as the op's sum does, so the identity holds exactly for any K.
//  4. A fused group's epilogue (the requantization to u8, or the dequantization to f32): each
//     tile writes its sums into the thread's own i32 tile, and right after it, while they are
//     in L1, the compensation and the epilogue finish the tile's elements into the group's
//     result (no i32 result, no pass over it). Without an epilogue the tiles write the result
//     and step 3 compensates it in place.
#include <algorithm>

#include "Epilogue.h"
#include "Gemm.h"
#include "NNLowering.h"
#include "Templates.h"
#include "nnc/ir/ShapeUtils.h"

namespace nnc::lower {

using kir::Expr;
using kir::Stmt;
using nnl::i64;

namespace {

/// The shapes of a matmul_integer with static extents.
struct IntMatMul {
  int64_t m = 0, k = 0, n = 0;
  Extents batch;                  ///< The output's batch dims (broadcast).
  std::vector<int64_t> sa, sb, so; ///< Element strides of each batch dim in A, B, the output.
  bool aSigned = false, bUnsigned = false;
  bool za = false, zb = false;    ///< A zero point is given.
  bool zaPerRow = false, zbPerCol = false;
  /// > 0: B is a weight packed at compile time in panels of packedNr columns
  /// (packGemmPanelsK4), each matrix packedSize elements.
  int64_t packedNr = 0, packedSize = 0;
  /// Operand 4 holds the packed weight's i32 column sums (pack-gemm-weights).
  bool colSums = false;

  /// The flat index of B(p, j) from the batch entry's offset.
  Expr bIndex(Expr bOff, Expr p, Expr j) const {
    if (packedNr > 0) {
      int64_t groups = (k + 3) / 4;
      Expr group = kir::add(kir::mul(kir::div(j, i64(packedNr)), i64(groups)), kir::div(p, i64(4)));
      return kir::add(bOff, kir::add(kir::mul(kir::add(kir::mul(group, i64(packedNr)),
                                                       kir::mod(j, i64(packedNr))),
                                              i64(4)),
                                     kir::mod(p, i64(4))));
    }
    return kir::add(bOff, kir::add(kir::mul(p, i64(n)), j));
  }
};

Expected<IntMatMul> analyze(const Node &node) {
  IntMatMul f;
  const Value *av = node.operand(0), *bv = node.operand(1);
  Extents as = extentsOf(av), bs = extentsOf(bv);
  if (as.empty() || bs.empty())
    return node.error("operands must have rank >= 1");
  if (node.hasAttr("packed_n")) {
    size_t r = bs.size();
    if (r < 4 || as.size() < 2 || bs[r - 1] != 4 || bs[r - 4] * bs[r - 2] < node.getInt("packed_n") ||
        bs[r - 3] != (as.back() + 3) / 4)
      return node.error("packed operand 1 {} does not hold {} columns of {} rows", extentsStr(bs),
                        node.getInt("packed_n"), as.back());
    f.packedNr = bs[r - 2];
    f.packedSize = bs[r - 4] * bs[r - 3] * bs[r - 2] * 4;
    f.colSums = node.operand(4) != nullptr;
    Extents unpacked(bs.begin(), bs.end() - 4);
    unpacked.push_back(as.back());
    unpacked.push_back(node.getInt("packed_n"));
    bs = unpacked;
  }
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  f.m = as[as.size() - 2];
  f.k = as.back();
  f.n = bs.back();
  if (bs[bs.size() - 2] != f.k)
    return node.error("inner dims differ: {} and {}", extentsStr(extentsOf(av)),
                      extentsStr(extentsOf(bv)));
  Extents batchA(as.begin(), as.end() - 2), batchB(bs.begin(), bs.end() - 2);
  std::optional<Extents> batch = broadcastExtents(batchA, batchB);
  if (!batch)
    return node.error("batch dims {} and {} do not broadcast", extentsStr(batchA),
                      extentsStr(batchB));
  f.batch = *batch;
  size_t nb = f.batch.size();
  f.sa = batchStrides(nb, batchA, f.m * f.k);
  f.sb = batchStrides(nb, batchB, f.packedNr > 0 ? f.packedSize : f.k * f.n);
  f.so = batchStrides(nb, f.batch, f.m * f.n);
  f.aSigned = av->dtype() == DType::I8;
  f.bUnsigned = bv->dtype() == DType::U8;
  for (size_t z = 2; z < 4; ++z) {
    const Value *zp = node.numOperands() > z ? node.operand(z) : nullptr;
    if (!zp)
      continue;
    int64_t count = numElementsOf(extentsOf(zp)), along = z == 2 ? f.m : f.n;
    if (zp->rank() > 1 || (count != 1 && count != along))
      return node.error("zero point {} {} must be a scalar or hold {} values", z,
                        extentsStr(extentsOf(zp)), along);
    (z == 2 ? f.za : f.zb) = true;
    (z == 2 ? f.zaPerRow : f.zbPerCol) = count != 1;
  }
  return f;
}

/// Zero point `z` (2: A's, 3: B's) at row or column `at`, as i32 (0 when absent).
Expr zeroPoint(KernelBuilder &kb, const IntMatMul &f, size_t z, Expr at) {
  bool given = z == 2 ? f.za : f.zb, per = z == 2 ? f.zaPerRow : f.zbPerCol;
  if (!given)
    return kir::constant(0, DType::I32);
  return kir::cast(kb.load(kb.operand(z), per ? at : i64(0)), DType::I32);
}

} // namespace

/// The generic nest: each output element sums its products in i32 (wrapping), the zero points
/// subtracted from each operand first.
Expected<Kernels> lowerMatMulIntegerLoops(const Node &node, const std::string &prefix) {
  NNC_ASSIGN_OR_RETURN(IntMatMul f, analyze(node));
  if (numElementsOf(extentsOf(node.result(0))) == 0)
    return Kernels{nnl::emptyKernel(node, prefix)};
  KernelBuilder kb(node, prefix);
  int ab = kb.operand(0), bb = kb.operand(1), ob = kb.result(0);
  Extents loops = f.batch;
  loops.push_back(f.m);
  loops.push_back(f.n);
  std::vector<std::string> names;
  Stmt nest = kb.loopNest(loops, [&](const std::vector<Expr> &iv) {
    Expr aOff = i64(0), bOff = i64(0), oOff = i64(0);
    for (size_t d = 0; d < f.batch.size(); ++d) {
      aOff = kir::add(aOff, kir::mul(iv[d], i64(f.sa[d])));
      bOff = kir::add(bOff, kir::mul(iv[d], i64(f.sb[d])));
      oOff = kir::add(oOff, kir::mul(iv[d], i64(f.so[d])));
    }
    Expr i = iv[f.batch.size()], j = iv[f.batch.size() + 1];
    std::string acc = kb.freshName("acc"), p = kb.freshName("p");
    Expr pv = kir::var(p);
    Expr a = kir::op(OpKind::Sub,
                     {kir::cast(kb.load(ab, kir::add(aOff, kir::add(kir::mul(i, i64(f.k)), pv))),
                                DType::I32),
                      zeroPoint(kb, f, 2, i)});
    Expr b = kir::op(OpKind::Sub, {kir::cast(kb.load(bb, f.bIndex(bOff, pv, j)), DType::I32),
                                   zeroPoint(kb, f, 3, j)});
    Expr accV = kir::var(acc, DType::I32);
    return kir::block(
        {kir::decl(acc, DType::I32, kir::constant(0, DType::I32)),
         kir::forLoop(p, i64(f.k),
                      kir::assign(acc, kir::op(OpKind::Add, {accV, kir::op(OpKind::Mul, {a, b})}))),
         kb.store(ob, kir::add(oOff, kir::add(kir::mul(i, i64(f.n)), j)), accV)});
  }, &names);
  return Kernels{kb.finish(nest, defaultSchedule(names, loops, /*vectorize=*/false))};
}

namespace {

/// i32 lanes of the vectors the integer tiles use.
int64_t intLanes(const CpuTarget &cpu) {
  int dot = cpu.int8DotBits();
  return (dot ? dot : cpu.vectorBits) / 32;
}

/// Vector registers a tile of mr x nr takes: its accumulators (two per vector on the widened
/// path, whose 16-bit multiply-adds leave pairs of partial sums), B's vectors and a broadcast.
bool intTileFits(int64_t mr, int64_t nr, const CpuTarget &cpu) {
  int64_t lanes = intLanes(cpu), vecs = (nr + lanes - 1) / lanes;
  int64_t perVec = cpu.int8DotBits() ? 1 : 2;
  return mr * vecs * perVec + vecs * perVec + 1 <= cpu.vectorRegisters;
}

/// The tunable problem (chooseConfig completes it with the target).
tuning::Problem igemmProblem(const Node &node, const IntMatMul &f) {
  int64_t batch = numElementsOf(f.batch);
  tuning::Problem p;
  p.kind = "igemm_cpu";
  p.signature = fmt::format("igemm_cpu {}x{} b{} m{} k{} n{} sa{} sb{} za{}{} zb{}{}",
                            dtypeName(node.operand(0)->dtype()),
                            dtypeName(node.operand(1)->dtype()), batch, f.m, f.k, f.n,
                            extentsStr(f.sa), extentsStr(f.sb), f.za, f.zaPerRow, f.zb,
                            f.zbPerCol);
  p.dims = {batch, f.m, f.k, f.n, f.bUnsigned ? 0 : f.packedNr};
  p.flops = 2.0 * double(batch) * double(f.m) * double(f.k) * double(f.n);
  return p;
}

} // namespace

const tuning::Space &igemmCpuSpace() {
  static const tuning::Space space = [] {
    tuning::Space s;
    s.kind = "igemm_cpu";
    s.version = 1;
    s.knobs = {
        {"mr", {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14}, "rows of a register tile"},
        {"nr", {4, 8, 16, 24, 32, 48, 64}, "columns of a register tile (a packed B panel)"},
        {"par", {0, 1}, "1: B's panels run on the thread pool"},
    };
    s.valid = [](const tuning::Config &c, const tuning::Problem &p) {
      if (!tuning::namesEveryKnob(igemmCpuSpace(), c) || p.dims.size() < 5)
        return false;
      int64_t m = p.dims[1], n = p.dims[3], packedNr = p.dims[4], mr = c.at("mr"),
              nr = c.at("nr");
      int64_t lanes = intLanes(p.cpu);
      // A weight packed at compile time fixes nr.
      return (mr <= std::max<int64_t>(m, 1) || mr == 1) &&
             (packedNr > 0 ? nr == packedNr : nr < n + lanes || nr == 4) &&
             intTileFits(mr, nr, p.cpu);
    };
    s.defaults = [](const tuning::Problem &p) {
      int64_t m = p.dims[1], k = p.dims[2], n = p.dims[3], packedNr = p.dims[4];
      int64_t lanes = intLanes(p.cpu);
      // The panel width of a packed weight (CpuTarget::int8PanelWidth, halved for outputs
      // narrower than it), as many rows as registers allow.
      int64_t nr = p.cpu.int8PanelWidth();
      while (nr > 4 && nr >= n + lanes)
        nr /= 2;
      if (packedNr > 0)
        nr = packedNr;
      int64_t mr = 1;
      for (int64_t cand : {8, 6, 5, 4, 3, 2, 1})
        if (cand <= std::max<int64_t>(m, 1) && intTileFits(cand, nr, p.cpu)) {
          mr = cand;
          break;
        }
      double work = double(p.dims[0]) * double(m) * double(k) * double(n);
      int64_t par = work >= double(1 << 18) ? 1 : 0;
      // A conv whose weight overflows half the L2 while its patches fit there (a deep layer:
      // few positions, many channels) splits its panels among the threads over patches made
      // once (ConvIntegerTiles). On one thread there is nothing to split: where the registers
      // hold a taller tile (more rows per pass over each panel), the plain path's row blocks
      // with it measured faster there (neither change alone did).
      const bool conv = p.signature.rfind("igemm_cpu conv ", 0) == 0;
      if (conv && p.threads == 1 && k * n > p.cpu.l2Bytes / 2 && m * k <= p.cpu.l2Bytes / 2)
        for (int64_t cand : {14, 12, 10})
          if (cand <= m && cand > mr && intTileFits(cand, nr, p.cpu)) {
            mr = cand;
            par = 0;
            break;
          }
      return tuning::Config{{"mr", mr}, {"nr", nr}, {"par", par}};
    };
    return s;
  }();
  return space;
}

Expected<Kernels> lowerMatMulIntegerTiles(const Node &node, const std::string &prefix,
                                          const tuning::LowerOptions *opts) {
  NNC_ASSIGN_OR_RETURN(IntMatMul f, analyze(node));
  if (numElementsOf(extentsOf(node.result(0))) == 0 || f.k == 0)
    return lowerMatMulIntegerLoops(node, prefix);
  tuning::Problem problem = igemmProblem(node, f);
  tuning::Config cfg = tuning::chooseConfig(problem, opts);
  const int64_t m = f.m, k = f.k, n = f.n;
  const int64_t kp = (k + 3) / 4 * 4, groups = kp / 4;
  const int64_t mr = std::min(knob(cfg, "mr", 4), m);
  // A weight packed at compile time fixes the panels' width (its bytes are i8: no shift).
  const bool prepacked = f.packedNr > 0 && !f.bUnsigned;
  const int64_t nr = prepacked ? f.packedNr : knob(cfg, "nr", 8);
  const int64_t panels = (n + nr - 1) / nr, panelSize = groups * 4 * nr;
  const bool par = knob(cfg, "par", 0) == 1;
  // Which compensation terms can be nonzero (step 3).
  const bool zaTerm = f.za || f.aSigned, zbTerm = f.zb || f.bUnsigned;

  KernelBuilder kb(node, prefix);
  Epilogue *ep = opts ? opts->epilogue : nullptr;
  std::optional<Epilogue::Inputs> epIn;
  std::vector<Stmt> epHoisted;
  int ab = kb.operand(0), bb = kb.operand(1);
  int ob = ep ? ep->resultBuffer(kb) : kb.result(0);
  if (ep)
    epIn = ep->inputsOf(kb);
  int bp = prepacked ? bb : kb.scratch(0, DType::I8, panels * panelSize);
  int ap = f.aSigned || k % 4 != 0 ? kb.scratch(1, DType::U8, m * kp) : -1;
  // An i8 weight packed at compile time brings its column sums (operand 4).
  const bool sumsGiven = prepacked && f.colSums;
  int colsum = !zaTerm ? -1 : sumsGiven ? kb.operand(4) : kb.scratch(2, DType::I32, n);
  int rowsum = zbTerm ? kb.scratch(3, DType::I32, m) : -1;
  // Step 4's tile of sums (ldc nr).
  int tileSums = ep ? kb.scratch(4, DType::I32, mr * nr, /*perThread=*/true) : -1;
  kir::Schedule sched;
  auto c32 = [](int64_t v) { return kir::constant(double(v), DType::I32); };
  auto parallel = [&](const std::string &loop, int64_t extent) {
    if (par && extent > 1)
      sched.steps.push_back({kir::ScheduleStep::Parallel, loop, 0, {}});
  };

  nnl::Nest outer;
  Expr aOff = i64(0), bOff = i64(0), oOff = i64(0);
  for (size_t d = 0; d < f.batch.size(); ++d) {
    Expr v = outer.add(kb, f.batch[d], "b");
    aOff = kir::add(aOff, kir::mul(v, i64(f.sa[d])));
    bOff = kir::add(bOff, kir::mul(v, i64(f.sb[d])));
    oOff = kir::add(oOff, kir::mul(v, i64(f.so[d])));
  }
  bool bMoves = std::any_of(f.sb.begin(), f.sb.end(), [](int64_t s) { return s != 0; });
  // The batch loops' extents, for the epilogue's index arithmetic.
  LoopExtents batchEnv;
  for (const auto &[name, extent] : outer.loops)
    batchEnv[name] = extent->intValue;

  // Step 3's compensation of the sum v of element (i, j).
  auto compensated = [&](Expr v, Expr i, Expr j) {
    Expr za = zeroPoint(kb, f, 2, i), zb = zeroPoint(kb, f, 3, j);
    if (f.aSigned)
      za = kir::op(OpKind::Add, {za, c32(128)});
    if (f.bUnsigned)
      zb = kir::op(OpKind::Sub, {zb, c32(128)});
    auto mul = [](Expr a, Expr b) { return kir::op(OpKind::Mul, {a, b}); };
    if (zaTerm)
      v = kir::op(OpKind::Sub, {v, mul(za, kb.load(colsum, j))});
    if (zbTerm)
      v = kir::op(OpKind::Sub, {v, mul(zb, kb.load(rowsum, i))});
    if (zaTerm && zbTerm)
      v = kir::op(OpKind::Add, {v, mul(c32(k), mul(za, zb))});
    return v;
  };

  // Step 1, B: element (kk, col) of panel q, group g, column jj, byte e, read clamped into
  // range and zeroed outside it (the load stays in bounds either way).
  std::vector<Stmt> packB;
  // B's offset in this batch entry (0 outside the batch loops when B has no batch of its own),
  // and where the tiles read B' (the weight's own panels, or the scratch they are packed in).
  const Expr bEntry = bMoves ? bOff : i64(0), bBase = prepacked ? bEntry : i64(0);
  if (!prepacked) {
    std::string qv;
    packB.push_back(packIntGemmPanels(
        kb, bp, k, n, nr, f.bUnsigned,
        [&](Expr kc, Expr cc) { return kb.load(bb, f.bIndex(bEntry, kc, cc)); }, qv));
    parallel(qv, panels);
  }
  if (zaTerm && !sumsGiven) {
    // colsum(B')_j over the packed panel's column.
    std::string cv = kb.freshName("cj"), sv = kb.freshName("cs"), pv = kb.freshName("ck");
    Expr cj = kir::var(cv), pk = kir::var(pv);
    Expr idx = kir::add(
        kir::add(kir::add(bBase, kir::mul(kir::div(cj, i64(nr)), i64(panelSize))),
                 kir::mul(kir::mod(cj, i64(nr)), i64(4))),
        kir::add(kir::mul(kir::div(pk, i64(4)), i64(4 * nr)), kir::mod(pk, i64(4))));
    Expr sum = kir::var(sv, DType::I32);
    packB.push_back(kir::forLoop(
        cv, i64(n),
        kir::block({kir::decl(sv, DType::I32, c32(0)),
                    kir::forLoop(pv, i64(k),
                                 kir::assign(sv, kir::op(OpKind::Add,
                                                         {sum, kir::cast(kb.load(bp, idx),
                                                                         DType::I32)}))),
                    kb.store(colsum, cj, sum)})));
  }

  // Step 1, A: rows of kp bytes, and rowsum(A'). A u8 A whose rows are whole groups already
  // is read in place.
  std::vector<Stmt> perEntry;
  const bool packA = f.aSigned || k % 4 != 0;
  // Where the tiles read A' (and rowsum reads it): the packed rows or A itself.
  const int asrc = packA ? ap : ab;
  const Expr aBase = packA ? i64(0) : aOff;
  {
    std::string iv = kb.freshName("ai"), pv = kb.freshName("ap"), zv = kb.freshName("az");
    Expr i = kir::var(iv), p = kir::var(pv), z = kir::var(zv);
    Expr src = kb.load(ab, kir::add(aOff, kir::add(kir::mul(i, i64(k)), p)));
    Expr shifted = f.aSigned
                       ? kir::cast(kir::op(OpKind::Add, {kir::cast(src, DType::I32), c32(128)}),
                                   DType::U8)
                       : src;
    std::vector<Stmt> row;
    if (packA)
      row.push_back(
          kir::forLoop(pv, i64(k), kb.store(ap, kir::add(kir::mul(i, i64(kp)), p), shifted)));
    if (kp > k)
      row.push_back(kir::forLoop(
          zv, i64(kp - k),
          kb.store(ap, kir::add(kir::mul(i, i64(kp)), kir::add(i64(k), z)),
                   kir::constant(0, DType::U8))));
    if (zbTerm) {
      std::string sv = kb.freshName("rs"), qv = kb.freshName("rp");
      Expr sum = kir::var(sv, DType::I32);
      row.push_back(kir::decl(sv, DType::I32, c32(0)));
      row.push_back(kir::forLoop(
          qv, i64(k),
          kir::assign(sv, kir::op(OpKind::Add,
                                  {sum, kir::cast(kb.load(asrc, kir::add(aBase,
                                                                          kir::add(kir::mul(i, i64(kp)),
                                                                                   kir::var(qv)))),
                                                  DType::I32)}))));
      row.push_back(kb.store(rowsum, i, sum));
    }
    if (!row.empty()) {
      perEntry.push_back(kir::forLoop(iv, i64(m), kir::block(row)));
      parallel(iv, m);
    }
  }
  if (bMoves)
    for (Stmt &s : packB)
      perEntry.push_back(s);

  // Step 2: the tiles, panels outside, rows inside; the last panel and the last rows may be
  // narrower (their own tile shapes).
  {
    std::string qv = kb.freshName("tq");
    int64_t fullPanels = n / nr, nRem = n % nr, rowTiles = m / mr, mRem = m % mr;
    auto tile = [&](int64_t rows, int64_t cols, Expr row0, Expr panel) -> Stmt {
      kir::GemmTileShape sh;
      sh.elems = kir::GemmElems::U8S8S32;
      sh.a = asrc;
      sh.b = bp;
      sh.mr = rows;
      sh.nr = cols;
      sh.lda = kp;
      sh.ak = 1;
      sh.ldb = 4 * nr;
      sh.ldc = ep ? nr : n;
      Expr aAt = kir::add(aBase, kir::mul(row0, i64(kp))),
           bAt = kir::add(bBase, kir::mul(panel, i64(panelSize)));
      if (!ep)
        return kb.gemmTile(sh, ob, aAt, bAt,
                           kir::add(oOff, kir::add(kir::mul(row0, i64(n)),
                                                   kir::mul(panel, i64(nr)))),
                           i64(kp));
      // Step 4: the tile's elements (i, j) finished from its sums. i and j are locals of
      // extent m and n, so that the epilogue's inputs are indexed without divisions.
      std::string rv = kb.freshName("fr"), jv = kb.freshName("fj"), iv = kb.freshName("fi"),
                  cv = kb.freshName("fc");
      Expr i = kir::var(iv), j = kir::var(cv);
      std::vector<Stmt> inner{
          kir::decl(iv, DType::I64, kir::add(row0, kir::var(rv))),
          kir::decl(cv, DType::I64, kir::add(kir::mul(panel, i64(nr)), kir::var(jv)))};
      Expr v = compensated(
          kb.load(tileSums, kir::add(kir::mul(kir::var(rv), i64(nr)), kir::var(jv))), i, j);
      Expr at = kir::add(oOff, kir::add(kir::mul(i, i64(n)), j));
      LoopExtents env = batchEnv;
      env[iv] = m;
      env[cv] = n;
      v = ep->apply(at, v, env, *epIn, inner, epHoisted);
      // Stored at an index that names the column loop, which is independent: LLVM vectorizes
      // it without run-time overlap checks.
      inner.push_back(kb.store(
          ob,
          kir::add(oOff, kir::add(kir::mul(kir::add(row0, kir::var(rv)), i64(n)),
                                  kir::add(kir::mul(panel, i64(nr)), kir::var(jv)))),
          v));
      sched.steps.push_back({kir::ScheduleStep::GpuGrid, "", 0, {jv}});
      if (cols >= 8)
        sched.steps.push_back({kir::ScheduleStep::Vectorize, jv, 0, {}});
      return kir::block(
          {kb.gemmTile(sh, tileSums, aAt, bAt, i64(0), i64(kp)),
           kir::forLoop(rv, i64(rows), kir::forLoop(jv, i64(cols), kir::block(inner)))});
    };
    auto panelBody = [&](int64_t cols, Expr panel) {
      std::vector<Stmt> body;
      if (rowTiles > 0) {
        std::string tv = kb.freshName("tr");
        body.push_back(kir::forLoop(tv, i64(rowTiles),
                                    tile(mr, cols, kir::mul(kir::var(tv), i64(mr)), panel)));
      }
      if (mRem > 0)
        body.push_back(tile(mRem, cols, i64(rowTiles * mr), panel));
      return kir::block(body);
    };
    Expr q = kir::var(qv);
    if (fullPanels > 0) {
      perEntry.push_back(kir::forLoop(qv, i64(fullPanels), panelBody(nr, q)));
      parallel(qv, fullPanels);
    }
    if (nRem > 0)
      perEntry.push_back(panelBody(nRem, i64(fullPanels)));
  }

  // Step 3: the compensation terms (step 4 applied them with the epilogue).
  if ((zaTerm || zbTerm) && !ep) {
    std::string iv = kb.freshName("ci"), jv = kb.freshName("cj");
    Expr i = kir::var(iv), j = kir::var(jv);
    Expr cIdx = kir::add(oOff, kir::add(kir::mul(i, i64(n)), j));
    perEntry.push_back(kir::forLoop(
        iv, i64(m), kir::forLoop(jv, i64(n), kb.store(ob, cIdx, compensated(kb.load(ob, cIdx), i, j)))));
    parallel(iv, m);
    if (n >= 16)
      sched.steps.push_back({kir::ScheduleStep::Vectorize, jv, 0, {}});
  }

  Stmt body = kir::block(perEntry);
  for (size_t d = outer.loops.size(); d-- > 0;)
    body = kir::forLoop(outer.loops[d].first, outer.loops[d].second, body);
  std::vector<Stmt> all;
  if (ep) {
    ep->markApplied();
    all = epHoisted;
  }
  if (!bMoves)
    all.insert(all.end(), packB.begin(), packB.end());
  all.push_back(body);
  kir::Kernel kernel = kb.finish(kir::block(all), sched);
  kernel.flops = problem.flops;
  kernel.flopsElems = kir::GemmElems::U8S8S32;
  return Kernels{std::move(kernel)};
}

void registerIntGemmLowerer(LowererTable &t) {
  t[OpKind::MatMulInteger] = lowerMatMulIntegerLoops;
}

Stmt packIntGemmPanels(KernelBuilder &kb, int bp, int64_t K, int64_t N, int64_t nr,
                       bool isUnsigned, const std::function<Expr(Expr k, Expr n)> &load,
                       std::string &panelVar) {
  const int64_t groups = (K + 3) / 4, panels = (N + nr - 1) / nr, panelSize = groups * 4 * nr;
  std::string qv = kb.freshName("pq"), gv = kb.freshName("pg"), jv = kb.freshName("pj"),
              ev = kb.freshName("pe");
  Expr q = kir::var(qv), g = kir::var(gv), jj = kir::var(jv), e = kir::var(ev);
  Expr kk = kir::add(kir::mul(g, kir::intImm(4)), e);
  Expr col = kir::add(kir::mul(q, kir::intImm(nr)), jj);
  Expr src = load(kir::min(kk, kir::intImm(K - 1)), kir::min(col, kir::intImm(N - 1)));
  Expr shifted =
      isUnsigned ? kir::cast(kir::op(OpKind::Sub, {kir::cast(src, DType::I32),
                                                   kir::constant(128.0, DType::I32)}),
                             DType::I8)
                 : src;
  Expr at = kir::add(kir::mul(q, kir::intImm(panelSize)),
                     kir::add(kir::mul(g, kir::intImm(4 * nr)),
                              kir::add(kir::mul(jj, kir::intImm(4)), e)));
  Stmt st = kb.store(bp, at,
                     kir::select(kir::land(kir::lt(kk, kir::intImm(K)), kir::lt(col, kir::intImm(N))),
                                 shifted, kir::constant(0, DType::I8)));
  panelVar = qv;
  return kir::forLoop(qv, kir::intImm(panels),
                      kir::forLoop(gv, kir::intImm(groups),
                                   kir::forLoop(jv, kir::intImm(nr),
                                                kir::forLoop(ev, kir::intImm(4), st))));
}

} // namespace nnc::lower
