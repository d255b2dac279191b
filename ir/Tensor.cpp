// Tensor storage.
#include "nnc/ir/Tensor.h"

#include <algorithm>
#include <cstdlib>

#include <sys/mman.h>
#include <unistd.h>

#include "nnc/ir/TensorLimit.h"
#include "nnc/support/Float16.h"

namespace nnc {

namespace {
/// The calling thread's TensorByteLimit (0: none).
thread_local int64_t threadByteLimit = 0;
} // namespace

int64_t maxTensorBytes() {
  static const int64_t limit = [] {
    if (const char *s = std::getenv("NNC_MAX_TENSOR_BYTES")) {
      char *end = nullptr;
      long long v = std::strtoll(s, &end, 10);
      if (end != s && v > 0)
        return static_cast<int64_t>(v);
    }
    return int64_t(16) << 30; // 16 GiB
  }();
  return threadByteLimit > 0 ? std::min(limit, threadByteLimit) : limit;
}

TensorByteLimit::TensorByteLimit(int64_t bytes) : saved_(threadByteLimit) {
  threadByteLimit = saved_ > 0 ? std::min(saved_, bytes) : bytes;
}

TensorByteLimit::~TensorByteLimit() {
  threadByteLimit = saved_;
}

namespace {

/// Buffers of at least this many bytes (and no pool) get their own anonymous mapping: its
/// pages come zeroed, so zeros() writes nothing, and the kernel is asked for transparent huge
/// pages, which cut the page faults of the first touch (weight packing at compile time writes
/// tens of MB of fresh tensors) by up to 512x.
constexpr size_t kMappedBytes = size_t(1) << 20;

void *mapZeroed(size_t bytes) {
  void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return nullptr;
#ifdef MADV_HUGEPAGE
  ::madvise(p, bytes, MADV_HUGEPAGE); // advice only: failure changes nothing
#endif
  return p;
}

} // namespace

Tensor::Buffer::~Buffer() {
  if (borrowed)
    return;
  if (mapped)
    ::munmap(data, allocated);
  else if (pool)
    pool->give(data, allocated);
  else
    std::free(data);
}

TensorPool::~TensorPool() {
  for (auto &[bytes, data] : free_)
    std::free(data);
}

void *TensorPool::take(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = free_.size(); i-- > 0;)
    if (free_[i].first == bytes) {
      void *d = free_[i].second;
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
      return d;
    }
  return nullptr;
}

void TensorPool::give(void *data, size_t bytes) {
  void *evicted = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.emplace_back(bytes, data);
    if (free_.size() > maxBuffers_) {
      evicted = free_.front().second;
      free_.erase(free_.begin());
    }
  }
  std::free(evicted);
}

size_t TensorPool::kept() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

Expected<Tensor> Tensor::createUninitialized(DType dtype, const Extents &extents,
                                             const std::shared_ptr<TensorPool> &pool) {
  std::optional<int64_t> n = checkedNumElements(extents);
  NNC_USER_CHECK(n.has_value(), "tensor of shape {} has a negative or overflowing element count",
                 extentsStr(extents));
  int64_t esize = static_cast<int64_t>(dtypeSize(dtype));
  NNC_USER_CHECK(*n <= maxTensorBytes() / esize,
                 "tensor {}{} needs {} elements, more than the {}-byte limit allows "
                 "(NNC_MAX_TENSOR_BYTES)",
                 dtypeName(dtype), extentsStr(extents), *n, maxTensorBytes());
  Tensor t;
  t.dtype_ = dtype;
  t.extents_ = extents;
  t.numElements_ = *n;
  t.buffer_ = std::make_shared<Buffer>();
  size_t bytes = static_cast<size_t>(*n) * esize;
  size_t alloc = std::max<size_t>(64, ((bytes + 63) / 64) * 64);
  t.buffer_->data = pool ? pool->take(alloc) : nullptr;
  if (!t.buffer_->data && !pool && alloc >= kMappedBytes) {
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    alloc = (alloc + page - 1) / page * page;
    t.buffer_->data = mapZeroed(alloc);
    t.buffer_->mapped = t.buffer_->data != nullptr;
  }
  if (!t.buffer_->data)
    t.buffer_->data = std::aligned_alloc(64, alloc);
  NNC_USER_CHECK(t.buffer_->data != nullptr, "out of memory allocating {} bytes for tensor {}{}",
                 alloc, dtypeName(dtype), extentsStr(extents));
  t.buffer_->size = bytes;
  t.buffer_->allocated = alloc;
  t.buffer_->pool = pool;
  return t;
}

