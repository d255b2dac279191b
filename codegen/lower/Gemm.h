// The register-blocked GEMM loop nest behind matmul and conv (codegen/lower/Gemm.cpp) and its
// tuning space "gemm_cpu".
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "LowerUtil.h"
#include "nnc/codegen/Tuning.h"

namespace nnc::lower {

class Epilogue;

/// How a GEMM C[i, j] = init(i) + sum_k A[i, k] * B[k, j] reaches its buffers: index
/// expressions of A(i, k), B(k, j) and C(i, j) (flat element indices), and the initial
/// accumulator of row i (null: zero).
struct GemmOperands {
  int a = -1, b = -1, c = -1; ///< Buffers (KernelBuilder indices).
  DType acc;                  ///< Accumulator type (f32 for f32/f16/bf16).
  std::function<kir::Expr(kir::Expr i, kir::Expr k)> aIndex;
  std::function<kir::Expr(kir::Expr k, kir::Expr j)> bIndex;
  std::function<kir::Expr(kir::Expr i, kir::Expr j)> cIndex;
  std::function<kir::Expr(kir::Expr i)> init;

  /// Optional: the same operands as strided matrices, which makes the GEMM eligible for the
  /// microkernel path (knob mk=1) when A, B and C are f32 buffers:
  ///   A(i, k) = aBase + i*aRow + k*aCol, B(k, j) = bBase + k*bRow + j,
  ///   C(i, j) = cBase + i*cRow + j       (B and C columns contiguous).
  /// The bases may use the batch loop variables. Operands without it (generic index
  /// lambdas, e.g. blocked layouts) take the scalar register-tile path.
  struct Strided {
    kir::Expr aBase, bBase, cBase;
    int64_t aRow = 0, aCol = 1, bRow = 0, cRow = 0;
  };
  std::optional<Strided> strided;
  /// The node scratch indices packScratch (B panels) and packScratch + 1 (A panels) the
  /// microkernel path may use to pack operands at run time (-1: never pack). They must not
  /// be used by the GEMM's kernel otherwise.
  int packScratch = -1;
  /// > 0: B is already packed as panels of packedNr columns (ir/GemmPacking.h: B(k, j) at
  /// strided->bBase + ((j / packedNr) * K + k) * packedNr + j % packedNr, as `bIndex` also
  /// says; a compile-time packed weight, or conv's im2col written in panels); the microkernel
  /// path then uses nr = packedNr and reads the panels directly.
  int64_t packedNr = 0;
  /// With packedNr: B is a bf16 weight in panels of k pairs (packGemmPanelsBf16, zero past K),
  /// so the microkernel path runs, whatever the config's mk, with bf16 tiles
  /// (kir::GemmElems::BF16): A (f32, strided, at a constant base: no batch loop moves it) is
  /// rounded to bf16 as it is packed, once, into scratch packScratch + 1, rows of K rounded up
  /// to even.
  bool bf16 = false;
  /// > 0: f32 sums over k in runs of this many products (a matmul's sum_run; see
  /// kir::GemmTileShape::sumEvery): the microkernel and GEMV tiles, the scalar register tiles
  /// (runs override their k unroll) and gpuGemmNest (whose local tiles end runs on whole k
  /// tiles).
  int64_t sumRun = 0;
  /// Optional: the statement that finishes C element (i, j) once its sum is complete (a
  /// fused epilogue reading C there and writing the final value). Locals it needs declared
  /// once before a loop of such statements go to `hoisted`. The microkernel path runs it
  /// per cache block right after the block's last k block, while the block is in cache; the
  /// scalar path after the whole nest (per batch entry).
  std::function<kir::Stmt(kir::Expr i, kir::Expr j, std::vector<kir::Stmt> &hoisted)> finish;
  /// Optional (microkernel path): B is not read from `b` but produced for each cache block
  /// and k block, just before the block's tiles read it, into the node scratch
  /// `packScratch` (Goto's packing of B, with a producer instead of a copy: conv's im2col of
  /// only the columns and k rows a block needs, used while they are in cache instead of
  /// written whole to memory first; the thread's own scratch). produceB(dst, ldb, col0, cols,
  /// k0, kCount) returns the statement writing B(k0 + r, col0 + j) for r < kCount and
  /// j < cols at dst[r*ldb + j]. `b` still names the buffer the producer reads (its dtype decides
  /// eligibility), and `bIndex` and `strided->bBase`/`bRow` are not used.
  std::function<kir::Stmt(int dst, int64_t ldb, kir::Expr col0, kir::Expr cols, kir::Expr k0,
                          kir::Expr kCount)>
      produceB;
  /// Optional (gpuGemmNest, without `finish`): a fused group's epilogue, applied to each C
  /// element a work-item stores once (it then calls Epilogue::markApplied); a tile stored
  /// through a GemmTile is not final, and leaves it to the planner.
  Epilogue *epilogue = nullptr;
};

/// The tunable problem of an M x K x N GEMM run `batch` times; `layout` names how operands
/// are laid out and what else is fused in (part of the signature).
/// `producedB`: B comes from GemmOperands::produceB (its defaults block k and columns so that
/// a produced block stays in L2). `bMatrices`: the distinct K x N weight matrices packed at
/// compile time that B holds over the batch (1: one B shared by every entry, or activations;
/// `batch`: one per entry, a Winograd GEMM's), which the defaults weigh as the bytes of B a
/// run streams from memory.
tuning::Problem gemmProblem(DType t, int64_t batch, int64_t m, int64_t k, int64_t n,
                            const std::string &layout, bool producedB = false,
                            int64_t bMatrices = 1);

/// The GEMM as register tiles. With `ops.strided`, f32 buffers and knob mk=1 (the
/// microkernel path): cache blocks of mc rows x nc columns x kc depth, each a loop of
/// kir::GemmTile microkernels (f32_gemm_<mr>x<nr>_<isa>) over packed B panels (knob pb: B
/// copied at run time into scratch `ops.packScratch` as panels of nr columns, contiguous
/// over k), blocks run in parallel (knob par), a block's first row tile prefetches the next
/// B panel (knob pf), and `ops.finish` runs per block once the block is complete. Otherwise:
/// The GEMM as register tiles of `mr` rows x `nr` columns whose accumulators are locals
/// (kept in vector registers), each C element stored once with its final value at its flat
/// index. Edge rows and columns get tiles of their own size. `batchLoops` (outermost first,
/// already wrapping the operand lambdas' batch offsets) go around the nest; the parallel
/// knob marks the outermost loop of the main nest parallel through `schedule`.
kir::Stmt gemmNest(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k, int64_t n,
                   const tuning::Config &cfg, const std::vector<std::pair<std::string, kir::Expr>>
                                                  &batchLoops,
                   kir::Schedule &schedule);

/// The end of a run of partial sums (GemmOperands::sumRun) in a tile of accumulator locals:
/// each acc[r][c] += part[r][c], then part[r][c] = 0 (locals of type t).
kir::Stmt endOfSumRun(const std::vector<std::vector<std::string>> &acc,
                      const std::vector<std::vector<std::string>> &part, DType t);

/// The schedule of the OpenCL GEMM (GpuGemm.cpp), in CLBlast xgemm's terms: a work-group
/// of MDIMC x NDIMC = wm x wn work-items computes an MWG x NWG = (rm*wm) x (rn*wn) tile of C,
/// each work-item an MWI x NWI = rm x rn register tile. Its columns come in vectors of vw
/// adjacent columns, vectors wn*vw apart (vw = rn: all adjacent, one vector per row on a
/// device that prefers float vectors; vw = 1: neighbouring work-items on neighbouring
/// columns, which a GPU coalesces). With `local`, the k loop runs over tiles of kwg: the
/// group stages A's MWG x kwg and B's kwg x NWG tiles in local memory between barriers.
struct GpuGemmTile {
  int64_t rm = 1, rn = 1, wm = 1, wn = 1, vw = 1;
  bool local = false;
  int64_t kwg = 16;
};
/// The "gemm_opencl" space: knobs mdimc, ndimc (work-group shape), mwi, nwi (register tile),
/// vw, kwg and local; the problem's dims are batch, m, k, n and Problem::gpu the device.
const tuning::Space &gemmOpenCLSpace();
/// The tunable problem of an OpenCL GEMM.
tuning::Problem gpuGemmProblem(DType t, int64_t batch, int64_t m, int64_t k, int64_t n,
                               const std::string &layout);
/// The schedule a config of gemmOpenCLSpace() names.
GpuGemmTile gpuGemmTileOf(const tuning::Config &c);
/// The GEMM as an NDRange for an OpenCL device: work-groups over tiles of C (dimension 0:
/// columns, 1: rows, 2: the `batch` entries, whose loop variables `batchLoops` the operand
/// lambdas use). `ops.init` and `ops.finish` apply as on the CPU; `ops.strided` (with
/// `ops.packedNr`) tells when B's columns may be read as vectors. Local tiles the nest
/// uses are appended to `locals`.
kir::Stmt gpuGemmNest(KernelBuilder &kb, const GemmOperands &ops, int64_t batch, int64_t m,
                      int64_t k, int64_t n,
                      const std::vector<std::pair<std::string, kir::Expr>> &batchLoops,
                      const GpuGemmTile &t, std::vector<kir::LocalBuffer> &locals);

/// The "gemm_cpu" space (listed by the registry in Tuning.cpp).
const tuning::Space &gemmCpuSpace();

/// The skinny GEMM (Gemv.cpp): at most this many rows by a compile-time packed weight.
constexpr int64_t kGemvMaxRows = 4;
/// True for a matmul by a packed f32 weight (packed_n) whose A has static extents and at most
/// kGemvMaxRows rows per product: the template `matmul.gemv_packed_b` (cheap; node only).
bool skinnyPackedMatMul(const Node &matmul);
/// True when gemvNest takes `ops`: f32 strided operands, B packed (ops.packedNr), no init or
/// produced B, 1 <= m <= kGemvMaxRows, k > 0, and an m x packedNr tile fits `cpu`'s vector
/// registers.
bool gemvEligible(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k,
                  const CpuTarget &cpu);
/// The tunable problem of a skinny GEMM ("gemv_cpu").
tuning::Problem gemvProblem(DType t, int64_t batch, int64_t m, int64_t k, int64_t n,
                            const std::string &layout);
/// The skinny GEMM as a stream over B's packed panels (parallel with knob par): per panel one
/// GemmTile of all m rows over all of k that prefetches `pfd` bytes ahead in the stream, then
/// `ops.finish` on the panel's columns; the column edge is one tile of its width. `ops` must
/// satisfy gemvEligible. `batchLoops` go around it, as in gemmNest.
kir::Stmt gemvNest(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k, int64_t n,
                   const tuning::Config &cfg,
                   const std::vector<std::pair<std::string, kir::Expr>> &batchLoops,
                   kir::Schedule &schedule);
/// The "gemv_cpu" space: knobs par and pfd.
const tuning::Space &gemvCpuSpace();

/// The loop nest that packs a K x N operand of the u8 x s8 -> s32 GemmTiles into buffer `bp` as
/// their B panels (ir/GemmPacking.h: [ceil(N/nr)][ceil(K/4)][nr][4] i8): element (k, n) is
/// `load(min(k, K - 1), min(n, N - 1))` (the load stays in bounds), shifted from u8 to i8 by
/// -128 when `isUnsigned`, and 0 past K or N. `panelVar` receives the name of the outermost
/// loop, over the panels, for the caller's parallel schedule.
kir::Stmt packIntGemmPanels(KernelBuilder &kb, int bp, int64_t K, int64_t N, int64_t nr,
                            bool isUnsigned,
                            const std::function<kir::Expr(kir::Expr k, kir::Expr n)> &load,
                            std::string &panelVar);

} // namespace nnc::lower
