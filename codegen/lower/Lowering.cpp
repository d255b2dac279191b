// lowerNode(): the first applicable kernel template (Templates.cpp), else the op's generic
// lowerer from the lowering table.
#include "LowerUtil.h"
#include "Lowerers.h"
#include "Templates.h"

namespace nnc {

namespace {
const lower::LowererTable &table() {
  static const lower::LowererTable t = [] {
    lower::LowererTable t;
    lower::registerElementwiseLowerers(t);
    lower::registerDataMovementLowerers(t);
    lower::registerIndexingLowerers(t);
    lower::registerReductionAndNNLowerers(t);
    lower::registerCompositeLowerers(t);
    lower::registerLayoutLowerers(t);
    return t;
  }();
  return t;
}

/// True when some template of the CPU's registry lowers nodes of kind `k`.
bool hasTemplateFor(OpKind k) {
  for (const lower::KernelTemplate &t : lower::templateRegistry(tuning::CodeTarget::Cpu))
    if (std::find(t.ops.begin(), t.ops.end(), k) != t.ops.end())
      return true;
  return false;
}
} // namespace

bool lowersDataDependentResults(const Node &node) {
  // The lowerers that declare KernelBuilder::dynamicResult.
  return node.kind() == OpKind::NonZero || node.kind() == OpKind::NonMaxSuppression ||
         node.kind() == OpKind::Unique;
}

bool isStorageView(const Node &node) {
  bool bitcast = node.kind() == OpKind::BitCast;
  if ((!lower::isCopyOp(node.kind()) && !bitcast) || node.numResults() != 1 || !node.operand(0))
    return false;
  const Value *in = node.operand(0), *out = node.result(0);
  std::optional<Extents> ie = staticExtents(in->shape()), oe = staticExtents(out->shape());
  // A bitcast keeps the bytes, but for a bool result of other bytes (made 0 or 1).
  bool sameBytes =
      in->dtype() == out->dtype() ||
      (bitcast && dtypeSize(in->dtype()) == dtypeSize(out->dtype()) && out->dtype() != DType::Bool);
  return sameBytes && ie && oe && lower::numElementsOf(*ie) == lower::numElementsOf(*oe);
}

bool canLowerNode(const Node &node) {
  // A loop runs its body's kernels (the launch plan lowers the body as a graph of its own).
  if (node.kind() == OpKind::Scan)
    return true;
  return table().count(node.kind()) != 0 || hasTemplateFor(node.kind());
}

Expected<std::vector<kir::Kernel>> lowerNode(const Node &node, const std::string &namePrefix,
                                             const tuning::LowerOptions &opts) {
  // inline-if replaces every If whose condition is known or whose branches agree in type;
  // what is left has results whose shapes depend on the condition.
  if (node.kind() == OpKind::If)
    return node.error("the condition is only known at run time and the branches' results "
                      "differ in shape: it runs in stages (nnc run), not in one executable");
  auto it = table().find(node.kind());
  if (it == table().end() && !hasTemplateFor(node.kind()))
    return node.error("no CPU code generation for op '{}' yet", node.opName());
  for (Value *v : node.operands())
    if (v && !isStatic(v->shape()))
      return node.error("operand %{} has a symbolic shape {}; specialize shapes first",
                        v->name(), v->type().str());
  LoweringUnit u;
  u.node = &node;
  u.operands = node.operands();
  const lower::KernelTemplate *t = lower::chooseTemplate(u, opts);
  if (!t && it == table().end())
    return node.error("no kernel template applies and op '{}' has no generic lowering",
                      node.opName());
  return lower::lowerWithTemplate(t, u, namePrefix, opts, [&](const tuning::LowerOptions &) {
    return it->second(node, namePrefix);
  });
}

} // namespace nnc
