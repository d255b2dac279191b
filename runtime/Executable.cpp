// Executable: lowering of every node to generated kernels, one JIT module, a launch list and
// a planned arena.
//
// Algorithm (compile):
//  1. Every value gets a slot: graph inputs and outputs are bound per run, constants become
//     weights copied once, every other node result and every kernel scratch buffer lives in
//     the arena.
//  2. Each non-constant node is lowered (lowerNode) to kernels, in graph order: the launch
//     list. There is no fallback: a node code generation does not support is an error.
//  3. Liveness of arena buffers over the launch order (first and last kernel that touches
//     them); an elementwise kernel may write its result over an operand that dies there.
//  4. planBuffers() gives the offsets; compileKernels() the machine code.
#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "BufferPlan.h"
#include "ThreadPool.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/runtime/Executable.h"
#include "nnc/runtime/Interpreter.h"

namespace nnc {

namespace {

enum class SlotKind : uint8_t { Input, Output, Weight, Arena };

/// Where a kernel parameter points: inputs[index], outputs[index], weights_[index], or the
/// arena at the offset of plan entry `index`.
struct Slot {
  SlotKind kind;
  int index;
};

struct Launch {
  KernelFn fn = nullptr;
  size_t firstArg = 0; ///< Into CpuExecutable::args_.
  size_t numArgs = 0;
};

/// How output p of a run is produced.
struct OutputSpec {
  enum Kind : uint8_t { Fresh, FromInput, FromWeight, CopyOfOutput } kind;
  int index = 0; ///< Input, weight or earlier output position.
  DType dtype = DType::F32;
  Extents extents;
};

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

class CpuExecutable : public Executable {
public:
  Error build(const Graph &g, const CpuOptions &opts);

  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override;
  const BufferPlan &plan() const override { return plan_; }
  const std::vector<kir::Kernel> &kernels() const override { return kernels_; }
  double compileMs() const override { return compileMs_; }
  bool fromCache() const override { return fromCache_; }
  const TuningUse &tuningUse() const override { return tuningUse_; }

  ~CpuExecutable() override {
    for (void *a : freeArenas_)
      std::free(a);
    if (profile_)
      printProfile();
  }

private:
  void *takeArena();
  void giveArena(void *a);
  void printProfile() const;

