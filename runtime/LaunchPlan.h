// The device-independent part of compiling an executable, shared by the CPU and OpenCL
// runtimes: every node lowered to kernels (the launch list), each kernel parameter bound to a
// slot, and the buffer plan. What a run needs of it (RunPlan) is in the runtime core.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "RunPlan.h"
#include "nnc/ir/Graph.h"
#include "nnc/ir/Kernel.h"
#include "nnc/ir/Tensor.h"
#include "nnc/runtime/Executable.h"

namespace nnc {

/// A launch plan: the run plan and the kernels (kernel-level IR) it launches.
struct LaunchPlan : RunPlan {
  /// Every kernel in launch order.
  std::vector<kir::Kernel> kernels;
  /// How many distinct tunable kernels took a tuned config.
  TuningUse tuningUse;
  /// Per kernel: the graph nodes it computes (their names, or op and result where a node has
  /// none), and its arithmetic work per run where lowering knows it (kir::Kernel::flops, times
  /// the iterations of a loop body's kernel; else 0).
  std::vector<std::vector<std::string>> kernelSources;
  std::vector<double> kernelFlops;
};

/// Builds the launch plan of `g`, whose shapes must all be static; `target` names the target
/// in errors.
///  1. Every value gets a slot: graph inputs and outputs are bound per run, constants become
///     weights, every other node result and every kernel scratch buffer lives in the arena.
///  2. Each non-constant node is lowered (lowerNode) to kernels, in graph order: the launch
///     list. There is no fallback: a node code generation does not support is an error.
///     A loop node (scan) contributes its body's launch plan, built the same way, as a
///     LoopPlan: the body's kernels once in the list, run T times with per-iteration slots.
///  3. Liveness of arena buffers over the launch order (first and last kernel that touches
///     them); a kernel may write a result over an operand that dies there where lowering says
///     it may (kir::BufferDecl::inPlaceOver).
///  4. planBuffers() gives the offsets; arena slots hold them from then on.
/// Tunable kernels take their configs from `tuning` (null: heuristic defaults, which may split
/// the work for `threads`, the threads the CPU kernels will run on: 0 for the host's cores);
/// CPU kernels are lowered for `cpu`, OpenCL kernels for `gpu` (set exactly when the plan is
/// OpenCL's). `loopBody`: `g` is a loop's body, its kernels run once per step
/// (tuning::LowerOptions::loopBody).
Expected<LaunchPlan> buildLaunchPlan(const Graph &g, const char *target,
                                     const tuning::ConfigSource *tuning, const CpuTarget &cpu,
                                     const GpuTarget *gpu = nullptr, int threads = 0,
                                     bool loopBody = false);

} // namespace nnc
