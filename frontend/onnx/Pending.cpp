// TEMPORARY scaffolding: weak fallbacks for lowering groups not yet written.
#include "onnx/Lowering.h"

namespace nnc::onnxfe {
__attribute__((weak)) void registerElementwiseLowerings(LoweringTable &) {}
__attribute__((weak)) void registerTensorLowerings(LoweringTable &) {}
__attribute__((weak)) void registerReductionLowerings(LoweringTable &) {}
__attribute__((weak)) void registerNNLowerings(LoweringTable &) {}
} // namespace nnc::onnxfe
