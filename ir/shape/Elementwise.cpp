// Shape rules of elementwise ops, constant, cast, bitcast, quantize and dequantize.
#include "ShapeRules.h"

#include "nnc/ir/Quantize.h"
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

Expected<std::vector<TensorType>> inferBitCast(const Node &node) {
  DType from = node.operand(0)->dtype(), to = node.getDType("to");
  if (dtypeBits(from) != dtypeBits(to))
    return node.error("cannot reinterpret {} ({} bits) as {} ({} bits): the bit widths differ",
                      dtypeName(from), dtypeBits(from), dtypeName(to), dtypeBits(to));
  return std::vector<TensorType>{TensorType(to, node.operand(0)->shape())};
}

namespace {

/// The numpy broadcast of the three operands of quantize / dequantize.
Expected<Shape> broadcastThree(const Node &node) {
  for (size_t i = 0; i < 3; ++i)
    if (node.numOperands() <= i || !node.operand(i))
      return node.error("operand {} is missing", i);
  Shape s = node.operand(0)->shape();
  for (size_t i = 1; i < 3; ++i) {
    Expected<Shape> b = broadcastShapes(s, node.operand(i)->shape(), *node.graph());
    if (!b)
      return b.takeError().withContext(node.describe());
    s = *b;
  }
  return s;
}

} // namespace

Expected<std::vector<TensorType>> inferQuantize(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Shape s, broadcastThree(node));
  DType xt = node.operand(0)->dtype(), st = node.operand(1)->dtype();
  DType zt = node.operand(2)->dtype();
  if (!isFloat(xt))
    return node.error("x must have a float dtype, got {}", dtypeName(xt));
  if (st != xt)
    return node.error("scale has dtype {}, x has {}: they must agree", dtypeName(st),
                      dtypeName(xt));
  if (!isQuantizedType(zt))
    return node.error("zero_point has dtype {}, which is not a quantized dtype (8- or 16-bit, "
                      "4- or 2-bit integers, f8 or f4e2m1)",
                      dtypeName(zt));
  int64_t sat = node.getInt("saturate", 1);
  if (sat != 0 && sat != 1)
    return node.error("saturate must be 0 or 1, got {}", sat);
  return std::vector<TensorType>{TensorType(zt, s)};
}

Expected<std::vector<TensorType>> inferDequantize(const Node &node) {
  NNC_ASSIGN_OR_RETURN(Shape s, broadcastThree(node));
  DType xt = node.operand(0)->dtype(), st = node.operand(1)->dtype();
  DType zt = node.operand(2)->dtype(), to = node.getDType("to");
  if (!isQuantizedType(xt) && xt != DType::I32)
    return node.error("x has dtype {}, which is not a quantized dtype", dtypeName(xt));
  if (zt != xt)
    return node.error("zero_point has dtype {}, x has {}: they must agree", dtypeName(zt),
                      dtypeName(xt));
  if (!isFloat(st))
    return node.error("scale must have a float dtype, got {}", dtypeName(st));
  if (!isFloat(to))
    return node.error("`to` must be a float dtype, got {}", dtypeName(to));
  return std::vector<TensorType>{TensorType(to, s)};
}

} // namespace nnc::shape
