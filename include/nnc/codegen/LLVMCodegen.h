// The CPU code generator: kernel IR -> LLVM IR -> machine code through ORC LLJIT, with an
// on-disk object cache.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nnc/ir/CpuTarget.h"
#include "nnc/ir/Kernel.h"
#include "nnc/support/KernelAbi.h"

namespace nnc {

struct CodegenOptions {
  /// No default target: the caller hands down the CPU its target is for.
  explicit CodegenOptions(CpuTarget target) : cpu(std::move(target)) {}
  /// Folder of the object cache ("" disables it). Default: $NNC_CACHE_DIR or
  /// ~/.cache/nnc/objects.
  std::string cacheDir = defaultObjectCacheDir();
  int optLevel = 3;
  /// What parallel loops call; kernels with a parallel loop fail to compile without it.
  ParallelForFn parallelFor = nullptr;
  /// Threads compiling the kernels in parallel (0: as many as the machine has cores). The
  /// machine code does not depend on it.
  int compileThreads = 0;
  /// The CPU the code is for (its level, vector width, streaming-store threshold).
  CpuTarget cpu;
  static std::string defaultObjectCacheDir();
};

/// A set of kernels compiled into one JIT and kept alive with it.
class CompiledModule {
public:
  virtual ~CompiledModule() = default;
  /// The entry point of kernel `name`.
  virtual KernelFn lookup(const std::string &name) const = 0;
  /// True when the machine code came from the object cache (no LLVM compile).
  virtual bool fromCache() const = 0;
};

/// What LLVM generates code for under `cpu`: the target machine's CPU (the level's name) and
/// feature string (the extensions a native target has beyond the level).
std::pair<std::string, std::string> llvmCpuAndFeatures(const CpuTarget &cpu);

/// Compiles kernels (with their schedules applied) for opts.cpu.
Expected<std::unique_ptr<CompiledModule>> compileKernels(const std::vector<kir::Kernel> &kernels,
                                                         const CodegenOptions &opts);

/// The optimized LLVM IR, or the host assembly, of the kernels (for `nnc inspect`,
/// `nnc compile --emit`).
Expected<std::string> emitLLVMIR(const std::vector<kir::Kernel> &kernels, bool optimized,
                                 const CpuTarget &cpu);
Expected<std::string> emitAssembly(const std::vector<kir::Kernel> &kernels, const CpuTarget &cpu);
/// Writes a relocatable object file of the kernels.
Error emitObjectFile(const std::vector<kir::Kernel> &kernels, const std::string &path,
                     const CpuTarget &cpu);

} // namespace nnc
