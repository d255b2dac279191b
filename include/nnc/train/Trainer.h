// nnc::Trainer: one compiled train step (forward + backward + optimizer update) over a model
// whose float initializers are the parameters.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nnc/driver/Driver.h"
#include "nnc/ir/Training.h"
#include "nnc/runtime/OpenCL.h"

namespace nnc {

enum class LossKind { SoftmaxCrossEntropy, MeanSquaredError };
enum class OptimizerKind { Sgd, Momentum, Nesterov, Adam, AdamW, Adagrad };

/// "softmax_cross_entropy" or "mse"; the error lists them.
Expected<LossKind> parseLoss(const std::string &name);
/// "sgd", "momentum", "nesterov", "adam", "adamw" or "adagrad"; the error lists them.
Expected<OptimizerKind> parseOptimizer(const std::string &name);

struct TrainOptions {
  /// No default target: the caller hands down the one it made (driver::makeTarget; an OpenCL
  /// target with its device chosen).
  explicit TrainOptions(driver::Target t) : target(std::move(t)) {}
  LossKind loss = LossKind::SoftmaxCrossEntropy;
  OptimizerKind optimizer = OptimizerKind::Adam;
  double lr = 1e-3;
  int64_t batch = 32;
  /// Adam / AdamW. PyTorch's defaults (epsilon 1e-8, added after the bias correction), not
  /// ONNX's (1e-6, before).
  AdamOptions adam = {0.9, 0.999, 1e-8, 0, 0, /*epsilonAfterCorrection=*/true};
  double weightDecay = 0.01; ///< AdamW only.
  double momentum = 0.9;     ///< Momentum and Nesterov.
  AdagradOptions adagrad = {0, 1e-10, 0};
  double clipNorm = 0; ///< > 0: gradients clipped to this global L2 norm.
  /// Seeds the model's random ops (dropout masks, counterUniform): their counter is the step
  /// count mixed with it, so a seed gives one sequence of masks, a new one every step.
  uint64_t seed = 0;
  driver::Target target;
  driver::ExecOptions exec;
};

/// Trains the parameters of a model. Its first graph input takes a batch (an input named
/// kStepCounterInput, if any, takes the step count: see ImportOptions::forTraining), its first
/// output is the prediction (logits for softmax cross-entropy); the parameters are the model's
/// float constants named in `params` (an ONNX model's initializers), but for the means and
/// variances of batch norms: those are running statistics, which the step updates while the
/// batch norm normalizes with the batch's statistics (PyTorch's train() mode).
///
/// The whole step is one graph: inputs (batch, labels, lr, step count, parameters,
/// optimizer state, running statistics), outputs (loss, new parameters, new state), compiled
/// once for the
/// target. Parameters and state stay resident by ping-pong: each step's outputs are the next
/// step's inputs, and the CPU launch list binds graph inputs and outputs to their tensors'
/// memory by pointer (runtime/core/CpuLaunchList.cpp), so nothing is copied between steps;
/// a step moves only the batch in and the loss out. (Aliasing an output onto its input
/// inside one arena would save the second buffer but needs the planner to prove no kernel
/// reads a parameter after its update is written; ping-pong needs nothing of it.) On OpenCL
/// the parameters, optimizer state, lr and step count are resident inputs of the device
/// executable (OpenCLExecutable::keepResident): uploaded once, each new value swapped in on
/// the device, so there too a step moves only the batch and labels in and the loss out.
class Trainer {
public:
  static Expected<std::unique_ptr<Trainer>>
  create(const Graph &model, const std::vector<std::string> &params, const TrainOptions &options);
  /// One step on a batch ([batch, ...] like the model's first input) and its labels (i64
  /// [batch, d1..] class indices for softmax cross-entropy over logits [batch, C, d1..]; the
  /// prediction's shape for MSE).
  /// Returns the batch's loss before the update.
  Expected<double> step(const Tensor &inputs, const Tensor &labels);
  /// The trained initializers now, by name: the parameters and the batch norms' running
  /// statistics (on OpenCL, downloaded from the device).
  Expected<std::map<std::string, Tensor>> parameters() const;
  int64_t steps() const { return steps_; }
  /// The compiled step (an OpenCLExecutable on OpenCL, e.g. for its transfer counters).
  Executable *executable() const { return exe_; }
  /// The train-step graph as compiled (after the target's passes).
  const Graph &stepGraph() const { return *graph_; }
  /// The train-step graph before the target's passes: inputs (batch, parameters, labels, lr,
  /// step, optimizer state, running statistics), outputs (loss, new parameters, new state,
  /// next step count). `nnc train
  /// --save-step` writes it as text IR for nnc inspect / bench / run.
  const Graph &unoptimizedStepGraph() const { return *unoptimized_; }
  /// The labels' type a step expects.
  const TensorType &labelType() const { return labelType_; }
  const TensorType &inputType() const { return inputType_; }

private:
  explicit Trainer(const TrainOptions &o) : options_(o) {}
  TrainOptions options_;
  std::unique_ptr<Graph> graph_, unoptimized_;
  std::unique_ptr<driver::Runner> runner_;
  Executable *exe_ = nullptr;          ///< The compiled step (owned by runner_).
  OpenCLExecutable *device_ = nullptr; ///< exe_ on OpenCL, with its state resident.
  std::vector<std::string> paramNames_;
  /// The batch norms' running statistics (in training, a batch norm whose mean and var are
  /// constants normalizes with the batch's statistics and updates these, as PyTorch's does
  /// in train() mode: see batchNormTraining).
  std::vector<std::string> runningNames_;
  /// Parameters, optimizer state, then running statistics, in graph-input order (empty on
  /// OpenCL, where the device holds them).
  std::vector<Tensor> state_;
  size_t stateCount_ = 0; ///< state_'s size before the device took it.
  TensorType inputType_, labelType_;
  DType dtype_ = DType::F32;
  int64_t steps_ = 0;
};

} // namespace nnc
