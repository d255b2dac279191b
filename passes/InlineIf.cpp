// Inline-if: replaces each `if` node (both branches of an ONNX If in one body) by code in the
// graph itself, so that the branches are optimized and compiled with it.
//
// Algorithm, for each `if` node in order:
//  1. A constant condition (a literal, or one constant folding or shape specialization made
//     constant): the taken branch's nodes are copied before the node and its results replace
//     the node's; the other branch is dropped unseen.
//  2. A condition known only at run time, where each result has the same static type in both
//     branches and no node of either can stop the run (an index check, a nested loop or If):
//     both branches are copied and each result becomes select(cond, then, else). Both then
//     run, so this trades the untaken branch's work for one executable; the untaken branch
//     must not fail on the values that made it untaken.
//  3. Otherwise the node stays. Its results' shapes are unknown until the condition is, so
//     staged execution stops before it and specializes the rest on the condition's value,
//     and step 1 applies there.
#include "nnc/ir/Loop.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

class InlineIfPass : public Pass {
public:
  std::string_view name() const override { return "inline-if"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (n->kind() != OpKind::If)
        continue;
      NNC_ASSIGN_OR_RETURN(size_t k, ifResults(*n));
      if (const Tensor *c = n->constantOperand(0)) {
        inlineIfBranch(g, n, c->elementAsDouble(0) != 0);
        changed = true;
        continue;
      }
      NNC_ASSIGN_OR_RETURN(std::vector<TensorType> types, bodyOutputTypes(*n, 1));
      bool same = !mayStopTheRun(*n->body());
      for (size_t i = 0; i < k; ++i)
        same = same && types[i] == types[k + i] && isStatic(types[i].shape);
      if (!same)
        continue;
      NNC_TRY(selectBoth(g, n, k));
      changed = true;
    }
    return changed;
  }

private:
  /// True when some node of `body` checks its data at run time and may end the run with an
  /// error: the ops whose lowering adds a KernelBuilder::check (the index-taking ops, and
  /// roi_align's batch indices), and nodes with bodies of their own.
  static bool mayStopTheRun(const Graph &body) {
    for (const Node *b : body.nodes()) {
      switch (b->kind()) {
      case OpKind::RoiAlign:
      case OpKind::Gather:
      case OpKind::GatherElements:
      case OpKind::GatherND:
      case OpKind::ScatterElements:
      case OpKind::ScatterND:
      case OpKind::RotaryEmbedding:
        return true;
      default:
        if (b->body())
          return true;
      }
    }
    return false;
  }
  /// Step 2: both halves copied, then selected.
  static Error selectBoth(Graph &g, Node *n, size_t k) {
    std::vector<Value *> thenOut = copyIfBranch(g, n, true), elseOut = copyIfBranch(g, n, false);
    for (size_t i = 0; i < k; ++i) {
      NNC_ASSIGN_OR_RETURN(Node * s,
                           g.createInferred(OpKind::Select, {n->operand(0), thenOut[i], elseOut[i]},
                                            {}, n->name(), -1, {}, n));
      g.replaceAllUsesWith(n->result(i), s->result());
    }
    g.eraseNode(n);
    return Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> createInlineIfPass() {
  return std::make_unique<InlineIfPass>();
}

} // namespace nnc
