// The launch plan shared by the CPU and OpenCL executables (see LaunchPlan.h).
#include "LaunchPlan.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "BufferPlan.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/ir/Loop.h"
#include "nnc/ir/Quantize.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Debug.h"

namespace nnc {

namespace {

std::string sanitize(std::string_view s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

/// One buildLaunchPlan (LaunchPlan.h's steps, each a method): the plan being filled, the slot
/// of every value bound so far, and the arena requests with their liveness.
class PlanBuilder {
public:
  PlanBuilder(const Graph &g, const char *target, const tuning::ConfigSource *tuning,
              const CpuTarget &cpu, const GpuTarget *gpu, int threads, bool loopBody);
  // lowerOpts_'s callbacks point at this builder.
  PlanBuilder(const PlanBuilder &) = delete;
  PlanBuilder &operator=(const PlanBuilder &) = delete;

  Expected<LaunchPlan> build();

private:
  Expected<Extents> staticOf(const Value *v) const;
  Error checkResultSizes() const;
  Error bindInputsAndConstants();
  Error bindOutputs();
  Slot reserveStatus(const std::vector<RunCheck> &checks, int64_t bytes);
  Expected<std::vector<int>> addScan(const Node &n, const std::string &prefix);
  Error addUnit(const LoweringUnit &unit, size_t position);
  Expected<Slot> bindParameter(const LoweringUnit &unit, const kir::Kernel &k,
                               const kir::BufferDecl &b, int launch, const std::string &prefix,
                               std::map<int, int> &scratchRequest,
                               std::map<int, int> &extentRequest);
  void reuseOperandsInPlace(const std::vector<LoweringUnit> &units);
  void reuseInPlace(const LoweringUnit &unit, int launch, const kir::BufferDecl &result,
                    const Slot &resultSlot, std::vector<bool> &reusedAlready);
  void countTuningUse();
  Error keepDynamicOutputsLive();
  void placeBuffers();

  const Graph &g_;
  const char *target_;
  const tuning::ConfigSource *tuning_;
  const CpuTarget &cpu_;
  const GpuTarget *gpu_;
  LaunchPlan p_;
  std::vector<Node *> nodes_; ///< The graph's nodes in order.
  std::unordered_map<const Value *, Slot> slots_;
  /// Results whose last dim depends on data (graph outputs only) -> their output index.
  std::unordered_map<const Value *, int> dynamicOutput_;
  std::vector<BufferRequest> requests_;
  std::unordered_map<const Value *, int> requestOfValue_, extentRequestOfValue_;
  std::vector<std::vector<int>> nodeKernels_; // per unit: launch indices
  std::map<std::string, bool> tunedBySignature_;
  tuning::LowerOptions lowerOpts_;
  // The status area of the kernels' runtime checks: one arena request live over the whole
  // run (the run zeroes it first and reads it last), a 64-byte aligned part per checking
  // kernel (or loop body) so kernels may assume their buffers aligned.
  int statusRequest_ = -1;
  int64_t statusBytes_ = 0;
};

PlanBuilder::PlanBuilder(const Graph &g, const char *target, const tuning::ConfigSource *tuning,
                         const CpuTarget &cpu, const GpuTarget *gpu, int threads, bool loopBody)
    : g_(g), target_(target), tuning_(tuning), cpu_(cpu), gpu_(gpu), lowerOpts_(cpu) {
  lowerOpts_.configs = tuning;
  lowerOpts_.threads = threads;
  lowerOpts_.loopBody = loopBody;
  if (gpu)
    lowerOpts_.gpu = *gpu;
  lowerOpts_.onTunable = [this](const tuning::Problem &tp, bool tuned) {
    tunedBySignature_[tp.signature] = tuned;
  };
}

Expected<Extents> PlanBuilder::staticOf(const Value *v) const {
  std::optional<Extents> e = staticExtents(v->shape());
  if (!e)
    return makeError("value %{} has the symbolic type {}; the {} target compiles static "
                     "shapes (specialize them first)",
                     v->name(), v->type().str(), target_);
  return *e;
}

/// 0. Every static result fits in memory: an absurd one (a 2^40-element Expand, a shape
/// that only constant folding made huge) is refused here, naming its node, before a kernel
/// is lowered with extents whose product overflows.
Error PlanBuilder::checkResultSizes() const {
  for (const Node *n : g_.nodes())
    for (const Value *r : n->results()) {
      std::optional<Extents> e = staticExtents(r->shape());
      if (!e)
        continue;
      std::optional<int64_t> count = checkedNumElements(*e);
      int64_t esize = static_cast<int64_t>(std::max<size_t>(1, dtypeSize(r->dtype())));
      if (!count || *count > maxTensorBytes() / esize)
        return n->error("result %{} is {}: too large (more than the {}-byte limit, "
                        "NNC_MAX_TENSOR_BYTES)",
                        r->name(), r->type().str(), maxTensorBytes());
    }
  return Error::success();
}

/// 1. Slots of inputs and constants (weights, sharing the graph's buffers).
Error PlanBuilder::bindInputsAndConstants() {
  for (size_t i = 0; i < g_.inputs().size(); ++i) {
    const Value *v = g_.inputs()[i];
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(v));
    (void)e;
    p_.inputNames.push_back(v->name());
    p_.inputTypes.push_back(v->type());
    slots_[v] = {SlotKind::Input, static_cast<int>(i)};
  }
  nodes_ = g_.nodes();
  for (Node *n : nodes_) {
    if (n->kind() != OpKind::Constant)
      continue;
    const Tensor &t = n->getTensor("value");
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(n->result()));
    if (t.dtype() != n->result()->dtype() || t.extents() != e)
      return n->error("value is {}{} but the result is declared {}", dtypeName(t.dtype()),
                      extentsStr(t.extents()), n->result()->type().str());
    slots_[n->result()] = {SlotKind::Weight, static_cast<int>(p_.weights.size())};
    p_.weights.push_back(t); // shares the graph's buffer: kernels only read weights
  }
  return Error::success();
}

/// Results with one dim that depends on data (the others static): allowed only as graph
/// outputs (a graph that consumes one is compiled in stages by CpuModel); arena requests of
/// their data and extent. Every other output is bound per run, or is a copy of an input,
/// weight or earlier output.
Error PlanBuilder::bindOutputs() {
  for (size_t o = 0; o < g_.outputs().size(); ++o) {
    const Value *v = g_.outputs()[o];
    Extents dyn;
    int symbolic = 0;
    for (const Dim &d : v->shape()) {
      symbolic += d.isStatic() ? 0 : 1;
      dyn.push_back(d.isStatic() ? d.value() : -1);
    }
    if (symbolic == 1 && !v->isGraphInput() && !dynamicOutput_.count(v)) {
      dynamicOutput_[v] = static_cast<int>(o);
      p_.outputs.push_back({OutputSpec::Dynamic, static_cast<int>(o), v->dtype(), dyn});
      continue;
    }
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(v));
    OutputSpec spec{OutputSpec::Fresh, static_cast<int>(o), v->dtype(), e};
    auto it = slots_.find(v);
    if (it != slots_.end()) {
      switch (it->second.kind) {
      case SlotKind::Input:
        spec.kind = OutputSpec::FromInput;
        break;
      case SlotKind::Weight:
        spec.kind = OutputSpec::FromWeight;
        break;
      case SlotKind::Output:
        spec.kind = OutputSpec::CopyOfOutput;
        break;
      case SlotKind::Arena:
        NNC_ASSERT(false);
      }
      spec.index = static_cast<int>(it->second.index);
    } else {
      slots_[v] = {SlotKind::Output, static_cast<int>(o)};
    }
    p_.outputs.push_back(spec);
  }
  return Error::success();
}

