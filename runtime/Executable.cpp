// Executable: the launch plan (LaunchPlan.h: lowering of every node, slots, a planned arena)
// compiled into one JIT module and run on the CPU.
//
// Algorithm (compile):
//  1-3. buildLaunchPlan(): slots, the launch list, liveness and the buffer plan.
//  4. compileKernels() the machine code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>

#include "BufferPlan.h"
#include "LaunchPlan.h"
#include "ThreadPool.h"
#include "nnc/runtime/Executable.h"

namespace nnc {

namespace {

struct Launch {
  KernelFn fn = nullptr;
  size_t firstArg = 0; ///< Into plan_.args.
  size_t numArgs = 0;
};

class CpuExecutable : public Executable {
public:
  Error build(const Graph &g, const CpuOptions &opts);

  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override;
  const BufferPlan &plan() const override { return p_.plan; }
  const std::vector<kir::Kernel> &kernels() const override { return p_.kernels; }
  double compileMs() const override { return compileMs_; }
  bool fromCache() const override { return fromCache_; }
  const TuningUse &tuningUse() const override { return p_.tuningUse; }

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

  LaunchPlan p_;
  std::vector<Launch> launches_;
  std::unique_ptr<CompiledModule> module_;
  ThreadPool *pool_ = nullptr;
  double compileMs_ = 0;
  bool fromCache_ = false;
  std::mutex arenaMutex_;
  std::vector<void *> freeArenas_;
  /// The memory of released outputs, for the next run's (two runs' worth kept).
  std::shared_ptr<TensorPool> outputPool_;
  /// NNC_DEBUG=profile: time every kernel; the totals are printed when the executable dies.
  bool profile_ = false;
  std::mutex profileMutex_;
  std::vector<double> kernelMs_;
  int64_t profiledRuns_ = 0;
};

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
                       p_.kernels[order[i]].name);
  std::fputs(out.c_str(), stderr);
}

Error CpuExecutable::build(const Graph &g, const CpuOptions &opts) {
  auto start = std::chrono::steady_clock::now();
  NNC_ASSIGN_OR_RETURN(p_, buildLaunchPlan(g, "CPU", opts.tuning.get()));
  for (size_t i = 0; i < p_.kernels.size(); ++i)
    launches_.push_back({nullptr, p_.firstArg[i], p_.kernels[i].buffers.size()});

  // 4. Machine code.
  if (!p_.kernels.empty()) {
    CodegenOptions codegen = opts.codegen;
    codegen.parallelFor = &nnc_parallel_for;
    NNC_ASSIGN_OR_RETURN(module_, compileKernels(p_.kernels, codegen));
    fromCache_ = module_->fromCache();
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      launches_[i].fn = module_->lookup(p_.kernels[i].name);
      if (!launches_[i].fn)
        return makeError("kernel '{}' is missing from the compiled module", p_.kernels[i].name);
    }
  }
  pool_ = opts.threads == 1 ? nullptr : ThreadPool::shared(opts.threads);
  outputPool_ = std::make_shared<TensorPool>(2 * std::max<size_t>(1, p_.outputs.size()));
  profile_ = debugEnabled("profile");
  kernelMs_.assign(p_.kernels.size(), 0.0);
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
  return std::aligned_alloc(kArenaAlignment, static_cast<size_t>(p_.arenaBytes));
}

void CpuExecutable::giveArena(void *a) {
  std::lock_guard<std::mutex> lock(arenaMutex_);
  freeArenas_.push_back(a);
}

Expected<std::vector<Tensor>> CpuExecutable::run(const std::vector<Tensor> &inputs) {
  NNC_TRY(checkRunInputs(p_, inputs));
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, allocateFreshOutputs(p_, outputPool_));
  void *arena = takeArena();
  NNC_USER_CHECK(arena, "cannot allocate an arena of {} bytes", p_.arenaBytes);
  std::vector<void *> ptrs(p_.args.size());
  for (size_t a = 0; a < p_.args.size(); ++a) {
    const Slot &s = p_.args[a];
    switch (s.kind) {
    case SlotKind::Input: ptrs[a] = const_cast<void *>(inputs[s.index].rawData()); break;
    case SlotKind::Output: ptrs[a] = outputs[s.index].rawData(); break;
    case SlotKind::Weight: ptrs[a] = p_.weights[s.index].rawData(); break;
    case SlotKind::Arena: ptrs[a] = static_cast<char *>(arena) + s.index; break;
    }
    // Generated code assumes the buffers it writes are aligned (llvmcg::kBufferAlignment).
    NNC_ASSERT(s.kind == SlotKind::Input || s.kind == SlotKind::Weight ||
                   reinterpret_cast<uintptr_t>(ptrs[a]) % kArenaAlignment == 0,
               "buffer {} of the launch plan is not {}-byte aligned", a, kArenaAlignment);
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
  for (const OutputSpec &o : p_.outputs) {
    if (o.kind != OutputSpec::Dynamic)
      continue;
    int64_t extent;
    std::memcpy(&extent, static_cast<const char *>(arena) + o.extentOffset, sizeof extent);
    Expected<Tensor> t = dynamicOutputTensor(o, extent);
    if (!t) {
      giveArena(arena);
      return t.takeError();
    }
    std::memcpy(t->rawData(), static_cast<const char *>(arena) + o.dataOffset, t->byteSize());
    outputs[o.index] = std::move(*t);
  }
  giveArena(arena);
  finishOutputs(p_, inputs, outputs);
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
