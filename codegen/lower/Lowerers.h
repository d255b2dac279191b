// The per-op lowering table behind lowerNode(). Each family of ops registers its lowerers
// from its own file (Elementwise.cpp, DataMovement.cpp, Reductions.cpp, NN.cpp,
// Composite.cpp).
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "nnc/codegen/Lowering.h"

namespace nnc::lower {

/// Lowers one node (static shapes). `prefix` starts every kernel name.
using Lowerer =
    std::function<Expected<std::vector<kir::Kernel>>(const Node &node, const std::string &prefix)>;
using LowererTable = std::map<OpKind, Lowerer>;
/// A lowerer with tunable kernels: takes the tuning options (null: defaults).
using TunableLowerer = std::function<Expected<std::vector<kir::Kernel>>(
    const Node &node, const std::string &prefix, const tuning::LowerOptions *opts)>;
using TunableLowererTable = std::map<OpKind, TunableLowerer>;

void registerElementwiseLowerers(LowererTable &t); // every elementwise op, cast
void registerDataMovementLowerers(LowererTable &t);
/// The ops whose result is operand 0's bytes unchanged (reshape and friends), lowered to a
/// copy kernel; the runtime may instead bind the result to the operand's storage.
bool isCopyOp(OpKind k);
void registerReductionAndNNLowerers(LowererTable &t);
void registerCompositeLowerers(LowererTable &t);
void registerAttentionLowerers(LowererTable &t); // the Attention op (Attention.cpp)
void registerLayoutLowerers(LowererTable &t); // blocked channel layout (Layout.cpp)
void registerWinogradLowerers(LowererTable &t);             // winograd_input/output (Winograd.cpp)
void registerTunableLayoutLowerers(TunableLowererTable &t); // conv_nchwc (Layout.cpp)
/// The tuning space of conv_nchwc's register tiles (Layout.cpp).
const tuning::Space &convNchwcCpuSpace();
void registerTunableLowerers(TunableLowererTable &t); // matmul, conv (NN.cpp)

} // namespace nnc::lower
