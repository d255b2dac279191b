// The run-time half of a launch plan, shared by the CPU and OpenCL launch lists: where each
// kernel parameter points (a run's input or output, a weight, or an offset in the one planned
// arena), how each output is produced, and the checks and allocations around a run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nnc/ir/Shape.h"
#include "nnc/ir/Tensor.h"
#include "nnc/runtime/BufferPlan.h"
#include "nnc/support/Debug.h"

namespace nnc {

enum class SlotKind : uint8_t { Input, Output, Weight, Arena };

/// Where a kernel parameter points: inputs[index], outputs[index], weights[index], or (Arena)
/// the arena at byte offset `index`; `offset` bytes further (a loop's step of a sequence).
struct Slot {
  SlotKind kind;
  int64_t index;
  int64_t offset = 0;
};

/// A loop node's body in the launch list: launches [firstKernel, firstKernel + numKernels)
/// run `count` times back to back. A loop whose body runs loops holds them: they follow it in
/// RunPlan::loops with ranges inside its own, and run in full in each of its iterations.
/// Most of their parameters point at the same place in every iteration; those that do not (a
/// step of a sequence, a ping-ponged state) are rebound per iteration. After each iteration's
/// launches, `copies` move the body outputs that no kernel writes (an output that is another
/// output, an input or a weight).
///
/// A while loop (count < 0) runs until the bool at condition[phase(t)] is false, tested before
/// each iteration t; its bindings' slots and its copies are indexed by phase(t) (its states
/// ping-pong between two buffers, so iterations 1, 3, ... and 2, 4, ... each look alike), and
/// after the loop, when it stopped before iteration t, `finish` (indexed by phase(t)) moves
/// the final states to the results.
struct LoopPlan {
  size_t firstKernel = 0, numKernels = 0;
  int64_t count = 0;
  /// args[arg] is slots[t] in iteration t (a while loop: slots[phase(t)], `stride` times t
  /// bytes further: its step of a per-step output).
  struct Binding {
    size_t arg;
    std::vector<Slot> slots;
    int64_t stride = 0;
  };
  std::vector<Binding> bindings;
  /// In iteration t, bytes from src[t] to dst[t] (a while loop: at phase(t), src and dst
  /// `srcStride` and `dstStride` times t bytes further).
  struct Copy {
    std::vector<Slot> src, dst;
    int64_t bytes = 0;
    int64_t srcStride = 0, dstStride = 0;
  };
  std::vector<Copy> copies;
  /// A while loop's condition per phase, and its final copies (a phase whose src is dst has
  /// nothing to move).
  std::vector<Slot> condition;
  std::vector<Copy> finish;
  /// A while loop with sequences or per-step outputs: the most steps it runs (their steps and
  /// rows; else -1).
  int64_t maxSteps = -1;
  bool isWhile() const { return count < 0; }
  /// Where iteration t of a while loop indexes its slots: 0 for t = 0, then 1, 2, 1, 2, ...
  static size_t phase(int64_t t) { return t == 0 ? 0 : 1 + static_cast<size_t>((t - 1) % 2); }
};

inline bool sameSlot(const Slot &a, const Slot &b) {
  return a.kind == b.kind && a.index == b.index && a.offset == b.offset;
}

/// How output p of a run is produced.
struct OutputSpec {
  /// Dynamic: a result one of whose dims depends on data (NonZero's last, NonMaxSuppression's
  /// first). Its kernel writes it packed (row-major for the actual extent) into an arena
  /// buffer sized for the largest extent and writes the extent beside it; the run copies it
  /// out once the extent is known.
  enum Kind : uint8_t { Fresh, FromInput, FromWeight, CopyOfOutput, Dynamic } kind;
  int index = 0; ///< Input, weight or earlier output position.
  DType dtype = DType::F32;
  Extents extents; ///< Dynamic: the one unknown extent is -1.
  int64_t dataOffset = -1, extentOffset = -1; ///< Dynamic: in the arena.
  int64_t dataBytes = 0;                      ///< Dynamic: the data buffer's capacity.
};

/// A runtime check of a kernel (kir::RuntimeCheck, an index within its axis): two i64 at
/// byte `offset` of the run's status area, which the run zeroes before the first launch; the
/// kernel writes 1 and the offending value there when the check fails.
struct RunCheck {
  int64_t offset = 0;
  std::string before, after; ///< The error is before + value + after.
};

/// What a launch list needs to run: kernel k's parameters are bound to
/// args[firstArg[k] ...] (one slot per buffer, up to firstArg[k + 1] or the end).
struct RunPlan {
  std::vector<std::string> inputNames;
  std::vector<TensorType> inputTypes;
  std::vector<OutputSpec> outputs;
  std::vector<Tensor> weights;
  std::vector<Slot> args;
  std::vector<size_t> firstArg;
  /// Loops over launch ranges, in launch order; a loop nested in another one's body follows
  /// it, its range inside the other's (ranges are nested or apart, never overlapping).
  std::vector<LoopPlan> loops;
  BufferPlan plan;
  /// The arena's size: the plan's peak rounded up to kArenaAlignment (at least that).
  int64_t arenaBytes = 0;
  /// The kernels' runtime checks, in launch order, and the status area in the arena
  /// (statusBytes 0: no check) that they report to; a run that ends with one failed is an
  /// error (checkStatus).
  std::vector<RunCheck> checks;
  int64_t statusOffset = 0, statusBytes = 0;

