// The OpInfo table, generated from Ops.def.
#include "nnc/ir/Op.h"

#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/Quantize.h"

#include "shape/ShapeRules.h"

namespace nnc {

namespace {
#define A(n, k, r) AttrSpec{#n, AttrKind::k, r}
constexpr bool Required = true;
constexpr bool Optional = false;
#define NNC_UNPAREN(...) __VA_ARGS__

/// Runs shape rule F and refuses a result it gives with a negative or nameless dim (a rule
/// that let an attribute or constant through unchecked, or whose arithmetic overflowed), so
/// such a type never reaches the graph.
template <ShapeFn F> Expected<std::vector<TensorType>> checkedInfer(const Node &node) {
  Expected<std::vector<TensorType>> types = F(node);
  if (!types)
    return types;
  for (const TensorType &t : *types)
    for (const Dim &d : t.shape)
      if (d.isSymbolic() && d.symbolName().empty())
        return node.error("result type {} has an invalid dimension (a negative or overflowing "
                          "size from its attributes or constant operands)",
                          t.str());
  return types;
}

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> t;
#define NNC_ELEMENTWISE(Id, name, ar, types, result, libmName, doc, formula)                       \
  {                                                                                                \
    OpInfo i{OpKind::Id, name, ar, ar, 1, 1, {}, doc,                                              \
             &checkedInfer<&shape::inferElementwise>};                                             \
    i.elementwise = true;                                                                          \
    i.arity = ar;                                                                                  \
    i.operandTypes = TypeClass::types;                                                             \
    i.resultClass = ResultClass::result;                                                           \
    i.libm = libmName;                                                                             \
    t.push_back(i);                                                                                \
  }
#define NNC_OP(Id, name, minIn, maxIn, minOut, maxOut, attrs, doc)                                 \
  t.push_back(OpInfo{OpKind::Id, name, minIn, maxIn, minOut, maxOut,                               \
                     std::vector<AttrSpec>{NNC_UNPAREN attrs}, doc, &checkedInfer<&shape::infer##Id>});
#include "nnc/ir/Ops.def"
  for (size_t k = 0; k < t.size(); ++k)
    NNC_ASSERT(static_cast<size_t>(t[k].kind) == k, "Ops.def order mismatch at {}", t[k].name);
  return t;
}
} // namespace

const std::vector<OpInfo> &allOps() {
  static const std::vector<OpInfo> table = buildTable();
  return table;
}

const OpInfo &opInfo(OpKind kind) { return allOps()[static_cast<size_t>(kind)]; }

std::optional<OpKind> lookupOp(std::string_view name) {
  for (const OpInfo &i : allOps())
    if (i.name == name)
      return i.kind;
  return std::nullopt;
}

const AttrSpec *OpInfo::findAttr(std::string_view n) const {
  for (const AttrSpec &a : attrs)
    if (n == a.name)
      return &a;
  // Every op may belong to a fusion group (ir/FusionGroup.h).
  static const AttrSpec fusionGroup{kFusionGroupAttr, AttrKind::Int, /*required=*/false};
  if (n == fusionGroup.name)
    return &fusionGroup;
  // Every op may say why it stayed in floating point between Q/DQ ops (ir/Quantize.h).
  static const AttrSpec qdqFallback{kQdqFallbackAttr, AttrKind::String, /*required=*/false};
  if (n == qdqFallback.name)
    return &qdqFallback;
  return nullptr;
}

bool typeClassAccepts(TypeClass c, DType t) {
  switch (c) {
  case TypeClass::Float: return isFloat(t);
  case TypeClass::Numeric: return isNumeric(t);
  case TypeClass::Signed: return isFloat(t) || isSignedInteger(t);
  case TypeClass::Int: return isInteger(t);
  case TypeClass::Unsigned: return isUnsignedInteger(t);
  case TypeClass::Bool: return t == DType::Bool;
  case TypeClass::Any: return !isStorageOnly(t);
  }
  return false;
}

const char *typeClassName(TypeClass c) {
  switch (c) {
  case TypeClass::Float: return "a float type";
  case TypeClass::Numeric: return "a numeric type";
  case TypeClass::Signed: return "a signed type";
  case TypeClass::Int: return "an integer type";
  case TypeClass::Unsigned: return "an unsigned integer type";
  case TypeClass::Bool: return "bool";
  case TypeClass::Any: return "an arithmetic type or bool";
  }
  return "?";
}

} // namespace nnc
