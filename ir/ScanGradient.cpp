// Backpropagation through time without unrolling: the gradient of a scan is a scan, running
// the other way, whose body is the vector-Jacobian product of the forward body.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "nnc/ir/Gradients.h"
#include "nnc/ir/Loop.h"

namespace nnc {

Error saveScanSteps(Node &scan) {
  NNC_TRY(syncScanBody(scan));
  NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(scan));
  if (p.whileLoop)
    return scan.error("the gradient of a while loop (its number of steps known only as it "
                      "runs) is not supported");
  const Graph &body = *scan.body();
  const std::vector<Value *> &outs = body.outputs();
  std::set<const Value *> perStep(outs.begin() + p.carried, outs.end());
  std::set<const Value *> varies(body.inputs().begin(),
                                 body.inputs().begin() + p.carried + p.scanInputs);
  std::vector<const Value *> save;
  for (int64_t j = 0; j < p.carried; ++j) {
    const Value *s = body.inputs()[j];
    if (body.hasUses(s) && !perStep.count(s))
      save.push_back(s);
  }
  for (const Node *b : body.nodes()) {
    bool v = false;
    for (const Value *o : b->operands())
      v = v || (o && varies.count(o));
    if (!v)
      continue;
    varies.insert(b->results().begin(), b->results().end());
    if (b->kind() == OpKind::MatMul && !perStep.count(b->result()))
      save.push_back(b->result());
  }
  if (save.empty())
    return Error::success();
  // A copy of the body with the saved values as outputs (the node's body may be shared).
  std::shared_ptr<Graph> saving(body.clone());
  std::vector<Value *> newOuts = saving->outputs();
  for (const Value *v : save) {
    newOuts.push_back(saving->findValue(v->name()));
    NNC_ASSERT(newOuts.back(), "the copy of a loop body lacks %{}", v->name());
  }
  saving->setOutputs(newOuts);
  for (const Value *v : save) {
    TensorType t = v->type();
    t.shape.insert(t.shape.begin(), p.steps);
    scan.graph()->addResult(scan, v->name() + "_steps", std::move(t));
  }
  scan.setBody(saving); // `body` and `save` die here
  return Error::success();
}

namespace {

/// True when `v` is a constant whose elements are all zero (a cotangent that adds nothing).
bool isZeroConstant(const Value *v) {
  const Node *c = v->producer();
  if (!c || c->kind() != OpKind::Constant)
    return false;
  const Tensor &t = c->getTensor("value");
  for (int64_t i = 0; i < t.numElements(); ++i)
    if (t.elementAsDouble(i) != 0)
      return false;
  return true;
}

} // namespace

