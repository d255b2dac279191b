// The per-op table of generic lowerers behind lowerNode(), used when no kernel template
// (Templates.h) applies. Each family of ops registers its lowerers from its own file
// (Elementwise.cpp, DataMovement.cpp, Indexing.cpp, Reductions.cpp, NN.cpp, Conv.cpp, Pool.cpp,
// Composite.cpp, Layout.cpp).
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

void registerElementwiseLowerers(LowererTable &t); // every elementwise op, cast
void registerDataMovementLowerers(LowererTable &t);
/// Gather, gather_elements, gather_nd, scatter_elements and scatter_nd (Indexing.cpp).
void registerIndexingLowerers(LowererTable &t);
/// The ops whose result is operand 0's bytes unchanged (reshape and friends), lowered to a
/// copy kernel; the runtime may instead bind the result to the operand's storage.
bool isCopyOp(OpKind k);
void registerReductionAndNNLowerers(LowererTable &t);
void registerCompositeLowerers(LowererTable &t);
/// The blocked channel layout's copies (Layout.cpp; conv_nchwc is a template).
void registerLayoutLowerers(LowererTable &t);
/// True for a fusion group that holds views (passes/FuseViews.cpp): lowerViewGroup runs it.
bool isViewGroup(const LoweringUnit &u);
/// One kernel for a group with views (ViewFusion.cpp): the views' index maps composed into
/// the loads of the group's inputs.
Expected<std::vector<kir::Kernel>> lowerViewGroup(const LoweringUnit &u, const std::string &prefix);
/// One kernel whose result is `node`'s operand 0 seen with extents `view`, transposed by
/// `perm` (out dim i is view dim perm[i]) and read back in row-major order; a transpose of
/// the two innermost moving dims runs in tiles (permuteSchedule) that LLVM transposes in
/// registers (DataMovement.cpp).
std::vector<kir::Kernel> permuteKernel(const Node &node, const std::string &prefix,
                                       const Extents &view, const std::vector<int64_t> &perm);
/// The tuning space of conv_nchwc's register tiles (Layout.cpp).
const tuning::Space &convNchwcCpuSpace();

} // namespace nnc::lower
