// Reverse-mode autodiff as a graph transform: gradients() and the per-op gradient rules
// declared in Gradients.def (beside Ops.def).
#pragma once

#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"

namespace nnc {

/// Appends nodes to a graph for gradient rules and optimizers. The first failure is kept
/// (like GraphBuilder): every op after it returns null, so a rule needs no check per line.
class GradEmitter {
public:
  explicit GradEmitter(Graph &g) : g_(g) {}
  Graph &graph() { return g_; }
  bool ok() const { return !error_; }
  const Error &error() const { return error_; }
  /// Records `e` as the failure (if none is recorded yet); returns null for convenience.
  Value *fail(Error e);

  /// A node of `kind` with one result (its type from the shape rule); null after a failure.
  Value *op(OpKind kind, const std::vector<Value *> &operands, AttrMap attrs = {});
  /// A node with `numResults` results.
  std::vector<Value *> opMulti(OpKind kind, const std::vector<Value *> &operands, AttrMap attrs,
                               int numResults);
  Value *constant(const Tensor &t);
  /// A rank-0 constant of a float or integer dtype.
  Value *scalar(double v, DType t);
  Value *i64s(const std::vector<int64_t> &v);
  /// The extents of `v` as an i64 vector: a constant when static, else a `shape` node.
  Value *shapeOf(Value *v);
  /// Zeros of `v`'s type.
  Value *zerosLike(Value *v);

  Value *add(Value *a, Value *b) { return op(OpKind::Add, {a, b}); }
  Value *sub(Value *a, Value *b) { return op(OpKind::Sub, {a, b}); }
  Value *mul(Value *a, Value *b) { return op(OpKind::Mul, {a, b}); }
  Value *div(Value *a, Value *b) { return op(OpKind::Div, {a, b}); }
  Value *neg(Value *a) { return op(OpKind::Neg, {a}); }
  /// a * s for a double s (a constant of a's dtype).
  Value *mulScalar(Value *a, double s);
  Value *reshapeLike(Value *v, Value *like);
  /// transpose(v, perm), or a reshape where the permutation only moves extent-1 dims (a
  /// reshape costs nothing; a transpose copies).
  Value *transpose(Value *v, const std::vector<int64_t> &perm);
  /// Sums `g` over the axes that numpy broadcasting added or stretched to turn `target`'s
  /// shape into g's: the gradient of a broadcast operand.
  Value *sumTo(Value *g, Value *target);

private:
  Graph &g_;
  Error error_ = Error::success();
};

/// A gradient rule: given a node and the gradients of its results (null where a result does
/// not reach the loss), appends the gradient of each operand (null: none, e.g. an index
/// operand) and returns them in operand order.
using GradientRule = std::vector<Value *> (*)(GradEmitter &e, const Node &n,
                                              const std::vector<Value *> &dy);

/// The rule of `kind` (Gradients.def), or null when the op has none.
GradientRule gradientRule(OpKind kind);

/// Reverse-mode autodiff. Appends to `g` the nodes computing d loss / d v for every v in
/// `wrt` (graph inputs or any float values of g) and returns those values in wrt's order.
/// `loss` must be a float value of one element. Algorithm:
///  1. Mark the values that depend on some wrt value (forward walk) and those the loss
///     depends on (backward walk); only nodes in both are differentiated. Loops among them
///     are made to return what their gradient reads (saveScanSteps) and the marks redone.
///  2. Seed d loss / d loss = 1; walk the marked nodes in reverse order, calling each op's
///     rule on its results' gradients and summing the contributions to each operand (when
///     the operand's producer is reached: matmul contributions join into one matmul over
///     the concatenated inner dims, and zero pads that tile an axis into one concat).
///  3. A wrt value the loss does not depend on gets zeros.
/// Fails, naming the node, when a marked op has no rule or a rule cannot handle its form.
Expected<std::vector<Value *>> gradients(Graph &g, Value *loss, const std::vector<Value *> &wrt);

/// Reverse mode from given cotangents: appends to `g` the nodes computing, for every v in
/// `wrt`, sum_i dys[i] . d ys[i] / d v (dys[i] has ys[i]'s type; null: no cotangent) and
/// returns those values in wrt's order; zeros where no seeded value depends on v. The same
/// algorithm as gradients() (which is vjp of the loss with cotangent 1), seeded with dys; loops
/// on the path are first made to save their per-step values (saveScanSteps). A loop's
/// backward body is such a vector-Jacobian product of its forward body.
Expected<std::vector<Value *>> vjp(Graph &g, const std::vector<Value *> &ys,
                                   const std::vector<Value *> &dys,
                                   const std::vector<Value *> &wrt);

} // namespace nnc