  size_t numKernels() const { return firstArg.size(); }
  /// How many buffers kernel k takes.
  size_t numArgs(size_t k) const {
    return (k + 1 < firstArg.size() ? firstArg[k + 1] : args.size()) - firstArg[k];
  }
};

/// What a launch list does for runLaunches: launch kernels [from, to); say whether a while
/// loop goes on to iteration t (its condition at `at` true and no runtime check failed; false
/// stops it); point parameter args[arg] at a slot; move bytes between slots.
struct LaunchHooks {
  std::function<Error(size_t from, size_t to)> launch;
  std::function<Expected<bool>(const LoopPlan &l, int64_t t, size_t at)> goesOn;
  std::function<Error(size_t arg, const Slot &s)> bind;
  std::function<Error(const Slot &src, const Slot &dst, int64_t bytes)> copy;
};

/// Runs the plan's launches in order through `h`: a loop's launches `count` times (a while
/// loop's while goesOn says so), rebinding what moves per iteration and copying the outputs
/// no kernel writes after each, then its final copies; the loops nested in a loop's body run
/// in full in each of its iterations.
Error runLaunches(const RunPlan &p, const LaunchHooks &h);

/// Checks a run's inputs against the plan's input types, but those marked in `skip` (inputs
/// the launch list keeps itself).
Error checkRunInputs(const RunPlan &p, const std::vector<Tensor> &inputs,
                     const std::vector<bool> &skip = {});
/// Allocates the outputs a run's kernels write (OutputSpec::Fresh); others stay null. With a
/// pool they are uninitialized memory from it (the kernels write every element), else zeroed.
Expected<std::vector<Tensor>> allocateFreshOutputs(const RunPlan &p,
                                                   const std::shared_ptr<TensorPool> &pool = {});
/// The (uninitialized) tensor of a Dynamic output whose data-dependent extent the run found
/// to be `extent`; its bytes are then read from the arena at o.dataOffset.
Expected<Tensor> dynamicOutputTensor(const OutputSpec &o, int64_t extent);
/// The error of the first failed check of `checks` (a plan's, in launch order) in `status`,
/// the plan's status area after a run, or success.
Error checkStatus(const std::vector<RunCheck> &checks, const void *status);
/// Fills the outputs that are copies of inputs, weights or earlier outputs.
void finishOutputs(const RunPlan &p, const std::vector<Tensor> &inputs,
                   std::vector<Tensor> &outputs);

} // namespace nnc
