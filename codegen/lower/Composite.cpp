// Lowerers of one op family (being written).
#include "Lowerers.h"

namespace nnc::lower {
void registerCompositeLowerers(LowererTable &) {}
} // namespace nnc::lower
