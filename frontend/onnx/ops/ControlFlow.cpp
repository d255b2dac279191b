// ONNX lowerings of the control-flow operators. Their subgraphs are imported as graphs of the
// IR (the outer values they read captured as extra inputs) and compiled with the model:
//  - Scan becomes the IR's `scan` node; scan axes other than 0 and reversed directions are
//    transposes and reversing slices around it.
//  - Loop becomes a `scan` whose sequence is the iteration number 0 .. n-1, where n is the
//    trip count M (zero when the initial condition is false). That is exact when the body
//    passes its condition through unchanged or sets it to a constant true (the pattern
//    exporters emit), or when the node has no condition input (the body's is then ignored).
//    M known only at run time makes the results' shapes depend on it: staged execution
//    specializes on it.
//  - A Loop whose body computes its condition from data (a while loop) becomes a `scan` with
//    `while` = 1 over (condition, iteration number, loop-carried values), which stops once
//    the condition is false: the runtime tests it before each step. Its per-step outputs
//    have as many rows as it runs steps, known only when it ends, and a compiled body's
//    buffers are sized before it runs; such a loop runs twice: the while loop counts its
//    steps (carrying only the values its condition depends on: a counter-driven loop counts
//    for the price of its counter), then a counted loop over that many steps (the body's
//    condition ignored, true in every step it runs) computes the states and the per-step
//    outputs. The count is data, so
//    staged execution specializes the counted loop on it. The body's ops are pure (the random
//    ones are functions of their seed, counter and position), so the second run takes the
//    steps the first one did.
//  - A Loop carrying sequences: where the body only appends to them (a Python list appended
//    to in a loop), each sequence becomes a per-step output of the loop above (its elements
//    known at import time followed by that output's rows, StaticValue::rows) when the
//    loop's steps are known only at run time; otherwise the loop is unrolled while importing
//    (its trip count and conditions known then).
//  - If with a condition known while importing is its taken branch inlined; otherwise an
//    `if` node holding both branches, which the inline-if pass resolves once the condition
//    is known or, where both branches give the same types, turns into selects.
#include <climits>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "nnc/ir/Loop.h"
#include "onnx/Lowering.h"
#include "onnx/OnnxInternal.h"

