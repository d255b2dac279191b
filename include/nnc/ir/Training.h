// Losses and optimizer updates as graph ops: functions that append the math (elementwise ops
// and reductions, so fusion makes each update one kernel) to a graph. The ONNX importer's
// ai.onnx.preview.training ops and nnc::Trainer both build their updates here.
#pragma once

#include <array>
#include <vector>

#include "nnc/ir/Gradients.h"

namespace nnc {

/// Mean over every element of -log softmax(logits)[label], softmax over axis 1 (PyTorch's
/// CrossEntropyLoss): logits [N, C, d1..] float, labels [N, d1..] i64 class indices (each in
/// [0, C)). Returns the f32/f64 scalar loss.
Value *softmaxCrossEntropyLoss(GradEmitter &e, Value *logits, Value *labels);
/// mean((pred - target)^2) over every element; target has pred's shape.
Value *meanSquaredErrorLoss(GradEmitter &e, Value *pred, Value *target);

/// Plain SGD: x - r g. `r` is a scalar value (the learning rate, an input of the graph).
Value *sgdUpdate(GradEmitter &e, Value *r, Value *x, Value *g);

/// ONNX Momentum (ai.onnx.preview.training): with g' = normCoefficient x + g and
/// beta' = (t > 0 ? beta : 1): v' = alpha v + beta' g'; standard: x' = x - r v';
/// nesterov: x' = x - r (g' + alpha v'). PyTorch's SGD with momentum m and dampening d is
/// alpha = m, beta = 1 - d (from its second step on: PyTorch's first step takes v' = g).
struct MomentumOptions {
  double alpha = 0.9;
  double beta = 1.0;
  double normCoefficient = 0;
  bool nesterov = false;
};
/// Returns {x', v'}. `t` is the i64 scalar step count.
std::array<Value *, 2> momentumUpdate(GradEmitter &e, Value *r, Value *t, Value *x, Value *g,
                                      Value *v, const MomentumOptions &o);

/// ONNX Adagrad: r' = r / (1 + t decayFactor), g' = normCoefficient x + g, h' = h + g'^2,
/// x' = x - r' g' / (sqrt(h') + epsilon).
struct AdagradOptions {
  double decayFactor = 0;
  double epsilon = 1e-6;
  double normCoefficient = 0;
};
/// Returns {x', h'}.
std::array<Value *, 2> adagradUpdate(GradEmitter &e, Value *r, Value *t, Value *x, Value *g,
                                     Value *h, const AdagradOptions &o);

/// ONNX Adam: g' = normCoefficient x + g, v' = alpha v + (1 - alpha) g',
/// h' = beta h + (1 - beta) g'^2, r' = (t > 0 ? r sqrt(1 - beta^t) / (1 - alpha^t) : r),
/// x' = (1 - normCoefficientPost) (x - r' v' / (sqrt(h') + epsilon)). AdamW's decoupled weight
/// decay wd is normCoefficientPost = lr * wd (applied after the step instead of before, a
/// second-order difference). With epsilonAfterCorrection (PyTorch's Adam), epsilon is added
/// to the bias-corrected sqrt(h' / (1 - beta^t)): the denominator is sqrt(h') + epsilon
/// sqrt(1 - beta^t). The two differ where sqrt(h') is near epsilon (tiny gradients, early
/// steps), where Adam's update is most sensitive.
struct AdamOptions {
  double alpha = 0.9;
  double beta = 0.999;
  double epsilon = 1e-6;
  double normCoefficient = 0;
  double normCoefficientPost = 0;
  bool epsilonAfterCorrection = false;
};
/// Returns {x', v', h'}.
std::array<Value *, 3> adamUpdate(GradEmitter &e, Value *r, Value *t, Value *x, Value *g, Value *v,
                                  Value *h, const AdamOptions &o);

/// Batch norm in training mode (PyTorch's BatchNorm in train()): y normalizes x with the batch's
/// mean and population variance over every axis but 1, and the running statistics take in the
/// batch's: mean' = momentum mean + (1 - momentum) batchMean, var' = momentum var +
/// (1 - momentum) batchVar n / (n - 1), n the values per channel. The running variance takes
/// the unbiased batch variance as PyTorch's does; ONNX's BatchNormalization (training_mode=1)
/// blends the population variance instead, but PyTorch is the peer whose trained models
/// nnc::Trainer's must match. x has static extents and n > 1; mean and var are [C], the blend
/// in their dtype. Returns {y, mean', var'}.
std::array<Value *, 3> batchNormTraining(GradEmitter &e, Value *x, Value *scale, Value *bias,
                                         Value *mean, Value *var, double epsilon, double momentum);

/// Uniform numbers in [0, 1) of `like`'s shape and (float) dtype, from a counter-based
/// generator: element i (row-major) is the top b bits of SplitMix64's output i + 1 from the
/// state mix(counter + stream * golden), over 2^b, b the dtype's significand bits (53 for
/// f64, 24 for f32, 11 for f16, 8 for bf16). Each element is a function of (counter, stream,
/// i) alone, built of exact integer ops (u64 add, mul, xor, shift), so every backend draws
/// the same numbers; a new counter (nnc::Trainer's step count) draws new ones, and streams
/// keep generators in one graph apart. `counter` is an i64 scalar.
Value *counterUniform(GradEmitter &e, Value *counter, uint64_t stream, Value *like);
/// The same numbers for the shape `shape` (a 1-D i64 value) and float dtype `dtype` (f64,
/// f32, f16 or bf16; another is the emitter's error).
Value *counterUniform(GradEmitter &e, Value *counter, uint64_t stream, Value *shape,
                      DType dtype);

/// The graph input (i64 scalar) through which a model's training-mode random ops (an ONNX
/// model's Dropout imported for training) take nnc::Trainer's step count as their counter.
inline constexpr const char *kStepCounterInput = "nnc.step";

/// Dropout in training: y = x keep / (1 - ratio), keep = counterUniform(...) >= ratio (the
/// ONNX reference's rule, with this generator). x is float; ratio is a float scalar.
/// Returns {y, keep (bool)}.
std::array<Value *, 2> dropoutTraining(GradEmitter &e, Value *x, Value *ratio, Value *counter,
                                       uint64_t stream);

/// SplitMix64's output function (Steele, Lea and Flood, 2014): a bijective mix of 64 bits,
/// the one counterUniform applies in the graph.
uint64_t splitMix64(uint64_t z);

/// Scales every gradient by min(1, maxNorm / ||grads||) (the global L2 norm over all of them).
std::vector<Value *> clipByGlobalNorm(GradEmitter &e, const std::vector<Value *> &grads,
                                      double maxNorm);

} // namespace nnc
