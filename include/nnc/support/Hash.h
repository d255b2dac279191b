// FNV-1a (Fowler, Noll, Vo), 64-bit: a small, stable hash for cache keys, checksums and
// digests that must come out the same on every machine and in every run (std::hash need
// not). Not a cryptographic hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nnc {

inline constexpr uint64_t kFnv1aOffset = 14695981039346656037ull;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;

/// FNV-1a of `n` bytes at `data`, continuing from `h` (kFnv1aOffset to start).
inline uint64_t fnv1a(const void *data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto *b = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * kFnv1aPrime;
  return h;
}

inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aOffset) {
  return fnv1a(s.data(), s.size(), h);
}

} // namespace nnc
