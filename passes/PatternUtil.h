// Helpers of the passes that match multi-node patterns (recognize-layer-norm,
// recognize-rms-norm, layout-nchwc, winograd): single users, scalar constants, trailing
// reductions, window attributes.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "nnc/ir/Graph.h"

namespace nnc::pattern {

/// Ints attribute `name` of `n`, or `count` copies of `dflt` when it is absent or empty (the
/// strides, dilations and pads of a window op).
std::vector<int64_t> intsOr(const Node &n, const char *name, size_t count, int64_t dflt);

/// The single node that uses `v`, or null (no user, several users, or a graph output). A node
/// that uses v twice (mul(d, d)) counts once.
Node *onlyUser(const Graph &g, const Value *v);

/// Erases constant `c` when nothing uses its result any more (a pass that replaced a large
/// weight by a transformed copy frees the original at once, instead of holding both until the
/// next dce: the peak memory of a compile). Returns true when it erased it.
bool eraseIfUnusedConstant(Graph &g, Node *c);

/// The operand of binary `n` that is not `v` (null when neither or both are v).
Value *otherOperand(const Node *n, const Value *v);

/// The value of a one-element float constant, if `v` is one.
std::optional<double> scalarConstant(const Value *v);

/// True when `v` is a constant whose rank does not exceed `normRank` (so it broadcasts over
/// the trailing normalized dims only).
bool isTrailingParameter(const Value *v, int64_t normRank);

/// The first axis of a keepdims reduce_mean over the trailing axes [axis, rank), or -1.
int64_t trailingReduceMeanAxis(const Node &r);

/// A constant of ones (f32 or f64) over x's dims [axis, rank), inserted before `before`;
/// null when one of those dims is symbolic.
Value *onesOverTrailingDims(Graph &g, const Value *x, int64_t axis, Node *before,
                            const std::string &name);

/// Calls `match` on every node until it returns true (it rewrote the graph), then starts
/// again on a fresh node list, until a whole walk matches nothing. Returns the matches.
int64_t matchToFixedPoint(Graph &g, const std::function<bool(Node *)> &match);

/// A layout pass's propagation: offers each user of `from`'s result (`from` converts a value
/// out of the layout) to `move`, which moves the user into the layout and returns the
/// conversion out of it that now feeds the user's users (offered in turn), or null to leave it.
Error propagateToUsers(Graph &g, Node *from, const std::function<Expected<Node *>(Node *)> &move);

/// Points the uses of `y` at `replacement`'s result, which takes y's name, and erases
/// `chain` (the nodes that computed y, in graph order; all unused once y is replaced).
void replaceChain(Graph &g, const std::vector<Node *> &chain, Value *y, Node *replacement);

} // namespace nnc::pattern