namespace nnc::onnxfe {

namespace {

using Ints = std::vector<int64_t>;

/// x reversed along `axis`.
Expected<Value *> reverseAxis(LoweringContext &ctx, Value *x, int64_t axis) {
  return ctx.emit(OpKind::Slice, {x, ctx.i64Vector({-1}), ctx.i64Vector({INT64_MIN}),
                                  ctx.i64Vector({axis}), ctx.i64Vector({-1})});
}

/// x with axis `from` moved to position `to` (the others in order).
Expected<Value *> moveAxis(LoweringContext &ctx, Value *x, int64_t from, int64_t to) {
  if (from == to)
    return x;
  Ints perm;
  for (int64_t i = 0; i < x->rank(); ++i)
    if (i != from)
      perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  return ctx.emit(OpKind::Transpose, {x}, {{"perm", perm}});
}

/// A `scan` node over `operands` (states, sequences, invariants) with `body`, its result types
/// from its shape rule; `maxSteps` >= 0: a while loop's bound on its steps (its per-step
/// outputs' rows).
Expected<Node *> emitScan(LoweringContext &ctx, std::vector<Value *> operands,
                          std::shared_ptr<Graph> body, int64_t carried, int64_t sequences,
                          bool whileLoop = false, int64_t maxSteps = -1) {
  size_t results = body->outputs().size();
  AttrMap attrs{{"num_carried", carried}, {"num_scan_inputs", sequences}, {"reverse", int64_t{0}}};
  if (whileLoop)
    attrs["while"] = int64_t{1};
  if (maxSteps >= 0)
    attrs["max_steps"] = maxSteps;
  Node *scan = ctx.graph().createNode(OpKind::Scan, std::move(operands),
                                      std::vector<TensorType>(results), attrs, ctx.proto().name());
  scan->setBody(std::move(body));
  Expected<std::vector<TensorType>> types = scan->info().infer(*scan);
  if (!types) {
    ctx.graph().eraseNode(scan);
    return types.error().withContext(ctx.place());
  }
  for (size_t i = 0; i < results; ++i)
    scan->result(i)->setType((*types)[i]);
  ctx.adopt(*scan);
  return scan;
}

/// A loop-carried value must keep its type from step to step: the loop's buffers are sized
/// once.
Error checkStates(LoweringContext &ctx, const Graph &body, const std::vector<Value *> &initial,
                  size_t firstOutput) {
  for (size_t j = 0; j < initial.size(); ++j) {
    const TensorType &in = initial[j]->type(), &out = body.outputs()[firstOutput + j]->type();
    bool same = in.dtype == out.dtype && in.rank() == out.rank();
    for (int64_t d = 0; same && d < in.rank(); ++d)
      same = !in.shape[d].isStatic() || !out.shape[d].isStatic() || in.shape[d] == out.shape[d];
    if (!same)
      return ctx.error("loop-carried value {} starts as {} but the body makes it {}; a value "
                       "whose type changes from step to step is unsupported",
                       j, in.str(), out.str());
  }
  return Error::success();
}

/// Batch entry b of x (its axis 0 dropped).
Expected<Value *> batchEntry(LoweringContext &ctx, Value *x, int64_t b) {
  NNC_ASSIGN_OR_RETURN(Value * s, ctx.emit(OpKind::Slice, {x, ctx.i64Vector({b}),
                                                           ctx.i64Vector({b + 1}),
                                                           ctx.i64Vector({0})}));
  return ctx.emit(OpKind::Squeeze, {s}, {{"axes", Ints{0}}});
}

/// The values stacked along a new axis 0.
Expected<Value *> stack(LoweringContext &ctx, const std::vector<Value *> &xs) {
  std::vector<Value *> parts;
  for (Value *x : xs) {
    NNC_ASSIGN_OR_RETURN(Value * u, ctx.emit(OpKind::Unsqueeze, {x}, {{"axes", Ints{0}}}));
    parts.push_back(u);
  }
  if (parts.size() == 1)
    return parts[0];
  return ctx.emit(OpKind::Concat, parts, {{"axis", int64_t{0}}});
}

/// Scan of opset 8: inputs (sequence_lens, states, scan inputs) and outputs carry a leading
/// batch axis; each batch entry is scanned on its own (the scan inputs along their axis 1,
/// `directions` reversing some) by a `scan` node per entry, the results stacked. The batch
/// must be static, and sequence_lens (when given) known at import time and full-length.
Error lowerScan8(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(int64_t m, ctx.intAttr("num_scan_inputs", -1));
  const int64_t numInputs = static_cast<int64_t>(ctx.numInputs());
  if (m < 1 || m > numInputs - 1)
    return ctx.error("attribute 'num_scan_inputs' = {} must be in [1, {}] (the number of inputs "
                     "after sequence_lens)",
                     m, numInputs - 1);
  const int64_t n = numInputs - 1 - m;
  NNC_ASSIGN_OR_RETURN(Ints dirs, ctx.intsAttr("directions", Ints(m, 0)));
  if (static_cast<int64_t>(dirs.size()) != m)
    return ctx.error("attribute 'directions' needs {} entries, has {}", m, dirs.size());
  std::vector<Value *> xs;
  for (int64_t i = 1; i < numInputs; ++i) {
    NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(static_cast<size_t>(i), "Scan input"));
    if (x->rank() < (i > n ? 2 : 1))
      return ctx.error("input {} has rank {}; it needs a batch axis{}", i, x->rank(),
                       i > n ? " and a sequence axis" : "");
    xs.push_back(x);
  }
  const Dim &batchDim = xs[0]->shape()[0];
  if (!batchDim.isStatic())
    return ctx.error("the batch axis has extent {}, known only at run time (Scan of opset 8 is "
                     "lowered per batch entry)",
                     batchDim.str());
  const int64_t batch = batchDim.value();
  if (batch == 0)
    return ctx.error("the batch is empty");
  for (Value *x : xs)
    if (!x->shape()[0].isStatic() || x->shape()[0].value() != batch)
      return ctx.error("the inputs' batch axes differ ({} and {})", batch, x->shape()[0].str());
  if (ctx.input(0)) {
    NNC_ASSIGN_OR_RETURN(Tensor lens, ctx.constantInput(0, "sequence_lens"));
    const Dim &t = xs[static_cast<size_t>(n)]->shape()[1];
    for (int64_t b = 0; b < lens.numElements(); ++b)
      if (!t.isStatic() || lens.elementAsInt(b) != t.value())
        return ctx.error("sequence_lens[{}] = {} is shorter than the sequence axis ({}); only "
                         "full-length sequences are supported",
                         b, lens.elementAsInt(b), t.str());
  }
  std::vector<TensorType> bodyTypes;
  for (int64_t i = 0; i < n + m; ++i) {
    TensorType t = xs[i]->type();
    t.shape.erase(t.shape.begin(), t.shape.begin() + (i < n ? 1 : 2));
    bodyTypes.push_back(std::move(t));
  }
  NNC_ASSIGN_OR_RETURN(ImportedSubgraph body, ctx.subgraph("body", bodyTypes));
  const int64_t outs = static_cast<int64_t>(body.graph->outputs().size());
  if (outs < n)
    return ctx.error("the body returns {} values, fewer than its {} states", outs, n);
  std::vector<std::vector<Value *>> results(static_cast<size_t>(outs));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value *> operands;
    for (int64_t i = 0; i < n + m; ++i) {
      NNC_ASSIGN_OR_RETURN(Value * x, batchEntry(ctx, xs[i], b));
      if (i >= n && dirs[i - n] != 0) {
        if (dirs[i - n] != 1)
          return ctx.error("directions[{}] = {} is not 0 or 1", i - n, dirs[i - n]);
        NNC_ASSIGN_OR_RETURN(x, reverseAxis(ctx, x, 0));
      }
      operands.push_back(x);
    }
    if (b == 0)
      NNC_TRY(checkStates(ctx, *body.graph,
                          std::vector<Value *>(operands.begin(), operands.begin() + n), 0));
    operands.insert(operands.end(), body.captured.begin(), body.captured.end());
    std::shared_ptr<Graph> g = b == 0 ? body.graph : std::shared_ptr<Graph>(body.graph->clone());
    NNC_ASSIGN_OR_RETURN(Node * scan, emitScan(ctx, operands, g, n, m));
    for (int64_t o = 0; o < outs; ++o)
      results[o].push_back(scan->result(o));
  }
  for (int64_t o = 0; o < outs; ++o) {
    NNC_ASSIGN_OR_RETURN(Value * y, stack(ctx, results[o]));
    NNC_TRY(ctx.setOutput(static_cast<size_t>(o), y));
  }
  return Error::success();
}

