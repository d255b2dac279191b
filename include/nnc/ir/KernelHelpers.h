// The helpers that generated kernels call where a backend has no exact instruction:
// correctly rounded f64 -> f16/bf16 (one rounding, like the interpreter's Cast) and the
// conversions to and from the float storage formats (f8*, f4e2m1, f8e8m0; FloatFormats.h);
// and each thread's working storage (nnc_workspace).
// Defined once (ir/KernelHelpers.cpp): the JIT binds them into every module
// (codegen/llvm/MathLib.cpp) and libnnc_runtime.so exports them to the ahead-of-time
// artifacts it loads.
#pragma once

#include <cstdint>

extern "C" {
float nnc_round_f64_to_f16(double x);
float nnc_round_f64_to_bf16(double x);
#define NNC_DECLARE_STORAGE_HELPERS(Name)                                                          \
  int32_t nnc_f64_to_##Name(double v, int32_t saturate, int32_t roundMode);                        \
  double nnc_##Name##_to_f64(int32_t bits);
NNC_DECLARE_STORAGE_HELPERS(f8e4m3fn)
NNC_DECLARE_STORAGE_HELPERS(f8e4m3fnuz)
NNC_DECLARE_STORAGE_HELPERS(f8e5m2)
NNC_DECLARE_STORAGE_HELPERS(f8e5m2fnuz)
NNC_DECLARE_STORAGE_HELPERS(f4e2m1)
NNC_DECLARE_STORAGE_HELPERS(f8e8m0)
#undef NNC_DECLARE_STORAGE_HELPERS
/// The calling thread's working storage `slot` (0 <= slot < nnc::kWorkspaceSlots), at least
/// `bytes` long and 64-byte aligned: a kernel's per-thread scratch (kir::BufferDecl::perThread),
/// asked for at the start of the kernel and of each chunk of its parallel loop. It stays the thread's
/// until a later call for the same slot asks for more (which may move it); its contents are
/// whatever the thread left there. Exits the process when memory runs out.
void *nnc_workspace(int64_t slot, int64_t bytes);
}

namespace nnc {
/// How many per-thread scratch buffers (workspace slots) one kernel may have.
inline constexpr int kWorkspaceSlots = 8;
/// Every helper above by name, for binding them into JIT modules.
struct KernelHelper {
  const char *name;
  void *address;
};
const KernelHelper *kernelHelpers(int *count);
} // namespace nnc