/// The status area of the kernels' runtime checks: one arena request live over the whole
/// run (the run zeroes it first and reads it last), a 64-byte aligned part per checking
/// kernel (or loop body) so kernels may assume their buffers aligned.
Slot PlanBuilder::reserveStatus(const std::vector<RunCheck> &checks, int64_t bytes) {
  if (statusRequest_ < 0) {
    statusRequest_ = static_cast<int>(requests_.size());
    requests_.push_back({"status", 0, 0, 0});
  }
  int64_t at = statusBytes_;
  for (const RunCheck &c : checks)
    p_.checks.push_back({at + c.offset, c.before, c.after});
  statusBytes_ += (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  return {SlotKind::Arena, statusRequest_, at};
}

/// `body` with the loops nested in it reading and writing buffers that stay in place from one
/// iteration of the loop around them to the next (the first `movingInputs` inputs are its
/// states and steps of sequences, which move): each operand of such a loop that may move (one
/// of those inputs, a body output, or what a view makes of one) is first copied (a cast to its
/// own type), and each of its results that is a body output is copied there. The nested
/// loop's own per-iteration bindings then hold the same slots in every iteration of the outer
/// one, and the outer loop's bindings reach the copies. Null when `body` runs no loop.
Expected<std::unique_ptr<Graph>> isolateNestedLoops(const Graph &body, int64_t movingInputs) {
  auto isLoop = [](const Node *m) { return m->kind() == OpKind::Scan; };
  const std::vector<Node *> nodes = body.nodes();
  if (std::none_of(nodes.begin(), nodes.end(), isLoop))
    return std::unique_ptr<Graph>();
  std::unique_ptr<Graph> g = body.clone();
  const std::vector<Value *> &ins = g->inputs();
  auto mayMove = [&](const Value *v) {
    auto in = std::find(ins.begin(), ins.end(), v);
    if (in != ins.end())
      return in - ins.begin() < movingInputs;
    const Node *def = v->producer();
    return g->isOutput(v) || (def && isStorageView(*def));
  };
  auto copyOf = [&](Value *v, Node *before) -> Expected<Value *> {
    NNC_ASSIGN_OR_RETURN(Node * c, g->createInferred(OpKind::Cast, {v}, {{"to", v->dtype()}},
                                                     v->name() + "_copy", -1, {}, before));
    return c->result();
  };
  for (Node *m : g->nodes()) {
    if (!isLoop(m))
      continue;
    for (size_t i = 0; i < m->numOperands(); ++i) {
      if (m->operand(i) && mayMove(m->operand(i))) {
        NNC_ASSIGN_OR_RETURN(Value * c, copyOf(m->operand(i), m));
        m->setOperand(i, c);
      }
    }
    for (Value *r : m->results()) {
      if (!g->isOutput(r))
        continue;
      NNC_ASSIGN_OR_RETURN(Value * c, copyOf(r, nullptr));
      for (size_t o = 0; o < g->outputs().size(); ++o)
        if (g->outputs()[o] == r)
          g->setOutput(o, c);
    }
  }
  return g;
}

/// A loop node: its body's own launch plan appended as a loop (LoopPlan) over the body's
/// launches. Everything the body touches lives across all of its launches: the operands and
/// results, the body's arena (one request) and, per state, a second buffer. Iteration t
/// writes state j to the result's buffer when T-1-t is even, else to the second one, and
/// reads it where iteration t-1 wrote it (the initial state in iteration 0); step t of a
/// sequence is its slot plus t times the step's bytes. A while loop's iterations are known
/// only as it runs: its iteration t writes the states to the results when t is even, else to
/// the second buffers, so t = 0, 1 and 2 stand for every iteration (LoopPlan::phase), and a
/// final copy brings the states to the results where the last iteration left them elsewhere.
Expected<std::vector<int>> PlanBuilder::addScan(const Node &n, const std::string &prefix) {
  NNC_ASSIGN_OR_RETURN(ScanParts sp, scanParts(n));
  int64_t steps = 3; // a while loop's phases
  if (!sp.whileLoop) {
    NNC_ASSIGN_OR_RETURN(Extents seq, staticOf(n.operand(sp.carried)));
    steps = seq[0];
  }
  if (steps < 1)
    return n.error("a loop of {} steps", steps);
  // The steps of the sequences and the rows of the per-step outputs: a while loop's bound on
  // its steps where it has one (scanParts' steps: its sequences' or max_steps).
  const bool bounded = sp.whileLoop && (sp.scanInputs > 0 || sp.scanOutputs > 0);
  if (bounded && (!sp.steps.isStatic() || sp.steps.value() < 1))
    return n.error("a while loop of at most {} steps", sp.steps.str());
  const int64_t rows = !sp.whileLoop ? steps : bounded ? sp.steps.value() : 0;
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> isolated,
                       isolateNestedLoops(*n.body(), sp.carried + sp.scanInputs));
  NNC_ASSIGN_OR_RETURN(LaunchPlan body,
                       buildLaunchPlan(isolated ? *isolated : *n.body(), target_, tuning_, cpu_,
                                       gpu_, lowerOpts_.threads, /*loopBody=*/true));
  if (body.kernels.empty())
    return n.error("the loop body computes nothing");
  const int first = static_cast<int>(p_.kernels.size());
  const int last = first + static_cast<int>(body.kernels.size()) - 1;
  auto bytesOf = [](const Value *v) {
    return *checkedNumElements(*staticExtents(v->shape())) *
           static_cast<int64_t>(dtypeSize(v->dtype()));
  };
  // The outer slot of a value, live over the whole loop.
  auto bind = [&](const Value *v) -> Slot {
    auto it = slots_.find(v);
    if (it != slots_.end() && it->second.kind != SlotKind::Arena)
      return it->second;
    auto [rit, inserted] = requestOfValue_.emplace(v, static_cast<int>(requests_.size()));
    if (inserted) {
      requests_.push_back({v->name(), bytesOf(v), first, last});
      slots_[v] = {SlotKind::Arena, rit->second};
    }
    BufferRequest &q = requests_[rit->second];
    q.firstUse = std::min(q.firstUse, first);
    q.lastUse = std::max(q.lastUse, last);
    return {SlotKind::Arena, rit->second};
  };
  auto request = [&](std::string name, int64_t bytes) -> Slot {
    requests_.push_back({std::move(name), std::max<int64_t>(bytes, 1), first, last});
    return {SlotKind::Arena, static_cast<int64_t>(requests_.size()) - 1};
  };
  auto plus = [](Slot s, int64_t bytes) {
    s.offset += bytes;
    return s;
  };
  auto stepOf = [&](int64_t t) { return sp.reverse ? steps - 1 - t : t; };
  // Kernels may assume that a result as large as a streaming store is 64-byte aligned
  // (llvmcg::kBufferAlignment); a step of a per-step output must then keep that alignment.
  auto stepBytesOf = [&](int64_t o) { return bytesOf(n.result(o)) / rows; };
  for (int64_t o = sp.carried; o < static_cast<int64_t>(n.numResults()); ++o) {
    int64_t stepBytes = stepBytesOf(o);
    if (stepBytes % kArenaAlignment != 0 && stepBytes >= cpu_.streamingStoreBytes)
      return n.error("per-step output {} has steps of {} bytes, not a multiple of {}", o,
                     stepBytes, kArenaAlignment);
  }
  std::vector<Slot> operandSlots, resultSlots, spare;
  for (const Value *v : n.operands())
    operandSlots.push_back(bind(v));
  for (const Value *v : n.results())
    resultSlots.push_back(bind(v));
  for (int64_t j = 0; j < sp.carried; ++j)
    spare.push_back(request(fmt::format("{}/state{}", prefix, j), bytesOf(n.result(j))));
  const Slot arena = request(prefix + "/body", body.arenaBytes);
  // Where state j is written in iteration t (the last one's writes are the results).
  auto stateAt = [&](int64_t j, int64_t t) {
    return (sp.whileLoop ? t : steps - 1 - t) % 2 == 0 ? resultSlots[j] : spare[j];
  };
  // Where body input i and body output o are in iteration t.
  auto inputAt = [&](int64_t i, int64_t t) -> Slot {
    if (i < sp.carried)
      return t == 0 ? operandSlots[i] : stateAt(i, t - 1);
    if (i < sp.carried + sp.scanInputs)
      return sp.whileLoop ? operandSlots[i]
                          : plus(operandSlots[i], stepOf(t) * bytesOf(n.operand(i)) / steps);
    return operandSlots[i];
  };
  // A while loop's step of sequence i: the launch list adds t steps to its row 0 above.
  auto inputStride = [&](int64_t i) -> int64_t {
    return sp.whileLoop && i >= sp.carried && i < sp.carried + sp.scanInputs
               ? bytesOf(n.operand(i)) / rows
               : 0;
  };
  // A while loop's per-step output o is at its row 0 here; the launch list adds t rows
  // (outputStride).
  auto outputAt = [&](int64_t o, int64_t t) -> Slot {
    if (o < sp.carried)
      return stateAt(o, t);
    return sp.whileLoop ? resultSlots[o] : plus(resultSlots[o], stepOf(t) * stepBytesOf(o));
  };
  auto outputStride = [&](int64_t o) -> int64_t {
    return sp.whileLoop && o >= sp.carried ? stepBytesOf(o) : 0;
  };
  const int64_t weightBase = static_cast<int64_t>(p_.weights.size());
  p_.weights.insert(p_.weights.end(), body.weights.begin(), body.weights.end());
  // The body's status area becomes a part of the outer one (every iteration reports there).
  const Slot status = body.statusBytes > 0 ? reserveStatus(body.checks, body.statusBytes)
                                           : Slot{SlotKind::Arena, -1};
  auto inBodyStatus = [&](int64_t at) {
    return body.statusBytes > 0 && at >= body.statusOffset &&
           at < body.statusOffset + body.statusBytes;
  };
  // Body slot -> outer slot in iteration t.
  auto slotAt = [&](const Slot &s, int64_t t) -> Slot {
    switch (s.kind) {
    case SlotKind::Input:
      return plus(inputAt(s.index, t), s.offset);
    case SlotKind::Output:
      return plus(outputAt(s.index, t), s.offset);
    case SlotKind::Weight:
      return {SlotKind::Weight, weightBase + s.index, s.offset};
    case SlotKind::Arena:
      if (inBodyStatus(s.index + s.offset))
        return plus(status, s.index + s.offset - body.statusOffset);
      return plus(arena, s.index + s.offset);
    }
    return s;
  };
  auto varies = [&](const Slot &s) {
    return (s.kind == SlotKind::Input && s.index < sp.carried + sp.scanInputs) ||
           s.kind == SlotKind::Output;
  };
  LoopPlan loop;
  loop.firstKernel = static_cast<size_t>(first);
  loop.numKernels = body.kernels.size();
  loop.count = sp.whileLoop ? -1 : steps;
  loop.maxSteps = bounded ? rows : -1;
  if (sp.whileLoop)
    for (int64_t t = 0; t < steps; ++t)
      loop.condition.push_back(inputAt(0, t));
  std::vector<int> launchIdx;
  const size_t argBase = p_.args.size();
  for (size_t k = 0; k < body.kernels.size(); ++k) {
    p_.firstArg.push_back(p_.args.size());
    for (size_t a = 0; a < body.numArgs(k); ++a) {
      const Slot &s = body.args[body.firstArg[k] + a];
      if (varies(s)) {
        LoopPlan::Binding b{p_.args.size(), {}};
        for (int64_t t = 0; t < steps; ++t)
          b.slots.push_back(slotAt(s, t));
        b.stride = s.kind == SlotKind::Output ? outputStride(s.index) : inputStride(s.index);
        loop.bindings.push_back(std::move(b));
      }
      p_.args.push_back(slotAt(s, 0));
    }
    kir::Kernel kernel = std::move(body.kernels[k]);
    kernel.name = prefix + "_" + kernel.name;
    launchIdx.push_back(static_cast<int>(p_.kernels.size()));
    std::vector<std::string> sources;
    for (const std::string &src : body.kernelSources[k])
      sources.push_back(fmt::format("{} / {}", n.name().empty() ? prefix : n.name(), src));
    p_.kernelSources.push_back(std::move(sources));
    p_.kernelFlops.push_back(body.kernelFlops[k] * static_cast<double>(sp.whileLoop ? 1 : steps));
    p_.kernels.push_back(std::move(kernel));
  }
  // Body outputs that no kernel writes: copies after each iteration.
  for (size_t o = 0; o < body.outputs.size(); ++o) {
    const OutputSpec &spec = body.outputs[o];
    if (spec.kind == OutputSpec::Fresh)
      continue;
    if (spec.kind == OutputSpec::Dynamic)
      return n.error("body output {} has a data-dependent shape", o);
    LoopPlan::Copy c;
    c.bytes = bytesOf(n.body()->outputs()[o]);
    for (int64_t t = 0; t < steps; ++t) {
      Slot src = spec.kind == OutputSpec::FromInput ? inputAt(spec.index, t)
                 : spec.kind == OutputSpec::FromWeight
                     ? Slot{SlotKind::Weight, weightBase + spec.index}
                     : outputAt(spec.index, t);
      c.src.push_back(src);
      c.dst.push_back(outputAt(static_cast<int64_t>(o), t));
    }
    if (spec.kind == OutputSpec::CopyOfOutput)
      c.srcStride = outputStride(spec.index);
    if (spec.kind == OutputSpec::FromInput)
      c.srcStride = inputStride(spec.index);
    c.dstStride = outputStride(static_cast<int64_t>(o));
    loop.copies.push_back(std::move(c));
  }
  // A while loop stopped before iteration t has its states where iteration t would read them.
  for (int64_t j = 0; sp.whileLoop && j < sp.carried; ++j) {
    LoopPlan::Copy c;
    c.bytes = bytesOf(n.result(j));
    for (int64_t t = 0; t < steps; ++t) {
      c.src.push_back(inputAt(j, t));
      c.dst.push_back(resultSlots[j]);
    }
    loop.finish.push_back(std::move(c));
  }
  p_.loops.push_back(std::move(loop));
  // The loops nested in the body follow, their slots the same in every iteration of this
  // one (isolateNestedLoops).
  auto fixedSlot = [&](Slot &s) {
    NNC_ASSERT(!varies(s), "node '{}': a nested loop's slot moves with the outer loop", n.name());
    s = slotAt(s, 0);
  };
  for (LoopPlan &inner : body.loops) {
    inner.firstKernel += static_cast<size_t>(first);
    for (LoopPlan::Binding &b : inner.bindings) {
      b.arg += argBase;
      std::for_each(b.slots.begin(), b.slots.end(), fixedSlot);
    }
    std::for_each(inner.condition.begin(), inner.condition.end(), fixedSlot);
    for (std::vector<LoopPlan::Copy> *copies : {&inner.copies, &inner.finish})
      for (LoopPlan::Copy &c : *copies) {
        std::for_each(c.src.begin(), c.src.end(), fixedSlot);
        std::for_each(c.dst.begin(), c.dst.end(), fixedSlot);
      }
    p_.loops.push_back(std::move(inner));
  }
  p_.tuningUse.tunable += body.tuningUse.tunable;
  p_.tuningUse.tuned += body.tuningUse.tuned;
  p_.tuningUse.missing.insert(p_.tuningUse.missing.end(), body.tuningUse.missing.begin(),
                             body.tuningUse.missing.end());
  return launchIdx;
}

