// Lowering of graph nodes (with static shapes) to kernels of the kernel-level IR.
#pragma once

#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/codegen/Tuning.h"
#include "nnc/ir/Kernel.h"

namespace nnc {

/// Lowers one node, all of whose operand and result shapes are static, to one or more
/// kernels that run in order. Each kernel's buffers are bound to the node's operands,
/// results and scratch buffers (BufferDecl::role/index); an absent optional operand has no
/// buffer. Kernel names start with `namePrefix` and are unique within the node. Each kernel
/// gets a default Schedule chosen from its shape (the tuner may replace it).
/// Fails (naming the node) when the op or a dtype is not supported by code generation.
Expected<std::vector<kir::Kernel>> lowerNode(const Node &node, const std::string &namePrefix);
/// lowerNode with tuning: tunable kernels (matmul, conv) take their configs from
/// `opts.configs` (else heuristic defaults) and report themselves through `opts.onTunable`.
Expected<std::vector<kir::Kernel>> lowerNode(const Node &node, const std::string &namePrefix,
                                             const tuning::LowerOptions &opts);

/// True when lowerNode supports this node (for `nnc check --target cpu` and statistics).
bool canLowerNode(const Node &node);

} // namespace nnc
