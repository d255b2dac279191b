// One-line warnings on stderr about what nnc skipped but could do without (a cache it could
// not read or write, a corrupted cache entry): the work goes on, and the user learns why it
// was slower than it could have been. And the switch that injects such faults for the tests.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace nnc {

/// Prints "nnc: warning: MESSAGE" to stderr the first time the process gives this message
/// (a cache directory that cannot be written would otherwise warn once per kernel).
inline void warnOnce(const std::string &message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (!said.insert(message).second)
    return;
  std::fprintf(stderr, "nnc: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

/// True when NNC_FAULT (comma-separated) names `what`: a fault injected on purpose, so that
/// the tests see a fallback work against the real failure (NNC_FAULT=opencl-build: the OpenCL
/// device fails the first program build).
inline bool faultInjected(const char *what) {
  const char *env = std::getenv("NNC_FAULT");
  if (!env)
    return false;
  std::string s = std::string(",") + env + ",";
  return s.find(std::string(",") + what + ",") != std::string::npos;
}

} // namespace nnc
