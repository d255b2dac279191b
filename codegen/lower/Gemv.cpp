// The skinny GEMM of a few rows by a weight packed at compile time (decode-time matmuls: one
// token, a few beams), and its tuning space "gemv_cpu".
//
// With M <= kGemvMaxRows rows every weight element takes 2M flops against 4 bytes read, so
// the GEMM is a stream of B from memory and the arithmetic waits on it. gemvNest:
//  1. B's panels (ir/GemmPacking.h: nr columns each, contiguous over k, one panel after
//     another, so the whole matrix is one sequential stream) are a loop, parallel over the
//     threads (par=1): each thread streams a contiguous run of panels and writes its columns
//     of C.
//  2. Per panel, one GemmTile f32_gemm_<M>x<nr> of all M rows over all of k: the panel is
//     read once for every row, A stays in place (M x K floats, in L1 after the first panel),
//     C is written once. With pfd > 0 its k step p also prefetches the B row `pfd` bytes
//     further along the stream (GemmTileShape::prefetchB): past the panel's end, the start of
//     the next panel. Off by default: the panels are contiguous, so the hardware prefetcher
//     already follows one stream (see the defaults); the tuner can turn it on where a core's
//     prefetcher falls short of its memory bandwidth.
//  3. The column edge (N % nr columns, zero-padded in their panel) is one tile of its own
//     width (masked lanes), after the full panels.
//  4. A fused epilogue (GemmOperands::finish) runs on each panel's M x nr results right after
//     its tile, while they are in L1.
// The accumulation order per element is the microkernel's (k in order), as in gemmNest's
// one-tile case, so the two paths give the same numbers.
#include "Gemm.h"

#include <algorithm>

