// Loop-invariant code motion: the nodes of a loop body that read only the loop's invariants
// (and constants) run once before the loop instead of once per step. A backward loop's body
// transposes the recurrent weight for the state's cotangent (the matmul rule's b^T); inside
// the loop that copies the weight at every step.
//
// Algorithm, for each scan node of the graph (the pass manager runs the pass on bodies too):
//  1. Bring the body in step with the node's operands (syncScanBody).
//  2. Walk the body in order. A node is invariant when it has no body of its own and each
//     operand is an invariant input, a constant's result or an invariant node's result, and
//     it is not a constant (those stay: constant-fold and the weight packers read them in the
//     body).
//  3. Copy every invariant node, with the constants it reads, before the loop, its
//     operands mapped to the loop's operands.
//  4. Each invariant result that a varying node or a body output uses becomes a new
//     invariant: an operand of the loop and a body input that replaces it in the body; the
//     invariant nodes are then erased from the body.
#include <unordered_map>
#include <unordered_set>

#include "nnc/ir/Loop.h"
#include "nnc/passes/Passes.h"

namespace nnc {

namespace {

class HoistLoopInvariantsPass : public Pass {
public:
  std::string_view name() const override { return "hoist-loop-invariants"; }
  Expected<bool> run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodes())
      if (n->kind() == OpKind::Scan) {
        NNC_ASSIGN_OR_RETURN(bool hoisted, hoist(g, *n));
        changed = changed || hoisted;
      }
    return changed;
  }

private:
  Expected<bool> hoist(Graph &g, Node &scan) {
    NNC_TRY(syncScanBody(scan));
    NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(scan));
    Graph &body = *scan.body();
    // 2. Body value -> outer value, for invariant inputs, constants and invariant nodes.
    std::unordered_map<const Value *, Value *> outer;
    for (size_t i = static_cast<size_t>(p.carried + p.scanInputs); i < scan.numOperands(); ++i)
      outer[body.inputs()[i]] = scan.operand(i);
    std::unordered_set<const Value *> constants;
    std::vector<Node *> invariant;
    for (Node *b : body.nodes()) {
      if (b->kind() == OpKind::Constant) {
        constants.insert(b->result());
        continue;
      }
      bool readsInvariant = false, all = !b->body() && b->numResults() > 0;
      for (Value *o : b->operands()) {
        if (!o)
          continue;
        bool inv = outer.count(o) != 0;
        readsInvariant = readsInvariant || inv;
        all = all && (inv || constants.count(o));
      }
      if (!all || !readsInvariant)
        continue;
      // 3. The copy before the loop (and of the constants it reads).
      for (Value *o : b->operands())
        if (o && !outer.count(o))
          copyNode(g, *o->producer(), outer, &scan);
      copyNode(g, *b, outer, &scan);
      invariant.push_back(b);
      addStat("nodes-hoisted");
    }
    if (invariant.empty())
      return false;
    // 4. New invariants for the hoisted results that the rest of the body reads.
    std::unordered_set<const Node *> hoisted(invariant.begin(), invariant.end());
    std::vector<Value *> operands = scan.operands();
    for (Node *b : invariant)
      for (Value *r : b->results()) {
        bool read = body.isOutput(r);
        for (const Node *u : body.users(r))
          read = read || !hoisted.count(u);
        if (!read)
          continue;
        Value *in = body.addInput(r->name() + "_hoisted", r->type());
        body.replaceAllUsesWith(r, in);
        operands.push_back(outer.at(r));
      }
    scan.setOperands(operands);
    for (auto it = invariant.rbegin(); it != invariant.rend(); ++it)
      body.eraseNode(*it);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createHoistLoopInvariantsPass() {
  return std::make_unique<HoistLoopInvariantsPass>();
}

} // namespace nnc
