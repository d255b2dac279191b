// The GEMM for an OpenCL device (gpuGemmNest, Gemm.h) and its tuning space "gemm_opencl": the
// NDRange does the tiling that the CPU path does with loops. CLBlast's xgemm (its kernels
// and paper) is the model for the parameter space.
//
// Algorithm: a work-group computes a tile of MWG = rm*wm rows x NWG = rn*wn columns of one
// batch entry; its wm x wn work-items each keep an rm x rn register tile of accumulators.
// Work-item (ty, tx) owns rows rowBase + r*wm + ty and columns colBase + (c/vw)*wn*vw +
// tx*vw + c%vw: vectors of vw adjacent columns, the work-items' vectors side by side (vw = 1:
// neighbouring work-items on neighbouring columns, coalesced on a GPU; vw = rn: a work-item's
// whole row adjacent, one vector on a device that prefers float vectors). NDRange dimension
// 0 runs over column tiles, 1 over row tiles, 2 over batch entries.
//  1. Without local memory, each work-item walks all of k, loading rm values of A and rn of
//     B per step and doing rm*rn multiply-adds.
//  2. With local memory (knob local), k runs in tiles of kwg: the work-group copies A's
//     MWG x kwg tile (k-major) and B's kwg x NWG tile into local buffers, each work-item a
//     share (B by vectors of vw where its columns are contiguous), then a barrier; each
//     work-item accumulates from the local tiles (B's lanes as vector loads), then a second
//     barrier before the next tile overwrites them. Reads past k load zeros, so every k
//     tile is whole; the sums keep k order, so the numbers do not depend on the knobs.
//  3. Edge tiles clamp their loads to valid rows and columns and guard their stores; with
//     local tiles, C is stored by vectors where the tile has no edge and no epilogue.
//  4. Without local memory, a work-item whose columns are all adjacent (vw = rn) on strided
//     f32 operands runs its whole tile as one kir::GemmTile (C = init first, the epilogue
//     after), which the OpenCL printer writes as rows of float vectors with one fma per
//     vector and k step: what a device that prefers float vectors (an OpenCL CPU device)
//     needs, since it cannot vectorize across work-items around a k loop. Tiles that cross
//     C's edge take the scalar nest of step 1.
//  5. With GemmOperands::sumRun (the winograd pass's matmul), f32 sums go in runs: each
//     work-item's products of a run from zero, added to its sums at the run's end (every
//     sumRun k steps, or every k tile of step 2 that completes at least that many).
#include <algorithm>
#include <optional>

#include "Epilogue.h"
#include "Gemm.h"

