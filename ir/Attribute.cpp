// Attribute helpers.
#include "nnc/ir/Attribute.h"

#include <cstring>

namespace nnc {

const char *attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Int: return "int";
  case AttrKind::Float: return "float";
  case AttrKind::String: return "string";
  case AttrKind::Ints: return "ints";
  case AttrKind::Floats: return "floats";
  case AttrKind::Tensor: return "tensor";
  case AttrKind::DType: return "dtype";
  }
  return "?";
}

namespace {
bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
} // namespace

bool attrEqual(const Attribute &a, const Attribute &b) {
  if (a.index() != b.index())
    return false;
  switch (attrKind(a)) {
  case AttrKind::Float: return sameBits(std::get<double>(a), std::get<double>(b));
  case AttrKind::Floats: {
    const auto &x = std::get<std::vector<double>>(a);
    const auto &y = std::get<std::vector<double>>(b);
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!sameBits(x[i], y[i]))
        return false;
    return true;
  }
  case AttrKind::Tensor: return std::get<Tensor>(a).bitwiseEqual(std::get<Tensor>(b));
  case AttrKind::Int: return std::get<int64_t>(a) == std::get<int64_t>(b);
  case AttrKind::String: return std::get<std::string>(a) == std::get<std::string>(b);
  case AttrKind::Ints: return std::get<std::vector<int64_t>>(a) == std::get<std::vector<int64_t>>(b);
  case AttrKind::DType: return std::get<DType>(a) == std::get<DType>(b);
  }
  return false;
}

} // namespace nnc
