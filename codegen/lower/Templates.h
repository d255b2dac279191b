// The kernel-template registry: the fast paths of lowering (GEMM, conv, Winograd, attention),
// each a named template with the ops it implements, when it applies, its knob space and its
// lowering, declared per code target in Templates.cpp (docs/fast-paths.md).
//
// lowerNode() and lowerUnit() take the first template of the target's registry that applies
// to a node (or fusion group), else the op's generic lowerer (Lowerers.h). The lowering
// functions stay in the files of their families; the registry names them and owns the choice.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nnc/codegen/Lowering.h"
#include "nnc/codegen/Tuning.h"

namespace nnc::lower {

using Kernels = std::vector<kir::Kernel>;

/// One fast path.
struct KernelTemplate {
  /// Stable name, "<op family>.<algorithm>" ("matmul.gemm", "conv.im2col_gemm").
  std::string name;
  /// The node kinds it lowers (empty for a group template).
  std::vector<OpKind> ops;
  /// True: it lowers a fusion group (LoweringUnit with members), not a node.
  bool group = false;
  /// One line for docs and listings.
  std::string summary;
  /// The knob space its kernels read through tuning::chooseConfig (null: no knobs).
  const tuning::Space *space = nullptr;
  /// True when it can lower the unit (a node: u.node, u.members empty) for `cpu`. Called only
  /// for units of its ops (node templates) or groups (group templates), all of static shape.
  std::function<bool(const LoweringUnit &u, const CpuTarget &cpu)> applies;
  std::function<Expected<Kernels>(const LoweringUnit &u, const std::string &prefix,
                                  const tuning::LowerOptions &opts)>
      lower;
  /// True: when it lowers a fusion group's anchor, its lowering receives the group's epilogue
  /// (opts.epilogue) and applies it where its kernel writes a final element of the result (at
  /// a store of the final value, or in place once an accumulated element is complete),
  /// calling Epilogue::markApplied. A kernel with no such place leaves it unapplied, as does
  /// every template without this flag: the planner (Fusion.cpp) then runs the epilogue as a
  /// pass after the kernel.
  bool takesEpilogue = false;
  /// True (with takesEpilogue): it also takes an epilogue that changes the result's dtype
  /// (Epilogue::changesType: an integer accumulator requantized to u8, or dequantized to f32),
  /// declaring its result buffer with Epilogue::resultBuffer. Without it such an epilogue
  /// runs as a pass from a scratch accumulator of the anchor's dtype.
  bool convertsEpilogue = false;
};

/// The templates of a code target, in the order they are tried.
const std::vector<KernelTemplate> &templateRegistry(tuning::CodeTarget target);

/// The first template of opts.target's registry that applies to `u`, or null.
const KernelTemplate *chooseTemplate(const LoweringUnit &u, const tuning::LowerOptions &opts);

/// Lowers `u` with `t` (null: `generic`), reporting the choice through opts.onTemplate.
Expected<Kernels>
lowerWithTemplate(const KernelTemplate *t, const LoweringUnit &u, const std::string &prefix,
                  const tuning::LowerOptions &opts,
                  const std::function<Expected<Kernels>(const tuning::LowerOptions &)> &generic);

// ---- What the templates are made of (defined in the files of their families) ---------------

/// matmul (NN.cpp): the register-blocked GEMM of Gemm.h, B packed or not.
Expected<Kernels> lowerMatMulGemm(const Node &node, const std::string &prefix,
                                  const tuning::LowerOptions *opts);
/// matmul by a packed weight with few rows (NN.cpp): the skinny stream of Gemm.h gemvNest.
Expected<Kernels> lowerMatMulGemv(const Node &node, const std::string &prefix,
                                  const tuning::LowerOptions *opts);
/// matmul for the OpenCL device in opts->gpu (NN.cpp, GpuGemm.cpp): an NDRange of
/// work-groups of register tiles, B packed or not; f32 accumulation (f32, f16, bf16).
/// The work-items of a work-group that sums `count` elements as a tree on `gpu` (Reductions.cpp):
/// a power of two of at most 256, each item starting from at least four elements; 0 when
/// fewer than two would do.
int64_t workGroupTreeWidth(int64_t count, const GpuTarget &gpu);
/// A normalization (layer_norm, rms_norm, group_norm, instance_norm) whose rows are long enough
/// for a work-group tree (Composite.cpp).
bool isWorkGroupNorm(const Node &node);
/// That normalization as one work-group per row on opts.gpu: the row's sums as trees in local
/// memory, each work-item normalizing every G-th element.
Expected<std::vector<kir::Kernel>> lowerNormWorkGroup(const Node &node, const std::string &prefix,
                                                      const tuning::LowerOptions &opts);
/// A reduce_* over contiguous innermost rows (long enough for a work-group tree on `gpu`).
bool isWorkGroupReduction(const Node &node, const GpuTarget &gpu);
/// The knob space of the work-group tree (Reductions.cpp): "reduce_opencl", its width.
const tuning::Space &reduceOpenCLSpace();
/// The reduction as one work-group tree per output (Reductions.cpp), on opts.gpu.
Expected<Kernels> lowerReduceWorkGroup(const Node &node, const std::string &prefix,
                                       const tuning::LowerOptions &opts);
Expected<Kernels> lowerMatMulNDRange(const Node &node, const std::string &prefix,
                                     const tuning::LowerOptions *opts);
/// A reduce_* that keeps the innermost dim (a mean over tokens, [1, T, C] -> [1, C]), which the
/// CPU walks in input order into a scratch row (Reductions.cpp).
bool reduceKeepsInnermost(const Node &node);
/// That reduction as one accumulator per output: a device's grid is every output.
Expected<Kernels> lowerReducePerOutput(const Node &node, const std::string &prefix);
/// An arg_max/arg_min whose axis has positions after it (a channel axis of NCHW), where the
/// CPU scans the axis outermost, one vector lane per position after it (Reductions.cpp).
bool argScansOuterAxis(const Node &node);
/// arg_max/arg_min as one scan of the axis per output: a device's grid is every output.
Expected<Kernels> lowerArgPerOutput(const Node &node, const std::string &prefix);

/// The facts about a conv (or conv_transpose) node that its templates' predicates read
/// (Conv.cpp); nullopt when the node is malformed (its generic lowerer reports why).
struct ConvFacts {
  int64_t outElements = 0;  ///< Result elements (0: the generic lowerer's empty kernel).
  bool rowsFit = false;     ///< Few taps per output and long rows: conv.rows_direct fits.
  int64_t taps = 0;         ///< Multiply-adds per output: channels per group x kernel size.
  int64_t colBytes = 0;     ///< Bytes of the GEMM's column matrix (im2col, or col2im's).
  bool forceDirect = false; ///< NNC_CONV_ALGO=direct: tests of the direct loops.
};
std::optional<ConvFacts> convFacts(const Node &node, bool transpose);
/// conv's templates: the row-vectorized direct conv (Conv.cpp), im2col + GEMM (ConvIm2col.cpp;
/// a pointwise conv reads its input in place), conv_transpose as GEMM + col2im
/// (ConvTranspose.cpp), and the direct loops of conv or conv_transpose (Conv.cpp), which take
/// any size. Each applies a fused group's epilogue (opts->epilogue) where its result elements
/// become final.
Expected<Kernels> lowerConvRowsDirect(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions *opts);
Expected<Kernels> lowerConvIm2colGemm(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions *opts);
Expected<Kernels> lowerConvTransposeGemmCol2im(const Node &node, const std::string &prefix,
                                               const tuning::LowerOptions *opts);
Expected<Kernels> lowerConvDirect(const Node &node, const std::string &prefix,
                                  const tuning::LowerOptions *opts);

/// conv_integer's CPU templates (ConvIntegerTiles.cpp): im2col + u8s8s32 GemmTiles for
/// group 1, and the direct depthwise loops (group == C == M, few taps). The first, like
/// matmul_integer's tiles, applies a fused group's epilogue (opts->epilogue, of any dtype) at
/// its final stores.
bool convIntegerTilesApply(const Node &node);
bool convIntegerDepthwiseApplies(const Node &node);
Expected<Kernels> lowerConvIntegerTiles(const Node &node, const std::string &prefix,
                                        const tuning::LowerOptions *opts);
Expected<Kernels> lowerConvIntegerDepthwise(const Node &node, const std::string &prefix);
/// The depthwise conv_integer on channels-last activations (ConvIntegerDepthwiseNHWC.cpp):
/// vectorized along the channels, a fused group's epilogue (of any dtype) at its stores.
bool convIntegerDepthwiseNHWCApplies(const Node &node);
Expected<Kernels> lowerConvIntegerDepthwiseNHWC(const Node &node, const std::string &prefix,
                                                const tuning::LowerOptions *opts);

/// conv_nchwc (Layout.cpp): the register-blocked direct conv over blocked channels.
Expected<Kernels> lowerConvNCHWc(const Node &node, const std::string &prefix,
                                 const tuning::LowerOptions *opts);
/// True for a depthwise conv_nchwc (in_block 1, one input block per group of b channels).
bool isDepthwiseConvNCHWc(const Node &node);

/// winograd_input / winograd_output (Winograd.cpp).
/// `peelBorder`: interior tiles in a nest of their own that loads without bounds checks (the
/// CPU); a device gets one guarded nest (one kernel).
Expected<Kernels> lowerWinogradInput(const Node &node, const std::string &prefix, bool peelBorder,
                                     int64_t l2Bytes);
/// The output transform applies opts.epilogue (a fused group's) at its stores.
Expected<Kernels> lowerWinogradOutput(const Node &node, const std::string &prefix,
                                      const tuning::LowerOptions &opts);

/// The ONNX Attention op (Attention.cpp).
Expected<Kernels> lowerAttentionRows(const Node &node, const std::string &prefix);

/// Group templates (Fusion.cpp): a fused softmax(Q K^T) V group, and a matmul anchor whose
/// epilogue the GEMM applies per cache block (finishesInGemm says when it can).
Expected<Kernels> lowerAttentionGroupUnit(const LoweringUnit &u, const std::string &prefix,
                                          const tuning::LowerOptions &opts);
bool finishesInGemm(const LoweringUnit &u);
Expected<Kernels> lowerFinishedMatMulUnit(const LoweringUnit &u, const std::string &prefix,
                                          const tuning::LowerOptions &opts);
/// The same group on the skinny GEMM (a matmul anchor that skinnyPackedMatMul takes).
Expected<Kernels> lowerFinishedMatMulUnitGemv(const LoweringUnit &u, const std::string &prefix,
                                              const tuning::LowerOptions &opts);
/// The same group on the OpenCL device's NDRange GEMM (each work-item finishes its elements).
Expected<Kernels> lowerFinishedMatMulUnitNDRange(const LoweringUnit &u, const std::string &prefix,
                                                 const tuning::LowerOptions &opts);

} // namespace nnc::lower