  std::vector<std::string> inputNames_;
  std::vector<TensorType> inputTypes_;
  std::vector<OutputSpec> outputs_;
  std::vector<Tensor> weights_;
  std::vector<kir::Kernel> kernels_;
  std::vector<Slot> args_;
  std::vector<Launch> launches_;
  std::unique_ptr<CompiledModule> module_;
  BufferPlan plan_;
  int64_t arenaBytes_ = 0;
  ThreadPool *pool_ = nullptr;
  double compileMs_ = 0;
  bool fromCache_ = false;
  TuningUse tuningUse_;
  std::mutex arenaMutex_;
  std::vector<void *> freeArenas_;
  /// NNC_DEBUG=profile: time every kernel; the totals are printed when the executable dies.
  bool profile_ = false;
  std::mutex profileMutex_;
  std::vector<double> kernelMs_;
  int64_t profiledRuns_ = 0;
};

bool debugEnabled(const char *what) {
  const char *env = std::getenv("NNC_DEBUG");
  if (!env)
    return false;
  std::string s = std::string(",") + env + ",";
  return s.find(std::string(",") + what + ",") != std::string::npos || s == ",all,";
}

void CpuExecutable::printProfile() const {
  if (profiledRuns_ == 0)
    return;
  std::vector<size_t> order(kernelMs_.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return kernelMs_[a] > kernelMs_[b]; });
  double total = 0;
  for (double t : kernelMs_)
    total += t;
  std::string out = fmt::format("nnc: profile: {} kernels, {} runs, {:.3f} ms per run\n",
                                kernelMs_.size(), profiledRuns_, total / double(profiledRuns_));
  for (size_t i = 0; i < order.size() && i < 25; ++i)
    out += fmt::format("  {:10.3f} ms {:5.1f}%  {}\n", kernelMs_[order[i]] / double(profiledRuns_),
                       total > 0 ? 100 * kernelMs_[order[i]] / total : 0.0,
                       kernels_[order[i]].name);
  std::fputs(out.c_str(), stderr);
}

Error CpuExecutable::build(const Graph &g, const CpuOptions &opts) {
  auto start = std::chrono::steady_clock::now();
  auto staticOf = [](const Value *v) -> Expected<Extents> {
    std::optional<Extents> e = staticExtents(v->shape());
    if (!e)
      return makeError("value %{} has the symbolic type {}; the CPU target compiles static "
                       "shapes (specialize them first)",
                       v->name(), v->type().str());
    return *e;
  };

  // 1. Slots of inputs, outputs and constants.
  std::unordered_map<const Value *, Slot> slots;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *v = g.inputs()[i];
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(v));
    (void)e;
    inputNames_.push_back(v->name());
    inputTypes_.push_back(v->type());
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
    slots[n->result()] = {SlotKind::Weight, static_cast<int>(weights_.size())};
    weights_.push_back(t.clone());
  }
  for (size_t p = 0; p < g.outputs().size(); ++p) {
    const Value *v = g.outputs()[p];
    NNC_ASSIGN_OR_RETURN(Extents e, staticOf(v));
    OutputSpec spec{OutputSpec::Fresh, static_cast<int>(p), v->dtype(), e};
    auto it = slots.find(v);
    if (it != slots.end()) {
      switch (it->second.kind) {
      case SlotKind::Input: spec.kind = OutputSpec::FromInput; break;
      case SlotKind::Weight: spec.kind = OutputSpec::FromWeight; break;
      case SlotKind::Output: spec.kind = OutputSpec::CopyOfOutput; break;
      case SlotKind::Arena: NNC_ASSERT(false);
      }
      spec.index = it->second.index;
    } else {
      slots[v] = {SlotKind::Output, static_cast<int>(p)};
    }
    outputs_.push_back(spec);
  }

  // 2. The launch list, binding each kernel parameter to a slot; 3. liveness of arena slots.
  std::vector<BufferRequest> requests;
  std::unordered_map<const Value *, int> requestOfValue;
  std::vector<std::vector<int>> nodeKernels; // per node index: launch indices
  std::vector<const Node *> lowered;
  std::map<std::string, bool> tunedBySignature;
  tuning::LowerOptions lowerOpts;
  lowerOpts.configs = opts.tuning.get();
  lowerOpts.onTunable = [&](const tuning::Problem &p, bool tuned) {
    tunedBySignature[p.signature] = tuned;
  };
  for (size_t ni = 0; ni < nodes.size(); ++ni) {
    Node *n = nodes[ni];
    if (n->kind() == OpKind::Constant)
      continue;
    for (Value *r : n->results())
      NNC_TRY(staticOf(r).takeError());
    std::string prefix = fmt::format("n{}_{}", ni, sanitize(n->opName()));
    NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks, lowerNode(*n, prefix, lowerOpts));
    if (ks.empty()) {
      for (Value *r : n->results()) {
        std::optional<int64_t> count = checkedNumElements(*staticExtents(r->shape()));
        if (count && *count > 0)
          return n->error("code generation produced no kernel");
      }
    }
    std::map<int, int> scratchRequest; // scratch index -> request
    std::vector<int> launchIdx;
    for (kir::Kernel &k : ks) {
      int launch = static_cast<int>(kernels_.size());
      Launch l;
      l.firstArg = args_.size();
      l.numArgs = k.buffers.size();
      for (const kir::BufferDecl &b : k.buffers) {
        int64_t bytes = b.numElements * static_cast<int64_t>(dtypeSize(b.dtype));
        Slot slot{SlotKind::Arena, -1};
        if (b.role == kir::BufferRole::Scratch) {
          auto [it, inserted] = scratchRequest.emplace(b.index, static_cast<int>(requests.size()));
          if (inserted)
            requests.push_back({fmt::format("{}/scratch{}", prefix, b.index), bytes, launch,
                                launch});
          BufferRequest &q = requests[it->second];
          q.bytes = std::max(q.bytes, bytes);
          q.lastUse = launch;
          slot.index = it->second;
        } else {
          bool isOperand = b.role == kir::BufferRole::Operand;
          Value *v = isOperand ? n->operand(b.index)
                               : (b.index < static_cast<int>(n->numResults()) ? n->result(b.index)
                                                                            : nullptr);
          if (!v)
            return n->error("kernel '{}': parameter '{}' is bound to {} {}, which the node "
                            "does not have",
                            k.name, b.name, isOperand ? "operand" : "result", b.index);
          if (isOperand && b.written)
            return n->error("kernel '{}' writes its operand parameter '{}'", k.name, b.name);
          std::optional<int64_t> count = checkedNumElements(*staticExtents(v->shape()));
          // Kernels that only move storage-only values (f8, i4, ...) see them as u8 bytes.
          bool sameType = b.dtype == v->dtype() ||
                          (isStorageOnly(v->dtype()) && b.dtype == DType::U8);
          if (!sameType || !count || b.numElements != *count)
            return n->error("kernel '{}': parameter '{}' is {} x {} but %{} is {}", k.name,
                            b.name, dtypeName(b.dtype), b.numElements, v->name(),
                            v->type().str());
          auto it = slots.find(v);
          if (it != slots.end() && it->second.kind != SlotKind::Arena) {
            slot = it->second;
          } else {
            auto [rit, inserted] =
                requestOfValue.emplace(v, static_cast<int>(requests.size()));
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
        args_.push_back(slot);
      }
      launches_.push_back(l);
      launchIdx.push_back(launch);
      kernels_.push_back(std::move(k));
    }
    nodeKernels.push_back(launchIdx);
    lowered.push_back(n);
  }

  // In place: an elementwise node with one kernel may write its result over an operand that
  // dies there, has the result's extents, and is read only at the index being written.
  std::vector<bool> reusedAlready(requests.size(), false);
  for (size_t li = 0; li < lowered.size(); ++li) {
    const Node *n = lowered[li];
    if (!n->info().elementwise || nodeKernels[li].size() != 1 || n->numResults() != 1)
      continue;
    int launch = nodeKernels[li][0];
    const kir::Kernel &k = kernels_[launch];
    auto rit = requestOfValue.find(n->result());
    if (rit == requestOfValue.end())
      continue;
    BufferRequest &res = requests[rit->second];
    for (size_t oi = 0; oi < n->numOperands() && res.reuses < 0; ++oi) {
      const Value *o = n->operand(oi);
      auto oit = o ? requestOfValue.find(o) : requestOfValue.end();
      if (oit == requestOfValue.end() || oit->second >= rit->second || reusedAlready[oit->second])
        continue;
      const BufferRequest &op = requests[oit->second];
      if (op.lastUse != launch || op.bytes != res.bytes || res.firstUse != launch ||
          *staticExtents(o->shape()) != *staticExtents(n->result()->shape()))
        continue;
      std::vector<int> from, to;
      for (size_t b = 0; b < k.buffers.size(); ++b) {
        const Slot &s = args_[launches_[launch].firstArg + b];
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
    ++tuningUse_.tunable;
    if (tuned)
      ++tuningUse_.tuned;
    else
      tuningUse_.missing.push_back(signature);
  }
  plan_ = planBuffers(requests);
  arenaBytes_ = std::max<int64_t>(kArenaAlignment,
                                  (plan_.peakBytes + kArenaAlignment - 1) / kArenaAlignment *
                                      kArenaAlignment);
  // Arena slots point at plan offsets from here on.
  for (Slot &s : args_)
    if (s.kind == SlotKind::Arena)
      s.index = static_cast<int>(plan_.entries[s.index].offset);

  // 4. Machine code.
  if (!kernels_.empty()) {
    CodegenOptions codegen = opts.codegen;
    codegen.parallelFor = &nnc_parallel_for;
    NNC_ASSIGN_OR_RETURN(module_, compileKernels(kernels_, codegen));
    fromCache_ = module_->fromCache();
    for (size_t i = 0; i < kernels_.size(); ++i) {
      launches_[i].fn = module_->lookup(kernels_[i].name);
      if (!launches_[i].fn)
        return makeError("kernel '{}' is missing from the compiled module", kernels_[i].name);
    }
  }
  pool_ = opts.threads == 1 ? nullptr : ThreadPool::shared(opts.threads);
  profile_ = debugEnabled("profile");
  kernelMs_.assign(kernels_.size(), 0.0);
  compileMs_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Error::success();
}

void *CpuExecutable::takeArena() {
  {
    std::lock_guard<std::mutex> lock(arenaMutex_);
    if (!freeArenas_.empty()) {
      void *a = freeArenas_.back();
      freeArenas_.pop_back();
      return a;
    }
  }
  return std::aligned_alloc(kArenaAlignment, static_cast<size_t>(arenaBytes_));
}

void CpuExecutable::giveArena(void *a) {
  std::lock_guard<std::mutex> lock(arenaMutex_);
  freeArenas_.push_back(a);
}

Expected<std::vector<Tensor>> CpuExecutable::run(const std::vector<Tensor> &inputs) {
  NNC_USER_CHECK(inputs.size() == inputTypes_.size(), "the model takes {} inputs, got {}",
                 inputTypes_.size(), inputs.size());
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < inputs.size(); ++i)
    NNC_TRY(checkAgainstType(inputs[i], inputTypes_[i], symbols,
                             fmt::format("input '{}'", inputNames_[i])));
  std::vector<Tensor> outputs(outputs_.size());
  for (size_t p = 0; p < outputs_.size(); ++p) {
    if (outputs_[p].kind != OutputSpec::Fresh)
      continue;
    NNC_ASSIGN_OR_RETURN(outputs[p], Tensor::create(outputs_[p].dtype, outputs_[p].extents));
  }
  void *arena = takeArena();
  NNC_USER_CHECK(arena, "cannot allocate an arena of {} bytes", arenaBytes_);
  std::vector<void *> ptrs(args_.size());
  for (size_t a = 0; a < args_.size(); ++a) {
    const Slot &s = args_[a];
    switch (s.kind) {
    case SlotKind::Input: ptrs[a] = const_cast<void *>(inputs[s.index].rawData()); break;
    case SlotKind::Output: ptrs[a] = outputs[s.index].rawData(); break;
    case SlotKind::Weight: ptrs[a] = weights_[s.index].rawData(); break;
    case SlotKind::Arena: ptrs[a] = static_cast<char *>(arena) + s.index; break;
    }
  }
  {
    ThreadPool::Scope scope(pool_);
    if (!profile_) {
      for (const Launch &l : launches_)
        l.fn(ptrs.data() + l.firstArg);
    } else {
      std::vector<double> ms(launches_.size());
      for (size_t i = 0; i < launches_.size(); ++i) {
        auto t = std::chrono::steady_clock::now();
        launches_[i].fn(ptrs.data() + launches_[i].firstArg);
        ms[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
                    .count();
      }
      std::lock_guard<std::mutex> lock(profileMutex_);
      for (size_t i = 0; i < ms.size(); ++i)
        kernelMs_[i] += ms[i];
      ++profiledRuns_;
    }
  }
  giveArena(arena);
  for (size_t p = 0; p < outputs_.size(); ++p) {
    const OutputSpec &o = outputs_[p];
    switch (o.kind) {
    case OutputSpec::Fresh: break;
    case OutputSpec::FromInput: outputs[p] = inputs[o.index].clone(); break;
    case OutputSpec::FromWeight: outputs[p] = weights_[o.index].clone(); break;
    case OutputSpec::CopyOfOutput: outputs[p] = outputs[o.index].clone(); break;
    }
  }
  return outputs;
}

} // namespace

Expected<std::unique_ptr<Executable>> Executable::compile(const Graph &g,
                                                          const CpuOptions &opts) {
  auto exe = std::make_unique<CpuExecutable>();
  if (Error e = exe->build(g, opts))
    return e;
  return std::unique_ptr<Executable>(std::move(exe));
}

} // namespace nnc
