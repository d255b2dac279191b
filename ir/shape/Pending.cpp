// TEMPORARY scaffolding while the op set is filled in: weak fallbacks that report
// "not implemented". Deleted once every op has its real rule.
#include "ShapeRules.h"

namespace nnc::shape {
__attribute__((weak)) Expected<std::vector<TensorType>> inferConstant(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferCast(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferShapeOf(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferReshape(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferFlatten(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferSqueeze(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferUnsqueeze(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferTranspose(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferExpand(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferConcat(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferSplit(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferSlice(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferPad(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferTile(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferGather(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferGatherElements(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferGatherND(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferScatterElements(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferScatterND(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferRange(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferConstantOfShape(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferOneHot(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferEyeLike(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferTrilu(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferNonZero(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferDepthToSpace(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferSpaceToDepth(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferReduceSum(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferReduceMean(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferReduceMax(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferReduceMin(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferReduceProd(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferArgMax(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferArgMin(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferCumSum(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferTopK(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferMatMul(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferEinsum(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferConv(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferConvTranspose(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferMaxPool(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferAvgPool(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferLRN(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferResize(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferSoftmax(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferLogSoftmax(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferHardmax(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferLayerNorm(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferRMSNorm(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferGroupNorm(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferInstanceNorm(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferBatchNorm(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferLpNorm(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferAttention(const Node &node) {
  return node.error("shape rule not implemented");
}
__attribute__((weak)) Expected<std::vector<TensorType>> inferRotaryEmbedding(const Node &node) {
  return node.error("shape rule not implemented");
}
} // namespace nnc::shape
