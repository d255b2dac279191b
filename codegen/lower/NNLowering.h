// Private helpers of the reduction, NN and resize lowerers (Reductions.cpp, NN.cpp, Conv*.cpp,
// Pool.cpp, Resize.cpp): accumulator types, NaN-aware comparisons and loop nests that skip unit
// loops.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "LowerUtil.h"
#include "Lowerers.h"

namespace nnc::lower {

/// Register the NN ops (einsum here, conv and conv_transpose of Conv.cpp, pools and lrn of
/// Pool.cpp) and resize; called by registerReductionAndNNLowerers().
void registerNNLowerers(LowererTable &t);
void registerConvLowerers(LowererTable &t);
void registerPoolLowerers(LowererTable &t);
/// matmul_integer's generic nest (IntGemm.cpp): one i32 sum per output element.
void registerIntGemmLowerer(LowererTable &t);
Expected<std::vector<kir::Kernel>> lowerMatMulIntegerLoops(const Node &node,
                                                           const std::string &prefix);
/// matmul_integer as u8s8s32 GemmTiles over operands packed at run time, zero points by
/// compensation (IntGemm.cpp; the "igemm_cpu" space).
Expected<std::vector<kir::Kernel>> lowerMatMulIntegerTiles(const Node &node,
                                                           const std::string &prefix,
                                                           const tuning::LowerOptions *opts);
/// The "igemm_cpu" space: knobs mr, nr (the tile) and par.
const tuning::Space &igemmCpuSpace();
/// conv_integer's generic nest (ConvInteger.cpp): one i32 sum per output element.
void registerConvIntegerLowerer(LowererTable &t);
Expected<std::vector<kir::Kernel>> lowerConvIntegerLoops(const Node &node,
                                                         const std::string &prefix);
void registerResizeLowerer(LowererTable &t);
/// grid_sample (GridSample.cpp); roi_align and non_max_suppression (Detection.cpp).
void registerGridSampleLowerer(LowererTable &t);
void registerDetectionLowerers(LowererTable &t);
/// det (Det.cpp).
void registerDetLowerer(LowererTable &t);
/// linear_attention (LinearAttention.cpp).
void registerLinearAttentionLowerer(LowererTable &t);
/// unique (Unique.cpp); tfidf_vectorizer and tree_ensemble (ML.cpp).
void registerUniqueLowerer(LowererTable &t);
void registerMLLowerers(LowererTable &t);

/// Element strides, along each of a matmul's `nb` output batch dims, of an operand whose batch
/// extents are `in` (right-aligned numpy broadcasting: a broadcast dim has stride 0) and whose
/// matrices hold `matSize` elements.
std::vector<int64_t> batchStrides(size_t nb, const Extents &in, int64_t matSize);

/// Finishes result element (row, col) of a node viewed as a [rows, N] matrix (N its last
/// extent) once the element's value is complete; locals to declare once before a loop of
/// them go to `hoisted` (GemmOperands::finish).
using ElementFinish =
    std::function<kir::Stmt(kir::Expr row, kir::Expr col, std::vector<kir::Stmt> &hoisted)>;
/// Makes the finish of a kernel being built (it may declare buffers with `kb`).
using MakeElementFinish = std::function<ElementFinish(KernelBuilder &kb)>;

/// How a matmul's GEMM runs: the CPU's register-blocked loop nest (Gemm.h gemmNest), the
/// CPU's skinny stream over packed panels (gemvNest; Tiles where gemvEligible fails), or an
/// NDRange of register tiles for the OpenCL device in LowerOptions::gpu (gpuGemmNest).
enum class MatMulPath { Tiles, Skinny, NDRange };

/// Matmul's lowering with `makeFinish`'s statement applied to every result element inside
/// the GEMM (per cache block on the microkernel path): a fused epilogue
/// (codegen/lower/Fusion.cpp) without a separate pass over the result.
Expected<std::vector<kir::Kernel>> lowerMatMulFinished(const Node &node, const std::string &prefix,
                                                       const tuning::LowerOptions *opts,
                                                       const MakeElementFinish &makeFinish,
                                                       MatMulPath path = MatMulPath::Tiles);

struct GemmOperands;

namespace nnl {
/// The GEMM of `go` as one OpenCL NDRange kernel (GpuGemm.cpp), its tile from the tuned or
/// default config of the "gemm_opencl" problem, the batch entries on NDRange dimension 2:
/// matmul's, and the GEMMs of the conv lowerings on an OpenCL device (NN.cpp).
kir::Kernel ndrangeGemm(KernelBuilder &kb, const GemmOperands &go, DType t, int64_t batch,
                        int64_t m, int64_t k, int64_t n,
                        const std::vector<std::pair<std::string, kir::Expr>> &batchLoops,
                        const std::string &layout, const tuning::LowerOptions *opts);
} // namespace nnl

namespace nnl {

/// The type sums over `t` accumulate in: f32 for f16/bf16, f64 for f32 when `wide` (long
/// reductions), the type itself otherwise (integers wrap like the interpreter's).
inline DType accType(DType t, bool wide) {
  if (t == DType::F16 || t == DType::BF16)
    return DType::F32;
  if (t == DType::F32 && wide)
    return DType::F64;
  return t;
}

/// The type comparisons and moves of `t` are done in: f32 for f16/bf16, `t` otherwise.
inline DType computeType(DType t) {
  return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t;
}

inline kir::Expr i64(int64_t v) { return kir::intImm(v); }
inline kir::Expr fc(double v, DType t) { return kir::constant(v, t); }
inline kir::Expr bnot(kir::Expr a) { return kir::op(OpKind::Not, {std::move(a)}); }
inline kir::Expr bor(kir::Expr a, kir::Expr b) {
  return kir::op(OpKind::Or, {std::move(a), std::move(b)});
}
inline kir::Expr isNaN(kir::Expr a) { return kir::op(OpKind::IsNaN, {std::move(a)}); }
inline kir::Expr gt(kir::Expr a, kir::Expr b) {
  return kir::op(OpKind::Greater, {std::move(a), std::move(b)});
}
inline kir::Expr le(kir::Expr a, kir::Expr b) {
  return kir::op(OpKind::LessEqual, {std::move(a), std::move(b)});
}
inline kir::Expr eq(kir::Expr a, kir::Expr b) {
  return kir::op(OpKind::Equal, {std::move(a), std::move(b)});
}

/// a > b where NaN counts as larger than every number (the interpreter's greaterNaN).
inline kir::Expr greaterNaN(const kir::Expr &a, const kir::Expr &b) {
  if (!isFloat(a->type))
    return gt(a, b);
  return bor(kir::land(isNaN(a), bnot(isNaN(b))), gt(a, b));
}
/// a < b where NaN counts as smaller than every number (the interpreter's lessNaN).
inline kir::Expr lessNaN(const kir::Expr &a, const kir::Expr &b) {
  if (!isFloat(a->type))
    return kir::lt(a, b);
  return bor(kir::land(isNaN(a), bnot(isNaN(b))), kir::lt(a, b));
}

/// lo <= e < hi as a bool expression (folds when constant).
inline kir::Expr inRange(const kir::Expr &e, int64_t lo, int64_t hi) {
  return kir::land(kir::ge(e, i64(lo)), kir::lt(e, i64(hi)));
}

/// The smallest / largest value of an integer dtype (as IntImm bits) or -inf / +inf.
kir::Expr lowestOf(DType t);
kir::Expr highestOf(DType t);

/// A loop nest built outside-in; a loop of extent 1 is not emitted (its index is 0), so
/// schedules and codegen see only real loops.
struct Nest {
  std::vector<std::pair<std::string, kir::Expr>> loops; ///< Name and extent, outermost first.

