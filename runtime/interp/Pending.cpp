// TEMPORARY scaffolding: weak fallbacks for kernels not yet written.
#include "interp/Kernels.h"

namespace nnc::interp {
__attribute__((weak)) Results evalConstant(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalCast(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalShapeOf(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalReshape(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalFlatten(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalSqueeze(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalUnsqueeze(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalTranspose(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalExpand(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalConcat(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalSplit(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalSlice(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalPad(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalTile(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalGather(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalGatherElements(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalGatherND(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalScatterElements(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalScatterND(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalRange(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalConstantOfShape(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalOneHot(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalEyeLike(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalTrilu(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalNonZero(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalDepthToSpace(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalSpaceToDepth(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalReduceSum(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalReduceMean(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalReduceMax(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalReduceMin(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalReduceProd(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalArgMax(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalArgMin(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalCumSum(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalTopK(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalMatMul(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalEinsum(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalConv(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalConvTranspose(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalMaxPool(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalAvgPool(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalLRN(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalResize(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalSoftmax(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalLogSoftmax(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalHardmax(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalLayerNorm(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalRMSNorm(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalGroupNorm(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalInstanceNorm(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalBatchNorm(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalLpNorm(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalAttention(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalRotaryEmbedding(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
__attribute__((weak)) Results evalElementwise(const Node &node, const Operands &) {
  return node.error("interpreter kernel not implemented");
}
} // namespace nnc::interp