namespace nnc::lower {

using kir::Expr;
using kir::Stmt;
using tuning::Config;

namespace {

Expr i64c(int64_t v) {
  return kir::intImm(v);
}

/// Accumulator vectors of an mr x nr tile, plus its B vectors and one broadcast, fit the
/// target's vector registers.
bool tileFits(int64_t mr, int64_t nr, int64_t lanes, int64_t regs) {
  int64_t vecs = (nr + lanes - 1) / lanes;
  return mr * vecs + vecs + 1 <= regs;
}

} // namespace

bool skinnyPackedMatMul(const Node &matmul) {
  if (matmul.kind() != OpKind::MatMul || !matmul.hasAttr("packed_n") ||
      matmul.numOperands() != 2 || !matmul.operand(0) || !matmul.operand(1))
    return false;
  const Value *a = matmul.operand(0), *b = matmul.operand(1);
  if (a->dtype() != DType::F32 || b->dtype() != DType::F32 || a->rank() < 2 || b->rank() < 3)
    return false;
  std::optional<Extents> ae = staticExtents(a->shape());
  if (!ae || ae->back() < 1)
    return false;
  // One weight matrix ([P, K, nr]): A's batch dims fold into its rows (lowerMatMul).
  int64_t rows = (*ae)[ae->size() - 2];
  if (b->rank() == 3)
    for (size_t d = 0; d + 2 < ae->size(); ++d)
      rows *= (*ae)[d];
  return rows >= 1 && rows <= kGemvMaxRows;
}

bool gemvEligible(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k,
                  const CpuTarget &cpu) {
  return ops.strided && ops.packedNr > 0 && !ops.init && !ops.produceB && m >= 1 &&
         m <= kGemvMaxRows && k > 0 && ops.acc == DType::F32 &&
         kb.bufferType(ops.a) == DType::F32 && kb.bufferType(ops.b) == DType::F32 &&
         kb.bufferType(ops.c) == DType::F32 && cpu.f32Lanes() >= 4 &&
         tileFits(m, ops.packedNr, cpu.f32Lanes(), cpu.vectorRegisters);
}

tuning::Problem gemvProblem(DType t, int64_t batch, int64_t m, int64_t k, int64_t n,
                            const std::string &layout) {
  tuning::Problem p;
  p.kind = "gemv_cpu";
  p.signature = fmt::format("gemv_cpu {} b{} m{} k{} n{} {}", dtypeName(t), batch, m, k, n,
                            layout);
  p.dims = {batch, m, k, n};
  p.flops = 2.0 * double(batch) * double(m) * double(k) * double(n);
  return p;
}

Stmt gemvNest(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k, int64_t n,
              const Config &cfg, const std::vector<std::pair<std::string, Expr>> &batchLoops,
              kir::Schedule &schedule) {
  const GemmOperands::Strided &st = *ops.strided;
  const int64_t nr = ops.packedNr;
  const int64_t panels = n / nr, nRem = n % nr;
  const int64_t pfd = knob(cfg, "pfd", 0) / 4; // bytes -> f32 elements
  bool par = knob(cfg, "par", 0) == 1;
  int64_t batchCount = 1;
  for (const auto &bl : batchLoops)
    batchCount *= bl.second->kind == kir::ExprKind::IntImm ? bl.second->intValue : 2;
  // Several independent matrices: one per thread at a time (no join per matrix).
  bool parBatch = par && batchCount >= 4;

  // The tile of panel `panel` (`cols` of its columns), then its epilogue.
  auto panelTile = [&](Expr panel, int64_t cols) -> Stmt {
    kir::GemmTileShape shape;
    shape.a = ops.a;
    shape.b = ops.b;
    shape.mr = m;
    shape.nr = cols;
    shape.lda = st.aRow;
    shape.ak = st.aCol;
    shape.ldb = nr;
    shape.ldc = st.cRow;
    shape.prefetchB = pfd;
    shape.sumEvery = ops.sumRun;
    Expr col0 = kir::mul(panel, i64c(nr));
    Expr bOff = kir::add(st.bBase, kir::mul(panel, i64c(k * nr)));
    Expr cOff = kir::add(st.cBase, col0);
    Stmt tile = kb.gemmTile(shape, ops.c, st.aBase, bOff, cOff, i64c(k));
    if (!ops.finish)
      return tile;
    std::string iV = kb.freshName("fi"), jV = kb.freshName("fj");
    std::vector<Stmt> fin;
    Stmt elem = ops.finish(kir::var(iV), kir::add(col0, kir::var(jV)), fin);
    fin.push_back(kir::forLoop(iV, i64c(m), kir::forLoop(jV, i64c(cols), elem)));
    schedule.steps.push_back({kir::ScheduleStep::Vectorize, jV, 0, {}});
    return kir::block({tile, kir::block(fin)});
  };

  std::vector<Stmt> parts;
  if (panels > 0) {
    std::string pV = kb.freshName("panel");
    parts.push_back(kir::forLoop(pV, i64c(panels), panelTile(kir::var(pV), nr)));
    if (par && !parBatch && panels > 1)
      schedule.steps.push_back({kir::ScheduleStep::Parallel, pV, 0, {}});
  }
  if (nRem > 0)
    parts.push_back(panelTile(i64c(panels), nRem));
  Stmt body = parts.size() == 1 ? parts[0] : kir::block(parts);
  for (size_t d = batchLoops.size(); d-- > 0;)
    body = kir::forLoop(batchLoops[d].first, batchLoops[d].second, body);
  if (parBatch)
    schedule.steps.push_back({kir::ScheduleStep::Parallel, batchLoops[0].first, 0, {}});
  return body;
}

const tuning::Space &gemvCpuSpace() {
  static const tuning::Space space = [] {
    tuning::Space s;
    s.kind = "gemv_cpu";
    s.version = 1;
    s.knobs = {
        {"par", {0, 1}, "1: the panels (or the batch entries) run on the thread pool"},
        {"pfd",
         {0, 512, 1024, 2048, 4096, 8192},
         "bytes ahead in B's panel stream that each k step prefetches (0: none)"},
    };
    s.valid = [](const Config &c, const tuning::Problem &) {
      return tuning::namesEveryKnob(gemvCpuSpace(), c);
    };
    s.defaults = [](const tuning::Problem &p) {
      int64_t batch = p.dims[0], k = p.dims[2], n = p.dims[3];
      double weightBytes = 4.0 * double(batch) * double(k) * double(n);
      // A thread's share must outweigh waking the pool: 64 KiB of weight is a few
      // microseconds of streaming from memory. In a loop body a weight that fits the core's
      // L2 stays there from one step to the next, and one thread streams it from there in a
      // few microseconds too: split, every step paid a fork and a join, and on a machine
      // whose other core was busy a late worker's chunk (a bidirectional GRU-256's step
      // matrices, 768 KB each, took 3 times their one-thread time at 2 threads then:
      // bench/results/domain-models.md).
      bool stepsFromL2 = p.loopBody && weightBytes <= double(p.cpu.l2Bytes);
      int64_t par = weightBytes >= double(1 << 16) && !stepsFromL2 ? 1 : 0;
      // No software prefetch by default: the panels are one sequential stream, which the
      // hardware prefetcher follows; the prefetches (one per line of B) only took load slots
      // (measured slower at every distance, 1 and 4 rows: measurements-behind-defaults.md).
      // The tuner measures the distances per machine.
      int64_t pfd = 0;
      return Config{{"par", par}, {"pfd", pfd}};
    };
    return s;
  }();
  return space;
}

} // namespace nnc::lower
