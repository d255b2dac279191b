// Shape rules of the reductions, arg-reductions, cumsum/cumprod and topk.
#include "ShapeRules.h"

#include "nnc/ir/ShapeUtils.h"

namespace nnc::shape {
namespace {

Expected<const Value *> dataOperand(const Node &node, bool allowBool) {
  const Value *x = node.operand(0);
  if (!x)
    return node.error("operand 0 is missing");
  DType t = x->dtype();
  if (!isNumeric(t) && !(allowBool && t == DType::Bool))
    return node.error("operand must have a numeric type{}, got {}", allowBool ? " or bool" : "",
                      dtypeName(t));
  return x;
}

Expected<std::vector<TensorType>> inferReduce(const Node &node, bool allowBool) {
  NNC_ASSIGN_OR_RETURN(const Value *x, dataOperand(node, allowBool));
  int64_t rank = x->rank();
  NNC_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                       normalizeAxes(node.getInts("axes"), rank, node, "axes"));
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes)
    reduced[a] = true;
  bool keepdims = node.getInt("keepdims") != 0;
  Shape s;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      s.push_back(x->shape()[d]);
    else if (keepdims)
      s.push_back(Dim(1));
  }
  return std::vector<TensorType>{TensorType(x->dtype(), s)};
}

Expected<std::vector<TensorType>> inferArg(const Node &node) {
  NNC_ASSIGN_OR_RETURN(const Value *x, dataOperand(node, false));
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x->rank(), node));
  const Dim &d = x->shape()[axis];
  if (d.isStatic() && d.value() == 0)
    return node.error("cannot take the index of an extremum over axis {} of size 0", axis);
  bool keepdims = node.getInt("keepdims") != 0;
  Shape s;
  for (int64_t i = 0; i < x->rank(); ++i) {
    if (i != axis)
      s.push_back(x->shape()[i]);
    else if (keepdims)
      s.push_back(Dim(1));
  }
  return std::vector<TensorType>{TensorType(DType::I64, s)};
}

} // namespace

Expected<std::vector<TensorType>> inferReduceSum(const Node &node) {
  return inferReduce(node, false);
}
Expected<std::vector<TensorType>> inferReduceMean(const Node &node) {
  return inferReduce(node, false);
}
Expected<std::vector<TensorType>> inferReduceProd(const Node &node) {
  return inferReduce(node, false);
}
Expected<std::vector<TensorType>> inferReduceMax(const Node &node) {
  return inferReduce(node, true);
}
Expected<std::vector<TensorType>> inferReduceMin(const Node &node) {
  return inferReduce(node, true);
}
Expected<std::vector<TensorType>> inferArgMax(const Node &node) { return inferArg(node); }
Expected<std::vector<TensorType>> inferArgMin(const Node &node) { return inferArg(node); }

Expected<std::vector<TensorType>> inferCumSum(const Node &node) {
  NNC_ASSIGN_OR_RETURN(const Value *x, dataOperand(node, false));
  NNC_TRY(normalizeAxis(node.getInt("axis"), x->rank(), node).takeError());
  return std::vector<TensorType>{x->type()};
}
Expected<std::vector<TensorType>> inferCumProd(const Node &node) { return inferCumSum(node); }

Expected<std::vector<TensorType>> inferTopK(const Node &node) {
  NNC_ASSIGN_OR_RETURN(const Value *x, dataOperand(node, false));
  if (x->rank() == 0)
    return node.error("operand 0 must have rank >= 1");
  NNC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.getInt("axis"), x->rank(), node));
  const Value *kv = node.operand(1);
  if (!kv)
    return node.error("operand 1 (k) is missing");
  if (!isInteger(kv->dtype()))
    return node.error("k must be an integer tensor, got {}", dtypeName(kv->dtype()));
  if (kv->rank() > 1 || (kv->rank() == 1 && kv->shape()[0].isStatic() &&
                         kv->shape()[0].value() != 1))
    return node.error("k must hold one element, got shape {}", shapeStr(kv->shape()));
  Shape s = x->shape();
  const Dim &axisDim = s[axis];
  if (const Tensor *kt = node.constantOperand(1)) {
    if (kt->numElements() != 1)
      return node.error("k must hold one element, got {}", kt->numElements());
    int64_t k = kt->elementAsInt(0);
    if (k < 0)
      return node.error("k must be non-negative, got {}", k);
    if (axisDim.isStatic() && k > axisDim.value())
      return node.error("k = {} is larger than axis {} of size {}", k, axis, axisDim.value());
    s[axis] = Dim(k);
  } else {
    s[axis] = node.graph()->freshDim();
  }
  return std::vector<TensorType>{TensorType(x->dtype(), s), TensorType(DType::I64, s)};
}

} // namespace nnc::shape
