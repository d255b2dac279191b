// Debug output behind one switch: NNC_DEBUG=what[,what...] (or "all") turns on the output of
// each named part; NNC_DEBUG=time prints how long the phases of a compile take.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace nnc {

/// True when NNC_DEBUG names `what` (comma-separated) or is "all".
inline bool debugEnabled(const char *what) {
  const char *env = std::getenv("NNC_DEBUG");
  if (!env)
    return false;
  std::string s = std::string(",") + env + ",";
  return s.find(std::string(",") + what + ",") != std::string::npos || s == ",all,";
}

/// With NNC_DEBUG=time, prints "nnc: time: <phase>: <ms> ms" to stderr when it dies (or on
/// stop()); otherwise does nothing.
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
    std::fprintf(stderr, "nnc: time: %s: %.1f ms\n", phase_.c_str(), ms);
  }

private:
  std::string phase_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace nnc
