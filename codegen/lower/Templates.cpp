// The kernel-template registry per code target, and the dispatch that picks from it
// (Templates.h; docs/fast-paths.md says how to add a template).
#include "Templates.h"

#include <algorithm>

#include "Epilogue.h"
#include "Gemm.h"
#include "Lowerers.h"
#include "NNLowering.h"

namespace nnc::lower {

namespace {

/// The largest column matrix (bytes) conv's GEMM templates write; past it the direct loops
/// run instead (they need no scratch).
constexpr int64_t kMaxColBytes = int64_t(1) << 28;
/// The most taps per output (channels per group x kernel size) of a conv that an OpenCL device
/// runs as the row-vectorized direct conv (an RGB 3x3 stem: 27).
constexpr int64_t kGpuRowConvTaps = 27;

bool always(const LoweringUnit &, const CpuTarget &) {
  return true;
}

/// A node template whose lowering takes the tuning options.
template <typename F> auto tunable(F f) {
  return [f](const LoweringUnit &u, const std::string &prefix, const tuning::LowerOptions &o) {
    return f(*u.node, prefix, &o);
  };
}
/// A node template without knobs.
template <typename F> auto plain(F f) {
  return [f](const LoweringUnit &u, const std::string &prefix, const tuning::LowerOptions &) {
    return f(*u.node, prefix);
  };
}

/// Conv's templates apply to well-formed, non-empty convs unless NNC_CONV_ALGO=direct.
template <typename P> auto whenConv(bool transpose, P p) {
  return [transpose, p](const LoweringUnit &u, const CpuTarget &) {
    std::optional<ConvFacts> f = convFacts(*u.node, transpose);
    return f && f->outElements > 0 && !f->forceDirect && p(*f);
  };
}

/// The direct loops take every well-formed, non-empty conv (the generic lowerer, which they
/// are, reports the others).
auto whenAnyConv(bool transpose) {
  return [transpose](const LoweringUnit &u, const CpuTarget &) {
    std::optional<ConvFacts> f = convFacts(*u.node, transpose);
    return f && f->outElements > 0;
  };
}

/// The CPU's templates, in the order they are tried: a specific template before a general one
/// of the same op.
std::vector<KernelTemplate> cpuTemplates() {
  const tuning::Space *gemm = &gemmCpuSpace(), *convNchwc = &convNchwcCpuSpace();
  return {
      {"matmul.gemv_packed_b",
       {OpKind::MatMul},
       false,
       "skinny GEMM (at most 4 rows) by compile-time panels: one GemmTile of all rows per "
       "panel, each panel streamed once (a software prefetch ahead is a knob), the panels "
       "split over the threads",
       &gemvCpuSpace(),
       [](const LoweringUnit &u, const CpuTarget &) { return skinnyPackedMatMul(*u.node); },
       tunable(lowerMatMulGemv),
       /*takesEpilogue=*/true},
      {"matmul.bf16_gemm_packed_b",
       {OpKind::MatMul},
       false,
       "bf16 GEMM (--precision bf16): bf16 GemmTile microkernels (vdpbf16ps, f32 sums) over a "
       "weight packed at compile time as bf16 k pairs, A rounded to bf16 as it is packed",
       gemm,
       [](const LoweringUnit &u, const CpuTarget &) {
         return u.node->hasAttr("packed_n") && u.node->operand(1) &&
                u.node->operand(1)->dtype() == DType::BF16;
       },
       tunable(lowerMatMulGemm),
       /*takesEpilogue=*/true},
      {"matmul.gemm_packed_b",
       {OpKind::MatMul},
       false,
       "GEMM reading B as column panels packed at compile time (pack-gemm-weights)",
       gemm,
       [](const LoweringUnit &u, const CpuTarget &) { return u.node->hasAttr("packed_n"); },
       tunable(lowerMatMulGemm),
       /*takesEpilogue=*/true},
      {"matmul.gemm",
       {OpKind::MatMul},
       false,
       "register-blocked GEMM: GemmTile microkernels over B packed at run time (mk=1), or "
       "scalar register tiles",
       gemm,
       always,
       tunable(lowerMatMulGemm),
       /*takesEpilogue=*/true},
      {"matmul_integer.tiles",
       {OpKind::MatMulInteger},
       false,
       "integer GEMM: u8s8s32 GemmTile microkernels (vpdpbusd with VNNI, else widened 16-bit "
       "multiply-adds) over A and B packed at run time, zero points by compensation",
       &igemmCpuSpace(),
       always,
       tunable(lowerMatMulIntegerTiles),
       /*takesEpilogue=*/true,
       /*convertsEpilogue=*/true},
      {"conv_integer.im2col_tiles",
       {OpKind::ConvInteger},
       false,
       "integer conv, group 1: im2col of u8 NHWC patches times the weight as u8s8s32 "
       "GemmTiles (the integer GEMM's microkernel), zero points by compensation",
       &igemmCpuSpace(),
       [](const LoweringUnit &u, const CpuTarget &) { return convIntegerTilesApply(*u.node); },
       tunable(lowerConvIntegerTiles),
       /*takesEpilogue=*/true,
       /*convertsEpilogue=*/true},
      {"conv_integer.depthwise_nhwc",
       {OpKind::ConvInteger},
       false,
       "depthwise integer conv on channels-last activations: i32 sums vectorized along the "
       "channels over x - x_zp padded as i16, the epilogue at the stores",
       nullptr,
       [](const LoweringUnit &u, const CpuTarget &) {
         return convIntegerDepthwiseNHWCApplies(*u.node);
       },
       tunable(lowerConvIntegerDepthwiseNHWC),
       /*takesEpilogue=*/true,
       /*convertsEpilogue=*/true},
      {"conv_integer.depthwise",
       {OpKind::ConvInteger},
       false,
       "depthwise integer conv: direct i32 loops vectorized along output rows over x - x_zp "
       "padded as i16",
       nullptr,
       [](const LoweringUnit &u, const CpuTarget &) { return convIntegerDepthwiseApplies(*u.node); },
       plain(lowerConvIntegerDepthwise)},
      {"conv.rows_direct",
       {OpKind::Conv},
       false,
       "direct conv vectorized along output rows, for few taps per output (first layers)",
       nullptr,
       whenConv(false, [](const ConvFacts &f) { return f.rowsFit; }),
       tunable(lowerConvRowsDirect),
       /*takesEpilogue=*/true},
      {"conv.im2col_gemm",
       {OpKind::Conv},
       false,
       "im2col copy + GEMM (a pointwise conv reads its input in place)",
       gemm,
       whenConv(false, [](const ConvFacts &f) { return f.colBytes <= kMaxColBytes; }),
       tunable(lowerConvIm2colGemm),
       /*takesEpilogue=*/true},
      {"conv.direct",
       {OpKind::Conv},
       false,
       "direct loops, any conv: per output row the bias, then every tap's multiply-add",
       nullptr,
       whenAnyConv(false),
       tunable(lowerConvDirect),
       /*takesEpilogue=*/true},
      {"conv_transpose.gemm_col2im",
       {OpKind::ConvTranspose},
       false,
       "GEMM into a column matrix, then col2im sums the taps",
       gemm,
       whenConv(true, [](const ConvFacts &f) { return f.colBytes <= kMaxColBytes; }),
       tunable(lowerConvTransposeGemmCol2im),
       /*takesEpilogue=*/true},
      {"conv_transpose.direct",
       {OpKind::ConvTranspose},
       false,
       "direct loops, any conv_transpose: per output plane the bias, then every input's taps "
       "added where they land",
       nullptr,
       whenAnyConv(true),
       tunable(lowerConvDirect),
       /*takesEpilogue=*/true},
      {"conv_nchwc.depthwise",
       {OpKind::ConvNCHWc},
       false,
       "depthwise conv over blocked channels, lane j of the input by lane j of the weight",
       convNchwc,
       [](const LoweringUnit &u, const CpuTarget &) { return isDepthwiseConvNCHWc(*u.node); },
       tunable(lowerConvNCHWc),
       /*takesEpilogue=*/true},
      {"conv_nchwc.bf16_direct",
       {OpKind::ConvNCHWc},
       false,
       "conv_nchwc.direct on bf16 input and weight (--precision bf16: bf16_pairs), vdpbf16ps "
       "into f32 sums",
       convNchwc,
       [](const LoweringUnit &u, const CpuTarget &) {
         return u.node->getInt("bf16_pairs", 0) != 0;
       },
       tunable(lowerConvNCHWc),
       /*takesEpilogue=*/true},
      {"conv_nchwc.direct",
       {OpKind::ConvNCHWc},
       false,
       "register-blocked direct conv over blocked channels (layout-nchwc)",
       convNchwc,
       always,
       tunable(lowerConvNCHWc),
       /*takesEpilogue=*/true},
      {"winograd.input_transform",
       {OpKind::WinogradInput},
       false,
       "Winograd F(m x m, 3 x 3) input tiles V = B^T d B (the winograd pass chose the algorithm)",
       nullptr,
       always,
       [](const LoweringUnit &u, const std::string &prefix, const tuning::LowerOptions &opts) {
         return lowerWinogradInput(*u.node, prefix, /*peelBorder=*/!opts.gpu, opts.cpu.l2Bytes);
       }},
      {"winograd.output_transform",
       {OpKind::WinogradOutput},
       false,
       "Winograd output tiles Y = A^T M A",
       nullptr,
       always,
       [](const LoweringUnit &u, const std::string &prefix, const tuning::LowerOptions &opts) {
         return lowerWinogradOutput(*u.node, prefix, opts);
       },
       /*takesEpilogue=*/true},
      {"attention.rows",
       {OpKind::Attention},
       false,
       "ONNX Attention: per query row scores, softmax and product with V",
       nullptr,
       always,
       plain(lowerAttentionRows)},
      {"attention.fused_group",
       {},
       true,
       "fused softmax(Q K^T) V group (fuse-attention): two GEMMs per block of query rows",
       nullptr,
       [](const LoweringUnit &u, const CpuTarget &) { return u.softmax != nullptr; },
       lowerAttentionGroupUnit},
      {"epilogue.gemv_finish",
       {},
       true,
       "matmul anchor of the skinny GEMM whose elementwise epilogue runs per panel",
       &gemvCpuSpace(),
       [](const LoweringUnit &u, const CpuTarget &) {
         return finishesInGemm(u) && skinnyPackedMatMul(*u.anchor);
       },
       lowerFinishedMatMulUnitGemv},
      {"epilogue.gemm_finish",
       {},
       true,
       "matmul anchor whose elementwise epilogue runs inside the GEMM, per cache block",
       gemm,
       [](const LoweringUnit &u, const CpuTarget &) { return finishesInGemm(u); },
       lowerFinishedMatMulUnit},
  };
}

/// A matmul whose operands accumulate in f32 (f32, f16, bf16): what the NDRange GEMM takes.
bool f32Accumulating(const Node &matmul) {
  DType t = matmul.operand(0) ? matmul.operand(0)->dtype() : DType::Bool;
  return matmul.numOperands() == 2 && matmul.operand(1) &&
         matmul.operand(1)->dtype() == t && isFloat(t) && !isStorageOnly(t) &&
         nnl::accType(t, /*wide=*/false) == DType::F32;
}

/// An OpenCL device's templates: its own first (GPU-shaped kernels), then the CPU's, whose
/// kernels the OpenCL printer translates too (the generic conv path, im2col + a loop GEMM, is
/// far slower there than the blocked-layout direct conv; GPU-shaped conv templates are next).
std::vector<KernelTemplate> openclTemplates() {
  std::vector<KernelTemplate> t = {
      {"matmul.ndrange_tiles",
       {OpKind::MatMul},
       false,
       "NDRange GEMM (GpuGemm.cpp): work-groups over C tiles, A and B tiles staged in local "
       "memory, register tiles per work-item, vector loads; B packed or not",
       &gemmOpenCLSpace(),
       [](const LoweringUnit &u, const CpuTarget &) { return f32Accumulating(*u.node); },
       tunable(lowerMatMulNDRange),
       /*takesEpilogue=*/true},
      {"epilogue.ndrange_gemm_finish",
       {},
       true,
       "matmul anchor whose elementwise epilogue each work-item of the NDRange GEMM applies",
       &gemmOpenCLSpace(),
       [](const LoweringUnit &u, const CpuTarget &) {
         return finishesInGemm(u) && f32Accumulating(*u.anchor);
       },
       lowerFinishedMatMulUnitNDRange},
      {"reduce.workgroup_tree",
       {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
        OpKind::ReduceProd},
       false,
       "reduce_* over contiguous innermost rows: a work-group per output, strided partial "
       "results, then a tree in local memory with a barrier per level (Reductions.cpp)",
       &reduceOpenCLSpace(),
       // Any device's work-groups hold the two items a tree needs; lowering sizes the tree
       // from the device the kernels are for.
       [](const LoweringUnit &u, const CpuTarget &) {
         return isWorkGroupReduction(*u.node, GpuTarget::generic());
       },
       [](const LoweringUnit &u, const std::string &prefix, const tuning::LowerOptions &o) {
         return lowerReduceWorkGroup(*u.node, prefix, o);
       }},
      {"norm.workgroup_rows",
       {OpKind::LayerNorm, OpKind::RMSNorm, OpKind::GroupNorm, OpKind::InstanceNorm},
       false,
       "layer_norm, rms_norm, group_norm, instance_norm over rows of 64 elements or more: a "
       "work-group per row, its sums as trees in local memory, every work-item normalizing "
       "every G-th element (the CPU's form is one work-item per row, serial passes)",
       nullptr,
       [](const LoweringUnit &u, const CpuTarget &) { return isWorkGroupNorm(*u.node); },
       [](const LoweringUnit &u, const std::string &prefix, const tuning::LowerOptions &o) {
         return lowerNormWorkGroup(*u.node, prefix, o);
       }},
      {"reduce.per_output",
       {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
        OpKind::ReduceProd},
       false,
       "reduce_* that keeps the innermost dim (a mean over tokens): one accumulator per output "
       "walking the reduced dims, each output a work-item, neighbours reading neighbours (the "
       "CPU's walk in input order adds into a shared scratch row: one work-item on a device)",
       nullptr,
       [](const LoweringUnit &u, const CpuTarget &) { return reduceKeepsInnermost(*u.node); },
       plain(lowerReducePerOutput)},
      {"arg.per_output",
       {OpKind::ArgMax, OpKind::ArgMin},
       false,
       "arg_max/arg_min over an axis with positions after it (a segmentation head's channel "
       "axis): one scan of the axis per output, each output a work-item (the CPU's form scans "
       "the axis outermost for its vector lanes: one work-item on a device)",
       nullptr,
       [](const LoweringUnit &u, const CpuTarget &) { return argScansOuterAxis(*u.node); },
       plain(lowerArgPerOutput)},
      {"matmul_integer.loops",
       {OpKind::MatMulInteger},
       false,
       "integer matmul as one work-item per output element (the CPU's tiles would run each "
       "tile's loop nest on one work-item)",
       nullptr,
       always,
       plain(lowerMatMulIntegerLoops)},
      {"conv_integer.loops",
       {OpKind::ConvInteger},
       false,
       "integer conv as one work-item per output element (the CPU's templates would run "
       "their loop nests on one work-item)",
       nullptr,
       always,
       plain(lowerConvIntegerLoops)},
  };
  for (KernelTemplate &c : cpuTemplates()) {
    // The row-vectorized direct conv runs each (image, channel block, row) as one work-item
    // walking its row and every tap: on a device only for a stem's few taps (RGB 3x3), where
    // a GEMM of that K would be mostly padding. ResNet-50's 1x1 convs over 64 channels (64
    // taps) ran far below the GEMM's rate that way; im2col + the NDRange GEMM reads a
    // pointwise conv's input in place.
    if (c.name == "conv.rows_direct") {
      c.summary += "; on a device up to 27 taps per output";
      c.applies = [cpuApplies = c.applies](const LoweringUnit &u, const CpuTarget &cpu) {
        std::optional<ConvFacts> f = convFacts(*u.node, false);
        return f && f->taps <= kGpuRowConvTaps && cpuApplies(u, cpu);
      };
    }
    t.push_back(std::move(c));
  }
  return t;
}

} // namespace

const std::vector<KernelTemplate> &templateRegistry(tuning::CodeTarget target) {
  static const std::vector<KernelTemplate> cpu = cpuTemplates(), opencl = openclTemplates();
  switch (target) {
  case tuning::CodeTarget::Cpu:
    return cpu;
  case tuning::CodeTarget::OpenCL:
    return opencl;
  }
  return cpu;
}

const KernelTemplate *chooseTemplate(const LoweringUnit &u, const tuning::LowerOptions &opts) {
  bool group = !u.members.empty();
  for (const KernelTemplate &t : templateRegistry(tuning::codeTargetOf(opts))) {
    if (t.group != group)
      continue;
    if (!group && std::find(t.ops.begin(), t.ops.end(), u.node->kind()) == t.ops.end())
      continue;
    if (t.applies(u, opts.cpu))
      return &t;
  }
  return nullptr;
}

Expected<Kernels>
lowerWithTemplate(const KernelTemplate *t, const LoweringUnit &u, const std::string &prefix,
                  const tuning::LowerOptions &opts,
                  const std::function<Expected<Kernels>(const tuning::LowerOptions &)> &generic) {
  // Only a template that declares it sees a group's epilogue (one that changes the dtype
  // only when it declares that too).
  tuning::LowerOptions o = opts;
  if (!t || !t->takesEpilogue ||
      (o.epilogue && o.epilogue->changesType() && !t->convertsEpilogue))
    o.epilogue = nullptr;
  // A group lowered generically around an anchor is named by the anchor's own choice.
  if (!opts.onTemplate || (!t && u.anchor && !u.members.empty()))
    return t ? t->lower(u, prefix, o) : generic(o);
  tuning::TemplateChoice choice;
  choice.name = t ? t->name : "";
  choice.prefix = prefix;
  choice.op = std::string((u.anchor ? u.anchor : u.node)->opName());
  o.onConfig = [&](const tuning::Problem &p, const tuning::Config &c) {
    choice.configs.push_back({p, c});
    if (opts.onConfig)
      opts.onConfig(p, c);
  };
  Expected<Kernels> ks = t ? t->lower(u, prefix, o) : generic(o);
  opts.onTemplate(choice);
  return ks;
}

} // namespace nnc::lower

namespace nnc {

std::vector<TemplateInfo> kernelTemplates(tuning::CodeTarget target) {
  std::vector<TemplateInfo> out;
  for (const lower::KernelTemplate &t : lower::templateRegistry(target)) {
    TemplateInfo i;
    i.name = t.name;
    for (OpKind k : t.ops)
      i.ops.push_back(std::string(opInfo(k).name));
    i.group = t.group;
    i.summary = t.summary;
    i.space = t.space ? t.space->kind : "";
    out.push_back(std::move(i));
  }
  return out;
}

} // namespace nnc
