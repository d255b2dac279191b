// Internal interface of the LLVM code generator: kernel IR -> an LLVM module, the process
// helpers generated code calls, and the host target machine.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nnc/codegen/LLVMCodegen.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace nnc::llvmcg {

/// Emits one function `void name(void** buffers)` per kernel (schedules applied) into a new
/// module whose data layout and triple are `tm`'s (made for `cpu`), with `cpu`'s vector width
/// stated on every function. Unsupported dtypes fail naming the kernel.
Expected<std::unique_ptr<llvm::Module>> emitModule(llvm::LLVMContext &ctx,
                                                   const std::vector<kir::Kernel> &kernels,
                                                   llvm::TargetMachine &tm, const CpuTarget &cpu);

/// Functions of this process that generated code may call, with their addresses: the
/// parallel-for given in CodegenOptions (bound as nnc_parallel_for) and the conversion
/// helpers of MathLib.cpp.
std::vector<std::pair<std::string, void *>> processSymbols(ParallelForFn parallelFor);

/// Names of the MathLib helpers (see MathLib.cpp).
inline constexpr const char *kRoundF64ToF16 = "nnc_round_f64_to_f16";
inline constexpr const char *kRoundF64ToBF16 = "nnc_round_f64_to_bf16";
inline constexpr const char *kParallelFor = "nnc_parallel_for";
/// The runtime's per-thread workspace (nnc/ir/KernelHelpers.h), for perThread scratch.
inline constexpr const char *kWorkspace = "nnc_workspace";
/// Names of the MathLib helpers of the float storage formats (f8*, f4e2m1):
/// `int32 nnc_f64_to_<dtype>(double v, int32 saturate, int32 roundMode)` gives the format's
/// bits (roundMode: fp::E8M0Round, used by f8e8m0 only) and `double nnc_<dtype>_to_f64(int32
/// bits)` the exact value (include/nnc/support/FloatFormats.h).
std::string storageEncodeHelper(DType t);
std::string storageDecodeHelper(DType t);

/// The alignment (bytes) of every buffer a kernel writes, which the runtime guarantees (arena
/// offsets and tensor storage are 64-byte aligned); the emitter tells the optimizer so for
/// streaming results (small buffers of tests and tools may be less aligned).
inline constexpr uint64_t kBufferAlignment = 64;

/// Results of at least CpuTarget::streamingStoreBytes (about the last-level cache) are
/// written with non-temporal stores: they cannot stay in the cache for their reader anyway,
/// and streaming them skips reading each line before writing it. The emitter tags such a
/// result's pointer with kStreamingMetadata.
inline constexpr const char *kStreamingMetadata = "nnc.streaming";

/// After optimization: makes the whole, aligned vector stores through tagged pointers
/// non-temporal and fences them before each return (x86 only). Returns how many.
int markStreamingStores(llvm::Module &m);

/// The object-cache key (hex SHA-1) of a module's unoptimized IR text compiled for `cpu` (the
/// target's description) at `optLevel` by this nnc and LLVM version.
std::string objectCacheKey(const std::string &irText, const std::string &cpu, int optLevel);

} // namespace nnc::llvmcg
