// The text form of the IR: printing. Parsing it back (Parser.h) gives the same graph, and
// print(parse(print(g))) == print(g) byte for byte, unless constants are elided (below).
#pragma once

#include <ostream>
#include <string>

#include "nnc/ir/Graph.h"

namespace nnc {

struct PrintOptions {
  /// Constants with more elements than this are printed as exact hex blobs instead of
  /// element lists (both round-trip exactly).
  int64_t maxInlineElements = 16;
  /// Constants with more elements than this are printed without their values, as MLIR's
  /// printer elides them: `dense_resource<__elided__> : f32[500,800]`, the type kept. That
  /// text is for people (`nnc inspect`, where one weight's hex would be a line of hundreds
  /// of KB); the parser refuses it, naming the place, since the values are gone. -1 (the
  /// default) elides nothing, so whatever is printed for a tool parses back.
  int64_t elideElementsOver = -1;
};

void printGraph(const Graph &g, std::ostream &os, const PrintOptions &opts = {});
std::string printGraph(const Graph &g, const PrintOptions &opts = {});

} // namespace nnc
