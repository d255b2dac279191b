// The reference interpreter: the correctness oracle every backend is compared with, and the
// evaluator behind constant folding.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"
#include "nnc/ir/TensorCheck.h"

namespace nnc {

/// Evaluates one node on concrete operands (a null Tensor for an absent optional operand).
/// Result dtypes and extents follow the node's semantics, not its declared types.
Expected<std::vector<Tensor>> evaluateNode(const Node &node, const std::vector<Tensor> &operands);

/// Runs `g` on `inputs` (graph-input order) and returns its outputs. Inputs are checked with
/// checkAgainstType; each node's results are checked against their declared types too, so a
/// shape rule and a kernel that disagree are reported instead of silently giving garbage.
Expected<std::vector<Tensor>> interpret(const Graph &g, const std::vector<Tensor> &inputs);

} // namespace nnc