Error lowerScan(LoweringContext &ctx) {
  if (ctx.opset() < 9)
    return lowerScan8(ctx);
  if (ctx.hasAttr("directions"))
    return ctx.error("attribute 'directions' is Scan's of opset 8; opset {} has "
                     "scan_input_directions",
                     ctx.opset());
  NNC_ASSIGN_OR_RETURN(int64_t m, ctx.intAttr("num_scan_inputs", -1));
  const int64_t numInputs = static_cast<int64_t>(ctx.numInputs());
  if (m < 1 || m > numInputs)
    return ctx.error("attribute 'num_scan_inputs' = {} must be in [1, {}] (the number of inputs)",
                     m, numInputs);
  const int64_t n = numInputs - m;
  NNC_ASSIGN_OR_RETURN(Ints inAxes, ctx.intsAttr("scan_input_axes", Ints(m, 0)));
  NNC_ASSIGN_OR_RETURN(Ints inDirs, ctx.intsAttr("scan_input_directions", Ints(m, 0)));
  if (static_cast<int64_t>(inAxes.size()) != m || static_cast<int64_t>(inDirs.size()) != m)
    return ctx.error("scan_input_axes and scan_input_directions need {} entries, have {} and {}", m,
                     inAxes.size(), inDirs.size());
  std::vector<Value *> operands;
  std::vector<TensorType> bodyTypes;
  for (int64_t i = 0; i < numInputs; ++i) {
    NNC_ASSIGN_OR_RETURN(Value * x, ctx.requiredInput(static_cast<size_t>(i), "Scan input"));
    if (i >= n) {
      const int64_t s = i - n;
      if (x->rank() < 1)
        return ctx.error("scan input {} is a scalar; it needs an axis to scan", s);
      NNC_ASSIGN_OR_RETURN(int64_t axis,
                           ctx.normalizeAxis(inAxes[s], x->rank(), "scan_input_axes"));
      if (inDirs[s] != 0 && inDirs[s] != 1)
        return ctx.error("scan_input_directions[{}] = {} is not 0 or 1", s, inDirs[s]);
      NNC_ASSIGN_OR_RETURN(x, moveAxis(ctx, x, axis, 0));
      if (inDirs[s] == 1) {
        NNC_ASSIGN_OR_RETURN(x, reverseAxis(ctx, x, 0));
      }
    }
    operands.push_back(x);
    TensorType t = x->type();
    if (i >= n)
      t.shape.erase(t.shape.begin());
    bodyTypes.push_back(std::move(t));
  }
  NNC_ASSIGN_OR_RETURN(ImportedSubgraph body, ctx.subgraph("body", bodyTypes));
  const int64_t outs = static_cast<int64_t>(body.graph->outputs().size());
  if (outs < n)
    return ctx.error("the body returns {} values, fewer than its {} states", outs, n);
  const int64_t k = outs - n;
  std::vector<Value *> initial(operands.begin(), operands.begin() + n);
  NNC_TRY(checkStates(ctx, *body.graph, initial, 0));
  NNC_ASSIGN_OR_RETURN(Ints outAxes, ctx.intsAttr("scan_output_axes", Ints(k, 0)));
  NNC_ASSIGN_OR_RETURN(Ints outDirs, ctx.intsAttr("scan_output_directions", Ints(k, 0)));
  if (static_cast<int64_t>(outAxes.size()) != k || static_cast<int64_t>(outDirs.size()) != k)
    return ctx.error("scan_output_axes and scan_output_directions need {} entries, have {} and "
                     "{}",
                     k, outAxes.size(), outDirs.size());
  operands.insert(operands.end(), body.captured.begin(), body.captured.end());
  NNC_ASSIGN_OR_RETURN(Node * scan, emitScan(ctx, operands, body.graph, n, m));
  for (int64_t j = 0; j < n; ++j)
    NNC_TRY(ctx.setOutput(static_cast<size_t>(j), scan->result(j)));
  for (int64_t o = 0; o < k; ++o) {
    Value *y = scan->result(n + o);
    if (outDirs[o] != 0 && outDirs[o] != 1)
      return ctx.error("scan_output_directions[{}] = {} is not 0 or 1", o, outDirs[o]);
    if (outDirs[o] == 1) {
      NNC_ASSIGN_OR_RETURN(y, reverseAxis(ctx, y, 0));
    }
    NNC_ASSIGN_OR_RETURN(int64_t axis,
                         ctx.normalizeAxis(outAxes[o], y->rank(), "scan_output_axes"));
    NNC_ASSIGN_OR_RETURN(y, moveAxis(ctx, y, 0, axis));
    NNC_TRY(ctx.setOutput(static_cast<size_t>(n + o), y));
  }
  return Error::success();
}

/// A rank-0 or one-element value as a scalar.
Expected<Value *> asScalar(LoweringContext &ctx, Value *v, const char *what) {
  if (!oneElement(v))
    return ctx.error("{} must hold one element, not {}", what, v->type().str());
  if (v->rank() == 0)
    return v;
  return ctx.emit(OpKind::Reshape, {v, ctx.i64Vector({})});
}

/// Most steps a Loop carrying sequences is unrolled to.
constexpr int64_t kMaxUnrolledSteps = 4096;

