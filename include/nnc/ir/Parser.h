// The text form of the IR: parsing.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "nnc/ir/Graph.h"

namespace nnc {

/// Parses one graph. Errors read "FILE:LINE:COL: message". Result types written in the
/// text are kept as written (the verifier checks them against the shape rules).
Expected<std::unique_ptr<Graph>> parseGraph(std::string_view text,
                                            const std::string &filename = "<input>");
/// Reads and parses a .nir file.
Expected<std::unique_ptr<Graph>> parseGraphFile(const std::string &path);

} // namespace nnc
