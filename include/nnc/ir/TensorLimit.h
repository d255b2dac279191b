// A per-thread lowering of the tensor allocation limit (maxTensorBytes(), Tensor.h).
#pragma once

#include <cstdint>

namespace nnc {

/// Lowers maxTensorBytes() on the calling thread while it lives (never raises it). Constant
/// folding evaluates nodes whose result size is only known once evaluated (Range, a shape
/// computed by folding); under a limit of what it would keep, a huge result is refused before
/// it is allocated and written.
class TensorByteLimit {
public:
  explicit TensorByteLimit(int64_t bytes);
  ~TensorByteLimit();
  TensorByteLimit(const TensorByteLimit &) = delete;
  TensorByteLimit &operator=(const TensorByteLimit &) = delete;

private:
  int64_t saved_;
};

} // namespace nnc