/// A Loop whose loop-carried values include sequences or optionals: unrolled while importing,
/// each step its body lowered in place with the iteration number a constant, so positions
/// computed from it are known. The trip count and the condition must be known at import
/// time, and the body's condition must be a constant in every step.
Error lowerLoopUnrolled(LoweringContext &ctx) {
  std::optional<int64_t> trips;
  if (ctx.input(0)) {
    NNC_ASSIGN_OR_RETURN(Tensor m, ctx.constantInput(0, "the trip count M of a loop carrying "
                                                        "sequences"));
    if (m.numElements() != 1 || m.dtype() != DType::I64)
      return ctx.error("the trip count M must be an int64 scalar, not {}", m.type().str());
    trips = m.elementAsInt(0);
  }
  bool cond = true;
  if (ctx.input(1)) {
    NNC_ASSIGN_OR_RETURN(Tensor c, ctx.constantInput(1, "the condition of a loop carrying "
                                                        "sequences"));
    if (c.numElements() != 1 || c.dtype() != DType::Bool)
      return ctx.error("the condition must be a bool scalar, not {}", c.type().str());
    cond = c.elementAsDouble(0) != 0;
  }
  std::vector<ImportValue> states;
  for (size_t i = 2; i < ctx.numInputs(); ++i) {
    if (!ctx.input(i) && !ctx.compositeInput(i))
      return ctx.error("loop-carried value {} is missing", i - 2);
    states.push_back(ctx.inputValue(i));
  }
  const size_t n = states.size();
  NNC_ASSIGN_OR_RETURN(const onnx::GraphProto *bodyProto, ctx.graphAttr("body"));
  if (static_cast<size_t>(bodyProto->output_size()) < n + 1)
    return ctx.error("the body returns {} values; it needs the condition and {} loop-carried "
                     "values",
                     bodyProto->output_size(), n);
  const size_t k = static_cast<size_t>(bodyProto->output_size()) - 1 - n;
  std::vector<std::vector<Value *>> scanned(k);
  int64_t step = 0;
  for (; cond && (!trips || step < *trips); ++step) {
    if (step == kMaxUnrolledSteps)
      return ctx.error("a loop carrying sequences is unrolled while importing, and this one "
                       "runs more than {} steps",
                       kMaxUnrolledSteps);
    std::vector<ImportValue> args = {ctx.scalar(DType::I64, static_cast<double>(step)),
                                     ctx.constant(Tensor::scalar<bool>(DType::Bool, true))};
    args.insert(args.end(), states.begin(), states.end());
    NNC_ASSIGN_OR_RETURN(std::vector<ImportValue> outs, ctx.inlineSubgraph("body", args));
    Value *const *c = std::get_if<Value *>(&outs[0]);
    Node *p = c ? (*c)->producer() : nullptr;
    if (!p || p->kind() != OpKind::Constant || p->getTensor("value").numElements() != 1)
      return ctx.error("the body computes the loop's condition from data; a loop carrying "
                       "sequences is unrolled while importing and needs it known in every "
                       "step");
    cond = p->getTensor("value").elementAsDouble(0) != 0;
    for (size_t j = 0; j < n; ++j)
      states[j] = outs[1 + j];
    for (size_t o = 0; o < k; ++o) {
      Value *const *y = std::get_if<Value *>(&outs[1 + n + o]);
      if (!y)
        return ctx.error("the body's scan output {} is not a tensor", o);
      scanned[o].push_back(*y);
    }
  }
  for (size_t j = 0; j < n; ++j)
    NNC_TRY(ctx.setOutputValue(j, states[j]));
  for (size_t o = 0; o < k; ++o) {
    if (!ctx.hasOutput(n + o))
      continue;
    if (scanned[o].empty())
      return ctx.error("the loop runs no step, so the shape of its scan output {} is unknown",
                       o);
    std::vector<Value *> parts;
    for (Value *y : scanned[o]) {
      NNC_ASSIGN_OR_RETURN(Value * u,
                           ctx.emit(OpKind::Unsqueeze, {y}, {{"axes", Ints{0}}}));
      parts.push_back(u);
    }
    Value *y = parts[0];
    if (parts.size() > 1) {
      NNC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Concat, parts, {{"axis", int64_t{0}}}));
    }
    NNC_TRY(ctx.setOutput(n + o, y));
  }
  return Error::success();
}

/// The loop-carried values (of the n after the body's iteration number and condition inputs)
/// that the body's condition output depends on, directly or through the next values of
/// others it depends on; `used` gets the body nodes that the condition and those next values
/// read. A counter-driven while loop (`while i < n`) needs its counter alone.
std::vector<bool> whileStatesForCondition(const Graph &b, size_t n,
                                          std::unordered_set<const Node *> &used) {
  std::unordered_map<const Value *, size_t> inputIndex;
  for (size_t i = 0; i < b.inputs().size(); ++i)
    inputIndex[b.inputs()[i]] = i;
  std::vector<bool> need(n, false);
  std::vector<const Value *> work{b.outputs()[0]};
  std::unordered_set<const Value *> seen;
  while (!work.empty()) {
    const Value *v = work.back();
    work.pop_back();
    if (!v || !seen.insert(v).second)
      continue;
    if (auto it = inputIndex.find(v); it != inputIndex.end()) {
      size_t j = it->second;
      if (j >= 2 && j < 2 + n && !need[j - 2]) {
        need[j - 2] = true;
        work.push_back(b.outputs()[1 + (j - 2)]);
      }
      continue;
    }
    if (const Node *p = v->producer()) {
      used.insert(p);
      for (const Value *o : p->operands())
        work.push_back(o);
    }
  }
  return need;
}

