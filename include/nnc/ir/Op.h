// Op kinds and the per-op information generated from Ops.def.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "nnc/ir/Attribute.h"
#include "nnc/ir/Shape.h"
#include "nnc/support/Error.h"

namespace nnc {

class Node;

enum class OpKind : uint16_t {
#define NNC_ELEMENTWISE(Id, ...) Id,
#define NNC_OP(Id, ...) Id,
#include "nnc/ir/Ops.def"
};

/// Which dtypes an elementwise op accepts.
enum class TypeClass : uint8_t { Float, Numeric, Signed, Int, Unsigned, Bool, Any };
/// Whether an elementwise op's result has its operands' dtype or is bool.
enum class ResultClass : uint8_t { Same, BoolResult };

struct AttrSpec {
  const char *name;
  AttrKind kind;
  bool required;
};

/// Computes the result types of `node` from its operands' types, its attributes and the
/// values of operands produced by `constant` nodes. Rejects invalid operands and attributes
/// with an Error that names the node.
using ShapeFn = Expected<std::vector<TensorType>> (*)(const Node &node);

struct OpInfo {
  OpKind kind;
  std::string_view name;
  int minOperands;
  int maxOperands; ///< -1: variadic.
  int minResults;
  int maxResults; ///< -1: variable.
  std::vector<AttrSpec> attrs;
  std::string_view doc;
  ShapeFn infer;
  bool elementwise = false;
  int arity = 0; ///< Elementwise ops only.
  TypeClass operandTypes = TypeClass::Any;
  ResultClass resultClass = ResultClass::Same;
  /// Elementwise ops that are one C99 <math.h> function: its name (Ops.def's libm column;
  /// `f` appended for f32), which every backend calls; empty for the others.
  std::string_view libm = {};

  const AttrSpec *findAttr(std::string_view n) const;
};

const OpInfo &opInfo(OpKind kind);
/// Looks up an op by its text-IR name ("conv").
std::optional<OpKind> lookupOp(std::string_view name);
/// Every op, in table order.
const std::vector<OpInfo> &allOps();
/// True when `t` belongs to the type class.
bool typeClassAccepts(TypeClass c, DType t);
const char *typeClassName(TypeClass c);

} // namespace nnc
