// lowerNode(): dispatch through the lowering table.
#include "LowerUtil.h"
#include "Lowerers.h"

namespace nnc {

namespace {
const lower::LowererTable &table() {
  static const lower::LowererTable t = [] {
    lower::LowererTable t;
    lower::registerElementwiseLowerers(t);
    lower::registerDataMovementLowerers(t);
    lower::registerReductionAndNNLowerers(t);
    lower::registerCompositeLowerers(t);
    lower::registerAttentionLowerers(t);
    lower::registerLayoutLowerers(t);
    lower::registerWinogradLowerers(t);
    return t;
  }();
  return t;
}
const lower::TunableLowererTable &tunableTable() {
  static const lower::TunableLowererTable t = [] {
    lower::TunableLowererTable t;
    lower::registerTunableLowerers(t);
    lower::registerTunableLayoutLowerers(t);
    return t;
  }();
  return t;
}
} // namespace

bool lowersDataDependentResults(const Node &node) {
  // The lowerers that declare KernelBuilder::dynamicResult.
  return node.kind() == OpKind::NonZero;
}

bool isStorageView(const Node &node) {
  if (!lower::isCopyOp(node.kind()) || node.numResults() != 1 || !node.operand(0))
    return false;
  const Value *in = node.operand(0), *out = node.result(0);
  std::optional<Extents> ie = staticExtents(in->shape()), oe = staticExtents(out->shape());
  return in->dtype() == out->dtype() && ie && oe && lower::numElementsOf(*ie) ==
                                                      lower::numElementsOf(*oe);
}

bool canLowerNode(const Node &node) { return table().count(node.kind()) != 0; }

Expected<std::vector<kir::Kernel>> lowerNode(const Node &node, const std::string &namePrefix) {
  return lowerNode(node, namePrefix, tuning::LowerOptions{});
}

Expected<std::vector<kir::Kernel>> lowerNode(const Node &node, const std::string &namePrefix,
                                             const tuning::LowerOptions &opts) {
  auto it = table().find(node.kind());
  if (it == table().end())
    return node.error("no CPU code generation for op '{}' yet", node.opName());
  for (Value *v : node.operands())
    if (v && !isStatic(v->shape()))
      return node.error("operand %{} has a symbolic shape {}; specialize shapes first",
                        v->name(), v->type().str());
  auto tunable = tunableTable().find(node.kind());
  if (tunable != tunableTable().end())
    return tunable->second(node, namePrefix, &opts);
  return it->second(node, namePrefix);
}

} // namespace nnc
