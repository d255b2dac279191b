// Unroll-dynamic-loops: a loop whose body's shapes depend on the step (a slice at the
// iteration number, as ONNX Loop bodies that index with their counter have) cannot run as one
// compiled body, whose buffers are sized once; with a known, small number of steps it is
// unrolled, and each copy's step number folds to a constant that fixes its shapes.
//
// Algorithm, for each scan node of the graph (the pass manager runs the pass on bodies too):
//  1. Bring the body in step with the node's operands (syncScanBody) and rerun its shape
//     rules.
//  2. If the body's inputs are all static but some value in it is not, and the step count is
//     static and the unrolled graph stays within kMaxUnrolledNodes, replace the node by its
//     body once per step (unrollScan); a loop of zero steps by its initial states and empty
//     per-step outputs. Otherwise leave it: a later stage or the code generator names what
//     is unknown.
#include "nnc/ir/Loop.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

/// The most body nodes an unrolled loop may add.
constexpr int64_t kMaxUnrolledNodes = 1 << 16;

class UnrollDynamicLoopsPass : public Pass {
public:
  std::string_view name() const override { return "unroll-dynamic-loops"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodes()) {
      if (n->kind() != OpKind::Scan)
        continue;
      NNC_TRY(syncScanBody(*n));
      NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(*n));
      // A while loop stays, but one bounded to no steps (its initial states); an unbounded
      // one's steps are a symbol.
      const bool noSteps = p.steps.isStatic() && p.steps.value() == 0;
      if ((p.whileLoop && !noSteps) || !p.steps.isStatic() ||
          p.steps.value() > kMaxUnrolledNodes / std::max<int64_t>(1, n->body()->numNodes()))
        continue;
      // A loop of no steps is its initial states (a Loop whose condition starts false).
      if (p.steps.value() > 0) {
        NNC_ASSIGN_OR_RETURN(bool dynamic, stepDependentShapes(*n->body()));
        if (!dynamic)
          continue;
      }
      NNC_TRY(unrollScan(g, n));
      changed = true;
    }
    return changed;
  }

private:
  /// True when every input of `body` is static and some value it computes is not, after its
  /// shape rules rerun.
  static Expected<bool> stepDependentShapes(Graph &body) {
    for (const Value *in : body.inputs())
      if (!isStatic(in->shape()))
        return false;
    bool dynamic = false;
    for (Node *b : body.nodes()) {
      NNC_ASSIGN_OR_RETURN(std::vector<TensorType> types, b->info().infer(*b));
      for (size_t r = 0; r < b->numResults() && r < types.size(); ++r) {
        b->result(r)->setType(types[r]);
        dynamic = dynamic || !isStatic(types[r].shape);
      }
    }
    return dynamic;
  }
};

} // namespace

std::unique_ptr<Pass> createUnrollDynamicLoopsPass() {
  return std::make_unique<UnrollDynamicLoopsPass>();
}

} // namespace nnc
