// Dimensions (constant or symbolic), shapes and tensor types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nnc/ir/DType.h"

namespace nnc {

/// One dimension: a non-negative constant, or a named symbol such as `N`. Two symbolic dims
/// with the same name are the same size within one graph. Unknown sizes (data-dependent
/// outputs) get fresh symbols from Graph::freshDim().
class Dim {
public:
  Dim(int64_t value = 0) : value_(value) {}
  static Dim symbol(std::string name) {
    Dim d(-1);
    d.symbol_ = std::move(name);
    return d;
  }
  bool isStatic() const { return value_ >= 0; }
  bool isSymbolic() const { return value_ < 0; }
  /// The constant value; only for static dims.
  int64_t value() const { return value_; }
  /// The symbol's name; only for symbolic dims.
  const std::string &symbolName() const { return symbol_; }
  bool operator==(const Dim &o) const { return value_ == o.value_ && symbol_ == o.symbol_; }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  /// "3" or "N".
  std::string str() const { return isStatic() ? std::to_string(value_) : symbol_; }

private:
  int64_t value_;
  std::string symbol_;
};

using Shape = std::vector<Dim>;

/// Concrete shape of a runtime tensor.
using Extents = std::vector<int64_t>;

/// "[N,3,224,224]".
std::string shapeStr(const Shape &s);
std::string extentsStr(const Extents &s);
bool isStatic(const Shape &s);
/// The static extents; nullopt if any dim is symbolic.
std::optional<Extents> staticExtents(const Shape &s);
Shape shapeFromExtents(const Extents &e);

/// Element count of concrete extents, or nullopt on overflow of int64 or a negative extent.
std::optional<int64_t> checkedNumElements(const Extents &e);

/// Dtype and shape of a value.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  TensorType() = default;
  TensorType(DType t, Shape s) : dtype(t), shape(std::move(s)) {}
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
  /// "f32[N,784]"; a scalar is "f32[]".
  std::string str() const;
};

} // namespace nnc
