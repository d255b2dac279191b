// Loop nodes: checking a scan node against its body, and keeping the body's inputs in step
// with the node's operands.
#include "nnc/ir/Loop.h"

#include <unordered_map>

#include "nnc/ir/FusionGroup.h"

namespace nnc {

Node *copyNode(Graph &g, const Node &n, std::unordered_map<const Value *, Value *> &map,
               Node *before) {
  std::vector<Value *> ops;
  for (Value *o : n.operands())
    ops.push_back(o ? map.at(o) : nullptr);
  std::vector<TensorType> types;
  std::vector<std::string> names;
  for (Value *r : n.results()) {
    types.push_back(r->type());
    names.push_back(r->name());
  }
  Node *c = g.createNode(n.kind(), ops, types, n.attrs(), n.name(), names, before);
  if (n.body())
    c->setBody(std::shared_ptr<Graph>(n.body()->clone()));
  for (size_t r = 0; r < n.numResults(); ++r)
    map[n.result(r)] = c->result(r);
  return c;
}

Expected<ScanParts> scanParts(const Node &scan) {
  NNC_ASSERT(scan.kind() == OpKind::Scan, "scanParts of {}", scan.describe());
  const Graph *body = scan.body();
  if (!body)
    return scan.error("has no body");
  ScanParts p;
  p.carried = scan.getInt("num_carried");
  p.scanInputs = scan.getInt("num_scan_inputs");
  p.reverse = scan.getInt("reverse", 0) != 0;
  p.whileLoop = scan.getInt("while", 0) != 0;
  const int64_t ops = static_cast<int64_t>(scan.numOperands());
  if (p.whileLoop) {
    if (p.carried < 1 || p.scanInputs < 0 || p.reverse || p.carried + p.scanInputs > ops)
      return scan.error("a while loop needs its condition as state 0 and no `reverse` "
                        "(num_carried = {}, num_scan_inputs = {})",
                        p.carried, p.scanInputs);
    const Value *c = scan.operand(0);
    if (c && (c->dtype() != DType::Bool || c->rank() != 0))
      return scan.error("a while loop's state 0 is its condition, a bool scalar, not {}",
                        c->type().str());
  } else if (p.carried < 0 || p.scanInputs < 1 || p.carried + p.scanInputs > ops)
    return scan.error("num_carried = {} and num_scan_inputs = {} do not fit {} operands (at "
                      "least one sequence is needed)",
                      p.carried, p.scanInputs, ops);
  p.invariants = ops - p.carried - p.scanInputs;
  if (static_cast<int64_t>(body->inputs().size()) != ops)
    return scan.error("the body takes {} inputs but the node has {} operands",
                      body->inputs().size(), ops);
  const int64_t outs = static_cast<int64_t>(body->outputs().size());
  if (outs < p.carried)
    return scan.error("the body returns {} values, fewer than its {} states", outs, p.carried);
  p.scanOutputs = outs - p.carried;
  if (p.whileLoop)
    p.steps = Dim::symbol("while"); // known only as it runs
  if (p.whileLoop && p.scanOutputs != 0 && p.scanInputs == 0) {
    // Per-step outputs need a bound on the steps, their rows: max_steps or the sequences'.
    const int64_t maxSteps = scan.getInt("max_steps", -1);
    if (maxSteps < 0)
      return scan.error("a while loop returns {} per-step outputs but has neither sequences "
                        "nor `max_steps` (its number of steps is known only as it runs)",
                        p.scanOutputs);
    p.steps = Dim(maxSteps);
  }
  for (int64_t i = 0; i < ops; ++i)
    if (!scan.operand(i))
      return scan.error("operand {} is missing", i);
  for (int64_t i = 0; i < outs; ++i)
    if (!body->outputs()[i])
      return scan.error("body output {} is missing", i);
  for (int64_t i = p.carried; i < p.carried + p.scanInputs; ++i) {
    const Value *x = scan.operand(i);
    if (x->rank() < 1)
      return scan.error("sequence operand {} (%{}) is a scalar", i, x->name());
    const Dim &d = x->shape()[0];
    if (i == p.carried)
      p.steps = d;
    else if (d != p.steps)
      return scan.error("sequences have {} and {} steps", p.steps.str(), d.str());
  }
  return p;
}

Error syncScanBody(Node &scan) {
  NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(scan));
  Graph &body = *scan.body();
  std::vector<Node *> nodes = body.nodes();
  Node *first = nodes.empty() ? nullptr : nodes.front();
  for (size_t i = 0; i < scan.numOperands(); ++i) {
    const Value *x = scan.operand(i);
    Value *in = body.inputs()[i];
    bool sequence =
        static_cast<int64_t>(i) >= p.carried && static_cast<int64_t>(i) < p.carried + p.scanInputs;
    TensorType t = x->type();
    if (sequence)
      t.shape.erase(t.shape.begin());
    if (t.dtype != in->dtype() || t.rank() != in->rank())
      return scan.error("operand {} is {} but body input %{} is {}", i, x->type().str(), in->name(),
                        in->type().str());
    in->setType(t);
    if (static_cast<int64_t>(i) < p.carried + p.scanInputs || !body.hasUses(in))
      continue;
    if (const Tensor *c = scan.constantOperand(i)) {
      Node *k = body.createNode(OpKind::Constant, {}, {t}, {{"value", *c}}, "",
                                {in->name() + "_value"}, first);
      body.replaceAllUsesWith(in, k->result());
    }
  }
  return Error::success();
}

} // namespace nnc

