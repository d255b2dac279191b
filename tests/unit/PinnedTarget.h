// A CPU target for tests that pin lowering decisions (tile shapes, reduction passes, merged
// rows, kernel counts): the level's registers with fixed caches rather than the host's, so
// the expectations hold on whatever machine runs them (a Zen 5's 48 KiB L1d, an Intel's
// 2 MiB L2).
#pragma once

#include "nnc/ir/CpuTarget.h"

namespace nnc::pinned {

/// `t` with the caches of the 2-core EPYC the expectations were measured on: L1d 32 KiB,
/// L2 512 KiB, L3 32 MiB.
inline CpuTarget withPinnedCaches(CpuTarget t) {
  t.l1dBytes = 32 << 10;
  t.l2Bytes = 512 << 10;
  t.l3Bytes = 32 << 20;
  t.streamingStoreBytes = 32 << 20;
  return t;
}

/// `level` (its registers and vector width) with pinned caches.
inline CpuTarget pinnedCpuTarget(CpuTarget::Level level) {
  return withPinnedCaches(CpuTarget::forLevel(level));
}

} // namespace nnc::pinned
