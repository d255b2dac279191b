// Graph renderings for `nnc inspect`: Graphviz dot and JSON.
#pragma once

#include <ostream>

#include "nnc/ir/Graph.h"

namespace nnc::tools {

void printDot(const Graph &g, std::ostream &os);
void printJson(const Graph &g, std::ostream &os);

} // namespace nnc::tools
