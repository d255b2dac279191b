// The CPU code generator: kernel IR -> LLVM IR -> machine code through ORC LLJIT, with an
// on-disk object cache.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nnc/ir/Kernel.h"
#include "nnc/support/KernelAbi.h"

namespace nnc {

struct CodegenOptions {
  /// Folder of the object cache ("" disables it). Default: $NNC_CACHE_DIR or
  /// ~/.cache/nnc/objects.
  std::string cacheDir = defaultObjectCacheDir();
  int optLevel = 3;
  /// What parallel loops call; kernels with a parallel loop fail to compile without it.
  ParallelForFn parallelFor = nullptr;
  static std::string defaultObjectCacheDir();
};

/// A set of kernels compiled into one JIT module and kept alive with it.
class CompiledModule {
public:
  virtual ~CompiledModule() = default;
  /// The entry point of kernel `name`.
  virtual KernelFn lookup(const std::string &name) const = 0;
  /// True when the machine code came from the object cache (no LLVM compile).
  virtual bool fromCache() const = 0;
};

/// The host CPU: name and the features LLVM generates code for (e.g. "skylake-avx512",
/// "+avx512f,..."). Part of the object-cache key.
std::string hostCpuDescription();

/// The size in bytes of the host's data (or unified) cache of `level` (1, 2 or 3) as the
/// kernel reports it for CPU 0 (sysconf's L3 is the whole package's on some virtual
/// machines), else sysconf's, else `fallback`. Read once per level.
int64_t hostCacheBytes(int level, int64_t fallback);

/// Compiles kernels (with their schedules applied) for the host CPU.
Expected<std::unique_ptr<CompiledModule>> compileKernels(const std::vector<kir::Kernel> &kernels,
                                                         const CodegenOptions &opts = {});

/// The optimized LLVM IR, or the host assembly, of the kernels (for `nnc inspect`,
/// `nnc compile --emit`).
Expected<std::string> emitLLVMIR(const std::vector<kir::Kernel> &kernels, bool optimized = true);
Expected<std::string> emitAssembly(const std::vector<kir::Kernel> &kernels);
/// Writes a relocatable object file of the kernels.
Error emitObjectFile(const std::vector<kir::Kernel> &kernels, const std::string &path);

} // namespace nnc
