// The text form of the IR: printing. Parsing it back (Parser.h) gives the same graph, and
// print(parse(print(g))) == print(g) byte for byte.
#pragma once

#include <ostream>
#include <string>

#include "nnc/ir/Graph.h"

namespace nnc {

struct PrintOptions {
  /// Constants with more elements than this are printed as exact hex blobs instead of
  /// element lists (both round-trip exactly).
  int64_t maxInlineElements = 16;
};

void printGraph(const Graph &g, std::ostream &os, const PrintOptions &opts = {});
std::string printGraph(const Graph &g, const PrintOptions &opts = {});

} // namespace nnc