  kir::Expr add(KernelBuilder &kb, int64_t extent, const std::string &prefix = "i") {
    if (extent == 1)
      return i64(0);
    std::string n = kb.freshName(prefix);
    loops.push_back({n, i64(extent)});
    return kir::var(n);
  }
  /// A loop with a computed (non-negative) extent.
  kir::Expr addDynamic(KernelBuilder &kb, kir::Expr extent, const std::string &prefix = "t") {
    std::string n = kb.freshName(prefix);
    loops.push_back({n, std::move(extent)});
    return kir::var(n);
  }
  kir::Stmt wrap(kir::Stmt body, kir::LoopKind kind = kir::LoopKind::Serial) const {
    for (size_t d = loops.size(); d-- > 0;)
      body = kir::forLoop(loops[d].first, loops[d].second, body, kind);
    return body;
  }
  bool empty() const { return loops.empty(); }
  /// Static extent of loop d (-1 when computed).
  int64_t extent(size_t d) const {
    const kir::Expr &e = loops[d].second;
    return e->kind == kir::ExprKind::IntImm ? e->intValue : -1;
  }
};

/// Declares the loops of `outer` (the result's index space: each iteration writes its own
/// elements) independent, so an OpenCL device runs them all as its grid; and runs the
/// outermost in parallel on the CPU when it has at least two iterations and the kernel does
/// at least `work` scalar steps worth sharing out.
inline kir::Schedule parallelOuter(const Nest &outer, int64_t work) {
  kir::Schedule s;
  if (!outer.empty()) {
    kir::ScheduleStep grid{kir::ScheduleStep::GpuGrid, "", 0, {}};
    for (const auto &[name, extent] : outer.loops)
      grid.loops.push_back(name);
    s.steps.push_back(std::move(grid));
  }
  if (!outer.empty() && outer.extent(0) >= 2 && work >= (int64_t(1) << 15))
    s.steps.push_back({kir::ScheduleStep::Parallel, outer.loops[0].first, 0, {}});
  return s;
}

/// The sum of `terms` (0 when there are none).
inline kir::Expr sumOf(const std::vector<kir::Expr> &terms) {
  kir::Expr s = i64(0);
  for (const kir::Expr &t : terms)
    s = kir::add(s, t);
  return s;
}

/// The conjunction of `conds` (true when there are none).
inline kir::Expr allOf(const std::vector<kir::Expr> &conds) {
  kir::Expr c = kir::intImm(1, DType::Bool);
  for (const kir::Expr &e : conds)
    c = kir::land(c, e);
  return c;
}

/// Whether `e` is the constant true (or any nonzero integer constant).
inline bool isTrue(const kir::Expr &e) {
  return e->kind == kir::ExprKind::IntImm && e->intValue != 0;
}

/// `s`, under `cond` unless that is the constant true.
inline kir::Stmt guarded(const kir::Expr &cond, kir::Stmt s) {
  return isTrue(cond) ? s : kir::ifThen(cond, s);
}

/// A kernel that does nothing (for results with no elements); still declares the results.
inline kir::Kernel emptyKernel(const Node &node, const std::string &name) {
  KernelBuilder kb(node, name);
  for (size_t r = 0; r < node.numResults(); ++r)
    kb.result(r);
  return kb.finish(kir::block({}));
}

} // namespace nnl
} // namespace nnc::lower