std::vector<Value *> scanGradient(GradEmitter &e, const Node &scan,
                                  const std::vector<Value *> &dy) {
  std::vector<Value *> dx(scan.numOperands(), nullptr);
  Expected<ScanParts> parts = scanParts(scan);
  if (!parts) {
    e.fail(parts.takeError());
    return dx;
  }
  const ScanParts &p = *parts;
  if (p.whileLoop) {
    e.fail(scan.error("the gradient of a while loop (its number of steps known only as it "
                      "runs) is not supported"));
    return dx;
  }
  const Graph &body = *scan.body();
  const int64_t firstInvariant = p.carried + p.scanInputs;
  const int64_t numOperands = static_cast<int64_t>(scan.numOperands());
  auto wanted = [&](int64_t i) {
    return isFloat(scan.operand(i)->dtype()) && !scan.constantOperand(i);
  };
  // What the backward loop computes: cotangents of the float states (always: they carry the
  // recurrence), gradients of the sequences and invariants that are not constants.
  std::vector<int64_t> states, sequences, invariants, cotangents, saved;
  for (int64_t j = 0; j < p.carried; ++j)
    if (isFloat(scan.operand(j)->dtype()))
      states.push_back(j);
  for (int64_t i = p.carried; i < firstInvariant; ++i)
    if (wanted(i))
      sequences.push_back(i);
  for (int64_t i = firstInvariant; i < numOperands; ++i)
    if (wanted(i))
      invariants.push_back(i);
  // Per-step outputs with a cotangent, and those holding a value the body computes or a state
  // (the saved values; sequences and invariants are read from the forward operands).
  std::set<const Value *> savedValues;
  for (int64_t o = 0; o < p.scanOutputs; ++o) {
    const Value *y = body.outputs()[p.carried + o];
    const Value *d = dy[p.carried + o];
    if (d && !isZeroConstant(d))
      cotangents.push_back(o);
    auto firstSequence = body.inputs().begin() + p.carried;
    bool state = std::find(body.inputs().begin(), firstSequence, y) != firstSequence;
    if ((state || !y->isGraphInput()) && savedValues.insert(y).second)
      saved.push_back(o);
  }
  if (states.empty() && sequences.empty() && invariants.empty())
    return dx;

  // 1. The backward body's inputs, in the scan's operand order, and the outer operands.
  auto bwd = std::make_shared<Graph>(body.name() + "_grad");
  std::vector<Value *> operands;
  std::unordered_map<const Value *, Value *> map; // forward body value -> backward body value
  std::vector<Value *> dStates, dInvariants, dOutputs;
  GradEmitter outer(e.graph());
  for (int64_t j : states) {
    const Value *s = body.inputs()[j];
    dStates.push_back(bwd->addInput("d_" + s->name(), s->type()));
    operands.push_back(dy[j] ? dy[j] : outer.zerosLike(scan.operand(j)));
  }
  for (int64_t i : invariants) {
    const Value *w = body.inputs()[i];
    dInvariants.push_back(bwd->addInput("d_" + w->name(), w->type()));
    operands.push_back(outer.zerosLike(scan.operand(i)));
  }
  for (int64_t o : cotangents) {
    const Value *y = body.outputs()[p.carried + o];
    dOutputs.push_back(bwd->addInput("d_" + y->name(), y->type()));
    operands.push_back(dy[p.carried + o]);
  }
  for (int64_t o : saved) {
    const Value *y = body.outputs()[p.carried + o];
    map[y] = bwd->addInput(y->name(), y->type());
    operands.push_back(scan.result(p.carried + o));
  }
  for (int64_t i = p.carried; i < numOperands; ++i) {
    const Value *x = body.inputs()[i];
    map[x] = bwd->addInput(x->name(), x->type());
    operands.push_back(scan.operand(i));
  }
  if (!outer.ok()) {
    e.fail(outer.error());
    return dx;
  }

  // 2. The forward body, recomputed from the saved values (all of it: the saved node results
  //    are substituted after the vector-Jacobian product, whose rules need their nodes).
  for (int64_t j = 0; j < p.carried; ++j) {
    const Value *s = body.inputs()[j];
    if (body.hasUses(s) && !map.count(s)) {
      e.fail(scan.error("the gradient needs state {} (%{}) of every step, which the loop does "
                        "not return (saveScanSteps adds it)",
                        j, s->name()));
      return dx;
    }
  }
  std::map<Value *, Value *> substitute; // recomputed value -> saved input
  for (const Node *b : body.nodes()) {
    std::vector<Value *> savedAs;
    for (Value *r : b->results()) {
      auto it = map.find(r);
      savedAs.push_back(it != map.end() ? it->second : nullptr);
    }
    copyNode(*bwd, *b, map);
    for (size_t r = 0; r < savedAs.size(); ++r)
      if (savedAs[r])
        substitute[map.at(b->result(r))] = savedAs[r];
  }

  // 3. The vector-Jacobian product of one step: the next states' and the per-step outputs'
  //    cotangents back to the step's states, sequences and invariants.
  std::vector<Value *> ys, dys, wrt;
  for (size_t k = 0; k < states.size(); ++k) {
    ys.push_back(map.at(body.outputs()[states[k]]));
    dys.push_back(dStates[k]);
  }
  for (size_t k = 0; k < cotangents.size(); ++k) {
    ys.push_back(map.at(body.outputs()[p.carried + cotangents[k]]));
    dys.push_back(dOutputs[k]);
  }
  std::vector<int64_t> wrtOf; // body input of each wrt value
  for (const std::vector<int64_t> *group : {&states, &sequences, &invariants})
    for (int64_t i : *group) {
      auto it = map.find(body.inputs()[i]);
      if (it != map.end()) {
        wrt.push_back(it->second);
        wrtOf.push_back(i);
      }
    }
  Expected<std::vector<Value *>> grads = vjp(*bwd, ys, dys, wrt);
  if (!grads) {
    e.fail(grads.takeError().withContext(fmt::format("the body of {}", scan.describe())));
    return dx;
  }
  for (const auto &[recomputed, input] : substitute)
    bwd->replaceAllUsesWith(recomputed, input);
  GradEmitter inner(*bwd);
  auto gradOf = [&](int64_t i, Value *like) {
    for (size_t k = 0; k < wrtOf.size(); ++k)
      if (wrtOf[k] == i)
        return (*grads)[k];
    return inner.zerosLike(like);
  };
  std::vector<Value *> outs;
  for (size_t k = 0; k < states.size(); ++k)
    outs.push_back(gradOf(states[k], dStates[k]));
  for (size_t k = 0; k < invariants.size(); ++k)
    outs.push_back(inner.add(dInvariants[k], gradOf(invariants[k], dInvariants[k])));
  for (int64_t i : sequences)
    outs.push_back(gradOf(i, map.at(body.inputs()[i])));
  if (!inner.ok()) {
    e.fail(inner.error().withContext(fmt::format("the body of {}", scan.describe())));
    return dx;
  }
  bwd->setOutputs(outs);

  // 4. The backward loop.
  const int64_t carried = static_cast<int64_t>(states.size() + invariants.size());
  std::vector<TensorType> types;
  for (int64_t k = 0; k < static_cast<int64_t>(outs.size()); ++k) {
    TensorType t = outs[k]->type();
    if (k < carried)
      t = operands[k]->type();
    else
      t.shape.insert(t.shape.begin(), p.steps);
    types.push_back(std::move(t));
  }
  AttrMap attrs = {
      {"num_carried", carried},
      {"num_scan_inputs", static_cast<int64_t>(cotangents.size() + saved.size()) + p.scanInputs},
      {"reverse", int64_t(p.reverse ? 0 : 1)}};
  Node *back = e.graph().createNode(OpKind::Scan, operands, types, attrs,
                                    scan.name().empty() ? "" : scan.name() + "_grad");
  back->setBody(bwd);
  size_t r = 0;
  for (int64_t j : states)
    dx[j] = back->result(r++);
  for (int64_t i : invariants)
    dx[i] = back->result(r++);
  for (int64_t i : sequences)
    dx[i] = back->result(r++);
  return dx;
}

} // namespace nnc