/// 2. A unit's kernels appended to the launch list, each parameter bound to a slot
/// (bindParameter); 3. the liveness of the arena requests they touch.
Error PlanBuilder::addUnit(const LoweringUnit &unit, size_t position) {
  const Node *n = unit.node;
  for (Value *r : n->results()) {
    if (dynamicOutput_.count(r)) {
      if (!g_.users(r).empty())
        return n->error("result %{} has the data-dependent type {} and is used in the same "
                        "executable (compile it in stages)",
                        r->name(), r->type().str());
      continue;
    }
    // A data-dependent result nothing reads is not written (its lowering skips it).
    if (lowersDataDependentResults(*n) && !g_.hasUses(r) && !g_.isOutput(r))
      continue;
    NNC_TRY(staticOf(r).takeError());
  }
  // A reshape (or friend) whose result is not a graph output reads its operand's storage:
  // no kernel, and the operand's buffer lives as long as either value is used.
  if (unit.members.empty() && isStorageView(*n) && !slots_.count(n->result())) {
    const Value *in = n->operand(0);
    auto rit = requestOfValue_.find(in);
    auto sit = slots_.find(in);
    if (rit != requestOfValue_.end()) {
      requestOfValue_[n->result()] = rit->second;
      slots_[n->result()] = {SlotKind::Arena, rit->second};
      nodeKernels_.push_back({});
      return Error::success();
    }
    if (sit != slots_.end() && sit->second.kind != SlotKind::Arena) {
      slots_[n->result()] = sit->second;
      nodeKernels_.push_back({});
      return Error::success();
    }
  }
  std::string prefix =
      fmt::format("n{}_{}{}", position, sanitize((unit.anchor ? unit.anchor : n)->opName()),
                  unit.members.empty() ? "" : "_fused");
  if (n->kind() == OpKind::Scan) {
    NNC_ASSIGN_OR_RETURN(std::vector<int> launchIdx, addScan(*n, prefix));
    nodeKernels_.push_back(std::move(launchIdx));
    return Error::success();
  }
  NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks, lowerUnit(unit, prefix, lowerOpts_));
  // With NNC_DEBUG=verify (the tests run so), lowering's output must meet the kernel IR's
  // rules (one loop per variable, scopes, types) before a code generator sees it. (Not
  // always on: it walks every kernel again, a large share of a compile whose objects come
  // from the cache.)
  static const bool verify = debugEnabled("verify");
  for (size_t i = 0; verify && i < ks.size(); ++i)
    if (Error e = kir::verifyKernel(ks[i]))
      return n->error("lowering made a malformed kernel '{}': {}", ks[i].name, e.message());
  // A layout conversion carries the name of the conv it was made for (layout-nchwc): the
  // profile says which op it is, so a view group that converts a conv's result back does not
  // read as one that holds the conv (issue 50's detect head read so).
  // A matmul or conv that lower-qdq ran on an integer kernel, or left in f32 between Q/DQ ops,
  // says so (with the reason), so the profile shows which quantized layers run integer.
  std::vector<std::string> sources;
  for (const Node *m : unit.members.empty() ? std::vector<const Node *>{n} : unit.members) {
    bool conversion = m->kind() == OpKind::FromNCHWc || m->kind() == OpKind::ToNCHWc;
    std::string source;
    if (m->name().empty())
      source = fmt::format("{} %{}", m->opName(),
                           m->numResults() ? m->result()->name() : std::string());
    else
      source = conversion ? fmt::format("{} ({})", m->name(), m->opName()) : m->name();
    const Attribute *why = m->attr(kQdqFallbackAttr);
    if (m->kind() == OpKind::MatMulInteger || m->kind() == OpKind::ConvInteger)
      source += " (integer)";
    else if (why && std::holds_alternative<std::string>(*why))
      source += fmt::format(" (fp32 between Q/DQ: {})", std::get<std::string>(*why));
    sources.push_back(std::move(source));
  }
  if (ks.empty()) {
    for (Value *r : n->results()) {
      std::optional<int64_t> count = checkedNumElements(*staticExtents(r->shape()));
      if (count && *count > 0)
        return n->error("code generation produced no kernel");
    }
  }
  std::map<int, int> scratchRequest; // scratch index -> request
  std::map<int, int> extentRequest;  // result index -> request of its extent
  std::vector<int> launchIdx;
  for (kir::Kernel &k : ks) {
    int launch = static_cast<int>(p_.kernels.size());
    p_.firstArg.push_back(p_.args.size());
    for (const kir::BufferDecl &b : k.buffers) {
      NNC_ASSIGN_OR_RETURN(Slot slot, bindParameter(unit, k, b, launch, prefix, scratchRequest,
                                                    extentRequest));
      p_.args.push_back(slot);
    }
    launchIdx.push_back(launch);
    p_.kernelSources.push_back(sources);
    p_.kernelFlops.push_back(k.flops);
    p_.kernels.push_back(std::move(k));
  }
  nodeKernels_.push_back(launchIdx);
  return Error::success();
}

