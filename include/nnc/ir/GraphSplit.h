// Cutting a graph in two at a point of its node order (staged execution of graphs whose
// later shapes depend on data computed earlier).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"

namespace nnc {

/// The two halves of a graph cut after its first `numFirst` nodes.
struct GraphSplit {
  /// The first nodes, with the original inputs; its outputs are the values it defines that
  /// the rest uses (or that are graph outputs): the cut values, in node order.
  std::unique_ptr<Graph> first;
  /// The other nodes; its inputs are the original inputs followed by the cut values (named
  /// as in the original graph), its outputs the original outputs. Constants of the first
  /// half that the rest uses are copied into it rather than passed across the cut.
  std::unique_ptr<Graph> rest;
};

/// Cuts `g` after its first `numFirst` nodes (0 < numFirst < g.numNodes()).
GraphSplit splitGraph(const Graph &g, size_t numFirst);

} // namespace nnc
