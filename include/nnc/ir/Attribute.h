// Node attributes: ints, floats, strings, lists of them, tensors and dtypes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "nnc/ir/DType.h"
#include "nnc/ir/Tensor.h"

namespace nnc {

enum class AttrKind : uint8_t { Int, Float, String, Ints, Floats, Tensor, DType };

/// "int", "float", "string", "ints", "floats", "tensor", "dtype".
const char *attrKindName(AttrKind k);

/// One attribute value. Floats are kept as double so that f32 and f64 values round-trip.
/// The variant's index order matches AttrKind.
using Attribute = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, Tensor, DType>;

inline AttrKind attrKind(const Attribute &a) { return static_cast<AttrKind>(a.index()); }

/// Attributes of a node, sorted by name (so printing is deterministic).
using AttrMap = std::map<std::string, Attribute>;

/// Structural equality (tensors compared bitwise, floats by bits).
bool attrEqual(const Attribute &a, const Attribute &b);

} // namespace nnc
