// Counters the fusion passes report with --stats: code-generation units (a node, or a fusion
// group run as one) and the bytes of the intermediate values groups keep out of memory.
#pragma once

#include <cstdint>

#include "nnc/ir/Graph.h"

namespace nnc::fusion {

/// Non-constant nodes outside multi-member groups plus multi-member groups: what the CPU
/// executable lowers one by one (each to one or more kernels).
int64_t countUnits(const Graph &g);

/// Bytes of the non-root members' results of multi-member groups (values with static shapes).
int64_t intermediateBytes(const Graph &g);

/// A group id not used in `g` yet.
int64_t freshGroupId(const Graph &g);

} // namespace nnc::fusion