/// A Loop whose body computes its condition from data: a `scan` with `while` = 1 whose
/// states are (the condition, the iteration number, the loop-carried values); its body runs
/// the Loop's body and returns the body's condition, and the trip count M's where there is
/// one (cond and i + 1 < M), with i + 1. Its result 1 is the number of steps it ran. The
/// body's per-step outputs are its results after the states where a bound on the steps is
/// given, `maxSteps` (M, known while importing) or `stepsSeq` (range(M), a sequence whose
/// steps the loop runs at most, of a length known when the graph is specialized on M's
/// value): they then have M rows, the first result-1 of them written; else they are left out
/// (emitLoop computes them in a counted loop). With `countOnly` (the
/// steps are all that is wanted of it) it carries only the loop-carried values that the
/// condition depends on (whileStatesForCondition), and computes only what they and the
/// condition need; its results 2.. are then those values.
Expected<Node *> emitWhileLoop(LoweringContext &ctx, const ImportedSubgraph &body,
                               const std::vector<Value *> &initial, Value *maxTrips, Value *cond,
                               bool countOnly = false, int64_t maxSteps = -1,
                               Value *stepsSeq = nullptr) {
  const Graph &b = *body.graph;
  const size_t n = initial.size();
  std::vector<bool> keep(n, true);
  std::unordered_set<const Node *> used;
  if (countOnly)
    keep = whileStatesForCondition(b, n, used);
  auto w = std::make_shared<Graph>(b.name());
  std::unordered_map<const Value *, Value *> map;
  Value *c = w->addInput("cond", TensorType(DType::Bool, {}));
  Value *i = w->addInput("iteration", TensorType(DType::I64, {}));
  map[b.inputs()[1]] = c; // true in every step that runs
  map[b.inputs()[0]] = i;
  for (size_t j = 0; j < n; ++j)
    if (keep[j])
      map[b.inputs()[2 + j]] =
          w->addInput(b.inputs()[2 + j]->name(), b.inputs()[2 + j]->type());
  if (stepsSeq) // its step (the iteration number again) is not read: it bounds the steps
    w->addInput("step", TensorType(DType::I64, {}));
  for (size_t q = 0; q < body.captured.size(); ++q)
    map[b.inputs()[2 + n + q]] =
        w->addInput(b.inputs()[2 + n + q]->name(), b.inputs()[2 + n + q]->type());
  Value *limit = maxTrips ? w->addInput("trip_count", TensorType(DType::I64, {})) : nullptr;
  for (const Node *node : b.nodes())
    if (!countOnly || used.count(node))
      copyNode(*w, *node, map);
  auto make = [&](OpKind kind, std::vector<Value *> ops) -> Expected<Value *> {
    Expected<Node *> node = w->createInferred(kind, std::move(ops));
    if (!node)
      return node.error().withContext(ctx.place());
    return (*node)->result();
  };
  auto wConstant = [&](Tensor t) {
    TensorType type = t.type();
    return w->createNode(OpKind::Constant, {}, {type}, {{"value", std::move(t)}})->result();
  };
  Value *next = map.at(b.outputs()[0]);
  if (!oneElement(next) || next->dtype() != DType::Bool)
    return ctx.error("the body's condition must be one bool, not {}", next->type().str());
  if (next->rank() > 0) {
    NNC_ASSIGN_OR_RETURN(
        next,
        make(OpKind::Reshape, {next, wConstant(Tensor::fromVector<int64_t>(DType::I64, {0}, {}))}));
  }
  NNC_ASSIGN_OR_RETURN(Value * iNext,
                       make(OpKind::Add, {i, wConstant(Tensor::scalar<int64_t>(DType::I64, 1))}));
  if (limit) {
    NNC_ASSIGN_OR_RETURN(Value * below, make(OpKind::Less, {iNext, limit}));
    NNC_ASSIGN_OR_RETURN(next, make(OpKind::And, {next, below}));
  }
  std::vector<Value *> outs{next, iNext};
  for (size_t j = 0; j < n; ++j)
    if (keep[j])
      outs.push_back(map.at(b.outputs()[1 + j]));
  for (size_t o = 1 + n; (maxSteps >= 0 || stepsSeq) && o < b.outputs().size(); ++o)
    outs.push_back(map.at(b.outputs()[o]));
  w->setOutputs(outs);

  // The initial condition: cond, and 0 < M.
  Value *c0 = cond ? cond : ctx.constant(Tensor::scalar<bool>(DType::Bool, true));
  if (maxTrips) {
    NNC_ASSIGN_OR_RETURN(Value * runs,
                         ctx.emit(OpKind::Less, {ctx.scalar(DType::I64, 0), maxTrips}));
    NNC_ASSIGN_OR_RETURN(c0, ctx.emit(OpKind::And, {c0, runs}));
  }
  std::vector<Value *> operands{c0, ctx.scalar(DType::I64, 0)};
  for (size_t j = 0; j < n; ++j)
    if (keep[j])
      operands.push_back(initial[j]);
  const int64_t carried = static_cast<int64_t>(operands.size());
  if (stepsSeq)
    operands.push_back(stepsSeq);
  operands.insert(operands.end(), body.captured.begin(), body.captured.end());
  if (maxTrips)
    operands.push_back(maxTrips);
  return emitScan(ctx, operands, w, carried, stepsSeq ? 1 : 0, /*whileLoop=*/true, maxSteps);
}

/// The most steps a while loop with per-step outputs known while importing runs in one pass
/// (its per-step outputs get that many rows); past it the steps are counted first (emitLoop).
constexpr int64_t kMaxWhileRows = 1 << 16;

