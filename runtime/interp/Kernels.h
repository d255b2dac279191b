// The interpreter's per-op kernels (defined in runtime/interp/*.cpp), dispatched by
// evaluateNode(). Each takes the node (for attributes) and concrete operands (null Tensor
// for an absent optional operand) and returns freshly allocated results. Bad runtime values
// (an index out of range, a shape that does not match) are Errors naming the node.
#pragma once

#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"

namespace nnc::interp {

using Operands = std::vector<Tensor>;
using Results = Expected<std::vector<Tensor>>;

#define NNC_OP(Id, ...) Results eval##Id(const Node &node, const Operands &ops);
#include "nnc/ir/Ops.def"

/// All elementwise ops (with broadcasting), from the formulas in Ops.def.
Results evalElementwise(const Node &node, const Operands &ops);
/// `x` converted to `to` as the cast op does (saturate, round_mode: its attributes).
Expected<Tensor> castTensor(const Tensor &x, DType to, bool saturate = true,
                            const std::string &roundMode = "up");

} // namespace nnc::interp
