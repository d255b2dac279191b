// Constructors of every pass. Each pass lives in its own file in passes/.
#pragma once

#include <memory>

#include "nnc/passes/PassManager.h"

namespace nnc {

/// Re-runs every node's shape rule in order, refining result types (e.g. once folding has
/// made a reshape's target shape constant).
std::unique_ptr<Pass> createShapeInferencePass();
/// Evaluates nodes whose operands are all constants with the reference interpreter, and
/// `shape` of values whose shape is static.
std::unique_ptr<Pass> createConstantFoldPass();
/// Removes nodes whose results are unused.
std::unique_ptr<Pass> createDeadCodeEliminationPass();
/// Merges nodes with the same op, operands and attributes (constants by value).
std::unique_ptr<Pass> createCommonSubexpressionEliminationPass();
/// Algebraic simplifications to a fixed point: x*1, x+0, x-0, x/1, cast to the same type,
/// transpose of transpose, reshape chains, no-op reshape/expand/transpose.
std::unique_ptr<Pass> createCanonicalizePass();

} // namespace nnc