/// A Loop of tensor states: `body` (inputs: iteration number, condition, the states, whose
/// initial values are `initial`; outputs: condition, states, per-step outputs) run from M
/// and the condition (either may be null; `tripsValue`: M's value where known while
/// importing). Returns the states' final values, then the per-step outputs stacked.
Expected<std::vector<Value *>> emitLoop(LoweringContext &ctx, const ImportedSubgraph &body,
                                        const std::vector<Value *> &initial, Value *maxTrips,
                                        const Tensor *tripsValue, Value *cond) {
  const size_t n = initial.size();
  Graph &b = *body.graph;
  if (b.outputs().size() < n + 1)
    return ctx.error("the body returns {} values; it needs the condition and {} loop-carried "
                     "values",
                     b.outputs().size(), n);
  NNC_TRY(checkStates(ctx, b, initial, 1));
  const size_t k = b.outputs().size() - 1 - n;
  // How the body's condition evolves: kept (passed through or constant true), false after
  // the first step, or computed (unsupported).
  Value *condOut = b.outputs()[0];
  bool keeps = condOut == b.inputs()[1], stops = false;
  if (Node *p = condOut->producer(); p && p->kind() == OpKind::Constant) {
    const Tensor &c = p->getTensor("value");
    if (c.numElements() == 1) {
      keeps = c.elementAsDouble(0) != 0;
      stops = !keeps;
    }
  }
  auto i64 = [&](int64_t v) { return ctx.scalar(DType::I64, static_cast<double>(v)); };
  Value *trips = nullptr;
  // With per-step outputs and a trip count M, one while loop writes them into M rows and the
  // rows it ran are taken: M known here bounds it (max_steps), else range(M) does, whose
  // length the staged execution specializes on M's value. Without M, or with a constant one
  // too large to give rows (PyTorch's INT64_MAX for a `while`), a while loop counts the steps
  // (carrying only what its condition reads) and a counted loop below runs them again.
  // (A known M of no steps keeps the counted loop, which makes it the initial states.)
  const double m = tripsValue ? tripsValue->elementAsDouble(0) : -1;
  const int64_t bound = k > 0 && m >= 1 && m <= double(kMaxWhileRows) ? int64_t(m) : -1;
  const bool rangeBound = k > 0 && maxTrips && !tripsValue;
  if (cond && !keeps && !stops && (bound >= 0 || rangeBound)) {
    Value *stepsSeq = nullptr;
    if (rangeBound) {
      NNC_ASSIGN_OR_RETURN(stepsSeq, ctx.emit(OpKind::Range, {i64(0), maxTrips, i64(1)}));
    }
    NNC_ASSIGN_OR_RETURN(Node * loop, emitWhileLoop(ctx, body, initial, maxTrips, cond,
                                                    /*countOnly=*/false, bound, stepsSeq));
    std::vector<Value *> results;
    for (size_t j = 0; j < n; ++j)
      results.push_back(loop->result(2 + j));
    auto one = [&](int64_t v) {
      return ctx.constant(Tensor::fromVector<int64_t>(DType::I64, {1}, {v}));
    };
    NNC_ASSIGN_OR_RETURN(Value * ran, ctx.emit(OpKind::Reshape, {loop->result(1), one(1)}));
    for (size_t o = 0; o < k; ++o) {
      NNC_ASSIGN_OR_RETURN(Value * rows,
                           ctx.emit(OpKind::Slice, {loop->result(2 + n + o), one(0), ran, one(0)}));
      results.push_back(rows);
    }
    return results;
  }
  if (cond && !keeps && !stops) {
    NNC_ASSIGN_OR_RETURN(Node * loop,
                         emitWhileLoop(ctx, body, initial, maxTrips, cond, /*countOnly=*/k > 0));
    if (k == 0) {
      std::vector<Value *> results;
      for (size_t j = 0; j < n; ++j)
        results.push_back(loop->result(2 + j));
      return results;
    }
    trips = loop->result(1); // the steps it ran; the counted loop below runs them again
  } else {
    if (!maxTrips && !(cond && stops))
      return ctx.error("the loop has no trip count M and its condition never turns false: it "
                       "would run forever");
    // The number of iterations n: M, at most 1 when the body stops, 0 unless cond holds.
    trips = maxTrips ? maxTrips : i64(1);
    if (cond && stops) {
      NNC_ASSIGN_OR_RETURN(trips, ctx.emit(OpKind::Min, {trips, i64(1)}));
    }
    if (cond) {
      NNC_ASSIGN_OR_RETURN(trips, ctx.emit(OpKind::Select, {cond, trips, i64(0)}));
    }
    NNC_ASSIGN_OR_RETURN(trips, ctx.emit(OpKind::Max, {trips, i64(0)}));
  }
  NNC_ASSIGN_OR_RETURN(Value * iters, ctx.emit(OpKind::Range, {i64(0), trips, i64(1)}));

  // The scan's body: inputs (states, iteration number, condition, captured), outputs
  // (states, per-step outputs); the condition is true in every step that runs.
  auto step = std::make_shared<Graph>(b.name());
  std::unordered_map<const Value *, Value *> map;
  std::vector<size_t> order;
  for (size_t j = 0; j < n; ++j)
    order.push_back(2 + j);
  order.push_back(0);
  order.push_back(1);
  for (size_t c = 0; c < body.captured.size(); ++c)
    order.push_back(2 + n + c);
  for (size_t i : order)
    map[b.inputs()[i]] = step->addInput(b.inputs()[i]->name(), b.inputs()[i]->type());
  for (const Node *node : b.nodes())
    copyNode(*step, *node, map);
  std::vector<Value *> outs;
  for (size_t o = 1; o < b.outputs().size(); ++o)
    outs.push_back(map.at(b.outputs()[o]));
  step->setOutputs(outs);

  std::vector<Value *> operands = initial;
  operands.push_back(iters);
  operands.push_back(ctx.constant(Tensor::scalar<bool>(DType::Bool, true)));
  operands.insert(operands.end(), body.captured.begin(), body.captured.end());
  NNC_ASSIGN_OR_RETURN(Node * scan, emitScan(ctx, operands, step, static_cast<int64_t>(n), 1));
  std::vector<Value *> results;
  for (size_t o = 0; o < n + k; ++o)
    results.push_back(scan->result(o));
  return results;
}


bool mentions(const onnx::NodeProto &node, const std::string &name);

/// True when a node of `g`, or of a graph nested in it, reads or defines a value `name`.
bool mentions(const onnx::GraphProto &g, const std::string &name) {
  for (const onnx::NodeProto &node : g.node())
    if (mentions(node, name))
      return true;
  return false;
}

/// True when `node`, or a graph nested in it, reads or defines a value named `name`.
bool mentions(const onnx::NodeProto &node, const std::string &name) {
  for (const std::string &x : node.input())
    if (x == name)
      return true;
  for (const std::string &y : node.output())
    if (y == name)
      return true;
  for (const onnx::AttributeProto &a : node.attribute()) {
    if (a.has_g() && mentions(a.g(), name))
      return true;
    for (const onnx::GraphProto &sub : a.graphs())
      if (mentions(sub, name))
        return true;
  }
  return false;
}

