// The buffer plan of an executable: where each intermediate buffer lives in the one arena.
// Part of the runtime core (nnc_runtime_core), which a compiled model runs on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnc {

/// Where each intermediate buffer lives in the arena, from liveness over the launch order.
/// Deterministic: the same graph gives the same plan.
struct BufferPlan {
  struct Entry {
    std::string name; ///< The value (or "node/scratchK") the buffer holds.
    int64_t bytes;
    int64_t offset;     ///< In the arena, 64-byte aligned.
    int firstUse;       ///< Launch index that writes it first.
    int lastUse;        ///< Launch index that reads it last.
    std::string reuses; ///< Name of the buffer it shares storage with in place, or "".
  };
  std::vector<Entry> entries;
  int64_t peakBytes = 0;       ///< Arena size.
  int64_t lowerBoundBytes = 0; ///< Largest total of simultaneously live buffers.
  int64_t unplannedBytes = 0;  ///< All intermediates summed (one allocation each).
  std::string str() const;     ///< A table for `nnc inspect --plan`.
  std::string json() const;    ///< With peak_bytes, lower_bound_bytes, unplanned_bytes.
};

} // namespace nnc
