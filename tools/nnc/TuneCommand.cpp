// `nnc tune MODEL`: measure the best configs of a model's tunable kernels and keep them in the
// tuning cache.
#include "Command.h"
#include "CommandUtil.h"

#include <atomic>
#include <csignal>
#include <iostream>

#include "nnc/runtime/TuningCache.h"

namespace nnc::tools {

namespace {

std::atomic<bool> interrupted{false};
extern "C" void onInterrupt(int) {
  interrupted.store(true);
}

class TuneCommand : public Command {
public:
  explicit TuneCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("tune", "Measure the best schedules of a model's tunable kernels "
                                      "and keep them in the tuning cache");
    cmd_->add_option("model", model_, "Model file (.onnx or .nir)")->required();
    cmd_->add_option("--target", target_,
                     "cpu (default) or opencl[:P.D] (the OpenCL device's kernels, timed on it)");
    cmd_->add_option("--cpu", cpu_, kCpuOptionHelp);
    cmd_->add_option("--precision", precision_, kPrecisionOptionHelp);
    cmd_->add_option("--threads", threads_, "Threads the kernels run on (default 1)")
        ->check(CLI::NonNegativeNumber);
    cmd_->add_option("--budget", budget_, "Seconds to spend (default 60)")
        ->check(CLI::PositiveNumber);
    cmd_->add_option("--trials", trials_, "At most this many candidates per kernel")
        ->check(CLI::NonNegativeNumber);
    cmd_->add_option("--cache", cachePath_,
                     "Tuning cache (default $NNC_TUNING_CACHE or "
                     "~/.cache/nnc/tuning.db)");
    cmd_->add_option("--shape", shapes_,
                     "NAME=D0xD1x... for a symbolic input: its kernels are tuned at that shape "
                     "(repeat per input; the shapes a run will see)");
    cmd_->add_flag("-q,--quiet", quiet_, "No progress bar");
  }
  int run() override;

private:
  std::string model_, cachePath_, target_ = "cpu", cpu_, precision_ = "fp32";
  std::vector<std::string> shapes_;
  int threads_ = 1, trials_ = 0;
  double budget_ = 60;
  bool quiet_ = false;
};

int TuneCommand::run() {
  Expected<driver::Target> target = parseTargetOption(target_, cpu_);
  if (!target)
    return fail(target.takeError());
  if (Error e = driver::setPrecision(*target, precision_))
    return fail(e);
  Expected<std::map<std::string, Extents>> shapes = parseShapeSpecs(shapes_);
  if (!shapes)
    return fail(shapes.takeError());
  std::string path = cachePath_.empty() ? TuningCache::defaultPath() : cachePath_;
  TuneOptions opts(target->cpu);
  opts.threads = threads_;
  opts.budgetSeconds = budget_;
  opts.maxTrials = trials_;
  opts.progress = !quiet_;
  opts.stop = &interrupted;
  auto previous = std::signal(SIGINT, onInterrupt);
  Expected<TuneSummary> s = driver::tuneModel(model_, *target, *shapes, path, opts);
  std::signal(SIGINT, previous);
  if (!s)
    return fail(s.takeError().message());
  double defTotal = 0, bestTotal = 0;
  for (const TuneSummary::Kernel &k : s->kernels) {
    defTotal += k.defaultMs * k.uses;
    bestTotal += k.bestMs * k.uses;
    std::cout << fmt::format("{:9.4f} ms -> {:9.4f} ms ({:.2f}x) x{} {} trials, {} rejected  "
                             "{}  [{}]\n",
                             k.defaultMs, k.bestMs, k.bestMs > 0 ? k.defaultMs / k.bestMs : 1.0,
                             k.uses, k.measured, k.rejected, k.problem.signature, k.bestConfig);
  }
  std::cout << fmt::format("{} tunable kernels, {:.1f} s{}; their time {:.3f} ms -> {:.3f} ms; "
                           "cache {}\ndevice {}\n",
                           s->kernels.size(), s->seconds,
                           s->interrupted ? " (interrupted: what was measured is kept)" : "",
                           defTotal, bestTotal, path, s->device);
  return s->interrupted ? 130 : 0;
}

} // namespace

std::unique_ptr<Command> addTuneCommand(CLI::App &app) {
  return std::make_unique<TuneCommand>(app);
}

} // namespace nnc::tools
