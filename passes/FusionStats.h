// Counters the fusion passes report with --stats: code-generation units (a node, or a fusion
// group run as one) and the bytes of the intermediate values groups keep out of memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nnc/ir/Graph.h"

namespace nnc::fusion {

/// Non-constant nodes outside multi-member groups plus multi-member groups: what the CPU
/// executable lowers one by one (each to one or more kernels).
int64_t countUnits(const Graph &g);

/// Bytes of the non-root members' results of multi-member groups (values with static shapes).
int64_t intermediateBytes(const Graph &g);

/// A group id not used in `g` yet.
int64_t freshGroupId(const Graph &g);

/// The units and intermediate bytes of a graph before a fusion pass, for the pass's
/// statistics after it: units-before, units-after and intermediate-bytes-removed.
class FusionCounters {
public:
  explicit FusionCounters(const Graph &g) : units_(countUnits(g)), bytes_(intermediateBytes(g)) {}
  std::map<std::string, int64_t> after(const Graph &g) const {
    return {{"units-before", units_},
            {"units-after", countUnits(g)},
            {"intermediate-bytes-removed", intermediateBytes(g) - bytes_}};
  }

private:
  int64_t units_, bytes_;
};

} // namespace nnc::fusion
