// Shape helpers.
#include "nnc/ir/Shape.h"

namespace nnc {

std::string shapeStr(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i)
      r += ",";
    r += s[i].str();
  }
  return r + "]";
}

std::string extentsStr(const Extents &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i)
      r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

bool isStatic(const Shape &s) {
  for (const Dim &d : s)
    if (!d.isStatic())
      return false;
  return true;
}

std::optional<Extents> staticExtents(const Shape &s) {
  Extents e;
  e.reserve(s.size());
  for (const Dim &d : s) {
    if (!d.isStatic())
      return std::nullopt;
    e.push_back(d.value());
  }
  return e;
}

Shape shapeFromExtents(const Extents &e) { return Shape(e.begin(), e.end()); }

std::optional<int64_t> checkedNumElements(const Extents &e) {
  int64_t n = 1;
  for (int64_t d : e) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > INT64_MAX / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

std::string TensorType::str() const { return std::string(dtypeName(dtype)) + shapeStr(shape); }

} // namespace nnc
