// Shared helpers of the libFuzzer targets (tests/fuzz): a scratch file for readers that take a
// path, and the allocation limit that keeps a fuzzed input's tensors small.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace nnc::fuzz {

/// Lowers nnc's tensor allocation limit (NNC_MAX_TENSOR_BYTES) unless the caller set one, so
/// that an input asking for gigabytes gets nnc's clear error well below -rss_limit_mb.
inline void limitTensorBytes() {
  setenv("NNC_MAX_TENSOR_BYTES", "268435456", /*overwrite=*/0);
}

/// Writes `size` bytes to this process's scratch file (in $TMPDIR, else /dev/shm when present)
/// named with `suffix`, and returns its path. The readers under test take paths.
inline std::string writeScratch(const uint8_t *data, size_t size, const char *suffix) {
  static const std::string dir = [] {
    const char *t = std::getenv("TMPDIR");
    if (t && *t)
      return std::string(t);
    return std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  }();
  std::string path = dir + "/nnc-fuzz-" + std::to_string(getpid()) + suffix;
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort(); // The harness itself is broken: no scratch space.
  if (size && std::fwrite(data, 1, size, f) != size)
    std::abort();
  std::fclose(f);
  return path;
}

} // namespace nnc::fuzz
