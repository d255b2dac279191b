// A launch list on the CPU: the entry points of compiled kernels (KernelFn), each parameter
// bound per run to an input, an output, a weight or an offset in one arena, run in order with
// their parallel loops on a thread pool. What a compiled CPU model needs at run time.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "RunPlan.h"
#include "ThreadPool.h"
#include "nnc/support/KernelAbi.h"

namespace nnc {

/// run() may be called from several threads at once: each call takes its own arena (arenas
/// are reused across runs, as is the memory of released outputs).
class CpuLaunchList {
public:
  /// `fns[k]` runs kernel k of `plan` (one per plan.numKernels()). `plan` must outlive the
  /// list. With a null `pool`, parallel loops run on the calling thread.
  CpuLaunchList(const RunPlan &plan, std::vector<KernelFn> fns, ThreadPool *pool);
  ~CpuLaunchList();
  CpuLaunchList(const CpuLaunchList &) = delete;
  CpuLaunchList &operator=(const CpuLaunchList &) = delete;

  /// Checks the inputs against the plan, runs every kernel and returns the outputs. With
  /// `kernelMs` (plan.numKernels() long), each kernel's wall time is added to it.
  Expected<std::vector<Tensor>> run(const std::vector<Tensor> &inputs,
                                    std::vector<double> *kernelMs = nullptr);

private:
  struct Launch {
    KernelFn fn = nullptr;
    size_t firstArg = 0; ///< Into plan_.args.
  };
  Expected<Tensor> takeArena();
  void giveArena(Tensor a);

  const RunPlan &p_;
  std::vector<Launch> launches_;
  ThreadPool *pool_;
  std::mutex arenaMutex_;
  std::vector<Tensor> freeArenas_;
  /// The memory of released outputs, for the next run's (two runs' worth kept).
  std::shared_ptr<TensorPool> outputPool_;
};

} // namespace nnc
