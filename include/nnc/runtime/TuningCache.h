// The persistent tuning cache: tuned configs per (kernel signature, device fingerprint,
// space version) in SQLite, and the tuner that fills it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nnc/codegen/Tuning.h"
#include "nnc/ir/Graph.h"
#include "nnc/runtime/OpenCLDevice.h"
#include "nnc/support/Error.h"

struct sqlite3;

namespace nnc {

/// What the device a config was measured on is: CPU model, the target code is generated for
/// (its level, extensions and caches), and the thread count. A record is applied only on an
/// identical fingerprint.
/// `threads` 0 means all the host's cores (CpuTarget::hostCores()).
std::string cpuDeviceFingerprint(int threads, const CpuTarget &cpu);
/// What an OpenCL device a config was measured on is: its name, platform, driver version and
/// compute units, and the nnc version that wrote the kernels ("opencl 'NAME' | platform
/// 'PLATFORM' | driver D | N CUs | nnc V"). A record is applied only on an identical fingerprint.
std::string openclDeviceFingerprint(const OpenCLDeviceInfo &d);

/// One tuned kernel.
struct TuningRecord {
  std::string kind, signature, device;
  int spaceVersion = 0;
  std::string config;   ///< tuning::configStr.
  double medianMs = 0;  ///< The config's median time.
  double defaultMs = 0; ///< The default config's median, measured in the same run.
  int64_t trials = 0;   ///< Candidates measured for this kernel (all runs together).
  std::string updated;  ///< UTC time of the last change.
};

/// A SQLite database (WAL journal, busy timeout, one transaction per write), safe to share
/// between concurrent tuners and compiles and left valid by a killed process.
class TuningCache {
public:
  ~TuningCache();
  /// $NNC_TUNING_CACHE, else ~/.cache/nnc/tuning.db.
  static std::string defaultPath();
  /// Opens (creating the file and its folder unless `readOnly`) the cache at `path`.
  static Expected<std::unique_ptr<TuningCache>> open(const std::string &path,
                                                     bool readOnly = false);
  const std::string &path() const { return path_; }

  /// The record of this kernel on this device and space version, if any.
  Expected<std::optional<TuningRecord>> find(const std::string &kind, const std::string &signature,
                                             const std::string &device, int spaceVersion);
  /// Stores `r` unless a faster record for the same key is there (trials add up).
  Error put(const TuningRecord &r);
  /// Every record (optionally only this device's).
  Expected<std::vector<TuningRecord>> all();
  /// Removes records whose device does not start with `keepDevice` or whose space version is
  /// not the current one of their kind ("" removes every record); returns the count.
  Expected<int64_t> prune(const std::string &keepDevice);
  /// prune() keeping the records of every device that starts with one of `keepDevices` (none:
  /// removes every record).
  Expected<int64_t> prune(const std::vector<std::string> &keepDevices);
  /// Candidates already measured for a kernel (config -> median ms, or < 0 when rejected).
  Expected<std::vector<std::pair<std::string, double>>>
  trials(const std::string &signature, const std::string &device, int spaceVersion);
  Error addTrial(const std::string &signature, const std::string &device, int spaceVersion,
                 const std::string &config, double ms);
  /// SQLite's integrity check ("ok" when sound).
  Expected<std::string> integrityCheck();

private:
  TuningCache() = default;
  Error exec(const std::string &sql);
  /// exec(), retried for up to 30 s while SQLite answers SQLITE_BUSY or SQLITE_LOCKED without
  /// waiting (an open transaction is rolled back before each retry).
  Error execRetryingBusy(const std::string &sql);
  sqlite3 *db_ = nullptr;
  std::string path_;
};

/// The config source compiles use: a cache record for the device, when there is one.
class CachedConfigs : public tuning::ConfigSource {
public:
  CachedConfigs(std::shared_ptr<TuningCache> cache, std::string device)
      : cache_(std::move(cache)), device_(std::move(device)) {}
  std::optional<tuning::Config> lookup(const tuning::Problem &p) const override;

private:
  std::shared_ptr<TuningCache> cache_;
  std::string device_;
};

struct TuneOptions {
  /// No default target: the caller hands down the CPU its target is for.
  explicit TuneOptions(CpuTarget target) : cpu(std::move(target)) {}
  int threads = 1;
  /// What the kernels are generated for (an OpenCL tuning's host side too).
  CpuTarget cpu;
  /// Set: tune the OpenCL kernels of `g` (optimized by the opencl pipeline) on this device,
  /// each fusion group as the executables lower it, timed by profiling events; unset: the
  /// CPU's kernels.
  std::optional<OpenCLDeviceInfo> opencl;
  double budgetSeconds = 60;
  int maxTrials = 0;                       ///< Per kernel (0: as the budget allows).
  bool progress = true;                    ///< Progress bar on stderr.
  const std::atomic<bool> *stop = nullptr; ///< Set (e.g. by SIGINT) to stop cleanly.
  /// Test hook: called on every non-default candidate's result buffers before the check.
  std::function<void(std::vector<float *> &results, std::vector<int64_t> &sizes)> corrupt;
};

struct TuneSummary {
  struct Kernel {
    tuning::Problem problem;
    int uses = 0;
    double defaultMs = 0, bestMs = 0;
    std::string bestConfig;
    int measured = 0, rejected = 0;
  };
  std::vector<Kernel> kernels;
  std::string device; ///< The fingerprint the records were stored under.
  double seconds = 0;
  bool interrupted = false;
};

/// Tunes the distinct tunable kernels of `g` (static shapes, optimized) on this CPU or on
/// opts.opencl's device and stores the results in `cache`.
Expected<TuneSummary> tuneGraph(const Graph &g, TuningCache &cache, const TuneOptions &opts);

} // namespace nnc
