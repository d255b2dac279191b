// Constructors of every pass. Each pass lives in its own file in passes/.
#pragma once

#include <memory>

#include "nnc/passes/PassManager.h"

namespace nnc {

/// Re-runs every node's shape rule in order, refining result types (e.g. once folding has
/// made a reshape's target shape constant).
std::unique_ptr<Pass> createShapeInferencePass();
/// Evaluates nodes whose operands are all constants with the reference interpreter, and
/// `shape` of values whose shape is static.
std::unique_ptr<Pass> createConstantFoldPass();
/// Removes nodes whose results are unused.
std::unique_ptr<Pass> createDeadCodeEliminationPass();
std::unique_ptr<Pass> createHoistLoopInvariantsPass();
/// Replaces each `if` node by its taken branch (a constant condition) or by both branches and
/// a select (results of one static type); leaves the rest for staged execution.
std::unique_ptr<Pass> createInlineIfPass();
/// Unrolls loops of a static, small step count whose body's shapes depend on the step.
std::unique_ptr<Pass> createUnrollDynamicLoopsPass();
/// Merges nodes with the same op, operands and attributes (constants by value).
std::unique_ptr<Pass> createCommonSubexpressionEliminationPass();
/// Algebraic simplifications to a fixed point: x*1, x+0, x-0, x/1, cast to the same type,
/// transpose of transpose, reshape chains, no-op reshape/expand/transpose.
std::unique_ptr<Pass> createCanonicalizePass();
/// Replaces the decomposed LayerNorm exporters emit (reduce_mean, sub, pow, reduce_mean, add,
/// sqrt, div, mul?, add?) with one layer_norm node.
std::unique_ptr<Pass> createRecognizeLayerNormPass();
/// Replaces the decomposed RMSNorm exporters emit (pow, reduce_mean, add, sqrt, div or
/// reciprocal and mul, mul?) with one rms_norm node.
std::unique_ptr<Pass> createRecognizeRMSNormPass();
/// Replaces decomposed softmax / log-softmax chains (reduce_max, sub, exp, reduce_sum, div
/// or log and sub) with one softmax / log_softmax node.
std::unique_ptr<Pass> createRecognizeSoftmaxPass();
/// Folds an inference batch_norm with constant parameters into the conv before it (whose
/// weights are constant): new weights and bias, one node.
std::unique_ptr<Pass> createFoldBatchNormPass();
/// Runs a 3-D conv whose depth axis has kernel 1, stride 1 and no padding as the 2-D conv of
/// its depth slices (transposes and reshapes around a 2-D conv).
std::unique_ptr<Pass> createFoldConvBatchAxesPass();
/// Runs matmuls and convs between dequantize and quantize ops on the integer kernels
/// (matmul_integer, conv_integer and a requantizing multiply), after moving dequantize ops
/// below data movement and cancelling quantize(dequantize(x)); a matmul or conv left in f32
/// says why in its `qdq_fallback` attribute.
std::unique_ptr<Pass> createLowerQDQPass();
/// Groups chains and trees of elementwise ops into fusion groups run as one kernel; a value
/// with consumers outside a group is recomputed when cheap, else materialized.
std::unique_ptr<Pass> createFuseElementwisePass();
/// Puts a matmul or conv into the fusion group of its single elementwise consumer, so the
/// group runs in the matmul's or conv's output loop.
std::unique_ptr<Pass> createFuseEpiloguePass();
/// Groups matmul, its epilogue, softmax over the last axis and the matmul of the softmax,
/// run row by row without storing the score matrix whole.
std::unique_ptr<Pass> createFuseAttentionPass();
/// Puts data-movement ops (transpose, reshapes, slice, constant-index gather, concat, layout
/// conversions) into the group of their consumer, composing their index maps into its loads.
std::unique_ptr<Pass> createFuseViewsPass();
std::unique_ptr<Pass> createPackGemmWeightsPass();
/// Runs 2-D f32 convs in the blocked channel layout [N, C/b, H, W, b] (conv_nchwc with
/// weights packed at compile time), moves layout-agnostic ops between them into that layout
/// and cancels the transforms that meet. Option `block` (default: the host's f32 lanes).
std::unique_ptr<Pass> createLayoutNCHWcPass();
/// Runs the integer convs of group 1 and the depthwise ones (conv_integer) on channels-last
/// activations (channels_last = 1; option `depthwise`, default 1), moves the elementwise ops, quantize/dequantize and spatial reductions
/// between them into that layout and cancels the transposes that meet (passes/LayoutNHWC.cpp).
std::unique_ptr<Pass> createLayoutNHWCPass();
std::unique_ptr<Pass> createWinogradPass();
/// Moves a per-input-channel scale of a single image (a squeeze-excitation gate) from a
/// blocked conv's input into its constant weight when the weight is the smaller tensor.
std::unique_ptr<Pass> createFoldChannelScalePass();
/// Appends d loss / d input for every float graph input as outputs (passes/Autodiff.cpp).
std::unique_ptr<Pass> createAutodiffPass();

} // namespace nnc
