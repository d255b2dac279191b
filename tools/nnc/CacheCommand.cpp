// `nnc cache ls|show|export|prune`: inspect and manage the tuning cache.
#include "Command.h"
#include "CommandUtil.h"

#include <algorithm>
#include <iostream>

#include "nnc/runtime/TuningCache.h"

namespace nnc::tools {

namespace {

std::string recordJson(const TuningRecord &r) {
  return fmt::format("{{\"kind\": \"{}\", \"signature\": \"{}\", \"device\": \"{}\", "
                     "\"space_version\": {}, \"config\": \"{}\", \"median_ms\": {:.5f}, "
                     "\"default_ms\": {:.5f}, \"trials\": {}, \"updated\": \"{}\"}}",
                     jsonEscape(r.kind), jsonEscape(r.signature), jsonEscape(r.device),
                     r.spaceVersion, r.config, r.medianMs, r.defaultMs, r.trials, r.updated);
}

/// The fingerprint of this CPU (for $NNC_CPU's target) without the thread count (records of
/// every thread count).
std::string devicePrefix() {
  Expected<CpuTarget> cpu = CpuTarget::fromEnvironment();
  std::string fp = cpuDeviceFingerprint(1, cpu ? *cpu : CpuTarget::host());
  return fp.substr(0, fp.rfind("threads="));
}

/// The devices of this machine, as records name them: the CPU's prefix and every OpenCL
/// device's fingerprint (none where there is no OpenCL driver).
std::vector<std::string> localDevices() {
  std::vector<std::string> here{devicePrefix()};
  if (Expected<std::vector<OpenCLDeviceInfo>> cl = listOpenCLDevices())
    for (const OpenCLDeviceInfo &d : *cl)
      here.push_back(openclDeviceFingerprint(d));
  return here;
}

/// "t4" for a CPU record (its threads), "opencl" for an OpenCL device's.
std::string deviceTag(const std::string &device) {
  size_t t = device.rfind("threads=");
  return t == std::string::npos ? device.substr(0, device.find(' ')) : "t" + device.substr(t + 8);
}

class CacheCommand : public Command {
public:
  explicit CacheCommand(CLI::App &app) {
    cmd_ = app.add_subcommand("cache", "Inspect and manage the tuning cache");
    cmd_->add_option("action", action_, "ls, show, export or prune")
        ->required()
        ->check(CLI::IsMember({"ls", "show", "export", "prune"}));
    cmd_->add_option("filter", filter_, "show: records whose signature contains this");
    cmd_->add_option("--cache", cachePath_,
                     "Tuning cache (default $NNC_TUNING_CACHE or "
                     "~/.cache/nnc/tuning.db)");
    cmd_->add_flag("--json", json_, "export: as JSON (the only format)");
    cmd_->add_flag("--all", all_,
                   "prune: every record (default: other devices and "
                   "outdated space versions)");
  }
  int run() override;

private:
  std::string cachePath_, action_, filter_;
  bool json_ = false, all_ = false;
};

int CacheCommand::run() {
  std::string path = cachePath_.empty() ? TuningCache::defaultPath() : cachePath_;
  Expected<std::unique_ptr<TuningCache>> cache = TuningCache::open(path, action_ != "prune");
  if (!cache)
    return fail(cache.takeError().message());
  if (action_ == "prune") {
    Expected<int64_t> n = (*cache)->prune(all_ ? std::vector<std::string>{} : localDevices());
    if (!n)
      return fail(n.takeError().message());
    std::cout << fmt::format("removed {} records from {}\n", *n, path);
    return 0;
  }
  Expected<std::vector<TuningRecord>> recs = (*cache)->all();
  if (!recs)
    return fail(recs.takeError().message());
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
        std::cout << fmt::format(
            "{}\n  device   {}\n  space    {} v{}\n  config   {}\n  median   "
            "{:.4f} ms (default {:.4f} ms, {:.2f}x)\n  trials   {}\n  "
            "updated  {}\n",
            r.signature, r.device, r.kind, r.spaceVersion, r.config, r.medianMs, r.defaultMs,
            r.medianMs > 0 ? r.defaultMs / r.medianMs : 1.0, r.trials, r.updated);
    return 0;
  }
  std::cout << fmt::format("{}: {} records\n", path, recs->size());
  std::vector<std::string> here = localDevices();
  auto local = [&](const std::string &device) {
    return std::any_of(here.begin(), here.end(),
                       [&](const std::string &d) { return device.rfind(d, 0) == 0; });
  };
  for (const TuningRecord &r : *recs)
    std::cout << fmt::format("{:6.2f}x {} {}{}  [{}]\n",
                             r.medianMs > 0 ? r.defaultMs / r.medianMs : 1.0, deviceTag(r.device),
                             local(r.device) ? "" : "(other device) ", r.signature, r.config);
  return 0;
}

} // namespace

std::unique_ptr<Command> addCacheCommand(CLI::App &app) {
  return std::make_unique<CacheCommand>(app);
}

} // namespace nnc::tools
