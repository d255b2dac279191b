// The contract between generated kernels and the runtime that launches them: the C ABI of a
// CPU kernel and of its parallel loops, and how an OpenCL kernel is launched. Codegen emits
// to it and the runtime core calls through it, so neither needs the other's headers.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace nnc {

/// Every generated CPU kernel has this C ABI: `buffers[i]` is the data of parameter i.
using KernelFn = void (*)(void **buffers);

/// The body of a parallel loop, outlined: runs iterations [begin, end) with `ctx` holding the
/// enclosing kernel's buffers and loop variables.
using ParallelBodyFn = void (*)(void *ctx, int64_t begin, int64_t end);
/// Runs body over [0, n) (on a thread pool) and returns when done. The runtime provides one
/// (runtime/core/ThreadPool.h); generated code calls it through the symbol `nnc_parallel_for`.
using ParallelForFn = void (*)(ParallelBodyFn body, void *ctx, int64_t n);

/// How one emitted OpenCL kernel is launched. Each kernel parameter i is two OpenCL arguments:
/// a `__global uchar *` base and a `ulong` byte offset into it.
struct OpenCLLaunch {
  std::string name;
  /// NDRange dimensions (1 to 3).
  int dims = 1;
  /// Work-items per dimension (a multiple of localSize when localSize[0] > 0).
  std::array<int64_t, 3> globalSize{1, 1, 1};
  /// Work-group size per dimension; localSize[0] == 0 lets the OpenCL runtime choose.
  std::array<int64_t, 3> localSize{0, 0, 0};
};

} // namespace nnc