namespace nnc::lower {

using kir::Expr;
using kir::Stmt;

namespace {

Expr i64(int64_t v) { return kir::intImm(v); }

Expr isZero(Expr a) { return kir::op(OpKind::Equal, {std::move(a), i64(0)}); }

Expr anyOf(Expr a, Expr b) { return kir::op(OpKind::Or, {std::move(a), std::move(b)}); }

int64_t pow2AtLeast(int64_t v) {
  int64_t p = 1;
  while (p < v)
    p *= 2;
  return p;
}

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int64_t knobOf(const tuning::Config &c, const char *name, int64_t fallback) {
  auto it = c.find(name);
  return it == c.end() ? fallback : it->second;
}

/// Bytes of local memory the tiles take (f32 accumulators).
int64_t localBytes(const GpuGemmTile &t) {
  return (t.rm * t.wm + t.rn * t.wn) * t.kwg * 4;
}

bool fitsDevice(const GpuGemmTile &t, const GpuTarget &gpu) {
  return t.wm * t.wn <= gpu.maxWorkGroupSize && t.wn <= gpu.maxWorkItemSizes[0] &&
         t.wm <= gpu.maxWorkItemSizes[1] && (!t.local || localBytes(t) <= gpu.localMemBytes);
}

} // namespace

GpuGemmTile gpuGemmTileOf(const tuning::Config &c) {
  GpuGemmTile t;
  t.wm = knobOf(c, "mdimc", 1);
  t.wn = knobOf(c, "ndimc", 1);
  t.rm = knobOf(c, "mwi", 1);
  t.rn = knobOf(c, "nwi", 1);
  t.vw = knobOf(c, "vw", 1);
  t.kwg = knobOf(c, "kwg", 16);
  t.local = knobOf(c, "local", 0) != 0;
  return t;
}

tuning::Problem gpuGemmProblem(DType t, int64_t batch, int64_t m, int64_t k, int64_t n,
                               const std::string &layout) {
  tuning::Problem p;
  p.kind = "gemm_opencl";
  p.signature =
      fmt::format("gemm_opencl {} b{} m{} k{} n{} {}", dtypeName(t), batch, m, k, n, layout);
  p.dims = {batch, m, k, n};
  p.flops = 2.0 * double(batch) * double(m) * double(k) * double(n);
  return p;
}

const tuning::Space &gemmOpenCLSpace() {
  static const tuning::Space space = [] {
    tuning::Space s;
    s.kind = "gemm_opencl";
    s.version = 1;
    s.knobs = {
        {"mdimc", {1, 2, 4, 8, 16, 32}, "work-items of a group along rows (MDIMC)"},
        {"ndimc", {1, 2, 4, 8, 16, 32}, "work-items of a group along columns (NDIMC)"},
        {"mwi", {1, 2, 4, 8}, "rows of a work-item's register tile (MWI)"},
        {"nwi", {1, 2, 4, 8, 16}, "columns of a work-item's register tile (NWI)"},
        {"vw", {1, 2, 4, 8, 16}, "adjacent columns per vector (VWN)"},
        {"kwg", {8, 16, 32}, "k tile staged in local memory (KWG)"},
        {"local", {0, 1}, "stage A and B tiles in local memory"},
    };
    s.valid = [sp = &s](const tuning::Config &c, const tuning::Problem &p) {
      if (!tuning::namesEveryKnob(*sp, c) || p.dims.size() != 4)
        return false;
      GpuGemmTile t = gpuGemmTileOf(c);
      int64_t m = p.dims[1], n = p.dims[3];
      GpuTarget gpu = p.gpu ? *p.gpu : GpuTarget::generic();
      // Work-groups no larger than the problem (in powers of two) and vectors that divide
      // the register tile.
      return t.vw <= t.rn && t.rn % t.vw == 0 && t.rm <= pow2AtLeast(m) && t.rn <= pow2AtLeast(n) &&
             t.wm <= pow2AtLeast(ceilDiv(m, t.rm)) && t.wn <= pow2AtLeast(ceilDiv(n, t.rn)) &&
             fitsDevice(t, gpu);
    };
    s.defaults = [](const tuning::Problem &p) {
      int64_t m = p.dims[1], k = p.dims[2], n = p.dims[3];
      GpuTarget gpu = p.gpu ? *p.gpu : GpuTarget::generic();
      int64_t group = std::max<int64_t>(1, std::min<int64_t>(gpu.maxWorkGroupSize, 256));
      // A device that prefers float vectors (CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT > 1: an
      // OpenCL CPU device) vectorizes within a work-item: a row of adjacent columns becomes
      // one vector. GPUs say 1 and vectorize across work-items instead.
      int64_t vec = std::min<int64_t>(8, pow2AtLeast(std::max(1, gpu.preferredFloatVector)));
      GpuGemmTile t;
      // Such a device's work-item runs its tile as vector accumulators (a GemmTile): rows of
      // two vectors and four rows where m allows keep eight of them busy per k step for
      // six loads.
      // A GPU's work-item takes 8 x 8 of a product with tiles of 128 x 128 (a group of 16 x
      // 16, as CLBlast's tuned NVIDIA kernels do) for two groups per compute unit: twice the
      // multiply-adds per local-memory load of 4 x 4. With fewer tiles (ResNet-18's 14 x 14
      // convs, a BERT layer's 128-row matmuls) such groups are too few to fill the device.
      bool large = vec == 1 && m >= 128 && n >= 128 && k >= 64 &&
                   p.dims[0] * ceilDiv(m, 128) * ceilDiv(n, 128) >= 2 * gpu.computeUnits;
      t.rn = vec > 1 ? std::min(2 * vec, pow2AtLeast(n)) : large ? 8 : n >= 64 ? 4 : 1;
      t.vw = vec > 1 ? t.rn : 1;
      t.rm = large ? 8 : m >= (vec > 1 ? 16 : 64) ? 4 : m >= 8 ? 2 : 1;
      t.wn = std::min({int64_t(16), pow2AtLeast(ceilDiv(n, t.rn)), gpu.maxWorkItemSizes[0], group});
      t.wm = std::min({pow2AtLeast(ceilDiv(m, t.rm)), std::max<int64_t>(1, group / t.wn),
                       gpu.maxWorkItemSizes[1], int64_t(16)});
      t.wn = std::max<int64_t>(t.wn, 1);
      t.wm = std::max<int64_t>(t.wm, 1);
      // At least two work-groups per compute unit where the problem has them, by smaller
      // groups, down to a wavefront's 64 work-items on a GPU. Each group keeps at least 64K
      // multiply-adds: starting a group on another compute unit costs about as much as a few
      // microseconds of work on a CPU device's core. Rows first; on a GPU the split is along
      // the side whose operand is the larger: groups split along rows each read all of B's
      // columns they cover again (a decoder's 16-row matmuls would read their weights twice
      // as often), along columns all of A's rows.
      int64_t minGroup = gpu.type == "gpu" ? 64 : 1;
      auto groups = [&] { return p.dims[0] * ceilDiv(m, t.rm * t.wm) * ceilDiv(n, t.rn * t.wn); };
      double work = double(p.dims[0]) * double(m) * double(k) * double(n);
      bool rowsFirst = vec > 1 || m >= n;
      while (groups() < 2 * gpu.computeUnits && work / double(2 * groups()) >= 65536.0 &&
             t.wm * t.wn / 2 >= minGroup && (t.wm > 1 || t.wn > 1)) {
        if (t.wm > 1 && (rowsFirst || t.wn == 1))
          t.wm /= 2;
        else
          t.wn /= 2;
      }
      // Local tiles on a device whose local memory is its own (not emulated in global
      // memory), where k is long enough to reuse them and they take at most half of it (two
      // groups may then share a compute unit).
      t.kwg = k >= 32 ? 16 : 8;
      t.local = gpu.localMemDedicated && k >= 2 * t.kwg && 2 * localBytes(t) <= gpu.localMemBytes;
      // From local memory a GPU reads a work-item's columns as float4s (one 16-byte access
      // per work-item, as CLBlast's VWN), and copies B's tile in by float4s too.
      if (t.local && vec == 1)
        t.vw = std::min<int64_t>(4, t.rn);
      return tuning::Config{
          {"mdimc", t.wm}, {"ndimc", t.wn},           {"mwi", t.rm}, {"nwi", t.rn}, {"vw", t.vw},
          {"kwg", t.kwg},  {"local", t.local ? 1 : 0}};
    };
    return s;
  }();
  return space;
}

Stmt gpuGemmNest(KernelBuilder &kb, const GemmOperands &ops, int64_t batch, int64_t m, int64_t k,
                 int64_t n, const std::vector<std::pair<std::string, Expr>> &batchLoops,
                 const GpuGemmTile &t, std::vector<kir::LocalBuffer> &locals) {
  const int64_t TM = t.rm * t.wm, TN = t.rn * t.wn, vw = t.vw;
  const int64_t rowTiles = ceilDiv(m, TM), colTiles = ceilDiv(n, TN);
  std::string bx = kb.freshName("gx"), by = kb.freshName("gy"), bz = kb.freshName("gz");
  std::string tx = kb.freshName("tx"), ty = kb.freshName("ty");
  std::vector<Stmt> batchVars, body;
  // The batch loops' variables, from the flat batch index of NDRange dimension 2.
  int64_t inner = batch;
  for (const auto &[name, extent] : batchLoops) {
    inner /= extent->intValue;
    batchVars.push_back(kir::decl(
        name, DType::I64, kir::mod(kir::div(kir::var(bz), i64(inner)), i64(extent->intValue))));
  }
  Expr rowBase = kir::mul(kir::var(by), i64(TM)), colBase = kir::mul(kir::var(bx), i64(TN));
  auto clampRow = [&](Expr r) { return m % TM == 0 ? r : kir::min(r, i64(m - 1)); };
  auto clampCol = [&](Expr c) { return n % TN == 0 ? c : kir::min(c, i64(n - 1)); };
  // A work-item's row r and column c within the tile.
  std::vector<Expr> rowIn(t.rm), colIn(t.rn), rows(t.rm), cols(t.rn);
  for (int64_t r = 0; r < t.rm; ++r) {
    rowIn[r] = kir::add(i64(r * t.wm), kir::var(ty));
    rows[r] = kir::add(rowBase, rowIn[r]);
  }
  for (int64_t c = 0; c < t.rn; ++c) {
    colIn[c] = kir::add(i64((c / vw) * t.wn * vw + c % vw), kir::mul(kir::var(tx), i64(vw)));
    cols[c] = kir::add(colBase, colIn[c]);
  }
  std::vector<std::vector<std::string>> acc(t.rm, std::vector<std::string>(t.rn));
  for (int64_t r = 0; r < t.rm; ++r)
    for (int64_t c = 0; c < t.rn; ++c) {
      acc[r][c] = kb.freshName("acc");
      body.push_back(kir::decl(acc[r][c], ops.acc,
                               ops.init ? ops.init(clampRow(rows[r])) : kir::constant(0, ops.acc)));
    }
  // Runs of partial sums (ops.sumRun, f32): the products go to `part`, from zero, and each
  // run's end adds them to `acc` (step 5).
  const bool runs = ops.sumRun > 0 && ops.acc == DType::F32 && ops.sumRun < k;
  std::vector<std::vector<std::string>> part = acc;
  if (runs)
    for (int64_t r = 0; r < t.rm; ++r)
      for (int64_t c = 0; c < t.rn; ++c) {
        part[r][c] = kb.freshName("part");
        body.push_back(kir::decl(part[r][c], ops.acc, kir::constant(0, ops.acc)));
      }
  auto endRun = [&] { return endOfSumRun(acc, part, ops.acc); };
  // B's columns are contiguous in runs of vw from a multiple of vw (so a vector load of them
  // is one access); C's too where `strided` says so.
  DType bt = kb.bufferType(ops.b), ct = kb.bufferType(ops.c);
  bool bVectors = vw >= 2 && ops.strided && bt == DType::F32 && n % vw == 0 &&
                  (ops.packedNr == 0 || ops.packedNr % vw == 0);
  // One rounding per product where the accumulator is a float (fma, as the GemmTile of step
  // 4 and the CPU's microkernels): every schedule gives the same numbers.
  bool fused = ops.acc == DType::F32 || ops.acc == DType::F64;
  auto multiplyAdd = [&](std::vector<Stmt> &step, const std::vector<std::string> &aN,
                         const std::vector<std::string> &bN) {
    for (int64_t r = 0; r < t.rm; ++r)
      for (int64_t c = 0; c < t.rn; ++c) {
        Expr a = kir::var(aN[r], ops.acc), b = kir::var(bN[c], ops.acc),
             sum = kir::var(part[r][c], ops.acc);
        step.push_back(
            kir::assign(part[r][c], fused ? kir::fma(a, b, sum) : kir::add(sum, kir::mul(a, b))));
      }
  };
  std::vector<std::string> aN(t.rm), bN(t.rn);
  for (int64_t r = 0; r < t.rm; ++r)
    aN[r] = kb.freshName("a");
  for (int64_t c = 0; c < t.rn; ++c)
    bN[c] = kb.freshName("b");

  if (!t.local) {
    std::string p = kb.freshName("p");
    std::vector<Stmt> step;
    for (int64_t r = 0; r < t.rm; ++r)
      step.push_back(kir::decl(
          aN[r], ops.acc,
          kir::cast(kb.load(ops.a, ops.aIndex(clampRow(rows[r]), kir::var(p))), ops.acc)));
    for (int64_t c = 0; c < t.rn; ++c)
      step.push_back(kir::decl(
          bN[c], ops.acc,
          kir::cast(kb.load(ops.b, ops.bIndex(kir::var(p), clampCol(cols[c]))), ops.acc)));
    multiplyAdd(step, aN, bN);
    if (runs) {
      // A loop over the runs, the run's k steps inside (p = q * sumRun + i), then its end.
      std::string q = kb.freshName("q"), i = kb.freshName("i");
      step.insert(step.begin(),
                  kir::decl(p, DType::I64,
                            kir::add(kir::mul(kir::var(q), i64(ops.sumRun)), kir::var(i))));
      Expr steps = k % ops.sumRun == 0
                       ? i64(ops.sumRun)
                       : kir::min(i64(ops.sumRun),
                                  kir::sub(i64(k), kir::mul(kir::var(q), i64(ops.sumRun))));
      body.push_back(kir::forLoop(
          q, i64(ceilDiv(k, ops.sumRun)),
          kir::block({kir::forLoop(i, steps, kir::block(step)), endRun()})));
    } else {
      body.push_back(kir::forLoop(p, i64(k), kir::block(step)));
    }
  } else {
    const int64_t kwg = t.kwg, group = t.wm * t.wn;
    const int aTile = kir::kLocalBufferBase + static_cast<int>(locals.size());
    locals.push_back({kb.freshName("a_tile"), ops.acc, kwg * TM});
    const int bTile = kir::kLocalBufferBase + static_cast<int>(locals.size());
    locals.push_back({kb.freshName("b_tile"), ops.acc, kwg * TN});
    std::string kt = kb.freshName("kt");
    Expr tid = kir::add(kir::mul(kir::var(ty), i64(t.wn)), kir::var(tx));
    // Element kk of the k tile: its k, clamped into A and B, and whether it is past k.
    auto kOf = [&](Expr kk) { return kir::add(kir::mul(kir::var(kt), i64(kwg)), kk); };
    auto kIn = [&](Expr kk) { return k % kwg == 0 ? kOf(kk) : kir::min(kOf(kk), i64(k - 1)); };
    auto zeroPast = [&](Expr kk, Expr v) {
      return k % kwg == 0 ? v : kir::select(kir::lt(kOf(kk), i64(k)), v, kir::constant(0, ops.acc));
    };
    std::vector<Stmt> tile;
    // Cooperative copies: `count` items of the tile over the group's work-items, in rounds.
    auto share = [&](int64_t count, const std::function<Stmt(Expr)> &item) {
      for (int64_t round = 0; round * group < count; ++round) {
        Expr idx = kir::add(i64(round * group), tid);
        Stmt s = item(idx);
        tile.push_back((round + 1) * group <= count ? s : kir::ifThen(kir::lt(idx, i64(count)), s));
      }
    };
    // A's tile, k-major (a_tile[kk * MWG + row]); neighbouring work-items read along k.
    share(TM * kwg, [&](Expr idx) {
      Expr row = kir::div(idx, i64(kwg)), kk = kir::mod(idx, i64(kwg));
      Expr v =
          kir::cast(kb.load(ops.a, ops.aIndex(clampRow(kir::add(rowBase, row)), kIn(kk))), ops.acc);
      return kir::store(aTile, kir::add(kir::mul(kk, i64(TM)), row), zeroPast(kk, v));
    });
    // B's tile (b_tile[kk * NWG + col]), by vectors of vw columns where they are contiguous.
    if (bVectors) {
      int64_t perRow = TN / vw;
      share(kwg * perRow, [&](Expr idx) {
        Expr kk = kir::div(idx, i64(perRow)), col = kir::mul(kir::mod(idx, i64(perRow)), i64(vw));
        Expr gcol = kir::add(colBase, col);
        if (n % TN != 0)
          gcol = kir::min(gcol, i64(n - vw));
        std::vector<std::string> lanes;
        std::vector<Expr> values;
        for (int64_t l = 0; l < vw; ++l) {
          lanes.push_back(kb.freshName("bl"));
          values.push_back(zeroPast(kk, kir::var(lanes.back(), bt)));
        }
        return kir::block({kir::vecLoad(lanes, bt, ops.b, ops.bIndex(kIn(kk), gcol)),
                           kir::vecStore(bTile, kir::add(kir::mul(kk, i64(TN)), col), values)});
      });
    } else {
      share(kwg * TN, [&](Expr idx) {
        Expr kk = kir::div(idx, i64(TN)), col = kir::mod(idx, i64(TN));
        Expr v = kir::cast(kb.load(ops.b, ops.bIndex(kIn(kk), clampCol(kir::add(colBase, col)))),
                           ops.acc);
        return kir::store(bTile, kir::add(kir::mul(kk, i64(TN)), col), zeroPast(kk, v));
      });
    }
    tile.push_back(kir::barrier());
    // The multiply-adds of the k tile from local memory.
    std::string kk = kb.freshName("kk");
    std::vector<Stmt> step;
    for (int64_t r = 0; r < t.rm; ++r)
      step.push_back(kir::decl(
          aN[r], ops.acc,
          kir::load(aTile, ops.acc, kir::add(kir::mul(kir::var(kk), i64(TM)), rowIn[r]))));
    for (int64_t c = 0; c < t.rn; c += vw) {
      Expr at = kir::add(kir::mul(kir::var(kk), i64(TN)), colIn[c]);
      if (vw >= 2 && ops.acc == DType::F32) {
        step.push_back(kir::vecLoad(std::vector<std::string>(bN.begin() + c, bN.begin() + c + vw),
                                    ops.acc, bTile, at));
      } else {
        for (int64_t l = 0; l < vw; ++l)
          step.push_back(
              kir::decl(bN[c + l], ops.acc, kir::load(bTile, ops.acc, kir::add(at, i64(l)))));
      }
    }
    multiplyAdd(step, aN, bN);
    tile.push_back(kir::forLoop(kk, i64(kwg), kir::block(step), kir::LoopKind::Unrolled));
    if (runs) {
      // Runs of whole k tiles, at least sumRun products (the past-k products are zeros).
      int64_t every = ceilDiv(ops.sumRun, kwg);
      Expr next = kir::add(kir::var(kt), i64(1));
      tile.push_back(kir::ifThen(anyOf(isZero(kir::mod(next, i64(every))),
                                       isZero(kir::sub(next, i64(ceilDiv(k, kwg))))),
                                 endRun()));
    }
    tile.push_back(kir::barrier());
    body.push_back(kir::forLoop(kt, i64(ceilDiv(k, kwg)), kir::block(tile)));
  }

  // Step 4's tile, which stores C through a GemmTile (and then its elements' finish): its
  // stores are not final, and a fused epilogue (ops.epilogue) is left to the planner.
  DType at = kb.bufferType(ops.a);
  bool wholeTile = !t.local && vw == t.rn && vw >= 2 && ops.strided && ops.packedNr == 0 &&
                   ops.acc == DType::F32 && at == DType::F32 && bt == DType::F32 &&
                   ct == DType::F32;
  // Otherwise each work-item stores each of its elements of C once: the epilogue runs on the
  // value before its store (its scalar inputs read per work-item, inside the nest).
  Epilogue *ep = wholeTile ? nullptr : ops.epilogue;
  std::optional<Epilogue::Inputs> epIn;
  std::vector<Stmt> epHoisted;
  if (ep)
    epIn = ep->inputsOf(kb);
  std::vector<Stmt> hoisted, stores;
  // Vector stores of C with the local-tile schedule only: on the device-memory path the
  // scalar stores are what an OpenCL CPU device vectorizes across work-items (explicit
  // vectors in a work-item stop PoCL's work-group vectorizer, which made ResNet-18's
  // Winograd GEMMs far slower with them).
  bool cVectors = t.local && vw >= 2 && ops.strided && !ops.finish && ct == ops.acc &&
                  ct == DType::F32 && m % TM == 0 && n % TN == 0;
  for (int64_t r = 0; r < t.rm; ++r) {
    if (cVectors) {
      for (int64_t c = 0; c < t.rn; c += vw) {
        std::vector<Expr> values;
        for (int64_t l = 0; l < vw; ++l)
          values.push_back(kir::var(acc[r][c + l], ops.acc));
        if (ep)
          ep->vecStoreFinal(ops.c, ops.cIndex(rows[r], cols[c]), values, *epIn, stores,
                            epHoisted);
        else
          stores.push_back(kb.vecStore(ops.c, ops.cIndex(rows[r], cols[c]), values));
      }
      continue;
    }
    for (int64_t c = 0; c < t.rn; ++c) {
      std::vector<Stmt> s;
      Expr value = kir::cast(kir::var(acc[r][c], ops.acc), ct);
      if (ep)
        ep->storeFinal(ops.c, {{ops.cIndex(rows[r], cols[c]), value}}, 1, *epIn, s, epHoisted);
      else
        s.push_back(kb.store(ops.c, ops.cIndex(rows[r], cols[c]), value));
      if (ops.finish)
        s.push_back(ops.finish(rows[r], cols[c], hoisted));
      Stmt elem = kir::block(s);
      Expr ok = nullptr;
      if (m % TM != 0)
        ok = kir::lt(rows[r], i64(m));
      if (n % TN != 0)
        ok = ok ? kir::land(ok, kir::lt(cols[c], i64(n))) : kir::lt(cols[c], i64(n));
      stores.push_back(ok ? kir::ifThen(ok, elem) : elem);
    }
  }
  std::vector<Stmt> tileStmts = std::move(body);
  for (Stmt &s : stores)
    tileStmts.push_back(std::move(s));
  // A work-item whose rn columns are adjacent (vw = rn) on strided f32 operands computes a
  // whole tile as one GemmTile, which the OpenCL printer writes with vector accumulators
  // (what a device that prefers float vectors wants: PoCL's work-group vectorizer cannot
  // vectorize across work-items around a k loop). Tiles that cross the edge of C keep the
  // scalar, clamped nest.
  if (wholeTile) {
    const GemmOperands::Strided &st = *ops.strided;
    std::vector<Stmt> vec;
    if (ops.init)
      for (int64_t r = 0; r < t.rm; ++r)
        for (int64_t c = 0; c < t.rn; ++c)
          vec.push_back(kb.store(ops.c, ops.cIndex(rows[r], cols[c]), ops.init(rows[r])));
    kir::GemmTileShape sh;
    sh.a = ops.a;
    sh.b = ops.b;
    sh.mr = t.rm;
    sh.nr = t.rn;
    sh.lda = st.aRow * t.wm; // a work-item's rows are wm apart
    sh.ak = st.aCol;
    sh.ldb = st.bRow;
    sh.ldc = st.cRow * t.wm;
    sh.accumulate = static_cast<bool>(ops.init);
    sh.sumEvery = runs ? ops.sumRun : 0;
    Expr aOff = kir::add(st.aBase, kir::mul(rows[0], i64(st.aRow)));
    Expr bOff = kir::add(st.bBase, cols[0]);
    Expr cOff = kir::add(kir::add(st.cBase, kir::mul(rows[0], i64(st.cRow))), cols[0]);
    vec.push_back(kb.gemmTile(sh, ops.c, aOff, bOff, cOff, i64(k)));
    if (ops.finish)
      for (int64_t r = 0; r < t.rm; ++r)
        for (int64_t c = 0; c < t.rn; ++c)
          vec.push_back(ops.finish(rows[r], cols[c], hoisted));
    Expr full = nullptr;
    if (m % TM != 0)
      full = kir::lt(rows[t.rm - 1], i64(m));
    if (n % TN != 0) {
      Expr colsIn = kir::lt(cols[t.rn - 1], i64(n));
      full = full ? kir::land(full, colsIn) : colsIn;
    }
    if (full)
      tileStmts = {kir::ifThen(full, kir::block(vec), kir::block(tileStmts))};
    else
      tileStmts = std::move(vec);
  }
  // The epilogue's hoisted locals may read the batch variables.
  std::vector<Stmt> all = std::move(batchVars);
  for (Stmt &s : hoisted)
    all.push_back(std::move(s));
  for (Stmt &s : tileStmts)
    all.push_back(std::move(s));
  Stmt nest = kir::block(all);
  if (ep) {
    ep->markApplied();
    epHoisted.push_back(nest);
    nest = kir::block(epHoisted);
  }
  // Work-items inside work-groups; dimension 0 runs along the columns.
  nest = kir::forLoop(tx, i64(t.wn), nest, kir::LoopKind::GpuThread);
  nest = kir::forLoop(ty, i64(t.wm), nest, kir::LoopKind::GpuThread);
  nest->gpuAxis = 1;
  nest = kir::forLoop(bx, i64(colTiles), nest, kir::LoopKind::GpuBlock);
  nest = kir::forLoop(by, i64(rowTiles), nest, kir::LoopKind::GpuBlock);
  nest->gpuAxis = 1;
  nest = kir::forLoop(bz, i64(batch), nest, kir::LoopKind::GpuBlock);
  nest->gpuAxis = 2;
  return nest;
}

} // namespace nnc::lower
