// The CPU launch list: binds the plan's slots to a run's buffers and calls the kernels.
#include "CpuLaunchList.h"

#include <algorithm>
#include <chrono>
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

CpuLaunchList::~CpuLaunchList() = default;

/// An arena is a tensor's storage: from 1 MiB up its own mapping, in transparent huge pages
/// as the weights' (ir/Tensor.cpp). A blocked conv streams 16-32 channel planes at once, each
/// on its own 4 KiB page, so with small pages the planes' TLB entries compete; on 2 MiB pages
/// they share a few (ResNeXt-50's 256-to-128-channel 1x1 convs on 56x56 maps ran clearly
/// faster, while whole models moved within the noise).
Expected<Tensor> CpuLaunchList::takeArena() {
  {
    std::lock_guard<std::mutex> lock(arenaMutex_);
    if (!freeArenas_.empty()) {
      Tensor a = std::move(freeArenas_.back());
      freeArenas_.pop_back();
      return a;
    }
  }
  return Tensor::createUninitialized(DType::U8, {p_.arenaBytes});
}

void CpuLaunchList::giveArena(Tensor a) {
  std::lock_guard<std::mutex> lock(arenaMutex_);
  freeArenas_.push_back(std::move(a));
}

Expected<std::vector<Tensor>> CpuLaunchList::run(const std::vector<Tensor> &inputs,
                                                 std::vector<double> *kernelMs) {
  NNC_TRY(checkRunInputs(p_, inputs));
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, allocateFreshOutputs(p_, outputPool_));
  Expected<Tensor> taken = takeArena();
  NNC_USER_CHECK(taken, "cannot allocate the run's arena of {} bytes: {}", p_.arenaBytes,
                 taken.error().message());
  Tensor arenaStorage = std::move(*taken);
  void *arena = arenaStorage.rawData();
  auto pointer = [&](const Slot &s) -> void * {
    char *base = nullptr;
    switch (s.kind) {
    case SlotKind::Input:
      base = static_cast<char *>(const_cast<void *>(inputs[s.index].rawData()));
      break;
    case SlotKind::Output:
      base = static_cast<char *>(outputs[s.index].rawData());
      break;
    case SlotKind::Weight:
      base = static_cast<char *>(const_cast<void *>(p_.weights[s.index].rawData()));
      break;
    case SlotKind::Arena:
      base = static_cast<char *>(arena) + s.index;
      break;
    }
    return base ? base + s.offset : nullptr;
  };
  std::vector<void *> ptrs(p_.args.size());
  for (size_t a = 0; a < p_.args.size(); ++a) {
    const Slot &s = p_.args[a];
    ptrs[a] = pointer(s);
    // Generated code assumes the buffers it writes are aligned (llvmcg::kBufferAlignment);
    // a loop's step of a sequence is a whole number of steps further.
    NNC_ASSERT(s.kind == SlotKind::Input || s.kind == SlotKind::Weight || s.offset != 0 ||
                   reinterpret_cast<uintptr_t>(ptrs[a]) % kArenaAlignment == 0,
               "buffer {} of the launch plan is not {}-byte aligned", a, kArenaAlignment);
  }
  if (p_.statusBytes > 0)
    std::memset(static_cast<char *>(arena) + p_.statusOffset, 0,
                static_cast<size_t>(p_.statusBytes));
  {
    ThreadPool::Scope scope(pool_);
    NNC_ASSERT(!kernelMs || kernelMs->size() == launches_.size(), "{} kernel times for {} kernels",
               kernelMs ? kernelMs->size() : 0, launches_.size());
    LaunchHooks hooks;
    hooks.launch = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        if (!kernelMs) {
          launches_[i].fn(ptrs.data() + launches_[i].firstArg);
          continue;
        }
        auto t = std::chrono::steady_clock::now();
        launches_[i].fn(ptrs.data() + launches_[i].firstArg);
        (*kernelMs)[i] +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
      }
      return Error::success();
    };
    // A while loop runs until its condition is false; a failed runtime check stops it (its
    // condition may never turn false on the values the failure left).
    hooks.goesOn = [&](const LoopPlan &l, int64_t t, size_t at) -> Expected<bool> {
      if (*static_cast<const uint8_t *>(pointer(l.condition[at])) == 0)
        return false;
      return p_.statusBytes == 0 || t == 0 ||
             !checkStatus(p_.checks, static_cast<const char *>(arena) + p_.statusOffset);
    };
    hooks.bind = [&](size_t arg, const Slot &s) {
      ptrs[arg] = pointer(s);
      return Error::success();
    };
    hooks.copy = [&](const Slot &src, const Slot &dst, int64_t bytes) {
      std::memmove(pointer(dst), pointer(src), static_cast<size_t>(bytes));
      return Error::success();
    };
    if (Error e = runLaunches(p_, hooks)) {
      giveArena(std::move(arenaStorage));
      return e;
    }
  }
  if (p_.statusBytes > 0) {
    if (Error e = checkStatus(p_.checks, static_cast<const char *>(arena) + p_.statusOffset)) {
      giveArena(std::move(arenaStorage));
      return e;
    }
  }
  for (const OutputSpec &o : p_.outputs) {
    if (o.kind != OutputSpec::Dynamic)
      continue;
    int64_t extent;
    std::memcpy(&extent, static_cast<const char *>(arena) + o.extentOffset, sizeof extent);
    Expected<Tensor> t = dynamicOutputTensor(o, extent);
    if (!t) {
      giveArena(std::move(arenaStorage));
      return t.takeError();
    }
    std::memcpy(t->rawData(), static_cast<const char *>(arena) + o.dataOffset, t->byteSize());
    outputs[o.index] = std::move(*t);
  }
  giveArena(std::move(arenaStorage));
  finishOutputs(p_, inputs, outputs);
  return outputs;
}

} // namespace nnc
