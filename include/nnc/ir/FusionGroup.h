// Fusion groups: sets of nodes that code generation runs as one kernel, marked in the graph IR
// by the integer attribute `fusion_group` that every op accepts (so the text IR round-trips them).
//
// A group is a tree (or DAG) of elementwise nodes (and casts) whose one result leaves the
// group: the root, the last member in graph order. Every other member's result is used only
// by members and is not a graph output, so it needs no buffer. A group may also hold one
// anchor, a matmul or conv that produces a value of the root's shape: the elementwise members
// then run in the anchor's output loop (an epilogue) instead of in a loop of their own.
//
// A group without an anchor may also hold views: data-movement ops whose every result element
// is one operand element at static index math (transpose, the reshapes, slice and gather with
// constant indices, concat, the blocked-layout conversions). Code generation composes their
// index maps into the loads of the group's inputs, so a chain like from_nchwc -> concat ->
// reshape -> transpose -> slice -> to_nchwc (a channel shuffle) is one pass over the data.
// In such a group members may have shapes other than the root's.
//
// An attention group ends with softmax (over the last axis) of the epilogue's result and a
// matmul of that softmax (its operand 0) as the root: matmul, scale/mask, softmax, matmul run
// row by row, so the score matrix is never materialized in full.
#pragma once

#include <cstdint>
#include <vector>

#include "nnc/ir/Graph.h"

namespace nnc {

/// The attribute that assigns a node to a fusion group (an i64 id; any op may carry it).
inline constexpr const char *kFusionGroupAttr = "fusion_group";

struct FusionGroup {
  int64_t id = 0;
  std::vector<Node *> members; ///< In graph order.
  Node *root = nullptr;        ///< The last member; its result is the group's result.
  Node *anchor = nullptr;      ///< The matmul/conv whose output loop runs the others, or null.
  Node *softmax = nullptr;     ///< An attention group's softmax (the root is its matmul).
  /// The values members read that the group does not compute, in first-use order (graph
  /// inputs, constants and other nodes' results; the anchor's operands included).
  std::vector<Value *> inputs;
  bool hasViews = false; ///< A member is a view (isFusibleView).
};

/// True for the nodes a group may hold besides its anchor: elementwise ops, cast, quantize and
/// dequantize (pointwise with numpy broadcasting, see lower::pointwiseExpr).
bool isFusibleElementwise(const Node &n);
/// True for the views a group without an anchor may hold: transpose, reshape, flatten,
/// squeeze, unsqueeze, to_nchwc, from_nchwc, concat, and slice or gather whose index operands
/// are constants (a gather's a scalar in range).
bool isFusibleView(const Node &n);
/// A concat inside a group (not its root) reads every operand at each element (a select picks
/// one), so it joins only with few operands; a root concat writes each operand's part in a
/// loop of its own.
inline constexpr size_t kMaxFusedConcatOperands = 4;
/// The operands of a view that carry data (the others are its constant index operands).
std::vector<size_t> viewDataOperands(const Node &n);
/// True for the views that only reinterpret their operand's extents (the runtime aliases
/// them when they stand alone): reshape, flatten, squeeze, unsqueeze.
bool isReshapeView(const Node &n);

/// True for the ops that may anchor a group (each of their templates applies the group's
/// epilogue where it writes a final element: codegen/lower/Epilogue.h).
bool isEpilogueAnchor(const Node &n);

/// The groups of `g`, ordered by the position of their roots. Fails, naming a node, when a
/// group is malformed (a member's result escapes, a member of an unsupported op, two anchors,
/// an anchor whose result is not the root's shape or that reads a member).
Expected<std::vector<FusionGroup>> fusionGroups(const Graph &g);

/// The group id of `n`, or -1 when it is not in a group.
int64_t fusionGroupOf(const Node &n);

/// Gives the groups of `copies` (nodes just copied into `g` from a body, an If's branch or a
/// loop step, whose group ids are the body's own) ids no other node of `g` has, one new id per
/// id they had: copied groups stay whole and never merge with the graph's groups of the same
/// number, nor with those of another copy of the same body.
void freshFusionGroups(Graph &g, const std::vector<Node *> &copies);

} // namespace nnc
