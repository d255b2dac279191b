// Debug output behind one switch: NNC_DEBUG=what[,what...] (or "all") turns on the output of
// each named part; NNC_DEBUG=time prints how long the phases of a compile take and the
// process's resident memory after each (current and peak), so a user can see what the RSS of
// a run is made of; NNC_DEBUG=verify checks every kernel lowering makes against the kernel
// IR's rules (kir::verifyKernel) before code generation (the tests run with it).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace nnc {

/// The process's resident set and its peak so far in MiB, from /proc/self/status (VmRSS,
/// VmHWM); {-1, -1} where there is no such file.
inline std::pair<double, double> residentMiB() {
  std::pair<double, double> r{-1, -1};
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return r;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    long kb = 0;
    if (std::sscanf(line, "VmRSS: %ld kB", &kb) == 1)
      r.first = kb / 1024.0;
    else if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1)
      r.second = kb / 1024.0;
  }
  std::fclose(f);
  return r;
}

/// True when NNC_DEBUG names `what` (comma-separated) or is "all".
inline bool debugEnabled(const char *what) {
  const char *env = std::getenv("NNC_DEBUG");
  if (!env)
    return false;
  std::string s = std::string(",") + env + ",";
  return s.find(std::string(",") + what + ",") != std::string::npos || s == ",all,";
}

/// With NNC_DEBUG=time, prints "nnc: time: <phase>: <ms> ms, rss <MiB> MiB, peak <MiB> MiB"
/// to stderr when it dies (or on stop()); otherwise does nothing.
class PhaseTimer {
public:
  explicit PhaseTimer(std::string phase) : phase_(std::move(phase)), on_(debugEnabled("time")) {
    if (on_)
      start_ = std::chrono::steady_clock::now();
  }
  PhaseTimer(const PhaseTimer &) = delete;
  PhaseTimer &operator=(const PhaseTimer &) = delete;
  ~PhaseTimer() { stop(); }
  void stop() {
    if (!on_)
      return;
    on_ = false;
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
            .count();
    auto [rss, peak] = residentMiB();
    if (rss < 0)
      std::fprintf(stderr, "nnc: time: %s: %.1f ms\n", phase_.c_str(), ms);
    else
      std::fprintf(stderr, "nnc: time: %s: %.1f ms, rss %.0f MiB, peak %.0f MiB\n",
                   phase_.c_str(), ms, rss, peak);
  }

private:
  std::string phase_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace nnc
