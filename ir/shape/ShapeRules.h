// Declarations of every op's shape rule (defined in ir/shape/*.cpp) and helpers they share.
#pragma once

#include "nnc/ir/Graph.h"
#include "nnc/ir/Op.h"

namespace nnc::shape {

#define NNC_OP(Id, ...) Expected<std::vector<TensorType>> infer##Id(const Node &node);
#include "nnc/ir/Ops.def"

/// The rule shared by all elementwise ops.
Expected<std::vector<TensorType>> inferElementwise(const Node &node);

} // namespace nnc::shape
