// The register-blocked GEMM loop nest behind matmul and conv (codegen/lower/Gemm.cpp) and its
// tuning space "gemm_cpu".
#pragma once

#include <functional>
#include <string>

#include "LowerUtil.h"
#include "nnc/codegen/Tuning.h"

namespace nnc::lower {

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
};

/// The tunable problem of an M x K x N GEMM run `batch` times; `layout` names how operands
/// are laid out and what else is fused in (part of the signature).
tuning::Problem gemmProblem(DType t, int64_t batch, int64_t m, int64_t k, int64_t n,
                            const std::string &layout);

/// The GEMM as register tiles of `mr` rows x `nr` columns whose accumulators are locals
/// (kept in vector registers), each C element stored once with its final value at its flat
/// index. Edge rows and columns get tiles of their own size. `batchLoops` (outermost first,
/// already wrapping the operand lambdas' batch offsets) go around the nest; the parallel
/// knob marks the outermost loop of the main nest parallel through `schedule`.
kir::Stmt gemmNest(KernelBuilder &kb, const GemmOperands &ops, int64_t m, int64_t k, int64_t n,
                   const tuning::Config &cfg, const std::vector<std::pair<std::string, kir::Expr>>
                                                  &batchLoops,
                   kir::Schedule &schedule);

/// The "gemm_cpu" space (listed by the registry in Tuning.cpp).
const tuning::Space &gemmCpuSpace();

} // namespace nnc::lower
