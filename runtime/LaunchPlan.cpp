// The launch plan shared by the CPU and OpenCL executables (see LaunchPlan.h).
#include "LaunchPlan.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <unordered_map>

#include "BufferPlan.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/ir/Loop.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Debug.h"

namespace nnc {

namespace {

void visitExprs(const kir::Expr &e, const std::function<void(const kir::ExprNode &)> &f) {
  if (!e)
    return;
  f(*e);
  for (const kir::Expr &a : e->args)
    visitExprs(a, f);
}

void visitStmts(const kir::Stmt &s, const std::function<void(const kir::StmtNode &)> &f) {
  if (!s)
    return;
  f(*s);
  for (const kir::Stmt &b : s->body)
    visitStmts(b, f);
}

/// True when the kernel reads every element of the buffers in `from` only in the one store
/// to `to`, at exactly the index it stores to, and never reads `to`: then `to` may share
/// storage with `from` (each element is read before the same element is written).
bool isPointwiseOver(const kir::Kernel &k, const std::vector<int> &from,
                     const std::vector<int> &to) {
  auto in = [](const std::vector<int> &v, int b) {
    return std::find(v.begin(), v.end(), b) != v.end();
  };
  int stores = 0, loadsInStore = 0, loadsTotal = 0;
  bool ok = true;
  auto countLoads = [&](const kir::Expr &e, int &counter, const std::string *index) {
    visitExprs(e, [&](const kir::ExprNode &x) {
      if (x.kind != kir::ExprKind::Load)
        return;
      if (in(to, x.buffer))
        ok = false;
      if (in(from, x.buffer)) {
        ++counter;
        if (index && kir::printExpr(x.args[0]) != *index)
          ok = false;
      }
    });
  };
  visitStmts(k.body, [&](const kir::StmtNode &s) {
    countLoads(s.extent, loadsTotal, nullptr);
    countLoads(s.index, loadsTotal, nullptr);
    countLoads(s.value, loadsTotal, nullptr);
    if (s.kind == kir::StmtKind::Store && in(from, s.buffer))
      ok = false;
    if (s.kind == kir::StmtKind::GemmTile) // reads whole rows and columns of its operands
      ok = false;
    if (s.kind == kir::StmtKind::VecLoad || s.kind == kir::StmtKind::VecStore ||
        !k.locals.empty()) // vector lanes and work-group tiles read other elements
      ok = false;
    if (s.kind == kir::StmtKind::Store && in(to, s.buffer)) {
      ++stores;
      std::string index = kir::printExpr(s.index);
      countLoads(s.value, loadsInStore, &index);
    }
  });
  return ok && stores == 1 && loadsInStore >= 1 && loadsInStore == loadsTotal;
}

std::string sanitize(std::string_view s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

/// True when `s` (a statement tree) runs a GEMM microkernel tile.
bool containsGemmTile(const kir::Stmt &s) {
  if (!s)
    return false;
  if (s->kind == kir::StmtKind::GemmTile)
    return true;
  for (const kir::Stmt &b : s->body)
    if (containsGemmTile(b))
      return true;
  return false;
}

} // namespace

Expected<LaunchPlan> buildLaunchPlan(const Graph &g, const char *target,
                                     const tuning::ConfigSource *tuning, const CpuTarget &cpu,
                                     const GpuTarget *gpu) {
  LaunchPlan p;
  auto staticOf = [target](const Value *v) -> Expected<Extents> {
    std::optional<Extents> e = staticExtents(v->shape());
    if (!e)
      return makeError("value %{} has the symbolic type {}; the {} target compiles static "
                       "shapes (specialize them first)",
                       v->name(), v->type().str(), target);
    return *e;
  };

  // 0. Every static result fits in memory: an absurd one (a 2^40-element Expand, a shape
  // that only constant folding made huge) is refused here, naming its node, before a kernel
  // is lowered with extents whose product overflows.
  for (const Node *n : g.nodes())
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

  // 1. Slots of inputs, outputs and constants.
  std::unordered_map<const Value *, Slot> slots;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *v = g.inputs()[i];
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(v));
    (void)e;
    p.inputNames.push_back(v->name());
    p.inputTypes.push_back(v->type());
    slots[v] = {SlotKind::Input, static_cast<int>(i)};
  }
  std::vector<Node *> nodes = g.nodes();
  for (Node *n : nodes) {
    if (n->kind() != OpKind::Constant)
      continue;
    const Tensor &t = n->getTensor("value");
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(n->result()));
    if (t.dtype() != n->result()->dtype() || t.extents() != e)
      return n->error("value is {}{} but the result is declared {}", dtypeName(t.dtype()),
                      extentsStr(t.extents()), n->result()->type().str());
    slots[n->result()] = {SlotKind::Weight, static_cast<int>(p.weights.size())};
    p.weights.push_back(t); // shares the graph's buffer: kernels only read weights
  }
  // Results whose last dim depends on data: allowed only as graph outputs (a graph that
  // consumes one is compiled in stages by CpuModel); arena requests of their data and extent.
  std::unordered_map<const Value *, int> dynamicOutput;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const Value *v = g.outputs()[o];
    std::optional<Extents> leading =
        v->rank() >= 1 ? staticExtents(Shape(v->shape().begin(), v->shape().end() - 1))
                       : std::nullopt;
    if (!isStatic(v->shape()) && leading && !v->isGraphInput() && !dynamicOutput.count(v)) {
      Extents e = *leading;
      e.push_back(-1);
      dynamicOutput[v] = static_cast<int>(o);
      p.outputs.push_back({OutputSpec::Dynamic, static_cast<int>(o), v->dtype(), e});
      continue;
    }
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(v));
    OutputSpec spec{OutputSpec::Fresh, static_cast<int>(o), v->dtype(), e};
    auto it = slots.find(v);
    if (it != slots.end()) {
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
      slots[v] = {SlotKind::Output, static_cast<int>(o)};
    }
    p.outputs.push_back(spec);
  }

  // 2. The launch list, binding each kernel parameter to a slot; 3. liveness of arena slots.
  std::vector<BufferRequest> requests;
  std::unordered_map<const Value *, int> requestOfValue, extentRequestOfValue;
  std::vector<std::vector<int>> nodeKernels; // per unit: launch indices
  std::map<std::string, bool> tunedBySignature;
  tuning::LowerOptions lowerOpts(cpu);
  lowerOpts.configs = tuning;
  if (gpu)
    lowerOpts.gpu = *gpu;
  // The status area of the kernels' runtime checks: one arena request live over the whole
  // run (the run zeroes it first and reads it last), a 64-byte aligned part per checking
  // kernel (or loop body) so kernels may assume their buffers aligned.
  int statusRequest = -1;
  int64_t statusBytes = 0;
  auto reserveStatus = [&](const std::vector<RunCheck> &checks, int64_t bytes) -> Slot {
    if (statusRequest < 0) {
      statusRequest = static_cast<int>(requests.size());
      requests.push_back({"status", 0, 0, 0});
    }
    int64_t at = statusBytes;
    for (const RunCheck &c : checks)
      p.checks.push_back({at + c.offset, c.before, c.after});
    statusBytes += (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    return {SlotKind::Arena, statusRequest, at};
  };
  double unitFlops = 0; // the work of the tunable GEMMs met while lowering the current unit
  lowerOpts.onTunable = [&](const tuning::Problem &tp, bool tuned) {
    tunedBySignature[tp.signature] = tuned;
    unitFlops += tp.flops;
  };
  lowerOpts.onWork = [&](double flops) { unitFlops += flops; };
  // A loop node: its body's own launch plan appended as a loop (LoopPlan) over the body's
  // launches. Everything the body touches lives across all of its launches: the operands and
  // results, the body's arena (one request) and, per state, a second buffer. Iteration t
  // writes state j to the result's buffer when T-1-t is even, else to the second one, and
  // reads it where iteration t-1 wrote it (the initial state in iteration 0); step t of a
  // sequence is its slot plus t times the step's bytes.
  auto addScan = [&](const Node &n, const std::string &prefix) -> Expected<std::vector<int>> {
    NNC_ASSIGN_OR_RETURN(ScanParts sp, scanParts(n));
    NNC_ASSIGN_OR_RETURN(Extents seq, staticOf(n.operand(sp.carried)));
    const int64_t steps = seq[0];
    if (steps < 1)
      return n.error("a loop of {} steps", steps);
    NNC_ASSIGN_OR_RETURN(LaunchPlan body, buildLaunchPlan(*n.body(), target, tuning, cpu, gpu));
    if (!body.loops.empty())
      return n.error("a loop inside a loop body is not supported");
    if (body.kernels.empty())
      return n.error("the loop body computes nothing");
    const int first = static_cast<int>(p.kernels.size());
    const int last = first + static_cast<int>(body.kernels.size()) - 1;
    auto bytesOf = [](const Value *v) {
      return *checkedNumElements(*staticExtents(v->shape())) *
             static_cast<int64_t>(dtypeSize(v->dtype()));
    };
    // The outer slot of a value, live over the whole loop.
    auto bind = [&](const Value *v) -> Slot {
      auto it = slots.find(v);
      if (it != slots.end() && it->second.kind != SlotKind::Arena)
        return it->second;
      auto [rit, inserted] = requestOfValue.emplace(v, static_cast<int>(requests.size()));
      if (inserted) {
        requests.push_back({v->name(), bytesOf(v), first, last});
        slots[v] = {SlotKind::Arena, rit->second};
      }
      BufferRequest &q = requests[rit->second];
      q.firstUse = std::min(q.firstUse, first);
      q.lastUse = std::max(q.lastUse, last);
      return {SlotKind::Arena, rit->second};
    };
    auto request = [&](std::string name, int64_t bytes) -> Slot {
      requests.push_back({std::move(name), std::max<int64_t>(bytes, 1), first, last});
      return {SlotKind::Arena, static_cast<int64_t>(requests.size()) - 1};
    };
    auto plus = [](Slot s, int64_t bytes) {
      s.offset += bytes;
      return s;
    };
    auto stepOf = [&](int64_t t) { return sp.reverse ? steps - 1 - t : t; };
    // Kernels may assume that a result as large as a streaming store is 64-byte aligned
    // (llvmcg::kBufferAlignment); a step of a per-step output must then keep that alignment.
    for (int64_t o = sp.carried; o < static_cast<int64_t>(n.numResults()); ++o) {
      int64_t stepBytes = bytesOf(n.result(o)) / steps;
      if (stepBytes % kArenaAlignment != 0 && stepBytes >= cpu.streamingStoreBytes)
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
    // Where state j is written in iteration t.
    auto stateAt = [&](int64_t j, int64_t t) {
      return (steps - 1 - t) % 2 == 0 ? resultSlots[j] : spare[j];
    };
    // Where body input i and body output o are in iteration t.
    auto inputAt = [&](int64_t i, int64_t t) -> Slot {
      if (i < sp.carried)
        return t == 0 ? operandSlots[i] : stateAt(i, t - 1);
      if (i < sp.carried + sp.scanInputs)
        return plus(operandSlots[i], stepOf(t) * bytesOf(n.operand(i)) / steps);
      return operandSlots[i];
    };
    auto outputAt = [&](int64_t o, int64_t t) -> Slot {
      if (o < sp.carried)
        return stateAt(o, t);
      return plus(resultSlots[o], stepOf(t) * bytesOf(n.result(o)) / steps);
    };
    const int64_t weightBase = static_cast<int64_t>(p.weights.size());
    p.weights.insert(p.weights.end(), body.weights.begin(), body.weights.end());
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
    loop.count = steps;
    std::vector<int> launchIdx;
    for (size_t k = 0; k < body.kernels.size(); ++k) {
      p.firstArg.push_back(p.args.size());
      for (size_t a = 0; a < body.numArgs(k); ++a) {
        const Slot &s = body.args[body.firstArg[k] + a];
        if (varies(s)) {
          LoopPlan::Binding b{p.args.size(), {}};
          for (int64_t t = 0; t < steps; ++t)
            b.slots.push_back(slotAt(s, t));
          loop.bindings.push_back(std::move(b));
        }
        p.args.push_back(slotAt(s, 0));
      }
      kir::Kernel kernel = std::move(body.kernels[k]);
      kernel.name = prefix + "_" + kernel.name;
      launchIdx.push_back(static_cast<int>(p.kernels.size()));
      std::vector<std::string> sources;
      for (const std::string &src : body.kernelSources[k])
        sources.push_back(fmt::format("{} / {}", n.name().empty() ? prefix : n.name(), src));
      p.kernelSources.push_back(std::move(sources));
      p.kernelFlops.push_back(body.kernelFlops[k] * static_cast<double>(steps));
      p.kernels.push_back(std::move(kernel));
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
      loop.copies.push_back(std::move(c));
    }
    p.loops.push_back(std::move(loop));
    p.tuningUse.tunable += body.tuningUse.tunable;
    p.tuningUse.tuned += body.tuningUse.tuned;
    p.tuningUse.missing.insert(p.tuningUse.missing.end(), body.tuningUse.missing.begin(),
                               body.tuningUse.missing.end());
    return launchIdx;
  };
  NNC_ASSIGN_OR_RETURN(std::vector<LoweringUnit> units, loweringUnits(g));
  std::unordered_map<const Node *, size_t> position;
  for (size_t ni = 0; ni < nodes.size(); ++ni)
    position[nodes[ni]] = ni;
  for (const LoweringUnit &unit : units) {
    const Node *n = unit.node;
    for (Value *r : n->results()) {
      if (dynamicOutput.count(r)) {
        if (!g.users(r).empty())
          return n->error("result %{} has the data-dependent type {} and is used in the same "
                          "executable (compile it in stages)",
                          r->name(), r->type().str());
        continue;
      }
      NNC_TRY(staticOf(r).takeError());
    }
    // A reshape (or friend) whose result is not a graph output reads its operand's storage:
    // no kernel, and the operand's buffer lives as long as either value is used.
    if (unit.members.empty() && isStorageView(*n) && !slots.count(n->result())) {
      const Value *in = n->operand(0);
      auto rit = requestOfValue.find(in);
      auto sit = slots.find(in);
      if (rit != requestOfValue.end()) {
        requestOfValue[n->result()] = rit->second;
        slots[n->result()] = {SlotKind::Arena, rit->second};
        nodeKernels.push_back({});
        continue;
      }
      if (sit != slots.end() && sit->second.kind != SlotKind::Arena) {
        slots[n->result()] = sit->second;
        nodeKernels.push_back({});
        continue;
      }
    }
    std::string prefix =
        fmt::format("n{}_{}{}", position[n], sanitize((unit.anchor ? unit.anchor : n)->opName()),
                    unit.members.empty() ? "" : "_fused");
    if (n->kind() == OpKind::Scan) {
      NNC_ASSIGN_OR_RETURN(std::vector<int> launchIdx, addScan(*n, prefix));
      nodeKernels.push_back(std::move(launchIdx));
      continue;
    }
    unitFlops = 0;
    NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks, lowerUnit(unit, prefix, lowerOpts));
    // With NNC_DEBUG=verify (the tests run so), lowering's output must meet the kernel IR's
    // rules (one loop per variable, scopes, types) before a code generator sees it. (Not
    // always on: it walks every kernel again, a large share of a compile whose objects come
    // from the cache.)
    static const bool verify = debugEnabled("verify");
    for (size_t i = 0; verify && i < ks.size(); ++i)
      if (Error e = kir::verifyKernel(ks[i]))
        return n->error("lowering made a malformed kernel '{}': {}", ks[i].name, e.message());
    // A layout conversion carries the name of the conv it was made for (layout-nchwc): the
    // profile says which op it is, so a view group that converts a conv's result back does
    // not read as one that holds the conv (issue 50's detect head read so).
    std::vector<std::string> sources;
    for (const Node *m : unit.members.empty() ? std::vector<const Node *>{n} : unit.members) {
      bool conversion = m->kind() == OpKind::FromNCHWc || m->kind() == OpKind::ToNCHWc;
      if (m->name().empty())
        sources.push_back(fmt::format("{} %{}", m->opName(),
                                      m->numResults() ? m->result()->name() : std::string()));
      else
        sources.push_back(conversion ? fmt::format("{} ({})", m->name(), m->opName())
                                     : m->name());
    }
    // The GEMM work goes to the kernel that runs the GEMM tiles (the last one when several
    // do, or none: a unit's packing and im2col kernels come before its GEMM).
    size_t flopsKernel = ks.empty() ? 0 : ks.size() - 1;
    for (size_t i = 0; i < ks.size(); ++i)
      if (containsGemmTile(ks[i].body))
        flopsKernel = i;
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
      int launch = static_cast<int>(p.kernels.size());
      p.firstArg.push_back(p.args.size());
      for (const kir::BufferDecl &b : k.buffers) {
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
          if (!r || !dynamicOutput.count(r) || b.dtype != DType::I64 || b.numElements != 1)
            return n->error("kernel '{}': parameter '{}' holds the extent of result {}, "
                            "which is not a data-dependent graph output",
                            k.name, b.name, b.index);
          auto [it, inserted] = extentRequest.emplace(b.index, static_cast<int>(requests.size()));
          if (inserted)
            requests.push_back({r->name() + "/extent", bytes, launch, launch});
          requests[it->second].lastUse = launch;
          extentRequestOfValue[r] = it->second;
          slot.index = it->second;
        } else if (b.role == kir::BufferRole::Scratch) {
          // The CPU's per-thread scratch comes from the runtime's workspace, not the arena.
          if (b.perThread && !lowerOpts.gpu)
            bytes = 0;
          auto [it, inserted] = scratchRequest.emplace(b.index, static_cast<int>(requests.size()));
          if (inserted)
            requests.push_back(
                {fmt::format("{}/scratch{}", prefix, b.index), bytes, launch, launch});
          BufferRequest &q = requests[it->second];
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
          std::optional<int64_t> count = dynamicOutput.count(v)
                                             ? std::optional<int64_t>(b.numElements)
                                             : checkedNumElements(*staticExtents(v->shape()));
          // Kernels that only move storage-only values (f8, i4, ...) see them as u8 bytes.
          bool sameType =
              b.dtype == v->dtype() || (isStorageOnly(v->dtype()) && b.dtype == DType::U8);
          if (!sameType || !count || b.numElements != *count)
            return n->error("kernel '{}': parameter '{}' is {} x {} but %{} is {}", k.name, b.name,
                            dtypeName(b.dtype), b.numElements, v->name(), v->type().str());
          auto it = slots.find(v);
          if (it != slots.end() && it->second.kind != SlotKind::Arena) {
            slot = it->second;
          } else {
            auto [rit, inserted] = requestOfValue.emplace(v, static_cast<int>(requests.size()));
            if (inserted) {
              requests.push_back({v->name(), bytes, launch, launch});
              slots[v] = {SlotKind::Arena, rit->second};
            }
            BufferRequest &q = requests[rit->second];
            q.firstUse = std::min(q.firstUse, launch);
            q.lastUse = std::max(q.lastUse, launch);
            slot.index = rit->second;
          }
        }
        p.args.push_back(slot);
      }
      launchIdx.push_back(launch);
      p.kernelSources.push_back(sources);
      p.kernelFlops.push_back(launchIdx.size() - 1 == flopsKernel ? unitFlops : 0.0);
      p.kernels.push_back(std::move(k));
    }
    nodeKernels.push_back(launchIdx);
  }

  // In place: an elementwise node with one kernel may write its result over an operand that
  // dies there, has the result's extents, and is read only at the index being written.
  std::vector<bool> reusedAlready(requests.size(), false);
  for (size_t li = 0; li < units.size(); ++li) {
    const Node *n = units[li].node;
    if (!units[li].pointwise || nodeKernels[li].size() != 1 || n->numResults() != 1)
      continue;
    int launch = nodeKernels[li][0];
    const kir::Kernel &k = p.kernels[launch];
    auto rit = requestOfValue.find(n->result());
    if (rit == requestOfValue.end())
      continue;
    BufferRequest &res = requests[rit->second];
    for (size_t oi = 0; oi < units[li].operands.size() && res.reuses < 0; ++oi) {
      const Value *o = units[li].operands[oi];
      auto oit = o ? requestOfValue.find(o) : requestOfValue.end();
      if (oit == requestOfValue.end() || oit->second >= rit->second || reusedAlready[oit->second])
        continue;
      const BufferRequest &op = requests[oit->second];
      if (op.lastUse != launch || op.bytes != res.bytes || res.firstUse != launch ||
          *staticExtents(o->shape()) != *staticExtents(n->result()->shape()))
        continue;
      std::vector<int> from, to;
      for (size_t b = 0; b < k.buffers.size(); ++b) {
        const Slot &s = p.args[p.firstArg[launch] + b];
        if (s.kind == SlotKind::Arena && s.index == oit->second)
          from.push_back(static_cast<int>(b));
        if (s.kind == SlotKind::Arena && s.index == rit->second)
          to.push_back(static_cast<int>(b));
      }
      if (!isPointwiseOver(k, from, to))
        continue;
      res.reuses = oit->second;
      reusedAlready[oit->second] = true;
    }
  }
  for (const auto &[signature, tuned] : tunedBySignature) {
    ++p.tuningUse.tunable;
    if (tuned)
      ++p.tuningUse.tuned;
    else
      p.tuningUse.missing.push_back(signature);
  }
  // Data-dependent outputs are copied out after the last launch: they live to the end.
  int lastLaunch = static_cast<int>(p.kernels.size()) - 1;
  for (const auto &[v, o] : dynamicOutput) {
    auto data = requestOfValue.find(v), extent = extentRequestOfValue.find(v);
    if (data == requestOfValue.end() || extent == extentRequestOfValue.end())
      return makeError("value %{} has the data-dependent type {}; no kernel computes its "
                       "extent",
                       v->name(), v->type().str());
    requests[data->second].lastUse = lastLaunch;
    requests[extent->second].lastUse = lastLaunch;
  }
  if (statusRequest >= 0) {
    BufferRequest &q = requests[statusRequest];
    q.bytes = statusBytes;
    q.firstUse = 0;
    q.lastUse = lastLaunch;
  }
  p.plan = planBuffers(requests);
  if (statusRequest >= 0) {
    p.statusOffset = p.plan.entries[statusRequest].offset;
    p.statusBytes = statusBytes;
  }
  for (const auto &[v, o] : dynamicOutput) {
    const BufferPlan::Entry &data = p.plan.entries[requestOfValue.at(v)];
    p.outputs[o].dataOffset = data.offset;
    p.outputs[o].dataBytes = data.bytes;
    p.outputs[o].extentOffset = p.plan.entries[extentRequestOfValue.at(v)].offset;
  }
  p.arenaBytes = std::max<int64_t>(kArenaAlignment, (p.plan.peakBytes + kArenaAlignment - 1) /
                                                        kArenaAlignment * kArenaAlignment);
  // Arena slots point at plan offsets from here on.
  auto toOffset = [&](Slot &s) {
    if (s.kind == SlotKind::Arena)
      s.index = p.plan.entries[s.index].offset;
  };
  for (Slot &s : p.args)
    toOffset(s);
  for (LoopPlan &l : p.loops) {
    for (LoopPlan::Binding &b : l.bindings)
      for (Slot &s : b.slots)
        toOffset(s);
    for (LoopPlan::Copy &c : l.copies) {
      for (Slot &s : c.src)
        toOffset(s);
      for (Slot &s : c.dst)
        toOffset(s);
    }
  }

  return p;
}

} // namespace nnc