/// The slot of parameter `b` of kernel `k` (launch `launch`) of `unit`, by its role: the status
/// area, a data-dependent result's extent, node scratch, or the operand or result value's.
Expected<Slot> PlanBuilder::bindParameter(const LoweringUnit &unit, const kir::Kernel &k,
                                          const kir::BufferDecl &b, int launch,
                                          const std::string &prefix,
                                          std::map<int, int> &scratchRequest,
                                          std::map<int, int> &extentRequest) {
  const Node *n = unit.node;
  int64_t bytes = b.numElements * static_cast<int64_t>(dtypeSize(b.dtype));
  Slot slot{SlotKind::Arena, -1};
  if (b.role == kir::BufferRole::Status) {
    if (b.dtype != DType::I64 ||
        b.numElements != 2 * static_cast<int64_t>(k.checks.size()))
      return n->error("kernel '{}': status parameter '{}' does not hold its {} checks",
                      k.name, b.name, k.checks.size());
    std::vector<RunCheck> checks;
    for (size_t c = 0; c < k.checks.size(); ++c)
      checks.push_back({static_cast<int64_t>(16 * c), k.checks[c].before,
                        k.checks[c].after});
    slot = reserveStatus(checks, bytes);
  } else if (b.role == kir::BufferRole::Extent) {
    const Value *r =
        b.index < static_cast<int>(n->numResults()) ? n->result(b.index) : nullptr;
    if (!r || !dynamicOutput_.count(r) || b.dtype != DType::I64 || b.numElements != 1)
      return n->error("kernel '{}': parameter '{}' holds the extent of result {}, "
                      "which is not a data-dependent graph output",
                      k.name, b.name, b.index);
    auto [it, inserted] = extentRequest.emplace(b.index, static_cast<int>(requests_.size()));
    if (inserted)
      requests_.push_back({r->name() + "/extent", bytes, launch, launch});
    requests_[it->second].lastUse = launch;
    extentRequestOfValue_[r] = it->second;
    slot.index = it->second;
  } else if (b.role == kir::BufferRole::Scratch) {
    // The CPU's per-thread scratch comes from the runtime's workspace, not the arena.
    if (b.perThread && !lowerOpts_.gpu)
      bytes = 0;
    auto [it, inserted] = scratchRequest.emplace(b.index, static_cast<int>(requests_.size()));
    if (inserted)
      requests_.push_back(
          {fmt::format("{}/scratch{}", prefix, b.index), bytes, launch, launch});
    BufferRequest &q = requests_[it->second];
    q.bytes = std::max(q.bytes, bytes);
    q.lastUse = launch;
    slot.index = it->second;
  } else {
    bool isOperand = b.role == kir::BufferRole::Operand;
    Value *v =
        isOperand
            ? (b.index < static_cast<int>(unit.operands.size()) ? unit.operands[b.index]
                                                                : nullptr)
            : (b.index < static_cast<int>(n->numResults()) ? n->result(b.index) : nullptr);
    if (!v)
      return n->error("kernel '{}': parameter '{}' is bound to {} {}, which the node "
                      "does not have",
                      k.name, b.name, isOperand ? "operand" : "result", b.index);
    if (isOperand && b.written)
      return n->error("kernel '{}' writes its operand parameter '{}'", k.name, b.name);
    // A data-dependent result's buffer has the capacity its kernel declares.
    std::optional<int64_t> count = dynamicOutput_.count(v)
                                       ? std::optional<int64_t>(b.numElements)
                                       : checkedNumElements(*staticExtents(v->shape()));
    // Kernels that only move values may see them as the unsigned integers of their size
    // (bitsType): storage-only values (f8, i4, ...) as u8 bytes, bitcast's both sides.
    bool sameType = b.dtype == v->dtype() || b.dtype == bitsType(v->dtype());
    if (!sameType || !count || b.numElements != *count)
      return n->error("kernel '{}': parameter '{}' is {} x {} but %{} is {}", k.name, b.name,
                      dtypeName(b.dtype), b.numElements, v->name(), v->type().str());
    auto it = slots_.find(v);
    if (it != slots_.end() && it->second.kind != SlotKind::Arena) {
      slot = it->second;
    } else {
      auto [rit, inserted] = requestOfValue_.emplace(v, static_cast<int>(requests_.size()));
      if (inserted) {
        requests_.push_back({v->name(), bytes, launch, launch});
        slots_[v] = {SlotKind::Arena, rit->second};
      }
      BufferRequest &q = requests_[rit->second];
      q.firstUse = std::min(q.firstUse, launch);
      q.lastUse = std::max(q.lastUse, launch);
      slot.index = rit->second;
    }
  }
  return slot;
}

