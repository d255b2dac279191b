// The process symbols bound into every JIT module: the scalar helpers of generated kernels
// (nnc/ir/KernelHelpers.h, defined in ir/ so that libnnc_runtime.so carries them too) and the
// thread pool's parallel_for.
#include "llvm/Emitter.h"
#include "nnc/ir/KernelHelpers.h"

namespace nnc::llvmcg {

std::string storageEncodeHelper(DType t) { return "nnc_f64_to_" + std::string(dtypeName(t)); }
std::string storageDecodeHelper(DType t) { return "nnc_" + std::string(dtypeName(t)) + "_to_f64"; }

std::vector<std::pair<std::string, void *>> processSymbols(ParallelForFn parallelFor) {
  std::vector<std::pair<std::string, void *>> s;
  int count = 0;
  const KernelHelper *helpers = kernelHelpers(&count);
  for (int i = 0; i < count; ++i)
    s.emplace_back(helpers[i].name, helpers[i].address);
  if (parallelFor)
    s.emplace_back(kParallelFor, reinterpret_cast<void *>(parallelFor));
  return s;
}

} // namespace nnc::llvmcg
