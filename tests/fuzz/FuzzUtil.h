// Shared helpers of the libFuzzer targets (tests/fuzz): a scratch file for readers that take a
// path, the allocation limit that keeps a fuzzed input's tensors small, and the deterministic
// inputs on which a fuzzed graph is interpreted.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"

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

/// The k-th (0 .. 6) of seven pattern values of an 8- or 16-bit integer type T: its extremes
/// and the values next to zero, what a quantized model's data and zero points hold.
template <typename T> T extremePattern(int k) {
  const T v[7] = {std::numeric_limits<T>::min(), static_cast<T>(std::numeric_limits<T>::min() + 1),
                  T(0), T(1), static_cast<T>(std::numeric_limits<T>::max() / 2 + 1),
                  static_cast<T>(std::numeric_limits<T>::max() - 1),
                  std::numeric_limits<T>::max()};
  return v[k];
}

/// Small values of `type` (-1.5 .. 1.5 for floats; -3 .. 3 for i32 and i64, so an index into
/// an axis of size 2 or 3 is also out of range or negative; the extremes for the 8- and 16-bit
/// integers, extremePattern), or a null tensor when the type has a symbolic dim, is
/// storage-only or has more than `budget` elements (which it then uses up).
inline Tensor patternInput(const TensorType &type, int64_t &budget) {
  if (!isStatic(type.shape) || isStorageOnly(type.dtype))
    return Tensor();
  Extents e;
  for (const Dim &d : type.shape)
    e.push_back(d.value());
  std::optional<int64_t> n = checkedNumElements(e);
  if (!n || *n > budget)
    return Tensor();
  budget -= *n;
  Expected<Tensor> t = Tensor::create(type.dtype, e);
  if (!t)
    return Tensor();
  for (int64_t i = 0; i < *n; ++i) {
    int v = static_cast<int>(i % 7) - 3;
    switch (type.dtype) {
    case DType::F32:
      t->data<float>()[i] = static_cast<float>(v) * 0.5f;
      break;
    case DType::F64:
      t->data<double>()[i] = v * 0.5;
      break;
    case DType::I64:
      t->data<int64_t>()[i] = v;
      break;
    case DType::I32:
      t->data<int32_t>()[i] = v;
      break;
    case DType::I8:
      t->data<int8_t>()[i] = extremePattern<int8_t>(v + 3);
      break;
    case DType::U8:
      t->data<uint8_t>()[i] = extremePattern<uint8_t>(v + 3);
      break;
    case DType::I16:
      t->data<int16_t>()[i] = extremePattern<int16_t>(v + 3);
      break;
    case DType::U16:
      t->data<uint16_t>()[i] = extremePattern<uint16_t>(v + 3);
      break;
    case DType::Bool:
      t->data<uint8_t>()[i] = static_cast<uint8_t>(i & 1);
      break;
    default:
      break; // Other types keep the zeros Tensor::create gave them.
    }
  }
  return *t;
}

/// Pattern inputs (patternInput) for every input of `g`, or nothing when one cannot be made
/// or they hold more than `maxElements` elements in all: the interpreter's speed is not under
/// test, and a large graph would only slow the fuzzer down.
inline std::optional<std::vector<Tensor>> patternInputs(const Graph &g, int64_t maxElements) {
  int64_t budget = maxElements;
  std::vector<Tensor> inputs;
  for (const Value *v : g.inputs()) {
    Tensor t = patternInput(v->type(), budget);
    if (t.isNull())
      return std::nullopt;
    inputs.push_back(std::move(t));
  }
  return inputs;
}

} // namespace nnc::fuzz
