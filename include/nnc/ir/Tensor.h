// A concrete tensor: dtype, extents and a shared, 64-byte aligned buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "nnc/ir/DType.h"
#include "nnc/ir/Shape.h"
#include "nnc/support/Error.h"

namespace nnc {

/// The C++ type an element of each arithmetic dtype is stored as. f16 and bf16 are stored as
/// their bits (uint16_t); storage-only types as one uint8_t per element.
template <DType T> struct DTypeStorage;
#define NNC_STORAGE(D, C)                                                                          \
  template <> struct DTypeStorage<DType::D> {                                                      \
    using type = C;                                                                                \
  };
NNC_STORAGE(F32, float)
NNC_STORAGE(F64, double)
NNC_STORAGE(F16, uint16_t)
NNC_STORAGE(BF16, uint16_t)
NNC_STORAGE(I8, int8_t)
NNC_STORAGE(U8, uint8_t)
NNC_STORAGE(I16, int16_t)
NNC_STORAGE(U16, uint16_t)
NNC_STORAGE(I32, int32_t)
NNC_STORAGE(U32, uint32_t)
NNC_STORAGE(I64, int64_t)
NNC_STORAGE(U64, uint64_t)
NNC_STORAGE(Bool, bool)
#undef NNC_STORAGE

/// Largest tensor nnc allocates (bytes). Anything larger is refused with an error instead of
/// an attempt to allocate; overridable with NNC_MAX_TENSOR_BYTES.
int64_t maxTensorBytes();

class TensorPool;

/// A dense row-major tensor. Copies share the buffer (like a shared_ptr); use clone() for a
/// deep copy. A default-constructed Tensor is "null" (no dtype, no buffer).
class Tensor {
public:
  Tensor() = default;

  /// A zero-filled tensor. Fails (instead of allocating) when the element count overflows or
  /// the size exceeds maxTensorBytes().
  static Expected<Tensor> create(DType dtype, const Extents &extents);
  /// Like create(), for sizes the caller knows are sane; aborts on failure.
  static Tensor zeros(DType dtype, const Extents &extents);
  /// A tensor holding a copy of `bytes` (which must be numElements*dtypeSize long).
  static Tensor fromBytes(DType dtype, const Extents &extents, const void *bytes);
  /// A tensor over the caller's memory, without a copy: the caller keeps `bytes` alive while
  /// this tensor or a copy of it is used; it is never freed here. The C ABI's bound buffers
  /// (an OpenCL model uploads inputs from them and downloads outputs into them).
  static Tensor borrow(DType dtype, const Extents &extents, void *bytes);
  /// A tensor from C++ values; `T` must be DTypeStorage<dtype>::type.
  template <typename T>
  static Tensor fromVector(DType dtype, const Extents &extents, const std::vector<T> &values) {
    NNC_ASSERT(sizeof(T) == dtypeSize(dtype));
    Tensor t = zeros(dtype, extents);
    NNC_ASSERT(static_cast<int64_t>(values.size()) == t.numElements());
    if constexpr (std::is_same_v<T, bool>) { // std::vector<bool> has no data()
      for (size_t i = 0; i < values.size(); ++i)
        t.data<bool>()[i] = values[i];
    } else if (!values.empty()) {
      std::memcpy(t.rawData(), values.data(), values.size() * sizeof(T));
    }
    return t;
  }
  /// A rank-0 tensor.
  template <typename T> static Tensor scalar(DType dtype, T value) {
    return fromVector<T>(dtype, {}, {value});
  }

  bool isNull() const { return buffer_ == nullptr; }
  DType dtype() const { return dtype_; }
  const Extents &extents() const { return extents_; }
  int64_t rank() const { return static_cast<int64_t>(extents_.size()); }
  int64_t dim(int64_t i) const { return extents_[i]; }
  int64_t numElements() const { return numElements_; }
  size_t byteSize() const { return static_cast<size_t>(numElements_) * dtypeSize(dtype_); }
  TensorType type() const { return TensorType(dtype_, shapeFromExtents(extents_)); }

  void *rawData() { return buffer_ ? buffer_->data : nullptr; }
  const void *rawData() const { return buffer_ ? buffer_->data : nullptr; }
  template <typename T> T *data() { return static_cast<T *>(rawData()); }
  template <typename T> const T *data() const { return static_cast<const T *>(rawData()); }

  /// The same buffer seen with other extents of equal element count.
  Tensor reshaped(const Extents &extents) const;
  /// A deep copy.
  Tensor clone() const;
  /// Element i converted to double / int64 (any arithmetic dtype; f16/bf16 decoded).
  double elementAsDouble(int64_t i) const;
  int64_t elementAsInt(int64_t i) const;
  /// All elements as int64 (for shape-like tensors: shapes, axes, pads, indices).
  std::vector<int64_t> toInt64Vector() const;
  /// True when dtype, extents and bytes are identical.
  bool bitwiseEqual(const Tensor &o) const;

  /// Uninitialized memory for a tensor whose every element the caller writes (results of
  /// generated code). With a pool, the memory comes from it and goes back to it when the last
  /// tensor sharing it dies (repeated runs then neither page-fault nor zero their outputs).
  static Expected<Tensor> createUninitialized(DType dtype, const Extents &extents,
                                              const std::shared_ptr<TensorPool> &pool = {});

private:
  struct Buffer {
    void *data = nullptr;
    size_t size = 0;
    size_t allocated = 0;
    std::shared_ptr<TensorPool> pool; ///< Where data goes back to (null: freed).
    bool mapped = false;              ///< Its own memory mapping (large, pool-less buffers).
    bool borrowed = false;            ///< The caller's memory (borrow()): not freed.
    ~Buffer();
  };
  DType dtype_ = DType::F32;
  Extents extents_;
  int64_t numElements_ = 0;
  std::shared_ptr<Buffer> buffer_;
};

/// Released tensor memory kept for the next tensor of the same allocation size, up to a
/// number of buffers (the oldest kept buffer is freed first beyond it). Thread-safe.
class TensorPool {
public:
  explicit TensorPool(size_t maxBuffers) : maxBuffers_(maxBuffers) {}
  ~TensorPool();
  TensorPool(const TensorPool &) = delete;
  TensorPool &operator=(const TensorPool &) = delete;
  /// A kept buffer of exactly `bytes` (64-byte aligned), or null.
  void *take(size_t bytes);
  /// Keeps `data` (of `bytes`) for a later take(), or frees it when the pool is full.
  void give(void *data, size_t bytes);
  size_t kept() const;

private:
  size_t maxBuffers_;
  mutable std::mutex mutex_;
  std::vector<std::pair<size_t, void *>> free_; ///< Oldest first.
};

} // namespace nnc
