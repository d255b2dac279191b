// `nnc tune MODEL` (measure and cache the best configs of a model's tunable kernels) and
// `nnc cache ls|show|export|prune` (inspect and manage the tuning cache).
#include "Tune.h"

#include <atomic>
#include <csignal>
#include <iostream>

#include "driver/Driver.h"
#include "nnc/runtime/TuningCache.h"

namespace nnc::tools {

namespace {

std::atomic<bool> interrupted{false};
extern "C" void onInterrupt(int) { interrupted.store(true); }

int fail(const std::string &msg) {
  std::cerr << "nnc: error: " << msg << "\n";
  return 1;
}

std::string jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

std::string recordJson(const TuningRecord &r) {
  return fmt::format("{{\"kind\": \"{}\", \"signature\": \"{}\", \"device\": \"{}\", "
                     "\"space_version\": {}, \"config\": \"{}\", \"median_ms\": {:.5f}, "
                     "\"default_ms\": {:.5f}, \"trials\": {}, \"updated\": \"{}\"}}",
                     jsonEscape(r.kind), jsonEscape(r.signature), jsonEscape(r.device),
                     r.spaceVersion, r.config, r.medianMs, r.defaultMs, r.trials, r.updated);
}

/// The fingerprint of this CPU without the thread count (records of every thread count).
std::string devicePrefix() {
  std::string fp = cpuDeviceFingerprint(1);
  return fp.substr(0, fp.rfind("threads="));
}

} // namespace

std::string tunedKernelsLine(const TuningUse &u) {
  std::string line = fmt::format("tuned kernels: {}/{}", u.tuned, u.tunable);
  if (!u.missing.empty()) {
    line += " (missing: ";
    for (size_t i = 0; i < u.missing.size() && i < 3; ++i)
      line += (i ? "; " : "") + u.missing[i];
    if (u.missing.size() > 3)
      line += fmt::format("; {} more", u.missing.size() - 3);
    line += ")";
  }
  return line;
}

TuneCommands::TuneCommands(CLI::App &app) {
  tuneCmd_ = app.add_subcommand("tune", "Measure the best schedules of a model's tunable kernels "
                                        "and keep them in the tuning cache");
  tuneCmd_->add_option("model", model_, "Model file (.onnx or .nir)")->required();
  tuneCmd_->add_option("--target", target_, "cpu (the only tunable target so far)");
  tuneCmd_->add_option("--threads", threads_, "Threads the kernels run on (default 1)")
      ->check(CLI::NonNegativeNumber);
  tuneCmd_->add_option("--budget", budget_, "Seconds to spend (default 60)")
      ->check(CLI::PositiveNumber);
  tuneCmd_->add_option("--trials", trials_, "At most this many candidates per kernel")
      ->check(CLI::NonNegativeNumber);
  tuneCmd_->add_option("--cache", cachePath_, "Tuning cache (default $NNC_TUNING_CACHE or "
                                              "~/.cache/nnc/tuning.db)");
  tuneCmd_->add_flag("-q,--quiet", quiet_, "No progress bar");

  cacheCmd_ = app.add_subcommand("cache", "Inspect and manage the tuning cache");
  cacheCmd_->add_option("action", action_, "ls, show, export or prune")
      ->required()
      ->check(CLI::IsMember({"ls", "show", "export", "prune"}));
  cacheCmd_->add_option("filter", filter_, "show: records whose signature contains this");
  cacheCmd_->add_option("--cache", cachePath_, "Tuning cache (default $NNC_TUNING_CACHE or "
                                               "~/.cache/nnc/tuning.db)");
  cacheCmd_->add_flag("--json", json_, "export: as JSON (the only format)");
  cacheCmd_->add_flag("--all", all_, "prune: every record (default: other devices and "
                                     "outdated space versions)");
}

int TuneCommands::run() {
  if (tuneCmd_->parsed())
    return tune();
  if (cacheCmd_->parsed())
    return cache();
  return -1;
}

int TuneCommands::tune() {
  if (target_ != "cpu")
    return fail(fmt::format("--target {}: only cpu kernels are tunable so far", target_));
  Expected<std::unique_ptr<Graph>> g = driver::loadModel(model_);
  if (!g)
    return fail(g.takeError().message());
  if (Error e = driver::optimize(**g))
    return fail(e.message());
  for (const Node *n : (*g)->nodes())
    for (const Value *v : n->results())
      if (!isStatic(v->shape()))
        return fail(fmt::format("{}: value %{} has the symbolic type {}; nnc tune needs "
                                "static shapes",
                                model_, v->name(), v->type().str()));
  std::string path = cachePath_.empty() ? TuningCache::defaultPath() : cachePath_;
  Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(path);
  if (!cache)
    return fail(cache.takeError().message());
  TuneOptions opts;
  opts.threads = threads_;
  opts.budgetSeconds = budget_;
  opts.maxTrials = trials_;
  opts.progress = !quiet_;
  opts.stop = &interrupted;
  auto previous = std::signal(SIGINT, onInterrupt);
  Expected<TuneSummary> s = tuneGraph(**g, **cache, opts);
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
                           "cache {}\n",
                           s->kernels.size(), s->seconds,
                           s->interrupted ? " (interrupted: what was measured is kept)" : "",
                           defTotal, bestTotal, path);
  return s->interrupted ? 130 : 0;
}

int TuneCommands::cache() {
  std::string path = cachePath_.empty() ? TuningCache::defaultPath() : cachePath_;
  Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(path, action_ != "prune");
  if (!cache)
    return fail(cache.takeError().message());
  if (action_ == "prune") {
    Expected<int64_t> n = (*cache)->prune(all_ ? "" : devicePrefix());
    if (!n)
      return fail(n.takeError().message());
    std::cout << fmt::format("removed {} records from {}\n", *n, path);
    return 0;
  }
  Expected<std::vector<TuningRecord>> recs = (*cache)->all();
  if (!recs)
    return fail(recs.takeError().message());
  std::string here = devicePrefix();
  if (action_ == "export") {
    std::cout << "[";
    for (size_t i = 0; i < recs->size(); ++i)
      std::cout << (i ? ",\n " : "") << recordJson((*recs)[i]);
    std::cout << "]\n";
    return 0;
  }
  if (action_ == "show") {
    for (const TuningRecord &r : *recs)
      if (r.signature.find(filter_) != std::string::npos)
        std::cout << fmt::format("{}\n  device   {}\n  space    {} v{}\n  config   {}\n  median   "
                                 "{:.4f} ms (default {:.4f} ms, {:.2f}x)\n  trials   {}\n  "
                                 "updated  {}\n",
                                 r.signature, r.device, r.kind, r.spaceVersion, r.config,
                                 r.medianMs, r.defaultMs,
                                 r.medianMs > 0 ? r.defaultMs / r.medianMs : 1.0, r.trials,
                                 r.updated);
    return 0;
  }
  std::cout << fmt::format("{}: {} records\n", path, recs->size());
  for (const TuningRecord &r : *recs) {
    std::string threads = r.device.substr(r.device.rfind("threads=") + 8);
    std::cout << fmt::format("{:6.2f}x t{} {}{}  [{}]\n",
                             r.medianMs > 0 ? r.defaultMs / r.medianMs : 1.0, threads,
                             r.device.rfind(here, 0) == 0 ? "" : "(other device) ",
                             r.signature, r.config);
  }
  return 0;
}

} // namespace nnc::tools
