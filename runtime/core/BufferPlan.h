// The buffer planner behind Executable: liveness intervals in, arena offsets out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nnc/runtime/BufferPlan.h"
#include "nnc/support/Error.h"

namespace nnc {

/// One intermediate buffer to place: its size and live range over the launch order.
struct BufferRequest {
  std::string name;
  int64_t bytes = 0;
  int firstUse = 0; ///< Launch index that writes it first.
  int lastUse = 0;  ///< Launch index that reads it last (>= firstUse).
  /// Index of an earlier request whose storage this one takes over in place (that buffer's
  /// last use is this one's first use, and the sizes are equal), or -1.
  int reuses = -1;
};

/// Alignment of every offset in the arena.
constexpr int64_t kArenaAlignment = 64;

/// Plans `requests` into one arena.
///  1. Requests joined by in-place reuse form one storage group whose live range is the union
///     of theirs.
///  2. Groups are sorted by size (descending), then first use, then name, so the plan is
///     deterministic.
///  3. Each group goes at the lowest 64-byte aligned offset that does not overlap any group
///     already placed whose live range overlaps its own.
/// The lower bound is the largest total size of groups live at one launch step; the
/// unplanned total is the sum of all request sizes.
BufferPlan planBuffers(const std::vector<BufferRequest> &requests);

} // namespace nnc
