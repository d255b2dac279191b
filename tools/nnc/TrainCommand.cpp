// `nnc train MODEL`: train a model's initializers on .npy data and write the trained model.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>

#include <time.h>

#include "Command.h"
#include "CommandUtil.h"
#include "nnc/frontend/OnnxExport.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Printer.h"
#include "nnc/train/Trainer.h"

namespace nnc::tools {

namespace {

struct TrainCliOptions {
  std::string model, inputs, labels, loss = "softmax_cross_entropy", optimizer = "adam", output;
  double lr = 1e-3;
  int64_t batch = 32;
  int64_t epochs = 1;
  uint64_t seed = 0;
  bool noShuffle = false;
  std::string target = "cpu";
  std::string cpu;
  int threads = 0;
  bool json = false;
  double clipNorm = 0;
  std::string saveStep;
};

/// Rows `idx[first .. first+count)` of `t` (its first dim) as one tensor.
Tensor gatherRows(const Tensor &t, const std::vector<int64_t> &idx, size_t first, int64_t count) {
  Extents e = t.extents();
  e[0] = count;
  Tensor out = Tensor::zeros(t.dtype(), e);
  size_t row = t.byteSize() / static_cast<size_t>(t.dim(0));
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(static_cast<char *>(out.rawData()) + static_cast<size_t>(i) * row,
                static_cast<const char *>(t.rawData()) +
                    static_cast<size_t>(idx[first + static_cast<size_t>(i)]) * row,
                row);
  return out;
}

int trainCommand(const TrainCliOptions &o) {
  Expected<LossKind> loss = parseLoss(o.loss);
  if (!loss)
    return fail(loss.takeError());
  Expected<OptimizerKind> opt = parseOptimizer(o.optimizer);
  if (!opt)
    return fail(opt.takeError());
  Expected<driver::Target> target = parseTargetOption(o.target, o.cpu);
  if (!target)
    return fail(target.takeError());
  if (!isOnnx(o.model))
    return fail(fmt::format("{}: nnc train takes an ONNX model", o.model));
  Expected<Tensor> x = driver::readTensorFile(o.inputs);
  if (!x)
    return fail(x.takeError());
  Expected<Tensor> y = driver::readTensorFile(o.labels);
  if (!y)
    return fail(y.takeError());
  if (x->rank() < 1 || y->rank() < 1 || x->dim(0) != y->dim(0))
    return fail(fmt::format("{} has {} samples but {} has {} labels", o.inputs,
                            x->rank() ? x->dim(0) : 0, o.labels, y->rank() ? y->dim(0) : 0));
  int64_t samples = x->dim(0);
  if (o.batch <= 0 || o.batch > samples)
    return fail(fmt::format("--batch {} must be between 1 and the {} samples of {}", o.batch,
                            samples, o.inputs));

  Expected<std::vector<std::string>> inits = onnxInitializerNames(o.model);
  if (!inits)
    return fail(inits.takeError());
  if (inits->empty())
    return fail(fmt::format("{}: the model has no initializers to train", o.model));
  // Imported without constant folding: a folded transpose(W) would no longer be W.
  ImportOptions io;
  io.forTraining = true;
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(o.model, io);
  if (!g)
    return fail(g.takeError());

  TrainOptions to(*target);
  to.loss = *loss;
  to.optimizer = *opt;
  to.lr = o.lr;
  to.batch = o.batch;
  to.clipNorm = o.clipNorm;
  to.seed = o.seed;
  to.exec.threads = o.threads;
  auto t0 = std::chrono::steady_clock::now();
  Expected<std::unique_ptr<Trainer>> tr = Trainer::create(**g, *inits, to);
  if (!tr)
    return fail(tr.takeError().withContext(o.model));
  Trainer &trainer = **tr;
  if (!o.saveStep.empty()) {
    std::ofstream f(o.saveStep);
    printGraph(trainer.unoptimizedStepGraph(), f);
    if (!f.good())
      return fail(fmt::format("{}: cannot write the train step", o.saveStep));
  }
  const TensorType &lt = trainer.labelType();
  if (y->dtype() != lt.dtype || y->rank() != lt.rank())
    return fail(fmt::format("{}: labels are {}{}; the {} loss takes {} per batch", o.labels,
                            dtypeName(y->dtype()), extentsStr(y->extents()), o.loss, lt.str()));
  if (x->dtype() != trainer.inputType().dtype)
    return fail(fmt::format("{}: inputs are {}, the model takes {}", o.inputs,
                            dtypeName(x->dtype()), trainer.inputType().str()));

  std::vector<int64_t> order(static_cast<size_t>(samples));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(o.seed);
  int64_t perEpoch = samples / o.batch; // the last partial batch is dropped: one compiled shape
  int64_t total = perEpoch * o.epochs;
  std::vector<double> losses, stepMs, stepCpuMs;
  // CPU time of the process (every thread) beside the wall time: on a shared machine the
  // wall time of a step includes the time other jobs held the cores.
  auto cpuMs = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
  };
  auto start = std::chrono::steady_clock::now();
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    if (!o.noShuffle)
      std::shuffle(order.begin(), order.end(), rng);
    double sum = 0;
    for (int64_t b = 0; b < perEpoch; ++b) {
      size_t first = static_cast<size_t>(b * o.batch);
      Tensor xb = gatherRows(*x, order, first, o.batch);
      Tensor yb = gatherRows(*y, order, first, o.batch);
      auto ts = std::chrono::steady_clock::now();
      double cpu0 = cpuMs();
      Expected<double> l = trainer.step(xb, yb);
      if (!l)
        return fail(l.takeError());
      stepMs.push_back(msSince(ts));
      stepCpuMs.push_back(cpuMs() - cpu0);
      losses.push_back(*l);
      sum += *l;
    }
    double elapsed = msSince(start) / 1000;
    double done = static_cast<double>((epoch + 1) * perEpoch);
    double eta = elapsed / done * static_cast<double>(total - (epoch + 1) * perEpoch);
    std::cerr << fmt::format("epoch {}/{}  loss {:.6f}  {:.0f} samples/s  ETA {:.1f} s\n",
                             epoch + 1, o.epochs, sum / static_cast<double>(perEpoch),
                             done * static_cast<double>(o.batch) / elapsed, eta);
  }
  Expected<std::map<std::string, Tensor>> trained = trainer.parameters();
  if (!trained)
    return fail(trained.takeError());
  if (Error e = writeOnnxWithInitializers(o.model, o.output, *trained))
    return fail(e);
  if (o.json) {
    std::cout << fmt::format("{{\"median_step_ms\": {:.6f}, \"median_step_cpu_ms\": {:.6f}, "
                             "\"final_loss\": {:.9g}, \"steps\": {}, "
                             "\"compile_and_train_s\": {:.3f}, \"losses\": [",
                             medianOf(stepMs), medianOf(stepCpuMs),
                             losses.empty() ? 0.0 : losses.back(), losses.size(),
                             msSince(t0) / 1000);
    for (size_t i = 0; i < losses.size(); ++i)
      std::cout << (i ? ", " : "") << fmt::format("{:.9g}", losses[i]);
    std::cout << "]}\n";
  } else {
    std::cout << fmt::format("trained {} steps ({} epochs of {}), final loss {:.6f}, median "
                             "step {:.3f} ms; wrote {}\n",
                             losses.size(), o.epochs, perEpoch,
                             losses.empty() ? 0.0 : losses.back(), medianOf(stepMs), o.output);
  }
  return 0;
}

