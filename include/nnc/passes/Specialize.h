// Specializing a graph with symbolic dims to concrete input shapes (the CPU target compiles
// one executable per input-shape signature).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/passes/PassManager.h"

namespace nnc {

/// Inputs with at most this many elements may be specialized on their values when a shape
/// depends on them (Resize sizes, TopK's k, Range bounds given as graph inputs).
constexpr int64_t kMaxValueSpecializedElements = 4096;

/// Returns a copy of `g` with every input given its concrete extents and shape inference and
/// constant folding (with `evaluate`) run to a fixed point, so every shape is static. Inputs
/// in `values` (by position) are also replaced by those constants. Fails naming the first
/// node whose result shape is still unknown; then `wanted` (when not null) receives the small
/// graph inputs that shape may depend on (those feeding the node's shape-like operands:
/// every operand but the first, and the first when it is a scalar), so the caller can
/// specialize on their values too. With `allowDataDependent`, a graph whose later shapes
/// depend on data computed inside it is returned rather than rejected (after filling
/// `wanted`): the caller runs it in stages, up to the first node with an unknown shape.
Expected<std::unique_ptr<Graph>> specializeShapes(const Graph &g,
                                                  const std::vector<Extents> &inputShapes,
                                                  const PassContext::Evaluator &evaluate,
                                                  const std::map<int, Tensor> &values = {},
                                                  std::set<int> *wanted = nullptr,
                                                  bool allowDataDependent = false);

} // namespace nnc