/// A Loop body whose loop-carried sequences `seqs` (their positions among the loop-carried
/// values) are each only appended to, one tensor per step (`s_out = SequenceInsert(s_in, v)`,
/// s_in and s_out used nowhere else): the same body with those states dropped and each v
/// returned as a per-step output after the body's own. Null when a sequence is used
/// otherwise.
std::optional<onnx::GraphProto> appendingBody(const onnx::GraphProto &body,
                                              const std::vector<size_t> &seqs) {
  onnx::GraphProto g = body;
  std::vector<std::string> appended;
  std::set<int> droppedNodes, droppedInputs, droppedOutputs;
  for (size_t j : seqs) {
    const int in = static_cast<int>(2 + j), out = static_cast<int>(1 + j);
    if (in >= body.input_size() || out >= body.output_size())
      return std::nullopt;
    const std::string &sIn = body.input(in).name(), &sOut = body.output(out).name();
    int insert = -1;
    for (int i = 0; i < body.node_size(); ++i) {
      const onnx::NodeProto &node = body.node(i);
      if (!mentions(node, sIn) && !mentions(node, sOut))
        continue;
      bool appends = node.op_type() == "SequenceInsert" &&
                     (node.domain().empty() || node.domain() == "ai.onnx") &&
                     (node.input_size() == 2 ||
                      (node.input_size() == 3 && node.input(2).empty())) &&
                     node.input(0) == sIn && node.input(1) != sIn && node.output_size() == 1 &&
                     node.output(0) == sOut && node.attribute_size() == 0;
      if (!appends || insert >= 0)
        return std::nullopt;
      insert = i;
    }
    int outputUses = 0;
    for (const onnx::ValueInfoProto &o : body.output())
      outputUses += o.name() == sIn ? 2 : o.name() == sOut ? 1 : 0;
    if (insert < 0 || outputUses != 1)
      return std::nullopt;
    droppedNodes.insert(insert);
    droppedInputs.insert(in);
    droppedOutputs.insert(out);
    appended.push_back(body.node(insert).input(1));
  }
  g.clear_node();
  g.clear_input();
  g.clear_output();
  for (int i = 0; i < body.node_size(); ++i)
    if (!droppedNodes.count(i))
      *g.add_node() = body.node(i);
  for (int i = 0; i < body.input_size(); ++i)
    if (!droppedInputs.count(i))
      *g.add_input() = body.input(i);
  for (int i = 0; i < body.output_size(); ++i)
    if (!droppedOutputs.count(i))
      *g.add_output() = body.output(i);
  for (const std::string &v : appended)
    g.add_output()->set_name(v);
  return g;
}

/// True when the body passes the loop's condition through (Identity chains included) or
/// returns a constant for it.
bool conditionIsStatic(const onnx::GraphProto &body) {
  if (body.output_size() < 1 || body.input_size() < 2)
    return false;
  std::string c = body.output(0).name();
  for (int hops = 0; hops <= body.node_size(); ++hops) {
    if (c == body.input(1).name())
      return true;
    const onnx::NodeProto *producer = nullptr;
    for (const onnx::NodeProto &node : body.node())
      for (const std::string &y : node.output())
        if (y == c)
          producer = &node;
    if (!producer || producer->op_type() == "Constant")
      return producer != nullptr;
    if (producer->op_type() != "Identity" || producer->input_size() != 1)
      return false;
    c = producer->input(0);
  }
  return false;
}