class TrainCommand : public Command {
public:
  explicit TrainCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("train", "Train a model's initializers and write the trained model");
    cmd_->add_option("model", o_.model, "ONNX model: input 0 takes a batch, output 0 predicts")
        ->required();
    cmd_->add_option("--inputs", o_.inputs, "Samples (.npy), [samples, ...]")->required();
    cmd_->add_option("--labels", o_.labels,
                     "Labels (.npy): i64 class indices for softmax_cross_entropy ([samples] for "
                     "logits [N, C], [samples, d1..] for logits [N, C, d1..]), targets "
                     "shaped like the output for mse")
        ->required();
    cmd_->add_option("--loss", o_.loss, "softmax_cross_entropy (default) or mse");
    cmd_->add_option("--optimizer", o_.optimizer,
                     "sgd, momentum, nesterov, adam (default), adamw or adagrad");
    cmd_->add_option("--lr", o_.lr, "Learning rate (default 0.001)");
    cmd_->add_option("--batch", o_.batch, "Batch size (default 32)");
    cmd_->add_option("--epochs", o_.epochs, "Epochs (default 1)")->check(CLI::PositiveNumber);
    cmd_->add_option("--seed", o_.seed, "Seed of the shuffle and of the dropout masks (default 0)");
    cmd_->add_flag("--no-shuffle", o_.noShuffle, "Batches in file order");
    cmd_->add_option("--clip-norm", o_.clipNorm, "Clip gradients to this global L2 norm");
    cmd_->add_option("--save-step", o_.saveStep,
                     "Write the train-step graph (before optimization) as text IR here, for "
                     "nnc inspect, bench and run");
    cmd_->add_option("--target", o_.target, "cpu (default), interp or opencl[:P.D]");
    cmd_->add_option("--cpu", o_.cpu, kCpuOptionHelp);
    cmd_->add_option("--threads", o_.threads, "cpu: threads (default: all cores; 1: serial)")
        ->check(CLI::NonNegativeNumber);
    cmd_->add_option("--output", o_.output, "Write the trained model here")->required();
    cmd_->add_flag("--json", o_.json, "Print median_step_ms, final_loss and losses as JSON");
  }
  int run() override { return trainCommand(o_); }

private:
  TrainCliOptions o_;
};

} // namespace

std::unique_ptr<Command> addTrainCommand(CLI::App &app) {
  return std::make_unique<TrainCommand>(app);
}

} // namespace nnc::tools
