// The interpreter's loop op (scan): the body interpreted once per step.
#include <cstring>

#include "interp/Kernels.h"
#include "nnc/ir/Loop.h"
#include "nnc/runtime/Interpreter.h"

namespace nnc::interp {

namespace {

/// Step t of every sequence of `node` (operands [carried, carried + scanInputs) of `ops`, each
/// of `steps` steps along axis 0) into in[i].
Error readSteps(const Node &node, const Operands &ops, const ScanParts &p, int64_t steps,
                int64_t t, std::vector<Tensor> &in) {
  for (int64_t i = p.carried; i < p.carried + p.scanInputs; ++i) {
    const Tensor &x = ops[i];
    if (x.dim(0) != steps)
      return node.error("sequences have {} and {} steps", steps, x.dim(0));
    Extents e(x.extents().begin() + 1, x.extents().end());
    size_t bytes = x.byteSize() / static_cast<size_t>(steps);
    in[i] = Tensor::fromBytes(x.dtype(), e, static_cast<const char *>(x.rawData()) + t * bytes);
  }
  return Error::success();
}

} // namespace

/// A while loop: the body runs as long as state 0 is true, at most T steps where it has
/// sequences (dim 0) or max_steps. Per-step outputs have T rows, zeros past the steps it ran.
Results evalWhile(const Node &node, const Operands &ops, const ScanParts &p) {
  const Graph &body = *node.body();
  std::vector<Tensor> in(ops.begin(), ops.end());
  std::vector<Tensor> stacked(p.scanOutputs);
  // At most T steps where it has sequences or max_steps (T: their dim 0, or max_steps).
  const bool bounded = p.scanInputs > 0 || p.scanOutputs > 0;
  const int64_t rows = p.scanInputs > 0 ? ops[p.carried].dim(0)
                       : p.scanOutputs > 0 ? p.steps.value()
                                           : 0;
  auto allocate = [&](int64_t o, Extents step) {
    step.insert(step.begin(), rows);
    stacked[o] = Tensor::zeros(node.result(p.carried + o)->dtype(), step);
  };
  for (int64_t t = 0; in[0].elementAsDouble(0) != 0 && (!bounded || t < rows); ++t) {
    NNC_TRY(readSteps(node, ops, p, rows, t, in));
    Expected<std::vector<Tensor>> out = interpret(body, in);
    if (!out)
      return out.error().withContext(fmt::format("{}, step {}", node.describe(), t));
    for (int64_t o = 0; o < p.scanOutputs; ++o) {
      const Tensor &y = (*out)[p.carried + o];
      if (t == 0)
        allocate(o, y.extents());
      if (Extents(stacked[o].extents().begin() + 1, stacked[o].extents().end()) != y.extents())
        return node.error("body output {} changes shape between steps", p.carried + o);
      std::memcpy(static_cast<char *>(stacked[o].rawData()) + t * y.byteSize(), y.rawData(),
                  y.byteSize());
    }
    for (int64_t j = 0; j < p.carried; ++j)
      in[j] = std::move((*out)[j]);
  }
  in.resize(static_cast<size_t>(p.carried));
  for (int64_t o = 0; o < p.scanOutputs; ++o) {
    if (stacked[o].rank() == 0) { // no step ran
      std::optional<Extents> e = staticExtents(body.outputs()[p.carried + o]->shape());
      if (!e)
        return node.error("cannot give the per-step outputs of zero steps a shape (a step is {})",
                          body.outputs()[p.carried + o]->type().str());
      allocate(o, *e);
    }
    in.push_back(std::move(stacked[o]));
  }
  return in;
}

Results evalScan(const Node &node, const Operands &ops) {
  NNC_ASSIGN_OR_RETURN(ScanParts p, scanParts(node));
  if (p.whileLoop)
    return evalWhile(node, ops, p);
  const Graph &body = *node.body();
  const int64_t steps = ops[p.carried].dim(0);
  std::vector<Tensor> states(ops.begin(), ops.begin() + p.carried);
  std::vector<Tensor> stacked(p.scanOutputs);
  std::vector<Tensor> in(ops.size());
  for (size_t i = p.carried + p.scanInputs; i < ops.size(); ++i)
    in[i] = ops[i];
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = p.reverse ? steps - 1 - k : k;
    for (int64_t j = 0; j < p.carried; ++j)
      in[j] = states[j];
    NNC_TRY(readSteps(node, ops, p, steps, t, in));
    Expected<std::vector<Tensor>> out = interpret(body, in);
    if (!out)
      return out.error().withContext(fmt::format("{}, step {}", node.describe(), t));
    for (int64_t j = 0; j < p.carried; ++j)
      states[j] = (*out)[j];
    for (int64_t o = 0; o < p.scanOutputs; ++o) {
      const Tensor &y = (*out)[p.carried + o];
      if (!stacked[o].rawData() && stacked[o].extents().empty()) {
        Extents e = y.extents();
        e.insert(e.begin(), steps);
        stacked[o] = Tensor::zeros(y.dtype(), e);
      }
      if (Extents(stacked[o].extents().begin() + 1, stacked[o].extents().end()) != y.extents())
        return node.error("body output {} changes shape between steps", p.carried + o);
      std::memcpy(static_cast<char *>(stacked[o].rawData()) + t * y.byteSize(), y.rawData(),
                  y.byteSize());
    }
  }
  for (int64_t o = 0; o < p.scanOutputs; ++o) {
    if (steps > 0)
      continue;
    std::optional<Extents> e = staticExtents(body.outputs()[p.carried + o]->shape());
    if (!e)
      return node.error("cannot give the per-step outputs of zero steps a shape (a step is {})",
                        body.outputs()[p.carried + o]->type().str());
    e->insert(e->begin(), 0);
    stacked[o] = Tensor::zeros(node.result(p.carried + o)->dtype(), *e);
  }
  std::vector<Tensor> results = std::move(states);
  for (Tensor &s : stacked)
    results.push_back(std::move(s));
  return results;
}

} // namespace nnc::interp

namespace nnc::interp {

/// Only the taken branch runs: the other may fail on the values that made it untaken (an
/// index out of range, a division by zero).
Results evalIf(const Node &node, const Operands &ops) {
  NNC_ASSIGN_OR_RETURN(size_t k, ifResults(node));
  if (ops[0].numElements() != 1)
    return node.error("the condition has {} elements", ops[0].numElements());
  const bool taken = ops[0].elementAsDouble(0) != 0;
  std::unique_ptr<Graph> branch = node.body()->clone();
  std::vector<Value *> outs(branch->outputs().begin() + (taken ? 0 : k),
                            branch->outputs().begin() + (taken ? k : 2 * k));
  branch->setOutputs(outs);
  std::vector<Node *> nodes = branch->nodes();
  for (size_t i = nodes.size(); i-- > 0;) {
    bool used = false;
    for (const Value *r : nodes[i]->results())
      used = used || branch->hasUses(r);
    if (!used)
      branch->eraseNode(nodes[i]);
  }
  std::vector<Tensor> in(ops.begin() + 1, ops.end());
  Expected<std::vector<Tensor>> out = interpret(*branch, in);
  if (!out)
    return out.error().withContext(
        fmt::format("{}, {} branch", node.describe(), taken ? "then" : "else"));
  return out;
}

} // namespace nnc::interp