/// Loop. Its loop-carried sequences that the body only appends to (a list appended to in a
/// Python loop, exported by PyTorch) become per-step outputs when the loop's steps are known
/// only at run time: each such sequence is its initial elements followed by the rows of
/// that output (StaticValue::rows). Other loops carrying sequences are unrolled while
/// importing (lowerLoopUnrolled).
Error lowerLoop(LoweringContext &ctx) {
  for (size_t i = 0; i < 2; ++i)
    if (const StaticValue *s = ctx.compositeInput(i))
      return ctx.error("input {} ({}) must be a tensor, not a {}", i,
                       i == 0 ? "the trip count M" : "the condition", s->kindName());
  std::vector<size_t> seqs;
  for (size_t i = 2; i < ctx.numInputs(); ++i)
    if (const StaticValue *s = ctx.compositeInput(i)) {
      if (s->optional)
        return lowerLoopUnrolled(ctx);
      seqs.push_back(i - 2);
    }
  // Unrolled where it can be (its steps known while importing: M and the condition known,
  // the body's condition passed through or constant), else per-step outputs where the body
  // only appends to the sequences.
  std::optional<onnx::GraphProto> appending;
  if (!seqs.empty()) {
    NNC_ASSIGN_OR_RETURN(const onnx::GraphProto *bp, ctx.graphAttr("body"));
    bool unrolls = (!ctx.input(0) || ctx.knownInputValue(0)) &&
                   (!ctx.input(1) || ctx.knownInputValue(1)) && conditionIsStatic(*bp);
    if (!unrolls)
      appending = appendingBody(*bp, seqs);
    if (!appending)
      return lowerLoopUnrolled(ctx);
  }
  Value *maxTrips = ctx.input(0), *cond = ctx.input(1);
  if (maxTrips) {
    NNC_ASSIGN_OR_RETURN(maxTrips, asScalar(ctx, maxTrips, "the trip count M"));
    if (maxTrips->dtype() != DType::I64)
      return ctx.error("the trip count M must be int64, not {}", dtypeName(maxTrips->dtype()));
  }
  if (cond) {
    NNC_ASSIGN_OR_RETURN(cond, asScalar(ctx, cond, "the condition"));
    if (cond->dtype() != DType::Bool)
      return ctx.error("the condition must be bool, not {}", dtypeName(cond->dtype()));
  }
  std::vector<Value *> initial;
  std::vector<TensorType> bodyTypes = {TensorType(DType::I64, {}), TensorType(DType::Bool, {})};
  for (size_t i = 2; i < ctx.numInputs(); ++i) {
    if (ctx.compositeInput(i))
      continue;
    NNC_ASSIGN_OR_RETURN(Value * v, ctx.requiredInput(i, "loop-carried value"));
    initial.push_back(v);
    bodyTypes.push_back(v->type());
  }
  NNC_ASSIGN_OR_RETURN(ImportedSubgraph body,
                       appending ? ctx.subgraph(*appending, "body", bodyTypes)
                                 : ctx.subgraph("body", bodyTypes));
  NNC_ASSIGN_OR_RETURN(std::vector<Value *> results,
                       emitLoop(ctx, body, initial, maxTrips,
                                maxTrips ? ctx.tryConstantInput(0) : nullptr, cond));
  // results: the tensor states, the body's per-step outputs, one per appended sequence.
  const size_t carried = ctx.numInputs() - 2, tensors = initial.size();
  const size_t k = results.size() - tensors - seqs.size();
  size_t t = 0, q = 0;
  for (size_t j = 0; j < carried; ++j) {
    if (q < seqs.size() && seqs[q] == j) {
      StaticValue out = *ctx.compositeInput(2 + j);
      Value *rows = results[tensors + k + q++];
      if ((!out.elements.empty() || out.rows) && rows->dtype() != out.dtype)
        return ctx.error("loop-carried sequence {} holds {} tensors but the body appends {}",
                         j, dtypeName(out.dtype), rows->type().str());
      out.dtype = rows->dtype();
      if (out.rows) {
        NNC_ASSIGN_OR_RETURN(rows,
                             ctx.emit(OpKind::Concat, {out.rows, rows}, {{"axis", int64_t{0}}}));
      }
      out.rows = rows;
      NNC_TRY(ctx.setCompositeOutput(j, std::move(out)));
    } else {
      NNC_TRY(ctx.setOutput(j, results[t++]));
    }
  }
  for (size_t o = 0; o < k; ++o)
    NNC_TRY(ctx.setOutput(carried + o, results[tensors + o]));
  return Error::success();
}

Error lowerIf(LoweringContext &ctx) {
  NNC_ASSIGN_OR_RETURN(Value * cond, ctx.requiredInput(0, "cond"));
  NNC_ASSIGN_OR_RETURN(cond, asScalar(ctx, cond, "the condition"));
  if (cond->dtype() != DType::Bool)
    return ctx.error("the condition must be bool, not {}", dtypeName(cond->dtype()));
  // A condition known now: only the taken branch is imported (the other may hold what this
  // model never runs).
  std::optional<Tensor> known = ctx.knownInputValue(0);
  if (known) {
    const char *taken = known->elementAsDouble(0) != 0 ? "then_branch" : "else_branch";
    NNC_ASSIGN_OR_RETURN(std::vector<ImportValue> outs, ctx.inlineSubgraph(taken, {}));
    for (size_t o = 0; o < outs.size(); ++o)
      NNC_TRY(ctx.setOutputValue(o, outs[o]));
    return Error::success();
  }
  NNC_ASSIGN_OR_RETURN(ImportedSubgraph thenBr, ctx.subgraph("then_branch", {}));
  NNC_ASSIGN_OR_RETURN(ImportedSubgraph elseBr, ctx.subgraph("else_branch", {}));
  const size_t k = thenBr.graph->outputs().size();
  if (elseBr.graph->outputs().size() != k)
    return ctx.error("then_branch returns {} values but else_branch {}", k,
                     elseBr.graph->outputs().size());
  if (k == 0)
    return ctx.error("the branches return no values");
  // One body: the captured values of both branches as inputs, then's results, else's.
  auto both = std::make_shared<Graph>("branches");
  std::vector<Value *> operands = {cond}, outs;
  for (ImportedSubgraph *br : {&thenBr, &elseBr}) {
    std::unordered_map<const Value *, Value *> map;
    for (size_t i = 0; i < br->captured.size(); ++i) {
      map[br->graph->inputs()[i]] =
          both->addInput(br->graph->inputs()[i]->name(), br->captured[i]->type());
      operands.push_back(br->captured[i]);
    }
    for (const Node *node : br->graph->nodes())
      copyNode(*both, *node, map);
    for (Value *o : br->graph->outputs())
      outs.push_back(map.at(o));
  }
  both->setOutputs(outs);
  Node *n = ctx.graph().createNode(OpKind::If, operands, std::vector<TensorType>(k), {},
                                   ctx.proto().name());
  n->setBody(both);
  Expected<std::vector<TensorType>> types = n->info().infer(*n);
  if (!types) {
    ctx.graph().eraseNode(n);
    return types.error().withContext(ctx.place());
  }
  ctx.adopt(*n);
  for (size_t o = 0; o < k; ++o) {
    n->result(o)->setType((*types)[o]);
    NNC_TRY(ctx.setOutput(o, n->result(o)));
  }
  return Error::success();
}

} // namespace

void registerControlFlowLowerings(LoweringTable &t) {
  t["Scan"] = {{"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                "scan_output_axes", "scan_output_directions", "directions"},
               lowerScan};
  t["Loop"] = {{"body"}, lowerLoop, /*composite=*/true};
  t["If"] = {{"then_branch", "else_branch"}, lowerIf};
}

} // namespace nnc::onnxfe
