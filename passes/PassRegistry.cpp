// The list of every pass with its CLI name and summary, and the default pipeline.
#include "nnc/passes/Passes.h"

namespace nnc {

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> passes = {
      {"shape-inference", "Re-run shape rules and refine result types", createShapeInferencePass},
      {"constant-fold", "Evaluate nodes whose operands are constants", createConstantFoldPass},
      {"dce", "Remove nodes whose results are unused", createDeadCodeEliminationPass},
      {"cse", "Merge identical nodes", createCommonSubexpressionEliminationPass},
      {"hoist-loop-invariants",
       "Run the loop-body nodes that read only invariants once, before the loop",
       createHoistLoopInvariantsPass},
      {"inline-if",
       "Replace If by its taken branch, or by both branches and selects when the condition is "
       "only known at run time",
       createInlineIfPass},
      {"unroll-dynamic-loops",
       "Unroll loops of a known, small step count whose body's shapes depend on the step",
       createUnrollDynamicLoopsPass},
      {"canonicalize", "Algebraic simplifications (x*1, x+0, transpose/reshape chains)",
       createCanonicalizePass},
      {"recognize-layer-norm", "Replace decomposed LayerNorm chains with layer_norm",
       createRecognizeLayerNormPass},
      {"recognize-rms-norm", "Replace decomposed RMSNorm chains with rms_norm",
       createRecognizeRMSNormPass},
      {"recognize-softmax", "Replace decomposed softmax and log-softmax chains with one op",
       createRecognizeSoftmaxPass},
      {"fold-batch-norm",
       "Fold batch_norm with constant parameters into the conv before it, else into a "
       "per-channel multiply-add",
       createFoldBatchNormPass},
      {"fold-conv-batch-axes",
       "Run a 3-D conv whose depth axis has kernel 1, stride 1 and no padding as the 2-D conv "
       "of its depth slices; one with a 3x3 stride-1 spatial window gathers its depth taps "
       "into channels first",
       createFoldConvBatchAxesPass},
      {"fold-channel-scale",
       "Move a per-channel scale of a blocked conv's input (a squeeze-excitation gate) into "
       "its weight when the weight is smaller than the input",
       createFoldChannelScalePass},
      {"lower-qdq",
       "Run matmuls and convs between dequantize and quantize ops on the integer kernels; sink "
       "dequantize below data movement, cancel quantize(dequantize(x))",
       createLowerQDQPass},
      {"fuse-elementwise", "Group elementwise chains and trees into one kernel each",
       createFuseElementwisePass},
      {"fuse-epilogue", "Run elementwise consumers in the output loop of a matmul or conv",
       createFuseEpiloguePass},
      {"fuse-attention", "Run matmul, scale/mask, softmax and matmul row by row as one kernel",
       createFuseAttentionPass},
      {"fuse-views",
       "Run transposes, reshapes, slices, concats and layout conversions inside the kernel of "
       "their consumer",
       createFuseViewsPass},
      {"pack-gemm-weights", "Pack constant matmul weights into the GEMM microkernels' panels",
       createPackGemmWeightsPass},
      {"layout-nchwc", "Run 2-D convs in the blocked channel layout with pre-packed weights",
       createLayoutNCHWcPass},
      {"layout-nhwc", "Run integer convs on channels-last (NHWC) activations between quantized ops",
       createLayoutNHWCPass},
      {"winograd", "Run 3x3 stride-1 blocked convs as Winograd F(m x m, 3x3) with a batched GEMM",
       createWinogradPass},
      {"autodiff", "Append the gradients of the loss output w.r.t. the float inputs as outputs",
       createAutodiffPass},
  };
  return passes;
}

const PassInfo *findPass(std::string_view name) {
  for (const PassInfo &p : passRegistry())
    if (p.name == name)
      return &p;
  return nullptr;
}

const std::vector<TargetPipeline> &targetPipelines() {
  // The first constant-folds keep a quantized weight's dequantize for lower-qdq; the one
  // after it folds those it left in f32. On the CPU its convs run on conv_integer's templates
  // (im2col onto the u8 x s8 GEMM tiles, a depthwise loop nest); on OpenCL devices they stay
  // f32 (convs=0): conv_integer has only its generic loop nest there, far slower than the f32
  // path's convs (bench/qdq_ab.py and bench/qdq_models.py measure both).
  auto front = [](const char *lowerQdq) {
    return std::string("shape-inference,constant-fold{keep-weight-dequantize=1},inline-if,"
                       "canonicalize,cse,shape-inference,"
                       "constant-fold{keep-weight-dequantize=1},") +
           lowerQdq +
           ",constant-fold,"
           "dce,hoist-loop-invariants,recognize-layer-norm,recognize-rms-norm,"
           "recognize-softmax,fold-batch-norm,dce,";
  };
  static const std::string cpuFront = front("lower-qdq"),
                           openclFront = front("lower-qdq{convs=0}");
  // fold-conv-batch-axes turns 3-D convs into 2-D ones for layout-nchwc and winograd.
  static const std::string blocked =
      "fold-conv-batch-axes,layout-nchwc,constant-fold,cse,dce,winograd,";
  // The CPU's integer convs keep their activations channels last from one to the next (the
  // OpenCL pipelines keep convs f32, and conv_integer has only its generic nest there).
  static const std::string blockedCpu =
      "fold-conv-batch-axes,layout-nchwc,layout-nhwc,constant-fold,cse,dce,winograd,";
  static const std::string back = "fold-channel-scale,fuse-elementwise,fuse-epilogue,";
  static const std::string attention = "fuse-attention,", views = "fuse-views,";
  // An OpenCL CPU device (PoCL) runs the CPU's layout-nchwc conv and winograd kernels too:
  // its plain conv path (im2col + a loop GEMM) made ResNet-18 several times slower when an
  // earlier try dropped layout-nchwc, winograd and pack-gemm-weights. A GPU does not: the
  // blocked direct conv gives it one work-item per output row, far too few work-items for a
  // GPU, so its convs stay plain and lower to im2col + the NDRange GEMM. Neither takes
  // pack-gemm-weights: its panels are the CPU microkernel's layout, and the NDRange GEMM
  // would pay a divide and a remainder per B load to index them, more than reading the plain
  // weight costs. Nor does a GPU fuse attention: the fused group's grid is only its batch
  // entries and heads, where unfused, Q.K^T and P.V are batched NDRange GEMMs and softmax a
  // kernel with a work-item per row.
  static const std::vector<TargetPipeline> pipelines = {
      {"cpu", cpuFront + blockedCpu + back + attention + views + "pack-gemm-weights,dce"},
      {"opencl", openclFront + back + views + "dce"},
      {"opencl-cpu", openclFront + blocked + back + attention + views + "dce"},
  };
  return pipelines;
}

Expected<PassPipeline> PassPipeline::forTarget(std::string_view target) {
  std::string known;
  for (const TargetPipeline &t : targetPipelines()) {
    if (t.target == target)
      return parse(t.pipeline);
    known += (known.empty() ? "" : ", ") + t.target;
  }
  return makeError("no pipeline for target '{}' (targets: {})", target, known);
}

PassPipeline PassPipeline::defaultPipeline() {
  Expected<PassPipeline> p = forTarget("cpu");
  NNC_ASSERT(p, "{}", p.error().message());
  return *p;
}

} // namespace nnc
