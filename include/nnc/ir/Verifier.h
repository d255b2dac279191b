// The IR verifier: structure, attributes, dtypes and shapes of a whole graph.
#pragma once

#include "nnc/ir/Graph.h"

namespace nnc {

/// Checks that every operand is defined before its use, operand/result counts and
/// attributes match the op table, and each node's result types agree with its shape rule
/// (same dtype and rank; static dims equal). Fails naming the first bad node.
Error verify(const Graph &g);

/// Checks one node's operand/result counts and attributes against the op table.
Error verifyNodeSignature(const Node &n);

} // namespace nnc