namespace nnc {

Error unrollScan(Graph &g, Node *n) {
  NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(*n));
  // A while loop bounded to no steps (empty sequences) unrolls to its initial states; an
  // unbounded one's steps are a symbol.
  if (p.whileLoop && !(p.steps.isStatic() && p.steps.value() == 0))
    return n->error("cannot unroll a while loop (its number of steps is known only as it runs)");
  if (!p.steps.isStatic())
    return n->error("cannot unroll a loop of {} steps (the sequence length must be static)",
                    p.steps.str());
  const int64_t steps = p.steps.value();
  if (steps == 0) { // the initial states, and per-step outputs of no steps
    for (int64_t o = 0; o < p.scanOutputs; ++o) {
      Value *r = n->result(p.carried + o);
      const Value *step = n->body()->outputs()[p.carried + o];
      std::optional<Extents> e = staticExtents(step->shape());
      if (!e)
        return n->error("cannot give the per-step outputs of zero steps a shape (a step is {})",
                        step->type().str());
      e->insert(e->begin(), 0);
      TensorType t(r->dtype(), shapeFromExtents(*e));
      Node *k = g.createNode(OpKind::Constant, {}, {t}, {{"value", Tensor::zeros(t.dtype, *e)}}, "",
                             {}, n);
      g.replaceAllUsesWith(r, k->result());
    }
    for (int64_t j = 0; j < p.carried; ++j)
      g.replaceAllUsesWith(n->result(j), n->operand(j));
    g.eraseNode(n);
    return Error::success();
  }
  const Graph &body = *n->body();
  // The nodes made here are named after the loop, so that an error about them (a per-step
  // output whose steps differ in shape fails its stacking concat) names the loop.
  auto emit = [&](OpKind k, std::vector<Value *> ops, AttrMap a,
                  int results = -1) -> Expected<Node *> {
    return g.createInferred(k, std::move(ops), std::move(a), n->name(), results, {}, n);
  };
  // Each sequence split into its steps (without the step axis).
  std::vector<std::vector<Value *>> stepsOf(p.scanInputs);
  for (int64_t i = 0; i < p.scanInputs; ++i) {
    Value *x = n->operand(p.carried + i);
    std::vector<Value *> parts = {x};
    if (steps > 1) {
      NNC_ASSIGN_OR_RETURN(Node * s,
                           emit(OpKind::Split, {x},
                                {{"axis", int64_t{0}}, {"sizes", std::vector<int64_t>(steps, 1)}},
                                static_cast<int>(steps)));
      parts = s->results();
    }
    for (Value *part : parts) {
      NNC_ASSIGN_OR_RETURN(Node * sq,
                           emit(OpKind::Squeeze, {part}, {{"axes", std::vector<int64_t>{0}}}));
      stepsOf[i].push_back(sq->result());
    }
  }
  std::vector<Value *> states(n->operands().begin(), n->operands().begin() + p.carried);
  std::vector<std::vector<Value *>> outs(p.scanOutputs, std::vector<Value *>(steps, nullptr));
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = p.reverse ? steps - 1 - k : k;
    std::unordered_map<const Value *, Value *> map;
    for (size_t i = 0; i < body.inputs().size(); ++i) {
      int64_t ii = static_cast<int64_t>(i);
      map[body.inputs()[i]] = ii < p.carried                  ? states[i]
                              : ii < p.carried + p.scanInputs ? stepsOf[ii - p.carried][t]
                                                              : n->operand(i);
    }
    std::vector<Node *> copies;
    for (const Node *b : body.nodes())
      copies.push_back(copyNode(g, *b, map, n));
    // Each step's copy of a fused body gets groups of its own.
    freshFusionGroups(g, copies);
    for (int64_t j = 0; j < p.carried; ++j)
      states[j] = map.at(body.outputs()[j]);
    for (int64_t o = 0; o < p.scanOutputs; ++o)
      outs[o][t] = map.at(body.outputs()[p.carried + o]);
  }
  for (int64_t j = 0; j < p.carried; ++j)
    g.replaceAllUsesWith(n->result(j), states[j]);
  for (int64_t o = 0; o < p.scanOutputs; ++o) {
    std::vector<Value *> parts;
    for (Value *y : outs[o]) {
      NNC_ASSIGN_OR_RETURN(Node * u,
                           emit(OpKind::Unsqueeze, {y}, {{"axes", std::vector<int64_t>{0}}}));
      parts.push_back(u->result());
    }
    Value *stacked = nullptr;
    if (parts.empty()) {
      return n->error("cannot unroll a loop of 0 steps");
    } else if (parts.size() == 1) {
      stacked = parts[0];
    } else {
      NNC_ASSIGN_OR_RETURN(Node * c, emit(OpKind::Concat, parts, {{"axis", int64_t{0}}}));
      stacked = c->result();
    }
    g.replaceAllUsesWith(n->result(p.carried + o), stacked);
  }
  g.eraseNode(n);
  return Error::success();
}

Error unrollScans(Graph &g, bool keepWhileLoops) {
  for (Node *n : g.nodes()) {
    if (n->kind() != OpKind::Scan)
      continue;
    if (keepWhileLoops) {
      NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(*n));
      if (p.whileLoop)
        continue;
    }
    NNC_TRY(unrollScan(g, n));
  }
  return Error::success();
}

} // namespace nnc
