// Lowering of graph nodes (with static shapes) to kernels of the kernel-level IR.
#pragma once

#include <vector>

#include "nnc/ir/FusionGroup.h"
#include "nnc/ir/Graph.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/ir/Kernel.h"

namespace nnc {

/// Lowers one node, all of whose operand and result shapes are static, to one or more
/// kernels that run in order: with the first template of the target's registry that applies
/// (docs/fast-paths.md), else the op's generic lowerer. Each kernel's buffers are bound to the
/// node's operands, results and scratch buffers (BufferDecl::role/index); an absent optional
/// operand has no buffer. Kernel names start with `namePrefix` and are unique within the node. Each
/// kernel gets a default Schedule chosen from its shape (the tuner may replace it). Fails (naming
/// the node) when the op or a dtype is not supported by code generation. The kernels are for
/// opts.cpu (and opts.gpu when set); tunable kernels (matmul, conv) take their configs from
/// `opts.configs` (else heuristic defaults) and report themselves through `opts.onTunable`.
Expected<std::vector<kir::Kernel>> lowerNode(const Node &node, const std::string &namePrefix,
                                             const tuning::LowerOptions &opts);

/// True when lowerNode produces this node's results even where a dim of theirs depends on
/// the data (NonZero, NonMaxSuppression, Unique): the kernels write the extent to a
/// BufferRole::Extent buffer.
bool lowersDataDependentResults(const Node &node);

/// True when the node's result holds exactly operand 0's bytes (reshape, flatten, squeeze,
/// unsqueeze with static shapes; bitcast but to bool): lowerNode gives a copy kernel, but an
/// executable may bind the result to the operand's storage and launch nothing.
bool isStorageView(const Node &node);

/// True when lowerNode supports this node (for `nnc check --target cpu` and statistics).
bool canLowerNode(const Node &node);

/// A kernel template of a code target's registry (codegen/lower/Templates.h), for listings.
struct TemplateInfo {
  std::string name;             ///< "conv.im2col_gemm".
  std::vector<std::string> ops; ///< The op names it lowers (empty for a group template).
  bool group = false;           ///< It lowers a fusion group.
  std::string summary;
  std::string space; ///< Its tuning space's kind, or "".
};
/// The templates of `target`'s registry, in the order lowering tries them.
std::vector<TemplateInfo> kernelTemplates(tuning::CodeTarget target);

/// One unit of code generation: a node, or a fusion group (ir/FusionGroup.h) that runs as
/// one kernel (or, with an anchor, as the anchor's kernels with the group's elementwise work
/// in their output loop). Its kernels bind BufferRole::Operand k to operands[k] and
/// BufferRole::Result k to node->result(k).
struct LoweringUnit {
  const Node *node = nullptr;        ///< The node, or the group's root.
  std::vector<Value *> operands;     ///< The node's operands, or the group's inputs.
  std::vector<const Node *> members; ///< A group's members (graph order); empty for a node.
  const Node *anchor = nullptr;      ///< A group's matmul/conv, or null.
  const Node *softmax = nullptr;     ///< An attention group's softmax, or null.
};

/// The units of `g` in execution order (constants excluded): fusion groups of several
/// members become one unit at the position of their root. Fails on malformed groups.
Expected<std::vector<LoweringUnit>> loweringUnits(const Graph &g);

/// Lowers a unit (static shapes) like lowerNode; a group becomes one kernel, or the anchor's
/// kernels with the group's elementwise expression in the stores of the anchor's result.
/// `opts` carries the target and the tuned configs of tunable nodes and anchors.
Expected<std::vector<kir::Kernel>> lowerUnit(const LoweringUnit &u, const std::string &namePrefix,
                                             const tuning::LowerOptions &opts);

} // namespace nnc
