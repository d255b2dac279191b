// The CPU launch list: binds the plan's slots to a run's buffers and calls the kernels.
#include "CpuLaunchList.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "BufferPlan.h"

namespace nnc {

CpuLaunchList::CpuLaunchList(const RunPlan &plan, std::vector<KernelFn> fns, ThreadPool *pool)
    : p_(plan), pool_(pool),
      outputPool_(std::make_shared<TensorPool>(2 * std::max<size_t>(1, plan.outputs.size()))) {
  NNC_ASSERT(fns.size() == plan.numKernels(), "{} entry points for {} kernels", fns.size(),
             plan.numKernels());
  for (size_t k = 0; k < fns.size(); ++k) {
    NNC_ASSERT(fns[k], "kernel {} has no entry point", k);
    launches_.push_back({fns[k], plan.firstArg[k]});
  }
}

CpuLaunchList::~CpuLaunchList() {
  for (void *a : freeArenas_)
    std::free(a);
}

void *CpuLaunchList::takeArena() {
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

void CpuLaunchList::giveArena(void *a) {
  std::lock_guard<std::mutex> lock(arenaMutex_);
  freeArenas_.push_back(a);
}

Expected<std::vector<Tensor>> CpuLaunchList::run(const std::vector<Tensor> &inputs,
                                                 std::vector<double> *kernelMs) {
  NNC_TRY(checkRunInputs(p_, inputs));
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, allocateFreshOutputs(p_, outputPool_));
  void *arena = takeArena();
  NNC_USER_CHECK(arena, "cannot allocate an arena of {} bytes", p_.arenaBytes);
  std::vector<void *> ptrs(p_.args.size());
  for (size_t a = 0; a < p_.args.size(); ++a) {
    const Slot &s = p_.args[a];
    switch (s.kind) {
    case SlotKind::Input:
      ptrs[a] = const_cast<void *>(inputs[s.index].rawData());
      break;
    case SlotKind::Output:
      ptrs[a] = outputs[s.index].rawData();
      break;
    case SlotKind::Weight:
      ptrs[a] = const_cast<void *>(p_.weights[s.index].rawData());
      break;
    case SlotKind::Arena:
      ptrs[a] = static_cast<char *>(arena) + s.index;
      break;
    }
    // Generated code assumes the buffers it writes are aligned (llvmcg::kBufferAlignment).
    NNC_ASSERT(s.kind == SlotKind::Input || s.kind == SlotKind::Weight ||
                   reinterpret_cast<uintptr_t>(ptrs[a]) % kArenaAlignment == 0,
               "buffer {} of the launch plan is not {}-byte aligned", a, kArenaAlignment);
  }
  {
    ThreadPool::Scope scope(pool_);
    if (!kernelMs) {
      for (const Launch &l : launches_)
        l.fn(ptrs.data() + l.firstArg);
    } else {
      NNC_ASSERT(kernelMs->size() == launches_.size(), "{} kernel times for {} kernels",
                 kernelMs->size(), launches_.size());
      for (size_t i = 0; i < launches_.size(); ++i) {
        auto t = std::chrono::steady_clock::now();
        launches_[i].fn(ptrs.data() + launches_[i].firstArg);
        (*kernelMs)[i] +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
      }
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

} // namespace nnc
