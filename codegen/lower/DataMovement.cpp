// Lowerers of one op family (being written).
#include "Lowerers.h"

namespace nnc::lower {
void registerDataMovementLowerers(LowererTable &) {}
} // namespace nnc::lower
