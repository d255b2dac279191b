// Executable: the launch plan (LaunchPlan.h: lowering of every node, slots, a planned arena)
// compiled into one JIT module and run on the CPU by the runtime core's CpuLaunchList.
//
// Algorithm (compile):
//  1-3. buildLaunchPlan(): slots, the launch list, liveness and the buffer plan.
//  4. compileKernels() the machine code; its entry points make the CpuLaunchList.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>

#include "CpuLaunchList.h"
#include "LaunchPlan.h"
#include "ThreadPool.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/runtime/Executable.h"

namespace nnc {

namespace {

class CpuExecutable : public Executable {
public:
  Error build(const Graph &g, const CpuOptions &opts);

  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs) override;
  const BufferPlan &plan() const override { return p_.plan; }
  const std::vector<kir::Kernel> &kernels() const override { return p_.kernels; }
  double compileMs() const override { return compileMs_; }
  bool fromCache() const override { return fromCache_; }
  const TuningUse &tuningUse() const override { return p_.tuningUse; }
  bool setProfiling(bool on) override {
    std::lock_guard<std::mutex> lock(profileMutex_);
    profile_ = on;
    if (on) {
      kernelMs_.assign(p_.kernels.size(), 0.0);
      profiledRuns_ = 0;
    }
    return true;
  }
  std::vector<KernelProfile> kernelProfile() const override;
  int64_t profiledRuns() const override {
    std::lock_guard<std::mutex> lock(profileMutex_);
    return profiledRuns_;
  }

  ~CpuExecutable() override {
    if (printProfile_)
      printProfile();
  }

private:
  void printProfile() const;

  LaunchPlan p_;
  std::unique_ptr<CompiledModule> module_;
  /// After module_: its entry points die with the module.
  std::unique_ptr<CpuLaunchList> launches_;
  double compileMs_ = 0;
  bool fromCache_ = false;
  /// setProfiling(), or NNC_DEBUG=profile: time every kernel (with NNC_DEBUG, the totals are
  /// printed when the executable dies).
  std::atomic<bool> profile_{false};
  bool printProfile_ = false;
  mutable std::mutex profileMutex_;
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
    out += fmt::format("  {:10.3f} ms {:5.1f}%  {}  [{}]\n",
                       kernelMs_[order[i]] / double(profiledRuns_),
                       total > 0 ? 100 * kernelMs_[order[i]] / total : 0.0,
                       p_.kernels[order[i]].name, fmt::join(p_.kernelSources[order[i]], ", "));
  std::fputs(out.c_str(), stderr);
}

std::vector<KernelProfile> CpuExecutable::kernelProfile() const {
  std::lock_guard<std::mutex> lock(profileMutex_);
  std::vector<KernelProfile> out;
  for (size_t i = 0; i < p_.kernels.size(); ++i) {
    KernelProfile k;
    k.name = p_.kernels[i].name;
    k.sources = p_.kernelSources[i];
    k.ms = profiledRuns_ > 0 ? kernelMs_[i] / double(profiledRuns_) : 0.0;
    k.flops = p_.kernelFlops[i];
    k.flopsElems = p_.kernels[i].flopsElems;
    for (const kir::BufferDecl &b : p_.kernels[i].buffers)
      k.bytes += b.numElements * static_cast<int64_t>(dtypeSize(b.dtype));
    out.push_back(std::move(k));
  }
  return out;
}

Error CpuExecutable::build(const Graph &g, const CpuOptions &opts) {
  auto start = std::chrono::steady_clock::now();
  PhaseTimer planTime("launch plan (lowering, buffer plan)");
  NNC_ASSIGN_OR_RETURN(p_, buildLaunchPlan(g, "CPU", opts.tuning.get(), opts.codegen.cpu,
                                           nullptr, opts.threads));
  planTime.stop();
  std::vector<KernelFn> fns(p_.kernels.size(), nullptr);

  // 4. Machine code.
  if (!p_.kernels.empty()) {
    CodegenOptions codegen = opts.codegen;
    codegen.parallelFor = &nnc_parallel_for;
    NNC_ASSIGN_OR_RETURN(module_, compileKernels(p_.kernels, codegen));
    fromCache_ = module_->fromCache();
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      fns[i] = module_->lookup(p_.kernels[i].name);
      if (!fns[i])
        return makeError("kernel '{}' is missing from the compiled module", p_.kernels[i].name);
    }
  }
  launches_ = std::make_unique<CpuLaunchList>(
      p_, std::move(fns), opts.threads == 1 ? nullptr : ThreadPool::shared(opts.threads));
  printProfile_ = debugEnabled("profile");
  profile_ = printProfile_;
  kernelMs_.assign(p_.kernels.size(), 0.0);
  compileMs_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Error::success();
}

Expected<std::vector<Tensor>> CpuExecutable::run(const std::vector<Tensor> &inputs) {
  if (!profile_)
    return launches_->run(inputs);
  std::vector<double> ms(p_.kernels.size(), 0.0);
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, launches_->run(inputs, &ms));
  std::lock_guard<std::mutex> lock(profileMutex_);
  for (size_t i = 0; i < ms.size(); ++i)
    kernelMs_[i] += ms[i];
  ++profiledRuns_;
  return outputs;
}

} // namespace

Expected<std::unique_ptr<Executable>> Executable::compile(const Graph &g, const CpuOptions &opts) {
  auto exe = std::make_unique<CpuExecutable>();
  if (Error e = exe->build(g, opts))
    return e;
  return std::unique_ptr<Executable>(std::move(exe));
}

} // namespace nnc