/// In place: a kernel may write a result over an operand that lowering declared it in place
/// over (BufferDecl::inPlaceOver) where the operand's buffer dies at that kernel, the result's
/// buffer is first written there, and the two have the same extents and bytes. (A loop body's
/// kernels were planned in the body's own arena.)
void PlanBuilder::reuseOperandsInPlace(const std::vector<LoweringUnit> &units) {
  std::vector<bool> reusedAlready(requests_.size(), false);
  for (size_t li = 0; li < units.size(); ++li) {
    if (units[li].node->kind() == OpKind::Scan)
      continue;
    for (int launch : nodeKernels_[li]) {
      const kir::Kernel &k = p_.kernels[launch];
      for (size_t b = 0; b < k.buffers.size(); ++b)
        if (!k.buffers[b].inPlaceOver.empty())
          reuseInPlace(units[li], launch, k.buffers[b], p_.args[p_.firstArg[launch] + b],
                       reusedAlready);
    }
  }
}

/// Result parameter `result` of launch `launch` (a kernel of `unit`), bound to `resultSlot`,
/// over the first of its inPlaceOver operands that qualifies. Every parameter bound to that
/// operand's buffer must be one the result is in place over (a value passed twice, or through
/// a view).
void PlanBuilder::reuseInPlace(const LoweringUnit &unit, int launch, const kir::BufferDecl &result,
                               const Slot &resultSlot, std::vector<bool> &reusedAlready) {
  if (resultSlot.kind != SlotKind::Arena || resultSlot.index < 0)
    return;
  const kir::Kernel &k = p_.kernels[launch];
  const Slot *args = &p_.args[p_.firstArg[launch]];
  BufferRequest &res = requests_[resultSlot.index];
  const Extents resultExtents = *staticExtents(unit.node->result(result.index)->shape());
  for (int o : result.inPlaceOver) {
    if (res.reuses >= 0)
      return;
    if (o < 0 || o >= static_cast<int>(k.buffers.size()) ||
        k.buffers[o].role != kir::BufferRole::Operand)
      continue; // not an operand (verifyKernel says so under NNC_DEBUG=verify)
    const Slot &os = args[o];
    if (os.kind != SlotKind::Arena || os.index >= resultSlot.index || reusedAlready[os.index])
      continue;
    const BufferRequest &op = requests_[os.index];
    const Value *operand = unit.operands[k.buffers[o].index];
    if (op.lastUse != launch || op.bytes != res.bytes || res.firstUse != launch ||
        *staticExtents(operand->shape()) != resultExtents)
      continue;
    bool allOver = true;
    for (size_t b = 0; b < k.buffers.size(); ++b)
      if (args[b].kind == SlotKind::Arena && args[b].index == os.index)
        allOver = allOver && std::find(result.inPlaceOver.begin(), result.inPlaceOver.end(),
                                       static_cast<int>(b)) != result.inPlaceOver.end();
    if (!allOver)
      continue;
    res.reuses = static_cast<int>(os.index);
    reusedAlready[os.index] = true;
  }
}

