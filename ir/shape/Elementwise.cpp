// Shape rules of elementwise ops, constant and cast.
#include "ShapeRules.h"

#include "nnc/ir/ShapeUtils.h"

namespace nnc::shape {

Expected<std::vector<TensorType>> inferElementwise(const Node &node) {
  const OpInfo &info = node.info();
  if (node.numOperands() != static_cast<size_t>(info.arity))
    return node.error("expects {} operands, got {}", info.arity, node.numOperands());
  for (size_t i = 0; i < node.numOperands(); ++i)
    if (!node.operand(i))
      return node.error("operand {} is missing", i);
  // select's condition is bool; the others share the value dtype.
  size_t first = node.kind() == OpKind::Select ? 1 : 0;
  if (node.kind() == OpKind::Select && node.operand(0)->dtype() != DType::Bool)
    return node.error("condition must be bool, got {}", dtypeName(node.operand(0)->dtype()));
  DType t = node.operand(first)->dtype();
  for (size_t i = first; i < node.numOperands(); ++i)
    if (node.operand(i)->dtype() != t)
      return node.error("operand dtypes differ: {} and {}", dtypeName(t),
                        dtypeName(node.operand(i)->dtype()));
  if (!typeClassAccepts(info.operandTypes, t))
    return node.error("operands must have {}, got {}", typeClassName(info.operandTypes),
                      dtypeName(t));
  Shape s = node.operand(0)->shape();
  for (size_t i = 1; i < node.numOperands(); ++i) {
    Expected<Shape> b = broadcastShapes(s, node.operand(i)->shape(), *node.graph());
    if (!b)
      return b.takeError().withContext(node.describe());
    s = *b;
  }
  DType rt = info.resultClass == ResultClass::BoolResult ? DType::Bool : t;
  return std::vector<TensorType>{TensorType(rt, s)};
}

Expected<std::vector<TensorType>> inferConstant(const Node &node) {
  const Tensor &t = node.getTensor("value");
  if (t.isNull())
    return node.error("value is an empty tensor");
  return std::vector<TensorType>{t.type()};
}

Expected<std::vector<TensorType>> inferCast(const Node &node) {
  return std::vector<TensorType>{TensorType(node.getDType("to"), node.operand(0)->shape())};
}

} // namespace nnc::shape