Expected<Tensor> Tensor::create(DType dtype, const Extents &extents) {
  NNC_ASSIGN_OR_RETURN(Tensor t, createUninitialized(dtype, extents));
  if (!t.buffer_->mapped) // a fresh mapping is zero already
    std::memset(t.buffer_->data, 0, t.buffer_->allocated);
  return t;
}

Tensor Tensor::zeros(DType dtype, const Extents &extents) {
  Expected<Tensor> t = create(dtype, extents);
  NNC_ASSERT(t, "{}", t.error().message());
  return std::move(*t);
}

Tensor Tensor::fromBytes(DType dtype, const Extents &extents, const void *bytes) {
  Expected<Tensor> t = createUninitialized(dtype, extents);
  NNC_ASSERT(t, "{}", t.error().message());
  // Written once: the bytes, then zeros in the alignment padding.
  Buffer &b = *t->buffer_;
  if (b.size)
    std::memcpy(b.data, bytes, b.size);
  if (!b.mapped)
    std::memset(static_cast<char *>(b.data) + b.size, 0, b.allocated - b.size);
  return std::move(*t);
}

Tensor Tensor::borrow(DType dtype, const Extents &extents, void *bytes) {
  std::optional<int64_t> n = checkedNumElements(extents);
  NNC_ASSERT(n && *n >= 0, "borrow: bad extents {}", extentsStr(extents));
  Tensor t;
  t.dtype_ = dtype;
  t.extents_ = extents;
  t.numElements_ = *n;
  t.buffer_ = std::make_shared<Buffer>();
  t.buffer_->data = bytes;
  t.buffer_->size = t.buffer_->allocated = static_cast<size_t>(*n) * dtypeSize(dtype);
  t.buffer_->borrowed = true;
  return t;
}

Tensor Tensor::reshaped(const Extents &extents) const {
  std::optional<int64_t> n = checkedNumElements(extents);
  NNC_ASSERT(n && *n == numElements_, "reshape {} -> {} changes the element count",
             extentsStr(extents_), extentsStr(extents));
  Tensor t = *this;
  t.extents_ = extents;
  return t;
}

Tensor Tensor::clone() const {
  if (isNull())
    return Tensor();
  return fromBytes(dtype_, extents_, rawData());
}

double Tensor::elementAsDouble(int64_t i) const {
  switch (dtype_) {
  case DType::F32: return data<float>()[i];
  case DType::F64: return data<double>()[i];
  case DType::F16: return halfToFloat(data<uint16_t>()[i]);
  case DType::BF16: return bf16ToFloat(data<uint16_t>()[i]);
  case DType::I8: return data<int8_t>()[i];
  case DType::U8: return data<uint8_t>()[i];
  case DType::I16: return data<int16_t>()[i];
  case DType::U16: return data<uint16_t>()[i];
  case DType::I32: return data<int32_t>()[i];
  case DType::U32: return data<uint32_t>()[i];
  case DType::I64: return static_cast<double>(data<int64_t>()[i]);
  case DType::U64: return static_cast<double>(data<uint64_t>()[i]);
  case DType::Bool: return data<bool>()[i] ? 1.0 : 0.0;
  default: NNC_ASSERT(false, "elementAsDouble on storage-only dtype {}", dtypeName(dtype_));
  }
}

int64_t Tensor::elementAsInt(int64_t i) const {
  switch (dtype_) {
  case DType::I8: return data<int8_t>()[i];
  case DType::U8: return data<uint8_t>()[i];
  case DType::I16: return data<int16_t>()[i];
  case DType::U16: return data<uint16_t>()[i];
  case DType::I32: return data<int32_t>()[i];
  case DType::U32: return data<uint32_t>()[i];
  case DType::I64: return data<int64_t>()[i];
  case DType::U64: return static_cast<int64_t>(data<uint64_t>()[i]);
  case DType::Bool: return data<bool>()[i] ? 1 : 0;
  default: return static_cast<int64_t>(elementAsDouble(i));
  }
}

std::vector<int64_t> Tensor::toInt64Vector() const {
  std::vector<int64_t> r(static_cast<size_t>(numElements_));
  for (int64_t i = 0; i < numElements_; ++i)
    r[i] = elementAsInt(i);
  return r;
}

bool Tensor::bitwiseEqual(const Tensor &o) const {
  if (isNull() || o.isNull())
    return isNull() == o.isNull();
  return dtype_ == o.dtype_ && extents_ == o.extents_ &&
         std::memcmp(rawData(), o.rawData(), byteSize()) == 0;
}

} // namespace nnc
