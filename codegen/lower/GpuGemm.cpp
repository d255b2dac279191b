// The GEMM for an OpenCL device (gpuGemmNest, Gemm.h): the NDRange does the tiling that the
// CPU path does with loops.
//
// Algorithm: a work-group computes a tile of TM = rm*wm rows x TN = rn*wn columns of one batch
// entry; its wm x wn work-items each keep an rm x rn register tile of accumulators. Work-item
// (ty, tx) owns rows rowBase + r*wm + ty and columns colBase + c*wn + tx, so neighbouring
// work-items read neighbouring columns of B and write neighbouring columns of C (coalesced),
// and all of a row of work-items read the same A element (a broadcast). On a device that
// prefers float vectors (an OpenCL CPU device) a work-item's columns are adjacent instead,
// colBase + tx*rn + c, so its row of rn accumulators is one vector. The k loop loads rm
// values of A and rn of B per step and does rm*rn multiply-adds. NDRange dimension 0 runs over
// column tiles, 1 over row tiles, 2 over batch entries. Edge tiles clamp their loads to valid
// rows and columns and guard their stores.
//
// Not yet: staging A and B tiles through local memory (the kernel IR has no local buffers or
// barriers yet; the device's caches serve the reuse), vector loads, and per-device tuning of
// the tile shape (the shape comes from the device's work-group limit and the problem).
#include <algorithm>

#include "Gemm.h"

namespace nnc::lower {

using kir::Expr;
using kir::Stmt;

namespace {

Expr i64(int64_t v) { return kir::intImm(v); }

int64_t pow2AtLeast(int64_t v) {
  int64_t p = 1;
  while (p < v)
    p *= 2;
  return p;
}

} // namespace

GpuGemmTile chooseGpuGemmTile(int64_t m, int64_t n, const GpuTarget &gpu) {
  GpuGemmTile t;
  int64_t group = std::max<int64_t>(1, std::min<int64_t>(gpu.maxWorkGroupSize, 256));
  // A device that prefers float vectors (CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT > 1: PoCL's
  // CPU device says 8 with AVX2) vectorizes within a work-item: a row of adjacent columns
  // becomes one vector. GPUs say 1 and vectorize across work-items instead.
  int64_t vec = gpu.preferredFloatVector;
  t.contiguousColumns = vec > 1 && n >= vec;
  t.rn = t.contiguousColumns ? vec : n >= 64 ? 4 : 1;
  t.rm = m >= 64 ? 4 : m >= 8 ? 2 : 1;
  t.wn = std::min({int64_t(16), pow2AtLeast((n + t.rn - 1) / t.rn), gpu.maxWorkItemSizes[0],
                   group});
  t.wm = std::min({pow2AtLeast((m + t.rm - 1) / t.rm), std::max<int64_t>(1, group / t.wn),
                   gpu.maxWorkItemSizes[1], int64_t(16)});
  t.wn = std::max<int64_t>(t.wn, 1);
  t.wm = std::max<int64_t>(t.wm, 1);
  return t;
}

Stmt gpuGemmNest(KernelBuilder &kb, const GemmOperands &ops, int64_t batch, int64_t m, int64_t k,
                 int64_t n, const std::vector<std::pair<std::string, Expr>> &batchLoops,
                 const GpuGemmTile &t) {
  const int64_t TM = t.rm * t.wm, TN = t.rn * t.wn;
  const int64_t rowTiles = (m + TM - 1) / TM, colTiles = (n + TN - 1) / TN;
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
  std::vector<Expr> rows(t.rm), cols(t.rn), rowsIn(t.rm), colsIn(t.rn);
  for (int64_t r = 0; r < t.rm; ++r) {
    rows[r] = kir::add(kir::mul(kir::var(by), i64(TM)),
                       kir::add(i64(r * t.wm), kir::var(ty)));
    rowsIn[r] = m % TM == 0 ? rows[r] : kir::min(rows[r], i64(m - 1));
  }
  for (int64_t c = 0; c < t.rn; ++c) {
    cols[c] = kir::add(kir::mul(kir::var(bx), i64(TN)),
                       t.contiguousColumns ? kir::add(kir::mul(kir::var(tx), i64(t.rn)), i64(c))
                                           : kir::add(i64(c * t.wn), kir::var(tx)));
    colsIn[c] = n % TN == 0 ? cols[c] : kir::min(cols[c], i64(n - 1));
  }
  std::vector<std::vector<std::string>> acc(t.rm, std::vector<std::string>(t.rn));
  for (int64_t r = 0; r < t.rm; ++r)
    for (int64_t c = 0; c < t.rn; ++c) {
      acc[r][c] = kb.freshName("acc");
      body.push_back(kir::decl(acc[r][c], ops.acc,
                               ops.init ? ops.init(rowsIn[r]) : kir::constant(0, ops.acc)));
    }
  std::string p = kb.freshName("p");
  std::vector<Stmt> step;
  std::vector<std::string> aN(t.rm), bN(t.rn);
  for (int64_t r = 0; r < t.rm; ++r) {
    aN[r] = kb.freshName("a");
    step.push_back(kir::decl(
        aN[r], ops.acc, kir::cast(kb.load(ops.a, ops.aIndex(rowsIn[r], kir::var(p))), ops.acc)));
  }
  for (int64_t c = 0; c < t.rn; ++c) {
    bN[c] = kb.freshName("b");
    step.push_back(kir::decl(
        bN[c], ops.acc, kir::cast(kb.load(ops.b, ops.bIndex(kir::var(p), colsIn[c])), ops.acc)));
  }
  for (int64_t r = 0; r < t.rm; ++r)
    for (int64_t c = 0; c < t.rn; ++c)
      step.push_back(kir::assign(
          acc[r][c], kir::add(kir::var(acc[r][c], ops.acc),
                              kir::mul(kir::var(aN[r], ops.acc), kir::var(bN[c], ops.acc)))));
  body.push_back(kir::forLoop(p, i64(k), kir::block(step)));
  DType ct = kb.bufferType(ops.c);
  std::vector<Stmt> hoisted, stores;
  for (int64_t r = 0; r < t.rm; ++r)
    for (int64_t c = 0; c < t.rn; ++c) {
      std::vector<Stmt> s{
          kb.store(ops.c, ops.cIndex(rows[r], cols[c]), kir::cast(kir::var(acc[r][c], ops.acc), ct))};
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
  // The epilogue's hoisted locals may read the batch variables.
  std::vector<Stmt> all = std::move(batchVars);
  for (Stmt &s : hoisted)
    all.push_back(std::move(s));
  for (Stmt &s : body)
    all.push_back(std::move(s));
  for (Stmt &s : stores)
    all.push_back(std::move(s));
  Stmt nest = kir::block(all);
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
