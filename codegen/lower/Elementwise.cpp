// Lowerers of one op family (being written).
#include "Lowerers.h"

namespace nnc::lower {
void registerElementwiseLowerers(LowererTable &) {}
} // namespace nnc::lower
