// GpuTarget's limits and text (include/nnc/ir/GpuTarget.h). No device query here: the runtime
// fills it from the device it picked.
#include "nnc/ir/GpuTarget.h"

#include <algorithm>

#include <fmt/format.h>

namespace nnc {

int64_t GpuTarget::workGroupSize1D(int64_t items, int64_t wanted) const {
  int64_t limit = std::min({wanted, std::max<int64_t>(maxWorkGroupSize, 1),
                            std::max<int64_t>(maxWorkItemSizes[0], 1)});
  int64_t p = 1;
  while (p < items && p < limit)
    p *= 2;
  return std::max<int64_t>(1, std::min(p, limit));
}

GpuTarget GpuTarget::generic() {
  GpuTarget t;
  t.name = "generic";
  t.vendor = "any";
  t.localMemBytes = 32 << 10;
  t.maxWorkGroupSize = 256;
  t.maxWorkItemSizes = {256, 256, 64};
  t.computeUnits = 64;
  return t;
}

std::string GpuTarget::str() const {
  return fmt::format("{} '{}' ({}): {} CUs, {}K {}local, work-groups <= {} ({}x{}x{}), float "
                     "vectors {}{}{}",
                     type, name, vendor, computeUnits, localMemBytes >> 10,
                     localMemDedicated ? "" : "emulated ", maxWorkGroupSize, maxWorkItemSizes[0],
                     maxWorkItemSizes[1], maxWorkItemSizes[2], preferredFloatVector,
                     fp64 ? ", fp64" : "", fp16 ? ", fp16" : "");
}

} // namespace nnc
