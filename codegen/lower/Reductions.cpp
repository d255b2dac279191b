// Lowerers of one op family (being written).
#include "Lowerers.h"

namespace nnc::lower {
void registerReductionAndNNLowerers(LowererTable &) {}
} // namespace nnc::lower