/// How many distinct tunable kernels there are and how many took a tuned config.
void PlanBuilder::countTuningUse() {
  for (const auto &[signature, tuned] : tunedBySignature_) {
    ++p_.tuningUse.tunable;
    if (tuned)
      ++p_.tuningUse.tuned;
    else
      p_.tuningUse.missing.push_back(signature);
  }
}

/// Data-dependent outputs are copied out after the last launch: they live to the end.
Error PlanBuilder::keepDynamicOutputsLive() {
  int lastLaunch = static_cast<int>(p_.kernels.size()) - 1;
  for (const auto &[v, o] : dynamicOutput_) {
    auto data = requestOfValue_.find(v), extent = extentRequestOfValue_.find(v);
    if (data == requestOfValue_.end() || extent == extentRequestOfValue_.end())
      return makeError("value %{} has the data-dependent type {}; no kernel computes its "
                       "extent",
                       v->name(), v->type().str());
    requests_[data->second].lastUse = lastLaunch;
    requests_[extent->second].lastUse = lastLaunch;
  }
  return Error::success();
}

/// 4. The status area's request sized, planBuffers() run, and every arena slot given its
/// offset.
void PlanBuilder::placeBuffers() {
  int lastLaunch = static_cast<int>(p_.kernels.size()) - 1;
  if (statusRequest_ >= 0) {
    BufferRequest &q = requests_[statusRequest_];
    q.bytes = statusBytes_;
    q.firstUse = 0;
    q.lastUse = lastLaunch;
  }
  p_.plan = planBuffers(requests_);
  if (statusRequest_ >= 0) {
    p_.statusOffset = p_.plan.entries[statusRequest_].offset;
    p_.statusBytes = statusBytes_;
  }
  for (const auto &[v, o] : dynamicOutput_) {
    const BufferPlan::Entry &data = p_.plan.entries[requestOfValue_.at(v)];
    p_.outputs[o].dataOffset = data.offset;
    p_.outputs[o].dataBytes = data.bytes;
    p_.outputs[o].extentOffset = p_.plan.entries[extentRequestOfValue_.at(v)].offset;
  }
  p_.arenaBytes = std::max<int64_t>(kArenaAlignment, (p_.plan.peakBytes + kArenaAlignment - 1) /
                                                        kArenaAlignment * kArenaAlignment);
  // Arena slots point at plan offsets from here on.
  auto toOffset = [&](Slot &s) {
    if (s.kind == SlotKind::Arena)
      s.index = p_.plan.entries[s.index].offset;
  };
  for (Slot &s : p_.args)
    toOffset(s);
  for (LoopPlan &l : p_.loops) {
    for (LoopPlan::Binding &b : l.bindings)
      for (Slot &s : b.slots)
        toOffset(s);
    for (Slot &s : l.condition)
      toOffset(s);
    for (std::vector<LoopPlan::Copy> *copies : {&l.copies, &l.finish})
      for (LoopPlan::Copy &c : *copies) {
        for (Slot &s : c.src)
          toOffset(s);
        for (Slot &s : c.dst)
          toOffset(s);
      }
  }
}

Expected<LaunchPlan> PlanBuilder::build() {
  NNC_TRY(checkResultSizes());
  NNC_TRY(bindInputsAndConstants());
  NNC_TRY(bindOutputs());
  NNC_ASSIGN_OR_RETURN(std::vector<LoweringUnit> units, loweringUnits(g_));
  std::unordered_map<const Node *, size_t> position;
  for (size_t ni = 0; ni < nodes_.size(); ++ni)
    position[nodes_[ni]] = ni;
  for (const LoweringUnit &unit : units)
    NNC_TRY(addUnit(unit, position[unit.node]));
  reuseOperandsInPlace(units);
  countTuningUse();
  NNC_TRY(keepDynamicOutputsLive());
  placeBuffers();
  return std::move(p_);
}

} // namespace

Expected<LaunchPlan> buildLaunchPlan(const Graph &g, const char *target,
                                     const tuning::ConfigSource *tuning, const CpuTarget &cpu,
                                     const GpuTarget *gpu, int threads, bool loopBody) {
  return PlanBuilder(g, target, tuning, cpu, gpu, threads, loopBody).build();
}

} // namespace nnc
